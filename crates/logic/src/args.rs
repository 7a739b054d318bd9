//! Reading JSON configurations and command arguments with errors that name
//! the bad key (control path only).

use serde_json::{Map, Value};

use crate::PortId;

/// Highest valid port id (65535 is the fabric's "no port").
pub const MAX_PORT: u64 = u16::MAX as u64 - 1;

/// A JSON object whose keys were checked against a list.
pub struct Args<'a> {
    what: &'a str,
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Args<'a> {
    /// Views `v` (an object, or `null` for "no keys") as the arguments of
    /// `what` (e.g. "bridge config", "bridge add"), refusing keys not in
    /// `allowed`.
    pub fn new(what: &'a str, v: &'a Value, allowed: &[&str]) -> Result<Args<'a>, String> {
        let map = match v {
            Value::Null => None,
            Value::Object(m) => Some(m),
            _ => return Err(format!("{what}: expected a json object, got {}", kind(v))),
        };
        if let Some(m) = map {
            for k in m.keys() {
                if !allowed.contains(&k.as_str()) {
                    return Err(format!(
                        "{what}: unknown key {k:?} (expected one of: {})",
                        allowed.join(", ")
                    ));
                }
            }
        }
        Ok(Args { what, map })
    }

    /// The raw value of `key`, if present and not null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    /// Error for `key`.
    pub fn err(&self, key: &str, msg: &str) -> String {
        format!("{}: key {key:?} {msg}", self.what)
    }

    /// `key` is required.
    pub fn required<T>(&self, key: &str, v: Option<T>) -> Result<T, String> {
        v.ok_or_else(|| format!("{}: missing key {key:?}", self.what))
    }

    /// An integer in `min..=max`.
    pub fn u64(&self, key: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(self.err(
                    key,
                    &format!("must be an integer in {min}..={max}, got {v}"),
                )),
            },
        }
    }

    /// A port id.
    pub fn port(&self, key: &str) -> Result<Option<PortId>, String> {
        Ok(self.u64(key, 0, MAX_PORT)?.map(|n| n as PortId))
    }

    /// A boolean.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.err(key, &format!("must be true or false, got {v}"))),
        }
    }

    /// A string.
    pub fn str(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.err(key, &format!("must be a string, got {v}"))),
        }
    }

    /// An array.
    pub fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.err(key, &format!("must be an array, got {v}"))),
        }
    }
}

/// A short name for the JSON type of `v`.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// "udp" / "tcp" to the IP protocol number.
pub fn proto(a: &Args<'_>, key: &str) -> Result<Option<u8>, String> {
    match a.str(key)? {
        None => Ok(None),
        Some("udp") => Ok(Some(wire::ipv4::proto::UDP)),
        Some("tcp") => Ok(Some(wire::ipv4::proto::TCP)),
        Some(s) => Err(a.err(key, &format!("must be \"udp\" or \"tcp\", got {s:?}"))),
    }
}

/// The name of IP protocol `p` ("udp", "tcp").
pub fn proto_name(p: u8) -> &'static str {
    match p {
        wire::ipv4::proto::UDP => "udp",
        wire::ipv4::proto::TCP => "tcp",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_key() {
        let v = json!({"aging_s": -1, "x": 1});
        assert_eq!(
            Args::new("bridge config", &v, &["aging_s"]).err().unwrap(),
            "bridge config: unknown key \"x\" (expected one of: aging_s)"
        );
        let v = json!({"aging_s": -1});
        let a = Args::new("bridge config", &v, &["aging_s"]).unwrap();
        assert_eq!(
            a.u64("aging_s", 0, 10).unwrap_err(),
            "bridge config: key \"aging_s\" must be an integer in 0..=10, got -1"
        );
        assert_eq!(
            Args::new("x", &json!([1]), &[]).err().unwrap(),
            "x: expected a json object, got an array"
        );
        let v = json!({"p": 65535});
        assert!(Args::new("x", &v, &["p"])
            .unwrap()
            .port("p")
            .unwrap_err()
            .contains("0..=65534"));
        let v = json!({"proto": "icmp"});
        assert!(proto(&Args::new("x", &v, &["proto"]).unwrap(), "proto")
            .unwrap_err()
            .contains("\"udp\" or \"tcp\""));
    }
}
