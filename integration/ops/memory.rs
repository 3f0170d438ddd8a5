//! The memory store's cap through the binary: distinct descriptors beyond
//! `--memory-max-bytes` are absorbed by eviction, visible in the metrics, and a client at
//! its limit stays limited.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::support::sluice::*;

const RULES: &str = "domain: cap\ndescriptors:\n  - key: flood\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n  - key: strict\n    rate_limit: {unit: hour, requests_per_unit: 1}\n";

#[tokio::test]
async fn the_memory_store_stays_under_its_cap() {
    const CAP: f64 = 1_048_576.0;
    let s = sluice()
        .file("cap.yaml", RULES)
        .arg("--memory-max-bytes")
        .arg("1048576")
        .start()
        .await;
    let mut c = s.client().await;
    let strict = || req("cap", vec![desc(&[("strict", "me")])]);
    call(&mut c, strict()).await;
    assert_eq!(
        call(&mut c, strict()).await.overall_code,
        Code::OverLimit as i32
    );
    // 20 000 distinct descriptors, 64 per request: far more than 1 MiB of slots.
    for batch in 0..313 {
        let descriptors = (0..64)
            .map(|i| desc(&[("flood", &format!("{batch}-{i}"))]))
            .collect();
        call(&mut c, req("cap", descriptors)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let evictions = s.metric("sluice_memory_store_evictions_total").await;
        let bytes = s.metric("sluice_memory_store_bytes").await;
        if evictions > 0.0 {
            assert!(bytes > 0.0 && bytes <= CAP, "{bytes} bytes");
            break;
        }
        assert!(Instant::now() < deadline, "no eviction counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        call(&mut c, strict()).await.overall_code,
        Code::OverLimit as i32,
        "the flood gave a limited client its quota back"
    );
}
