//! The quota service's settings (RLQS, `service/rlqs`): how long an assignment lives, when an
//! idle bucket is abandoned, the floor of a share, when a changed share is resent, and how
//! many buckets one stream may hold. envoyproxy/ratelimit has no RLQS server, so none has
//! a variable of the reference's.

use std::time::Duration;

use super::decl::Setting;
use super::declare::settings;
use super::values::{positive, positive_duration, ratio};

/// A share's floor: 0 to 0.5 (above, two subscribers could not both get theirs).
fn min_share(s: &str) -> Result<f64, String> {
    let m: f64 = super::values::number(s)?;
    if !(0.0..=0.5).contains(&m) {
        return Err(format!("{m} is not within 0 to 0.5"));
    }
    Ok(m)
}

settings! {
    /// The resolved RLQS settings.
    #[derive(Clone, Debug, PartialEq)]
    pub struct RlqsSettings {
        /// RLQS: lifetime of a quota assignment; keep it above Envoy's `reporting_interval`
        /// (every report extends it)
        pub assignment_ttl: Duration = setting(
            Setting::value("rlqs-assignment-ttl", "DURATION", positive_duration)
                .default("60s")
                .see("[RLQS](../how-to/rlqs.md)")
        ),
        /// RLQS: a bucket without requests for this long (reported with none, or not
        /// reported) is abandoned (the Envoy forgets it and re-subscribes on its next hit)
        pub abandon_after: Duration = setting(
            Setting::value("rlqs-abandon-after", "DURATION", positive_duration).default("5m")
        ),
        /// RLQS: the least fraction of a limit a subscriber gets, whatever its demand, so a
        /// quiet Envoy can start; all a new one gets until its demand is known (0 to 0.5)
        pub min_share: f64 = setting(
            Setting::value("rlqs-min-share", "RATIO", min_share).default("0.05")
        ),
        /// RLQS: relative change of a share below which the assignment an Envoy holds is
        /// kept (and extended) rather than replaced (0 to 1)
        pub resend_threshold: f64 = setting(
            Setting::value("rlqs-resend-threshold", "RATIO", ratio).default("0.1")
        ),
        /// RLQS: most buckets one stream (one Envoy) may hold; reports of more get no
        /// assignment (Envoy applies its `no_assignment_behavior`)
        pub max_buckets: usize = setting(
            Setting::value("rlqs-max-buckets", "N", positive)
                .default("10000")
                .shown_default("10 000")
        ),
    }
}
