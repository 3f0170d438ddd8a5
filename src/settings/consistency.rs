//! Consistency and the store-failure fallback: the default `consistency` of every rule,
//! the batch interval, what happens when the store cannot answer, and the bounds of the
//! local view both rest on (README, "Consistency: strict, batched, and the store-failure
//! fallback").

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::Settings;
use super::parse::{SettingsError, err, parse_duration};
use crate::limit::Consistency;

/// Default of `--batch-interval`.
pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_millis(100);
/// Default of `--store-failure-share`.
pub const DEFAULT_STORE_FAILURE_SHARE: f64 = 0.5;
/// Default of `--local-view-max-keys`.
pub const DEFAULT_LOCAL_VIEW_MAX_KEYS: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum StoreFailureMode {
    /// A store error is the call's error (gRPC UNAVAILABLE; Envoy's failure_mode_deny decides).
    #[default]
    Error,
    /// Decide from the local view while the store cannot answer; write the hits back later.
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ConsistencyArg {
    Strict,
    Batched,
}

#[derive(Debug, Args)]
pub struct ConsistencyArgs {
    /// Consistency of every rule that does not set `consistency` (where sound: never
    /// sliding_log): strict (every hit decided by the store) or batched [default: strict]
    #[arg(long, value_enum, env = "SLUICE_CONSISTENCY")]
    pub consistency: Option<ConsistencyArg>,
    /// Batched mode: how often this instance's hits go to the store [default: 100ms]
    #[arg(long, value_name = "DURATION", env = "SLUICE_BATCH_INTERVAL")]
    pub batch_interval: Option<String>,
    /// When the store fails or misses its deadline: error (the call fails) or local (decide
    /// from the local view, write the hits back when it returns) [default: error]
    #[arg(long, value_enum, env = "SLUICE_STORE_FAILURE_MODE")]
    pub store_failure_mode: Option<StoreFailureMode>,
    /// Store-failure fallback: the share of a limit a key never seen by this instance gets
    /// while the store is down, 0 to 1 [default: 0.5]
    #[arg(long, value_name = "RATIO", env = "SLUICE_STORE_FAILURE_SHARE")]
    pub store_failure_share: Option<f64>,
    /// Most descriptors the local view keeps (state and hits not yet written back); past it,
    /// hits of new descriptors are not kept (logged and counted) [default: 100000]
    #[arg(long, value_name = "N", env = "SLUICE_LOCAL_VIEW_MAX_KEYS")]
    pub local_view_max_keys: Option<usize>,
    /// Report NOT_SERVING while decisions are local because the store failed
    /// [default: false]
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "SLUICE_UNHEALTHY_WHEN_DEGRADED")]
    pub unhealthy_when_degraded: Option<bool>,
}

/// Resolved [`ConsistencyArgs`].
#[derive(Clone, Debug, PartialEq)]
pub struct ConsistencySettings {
    pub default: Consistency,
    pub batch_interval: Duration,
    pub store_failure_mode: StoreFailureMode,
    pub store_failure_share: f64,
    pub local_view_max_keys: usize,
    pub unhealthy_when_degraded: bool,
}

impl Default for ConsistencySettings {
    fn default() -> Self {
        ConsistencySettings {
            default: Consistency::Strict,
            batch_interval: DEFAULT_BATCH_INTERVAL,
            store_failure_mode: StoreFailureMode::Error,
            store_failure_share: DEFAULT_STORE_FAILURE_SHARE,
            local_view_max_keys: DEFAULT_LOCAL_VIEW_MAX_KEYS,
            unhealthy_when_degraded: false,
        }
    }
}

impl ConsistencySettings {
    /// Whether anything local can happen: a batched default, or the fallback. Rules may
    /// still ask for `batched` themselves.
    pub fn local_fallback(&self) -> bool {
        self.store_failure_mode == StoreFailureMode::Local
    }
}

pub(super) fn resolve(args: &ConsistencyArgs, s: &mut Settings) -> Result<(), SettingsError> {
    let c = &mut s.consistency;
    if let Some(d) = args.consistency {
        c.default = match d {
            ConsistencyArg::Strict => Consistency::Strict,
            ConsistencyArg::Batched => Consistency::Batched,
        };
    }
    if let Some(i) = &args.batch_interval {
        let i = parse_duration("--batch-interval", i)?;
        if i < Duration::from_millis(1) || i > Duration::from_secs(60) {
            return Err(err("--batch-interval", "must be between 1ms and 60s"));
        }
        c.batch_interval = i;
    }
    if let Some(m) = args.store_failure_mode {
        c.store_failure_mode = m;
    }
    if let Some(share) = args.store_failure_share {
        if !(0.0..=1.0).contains(&share) {
            return Err(err("--store-failure-share", "must be between 0 and 1"));
        }
        c.store_failure_share = share;
    }
    if let Some(n) = args.local_view_max_keys {
        if n == 0 {
            return Err(err("--local-view-max-keys", "must be at least 1"));
        }
        c.local_view_max_keys = n;
    }
    if let Some(u) = args.unhealthy_when_degraded {
        c.unhealthy_when_degraded = u;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::settings::{Cli, Command};

    fn serve(args: &[&str]) -> Result<Settings, SettingsError> {
        let argv = [&["sluice", "serve"], args].concat();
        let Command::Serve(a) = Cli::try_parse_from(argv).expect("parses").command else {
            panic!("serve");
        };
        Settings::resolve(&a, &|_| None)
    }

    #[test]
    fn defaults_keep_todays_behaviour() {
        let s = serve(&[]).expect("defaults");
        assert_eq!(s.consistency, ConsistencySettings::default());
        assert_eq!(s.consistency.default, Consistency::Strict);
        assert_eq!(s.consistency.batch_interval, Duration::from_millis(100));
        assert_eq!(s.consistency.store_failure_mode, StoreFailureMode::Error);
    }

    #[test]
    fn flags_are_read_and_checked() {
        let s = serve(&[
            "--consistency=batched",
            "--batch-interval=250ms",
            "--store-failure-mode=local",
            "--store-failure-share=0.25",
            "--local-view-max-keys=10",
            "--unhealthy-when-degraded",
        ])
        .expect("valid");
        let c = &s.consistency;
        assert_eq!(c.default, Consistency::Batched);
        assert_eq!(c.batch_interval, Duration::from_millis(250));
        assert_eq!(c.store_failure_mode, StoreFailureMode::Local);
        assert_eq!(c.store_failure_share, 0.25);
        assert_eq!(c.local_view_max_keys, 10);
        assert!(c.unhealthy_when_degraded);
        for bad in [
            "--batch-interval=0",
            "--batch-interval=lots",
            "--store-failure-share=1.5",
            "--local-view-max-keys=0",
        ] {
            assert!(serve(&[bad]).is_err(), "{bad}");
        }
        assert!(
            Cli::try_parse_from(["sluice", "serve", "--consistency=eventual"]).is_err(),
            "unknown consistency"
        );
    }
}
