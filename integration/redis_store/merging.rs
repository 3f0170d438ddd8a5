//! Cross-request merging (`src/store/redis/batch.rs`): concurrent requests on one connection
//! share script calls, and every request still gets exactly its own answers, each check
//! decided atomically over its limits. Checked by what cannot depend on how the requests
//! happened to be grouped: per descriptor, the hits admitted, the counts seen before each
//! hit (each once), and that requests which may not merge (stop-increment) still get theirs.

use futures::future::join_all;
use sluice::limit::{Algorithm, Charge, Check, LimitSpec, Unit};
use sluice::store::{Call, Store};

use super::{Env, local_config, spec, tag};
use crate::support::redis::RedisServer;

/// One connection, so every concurrent request goes through one batcher.
async fn env() -> Env {
    let server = RedisServer::start();
    let cfg = sluice::store::redis::RedisConfig {
        pool_size: 1,
        ..local_config(&server)
    };
    Env::with_config(server, cfg).await
}

#[tokio::test]
async fn concurrent_requests_share_calls_and_keep_their_answers() {
    let env = env().await;
    env.at(0);
    let algorithms = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::Gcra,
    ];
    const PER_TAG: u64 = 30;
    const LIMIT: u64 = 20;
    let limits: Vec<Vec<LimitSpec>> = algorithms
        .iter()
        .map(|&a| vec![spec(a, LIMIT, Unit::Minute)])
        .collect();
    // Two limits on one descriptor: admitted only when both admit (all-or-nothing).
    let pair = vec![
        spec(Algorithm::FixedWindow, 10, Unit::Minute),
        LimitSpec {
            slot: 1,
            overdraft: false,
            ..spec(Algorithm::FixedWindow, 1000, Unit::Hour)
        },
    ];
    let mut requests = Vec::new();
    for round in 0..PER_TAG {
        for (i, l) in limits.iter().enumerate() {
            requests.push((format!("one-{i}"), l.as_slice(), round));
        }
        requests.push(("pair".to_owned(), pair.as_slice(), round));
    }
    let calls_before = env.server.command_calls("evalsha");
    let answers = join_all(requests.iter().map(|(name, limits, _)| async {
        let check = Check {
            tag: tag(name),
            limits,
            cost: 1,
            refund: false,
        };
        env.run(&[check]).await
    }))
    .await;
    let calls = env.server.command_calls("evalsha") - calls_before;
    assert!(
        calls < requests.len() as u64,
        "{calls} script calls for {} concurrent requests: none merged",
        requests.len()
    );

    for (i, algorithm) in algorithms.iter().enumerate() {
        let name = format!("one-{i}");
        let mine: Vec<_> = requests
            .iter()
            .zip(&answers)
            .filter(|((n, _, _), _)| *n == name)
            .map(|(_, a)| {
                assert_eq!(a.len(), 1, "{algorithm:?}: one result per limit");
                a[0]
            })
            .collect();
        let admitted = mine.iter().filter(|r| r.allowed).count();
        assert_eq!(admitted, LIMIT as usize, "{algorithm:?}: {mine:?}");
        if *algorithm != Algorithm::FixedWindow {
            continue;
        }
        // A fixed window with overdraft counts every hit: each count seen exactly once.
        let mut seen: Vec<u64> = mine.iter().map(|r| r.used_before).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..PER_TAG).collect::<Vec<_>>(), "{mine:?}");
    }
    // The pair: 10 admitted by the first limit; the second (no overdraft) charged only then.
    let mine: Vec<_> = requests
        .iter()
        .zip(&answers)
        .filter(|((n, _, _), _)| n == "pair")
        .map(|(_, a)| a.clone())
        .collect();
    assert!(mine.iter().all(|a| a.len() == 2));
    let admitted = mine.iter().filter(|a| a[0].allowed && a[1].allowed).count();
    assert_eq!(admitted, 10, "{mine:?}");
    let last = env.hit(tag("pair"), &pair, 0).await;
    assert_eq!(
        last[1].used_before, 10,
        "only admitted hits charged the second limit"
    );
}

