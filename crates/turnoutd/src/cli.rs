//! The command line (docs/turnoutd.md, "Running"), parsed with clap as
//! turnout-gen's is: `--config FILE` runs the switch, `--check-config FILE`
//! validates a config and exits, `--version` and `--help` print and exit 0.
//! A bad command line is an error naming the argument, with the usage,
//! and exit code 2 (the code of a bad config too).

use std::path::PathBuf;
use std::sync::OnceLock;

use clap::builder::PossibleValue;
use clap::{ArgGroup, Args, CommandFactory, FromArgMatches, Parser, ValueEnum};

use crate::log::Level;

const AFTER_HELP: &str = "\
Exit codes: 0 stopped by SIGINT/SIGTERM, or --check-config found the config good;
  1 a valid config that cannot be brought up (an interface that does not exist, a
  socket in use); 2 a bad command line or a bad config (the message names the key).
Every config key and the control API: docs/turnoutd.md.";

/// turnoutd: the turnout software switch.
#[derive(Parser, Debug, Clone, PartialEq, Eq)]
#[command(name = "turnoutd", about, long_about = None, after_help = AFTER_HELP)]
// The same option given twice: the last one counts.
#[command(args_override_self = true)]
pub struct Cli {
    /// What to do with the config file: run or check it.
    #[command(flatten)]
    pub mode: ModeArgs,
    /// The most verbose log level printed on stderr.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: LogLevel,
}

/// `--config` or `--check-config`, exactly one of them.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
#[command(group(ArgGroup::new("mode").required(true).args(["config", "check_config"])))]
pub struct ModeArgs {
    /// Run the switch with this config file (TOML), in the foreground.
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Validate this config file and exit (0 good, 2 bad); opens nothing.
    #[arg(long, value_name = "FILE")]
    pub check_config: Option<PathBuf>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Run the switch with this config.
    Run(PathBuf),
    /// Validate this config and exit.
    Check(PathBuf),
}

impl Cli {
    /// Parses the process's arguments; on `--help`, `--version` or a bad
    /// command line, prints and exits (0, 0, 2).
    pub fn parse_or_exit() -> Cli {
        Cli::parse_from_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the first is the program name).
    pub fn parse_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = Cli::command().version(version());
        let m = cmd.try_get_matches_from_mut(args)?;
        Cli::from_arg_matches(&m).map_err(|e| e.format(&mut cmd))
    }

    /// Run or check, and which file.
    pub fn mode(&self) -> Mode {
        match (&self.mode.config, &self.mode.check_config) {
            (_, Some(p)) => Mode::Check(p.clone()),
            (Some(p), None) => Mode::Run(p.clone()),
            // the required group holds one of them
            (None, None) => unreachable!("clap requires --config or --check-config"),
        }
    }
}

/// What `--version` prints after the name: the crate version, the control
/// API's version and the git commit (`turnoutd 0.1.0 (api 1, git 1234abcd)`).
pub fn version() -> &'static str {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        format!(
            "{} (api {}, git {})",
            env!("CARGO_PKG_VERSION"),
            crate::api::API_VERSION,
            crate::daemon::GIT
        )
    })
}

/// `--log-level`: a [`Level`] as the command line spells it (`warning` is
/// accepted for `warn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLevel(pub Level);

