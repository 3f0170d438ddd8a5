//! Decision → `RateLimitResponse`: statuses with every field Envoy reads, optional
//! response headers and dynamic metadata.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as PbUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus, RateLimit as PbRateLimit,
};
use envoy_types::pb::google::protobuf::{
    Duration as PbDuration, ListValue, Struct, Value as PbValue, value::Kind,
};

use super::plan::{Matched, override_unit};
use super::proto::RateLimitRequest;
use crate::config::{Match, push_shown};
use crate::limit::{LimitSpec, Unit};
use crate::limiter::{Code, Decision, Outcome, Plan, Verdict};
use crate::settings::{DecisionSettings, HeaderStyle};

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
        .map(|(plan, status)| descriptor_status(plan, status))
        .collect();
    let mut resp = RateLimitResponse {
        overall_code: pb_code(decision.overall()) as i32,
        ..Default::default()
    };
    if settings.headers.enabled || settings.headers.retry_after {
        resp.response_headers_to_add = headers(plans, decision, &statuses, matched, settings);
    }
    if settings.dynamic_metadata {
        resp.dynamic_metadata = Some(dynamic_metadata(req, matched, &statuses));
    }
    resp.statuses = statuses;
    resp
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

fn descriptor_status(plan: &Plan<'_>, status: &Outcome) -> DescriptorStatus {
    match (plan, status) {
        (Plan::Metered(l), Outcome::Metered(s)) => {
            let limit = &l.limits.as_slice()[s.reported];
            DescriptorStatus {
                code: pb_code(s.code) as i32,
                current_limit: Some(current_limit(limit)),
                limit_remaining: s.remaining,
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
/// stay those of the real window.
fn current_limit(limit: &LimitSpec) -> PbRateLimit {
    let (requests_per_unit, unit) = limit.reported();
    PbRateLimit {
        name: limit.name.as_deref().unwrap_or_default().to_string(),
        requests_per_unit,
        unit: pb_unit(unit) as i32,
    }
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_string(),
        value,
        ..Default::default()
    }
}

/// Their choice of descriptor for the three headers: the limited status with the least
/// remaining (first wins ties), overridden by any non-quota OVER_LIMIT status (last wins).
fn chosen(plans: &[Plan<'_>], decision: &Decision) -> Option<usize> {
    let mut best: Option<(usize, u32)> = None;
    let mut over = None;
    for (i, (plan, status)) in plans.iter().zip(&decision.outcomes).enumerate() {
        let (Plan::Metered(l), Outcome::Metered(s)) = (plan, status) else {
            continue;
        };
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

fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

fn headers(
    plans: &[Plan<'_>],
    decision: &Decision,
    statuses: &[DescriptorStatus],
    matched: &[Matched<'_>],
    settings: &DecisionSettings,
) -> Vec<HeaderValue> {
    let h = &settings.headers;
    let mut out = Vec::new();
    if h.enabled
        && let Some(i) = chosen(plans, decision)
        && let Some(s) = limited(decision, i)
    {
        let (Plan::Metered(l), st) = (&plans[i], &statuses[i]) else {
            return out;
        };
        let limit = &l.limits.as_slice()[s.reported];
        match h.style {
            HeaderStyle::Draft03 => {
                out.push(header(&h.limit_header, limit.requests_per_unit.to_string()));
                out.push(header(&h.remaining_header, st.limit_remaining.to_string()));
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
                        st.limit_remaining,
                        seconds_ceil(s.duration_ms)
                    ),
                ));
            }
        }
    }
    if h.retry_after && decision.overall() == Code::OverLimit {
        // Envoy's rule: the largest wait among OVER_LIMIT statuses, at least one second.
        let wait = decision
            .outcomes
            .iter()
            .filter_map(|s| match s {
                Outcome::Metered(s) if s.code == Code::OverLimit => Some(s.duration_ms),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        out.push(header("Retry-After", seconds_ceil(wait).max(1).to_string()));
    }
    out
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

fn string(s: impl Into<String>) -> PbValue {
    PbValue {
        kind: Some(Kind::StringValue(s.into())),
    }
}

/// Their `RESPONSE_DYNAMIC_METADATA` struct: the domain, the descriptors as sent, and the
/// rule metadata of every passed descriptor, deep-merged (first value wins).
fn dynamic_metadata(
    req: &RateLimitRequest,
    matched: &[Matched<'_>],
    statuses: &[DescriptorStatus],
) -> Struct {
    let mut fields = std::collections::BTreeMap::new();
    fields.insert("domain".to_string(), string(req.domain.clone()));
    let descriptors = req
        .descriptors
        .iter()
        .map(|d| {
            let mut f = std::collections::BTreeMap::new();
            let entries = d
                .entries
                .iter()
                .map(|e| {
                    let mut s = String::with_capacity(e.key.len() + e.value.len() + 1);
                    push_shown(&mut s, &e.key);
                    s.push('=');
                    push_shown(&mut s, &e.value);
                    string(s)
                })
                .collect();
            f.insert(
                "entries".to_string(),
                PbValue {
                    kind: Some(Kind::ListValue(ListValue { values: entries })),
                },
            );
            if let Some(o) = &d.limit {
                let unit = override_unit(o.unit).map(|u| u.name()).unwrap_or("UNKNOWN");
                f.insert(
                    "limit".to_string(),
                    string(format!(
                        "requests_per_unit:{} unit:{unit}",
                        o.requests_per_unit
                    )),
                );
            }
            if let Some(h) = &d.hits_addend {
                f.insert(
                    "hitsAddend".to_string(),
                    PbValue {
                        kind: Some(Kind::NumberValue(h.value as f64)),
                    },
                );
            }
            PbValue {
                kind: Some(Kind::StructValue(Struct {
                    fields: f.into_iter().collect(),
                })),
            }
        })
        .collect();
    fields.insert(
        "descriptors".to_string(),
        PbValue {
            kind: Some(Kind::ListValue(ListValue {
                values: descriptors,
            })),
        },
    );
    if req.hits_addend != 0 {
        fields.insert(
            "hitsAddend".to_string(),
            PbValue {
                kind: Some(Kind::NumberValue(f64::from(req.hits_addend))),
            },
        );
    }
    let mut merged = serde_json::Map::new();
    for (m, st) in matched.iter().zip(statuses) {
        let Some(m) = &m.m else { continue };
        let passed = st.code == PbCode::Ok as i32 && !m.rule.unlimited;
        if let (true, Some(meta)) = (passed, &m.rule.metadata) {
            merge_first_wins(&mut merged, meta);
        }
    }
    if !merged.is_empty() {
        fields.insert(
            "metadata".to_string(),
            json_to_pb(&serde_json::Value::Object(merged)),
        );
    }
    Struct {
        fields: fields.into_iter().collect(),
    }
}

fn merge_first_wins(
    into: &mut serde_json::Map<String, serde_json::Value>,
    from: &serde_json::Map<String, serde_json::Value>,
) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(serde_json::Value::Object(a)), serde_json::Value::Object(b)) => {
                merge_first_wins(a, b)
            }
            (Some(_), _) => {}
            (None, v) => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

pub(super) fn json_to_pb(v: &serde_json::Value) -> PbValue {
    use serde_json::Value as J;
    let kind = match v {
        J::Null => Kind::NullValue(0),
        J::Bool(b) => Kind::BoolValue(*b),
        J::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Kind::StringValue(s.clone()),
        J::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(json_to_pb).collect(),
        }),
        J::Object(o) => Kind::StructValue(Struct {
            fields: o.iter().map(|(k, v)| (k.clone(), json_to_pb(v))).collect(),
        }),
    };
    PbValue { kind: Some(kind) }
}
