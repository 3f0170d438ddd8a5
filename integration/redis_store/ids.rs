//! Calls under an id (`Ids::Request`, `Ids::WriteBack`): applied at most once however
//! often they are sent, one id key per script call (per slot on a cluster), whichever send
//! arrives first; merged calls keep each request's id; a dry run records none.

use std::time::Duration;

use futures::future::join_all;
use sluice::limit::{Algorithm, Charge, Check, LimitSpec, StateTag, Unit};
use sluice::store::redis::Fate;
use sluice::store::redis::RedisConfig;
use sluice::store::{Call, CallId, Ids, Store};

use super::{Env, local_config, spec, tag};
use crate::support::redis::{RedisCluster, RedisServer};

fn checks<'a>(tags: &[StateTag], limits: &'a [LimitSpec], cost: u64) -> Vec<Check<'a>> {
    tags.iter()
        .map(|&tag| Check {
            tag,
            limits,
            cost,
            refund: false,
        })
        .collect()
}

/// `limits` with `overdraft`, as write-backs send them.
fn forced(limits: &[LimitSpec]) -> Vec<LimitSpec> {
    limits
        .iter()
        .map(|l| LimitSpec {
            overdraft: true,
            ..l.clone()
        })
        .collect()
}

/// A request's call of `checks` under `id`.
fn request<'a>(checks: &'a [Check<'a>], id: CallId) -> Call<'a> {
    Call {
        ids: Ids::Request(id),
        ..Call::new(checks)
    }
}

async fn once<S: Store>(
    store: &S,
    checks: &[Check<'_>],
    id: CallId,
) -> Vec<sluice::limit::LimitResult> {
    let mut out = Vec::new();
    store
        .run(&request(checks, id), &mut out)
        .await
        .expect("run_once");
    out
}

/// The count each descriptor holds: `used_before` of a peek.
async fn used<S: Store>(store: &S, tags: &[StateTag], limits: &[LimitSpec]) -> Vec<u64> {
    let mut out = Vec::new();
    store
        .run(&Call::new(&checks(tags, limits, 0)), &mut out)
        .await
        .expect("peek");
    out.chunks(limits.len()).map(|r| r[0].used_before).collect()
}

/// A store with one connection (its calls share one pipeline, queued behind one another),
/// the clock at its start.
async fn one_connection() -> Env {
    let server = RedisServer::start();
    let cfg = RedisConfig {
        pool_size: 1,
        ..local_config(&server)
    };
    let env = Env::with_config(server, cfg).await;
    env.at(0);
    env
}

fn id_keys(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = server.query(&["KEYS", "*:id:*"]);
    keys.sort();
    keys
}

#[tokio::test]
async fn a_call_sent_again_under_its_id_only_reports() {
    let env = Env::new().await;
    env.at(0);
    let limits = [
        spec(Algorithm::FixedWindow, 100, Unit::Hour),
        LimitSpec {
            slot: 1,
            ..spec(Algorithm::TokenBucket, 100, Unit::Hour)
        },
    ];
    let tags = [tag("a"), tag("b"), tag("c")];
    let (a, b) = (CallId::fresh(), CallId::fresh());
    let first = once(&env.store, &checks(&tags, &limits, 2), a).await;
    assert!(first.iter().all(|r| r.allowed && r.used_before == 0));
    assert_eq!(used(&env.store, &tags, &limits).await, [2, 2, 2]);
    let again = once(&env.store, &checks(&tags, &limits, 2), a).await;
    assert!(
        again.iter().all(|r| r.allowed && r.used_before == 2),
        "a resend reports the state: {again:?}"
    );
    assert_eq!(used(&env.store, &tags, &limits).await, [2, 2, 2]);
    // Another id is another call.
    once(&env.store, &checks(&tags, &limits, 2), b).await;
    assert_eq!(used(&env.store, &tags, &limits).await, [4, 4, 4]);

    // A write-back under a call's id (the same checks in the same order, other costs) is
    // that call sent again; under a new id it applies.
    let f = forced(&limits);
    let (dup, fresh) = (checks(&tags, &f, 7), checks(&tags, &f, 1));
    let c = CallId::fresh();
    let mut out = Vec::new();
    let both: Vec<Check<'_>> = dup.iter().chain(&fresh).copied().collect();
    let batches = [(a, dup.len()), (c, fresh.len())];
    let write_back = Call {
        ids: Ids::WriteBack(&batches),
        ..Call::new(&both)
    };
    env.store
        .run(&write_back, &mut out)
        .await
        .expect("write_back");
    assert_eq!(out.len(), 12);
    assert_eq!(used(&env.store, &tags, &limits).await, [5, 5, 5]);

    // One key per call, in the slot of its first check, kept for a while.
    let keys = id_keys(&env.server);
    assert_eq!(keys.len(), 3, "{keys:?}");
    for k in &keys {
        let ttl: i64 = env.server.query(&["PTTL", k]);
        // A request call's 10 s, or a write-back's 60 s.
        assert!(ttl > 0 && ttl <= 60_000, "{k}: {ttl}");
        assert!(
            k.contains(&format!("{{{}}}", tags[0].to_base64url())),
            "{k}"
        );
    }
}

#[tokio::test]
async fn each_call_of_a_split_request_has_its_own_id_key() {
    let env = Env::new().await;
    env.at(0);
    let limits = [spec(Algorithm::FixedWindow, 100, Unit::Hour)];
    // 20 limits: two script calls of at most 16.
    let tags: Vec<StateTag> = (0..20).map(|i| tag(&format!("s{i}"))).collect();
    let id = CallId::fresh();
    once(&env.store, &checks(&tags, &limits, 1), id).await;
    let keys = id_keys(&env.server);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys[0].ends_with(":0") && keys[1].ends_with(":1"),
        "{keys:?}"
    );
    // As if the second call had never run (the first ran, the second was lost): a resend
    // applies the second call only.
    let _: i64 = env.server.query(&["DEL", &keys[1]]);
    once(&env.store, &checks(&tags, &limits, 1), id).await;
    let counts = used(&env.store, &tags, &limits).await;
    assert_eq!(counts[..16], [1; 16]);
    assert_eq!(counts[16..], [2; 4]);
}

#[tokio::test]
async fn merged_calls_keep_each_id() {
    let env = one_connection().await;
    let limits = [spec(Algorithm::FixedWindow, 100, Unit::Hour)];
    let tags: Vec<StateTag> = (0..48).map(|i| tag(&format!("m{i}"))).collect();
    let ids: Vec<CallId> = tags.iter().map(|_| CallId::fresh()).collect();
    let send = |round: u64| {
        let (env, limits, tags, ids) = (&env, &limits, &tags, &ids);
        join_all(
            tags.iter()
                .zip(ids)
                .enumerate()
                .map(move |(i, (t, id))| async move {
                    let c = checks(std::slice::from_ref(t), limits, 1);
                    let mut out = Vec::new();
                    // Every third request without an id, merged with the others all the same.
                    if i % 3 == 2 && round == 0 {
                        env.store.run(&Call::new(&c), &mut out).await.expect("run");
                    } else {
                        env.store
                            .run(&request(&c, *id), &mut out)
                            .await
                            .expect("run_once");
                    }
                }),
        )
    };
    let calls0 = env.server.command_calls("evalsha");
    send(0).await;
    let calls = env.server.command_calls("evalsha") - calls0;
    eprintln!("48 requests, 32 with ids: {calls} script calls");
    assert_eq!(used(&env.store, &tags, &limits).await, vec![1; 48]);
    // Again under the same ids: only the ones sent without an id the first time apply.
    send(1).await;
    let counts = used(&env.store, &tags, &limits).await;
    for (i, n) in counts.iter().enumerate() {
        assert_eq!(*n, if i % 3 == 2 { 2 } else { 1 }, "descriptor {i}");
    }
}

#[tokio::test]
async fn a_dry_run_records_no_id() {
    let env = Env::new().await;
    env.at(0);
    let limits = [spec(Algorithm::FixedWindow, 100, Unit::Hour)];
    // Stop-increment over two calls: a dry run, then the charge, which must not find its
    // id taken by the dry run.
    let tags: Vec<StateTag> = (0..20).map(|i| tag(&format!("d{i}"))).collect();
    let mut out = Vec::new();
    let checks = checks(&tags, &limits, 1);
    let call = Call {
        charge: Charge::StopWhenOver,
        ..request(&checks, CallId::fresh())
    };
    env.store.run(&call, &mut out).await.expect("run_once");
    assert_eq!(used(&env.store, &tags, &limits).await, vec![1; 20]);
}

#[tokio::test]
async fn cluster_ids_live_in_the_slot_of_their_call() {
    let cluster = RedisCluster::start(3);
    let store = super::cluster_store(&cluster).await;
    let limits = [spec(Algorithm::FixedWindow, 100, Unit::Hour)];
    let tags: Vec<StateTag> = (0..24).map(|i| tag(&format!("k{i}"))).collect();
    let id = CallId::fresh();
    once(&store, &checks(&tags, &limits, 1), id).await;
    once(&store, &checks(&tags, &limits, 1), id).await;
    assert_eq!(used(&store, &tags, &limits).await, vec![1; 24]);
    // Each id key sits on a node beside state of its own slot.
    let mut ids = 0;
    for node in &cluster.nodes {
        for k in id_keys(node) {
            ids += 1;
            let slot: i64 = node.query(&["CLUSTER", "KEYSLOT", &k]);
            let beside = tags.iter().any(|t| {
                let s = store.state_key(*t, &limits[0]);
                node.query::<i64>(&["CLUSTER", "KEYSLOT", &s]) == slot
                    && node.query::<i64>(&["EXISTS", &s]) == 1
            });
            assert!(beside, "{k} has no state of its slot on its node");
        }
    }
    assert!(ids >= 2, "one id per slot call: {ids}");
}

/// Redis's own time per script call (`INFO commandstats`, `usec` / `calls`) for one check,
/// without an id and with one (one more `SET` per call), alternating rounds so that a busy
/// machine weighs on both alike (BENCHMARKS.md, "Consistency: strict, batched and the
/// outage"):
///
/// `cargo test --test integration -- --ignored --nocapture redis_store::ids::what_an_id_costs_redis`
#[tokio::test]
#[ignore = "prints a measurement; run on demand"]
async fn what_an_id_costs_redis() {
    let env = Env::new().await;
    env.at(0);
    let limits = [spec(Algorithm::FixedWindow, 1_000_000_000, Unit::Hour)];
    let tags = [tag("cost")];
    let usec = |env: &Env| -> (u64, u64) {
        let info: String = env.server.query(&["INFO", "commandstats"]);
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
            .unwrap_or("");
        let field = |name: &str| {
            line.split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("calls"), field("usec"))
    };
    const N: usize = 5_000;
    let mut totals = [(0u64, 0u64); 2];
    for _round in 0..4 {
        for (with_id, total) in totals.iter_mut().enumerate() {
            let _: () = env.server.query(&["CONFIG", "RESETSTAT"]);
            for _ in 0..N {
                let c = checks(&tags, &limits, 1);
                let mut out = Vec::new();
                if with_id == 1 {
                    env.store
                        .run(&request(&c, CallId::fresh()), &mut out)
                        .await
                        .expect("run_once");
                } else {
                    env.store.run(&Call::new(&c), &mut out).await.expect("run");
                }
            }
            let (calls, us) = usec(&env);
            let sets = env.server.command_calls("set");
            assert_eq!(
                sets,
                if with_id == 1 { calls } else { 0 },
                "one SET per call with an id"
            );
            total.0 += calls;
            total.1 += us;
        }
    }
    let per = |(calls, us): (u64, u64)| us as f64 / calls.max(1) as f64;
    println!(
        "one fixed_window check per call, {} calls each: {:.2} µs without an id, {:.2} µs with one",
        totals[0].0,
        per(totals[0]),
        per(totals[1])
    );
}

/// What became of calls their callers stopped waiting for (`RedisStore::fate`), on the one
/// connection of the pool, while Redis holds every client for 1 s (`CLIENT PAUSE ... ALL`;
/// less than the 2 s a silent pipeline gets before its connection is given up, which would
/// make the fates unknown): the first call is in a pipeline, so it runs when Redis resumes and its late reply
/// reaches the batcher: Applied, counted once. The second is queued behind it, and is
/// dropped unsent when its turn comes: NotSent, counted nowhere. A call whose caller waited
/// leaves nothing to ask about. Neither needs sending again.
#[tokio::test]
async fn the_store_tells_whether_a_call_its_caller_left_ran() {
    let env = one_connection().await;
    let limits = [spec(Algorithm::FixedWindow, 100, Unit::Hour)];
    let tags = [tag("left")];
    let answered = CallId::fresh();
    once(&env.store, &checks(&tags, &limits, 1), answered).await;
    assert_eq!(env.store.fate(answered), Fate::Unknown, "nothing kept");

    let _: String = env.server.query(&["CLIENT", "PAUSE", "1000", "ALL"]);
    let (ran, dropped) = (CallId::fresh(), CallId::fresh());
    let leave = |id| {
        let store = &env.store;
        let checks = checks(&tags, &limits, 2);
        async move {
            let mut out = Vec::new();
            let request = request(&checks, id);
            let call = store.run(&request, &mut out);
            assert!(
                tokio::time::timeout(Duration::from_millis(200), call)
                    .await
                    .is_err(),
                "answered while Redis is paused"
            );
        }
    };
    // In order: the first is in the pipeline before the second is queued.
    leave(ran).await;
    leave(dropped).await;
    assert_eq!(env.store.fate(ran), Fate::InFlight);

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let fate = loop {
        match env.store.fate(ran) {
            Fate::InFlight if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            fate => break fate,
        }
    };
    assert_eq!(fate, Fate::Applied);
    assert_eq!(env.store.fate(dropped), Fate::NotSent);
    assert_eq!(env.store.fate(ran), Fate::Unknown, "told once");
    assert_eq!(used(&env.store, &tags, &limits).await, [1 + 2]);
}
