//! The response's dynamic metadata (Envoy stores it under `envoy.filters.http.ratelimit`,
//! where access logs and later filters read it).
//!
//! `--response-dynamic-metadata` (their `RESPONSE_DYNAMIC_METADATA`): the domain, the
//! descriptors as sent (`entries`, `limit`, `hitsAddend`), the request's `hitsAddend`, and
//! under `metadata` the rule metadata of every passed descriptor, deep-merged (first value
//! wins) — their struct, on every response.
//!
//! `--decision-metadata` adds what was decided, for "which rule denied this request?":
//! each descriptor gets `code` (`OK`/`OVER_LIMIT`) and `limitName` (their pull request
//! #1239's names, so one access-log format serves both servers), `rule` (the stats key),
//! `unit`, `remaining` and `requestsPerUnit` of the limit its status reports (the last two
//! exact, where the status clamps them at 4294967295), and `shadowed: true` when shadow
//! mode turned its OVER_LIMIT into OK; the struct gets `overallCode`, and on OVER_LIMIT
//! `decidingRule`, the rule of the descriptor that denied (`response.rs` says which). Unlike
//! #1239 (still open), these are filled on every response, not only when something is
//! over its limit, and the struct is otherwise theirs (it implies the dynamic metadata).
//!
//! A rule's own `metadata` cannot overwrite any of these: it is merged only under the
//! `metadata` key, and every other key is written by sluice.

use std::collections::HashMap;

/// A `Struct`'s fields: prost's map, filled in place (no ordered map in between: the
/// wire order of a map means nothing).
type Fields = HashMap<String, PbValue>;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus,
};
use envoy_types::pb::google::protobuf::{ListValue, Struct, Value as PbValue, value::Kind};

use super::plan::{Matched, override_unit};
use super::proto::RateLimitRequest;
use crate::config::push_shown;
use crate::limiter::{Decision, Outcome, Plan};

/// A status code's protobuf name (`OK`, `OVER_LIMIT`).
fn code_name(code: i32) -> &'static str {
    PbCode::try_from(code).map_or("UNKNOWN", |c| c.as_str_name())
}

fn string(s: impl Into<String>) -> PbValue {
    PbValue {
        kind: Some(Kind::StringValue(s.into())),
    }
}

fn number(n: f64) -> PbValue {
    PbValue {
        kind: Some(Kind::NumberValue(n)),
    }
}

fn list(values: Vec<PbValue>) -> PbValue {
    PbValue {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

fn object(fields: Fields) -> PbValue {
    PbValue {
        kind: Some(Kind::StructValue(Struct { fields })),
    }
}

/// What the dynamic metadata is built from.
pub(super) struct Inputs<'r, 'a> {
    pub req: &'r RateLimitRequest,
    pub plans: &'r [Plan<'a>],
    pub matched: &'r [Matched<'a>],
    pub decision: &'r Decision,
    pub statuses: &'r [DescriptorStatus],
    /// The response's `overall_code`.
    pub overall: PbCode,
    /// The descriptor that decided an OVER_LIMIT answer (`response::deciding`).
    pub deciding: Option<usize>,
}

/// The struct; with `decision`, the decision fields too.
pub(super) fn build(i: &Inputs<'_, '_>, decision: bool) -> Struct {
    let req = i.req;
    let mut fields = Fields::with_capacity(6);
    fields.insert("domain".to_string(), string(req.domain.clone()));
    let descriptors = req
        .descriptors
        .iter()
        .enumerate()
        .map(|(n, d)| {
            let mut f = Fields::with_capacity(if decision { 8 } else { 3 });
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
            f.insert("entries".to_string(), list(entries));
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
                f.insert("hitsAddend".to_string(), number(h.value as f64));
            }
            if decision {
                descriptor_decision(i, n, &mut f);
            }
            object(f)
        })
        .collect();
    fields.insert("descriptors".to_string(), list(descriptors));
    if req.hits_addend != 0 {
        fields.insert("hitsAddend".to_string(), number(f64::from(req.hits_addend)));
    }
    let mut merged = serde_json::Map::new();
    for (m, st) in i.matched.iter().zip(i.statuses) {
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
    if decision {
        fields.insert("overallCode".to_string(), string(i.overall.as_str_name()));
        if let Some(rule) = i.deciding.and_then(|n| rule_key(i, n)) {
            fields.insert("decidingRule".to_string(), string(rule));
        }
    }
    Struct { fields }
}

/// The stats key of the rule descriptor `n` is held to (its override's for an override),
/// or `None` when no limit applies to it.
fn rule_key(i: &Inputs<'_, '_>, n: usize) -> Option<String> {
    if matches!(i.plans.get(n), None | Some(Plan::NoLimit)) {
        return None;
    }
    let m = i.matched.get(n)?;
    if let Some(key) = &m.override_key {
        return Some(key.clone());
    }
    let d = i.req.descriptors.get(n)?;
    Some(m.m.as_ref()?.stats_key(&d.entries).into_owned())
}

/// Descriptor `n`'s decision fields.
fn descriptor_decision(i: &Inputs<'_, '_>, n: usize, f: &mut Fields) {
    let code = i.statuses.get(n).map_or(PbCode::Ok as i32, |s| s.code);
    f.insert("code".to_string(), string(code_name(code)));
    if let Some(rule) = rule_key(i, n) {
        f.insert("rule".to_string(), string(rule));
    }
    let (Some(Plan::Metered(l)), Some(Outcome::Metered(v))) =
        (i.plans.get(n), i.decision.outcomes.get(n))
    else {
        return;
    };
    let Some(limit) = l.limits.as_slice().get(v.reported) else {
        return;
    };
    if let Some(name) = &limit.name {
        f.insert("limitName".to_string(), string(&**name));
    }
    f.insert("unit".to_string(), string(limit.unit.name()));
    // Exact counts (a Struct number is a double: exact up to 2^53, the largest budget),
    // where the status's uint32 fields clamp at 4294967295.
    f.insert("remaining".to_string(), number(v.remaining as f64));
    let (per_unit, _) = limit.reported();
    f.insert("requestsPerUnit".to_string(), number(per_unit as f64));
    if v.shadowed {
        f.insert(
            "shadowed".to_string(),
            PbValue {
                kind: Some(Kind::BoolValue(true)),
            },
        );
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
