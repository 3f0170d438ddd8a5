//! The local decisions are on `/metrics` with the degraded state they come with: a scrape
//! that reads `sluice_store_degraded 1` reads every local decision made so far, whenever
//! the batch task last published (here: not since startup).

use super::*;
use crate::support::http::metric_value;
use crate::support::redis::free_port;

#[tokio::test]
async fn a_scrape_reads_the_local_decisions_with_the_degraded_gauge() {
    let port = free_port();
    let s = in_process()
        .file("d.yaml", RULES)
        .args(["--redis-url", &format!("redis://127.0.0.1:{port}/")])
        .args([
            "--redis-timeout",
            "100ms",
            "--redis-connect-timeout",
            "200ms",
        ])
        .args(["--store-failure-mode", "local"])
        // The batch task publishes once a minute: within the test, only the scrape can.
        .args(["--batch-interval", "60s"])
        .start()
        .await;
    let mut c = s.client().await;
    for _ in 0..5 {
        // Decided locally (a share of the limit for descriptors never seen in the store).
        call(
            &mut c,
            req("d", vec![desc(&[("k", "a")]), desc(&[("k", "b")])]),
        )
        .await;
    }
    let (_, body) = s.http_get("/metrics").await;
    let value = |series: &str| metric_value(&body, series).unwrap_or(0.0);
    assert_eq!(value("sluice_store_degraded"), 1.0, "{body}");
    let local: f64 = ["batched", "store_failure", "overload"]
        .iter()
        .map(|r| value(&format!("sluice_local_decisions_total{{reason=\"{r}\"}}")))
        .sum();
    assert_eq!(local, 10.0, "{body}");
}
