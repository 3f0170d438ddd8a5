//! Operator queries over the active config and the store, for the HTTP layers: `/explain`
//! (what a descriptor matches and why, `explain`), and the admin listener's view of one
//! descriptor's state, peeked (a check of cost 0 through the normal store path: nothing
//! changes) or reset (`Store::reset`).
//!
//! Queries are `domain=<d>&descriptor=<k=v,k2=v2>` (URL-encoded); answers are JSON with a
//! status the HTTP layer maps to a code, as `/json` does.

use serde::Serialize;

use super::RateLimitService;
use crate::explain::{self, EntryJson, KeyLayout, LimitHead};
use crate::limit::{Check, Descriptor, LimitResult, parse_bucket, parse_descriptor};
use crate::settings::RequestLimits;
use crate::store::redis::DEFAULT_KEY_PREFIX;
use crate::store::{Call, Store};

/// How an operator query went, in terms the HTTP layer maps to status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 200.
    Ok,
    /// 400: the query is malformed.
    BadRequest,
    /// 404: the descriptor has no rule (its state cannot be named).
    NotFound,
    /// 503: the store failed.
    Unavailable,
}

/// One answer: a status and a JSON body (`{"error": …}` unless `Ok`).
pub struct Reply {
    pub status: Status,
    pub body: String,
}

pub(super) fn json(status: Status, value: &impl Serialize) -> Reply {
    let body = serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    Reply { status, body }
}

pub(super) fn error(status: Status, message: impl Into<String>) -> Reply {
    json(status, &serde_json::json!({ "error": message.into() }))
}

/// Why a query is malformed (a 400's `error`).
#[derive(Debug, thiserror::Error)]
enum BadQuery {
    /// A `descriptor` or `bucket` the operator tools' parser refuses, in its words.
    #[error("{0}")]
    Descriptor(String),
    #[error("unknown query parameter '{0}' (use domain and descriptor or bucket)")]
    UnknownParameter(String),
    #[error("the query needs domain=<domain>")]
    NoDomain,
    #[error("the query needs descriptor=<key=value,...> (or bucket=<key=value,...>)")]
    NoDescriptor,
    #[error("{0} descriptors, more than the {1} a request may carry")]
    TooManyDescriptors(usize, usize),
    #[error("a descriptor of {0} entries, more than the {1} a request's may carry")]
    TooManyEntries(usize, usize),
}

/// `domain` and every `descriptor` of a query string, within the request bounds.
fn parse_query(
    query: Option<&str>,
    limits: &RequestLimits,
) -> Result<(String, Vec<Descriptor>), BadQuery> {
    let mut domain = None;
    let mut descriptors = Vec::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match &*k {
            "domain" => domain = Some(v.into_owned()),
            "descriptor" => descriptors.push(parse_descriptor(&v).map_err(BadQuery::Descriptor)?),
            // An RLQS BucketId, as a quota stream maps it: entries sorted by key.
            "bucket" => descriptors.push(parse_bucket(&v).map_err(BadQuery::Descriptor)?),
            other => return Err(BadQuery::UnknownParameter(other.to_owned())),
        }
    }
    let domain = domain.filter(|d| !d.is_empty()).ok_or(BadQuery::NoDomain)?;
    if descriptors.is_empty() {
        return Err(BadQuery::NoDescriptor);
    }
    // The bounds of a request (--max-descriptors, --max-entries) hold here too.
    if descriptors.len() > limits.max_descriptors {
        return Err(BadQuery::TooManyDescriptors(
            descriptors.len(),
            limits.max_descriptors,
        ));
    }
    if let Some(d) = descriptors.iter().find(|d| d.0.len() > limits.max_entries) {
        return Err(BadQuery::TooManyEntries(d.0.len(), limits.max_entries));
    }
    Ok((domain, descriptors))
}

/// One limit's state, as the admin listener reports it.
#[derive(Debug, Serialize)]
pub struct LimitState {
    #[serde(flatten)]
    pub head: LimitHead,
    /// `C`: the most usage the limit holds (`burst` for the buckets).
    pub capacity: u64,
    /// `U`, whole requests rounded up.
    pub used: u64,
    /// `C − U`, never below 0.
    pub remaining: u64,
    /// Milliseconds until usage is back to 0 (`fixed_window`: until the window ends).
    pub reset_ms: u64,
    /// A penalty lock is active: every hit is denied for `penalty_left_ms`.
    pub penalized: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty_left_ms: Option<u64>,
}

