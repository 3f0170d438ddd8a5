//! The heavy hitters' settings (`top`, `/top`): the window a reading covers, the counters
//! kept per summary (0 turns them off), and how many descriptors per domain the Prometheus
//! view exports. envoyproxy/ratelimit has no such feature, so none has a variable of theirs.

use std::time::Duration;

use super::decl::Setting;
use super::declare::settings;
use super::values::{duration, number};

/// A window of at least two seconds (two halves of at least a second each).
fn window(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < Duration::from_secs(2) {
        return Err("must be at least 2s".into());
    }
    Ok(d)
}

settings! {
    /// The resolved heavy-hitter settings.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TopSettings {
        /// Heavy hitters (`/top`, `sluice top`): the window a reading covers at most; it is
        /// kept as two halves, so a reading covers between half of it and all of it
        pub window: Duration = setting(
            Setting::value("top-window", "DURATION", window).default("60s")
        ),
        /// Heavy hitters: counters per summary (per domain, two summaries per half window,
        /// so 4 × N counters of at most 1 KiB each); counts are within (hits in the window)
        /// ÷ N of the truth; 0 turns heavy hitters off
        pub capacity: usize = setting(
            Setting::value("top-capacity", "N", number)
                .default("1000")
                .shown_default("1 000")
                .see("[Who is being limited](../how-to/troubleshoot.md#who-is-being-limited)")
        ),
        /// Heavy hitters: descriptors per domain exported as `sluice_top_*` gauges on
        /// /metrics (the heaviest by hits and by denials); 0 exports none
        pub metrics: usize = setting(
            Setting::value("top-metrics", "N", number).default("10")
        ),
    }
}
