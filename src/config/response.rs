//! A rule's `response` (sluice extension): the body and headers Envoy sends with the 429
//! when this rule denies (`raw_body`, `content_type`, `headers`), and whether the rule shows
//! in the rate limit headers (`hidden`: not in sluice's; `hide_current_limit`: its status
//! carries no `current_limit`, so not in Envoy's `x-ratelimit-*` either).
//!
//! Checked here so that what reaches Envoy is a valid header: names are HTTP tokens (no
//! pseudo-headers), values carry no control characters, and the headers Envoy or the body
//! own (`content-type`, `content-length`, `connection`, `transfer-encoding`) are refused.

use super::limits::Problem;
use super::raw::RawResponse;
use super::yaml::Seg;

/// A rule's `response`, validated.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RuleResponse {
    /// Sent as the 429's body (`RateLimitResponse.raw_body`) when this rule denies.
    pub raw_body: Option<Box<[u8]>>,
    /// The body's `content-type` (Envoy sends `text/plain` otherwise).
    pub content_type: Option<String>,
    /// Added to the 429 when this rule denies, names lower case, in file order.
    pub headers: Vec<(String, String)>,
    /// Kept out of the rate limit headers sluice adds (`--response-headers`,
    /// `--retry-after-header`).
    pub hidden: bool,
    /// The status carries no `current_limit`: Envoy's `x-ratelimit-*` headers skip it too.
    pub hide_current_limit: bool,
}

impl super::Rule {
    /// Kept out of the rate limit headers sluice adds (`response: {hidden: true}`).
    pub fn hidden(&self) -> bool {
        self.response.as_ref().is_some_and(|r| r.hidden)
    }
}

/// Headers the body or Envoy own: a rule may not set them.
const RESERVED: &[(&str, &str)] = &[
    ("content-type", "use response.content_type"),
    ("content-length", "Envoy sets it from the body"),
    ("connection", "a hop-by-hop header"),
    ("transfer-encoding", "a hop-by-hop header"),
];

/// Validate `raw` for its descriptor: one without limits (`has_limits` false) or with an
/// `unlimited` one never denies, so a response there is a mistake, not a no-op.
pub(super) fn compile(
    raw: RawResponse,
    has_limits: bool,
    unlimited: bool,
) -> Result<RuleResponse, Problem> {
    let at = |field: &'static str| [Seg::Key("response"), Seg::Key(field)];
    if !has_limits {
        return Err(Problem::new(
            "response is only valid on a descriptor with rate_limit or rate_limits",
            &[Seg::Key("response")],
        ));
    }
    if unlimited {
        return Err(Problem::new(
            "should not specify response when unlimited",
            &[Seg::Key("response")],
        ));
    }
    if raw.raw_body.as_deref() == Some("") {
        return Err(Problem::new(
            "response.raw_body must not be empty",
            &at("raw_body"),
        ));
    }
    if let Some(ct) = &raw.content_type {
        if raw.raw_body.is_none() {
            return Err(Problem::new(
                "response.content_type needs response.raw_body",
                &at("content_type"),
            ));
        }
        if let Some(why) = bad_value(ct) {
            return Err(Problem::new(
                format!("response.content_type {why}"),
                &at("content_type"),
            ));
        }
    }
    if raw.hide_current_limit && !raw.hidden {
        return Err(Problem::new(
            "response.hide_current_limit needs response.hidden: true (a rule out of Envoy's \
             headers is out of sluice's too)",
            &at("hide_current_limit"),
        ));
    }
    let mut headers: Vec<(String, String)> = Vec::with_capacity(raw.headers.len());
    for (name, value) in raw.headers {
        let lower = name.to_ascii_lowercase();
        if let Some(why) = bad_name(&name) {
            return Err(Problem::new(
                format!("response.headers: '{name}' {why}"),
                &at("headers"),
            ));
        }
        if let Some((_, why)) = RESERVED.iter().find(|(n, _)| *n == lower) {
            return Err(Problem::new(
                format!("response.headers: '{name}' cannot be set here ({why})"),
                &at("headers"),
            ));
        }
        if headers.iter().any(|(n, _)| *n == lower) {
            return Err(Problem::new(
                format!("response.headers: '{name}' is given twice (names ignore case)"),
                &at("headers"),
            ));
        }
        if let Some(why) = bad_value(&value) {
            return Err(Problem::new(
                format!("response.headers: the value of '{name}' {why}"),
                &at("headers"),
            ));
        }
        headers.push((lower, value));
    }
    Ok(RuleResponse {
        raw_body: raw.raw_body.map(|b| b.into_bytes().into_boxed_slice()),
        content_type: raw.content_type,
        headers,
        hidden: raw.hidden,
        hide_current_limit: raw.hide_current_limit,
    })
}

/// Why `name` is not an HTTP header name (RFC 9110 token), if it is not.
fn bad_name(name: &str) -> Option<&'static str> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() {
        Some("is empty")
    } else if name.starts_with(':') {
        Some("is a pseudo-header")
    } else if !name.chars().all(token) {
        Some("is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)")
    } else {
        None
    }
}

/// Why `value` cannot be a header value, if it cannot: empty, or a control character
/// (tab aside), which Envoy would reject or a client misread.
fn bad_value(value: &str) -> Option<&'static str> {
    if value.trim().is_empty() {
        Some("must not be empty")
    } else if value.chars().any(|c| c.is_control() && c != '\t') {
        Some("must not contain control characters (line breaks included)")
    } else {
        None
    }
}
