//! Redis frozen (SIGSTOP) under traffic for many write-back deadlines, then resumed: the
//! calls it took while frozen run late, the write-backs that timed out are sent again, and
//! the store still holds each admitted hit once.

use std::time::Duration;

use super::*;

/// Traffic, Redis frozen for `freeze`, resumed, traffic again, with
/// `--store-failure-mode <mode>`; then what was admitted and what Redis holds.
pub async fn freeze(freeze: Duration, mode: &str) -> Outcome {
    let mut redis = RedisServer::start();
    let s = start_mode(&redis, mode, &[]).await;
    let traffic = Traffic::start(&s).await;
    more_calls(&traffic, 200).await;
    let errors_before = store_errors(&s).await;
    redis.pause();
    through_outage(
        &s,
        &mut redis,
        traffic,
        errors_before,
        freeze,
        mode == "local",
        |r| r.resume(),
    )
    .await
}

/// (a) A freeze of 4 s, against a write-back deadline of 300 ms (connect 200 ms + call
/// 100 ms) and a call deadline of 100 ms: a dozen write-backs and every call in flight time
/// out with Redis holding them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_freeze_under_traffic_counts_each_admitted_hit_once() {
    let o = freeze(Duration::from_secs(4), "local").await;
    eprintln!("freeze 4 s: {o:?}");
    assert_eq!(o.errors, 0, "the fallback answers");
    assert_eq!(o.held, o.admitted, "held == admitted (strict, batched)");
    // (d) The failures were counted, with the fallback on.
    assert!(
        o.store_errors > 0.0,
        "no store error counted through the freeze"
    );
}
