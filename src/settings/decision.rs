//! What every request's decision reads: the modes (shadow, quota, stop-increment), the
//! near-limit threshold, the response's headers (to the client and to the upstream) and
//! metadata, and the bounds of one request.

use super::decl::{RefVar, Setting};
use super::declare::settings;
use super::resolver::Value;
use super::values::{number, one_of, positive, ratio, text};
use crate::limit::MAX_BUDGET;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderStyle {
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (envoyproxy/ratelimit).
    Draft03,
    /// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
    Ietf,
}

impl Value for HeaderStyle {}

fn header_style(s: &str) -> Result<HeaderStyle, String> {
    let names = [
        ("draft03", HeaderStyle::Draft03),
        ("ietf", HeaderStyle::Ietf),
    ];
    one_of(s, &names).ok_or_else(|| format!("'{s}' is not draft03 or ietf"))
}

/// `--max-hits-addend`: at most 2^53, the largest count every store keeps exact.
fn hits_bound(s: &str) -> Result<u64, String> {
    let n: u64 = number(s)?;
    if n > MAX_BUDGET {
        return Err(format!(
            "must be at most {MAX_BUDGET} (2^53, the largest count every store keeps exact)"
        ));
    }
    Ok(n)
}

settings! {
    /// Decision-affecting options the service reads on every request.
    #[derive(Clone, Debug, PartialEq)]
    pub struct DecisionSettings {
        /// Never deny: overall OVER_LIMIT becomes OK
        pub shadow_mode: bool = setting(
            Setting::switch("shadow-mode").same(RefVar::new("SHADOW_MODE", "true"))
        ),
        /// Every rule is a quota rule
        pub quota_mode: bool = setting(
            Setting::switch("quota-mode").same(RefVar::new("QUOTA_MODE", "true"))
        ),
        /// When any descriptor of a request is over its limit, charge no other descriptor of it
        pub stop_increment: bool = setting(
            Setting::switch("stop-increment-when-over-limit")
                .same(RefVar::new("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"))
                .see("[Redis cost](../how-to/reduce-redis-cost.md)")
        ),
        /// Fraction of a limit above which hits count as `near_limit` (the metric's threshold)
        pub near_limit_ratio: f32 = setting(
            Setting::value("near-limit-ratio", "RATIO", ratio)
                .default("0.8")
                .same(RefVar::new("NEAR_LIMIT_RATIO", "0.5"))
        ),
        pub headers: HeaderSettings = group(),
        pub request_headers: RequestHeaderSettings = group(),
        /// Rule metadata in the response's dynamic metadata
        pub dynamic_metadata: bool = setting(
            Setting::switch("response-dynamic-metadata")
                .same(RefVar::new("RESPONSE_DYNAMIC_METADATA", "true"))
        ),
        /// Report each descriptor's decision (code, rule, limit name and unit, remaining),
        /// the overall code and the deciding rule in the response's dynamic metadata, for
        /// Envoy's access logs
        pub decision_metadata: bool = setting(
            Setting::switch("decision-metadata").see("[Which rule denied a request](responses.md#which-rule-denied-a-request)")
        ),
        pub limits: RequestLimits = group(),
        /// `--redis-reference-keys`: plans carry envoyproxy/ratelimit's cache key of each
        /// descriptor, for the Redis store (see `store/redis/reference.rs`); set from the
        /// Redis settings.
        pub reference_keys: bool = with(|_| Ok(false)),
    }
}

