//! Consistency and the store-failure fallback: the default `consistency` of every rule,
//! the batch interval, what happens when the store cannot answer, and the bounds of the
//! local view both rest on (`docs/how-to/choose-consistency.md`).

use std::time::Duration;

use super::decl::Setting;
use super::declare::settings;
use super::resolver::Value;
use super::values::{one_of, positive, ratio};
use crate::limit::Consistency;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StoreFailureMode {
    /// A store error is the call's error (gRPC UNAVAILABLE; Envoy's failure_mode_deny decides).
    #[default]
    Error,
    /// Decide from the local view while the store cannot answer; write the hits back later.
    Local,
}

impl Value for StoreFailureMode {}
impl Value for Consistency {}

fn consistency(s: &str) -> Result<Consistency, String> {
    let names = [
        ("strict", Consistency::Strict),
        ("batched", Consistency::Batched),
    ];
    one_of(s, &names).ok_or_else(|| format!("'{s}' is not strict or batched"))
}

fn store_failure_mode(s: &str) -> Result<StoreFailureMode, String> {
    let names = [
        ("error", StoreFailureMode::Error),
        ("local", StoreFailureMode::Local),
    ];
    one_of(s, &names).ok_or_else(|| format!("'{s}' is not error or local"))
}

fn batch_interval(s: &str) -> Result<Duration, String> {
    let i = super::values::duration(s)?;
    if i < Duration::from_millis(1) || i > Duration::from_secs(60) {
        return Err("must be between 1ms and 60s".into());
    }
    Ok(i)
}

settings! {
    /// Consistency and the store-failure fallback, resolved.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ConsistencySettings {
        /// Consistency of every rule that does not set `consistency` (where sound: never
        /// sliding_log): strict (every hit decided by the store) or batched
        pub default: Consistency = setting(
            Setting::value("consistency", "MODE", consistency)
                .values(&["strict", "batched"])
                .default("strict")
                .see("[Consistency](../how-to/choose-consistency.md)")
        ),
        /// Batched mode: how often this instance's hits are written to the store (1ms to 60s)
        pub batch_interval: Duration = setting(
            Setting::value("batch-interval", "DURATION", batch_interval).default("100ms")
        ),
        /// When the store fails or misses its deadline: error (the call fails, as theirs) or
        /// local (decide from the local view, write the hits back when it returns)
        pub store_failure_mode: StoreFailureMode = setting(
            Setting::value("store-failure-mode", "MODE", store_failure_mode)
                .values(&["error", "local"])
                .default("error")
        ),
        /// Store-failure fallback: the share of a limit a key never seen by this instance
        /// gets while the store is down, 0 to 1
        pub store_failure_share: f64 = setting(
            Setting::value("store-failure-share", "RATIO", ratio).default("0.5")
        ),
        /// Most descriptors the local view keeps in all (state and hits not yet written back);
        /// past it, hits of new descriptors admitted during an outage are not kept (logged,
        /// `sluice_local_view_overflow_total`)
        pub local_view_max_keys: usize = setting(
            Setting::value("local-view-max-keys", "N", positive)
                .default("100000")
                .shown_default("100 000")
        ),
        /// Report NOT_SERVING while decisions are local because the store failed
        pub unhealthy_when_degraded: bool = setting(Setting::switch("unhealthy-when-degraded")),
    }
}

impl ConsistencySettings {
    /// Whether anything local can happen: a batched default, or the fallback. Rules may
    /// still ask for `batched` themselves.
    pub fn local_fallback(&self) -> bool {
        self.store_failure_mode == StoreFailureMode::Local
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Error, Settings};

    fn serve(args: &[&str]) -> Result<Settings, Error> {
        Settings::resolve(args, &|_| None)
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
            serve(&["--consistency=eventual"]).is_err(),
            "unknown consistency"
        );
    }
}
