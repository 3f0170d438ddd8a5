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