settings! {
    /// The rate limit headers of a response.
    #[derive(Clone, Debug, PartialEq)]
    pub struct HeaderSettings {
        /// Add rate limit response headers (RateLimit-Limit/-Remaining/-Reset, or the IETF
        /// draft's)
        pub enabled: bool = setting(
            Setting::switch("response-headers")
                .same(RefVar::new("LIMIT_RESPONSE_HEADERS_ENABLED", "true"))
        ),
        /// Header style: draft03 (RateLimit-Limit/-Remaining/-Reset, their format) or ietf
        /// (RateLimit-Policy + RateLimit, current IETF draft)
        pub style: HeaderStyle = setting(
            Setting::value("response-headers-style", "STYLE", header_style)
                .values(&["draft03", "ietf"])
                .default("draft03")
        ),
        /// Add Retry-After to OVER_LIMIT responses
        pub retry_after: bool = setting(Setting::switch("retry-after-header")),
        /// Name of the limit header
        pub limit_header: String = setting(
            Setting::ref_only(text)
                .default("RateLimit-Limit")
                .same(RefVar::new("LIMIT_LIMIT_HEADER", "X-Limit"))
        ),
        /// Name of the remaining header
        pub remaining_header: String = setting(
            Setting::ref_only(text)
                .default("RateLimit-Remaining")
                .same(RefVar::new("LIMIT_REMAINING_HEADER", "X-Remaining"))
        ),
        /// Name of the reset header
        pub reset_header: String = setting(
            Setting::ref_only(text)
                .default("RateLimit-Reset")
                .same(RefVar::new("LIMIT_RESET_HEADER", "X-Reset"))
        ),
    }
}

settings! {
    /// The rate limit headers Envoy adds to the request it forwards upstream
    /// (`request_headers_to_add`), so the upstream sees its quota: their three headers, for
    /// the descriptor their response headers would report.
    #[derive(Clone, Debug, PartialEq)]
    pub struct RequestHeaderSettings {
        /// Add RateLimit-Limit/-Remaining/-Reset to the request Envoy forwards upstream
        pub enabled: bool = setting(
            Setting::switch("request-headers")
                .same(RefVar::new("LIMIT_REQUEST_HEADERS_ENABLED", "true"))
        ),
        /// Name of the limit header added to the forwarded request
        pub limit_header: String = setting(
            Setting::ref_only(text)
                .default("RateLimit-Limit")
                .same(RefVar::new("LIMIT_REQUEST_LIMIT_HEADER", "X-Upstream-Limit"))
        ),
        /// Name of the remaining header added to the forwarded request
        pub remaining_header: String = setting(
            Setting::ref_only(text)
                .default("RateLimit-Remaining")
                .same(RefVar::new("LIMIT_REQUEST_REMAINING_HEADER", "X-Upstream-Remaining"))
        ),
        /// Name of the reset header added to the forwarded request
        pub reset_header: String = setting(
            Setting::ref_only(text)
                .default("RateLimit-Reset")
                .same(RefVar::new("LIMIT_REQUEST_RESET_HEADER", "X-Upstream-Reset"))
        ),
    }
}

settings! {
    /// Bounds on one request (oversized input → INVALID_ARGUMENT).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct RequestLimits {
        /// Most descriptors one request may carry
        pub max_descriptors: usize = setting(
            Setting::value("max-descriptors", "N", number).default("64")
        ),
        /// Most entries one descriptor may carry
        pub max_entries: usize = setting(
            Setting::value("max-entries", "N", number).default("32")
        ),
        /// Longest descriptor entry key, in bytes
        pub max_key_bytes: usize = setting(
            Setting::value("max-key-bytes", "BYTES", number).default("256")
        ),
        /// Longest descriptor entry value (and domain), in bytes
        pub max_value_bytes: usize = setting(
            Setting::value("max-value-bytes", "BYTES", number).default("8192")
        ),
        /// Largest hits_addend accepted (a request's cost), at most 2^53
        pub max_hits_addend: u64 = setting(
            Setting::value("max-hits-addend", "N", hits_bound)
                .default("9007199254740992")
                .shown_default("2^53")
        ),
        /// Largest gRPC request message, in bytes; a larger one is refused with
        /// RESOURCE_EXHAUSTED
        pub max_request_bytes: usize = setting(
            Setting::value("max-request-bytes", "BYTES", positive)
                .default("4194304")
                .shown_default("4 MiB")
        ),
        // The default is far above what one instance keeps busy at its capacity (a few dozen
        // calls at a Redis round trip each), low enough that the limit cannot grow into
        // seconds of queued work.
        /// Ceiling of the adaptive limit on `ShouldRateLimit` gRPC calls worked on at once, and
        /// of the calls waiting for one; past them a call is refused at once with
        /// `RESOURCE_EXHAUSTED` (0: no ceiling)
        pub max_in_flight: usize = setting(
            Setting::value("max-in-flight", "N", number)
                .default("1024")
                .see("[Overload](../how-to/overload-and-tuning.md)")
        ),
    }
}
