//! The rate limit headers of a response: those Envoy adds to its answer to the client
//! (`--response-headers`, draft03 or IETF style, and `--retry-after-header`), and those it
//! adds to the request it forwards upstream (`--request-headers`, their
//! `LIMIT_REQUEST_HEADERS_ENABLED`).
//!
//! A rule with `response: {hidden: true}` is left out of the headers to the client, as if
//! it had not matched: a hidden anti-abuse limit does not advertise itself (nor its reset,
//! through `Retry-After`). The upstream is not the client: its headers include every rule.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;

use super::plan::Matched;
use crate::config::Match;
use crate::limit::LimitSpec;
use crate::limiter::{Code, Decision, Outcome, Plan, Verdict};
use crate::settings::{DecisionSettings, HeaderStyle, RequestHeaderSettings};

pub(super) fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_string(),
        value,
        ..Default::default()
    }
}

/// Descriptor `i` matched a hidden rule.
fn hidden(matched: &[Matched<'_>], i: usize) -> bool {
    matched
        .get(i)
        .and_then(|m| m.m.as_ref())
        .is_some_and(|m| m.rule.hidden())
}

/// Their choice of descriptor for the three headers: the limited status with the least
/// remaining (first wins ties), overridden by any non-quota OVER_LIMIT status (last wins);
/// descriptors `skip` says are not candidates.
fn chosen(plans: &[Plan<'_>], decision: &Decision, skip: impl Fn(usize) -> bool) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    let mut over = None;
    for (i, (plan, status)) in plans.iter().zip(&decision.outcomes).enumerate() {
        let (Plan::Metered(l), Outcome::Metered(s)) = (plan, status) else {
            continue;
        };
        if skip(i) {
            continue;
        }
        if s.code == Code::OverLimit && !l.quota {
            over = Some(i);
        }
        if best.is_none_or(|(_, r)| s.remaining < r) {
            best = Some((i, s.remaining));
        }
    }
    over.or(best.map(|(i, _)| i))
}

fn limited(decision: &Decision, i: usize) -> Option<&Verdict> {
    match decision.outcomes.get(i) {
        Some(Outcome::Metered(s)) => Some(s),
        _ => None,
    }
}

/// The limit descriptor `i`'s status reports, with its verdict.
fn reported<'p>(
    plans: &'p [Plan<'_>],
    decision: &'p Decision,
    i: usize,
) -> Option<(&'p LimitSpec, &'p Verdict)> {
    let s = limited(decision, i)?;
    let Some(Plan::Metered(l)) = plans.get(i) else {
        return None;
    };
    Some((l.limits.as_slice().get(s.reported)?, s))
}

fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// `response_headers_to_add`: the rate limit headers to the client, and `Retry-After`.
pub(super) fn to_client(
    plans: &[Plan<'_>],
    decision: &Decision,
    matched: &[Matched<'_>],
    settings: &DecisionSettings,
) -> Vec<HeaderValue> {
    let h = &settings.headers;
    let mut out = Vec::new();
    let skip = |i| hidden(matched, i);
    if h.enabled
        && let Some(i) = chosen(plans, decision, skip)
        && let Some((limit, s)) = reported(plans, decision, i)
    {
        // Exact: a header is text, not the status's uint32 (which clamps at 4294967295).
        let remaining = s.remaining;
        match h.style {
            HeaderStyle::Draft03 => {
                out.push(header(&h.limit_header, limit.requests_per_unit.to_string()));
                out.push(header(&h.remaining_header, remaining.to_string()));
                out.push(header(
                    &h.reset_header,
                    seconds_ceil(s.duration_ms).to_string(),
                ));
            }
            HeaderStyle::Ietf => {
                let mut policies = Vec::new();
                for (j, (plan, m)) in plans.iter().zip(matched).enumerate() {
                    let m = &m.m;
                    let Plan::Metered(pl) = plan else { continue };
                    if skip(j) {
                        continue;
                    }
                    for (k, lim) in pl.limits.as_slice().iter().enumerate() {
                        policies.push(format!(
                            "{};q={};w={}",
                            policy_name(lim, m.as_ref(), j, k),
                            lim.capacity(),
                            lim.window_seconds()
                        ));
                    }
                }
                out.push(header("RateLimit-Policy", policies.join(", ")));
                out.push(header(
                    "RateLimit",
                    format!(
                        "{};r={};t={}",
                        policy_name(limit, matched[i].m.as_ref(), i, s.reported),
                        remaining,
                        seconds_ceil(s.duration_ms)
                    ),
                ));
            }
        }
    }
    if h.retry_after && decision.overall() == Code::OverLimit {
        // Envoy's rule: the largest wait among OVER_LIMIT statuses, at least one second;
        // hidden rules' waits are not told.
        let wait = decision
            .outcomes
            .iter()
            .enumerate()
            .filter(|&(i, _)| !skip(i))
            .filter_map(|(_, s)| match s {
                Outcome::Metered(s) if s.code == Code::OverLimit => Some(s.duration_ms),
                _ => None,
            })
            .max();
        if let Some(wait) = wait {
            out.push(header("Retry-After", seconds_ceil(wait).max(1).to_string()));
        }
    }
    out
}

/// `request_headers_to_add` (their pull request #1168): the limit, remaining and reset of
/// the descriptor their response headers would report, under their request header names.
pub(super) fn to_upstream(
    plans: &[Plan<'_>],
    decision: &Decision,
    settings: &RequestHeaderSettings,
) -> Vec<HeaderValue> {
    let Some((limit, s)) =
        chosen(plans, decision, |_| false).and_then(|i| reported(plans, decision, i))
    else {
        return Vec::new();
    };
    vec![
        header(&settings.limit_header, limit.requests_per_unit.to_string()),
        header(&settings.remaining_header, s.remaining.to_string()),
        header(
            &settings.reset_header,
            seconds_ceil(s.duration_ms).to_string(),
        ),
    ]
}

/// An sf-string naming a limit: its `name`, else the rule's config key, else its position.
fn policy_name(limit: &LimitSpec, m: Option<&Match<'_>>, descriptor: usize, slot: usize) -> String {
    let raw = match (&limit.name, m) {
        (Some(n), _) => n.to_string(),
        (None, Some(m)) if m.rule.limits.len() > 1 => format!("{}#{slot}", m.rule.full_key),
        (None, Some(m)) => m.rule.full_key.to_string(),
        (None, None) => format!("descriptor{descriptor}"),
    };
    let mut s = String::with_capacity(raw.len() + 2);
    s.push('"');
    for c in raw.chars() {
        match c {
            '"' | '\\' => {
                s.push('\\');
                s.push(c);
            }
            ' '..='~' => s.push(c),
            _ => s.push('?'),
        }
    }
    s.push('"');
    s
}
