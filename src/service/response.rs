//! Decision → `RateLimitResponse`: statuses with every field Envoy reads, the deciding
//! rule's body and headers on OVER_LIMIT, and the optional rate limit headers
//! (`headers.rs`) and dynamic metadata (`metadata.rs`).
//!
//! The deciding descriptor of an OVER_LIMIT answer is the first one, in request order,
//! that denies: over its limit, not in shadow mode, and not a quota descriptor (unless the
//! request is over because every quota descriptor is, then the first of those). Its rule's
//! `response` (`raw_body`, `content_type`, `headers`) is the one sent; the other denying
//! rules' are not, so a client gets one coherent answer. This is the descriptor order's
//! counterpart of "the status reports the first denying limit" within a descriptor.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as PbUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus, RateLimit as PbRateLimit,
};
use envoy_types::pb::google::protobuf::Duration as PbDuration;

use super::headers::{self, header};
use super::metadata::{self, Inputs};
use super::plan::Matched;
use super::proto::RateLimitRequest;
use crate::config::RuleResponse;
use crate::limit::{LimitSpec, Unit, wire_count};
use crate::limiter::{Code, Decision, Outcome, Plan};
use crate::settings::DecisionSettings;

pub(super) fn build(
    req: &RateLimitRequest,
    plans: &[Plan<'_>],
    matched: &[Matched<'_>],
    decision: &Decision,
    settings: &DecisionSettings,
) -> RateLimitResponse {
    let statuses: Vec<DescriptorStatus> = plans
        .iter()
        .zip(&decision.outcomes)
        .zip(matched)
        .map(|((plan, status), m)| descriptor_status(plan, status, m))
        .collect();
    let mut resp = RateLimitResponse {
        overall_code: pb_code(decision.overall()) as i32,
        ..Default::default()
    };
    if settings.headers.enabled || settings.headers.retry_after {
        resp.response_headers_to_add = headers::to_client(plans, decision, matched, settings);
    }
    if settings.request_headers.enabled {
        resp.request_headers_to_add =
            headers::to_upstream(plans, decision, &settings.request_headers);
    }
    let deciding = deciding(plans, decision);
    if let Some(r) = deciding.and_then(|i| matched.get(i)?.m.as_ref()?.rule.response.as_deref()) {
        denial(&mut resp, r);
    }
    if settings.dynamic_metadata || settings.decision_metadata {
        let inputs = Inputs {
            req,
            plans,
            matched,
            decision,
            statuses: &statuses,
            overall: pb_code(decision.overall()),
            deciding,
        };
        resp.dynamic_metadata = Some(metadata::build(&inputs, settings.decision_metadata));
    }
    resp.statuses = statuses;
    resp
}

/// The descriptor whose denial the OVER_LIMIT answer is (see the file's opening comment);
/// `None` when the answer is OK.
fn deciding(plans: &[Plan<'_>], decision: &Decision) -> Option<usize> {
    if decision.overall() != Code::OverLimit {
        return None;
    }
    let denying = |quota: bool| {
        plans
            .iter()
            .zip(&decision.outcomes)
            .position(|(p, o)| match (p, o) {
                (Plan::Metered(l), Outcome::Metered(v)) => {
                    v.code == Code::OverLimit && l.quota == quota
                }
                _ => false,
            })
    };
    denying(false).or_else(|| denying(true))
}

/// The deciding rule's body and headers: Envoy sends `raw_body` as the 429's body, and a
/// `content-type` among `response_headers_to_add` replaces the `text/plain` it would send
/// (envoyproxy/envoy's rate limit filter, `populateResponseHeaders`).
fn denial(resp: &mut RateLimitResponse, r: &RuleResponse) {
    if let Some(body) = &r.raw_body {
        resp.raw_body = body.to_vec();
        if let Some(ct) = &r.content_type {
            resp.response_headers_to_add
                .push(header("content-type", ct.clone()));
        }
    }
    for (name, value) in &r.headers {
        resp.response_headers_to_add
            .push(header(name, value.clone()));
    }
}

fn pb_code(c: Code) -> PbCode {
    match c {
        Code::Ok => PbCode::Ok,
        Code::OverLimit => PbCode::OverLimit,
    }
}

/// The response code's protobuf name (`OK`, `OVER_LIMIT`), for traces.
pub(super) fn code_name(code: i32) -> &'static str {
    PbCode::try_from(code).map_or("UNKNOWN", |c| c.as_str_name())
}

pub(super) fn pb_unit(u: Unit) -> PbUnit {
    match u {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

/// A protobuf `Duration`, within its valid range (the limiter already clamps; this keeps
/// the message valid whatever it is given).
fn duration(ms: u64) -> PbDuration {
    let ms = ms.min(crate::limiter::MAX_DURATION_MS);
    PbDuration {
        seconds: (ms / 1000) as i64,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

/// A descriptor's status; a rule with `response: {hide_current_limit: true}` leaves
/// `current_limit` out, so Envoy's `x-ratelimit-*` headers skip the status.
fn descriptor_status(plan: &Plan<'_>, status: &Outcome, m: &Matched<'_>) -> DescriptorStatus {
    match (plan, status) {
        (Plan::Metered(l), Outcome::Metered(s)) => {
            let limit = &l.limits.as_slice()[s.reported];
            let hide =
                m.m.as_ref()
                    .and_then(|m| m.rule.response.as_ref())
                    .is_some_and(|r| r.hide_current_limit);
            DescriptorStatus {
                code: pb_code(s.code) as i32,
                current_limit: (!hide).then(|| current_limit(limit)),
                limit_remaining: wire_count(s.remaining),
                duration_until_reset: Some(duration(s.duration_ms)),
                quota: None,
            }
        }
        (_, Outcome::Unlimited) => DescriptorStatus {
            code: PbCode::Ok as i32,
            limit_remaining: u32::MAX,
            ..Default::default()
        },
        _ => DescriptorStatus {
            code: PbCode::Ok as i32,
            ..Default::default()
        },
    }
}

/// `current_limit` has a unit enum and a count: a window of several units is reported as
/// its exact rate (`LimitSpec::reported`); `limit_remaining` and `duration_until_reset`
/// stay those of the real window. Both counts are `uint32`s, clamped at 4294967295
/// (`docs/reference/responses.md`); decision metadata carries them exactly.
fn current_limit(limit: &LimitSpec) -> PbRateLimit {
    let (requests_per_unit, unit) = limit.reported();
    PbRateLimit {
        name: limit.name.as_deref().unwrap_or_default().to_string(),
        requests_per_unit: wire_count(requests_per_unit),
        unit: pb_unit(unit) as i32,
    }
}
