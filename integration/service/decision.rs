//! `--decision-metadata` (`SLUICE_DECISION_METADATA`): each descriptor's decision in the
//! response's dynamic metadata, on every response, with #1239's names where they overlap;
//! nothing when off; a rule's own `metadata` never overwrites it.

use serde_json::json;

use crate::support::sluice::*;

const RULES: &str = r#"
domain: m
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 1000, name: per_ip}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata:
      code: from-the-rule
      overallCode: from-the-rule
      decidingRule: from-the-rule
      descriptors: from-the-rule
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0, name: would_deny}
  - key: free
    rate_limit: {unlimited: true}
"#;

fn ask(user: &str) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    req(
        "m",
        vec![
            desc(&[("ip", "10.0.0.1")]),
            desc(&[("user", user)]),
            desc(&[("none", "x")]),
            desc(&[("shadow", "s")]),
            desc(&[("free", "f")]),
        ],
    )
}

#[tokio::test]
async fn every_descriptor_reports_its_decision_on_every_response() {
    let s = sluice()
        .file("m.yaml", RULES)
        .env("SLUICE_DECISION_METADATA", "true")
        .start()
        .await;
    let mut c = s.client().await;
    let ok = metadata_json(&call(&mut c, ask("alice")).await);
    assert_eq!(ok["overallCode"], "OK", "{ok}");
    assert!(ok.get("decidingRule").is_none(), "{ok}");
    assert_eq!(ok["domain"], "m");
    let d = &ok["descriptors"];
    assert_eq!(
        d[0],
        json!({"entries": ["ip=10.0.0.1"], "code": "OK", "rule": "m.ip", "limitName": "per_ip",
               "unit": "SECOND", "remaining": 999.0, "requestsPerUnit": 1000.0})
    );
    assert_eq!(d[1]["code"], "OK");
    assert_eq!(d[1]["rule"], "m.user");
    assert_eq!(d[1]["remaining"], 0.0);
    assert!(
        d[1].get("limitName").is_none(),
        "no name, no limitName: {}",
        d[1]
    );
    // No rule: the code alone.
    assert_eq!(d[2], json!({"entries": ["none=x"], "code": "OK"}));
    // Shadow mode: OK, and said so.
    assert_eq!(d[3]["code"], "OK");
    assert_eq!(d[3]["shadowed"], true);
    assert_eq!(d[3]["limitName"], "would_deny");
    assert_eq!(
        d[4],
        json!({"entries": ["free=f"], "code": "OK", "rule": "m.free"})
    );

    let over = metadata_json(&call(&mut c, ask("alice")).await);
    assert_eq!(over["overallCode"], "OVER_LIMIT", "{over}");
    assert_eq!(over["decidingRule"], "m.user");
    assert_eq!(over["descriptors"][1]["code"], "OVER_LIMIT");
    assert_eq!(over["descriptors"][0]["code"], "OK");
    // The rule's metadata stays under `metadata`, and only for passed descriptors: its
    // keys named like the decision's never replace them.
    assert!(over.get("metadata").is_none(), "{over}");
    let passed = metadata_json(&call(&mut c, ask("bob")).await);
    assert_eq!(passed["metadata"]["code"], "from-the-rule");
    assert_eq!(passed["overallCode"], "OK");
    assert_eq!(passed["descriptors"][1]["code"], "OK");
    assert!(passed["descriptors"].is_array());
}

#[tokio::test]
async fn nothing_without_the_setting_and_theirs_alone_is_unchanged() {
    let s = sluice().file("m.yaml", RULES).start().await;
    let r = call(&mut s.client().await, ask("alice")).await;
    assert!(r.dynamic_metadata.is_none(), "{r:?}");

    let theirs = sluice()
        .file("m.yaml", RULES)
        .env("RESPONSE_DYNAMIC_METADATA", "true")
        .start()
        .await;
    let md = metadata_json(&call(&mut theirs.client().await, ask("alice")).await);
    assert!(md.get("overallCode").is_none(), "{md}");
    assert_eq!(md["descriptors"][0], json!({"entries": ["ip=10.0.0.1"]}));
}
