//! The log's level and format: sluice's names, and theirs (logrus levels, `LOG_FORMAT`).

use super::resolver::Value;
use super::values::one_of;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl Value for LogFormat {}

pub(super) fn log_format(s: &str) -> Result<LogFormat, String> {
    let names = [("text", LogFormat::Text), ("json", LogFormat::Json)];
    one_of(s, &names).ok_or_else(|| format!("'{}' is not text or json", s.trim()))
}

/// A level as `tracing` names it; their logrus levels above error mean error.
pub(super) fn log_level(level: &str) -> Result<String, String> {
    let l = level.trim().to_ascii_lowercase();
    Ok(match l.as_str() {
        "trace" | "debug" | "info" | "error" => l,
        "warn" | "warning" => "warn".into(),
        "fatal" | "panic" => "error".into(),
        _ => {
            return Err(format!(
                "'{level}' is not one of trace, debug, info, warn, error"
            ));
        }
    })
}

/// Whether text logs carry terminal colours: only when they go to a terminal, and never
/// with `NO_COLOR` set to anything non-empty (<https://no-color.org>). Written to a file, a
/// pipe or a container's log stream, escape codes are garbage to whoever reads them.
pub fn log_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::log_colour;

    #[test]
    fn colour_only_on_a_terminal_and_never_under_no_color() {
        assert!(log_colour(true, None));
        assert!(!log_colour(false, None));
        assert!(!log_colour(true, Some(OsStr::new("1"))));
        assert!(!log_colour(false, Some(OsStr::new("1"))));
        // The convention: set and empty counts as unset.
        assert!(log_colour(true, Some(OsStr::new(""))));
    }
}
