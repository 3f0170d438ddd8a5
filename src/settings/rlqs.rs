//! The quota service's settings (RLQS, `service/rlqs`): how long an assignment lives, when an
//! idle bucket is abandoned, the floor of a share, when a changed share is resent, and how
//! many buckets one stream may hold. Each is a flag with its `SLUICE_RLQS_*` variable; there
//! is no envoyproxy/ratelimit equivalent (they have no RLQS server).

use std::time::Duration;

use clap::Args;

use super::Settings;
use super::parse::{SettingsError, err, parse_duration};

#[derive(Debug, Args)]
pub struct RlqsArgs {
    /// RLQS: lifetime of a quota assignment; keep it above Envoy's `reporting_interval`
    /// (every report extends it) [default: 60s]
    #[arg(long, value_name = "DURATION", env = "SLUICE_RLQS_ASSIGNMENT_TTL")]
    pub rlqs_assignment_ttl: Option<String>,
    /// RLQS: a bucket without requests for this long (reported with none, or not reported)
    /// is abandoned (the Envoy forgets it and re-subscribes on its next hit) [default: 5m]
    #[arg(long, value_name = "DURATION", env = "SLUICE_RLQS_ABANDON_AFTER")]
    pub rlqs_abandon_after: Option<String>,
    /// RLQS: fraction of a limit every subscriber gets whatever its demand, so a quiet Envoy
    /// can start (0 to 0.5) [default: 0.05]
    #[arg(long, value_name = "RATIO", env = "SLUICE_RLQS_MIN_SHARE")]
    pub rlqs_min_share: Option<f64>,
    /// RLQS: relative change of a share below which the assignment an Envoy holds is kept
    /// (and extended) rather than replaced (0 to 1) [default: 0.1]
    #[arg(long, value_name = "RATIO", env = "SLUICE_RLQS_RESEND_THRESHOLD")]
    pub rlqs_resend_threshold: Option<f64>,
    /// RLQS: most buckets one stream (one Envoy) may hold; reports of more get no assignment
    /// (Envoy applies its `no_assignment_behavior`) [default: 10000]
    #[arg(long, value_name = "N", env = "SLUICE_RLQS_MAX_BUCKETS")]
    pub rlqs_max_buckets: Option<usize>,
}

/// The resolved RLQS settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RlqsSettings {
    pub assignment_ttl: Duration,
    pub abandon_after: Duration,
    pub min_share: f64,
    pub resend_threshold: f64,
    pub max_buckets: usize,
}

impl Default for RlqsSettings {
    fn default() -> Self {
        RlqsSettings {
            assignment_ttl: Duration::from_secs(60),
            abandon_after: Duration::from_secs(300),
            min_share: 0.05,
            resend_threshold: 0.1,
            max_buckets: 10_000,
        }
    }
}

pub(super) fn resolve(args: &RlqsArgs, s: &mut Settings) -> Result<(), SettingsError> {
    let r = &mut s.rlqs;
    if let Some(d) = &args.rlqs_assignment_ttl {
        r.assignment_ttl = parse_duration("--rlqs-assignment-ttl", d)?;
        if r.assignment_ttl.is_zero() {
            return Err(err("--rlqs-assignment-ttl", "must be above 0"));
        }
    }
    if let Some(d) = &args.rlqs_abandon_after {
        r.abandon_after = parse_duration("--rlqs-abandon-after", d)?;
        if r.abandon_after.is_zero() {
            return Err(err("--rlqs-abandon-after", "must be above 0"));
        }
    }
    if let Some(m) = args.rlqs_min_share {
        if !(0.0..=0.5).contains(&m) {
            return Err(err(
                "--rlqs-min-share",
                format!("{m} is not within 0 to 0.5"),
            ));
        }
        r.min_share = m;
    }
    if let Some(t) = args.rlqs_resend_threshold {
        if !(0.0..=1.0).contains(&t) {
            return Err(err(
                "--rlqs-resend-threshold",
                format!("{t} is not within 0 to 1"),
            ));
        }
        r.resend_threshold = t;
    }
    if let Some(n) = args.rlqs_max_buckets {
        if n == 0 {
            return Err(err("--rlqs-max-buckets", "must be at least 1"));
        }
        r.max_buckets = n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> RlqsArgs {
        RlqsArgs {
            rlqs_assignment_ttl: None,
            rlqs_abandon_after: None,
            rlqs_min_share: None,
            rlqs_resend_threshold: None,
            rlqs_max_buckets: None,
        }
    }

    #[test]
    fn defaults_and_bounds() {
        let mut s = Settings::default();
        resolve(&args(), &mut s).unwrap();
        assert_eq!(s.rlqs, RlqsSettings::default());
        let a = RlqsArgs {
            rlqs_assignment_ttl: Some("2s".into()),
            rlqs_min_share: Some(0.01),
            ..args()
        };
        resolve(&a, &mut s).unwrap();
        assert_eq!(s.rlqs.assignment_ttl, Duration::from_secs(2));
        assert_eq!(s.rlqs.min_share, 0.01);
        for bad in [
            RlqsArgs {
                rlqs_min_share: Some(0.7),
                ..args()
            },
            RlqsArgs {
                rlqs_assignment_ttl: Some("0".into()),
                ..args()
            },
            RlqsArgs {
                rlqs_max_buckets: Some(0),
                ..args()
            },
        ] {
            let e = resolve(&bad, &mut Settings::default()).unwrap_err();
            assert!(e.name.starts_with("--rlqs-"), "{e}");
        }
    }
}
