//! Redis killed under traffic: restarted empty, the store holds exactly the hits admitted
//! since it went (those before went with it); restarted from its append-only file with
//! `appendfsync always`, every hit admitted, before and during: nothing lost, nothing
//! doubled, including the calls it applied and persisted but never answered.

use std::time::Duration;

use super::*;

/// Redis killed for `outage` and restarted from its append-only file (`appendfsync
/// always`), traffic throughout.
pub async fn kill_aof(outage: Duration) -> Outcome {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let s = start(&redis, &[]).await;
    let traffic = Traffic::start(&s).await;
    more_calls(&traffic, 300).await;
    let errors_before = store_errors(&s).await;
    redis.kill();
    through_outage(&s, &mut redis, traffic, errors_before, outage, true, |r| {
        r.restart()
    })
    .await
}

/// Redis killed for `outage` with no call in flight and restarted empty; `admitted` counts
/// the hits from the kill on (traffic during the outage and after the restart).
pub async fn kill_empty(outage: Duration) -> Outcome {
    let mut redis = RedisServer::start();
    let s = start(&redis, &[]).await;
    let before = Traffic::start(&s).await;
    more_calls(&before, 100).await;
    before.stop().await;
    // Every hit of before the outage in Redis (the batched ones too), then gone with it.
    settled(&s).await;
    let errors_before = store_errors(&s).await;
    redis.kill();
    let traffic = Traffic::start(&s).await;
    through_outage(&s, &mut redis, traffic, errors_before, outage, true, |r| {
        r.restart()
    })
    .await
}

/// (b) Killed with no call in flight, traffic during the outage and after the empty
/// restart: the store holds exactly what was admitted from the kill on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_and_an_empty_restart_keep_the_hits_of_the_outage() {
    let o = kill_empty(Duration::from_secs(3)).await;
    eprintln!("kill 3 s, empty restart: {o:?}");
    assert_eq!(o.errors, 0, "the fallback answers");
    assert_eq!(o.held, o.admitted);
}

/// (b) Killed under traffic (calls in flight: applied and persisted or not, answered or
/// not), restarted from its append-only file: the store holds every hit admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_under_traffic_and_a_restart_from_the_aof_lose_and_double_nothing() {
    let o = kill_aof(Duration::from_secs(3)).await;
    eprintln!("kill 3 s under traffic, AOF restart: {o:?}");
    assert_eq!(o.errors, 0, "the fallback answers");
    assert_eq!(o.held, o.admitted);
}
