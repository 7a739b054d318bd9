//! turnoutd's control socket: one JSON-RPC request line per input through
//! the real dispatcher (`Daemon::handle_line`) of a running switch with
//! two in-process pipe ports. `port.add` and `port.remove` are only parsed
//! and validated (opening arbitrary backends or removing the fixture's
//! ports is not what a fuzzer should do to the host); every other method
//! runs. Invariants: no panic; a request with an id gets exactly one
//! answer, a one-line JSON-RPC 2.0 object echoing the id with either a
//! result or an error with a known code and a message; a notification
//! gets none; the fixture's ports survive every call.
#![no_main]

use std::sync::Arc;

use fabric::{pipe, PipeConfig, PipePeer};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use turnoutd::api::{self, code, Call};
use turnoutd::config::{Config, PortConfig};
use turnoutd::logics::Builtin;
use turnoutd::Daemon;

struct Fixture {
    d: Daemon,
    _peers: Vec<PipePeer>,
}

fn fixture() -> Fixture {
    turnoutd::log::set_level(turnoutd::log::Level::Error);
    let text = "[switch]\ncontrol_socket = \"/nonexistent/unused.sock\"\n[[workers]]\n";
    let cfg = Config::parse_str(text).unwrap();
    let d = Daemon::start(cfg, Arc::new(Builtin)).unwrap();
    let mut peers = Vec::new();
    for name in ["p0", "p1"] {
        let (port, peer) = pipe(
            name,
            PipeConfig {
                queues: 1,
                ring_slots: 64,
                slot_b: 2048,
            },
        )
        .unwrap();
        d.attach(
            name.into(),
            Arc::new(port),
            None,
            json!({"name": name, "kind": "pipe"}),
            None,
        )
        .unwrap();
        peers.push(peer);
    }
    Fixture { d, _peers: peers }
}

thread_local! {
    static F: Fixture = fixture();
}

const CODES: [i32; 8] = [
    code::PARSE_ERROR,
    code::INVALID_REQUEST,
    code::METHOD_NOT_FOUND,
    code::INVALID_PARAMS,
    code::NOT_FOUND,
    code::ALREADY_EXISTS,
    code::REFUSED,
    code::BACKEND,
];

fn check_response(resp: &str, id: Option<&Value>) {
    assert!(!resp.contains('\n'), "one line per response");
    let v: Value = serde_json::from_str(resp).expect("responses are JSON");
    assert_eq!(v["jsonrpc"], "2.0");
    if let Some(id) = id {
        assert_eq!(&v["id"], id, "the id is echoed");
    }
    let (r, e) = (v.get("result"), v.get("error"));
    assert!(r.is_some() != e.is_some(), "result or error: {resp}");
    if let Some(e) = e {
        let c = e["code"].as_i64().expect("error code") as i32;
        assert!(CODES.contains(&c), "known code {c}");
        assert!(!e["message"].as_str().expect("message").is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    F.with(|f| {
        let parsed = api::parse_request(data);
        let req = match parsed {
            Err((id, e)) => {
                check_response(&api::response_err(&id, &e), Some(&id));
                // The dispatcher answers the same.
                let r = f.d.handle_line(data).expect("an unparsable request is answered");
                check_response(&r, None);
                return;
            }
            Ok(r) => r,
        };
        if matches!(req.method.as_str(), "port.add" | "port.remove") {
            if let Ok(Call::PortAdd(v)) = Call::parse(&req.method, req.params.clone()) {
                if let Ok(p) = PortConfig::from_json(&v, "", 1) {
                    let back = PortConfig::from_json(&p.to_json(), "", 1).unwrap();
                    assert_eq!(back.to_json(), p.to_json(), "port JSON round trip");
                }
            }
            return;
        }
        let id = req.id.clone();
        let resp = f.d.handle_line(data);
        match (&id, &resp) {
            (Some(id), Some(r)) => check_response(r, Some(id)),
            (None, None) => {}
            (id, r) => panic!("id {id:?} but response {r:?}"),
        }
        // Every call leaves the fixture's ports; a replaced or commanded
        // logic is put back to a fresh bridge so inputs stay independent.
        let ports = f.d.handle_line(br#"{"jsonrpc":"2.0","id":0,"method":"port.list"}"#).unwrap();
        assert!(ports.contains("\"p0\"") && ports.contains("\"p1\""), "{ports}");
        if req.method.starts_with("logic.") {
            let r = f
                .d
                .handle_line(br#"{"jsonrpc":"2.0","id":0,"method":"logic.replace","params":{"name":"bridge"}}"#)
                .unwrap();
            assert!(r.contains("\"result\""), "{r}");
        }
    });
});
