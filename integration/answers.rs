//! The answers an operator looks for first, where the troubleshooting page
//! (`docs/how-to/troubleshoot.md`) says they are: an unknown domain named in the log, each
//! decision at debug level in words, the Redis address in connection errors, why
//! `/healthcheck` fails, which of `--config` and `RUNTIME_*` names the rules, metric labels
//! beside the rule they count, `detailed_metric` where it cannot apply, the accepted
//! boolean forms, every response field from `sluice query --json`, and the local decisions
//! published with the degraded state. One file per answer.

use crate::support::in_process::*;
use crate::support::sluice::*;

mod booleans;
mod config_source;
mod debug_line;
mod detailed_metric;
mod label_dots;
mod local_decisions;
mod query_json;
mod redis_address;
mod unknown_domain;

/// A rule file with one limited key, `k`, 2 per hour.
const RULES: &str = r#"
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 2}
"#;
