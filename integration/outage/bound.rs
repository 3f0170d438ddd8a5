//! (c) `--local-view-max-keys N` bounds the descriptors the view holds in all, whatever
//! shards they fall in: during an outage, N−1 new descriptors lose no hit; N+k hold exactly
//! N, the k others' hits admitted from the share and counted as overflow. The degraded
//! gauge reads 1 from the first local decision on, and (d) the failures are counted as store
//! errors with the fallback on.

use super::*;

const N: usize = 8;

/// Two hits on `new=<v>` for each value, one call at a time.
async fn two_hits_each(s: &Server, values: impl Iterator<Item = String>) -> u64 {
    let mut c = s.client().await;
    let mut ok = 0;
    for v in values {
        for _ in 0..2 {
            let r = call(&mut c, req("o", vec![desc(&[("new", &v)])])).await;
            if r.overall_code == Code::Ok as i32 {
                ok += 1;
            }
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_holds_max_keys_descriptors_in_all() {
    let mut redis = RedisServer::start();
    let s = start(&redis, &["--local-view-max-keys", &N.to_string()]).await;
    assert_eq!(s.metric("sluice_store_degraded").await, 0.0);
    let errors_before = store_errors(&s).await;
    redis.kill();

    // The first decision made locally: the gauge says so by the time its answer is back.
    let mut c = s.client().await;
    let r = call(&mut c, req("o", vec![desc(&[("new", "a0")])])).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(s.metric("sluice_store_degraded").await, 1.0);
    let r = call(&mut c, req("o", vec![desc(&[("new", "a0")])])).await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    // N−1 descriptors in all, two hits each: none lost.
    let ok = 2 + two_hits_each(&s, (1..N - 1).map(|i| format!("a{i}"))).await;
    assert_eq!(ok, 2 * (N as u64 - 1));
    assert!(
        s.http_get("/healthcheck").await.0 == 200,
        "SERVING while degraded"
    );
    redis.restart();
    settled(&s).await;
    for i in 0..N - 1 {
        assert_eq!(stored(&redis, ("new", &format!("a{i}")), 100), 2, "a{i}");
    }
    assert!(wait_metric(&s, "sluice_local_view_keys", (N - 1) as f64).await);
    assert_eq!(s.metric("sluice_local_view_overflow_total").await, 0.0);

    // Another outage, k + 1 new descriptors: one more fits, the k others overflow.
    let k = 5;
    redis.kill();
    let ok = two_hits_each(&s, (0..=k).map(|i| format!("b{i}"))).await;
    assert_eq!(
        ok,
        2 * (k as u64 + 1),
        "admitted from the share all the same"
    );
    redis.restart();
    settled(&s).await;
    assert!(
        wait_metric(&s, "sluice_local_view_overflow_total", 2.0 * k as f64).await,
        "overflow: {}",
        s.metric("sluice_local_view_overflow_total").await
    );
    assert!(wait_metric(&s, "sluice_local_view_keys", N as f64).await);
    assert_eq!(stored(&redis, ("new", "b0"), 100), 2);
    for i in 1..=k {
        assert_eq!(stored(&redis, ("new", &format!("b{i}")), 100), 0, "b{i}");
    }
    // (d) Counted with the fallback on: the calls that failed, the write-backs that did.
    let errors = store_errors(&s).await - errors_before;
    assert!(errors >= 2.0, "store errors counted: {errors}");
    assert!(s.logs().iter().any(|l| l.contains("local view full")));
}
