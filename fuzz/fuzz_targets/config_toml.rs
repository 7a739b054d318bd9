//! turnoutd's configuration file (TOML) as `--check-config` and start-up
//! read it: never a panic; an error names a reason; an accepted config's
//! ports and logic survive the JSON round trip the control API uses
//! (`config.show` then `port.add` / `logic.replace` give the same thing),
//! and its port names are unique and valid.
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnoutd::config::{validate_port_name, Config, LogicConfig, PortConfig};
use turnoutd::logics::Builtin;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::parse_str(text) {
        Ok(cfg) => {
            assert!(!cfg.workers.is_empty(), "at least one worker");
            let j = cfg.to_json();
            assert!(j.is_object());
            let line = j.to_string();
            assert!(!line.contains('\n'), "config.show is one line");
            for (i, p) in cfg.ports.iter().enumerate() {
                validate_port_name(&p.name).expect("accepted names are valid");
                assert!(
                    cfg.ports[..i].iter().all(|q| q.name != p.name),
                    "port names are unique"
                );
                let back = PortConfig::from_json(&p.to_json(), "", cfg.workers.len())
                    .expect("a port's JSON is accepted back");
                // config.show writes the defaults out: what it shows is
                // accepted back and shows the same.
                assert_eq!(back.to_json(), p.to_json(), "port JSON round trip");
            }
            let l = LogicConfig::from_json(&cfg.logic.to_json(), "logic").expect("logic JSON");
            assert_eq!(l, cfg.logic);
            let _ = cfg.switch_config();
            if let Err(e) = turnoutd::daemon::check_config(&cfg, &Builtin) {
                assert!(!e.message.is_empty());
            }
        }
        Err(e) => assert!(!e.message.is_empty(), "every error has a reason"),
    }
});
