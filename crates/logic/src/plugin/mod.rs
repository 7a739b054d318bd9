//! `plugin`: a switching logic in a shared library with the small, versioned
//! C ABI of include/turnout_logic.h (mSwitch's loadable modules).
//!
//! Configuration: `{"path": "/usr/lib/turnout/libip_low8.so", "config": "base=0"}`.
//! The library is refused, with an error naming the cause, if it cannot be
//! loaded, lacks one of the four symbols, reports another ABI version, or
//! its init rejects the config string. The fabric keeps the running logic
//! when a constructor fails.
//!
//! `classify` copies the batch's frame views into a `tl_pkt` array on the
//! stack (chunks of 256, no allocation) and makes one call per chunk.
//! Verdicts the library gets wrong are counted, not trusted: an unknown
//! kind or port 65535 and above is `Drop(NoPort)`, an unknown drop reason
//! `Drop(Policy)`. All FFI lives in `sys.rs`.

#[allow(unsafe_code)]
mod sys;

use std::ffi::CString;

use serde_json::{json, Value};

use crate::args::Args;
use crate::{CommandError, Ctx, DropReason, Logic, LogicError, Pkts, PortId, Verdict};
use sys::{Plugin, TlPkt, TlVerdict};

pub use sys::ABI_VERSION;

const CHUNK: usize = 256;
const UNSET: TlVerdict = TlVerdict {
    kind: u32::MAX,
    arg: 0,
};

/// A loaded plug-in logic.
pub struct PluginLogic {
    plugin: Plugin,
    path: String,
    config: String,
}

/// Table constructor.
pub fn new(config: &Value) -> Result<Box<dyn Logic>, LogicError> {
    Ok(Box::new(PluginLogic::from_config(config)?))
}

impl PluginLogic {
    /// Loads the library named by `{"path": ..., "config": ...}`.
    pub fn from_config(config: &Value) -> Result<PluginLogic, LogicError> {
        let a =
            Args::new("plugin config", config, &["path", "config"]).map_err(LogicError::Config)?;
        let path = a
            .str("path")
            .and_then(|v| a.required("path", v))
            .map_err(LogicError::Config)?;
        let conf = a.str("config").map_err(LogicError::Config)?.unwrap_or("");
        let c = CString::new(conf)
            .map_err(|_| LogicError::Config(a.err("config", "must not contain a nul byte")))?;
        let plugin = Plugin::load(path, &c)
            .map_err(|e| LogicError::Plugin(format!("plugin {path}: {e}")))?;
        Ok(PluginLogic {
            plugin,
            path: path.to_string(),
            config: conf.to_string(),
        })
    }
}

#[inline]
fn verdict(v: TlVerdict) -> Verdict {
    match v.kind {
        sys::TL_PORT if v.arg < u16::MAX as u32 => Verdict::Port(v.arg as PortId),
        sys::TL_FLOOD => Verdict::Flood,
        sys::TL_DROP => Verdict::Drop(
            DropReason::ALL
                .get(v.arg as usize)
                .copied()
                .unwrap_or(DropReason::Policy),
        ),
        _ => Verdict::Drop(DropReason::NoPort),
    }
}

impl Logic for PluginLogic {
    fn name(&self) -> &'static str {
        "plugin"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let mut tp = [TlPkt::EMPTY; CHUNK];
        let mut tv = [UNSET; CHUNK];
        for (pc, vc) in pkts.chunks_mut(CHUNK).zip(verdicts.chunks_mut(CHUNK)) {
            let n = pc.len();
            for (t, mut p) in tp.iter_mut().zip(pc.iter_mut()) {
                let (port, queue) = (p.port(), p.queue());
                let d = p.data_mut();
                *t = TlPkt {
                    data: d.as_mut_ptr(),
                    len: d.len() as u32,
                    port,
                    queue,
                };
            }
            tv[..n].fill(UNSET);
            self.plugin.classify(ingress, &tp[..n], &mut tv[..n]);
            for (v, t) in vc.iter_mut().zip(tv.iter()) {
                *v = verdict(*t);
            }
        }
    }

    fn command(&self, cmd: &str, args: &Value) -> Result<Value, CommandError> {
        match cmd {
            "info" => {
                Args::new("plugin info", args, &[]).map_err(CommandError)?;
                Ok(json!({"path": self.path, "config": self.config, "abi_version": ABI_VERSION}))
            }
            _ => Err(CommandError(format!("logic plugin has no command {cmd:?}"))),
        }
    }

    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "info",
            "the library path, its config string and the abi version",
        )]
    }
}

