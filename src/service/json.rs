//! `/json`: a `RateLimitRequest` in proto3 JSON (camelCase or snake_case field names) in,
//! a `RateLimitResponse` in proto3 JSON out (camelCase, enums as names, default values
//! omitted, durations as `"58s"`), like envoyproxy/ratelimit's endpoint.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as PbUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus,
};

use serde_json::{Map, Value, json};

use super::proto::{Entry, RateLimitDescriptor, RateLimitOverride, RateLimitRequest, UInt64Value};
use super::{RateLimitService, ServiceError};
use crate::protojson::{base64, duration, struct_json};

type Obj = Map<String, Value>;

/// How `/json` answers, in terms the HTTP layer maps to status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 200: every descriptor is within its limits.
    Ok,
    /// 429: the overall code is OVER_LIMIT.
    OverLimit,
    /// 400: the body is not a valid request.
    BadRequest,
    /// 503: the store could not decide, or no config is loaded yet.
    Unavailable,
}

/// One `/json` answer: its outcome and its body (JSON for `Ok` and `OverLimit`, text
/// otherwise).
pub struct Reply {
    pub outcome: Outcome,
    pub body: String,
}

/// Serve one `/json` request end to end.
pub async fn handle(service: &RateLimitService, body: &[u8]) -> Reply {
    let text = |outcome, body| Reply { outcome, body };
    let req = match parse_request(body) {
        Ok(r) => r,
        Err(e) => return text(Outcome::BadRequest, format!("Bad Request: {e}\n")),
    };
    match service.should_rate_limit(&req).await {
        Ok(resp) => Reply {
            outcome: if resp.overall_code == PbCode::OverLimit as i32 {
                Outcome::OverLimit
            } else {
                Outcome::Ok
            },
            body: render_response(&resp).to_string(),
        },
        Err(
            e @ (ServiceError::InvalidArgument(_)
            | ServiceError::Malformed(_)
            | ServiceError::TooLarge),
        ) => text(Outcome::BadRequest, format!("Bad Request: {e}\n")),
        // (The last four are the gRPC transport's, never `should_rate_limit`'s.)
        Err(
            e @ (ServiceError::Store(_)
            | ServiceError::NoConfig
            | ServiceError::DeadlineExceeded
            | ServiceError::Overloaded(_)
            | ServiceError::UnknownMethod
            | ServiceError::Encoding(_)),
        ) => text(Outcome::Unavailable, format!("{e}\n")),
    }
}

