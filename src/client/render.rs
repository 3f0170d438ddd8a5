//! A response for people (an aligned table) and for scripts (JSON with proto3 JSON names:
//! `overallCode`, `statuses[].limitRemaining`, durations as `"1.500s"`), every field of the
//! response present (`null` or empty when unset: `rawBody`, `dynamicMetadata`, `quota`) so
//! `jq` paths never miss.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::quota::ExpirationSpecifier;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, Quota, RateLimit,
};
use serde_json::{Value, json};

use super::Report;
use crate::protojson::{base64, duration, struct_json, timestamp};

fn code(c: i32) -> &'static str {
    Code::try_from(c).map_or("UNKNOWN", |c| c.as_str_name())
}

fn unit(u: i32) -> &'static str {
    Unit::try_from(u).map_or("UNKNOWN", |u| u.as_str_name())
}

fn limit_text(l: &RateLimit) -> String {
    let per = format!(
        "{}/{}",
        l.requests_per_unit,
        unit(l.unit).to_ascii_lowercase()
    );
    if l.name.is_empty() {
        per
    } else {
        format!("{per} ({})", l.name)
    }
}

fn row(descriptor: String, s: Option<&DescriptorStatus>) -> [String; 5] {
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
        s.limit_remaining.to_string()
    };
    [
        descriptor,
        code(s.code).to_string(),
        s.current_limit.as_ref().map_or("-".into(), limit_text),
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
        row(d, statuses.get(i))
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
        .map(|s| {
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
