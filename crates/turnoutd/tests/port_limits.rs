//! One limit, one message: a port value out of range is refused with the
//! same words by turnoutd's config file, its `port.add` API call and
//! turnout-gen's compact port spec, because all three parse into the
//! `ports` crate's config structs and run the same `validate`. The values
//! at the edge of each range are accepted by all three.

use std::sync::Arc;

use serde_json::{json, Value};
use turnout_gen::spec::PortSpec as GenSpec;
use turnoutd::config::Config;
use turnoutd::logics::Builtin;
use turnoutd::Daemon;

/// One value: the TOML keys and JSON of a `[[ports]]` table (after name),
/// turnout-gen's spelling, and the message all three give.
struct Case {
    toml: &'static str,
    json: Value,
    gen: &'static str,
    want: &'static str,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            toml: "kind = \"memif\"\nsocket = \"/s\"\nbuffer_size = 63",
            json: json!({"kind": "memif", "socket": "/s", "buffer_size": 63}),
            gen: "memif:/s,buf-size=63",
            want: "buffer_size: 63 not in 64..=65535",
        },
        Case {
            toml: "kind = \"memif\"\nsocket = \"/s\"\nqueues = 257",
            json: json!({"kind": "memif", "socket": "/s", "queues": 257}),
            gen: "memif:/s,rings=257",
            want: "queues: 257 not in 1..=256",
        },
        Case {
            toml: "kind = \"memif\"\nsocket = \"/s\"\nring_size = 1000",
            json: json!({"kind": "memif", "socket": "/s", "ring_size": 1000}),
            gen: "memif:/s,ring-size=1000",
            want: "ring_size: 1000 is not a power of two in 2..=16384",
        },
        Case {
            toml: "kind = \"memif\"\nsocket = \"/s\"\nsecret = \"012345678901234567890123\"",
            json: json!({"kind": "memif", "socket": "/s", "secret": "012345678901234567890123"}),
            gen: "memif:/s,secret=012345678901234567890123",
            want: "secret: 24 bytes long, at most 23 (no NUL)",
        },
        Case {
            toml: "kind = \"memif\"\nsocket = \"/s\"\nring_size = 2\nmax_frame_b = 9000",
            json: json!({"kind": "memif", "socket": "/s", "ring_size": 2, "max_frame_b": 9000}),
            gen: "memif:/s,ring-size=2,max_frame_b=9000",
            want: "max_frame_b: 9000 needs 5 buffers of 2048 B, more than the ring's 2 or 256",
        },
        Case {
            toml: "kind = \"af_xdp\"\niface = \"v0\"\nqueues = 65",
            json: json!({"kind": "af_xdp", "iface": "v0", "queues": 65}),
            gen: "afxdp:v0,queues=65",
            want: "queues: 65 not in 1..=64",
        },
        Case {
            toml: "kind = \"af_xdp\"\niface = \"v0\"\nframe_size_b = 3000",
            json: json!({"kind": "af_xdp", "iface": "v0", "frame_size_b": 3000}),
            gen: "afxdp:v0,frame_size_b=3000",
            want: "frame_size_b: 3000 is not 2048 or 4096",
        },
        Case {
            toml: "kind = \"af_packet\"\niface = \"v0\"\ntx_frames = 1000",
            json: json!({"kind": "af_packet", "iface": "v0", "tx_frames": 1000}),
            gen: "afpacket:v0,tx_frames=1000",
            want: "tx_frames: 1000 is not a power of two in 8..=2147483648",
        },
        Case {
            toml: "kind = \"af_packet\"\niface = \"averyveryverylongname\"",
            json: json!({"kind": "af_packet", "iface": "averyveryverylongname"}),
            gen: "afpacket:averyveryverylongname",
            want: "iface: \"averyveryverylongname\" is not a valid interface name",
        },
    ]
}

fn daemon() -> Daemon {
    turnoutd::log::set_level(turnoutd::log::Level::Warn);
    let text = "[switch]\ncontrol_socket = \"/nonexistent/unused.sock\"\n[[workers]]\n";
    Daemon::start(Config::parse_str(text).unwrap(), Arc::new(Builtin))
        .unwrap_or_else(|e| panic!("start: {e}"))
}

/// `port.add` through the full JSON-RPC path; the error message.
fn port_add(d: &Daemon, mut params: Value) -> String {
    params["name"] = json!("p");
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "port.add", "params": params});
    let resp: Value = serde_json::from_str(
        &d.handle_line(line.to_string().as_bytes())
            .expect("a response"),
    )
    .unwrap();
    resp["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("port.add {params} did not fail: {resp}"))
        .to_string()
}

#[test]
fn config_api_and_gen_refuse_a_value_with_the_same_message() {
    let d = daemon();
    for c in cases() {
        let file = Config::parse_str(&format!("[[ports]]\nname = \"p\"\n{}\n", c.toml))
            .expect_err(c.toml)
            .to_string();
        let api = port_add(&d, c.json.clone());
        let gen = c.gen.parse::<GenSpec>().expect_err(c.gen);
        assert!(
            file.starts_with(&format!("config: ports[0].{}", c.want)),
            "config file, {}:\n got: {file}\nwant: {}",
            c.toml,
            c.want
        );
        assert!(
            api.starts_with(c.want),
            "port.add {}:\n got: {api}\nwant: {}",
            c.json,
            c.want
        );
        assert!(
            gen.starts_with(c.want),
            "turnout-gen {}:\n got: {gen}\nwant: {}",
            c.gen,
            c.want
        );
    }
    d.shutdown();
}

#[test]
fn the_edges_of_each_range_are_accepted_everywhere() {
    for (toml, gen) in [
        (
            "kind = \"memif\"\nsocket = \"/s\"\nbuffer_size = 64\nqueues = 256\nring_size = 16384",
            "memif:/s,buf-size=64,rings=256,ring-size=16384",
        ),
        (
            "kind = \"memif\"\nsocket = \"/s\"\nbuffer_size = 65535\nring_size = 2\nsecret = \"01234567890123456789012\"",
            "memif:/s,buf-size=65535,ring-size=2,secret=01234567890123456789012",
        ),
        (
            "kind = \"af_xdp\"\niface = \"v0\"\nqueues = 64\nframe_size_b = 4096",
            "afxdp:v0,queues=64,frame_size_b=4096",
        ),
        (
            "kind = \"af_packet\"\niface = \"a23456789012345\"\ntx_frames = 8",
            "afpacket:a23456789012345,tx_frames=8",
        ),
    ] {
        Config::parse_str(&format!("[[ports]]\nname = \"p\"\n{toml}\n"))
            .unwrap_or_else(|e| panic!("{toml}: {e}"));
        gen.parse::<GenSpec>()
            .unwrap_or_else(|e| panic!("{gen}: {e}"));
    }
}