/// The table's example configuration: the sample plug-in
/// plugins/ip_low8.c compiled into `dir` (needs `cc`).
pub fn example(dir: &std::path::Path) -> Result<serde_json::Value, String> {
    let so = build::cc_shared(&build::repo_dir("plugins/ip_low8.c"), dir, "libip_low8.so")?;
    Ok(serde_json::json!({"path": so.to_string_lossy()}))
}

/// Compiles the plug-ins' C sources into shared libraries (the table's
/// example configuration above; this module's tests).
mod build {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// The repository's directory `sub` (plugins/, include/, target/).
    pub fn repo_dir(sub: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(sub)
    }

    /// Compiles C source `src` into `dir/name` with `cc -shared -fPIC`.
    pub fn cc_shared(src: &Path, dir: &Path, name: &str) -> Result<PathBuf, String> {
        let out = dir.join(name);
        let r = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I"])
            .arg(repo_dir("include"))
            .arg("-o")
            .arg(&out)
            .arg(src)
            .output()
            .map_err(|e| format!("cannot run cc (install gcc): {e}"))?;
        if !r.status.success() {
            return Err(format!(
                "cc failed on {}: {}",
                src.display(),
                String::from_utf8_lossy(&r.stderr)
            ));
        }
        Ok(out)
    }

