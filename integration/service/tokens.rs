//! Token budgets through sluice in process: a budget past 2^32 on a calendar month, whose
//! status clamps the protocol's `uint32` fields at 4294967295 while decision metadata,
//! sluice's own headers, `/state` and `/explain` carry the exact counts; `hits_addend` up
//! to 2^53 and refused above with `INVALID_ARGUMENT` naming the bound; the reset at the
//! local month's end.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use serde_json::Value;

use super::limit_of;
use crate::support::in_process::*;
use crate::support::sluice::*;

const BUDGET: u64 = 30_000_000_000;

const RULES: &str = r#"
domain: llm
descriptors:
  - key: tenant
    rate_limit:
      unit: month
      requests_per_unit: 30000000000
      calendar: {time_zone: Asia/Kolkata}
      name: monthly_tokens
"#;

/// The test clock's month in Kolkata (it stands at 2023-11-15T00:00:01Z): November, from
/// 2023-10-31T18:30Z to 2023-11-30T18:30Z.
const MONTH_END: u64 = 1_701_369_000_000;
const NEXT_MONTH_END: u64 = 1_704_047_400_000;

async fn server() -> Server {
    in_process()
        .file("llm.yaml", RULES)
        .env("SLUICE_DECISION_METADATA", "true")
        .arg("--response-headers")
        .start()
        .await
}

#[tokio::test]
async fn a_budget_past_2_to_the_32_is_clamped_on_the_wire_and_exact_elsewhere() {
    let s = server().await;
    let mut c = s.client().await;
    // The check at arrival: cost 0.
    let r = call(
        &mut c,
        req("llm", vec![desc_hits(&[("tenant", "acme")], 0)]),
    )
    .await;
    let st = &r.statuses[0];
    assert_eq!(
        limit_of(st),
        (u32::MAX, Unit::Month as i32, "monthly_tokens".into())
    );
    assert_eq!(st.limit_remaining, u32::MAX);
    // Until 18:30 UTC on the last day of the month (whole seconds: a fixed window's).
    let reset = st.duration_until_reset.expect("reset");
    assert_eq!(
        reset.seconds as u64,
        (MONTH_END - s.now_ms()).div_ceil(1000)
    );
    let m = metadata_json(&r);
    assert_eq!(m["descriptors"][0]["remaining"], BUDGET as f64, "{m}");
    assert_eq!(m["descriptors"][0]["requestsPerUnit"], BUDGET as f64, "{m}");
    assert_eq!(header(&r, "RateLimit-Limit"), Some("30000000000"));
    assert_eq!(header(&r, "RateLimit-Remaining"), Some("30000000000"));

    // The tokens at stream end: a descriptor hits_addend past 2^32.
    let used = 29_999_999_990;
    let r = call(
        &mut c,
        req("llm", vec![desc_hits(&[("tenant", "acme")], used)]),
    )
    .await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 10);
    assert_eq!(metadata_json(&r)["descriptors"][0]["remaining"], 10.0);

    // /state and /explain: exact numbers, the zone named.
    let admin = s.admin.expect("admin listener");
    let (code, body) =
        http_request(admin, "GET", "/state?domain=llm&descriptor=tenant=acme", "").await;
    assert_eq!(code, 200, "{body}");
    let state: Value = serde_json::from_str(&body).expect("json");
    let l = &state["limits"][0];
    assert_eq!(l["requests_per_unit"], BUDGET, "{state}");
    assert_eq!(l["time_zone"], "Asia/Kolkata", "{state}");
    assert_eq!(
        (l["used"].as_u64(), l["remaining"].as_u64()),
        (Some(used), Some(10))
    );
    assert_eq!(l["reset_ms"].as_u64(), Some(MONTH_END - s.now_ms()));
    let (code, body) = s
        .http_get("/explain?domain=llm&descriptor=tenant=acme")
        .await;
    assert_eq!(code, 200, "{body}");
    let e: Value = serde_json::from_str(&body).expect("json");
    let l = &e["descriptors"][0]["limits"][0];
    assert_eq!(l["requests_per_unit"], BUDGET, "{e}");
    assert_eq!(l["current_limit"]["requests_per_unit"], u32::MAX, "{e}");
    assert!(
        l["redis_key"]
            .as_str()
            .is_some_and(|k| k.ends_with(":1:month@Asia/Kolkata:0:0:h")),
        "{e}"
    );
}

#[tokio::test]
async fn the_budget_comes_back_at_the_local_month_end() {
    let s = server().await;
    let mut c = s.client().await;
    let spend = |n| req("llm", vec![desc_hits(&[("tenant", "acme")], n)]);
    assert_eq!(
        call(&mut c, spend(BUDGET)).await.overall_code,
        Code::Ok as i32
    );
    let r = call(&mut c, spend(1)).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    // What Envoy turns into Retry-After: until the local month ends.
    let wait = r.statuses[0].duration_until_reset.expect("reset");
    assert_eq!(wait.seconds as u64, (MONTH_END - s.now_ms()).div_ceil(1000));
    s.clock().set(MONTH_END - 1);
    assert_eq!(
        call(&mut c, spend(0)).await.overall_code,
        Code::OverLimit as i32
    );
    s.clock().set(MONTH_END);
    let r = call(&mut c, spend(7)).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(
        metadata_json(&r)["descriptors"][0]["remaining"],
        (BUDGET - 7) as f64
    );
    assert_eq!(
        r.statuses[0].duration_until_reset.expect("reset").seconds as u64,
        (NEXT_MONTH_END - MONTH_END) / 1000
    );
}

#[tokio::test]
async fn hits_addend_goes_to_2_to_the_53_and_no_further() {
    let s = server().await;
    let mut c = s.client().await;
    let most = 1u64 << 53;
    let r = call(
        &mut c,
        req("llm", vec![desc_hits(&[("tenant", "big")], most)]),
    )
    .await;
    assert_eq!(r.overall_code, Code::OverLimit as i32, "2^53 > the budget");
    let e = c
        .should_rate_limit(req("llm", vec![desc_hits(&[("tenant", "big")], most + 1)]))
        .await
        .expect_err("above 2^53");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "descriptor 0: hits_addend 9007199254740993 exceeds the maximum 9007199254740992"
    );
    // /json takes the same counts.
    let (code, body) = s
        .http_post(
            "/json",
            r#"{"domain":"llm","descriptors":[{"entries":[{"key":"tenant","value":"json"}],"hitsAddend":"29999999999"}]}"#,
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["statuses"][0]["limitRemaining"], 1, "{v}");
}