impl ValueEnum for LogLevel {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            LogLevel(Level::Error),
            LogLevel(Level::Warn),
            LogLevel(Level::Info),
            LogLevel(Level::Debug),
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let v = PossibleValue::new(self.0.name());
        Some(match self.0 {
            Level::Warn => v.alias("warning"),
            _ => v,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::parse_from_args(std::iter::once("turnoutd").chain(args.iter().copied()))
    }

    fn err(args: &[&str]) -> (ErrorKind, String) {
        let e = parse(args).expect_err("should be refused");
        (e.kind(), e.render().to_string())
    }

    #[test]
    fn the_documented_command_lines() {
        let c = parse(&["--config", "a.toml"]).unwrap();
        assert_eq!(c.mode(), Mode::Run("a.toml".into()));
        assert_eq!(c.log_level, LogLevel(Level::Info));
        for args in [
            &["-c", "a.toml", "--log-level", "debug"][..],
            &["--config=a.toml", "--log-level=debug"],
            &["--log-level", "debug", "-c", "a.toml"],
        ] {
            let c = parse(args).unwrap();
            assert_eq!(c.mode(), Mode::Run("a.toml".into()), "{args:?}");
            assert_eq!(c.log_level, LogLevel(Level::Debug), "{args:?}");
        }
        let c = parse(&["--check-config", "b.toml"]).unwrap();
        assert_eq!(c.mode(), Mode::Check("b.toml".into()));
        let c = parse(&["--check-config=b.toml"]).unwrap();
        assert_eq!(c.mode(), Mode::Check("b.toml".into()));
        for (v, l) in [
            ("error", Level::Error),
            ("warn", Level::Warn),
            ("warning", Level::Warn),
            ("info", Level::Info),
            ("debug", Level::Debug),
        ] {
            let c = parse(&["-c", "a", "--log-level", v]).unwrap();
            assert_eq!(c.log_level, LogLevel(l), "{v}");
        }
        // given twice: the last one counts, as before clap
        let c = parse(&[
            "-c",
            "a",
            "-c",
            "b",
            "--log-level",
            "warn",
            "--log-level=error",
        ])
        .unwrap();
        assert_eq!(c.mode(), Mode::Run("b".into()));
        assert_eq!(c.log_level, LogLevel(Level::Error));
    }

    #[test]
    fn a_bad_command_line_names_what_is_wrong() {
        let (k, m) = err(&[]);
        assert_eq!(k, ErrorKind::MissingRequiredArgument);
        assert!(m.contains("--config <FILE>|--check-config <FILE>"), "{m}");
        let (k, m) = err(&["--log-level", "debug"]);
        assert_eq!(k, ErrorKind::MissingRequiredArgument, "{m}");
        let (k, m) = err(&["--config"]);
        assert_eq!(k, ErrorKind::InvalidValue, "{m}");
        assert!(m.contains("--config <FILE>"), "{m}");
        let (k, m) = err(&["-c", "a", "--log-level", "loud"]);
        assert_eq!(k, ErrorKind::InvalidValue);
        assert!(m.contains("'loud'"), "{m}");
        assert!(m.contains("error, warn, info, debug"), "{m}");
        let (k, m) = err(&["-c", "a", "--verbose"]);
        assert_eq!(k, ErrorKind::UnknownArgument);
        assert!(m.contains("'--verbose'"), "{m}");
        let (k, m) = err(&["-c", "a", "extra"]);
        assert_eq!(k, ErrorKind::UnknownArgument);
        assert!(m.contains("'extra'"), "{m}");
        // run or check, not both
        let (k, m) = err(&["-c", "a", "--check-config", "b"]);
        assert_eq!(k, ErrorKind::ArgumentConflict);
        assert!(m.contains("cannot be used with"), "{m}");
        assert_eq!(parse(&["--verbose"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn help_and_version() {
        let e = parse(&["--help"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        assert_eq!(e.exit_code(), 0);
        let h = e.render().to_string();
        for s in [
            "--config <FILE>",
            "--check-config <FILE>",
            "--log-level <LEVEL>",
            "Exit codes",
        ] {
            assert!(h.contains(s), "{s} not in\n{h}");
        }
        let e = parse(&["-h"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        for v in ["--version", "-V"] {
            let e = parse(&[v]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DisplayVersion);
            assert_eq!(e.exit_code(), 0);
            let out = e.render().to_string();
            assert_eq!(
                out.trim_end(),
                format!(
                    "turnoutd {} (api {}, git {})",
                    env!("CARGO_PKG_VERSION"),
                    crate::api::API_VERSION,
                    crate::daemon::GIT
                )
            );
        }
    }
}
