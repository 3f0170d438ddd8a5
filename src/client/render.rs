//! A response for people (an aligned table) and for scripts (JSON with proto3 JSON names:
//! `overallCode`, `statuses[].limitRemaining`, durations as `"1.500s"`), every field of the
//! response present (`null` or empty when unset: `rawBody`, `dynamicMetadata`, `quota`) so
//! `jq` paths never miss.
//!
//! A status's counts are `uint32`s, clamped at 4294967295; a server that sends decision
//! metadata (sluice with `--decision-metadata`) gives each descriptor's exact `remaining`
//! and `requestsPerUnit` there, which the table shows instead and the JSON adds as `exact`.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, Quota, RateLimit,
};
use envoy_types::pb::google::protobuf::Struct;
use envoy_types::pb::google::protobuf::value::Kind;
use serde_json::{Value, json};

use super::Report;
use crate::protojson::{base64, duration, struct_json, timestamp};

fn code(c: i32) -> &'static str {
    Code::try_from(c).map_or("UNKNOWN", |c| c.as_str_name())
}

fn unit(u: i32) -> &'static str {
    Unit::try_from(u).map_or("UNKNOWN", |u| u.as_str_name())
}

/// The exact counts of descriptor `i` in the decision metadata: `(remaining,
/// requestsPerUnit)`, each `None` when absent.
fn exact(
    r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse,
    i: usize,
) -> (Option<u64>, Option<u64>) {
    let fields = r
        .dynamic_metadata
        .as_ref()
        .and_then(|m| m.fields.get("descriptors"))
        .and_then(|v| match &v.kind {
            Some(Kind::ListValue(l)) => l.values.get(i),
            _ => None,
        })
        .and_then(|v| match &v.kind {
            Some(Kind::StructValue(s)) => Some(s),
            _ => None,
        });
    let count = |s: &Struct, name: &str| match s.fields.get(name)?.kind {
        // A count, exact up to 2^53 in a double; anything else is not one.
        Some(Kind::NumberValue(n))
            if n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_992.0 =>
        {
            Some(n as u64)
        }
        _ => None,
    };
    match fields {
        Some(s) => (count(s, "remaining"), count(s, "requestsPerUnit")),
        None => (None, None),
    }
}

fn limit_text(l: &RateLimit, exact_per_unit: Option<u64>) -> String {
    let per = format!(
        "{}/{}",
        exact_per_unit.unwrap_or(u64::from(l.requests_per_unit)),
        unit(l.unit).to_ascii_lowercase()
    );
    if l.name.is_empty() {
        per
    } else {
        format!("{per} ({})", l.name)
    }
}

fn row(
    descriptor: String,
    s: Option<&DescriptorStatus>,
    exact: (Option<u64>, Option<u64>),
) -> [String; 5] {
    let Some(s) = s else {
        return [
            descriptor,
            "(no status)".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ];
    };
    let remaining = if s.current_limit.is_none() && s.limit_remaining == 0 {
        "-".to_string()
    } else {
        exact.0.unwrap_or(u64::from(s.limit_remaining)).to_string()
    };
    [
        descriptor,
        code(s.code).to_string(),
        s.current_limit
            .as_ref()
            .map_or("-".into(), |l| limit_text(l, exact.1)),
        remaining,
        s.duration_until_reset.as_ref().map_or("-".into(), duration),
    ]
}

pub(super) fn table(report: &Report) -> String {
    let statuses = &report.response.statuses;
    let n = report.descriptors.len().max(statuses.len());
    let mut rows = vec![[
        "DESCRIPTOR".to_string(),
        "CODE".into(),
        "LIMIT".into(),
        "REMAINING".into(),
        "RESET".into(),
    ]];
    rows.extend((0..n).map(|i| {
        let d = report
            .descriptors
            .get(i)
            .map_or_else(|| format!("#{}", i + 1), |d| d.to_string());
        row(d, statuses.get(i), exact(&report.response, i))
    }));
    let widths: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for h in &report.response.response_headers_to_add {
        out.push_str(&format!("header: {}: {}\n", h.key, h.value));
    }
    out.push_str(&format!(
        "overall: {}\n",
        code(report.response.overall_code)
    ));
    out
}

pub(super) fn json(report: &Report) -> String {
    let r = &report.response;
    let headers = |hs: &[envoy_types::pb::envoy::config::core::v3::HeaderValue]| -> Value {
        hs.iter()
            .map(|h| json!({"key": h.key, "value": h.value}))
            .collect()
    };
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (remaining, per_unit) = exact(r, i);
            json!({
                "code": code(s.code),
                "currentLimit": s.current_limit.as_ref().map(|l| json!({
                    "name": l.name,
                    "requestsPerUnit": l.requests_per_unit,
                    "unit": unit(l.unit),
                })),
                "limitRemaining": s.limit_remaining,
                "durationUntilReset": s.duration_until_reset.as_ref().map(duration),
                "quota": s.quota.as_ref().map(quota),
                "exact": {"limitRemaining": remaining, "requestsPerUnit": per_unit},
            })
        })
        .collect();
    let v = json!({
        "overallCode": code(r.overall_code),
        "statuses": statuses,
        "responseHeadersToAdd": headers(&r.response_headers_to_add),
        "requestHeadersToAdd": headers(&r.request_headers_to_add),
        "rawBody": base64(&r.raw_body),
        "dynamicMetadata": r.dynamic_metadata.as_ref().map(struct_json),
        "quota": r.quota.as_ref().map(quota),
    });
    format!("{v}\n")
}

fn quota(q: &Quota) -> Value {
    json!({
        "requests": q.requests,
        "id": q.id,
        "validUntil": q.expiration_specifier.as_ref().map(|ExpirationSpecifier::ValidUntil(t)| timestamp(t)),
    })
}