#[derive(Debug, Serialize)]
struct StateReport {
    domain: String,
    entries: Vec<EntryJson>,
    rule: String,
    store: &'static str,
    unlimited: bool,
    limits: Vec<LimitState>,
}

#[derive(Debug, Serialize)]
struct ResetReport {
    domain: String,
    entries: Vec<EntryJson>,
    rule: String,
    store: &'static str,
    /// Stored entries removed (memory: limit states; Redis: keys, locks included).
    removed: u64,
}

impl RateLimitService {
    /// `/explain`: [`explain::explain`] over the active config, with this server's Redis
    /// key prefix (or the default one, on the memory store).
    pub fn explain_query(&self, query: Option<&str>) -> Reply {
        let (domain, descriptors) = match parse_query(query, &self.settings.limits) {
            Ok(q) => q,
            Err(e) => return error(Status::BadRequest, e.to_string()),
        };
        let active = self.config();
        let keys = KeyLayout {
            prefix: self.store().key_prefix().unwrap_or(DEFAULT_KEY_PREFIX),
            store: Some(self.store().name()),
        };
        let e = explain::explain(&active.config, &domain, &descriptors, keys);
        json(Status::Ok, &e)
    }

    /// The admin listener's `GET` (`reset` false) and `DELETE` (`reset` true) of one
    /// descriptor's state.
    pub async fn state_query(&self, query: Option<&str>, reset: bool) -> Reply {
        let (domain, mut descriptors) = match parse_query(query, &self.settings.limits) {
            Ok(q) => q,
            Err(e) => return error(Status::BadRequest, e.to_string()),
        };
        let (Some(entries), true) = (descriptors.pop(), descriptors.is_empty()) else {
            return error(Status::BadRequest, "the query needs exactly one descriptor");
        };
        let active = self.config();
        let refs: Vec<(&str, &str)> = entries
            .0
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let found = active.config.domain(&domain).and_then(|d| d.find(&refs));
        let Some(m) = found else {
            // Say why, as `/explain` would.
            let keys = KeyLayout {
                prefix: DEFAULT_KEY_PREFIX,
                store: None,
            };
            let e = explain::explain(&active.config, &domain, &[entries], keys);
            let reason = e
                .descriptors
                .first()
                .map(|d| d.reason.clone())
                .unwrap_or_default();
            return error(
                Status::NotFound,
                format!("no rule for this descriptor: {reason}"),
            );
        };
        let rule = m.rule.full_key.to_string();
        let store = self.store().name();
        let tag = m.state_tag(&refs);
        let limits = &m.rule.limits;
        if reset {
            return match self.store().reset(tag, limits).await {
                Ok(removed) => {
                    tracing::info!(%domain, descriptor = ?refs, %rule, removed, "state reset");
                    let report = ResetReport {
                        domain,
                        entries: EntryJson::list(&refs),
                        rule,
                        store,
                        removed,
                    };
                    json(Status::Ok, &report)
                }
                Err(e) => error(Status::Unavailable, e.to_string()),
            };
        }
        let mut out: Vec<LimitResult> = Vec::with_capacity(limits.len());
        let peek = [Check {
            tag,
            limits,
            cost: 0,
            refund: false,
        }];
        if !limits.is_empty()
            && let Err(e) = self.store().run(&Call::new(&peek), &mut out).await
        {
            return error(Status::Unavailable, e.to_string());
        }
        let states = limits
            .iter()
            .zip(&out)
            .map(|(spec, r)| LimitState {
                head: LimitHead::of(spec),
                capacity: spec.capacity(),
                used: r.used_before,
                remaining: spec.capacity().saturating_sub(r.used_before),
                reset_ms: r.reset_ms,
                penalized: r.penalized,
                penalty_left_ms: r.penalized.then_some(r.retry_ms).flatten(),
            })
            .collect();
        let report = StateReport {
            domain,
            entries: EntryJson::list(&refs),
            rule,
            store,
            unlimited: m.rule.unlimited,
            limits: states,
        };
        json(Status::Ok, &report)
    }
}