    /// Writes `code` to `dir/name.c` and compiles it into `dir/lib<name>.so`.
    #[cfg(test)]
    pub fn cc_source(code: &str, dir: &Path, name: &str) -> Result<PathBuf, String> {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, code).map_err(|e| e.to_string())?;
        cc_shared(&src, dir, &format!("lib{name}.so"))
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;
    use crate::testutil::{classify1, eth, random_frames, udp4, Batch};
    use proptest::prelude::*;
    use std::sync::OnceLock;
    use testpeers::TempDir;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// ip_low8 built once for the whole test binary. It must outlive every
    /// test (a static is never dropped), so it lives in the build's target
    /// directory, not in a temporary directory that would be left behind:
    /// compiled under this process's name, then renamed into place (a
    /// concurrent run keeps the file it loaded).
    fn ip_low8() -> &'static str {
        static LIB: OnceLock<String> = OnceLock::new();
        LIB.get_or_init(|| {
            let dir = repo_dir("target/test-plugins");
            std::fs::create_dir_all(&dir).unwrap();
            let tmp = format!("libip_low8.so.{}", std::process::id());
            let so = cc_shared(&repo_dir("plugins/ip_low8.c"), &dir, &tmp).unwrap();
            let dst = dir.join("libip_low8.so");
            std::fs::rename(&so, &dst).unwrap();
            dst.to_str().unwrap().to_string()
        })
    }

    fn load(config: &str) -> Result<PluginLogic, LogicError> {
        PluginLogic::from_config(&json!({"path": ip_low8(), "config": config}))
    }

    #[test]
    fn ip_low8_picks_the_low_byte_of_the_destination() {
        let p = load("").unwrap();
        assert_eq!(
            classify1(&p, 0, 0, &udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 3], 1, 2)),
            Verdict::Port(3)
        );
        assert_eq!(
            classify1(
                &p,
                0,
                0,
                &udp4(A, B, [10, 0, 0, 1], [192, 168, 1, 200], 1, 2)
            ),
            Verdict::Port(200)
        );
        // VLAN-tagged, base offset.
        let p = load("base=100").unwrap();
        let mut f = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 7], 1, 2);
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(classify1(&p, 0, 0, &f), Verdict::Port(107));
        // Not IPv4 / too short for IPv4.
        assert_eq!(
            classify1(&p, 0, 0, &eth(A, B, 0x0806)),
            Verdict::Drop(DropReason::NoMatch)
        );
        let f = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 7], 1, 2);
        assert_eq!(
            classify1(&p, 0, 0, &f[..30]),
            Verdict::Drop(DropReason::Malformed)
        );
        assert_eq!(
            p.command("info", &Value::Null).unwrap()["config"],
            "base=100"
        );
    }

    #[test]
    fn batches_larger_than_a_chunk() {
        let p = load("").unwrap();
        let frames: Vec<Vec<u8>> = (0..600u32)
            .map(|i| udp4(A, B, [10, 0, 0, 1], [10, 0, 0, (i % 250) as u8], 1, 2))
            .collect();
        let v = Batch::new(frames).classify(&p, 9, 0);
        for (i, v) in v.iter().enumerate() {
            assert_eq!(*v, Verdict::Port((i % 250) as PortId));
        }
    }

    #[test]
    fn init_refusal_is_reported() {
        let e = load("bogus").err().unwrap().to_string();
        assert_eq!(
            e,
            format!(
                "plugin {}: init refused the config: ip_low8: expected \"base=N\", got \"bogus\"",
                ip_low8()
            )
        );
        let e = load("base=70000").err().unwrap().to_string();
        assert!(
            e.ends_with("ip_low8: base must be an integer in 0..65279"),
            "{e}"
        );
    }

    const GOOD_PARTS: [&str; 4] = [
        "uint32_t turnout_logic_abi_version(void) { return VERSION; }",
        "void *turnout_logic_init(const char *c, char *e, uint32_t l) { (void)c; (void)e; (void)l; static int s; return &s; }",
        "void turnout_logic_classify(void *s, uint16_t i, const struct tl_pkt *p, uint32_t n, struct tl_verdict *o) \
         { (void)s; (void)p; for (uint32_t k = 0; k < n; k++) { o[k].kind = KIND; o[k].arg = ARG + i; } }",
        "void turnout_logic_destroy(void *s) { (void)s; }",
    ];

    fn library(
        dir: &TempDir,
        name: &str,
        version: u32,
        skip: Option<usize>,
        kind: u32,
        arg: u32,
    ) -> String {
        let mut code = format!("#include \"turnout_logic.h\"\n#define VERSION {version}u\n#define KIND {kind}u\n#define ARG {arg}u\n");
        for (i, part) in GOOD_PARTS.iter().enumerate() {
            if Some(i) != skip {
                code.push_str(part);
                code.push('\n');
            }
        }
        cc_source(&code, &dir.0, name)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn wrong_abi_version_is_refused() {
        let d = TempDir::new("logic-plugin");
        let lib = library(&d, "v999", 999, None, 0, 0);
        let e = PluginLogic::from_config(&json!({"path": lib}))
            .err()
            .unwrap();
        assert_eq!(
            e,
            LogicError::Plugin(format!(
                "plugin {lib}: abi version 999, this turnoutd supports 1"
            ))
        );
    }

    #[test]
    fn missing_symbols_are_refused() {
        let d = TempDir::new("logic-plugin");
        let names = [
            "turnout_logic_abi_version",
            "turnout_logic_init",
            "turnout_logic_classify",
            "turnout_logic_destroy",
        ];
        for (i, name) in names.iter().enumerate() {
            let lib = library(&d, &format!("missing{i}"), 1, Some(i), 0, 0);
            let e = crate::build("plugin", &json!({"path": lib}))
                .err()
                .unwrap()
                .to_string();
            assert_eq!(e, format!("plugin {lib}: missing symbol {name}"));
        }
    }

    #[test]
    fn unloadable_and_bad_config() {
        let e = crate::build("plugin", &json!({"path": "/nonexistent/libx.so"}))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("plugin /nonexistent/libx.so: cannot load: "),
            "{e}"
        );
        let e = crate::build("plugin", &json!({}))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(e, "plugin config: missing key \"path\"");
        let e = crate::build("plugin", &json!({"path": ip_low8(), "config": "a\u{0}b"}))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "plugin config: key \"config\" must not contain a nul byte"
        );
    }

    #[test]
    fn bad_verdicts_are_counted_not_trusted() {
        let d = TempDir::new("logic-plugin");
        let f = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        let check = |name: &str, kind: u32, arg: u32, want: Verdict| {
            let lib = library(&d, name, 1, None, kind, arg);
            let p = PluginLogic::from_config(&json!({"path": lib})).unwrap();
            assert_eq!(classify1(&p, 0, 0, &f), want, "{name}");
        };
        check("port", 0, 4, Verdict::Port(4));
        check("flood", 1, 0, Verdict::Flood);
        check("drop_spoofed", 2, 9, Verdict::Drop(DropReason::Spoofed));
        check("drop_unknown", 2, 77, Verdict::Drop(DropReason::Policy));
        check("port_too_big", 0, 65535, Verdict::Drop(DropReason::NoPort));
        check("bad_kind", 7, 0, Verdict::Drop(DropReason::NoPort));
    }

    proptest! {
        #[test]
        fn never_panics(frames in random_frames(), ingress in 0u16..4) {
            let p = load("").unwrap();
            let v = Batch::new(frames.clone()).classify(&p, ingress, 0);
            prop_assert_eq!(v.len(), frames.len());
        }
    }
}
