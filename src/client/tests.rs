//! The query client's pieces that need no server: targets, the request, rendering.

use std::path::PathBuf;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    DescriptorStatus, RateLimit,
};
use envoy_types::pb::google::protobuf::Duration;

use super::*;
use crate::settings::{Invocation, parse_descriptor, resolve};

fn args(argv: &[&str]) -> QueryArgs {
    let mut full = vec!["sluice", "query"];
    full.extend_from_slice(argv);
    match resolve(full, &|_| None).expect("arguments parse") {
        Invocation::Query(q) => *q,
        _ => panic!("not query"),
    }
}

/// The target of a query of `k=v` in domain `d` with these options.
fn target_of(options: &[&str]) -> Result<Target, ClientError> {
    target(&args(&[options, &["--domain", "d", "-d", "k=v"]].concat()))
}

#[test]
fn targets_from_addresses_and_tls_options() {
    let plain = target_of(&[]).unwrap();
    assert_eq!(plain.authority, "localhost:8081");
    assert!(plain.tls.is_none());

    let https = target_of(&["--addr", "https://rls.example:443"]).unwrap();
    let tls = https.tls.expect("https implies TLS");
    assert_eq!(tls.server_name, "rls.example");
    assert_eq!(tls.files, ClientTlsFiles::default());

    let mtls = target_of(&[
        "--addr",
        "[::1]:8081",
        "--ca",
        "ca.pem",
        "--cert",
        "c.pem",
        "--key",
        "k.pem",
    ])
    .unwrap();
    let tls = mtls.tls.expect("--ca implies TLS");
    assert_eq!(tls.server_name, "::1");
    assert_eq!(tls.files.ca, Some(PathBuf::from("ca.pem")));
    assert_eq!(tls.files.cert, Some(PathBuf::from("c.pem")));

    let named = target_of(&[
        "--tls",
        "--server-name",
        "sluice.internal",
        "--addr",
        "10.0.0.1:8081",
    ])
    .unwrap();
    assert_eq!(named.tls.unwrap().server_name, "sluice.internal");

    for bad in ["localhost", "http://", "a b:1"] {
        let e = target_of(&["--addr", bad]).unwrap_err();
        assert!(matches!(e, ClientError::Address(_)), "{bad}: {e}");
    }
}

#[test]
fn requests_carry_every_descriptor_and_the_hits() {
    let r = request(&args(&[
        "--domain", "edge", "-d", "a=1,b=2", "-d", "c=3", "--hits", "5",
    ]));
    assert_eq!(r.domain, "edge");
    assert_eq!(r.hits_addend, 5);
    assert_eq!(r.descriptors.len(), 2);
    assert_eq!(r.descriptors[0].entries[1].key, "b");
    assert_eq!(r.descriptors[0].hits_addend, None);

    let peek = request(&args(&["--domain", "edge", "-d", "a=1", "--hits", "0"]));
    assert_eq!(
        peek.descriptors[0].hits_addend.as_ref().map(|h| h.value),
        Some(0)
    );
}

fn report(overall: Code, statuses: Vec<DescriptorStatus>) -> Report {
    Report {
        descriptors: vec![
            parse_descriptor("remote_address=10.0.0.1").unwrap(),
            parse_descriptor("nothing=here").unwrap(),
        ],
        response: RateLimitResponse {
            overall_code: overall as i32,
            statuses,
            response_headers_to_add: vec![HeaderValue {
                key: "RateLimit-Limit".into(),
                value: "50".into(),
                ..Default::default()
            }],
            ..Default::default()
        },
    }
}

fn limited() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::OverLimit as i32,
        current_limit: Some(RateLimit {
            name: "per_address".into(),
            requests_per_unit: 50,
            unit: 1,
        }),
        limit_remaining: 0,
        duration_until_reset: Some(Duration {
            seconds: 0,
            nanos: 250_000_000,
        }),
        ..Default::default()
    }
}

fn unmatched() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        ..Default::default()
    }
}

#[test]
fn exit_codes_follow_the_overall_code() {
    assert_eq!(report(Code::Ok, vec![]).exit_code(), 0);
    assert_eq!(report(Code::OverLimit, vec![]).exit_code(), 1);
    assert_eq!(report(Code::Unknown, vec![]).exit_code(), 2);
}