#[tokio::test]
async fn stop_increment_requests_are_not_merged_with_others() {
    let env = env().await;
    env.at(0);
    let one = [spec(Algorithm::FixedWindow, 1, Unit::Minute)];
    let big = [spec(Algorithm::FixedWindow, 1000, Unit::Minute)];
    // Fill the small limit.
    env.hit(tag("small"), &one, 1).await;
    let answers = join_all((0..40).map(|i| {
        let env = &env;
        let (one, big) = (&one, &big);
        async move {
            let mut out = Vec::new();
            if i % 2 == 0 {
                // Stop-increment: the small limit is over, so `big` is not charged.
                let checks = [
                    Check {
                        tag: tag("small"),
                        limits: one,
                        cost: 1,
                        refund: false,
                    },
                    Check {
                        tag: tag(&format!("held-{i}")),
                        limits: big,
                        cost: 1,
                        refund: false,
                    },
                ];
                env.store
                    .run(
                        &Call {
                            charge: Charge::StopWhenOver,
                            ..Call::new(&checks)
                        },
                        &mut out,
                    )
                    .await
                    .expect("run");
            } else {
                let checks = [Check {
                    tag: tag("shared"),
                    limits: big,
                    cost: 1,
                    refund: false,
                }];
                env.store
                    .run(&Call::new(&checks), &mut out)
                    .await
                    .expect("run");
            }
            out
        }
    }))
    .await;
    for (i, a) in answers.iter().enumerate() {
        if i % 2 == 0 {
            assert_eq!(a.len(), 2);
            assert!(!a[0].allowed && a[1].allowed, "{i}: {a:?}");
            let held = env.hit(tag(&format!("held-{i}")), &big, 0).await;
            assert_eq!(held[0].used_before, 0, "{i}: an admitted check was charged");
        } else {
            assert_eq!(a.len(), 1);
            assert!(a[0].allowed);
        }
    }
    let shared = env.hit(tag("shared"), &big, 0).await;
    assert_eq!(shared[0].used_before, 20);
}

/// The clients of `server` whose last command was `cmd` (`CLIENT LIST`'s `cmd=` field).
fn clients_last_running(server: &RedisServer, cmd: &str) -> usize {
    let list: String = server.query(&["CLIENT", "LIST"]);
    list.lines()
        .filter(|l| l.split(' ').any(|f| f == format!("cmd={cmd}")))
        .count()
}

/// `Ring::pick` fills the first connection before it uses another: one request at a time
/// never needs a second one, so one connection carries them all, where round robin would
/// have spread them over every connection of the pool (and its batches with them).
#[tokio::test]
async fn one_connection_carries_requests_while_its_batch_is_not_full() {
    let server = RedisServer::start();
    let cfg = sluice::store::redis::RedisConfig {
        pool_size: 4,
        ..local_config(&server)
    };
    let env = Env::with_config(server, cfg).await;
    env.at(0);
    let limits = [spec(Algorithm::FixedWindow, 1000, Unit::Minute)];
    for i in 0..20 {
        let check = Check {
            tag: tag(&format!("seq-{i}")),
            limits: &limits,
            cost: 1,
            refund: false,
        };
        assert!(env.run(&[check]).await[0].allowed);
    }
    assert_eq!(
        clients_last_running(&env.server, "evalsha"),
        1,
        "sequential requests went to more than one connection"
    );
    // Concurrent requests beyond one batch still all get their answers.
    let answers = join_all((0..100).map(|i| {
        let limits = &limits;
        let env = &env;
        async move {
            let check = Check {
                tag: tag(&format!("con-{i}")),
                limits,
                cost: 1,
                refund: false,
            };
            env.run(&[check]).await
        }
    }))
    .await;
    assert!(answers.iter().all(|a| a.len() == 1 && a[0].allowed));
}