/// Why a `/json` body is not a request: the text after `Bad Request: `.
#[derive(Debug, thiserror::Error)]
pub enum BadBody {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("request must be a JSON object")]
    NotAnObject,
    #[error("descriptors[{0}]: {1}")]
    Descriptor(usize, #[source] Box<BadBody>),
    /// A field no message has, at the top or in a descriptor.
    #[error("unknown field '{0}'")]
    UnknownField(String),
    /// A field `entry` or `limit` does not have.
    #[error("{0}: unknown field '{1}'")]
    UnknownFieldOf(&'static str, String),
    /// A field whose value has the wrong type or range: the field, and what is wrong.
    #[error("{0}: {1}")]
    Value(String, &'static str),
    #[error("unit: unknown unit '{0}'")]
    UnknownUnit(String),
}

/// Parse a JSON request. The error text is returned to the client.
pub fn parse_request(body: &[u8]) -> Result<RateLimitRequest, BadBody> {
    let v: Value = serde_json::from_slice(body)?;
    let o = v.as_object().ok_or(BadBody::NotAnObject)?;
    let mut req = RateLimitRequest::default();
    for (k, v) in o {
        match k.as_str() {
            "domain" => req.domain = string(v, k)?,
            "descriptors" => {
                req.descriptors = array(v, k)?
                    .iter()
                    .enumerate()
                    .map(|(i, d)| descriptor(d).map_err(|e| BadBody::Descriptor(i, Box::new(e))))
                    .collect::<Result<_, _>>()?
            }
            "hitsAddend" | "hits_addend" => req.hits_addend = uint32(v, k)?,
            other => return Err(BadBody::UnknownField(other.to_owned())),
        }
    }
    Ok(req)
}

fn descriptor(v: &Value) -> Result<RateLimitDescriptor, BadBody> {
    let o = object(v, "descriptor")?;
    let mut d = RateLimitDescriptor::default();
    for (k, v) in o {
        match k.as_str() {
            "entries" => d.entries = array(v, k)?.iter().map(entry).collect::<Result<_, _>>()?,
            "limit" => d.limit = Some(limit_override(v)?),
            "hitsAddend" | "hits_addend" => {
                if !v.is_null() {
                    d.hits_addend = Some(UInt64Value { value: uint(v, k)? })
                }
            }
            "isNegativeHits" | "is_negative_hits" => {
                d.is_negative_hits = v.as_bool().ok_or_else(|| wrong(k, "expected a boolean"))?
            }
            other => return Err(BadBody::UnknownField(other.to_owned())),
        }
    }
    Ok(d)
}

fn entry(v: &Value) -> Result<Entry, BadBody> {
    let mut e = Entry::default();
    for (k, v) in object(v, "entry")? {
        match k.as_str() {
            "key" => e.key = string(v, k)?.into_bytes(),
            "value" => e.value = string(v, k)?.into_bytes(),
            other => return Err(BadBody::UnknownFieldOf("entry", other.to_owned())),
        }
    }
    Ok(e)
}

fn limit_override(v: &Value) -> Result<RateLimitOverride, BadBody> {
    let mut l = RateLimitOverride::default();
    for (k, v) in object(v, "limit")? {
        match k.as_str() {
            "requestsPerUnit" | "requests_per_unit" => l.requests_per_unit = uint32(v, k)?,
            "unit" => {
                l.unit = match v {
                    Value::String(s) => PbUnit::from_str_name(s)
                        .ok_or_else(|| BadBody::UnknownUnit(s.clone()))?
                        as i32,
                    Value::Number(_) => {
                        i32::try_from(uint(v, k)?).map_err(|_| wrong("unit", "out of range"))?
                    }
                    _ => return Err(wrong("unit", "expected a unit name")),
                }
            }
            other => return Err(BadBody::UnknownFieldOf("limit", other.to_owned())),
        }
    }
    Ok(l)
}

fn wrong(field: &str, problem: &'static str) -> BadBody {
    BadBody::Value(field.to_owned(), problem)
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Obj, BadBody> {
    v.as_object()
        .ok_or_else(|| wrong(what, "expected an object"))
}

fn array<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, BadBody> {
    v.as_array().ok_or_else(|| wrong(what, "expected an array"))
}

fn string(v: &Value, what: &str) -> Result<String, BadBody> {
    v.as_str()
        .map(String::from)
        .ok_or_else(|| wrong(what, "expected a string"))
}

/// Proto3 JSON integers may be numbers or decimal strings.
fn uint(v: &Value, what: &str) -> Result<u64, BadBody> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| wrong(what, "expected a non-negative integer"))
}

fn uint32(v: &Value, what: &str) -> Result<u32, BadBody> {
    u32::try_from(uint(v, what)?).map_err(|_| wrong(what, "out of range for uint32"))
}

/// Render a response as proto3 JSON.
pub fn render_response(resp: &RateLimitResponse) -> Value {
    let mut o = Obj::new();
    if let Ok(code) = PbCode::try_from(resp.overall_code)
        && code != PbCode::Unknown
    {
        o.insert("overallCode".into(), json!(code.as_str_name()));
    }
    if !resp.statuses.is_empty() {
        o.insert(
            "statuses".into(),
            Value::Array(resp.statuses.iter().map(status).collect()),
        );
    }
    let headers = |hs: &[HeaderValue]| {
        Value::Array(
            hs.iter()
                .map(|h| json!({"key": h.key, "value": h.value}))
                .collect(),
        )
    };
    if !resp.response_headers_to_add.is_empty() {
        o.insert(
            "responseHeadersToAdd".into(),
            headers(&resp.response_headers_to_add),
        );
    }
    if !resp.request_headers_to_add.is_empty() {
        o.insert(
            "requestHeadersToAdd".into(),
            headers(&resp.request_headers_to_add),
        );
    }
    if !resp.raw_body.is_empty() {
        o.insert("rawBody".into(), json!(base64(&resp.raw_body)));
    }
    if let Some(m) = &resp.dynamic_metadata {
        o.insert("dynamicMetadata".into(), struct_json(m));
    }
    Value::Object(o)
}

fn status(s: &DescriptorStatus) -> Value {
    let mut o = Obj::new();
    if let Ok(code) = PbCode::try_from(s.code)
        && code != PbCode::Unknown
    {
        o.insert("code".into(), json!(code.as_str_name()));
    }
    if let Some(l) = &s.current_limit {
        let mut c = Obj::new();
        if !l.name.is_empty() {
            c.insert("name".into(), json!(l.name));
        }
        if l.requests_per_unit != 0 {
            c.insert("requestsPerUnit".into(), json!(l.requests_per_unit));
        }
        if let Ok(u) = PbUnit::try_from(l.unit)
            && u != PbUnit::Unknown
        {
            c.insert("unit".into(), json!(u.as_str_name()));
        }
        o.insert("currentLimit".into(), Value::Object(c));
    }
    if s.limit_remaining != 0 {
        o.insert("limitRemaining".into(), json!(s.limit_remaining));
    }
    if let Some(d) = &s.duration_until_reset {
        o.insert("durationUntilReset".into(), json!(duration(d)));
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Duration;

    #[test]
    fn parses_camel_and_snake_case() {
        let r = parse_request(
            br#"{"domain":"d","hits_addend":2,"descriptors":[
                {"entries":[{"key":"k","value":"v"}],"hitsAddend":"0","isNegativeHits":true,
                 "limit":{"requestsPerUnit":5,"unit":"MINUTE"}},
                {"entries":[{"key":"a"}],"limit":{"requests_per_unit":"7","unit":7}}]}"#,
        )
        .unwrap();
        assert_eq!(r.domain, "d");
        assert_eq!(r.hits_addend, 2);
        assert_eq!(r.descriptors[0].hits_addend, Some(UInt64Value { value: 0 }));
        assert!(r.descriptors[0].is_negative_hits);
        let l = r.descriptors[0].limit.as_ref().unwrap();
        assert_eq!((l.requests_per_unit, l.unit), (5, PbUnit::Minute as i32));
        assert!(r.descriptors[1].entries[0].value.is_empty());
        assert_eq!(r.descriptors[1].limit.as_ref().unwrap().unit, 7);
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        for (body, want) in [
            (&b"nope"[..], "invalid JSON"),
            (b"[]", "JSON object"),
            (br#"{"domain":1}"#, "domain: expected a string"),
            (br#"{"domian":"x"}"#, "unknown field 'domian'"),
            (
                br#"{"descriptors":[{"entries":[{"key":"k","val":"v"}]}]}"#,
                "unknown field 'val'",
            ),
            (br#"{"hitsAddend":-1}"#, "non-negative integer"),
            (br#"{"hitsAddend":5000000000}"#, "out of range"),
            (
                br#"{"descriptors":[{"limit":{"unit":"FORTNIGHT"}}]}"#,
                "unknown unit",
            ),
        ] {
            let e = parse_request(body).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn renders_like_protojson() {
        let resp = RateLimitResponse {
            overall_code: PbCode::OverLimit as i32,
            statuses: vec![
                DescriptorStatus {
                    code: PbCode::OverLimit as i32,
                    current_limit: Some(
                        envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit {
                            name: String::new(),
                            requests_per_unit: 10,
                            unit: PbUnit::Minute as i32,
                        },
                    ),
                    limit_remaining: 0,
                    duration_until_reset: Some(Duration { seconds: 58, nanos: 0 }),
                    quota: None,
                },
                DescriptorStatus {
                    code: PbCode::Ok as i32,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            render_response(&resp),
            json!({"overallCode":"OVER_LIMIT","statuses":[
                {"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":10,"unit":"MINUTE"},
                 "durationUntilReset":"58s"},
                {"code":"OK"}]})
        );
    }
}
