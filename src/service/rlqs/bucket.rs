//! A `BucketId` as a descriptor, and the protocol's assignment messages.
//!
//! Envoy 1.40 reads only the whole seconds of an assignment's TTL (1.5 s lives 1 s, 0.8 s
//! expires at once), so a TTL is sent rounded up to whole seconds; 0 stays 0 (the drain's
//! "expire now").
//!
//! A `BucketId` is a map, so its order is not the Envoy's: its entries become descriptor
//! entries **sorted by key** (byte order), so `{name: api, tier: gold}` is the descriptor
//! `name=api,tier=gold` and matches a rule tree of `name` then `tier`. Write RLQS rules with
//! their keys nested in sorted order.

use std::collections::HashMap;

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    self, AbandonAction, QuotaAssignmentAction,
};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

use crate::quota::{Assignment, Decision};
use crate::service::proto::Entry;

/// A bucket's entries as a descriptor: sorted by key.
pub fn bucket_descriptor(bucket: &HashMap<String, String>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = bucket
        .iter()
        .map(|(k, v)| Entry {
            key: k.as_bytes().to_vec(),
            value: v.as_bytes().to_vec(),
        })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

fn duration(ms: u64) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(ms / 1000).unwrap_or(i64::MAX),
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

/// A TTL as Envoy reads it: whole seconds, rounded up.
fn ttl(ms: u64) -> PbDuration {
    duration(ms.div_ceil(1000).saturating_mul(1000))
}

/// The strategy of an assignment.
fn strategy(a: Assignment) -> RateLimitStrategy {
    let strategy = match a {
        Assignment::AllowAll => Strategy::BlanketRule(BlanketRule::AllowAll as i32),
        Assignment::DenyAll => Strategy::BlanketRule(BlanketRule::DenyAll as i32),
        Assignment::TokenBucket {
            tokens,
            burst,
            fill_interval_ms,
        } => Strategy::TokenBucket(TokenBucket {
            max_tokens: burst,
            tokens_per_fill: Some(UInt32Value { value: tokens }),
            fill_interval: Some(duration(fill_interval_ms)),
        }),
    };
    RateLimitStrategy {
        strategy: Some(strategy),
    }
}

/// A quota assignment for `id`.
pub(super) fn assign(id: &BucketId, d: Decision) -> BucketAction {
    BucketAction {
        bucket_id: Some(id.clone()),
        bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
            QuotaAssignmentAction {
                assignment_time_to_live: Some(ttl(d.ttl_ms)),
                rate_limit_strategy: Some(strategy(d.assignment)),
            },
        )),
    }
}

/// Tell the Envoy to forget `id` (it re-subscribes on its next hit).
pub(super) fn abandon(id: &BucketId) -> BucketAction {
    BucketAction {
        bucket_id: Some(id.clone()),
        bucket_action: Some(bucket_action::BucketAction::AbandonAction(AbandonAction {})),
    }
}

/// The metrics label of an assignment.
pub(super) fn action_name(a: Assignment) -> &'static str {
    match a {
        Assignment::AllowAll => "allow_all",
        Assignment::DenyAll => "deny_all",
        Assignment::TokenBucket { .. } => "token_bucket",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sorted_by_key() {
        let m = HashMap::from([
            ("tier".to_owned(), "gold".to_owned()),
            ("name".to_owned(), "api".to_owned()),
        ]);
        let d = bucket_descriptor(&m);
        assert_eq!(d[0].key, b"name");
        assert_eq!(d[1].value, b"gold");
    }

    #[test]
    fn token_bucket_strategy() {
        let s = strategy(Assignment::TokenBucket {
            tokens: 7,
            burst: 2,
            fill_interval_ms: 1_500,
        });
        let Some(Strategy::TokenBucket(t)) = s.strategy else {
            panic!("{s:?}")
        };
        assert_eq!(t.max_tokens, 2);
        assert_eq!(t.tokens_per_fill, Some(UInt32Value { value: 7 }));
        assert_eq!(
            t.fill_interval,
            Some(PbDuration {
                seconds: 1,
                nanos: 500_000_000
            })
        );
    }

    #[test]
    fn a_ttl_is_whole_seconds_rounded_up() {
        assert_eq!(
            ttl(0),
            PbDuration {
                seconds: 0,
                nanos: 0
            }
        );
        assert_eq!(
            ttl(1),
            PbDuration {
                seconds: 1,
                nanos: 0
            }
        );
        assert_eq!(
            ttl(1_500),
            PbDuration {
                seconds: 2,
                nanos: 0
            }
        );
        assert_eq!(
            ttl(60_000),
            PbDuration {
                seconds: 60,
                nanos: 0
            }
        );
    }
}