#[test]
fn the_table_lines_up_every_descriptor() {
    let t = report(Code::OverLimit, vec![limited(), unmatched()]).table();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 5, "{t}");
    assert_eq!(lines[3], "header: RateLimit-Limit: 50");
    assert_eq!(
        lines[0],
        "DESCRIPTOR               CODE        LIMIT                    REMAINING  RESET"
    );
    assert_eq!(
        lines[1],
        "remote_address=10.0.0.1  OVER_LIMIT  50/second (per_address)  0          0.250s"
    );
    assert_eq!(
        lines[2],
        "nothing=here             OK          -                        -          -"
    );
    assert_eq!(lines[4], "overall: OVER_LIMIT");
}

#[test]
fn json_has_proto3_names_and_every_field() {
    let j: serde_json::Value =
        serde_json::from_str(&report(Code::OverLimit, vec![limited(), unmatched()]).json())
            .unwrap();
    assert_eq!(j["overallCode"], "OVER_LIMIT");
    assert_eq!(j["statuses"][0]["currentLimit"]["unit"], "SECOND");
    assert_eq!(j["statuses"][0]["currentLimit"]["requestsPerUnit"], 50);
    assert_eq!(j["statuses"][0]["durationUntilReset"], "0.250s");
    assert_eq!(j["statuses"][1]["limitRemaining"], 0);
    assert!(j["statuses"][1]["currentLimit"].is_null());
    assert_eq!(j["responseHeadersToAdd"][0]["key"], "RateLimit-Limit");
}

#[test]
fn hits_past_the_request_field_go_in_each_descriptor() {
    let r = request(&args(&[
        "--domain",
        "llm",
        "-d",
        "tenant=a",
        "-d",
        "tenant=b",
        "--hits",
        "30000000000",
    ]));
    for d in &r.descriptors {
        assert_eq!(
            d.hits_addend.as_ref().map(|h| h.value),
            Some(30_000_000_000)
        );
    }
    assert_eq!(r.hits_addend, u32::MAX);
}

/// A status whose counts the protocol clamped, with the server's decision metadata beside.
fn clamped_with_metadata() -> Report {
    use envoy_types::pb::google::protobuf::value::Kind;
    use envoy_types::pb::google::protobuf::{ListValue, Struct, Value};
    let number = |n: f64| Value {
        kind: Some(Kind::NumberValue(n)),
    };
    let descriptor = Struct {
        fields: [
            ("remaining".to_owned(), number(29_999_999_990.0)),
            ("requestsPerUnit".to_owned(), number(30_000_000_000.0)),
        ]
        .into_iter()
        .collect(),
    };
    let mut r = report(Code::Ok, vec![]);
    r.descriptors.truncate(1);
    r.response.response_headers_to_add.clear();
    r.response.statuses = vec![DescriptorStatus {
        code: Code::Ok as i32,
        current_limit: Some(RateLimit {
            name: String::new(),
            requests_per_unit: u32::MAX,
            unit: 5,
        }),
        limit_remaining: u32::MAX,
        ..Default::default()
    }];
    r.response.dynamic_metadata = Some(Struct {
        fields: [(
            "descriptors".to_owned(),
            Value {
                kind: Some(Kind::ListValue(ListValue {
                    values: vec![Value {
                        kind: Some(Kind::StructValue(descriptor)),
                    }],
                })),
            },
        )]
        .into_iter()
        .collect(),
    });
    r
}

#[test]
fn exact_counts_come_from_the_decision_metadata() {
    let r = clamped_with_metadata();
    let t = r.table();
    assert!(t.contains("30000000000/month"), "{t}");
    assert!(t.contains("29999999990"), "{t}");
    assert!(!t.contains("4294967295"), "{t}");
    let j: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
    assert_eq!(j["statuses"][0]["limitRemaining"], u32::MAX);
    assert_eq!(
        j["statuses"][0]["exact"]["limitRemaining"],
        29_999_999_990u64
    );
    assert_eq!(
        j["statuses"][0]["exact"]["requestsPerUnit"],
        30_000_000_000u64
    );
    // Without metadata: the status's own counts, and null where nothing exact is known.
    let mut plain = r;
    plain.response.dynamic_metadata = None;
    let j: serde_json::Value = serde_json::from_str(&plain.json()).unwrap();
    assert!(j["statuses"][0]["exact"]["limitRemaining"].is_null());
    assert!(plain.table().contains("4294967295"));
}
