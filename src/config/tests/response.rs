//! A rule's `response`: what it compiles to, and one error per check (with its line).

use super::{build_files, inline, load_str};
use crate::config::RuleResponse;

const GOOD: &str = r#"domain: r
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10}
    response:
      raw_body: '{"error": "slow down"}'
      content_type: application/json
      headers:
        X-RateLimit-Rule: per-ip
        retry-hint: 7
      hidden: true
      hide_current_limit: true
  - key: quiet
    rate_limit: {unit: second, requests_per_unit: 10}
    response: {hidden: true}
"#;

fn response(c: &crate::config::RateLimitConfig, key: &str) -> Option<RuleResponse> {
    let m = c.domain("r")?.find(&[(key, "x")])?;
    m.rule.response.as_deref().map(|r| RuleResponse {
        raw_body: r.raw_body.clone(),
        content_type: r.content_type.clone(),
        headers: r.headers.clone(),
        hidden: r.hidden,
        hide_current_limit: r.hide_current_limit,
    })
}

#[test]
fn compiles_with_lower_case_names_in_file_order() {
    let c = load_str(GOOD);
    let r = response(&c, "ip").expect("ip has a response");
    assert_eq!(
        r,
        RuleResponse {
            raw_body: Some(br#"{"error": "slow down"}"#.to_vec().into()),
            content_type: Some("application/json".into()),
            headers: vec![
                ("x-ratelimit-rule".into(), "per-ip".into()),
                ("retry-hint".into(), "7".into()),
            ],
            hidden: true,
            hide_current_limit: true,
        }
    );
    let q = response(&c, "quiet").expect("quiet has a response");
    assert!(q.hidden && !q.hide_current_limit && q.raw_body.is_none());
    assert!(
        c.domain("r")
            .and_then(|d| d.find(&[("ip", "x")]))
            .is_some_and(|m| m.rule.hidden())
    );
}

/// The one error of `response` written under a `key: k` descriptor with `limit`, and its
/// line (a check of the whole `response` points at its first field).
fn error(limit: &str, response: &str) -> (String, Option<usize>) {
    let file = format!("domain: r\ndescriptors:\n  - key: k\n{limit}    response:\n{response}");
    match build_files(&[inline("bad.yaml", &file)], false) {
        Ok(_) => panic!("should be rejected:\n{file}"),
        Err(e) => (e[0].message.clone(), e[0].line),
    }
}

const LIMIT: &str = "    rate_limit: {unit: second, requests_per_unit: 1}\n";

#[test]
fn every_check_names_its_field_and_line() {
    let cases: &[(&str, &str, &str, usize)] = &[
        (
            "",
            "      hidden: true\n",
            "bad.yaml: response is only valid on a descriptor with rate_limit or rate_limits",
            5,
        ),
        (
            "    rate_limit: {unlimited: true}\n",
            "      hidden: true\n",
            "bad.yaml: should not specify response when unlimited",
            6,
        ),
        (
            LIMIT,
            "      raw_body: ''\n",
            "bad.yaml: response.raw_body must not be empty",
            6,
        ),
        (
            LIMIT,
            "      content_type: text/html\n",
            "bad.yaml: response.content_type needs response.raw_body",
            6,
        ),
        (
            LIMIT,
            "      raw_body: x\n      content_type: \"a\\nb\"\n",
            "bad.yaml: response.content_type must not contain control characters (line breaks included)",
            7,
        ),
        (
            LIMIT,
            "      hide_current_limit: true\n",
            "bad.yaml: response.hide_current_limit needs response.hidden: true (a rule out of Envoy's headers is out of sluice's too)",
            6,
        ),
        (
            LIMIT,
            "      headers: {':status': '500'}\n",
            "bad.yaml: response.headers: ':status' is a pseudo-header",
            6,
        ),
        (
            LIMIT,
            "      headers: {'bad name': x}\n",
            "bad.yaml: response.headers: 'bad name' is not a valid header name (letters, digits and !#$%&'*+-.^_`|~)",
            6,
        ),
        (
            LIMIT,
            "      headers: {Content-Type: text/html}\n",
            "bad.yaml: response.headers: 'Content-Type' cannot be set here (use response.content_type)",
            6,
        ),
        (
            LIMIT,
            "      headers: {x-a: '1', X-A: '2'}\n",
            "bad.yaml: response.headers: 'X-A' is given twice (names ignore case)",
            6,
        ),
        (
            LIMIT,
            "      headers: {x-a: \"1\\r\\nx-b: 2\"}\n",
            "bad.yaml: response.headers: the value of 'x-a' must not contain control characters (line breaks included)",
            6,
        ),
    ];
    for (limit, response, message, line) in cases {
        let (got, at) = error(limit, response);
        assert_eq!(&got, message, "{response}");
        assert_eq!(at, Some(*line), "{response}");
    }
}

#[test]
fn shapes_and_keys_are_checked_before_validation() {
    let (m, _) = error(LIMIT, "      headers: [x]\n");
    assert!(
        m.contains("'headers' must be a mapping of header names to strings"),
        "{m}"
    );
    let (m, _) = error(LIMIT, "      headers: {x-a: [1]}\n");
    assert!(
        m.contains("'headers' must be a mapping of header names to strings"),
        "{m}"
    );
    let (m, _) = error(LIMIT, "      body: x\n");
    assert!(m.contains("config error, unknown key 'body'"), "{m}");
    let (m, _) = error(LIMIT, "      unit: second\n");
    assert!(
        m.contains("key 'unit' is not allowed in response (it belongs in rate_limit)"),
        "{m}"
    );
    let (m, _) = error(LIMIT, "      hidden: maybe\n");
    assert!(m.contains("'hidden' must be true or false"), "{m}");
}
