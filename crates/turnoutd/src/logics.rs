//! Building logics for the daemon: a factory over the `logic` crate's table
//! (replaceable in tests), and the translation of port *names* in logic
//! configs and command arguments into the port ids the logics take.
//!
//! Translation rule: under the keys [`port_keys`] lists for the logic (at
//! any depth), a string is a port name and becomes that port's id; an
//! unknown name is an error naming the key. Integers are left alone (ids
//! are accepted too). Nothing else is touched, so a string elsewhere (a
//! plug-in's config string, an l4filter's L4 `port`) stays as it is.

use fabric::PortId;
use logic::Built;
use serde_json::{Map, Value};

/// Keys whose values name switch ports, in the configs and command
/// arguments of logic `logic`: the `port_keys` of its line in the `logic`
/// crate's table (none for a name not in it).
pub fn port_keys(logic: &str) -> &'static [&'static str] {
    logic::find(logic).map_or(&[], |e| e.port_keys)
}

/// Commands of logic `logic` whose arguments get `ports`, the switch's
/// port ids, unless they give it: the `port_ids_for` of its line in the
/// `logic` crate's table (none for a name not in it).
pub fn port_ids_for(logic: &str) -> &'static [&'static str] {
    logic::find(logic).map_or(&[], |e| e.port_ids_for)
}

/// Why a logic could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// No logic of that name; the message lists the known ones.
    Unknown(String),
    /// The logic refused its configuration (or its library).
    Refused(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Unknown(m) | BuildError::Refused(m) => f.write_str(m),
        }
    }
}

/// Builds logics by name from a JSON config whose port names are already
/// translated to ids, each with the control-plane services its table
/// entry offers ([`logic::Services`]).
pub trait LogicFactory: Send + Sync {
    /// Builds logic `name`; `params` is the `[logic]` table without `name`
    /// (`null` when empty).
    fn build(&self, name: &str, params: &Value) -> Result<Built, BuildError>;
}

/// The logics of the `logic` crate's table.
pub struct Builtin;

impl LogicFactory for Builtin {
    fn build(&self, name: &str, params: &Value) -> Result<Built, BuildError> {
        logic::build_with_services(name, params).map_err(|e| match e {
            logic::LogicError::UnknownLogic(_) => BuildError::Unknown(e.to_string()),
            other => BuildError::Refused(other.to_string()),
        })
    }
}

/// Replaces port names under `keys` (see [`port_keys`]) with ids; `what`
/// prefixes errors.
pub fn resolve_ports(
    v: &Value,
    keys: &[&str],
    lookup: &dyn Fn(&str) -> Option<PortId>,
    what: &str,
) -> Result<Value, String> {
    type Lookup<'a> = &'a dyn Fn(&str) -> Option<PortId>;
    /// Inside a port key: strings are port names.
    fn names(v: &Value, keys: &[&str], lookup: Lookup<'_>, path: &str) -> Result<Value, String> {
        match v {
            Value::String(s) => lookup(s)
                .map(Value::from)
                .ok_or_else(|| format!("{path}: no port named {s:?}")),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, x)| names(x, keys, lookup, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()
                .map(Value::Array),
            other => any(other, keys, lookup, path),
        }
    }
    /// Elsewhere: only look for port keys.
    fn any(v: &Value, keys: &[&str], lookup: Lookup<'_>, path: &str) -> Result<Value, String> {
        match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    let y = if keys.contains(&k.as_str()) {
                        names(x, keys, lookup, &p)?
                    } else {
                        any(x, keys, lookup, &p)?
                    };
                    out.insert(k.clone(), y);
                }
                Ok(Value::Object(out))
            }
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, x)| any(x, keys, lookup, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()
                .map(Value::Array),
            other => Ok(other.clone()),
        }
    }
    any(v, keys, lookup, "").map_err(|e| format!("{what}.{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lookup(s: &str) -> Option<PortId> {
        match s {
            "vnf0" => Some(0),
            "vnf1" => Some(1),
            _ => None,
        }
    }

    #[test]
    fn names_become_ids_only_under_port_keys() {
        let v = json!({"pairs": [["vnf0", "vnf1"], [2, "vnf0"]], "config": "vnf0"});
        let r = resolve_ports(&v, port_keys("patch"), &lookup, "logic").unwrap();
        assert_eq!(r, json!({"pairs": [[0, 1], [2, 0]], "config": "vnf0"}));
        let v = json!({"rules": [{"port": 53, "proto": "udp", "to": "vnf1"}], "uplink": "vnf0"});
        let r = resolve_ports(&v, port_keys("l4filter"), &lookup, "logic").unwrap();
        assert_eq!(
            r,
            json!({"rules": [{"port": 53, "proto": "udp", "to": 1}], "uplink": 0})
        );
        // l4filter's "port" is an L4 port: a string there is left for the logic to refuse.
        let v = json!({"port": "vnf0"});
        assert_eq!(
            resolve_ports(&v, port_keys("l4filter"), &lookup, "args").unwrap(),
            v
        );
        assert_eq!(
            resolve_ports(&v, port_keys("plugin"), &lookup, "args").unwrap(),
            v
        );
        assert_eq!(
            resolve_ports(&json!({"to": "nope"}), port_keys("patch"), &lookup, "logic")
                .unwrap_err(),
            "logic.to: no port named \"nope\""
        );
        assert_eq!(
            resolve_ports(
                &json!({"pairs": [["vnf0", "x"]]}),
                port_keys("patch"),
                &lookup,
                "logic"
            )
            .unwrap_err(),
            "logic.pairs[0][1]: no port named \"x\""
        );
        assert_eq!(
            resolve_ports(&Value::Null, port_keys("patch"), &lookup, "args").unwrap(),
            Value::Null
        );
    }
}
