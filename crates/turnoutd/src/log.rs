//! A small structured logger: one line per event on stderr,
//! `ts level target message key=value…`, with a global level filter.
//!
//! Threading: any thread may log; each event is formatted into one buffer
//! and written with one `write_all` on a locked stderr, so lines never
//! interleave. Control path only: the data path does not log.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Severity of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// Something failed.
    Error = 0,
    /// Something is wrong but the daemon carries on.
    Warn = 1,
    /// Normal life events (start, stop, port added).
    Info = 2,
    /// Details for debugging (every control request).
    Debug = 3,
}

impl Level {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    /// Parses `error|warn|info|debug`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" => Some(Level::Debug),
            _ => None,
        }
    }
}

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets the most verbose level that is printed.
pub fn set_level(l: Level) {
    MAX_LEVEL.store(l as u8, Ordering::Relaxed);
}

/// Whether events at `l` are printed.
pub fn enabled(l: Level) -> bool {
    l as u8 <= MAX_LEVEL.load(Ordering::Relaxed)
}

/// Formats one event line (without the trailing newline).
pub fn format_line(
    ts_ns: u128,
    level: Level,
    target: &str,
    msg: &str,
    kv: &[(&str, &dyn std::fmt::Display)],
) -> String {
    let mut s = String::with_capacity(96);
    let secs = (ts_ns / 1_000_000_000) as i64;
    let ms = (ts_ns / 1_000_000 % 1000) as u32;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let _ = write!(
        s,
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z {:5} {target} {msg}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        level.name()
    );
    for (k, v) in kv {
        let v = v.to_string();
        if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
            let _ = write!(s, " {k}={v:?}");
        } else {
            let _ = write!(s, " {k}={v}");
        }
    }
    s
}

/// Writes one event to stderr if `level` is enabled.
pub fn log(level: Level, target: &str, msg: &str, kv: &[(&str, &dyn std::fmt::Display)]) {
    if !enabled(level) {
        return;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut line = format_line(now, level, target, msg, kv);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `log!(Level::Info, "target", "message", key = value, …)`.
#[macro_export]
macro_rules! log {
    ($lvl:expr, $target:expr, $msg:expr $(, $k:ident = $v:expr)* $(,)?) => {
        if $crate::log::enabled($lvl) {
            $crate::log::log($lvl, $target, &$msg, &[$((stringify!($k), &$v as &dyn std::fmt::Display)),*]);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        // 2024-02-29T12:34:56.789Z
        let ts = (1_709_210_096u128 * 1000 + 789) * 1_000_000;
        let l = format_line(
            ts,
            Level::Info,
            "ctl",
            "port added",
            &[("name", &"vnf0"), ("id", &3), ("why", &"two words")],
        );
        assert_eq!(
            l,
            "2024-02-29T12:34:56.789Z info  ctl port added name=vnf0 id=3 why=\"two words\""
        );
    }

    #[test]
    fn epoch_and_levels() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(Level::parse("debug"), Some(Level::Debug));
        assert_eq!(Level::parse("loud"), None);
        assert!(Level::Error < Level::Debug);
    }
}
