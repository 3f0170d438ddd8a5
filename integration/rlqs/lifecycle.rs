//! RLQS lifecycle: idle buckets abandoned, TTL 0 on shutdown, a reload recomputing every
//! share.

use std::time::Duration;

use super::*;

#[tokio::test]
async fn idle_buckets_are_abandoned() {
    let s = start(&["--rlqs-abandon-after", "300ms"]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    assert_eq!(tokens(&e.report(&api, 1, 0).await), 99);
    // Reports without requests (as Envoy sends for every bucket it holds) keep no bucket
    // alive: the next message is the abandonment.
    e.send(vec![usage(&api, 0, 0, 100)]).await;
    let a = e.action_for(&api).await;
    assert!(matches!(got(&a).0, Got::Abandon), "{a:?}");
    assert_eq!(s.metric("sluice_rlqs_buckets{domain=\"rlqs\"}").await, 0.0);
    // Its next hit subscribes again.
    assert_eq!(tokens(&e.report(&api, 1, 0).await), 99);
}

#[tokio::test]
async fn shutdown_sends_ttl_zero_and_ends_the_stream() {
    let mut s = start(&[]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    let open = bucket(&[("name", "open")]);
    e.send(vec![usage(&api, 1, 0, 1000), usage(&open, 1, 0, 1000)])
        .await;
    let first = e.next().await.unwrap().unwrap();
    assert_eq!(first.bucket_action.len(), 2);
    s.signal("TERM");
    let last = e
        .next()
        .await
        .expect("no error")
        .expect("the TTL-0 assignments");
    assert_eq!(last.bucket_action.len(), 2, "{last:?}");
    for a in &last.bucket_action {
        let (g, ttl) = got(a);
        assert_eq!(ttl, Some(0), "{a:?}");
        // The same strategy, expiring now.
        let b = a.bucket_id.as_ref().unwrap();
        match (b == &api, g) {
            (true, Got::Tokens { tokens: 99, .. }) | (false, Got::Allow) => {}
            _ => panic!("{a:?}"),
        }
    }
    // Then the stream ends cleanly, and the process exits.
    assert!(matches!(e.next().await, Ok(None)));
    assert!(s.wait_exit(Duration::from_secs(20)).await.is_some());
}

#[tokio::test]
async fn a_reload_recomputes_every_share() {
    let s = start(&[]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    assert_eq!(tokens(&e.report(&api, 1, 0).await), 99);
    write(
        &s.config_path("rlqs.yaml"),
        &RULES.replace("requests_per_unit: 100", "requests_per_unit: 1000"),
    );
    // No report needed: the new limit is pushed.
    let a = e.action_for(&api).await;
    match got(&a).0 {
        Got::Tokens {
            tokens, fill_ms, ..
        } => assert_eq!((tokens, fill_ms), (990, 60_000)),
        _ => panic!("{a:?}"),
    }
}
