//! Redis Cluster faults under continuous traffic through sluice (in process): a primary
//! SIGKILLed (its replica takes over), and slots moved between primaries by hand
//! (`CLUSTER SETSLOT` + `MIGRATE`, so requests meet `ASK` and `MOVED`).
//!
//! Each worker owns one descriptor and sends requests one after another, so every answer
//! says exactly how many hits its key holds: a limit nobody reaches, and `limit_remaining`
//! gives the count after the hit. The checks are on those sequences, not on timing: errors
//! only after the fault, an answer's count is the previous one plus one (except across the
//! failover, where the bound is what was in flight), and the count left in Redis is the
//! last answer's.

use std::time::{Duration, Instant};

use super::cluster_traffic::{Answer, Traffic, WORKERS, counts, homes, start_sluice, tag};
use crate::support::fault_cluster::FaultCluster;

/// SIGKILL the primary holding some workers' keys while all workers send requests: its
/// replica takes over; requests for its slots fail with UNAVAILABLE from the kill until the
/// switch (the failover window, reported), and the others never fail. After it, every answer
/// is right: counts go up by one per OK answer, and the count on the surviving node equals
/// the OK answers within the request each worker had in flight at the switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_killed_under_traffic_replica_takes_over() {
    let started = Instant::now();
    let mut cluster = FaultCluster::start(3);
    let s = start_sluice(&cluster).await;
    let traffic = Traffic::start(&s, "k").await;
    traffic.wait_ok(20, &s).await;

    let homes = homes(&cluster, "k");
    let victim = homes[0].0;
    let replica = cluster.replica_of(victim);
    let on_victim: Vec<usize> = (0..WORKERS).filter(|&w| homes[w].0 == victim).collect();

    let killed_at = Instant::now();
    cluster.kill(victim);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cluster.is_primary(replica) {
        assert!(Instant::now() < deadline, "the replica never took over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let promoted_in = killed_at.elapsed();
    traffic.wait_ok(100, &s).await;
    let answers = traffic.stop().await;
    let final_counts = counts(&s, "k").await;

    let mut window_end = killed_at;
    let mut errors = 0;
    let mut slowest = Duration::ZERO;
    for (w, log) in answers.iter().enumerate() {
        let mut prev: Option<u64> = None;
        let mut failed_since_prev = 0u64;
        for a in log {
            match a.result {
                Err(code) => {
                    assert!(
                        a.done >= killed_at,
                        "worker {w}: an error before the kill: {a:?}"
                    );
                    assert_eq!(code, tonic::Code::Unavailable, "worker {w}: {a:?}");
                    assert!(
                        on_victim.contains(&w),
                        "worker {w}'s key is on a surviving primary, yet {a:?}"
                    );
                    window_end = window_end.max(a.done);
                    slowest = slowest.max(a.done - a.sent);
                    errors += 1;
                    failed_since_prev += 1;
                }
                Ok(used) => {
                    if let Some(p) = prev {
                        // One OK answer is one hit. Across the failover, the hit the
                        // primary acknowledged but had not yet replicated may be lost
                        // (one: a worker has one request in flight), and each failed
                        // request may have been counted.
                        let (lo, hi) = if failed_since_prev > 0 || a.sent <= killed_at {
                            (p, p + 1 + failed_since_prev)
                        } else {
                            (p + 1, p + 1)
                        };
                        assert!(
                            (lo..=hi).contains(&used),
                            "worker {w}: count {used} after {p} ({failed_since_prev} failed \
                             between): {a:?}"
                        );
                    }
                    prev = Some(used);
                    failed_since_prev = 0;
                }
            }
        }
        let ok = log.iter().filter(|a| a.result.is_ok()).count() as u64;
        let failed = log.iter().filter(|a| a.result.is_err()).count() as u64;
        let last = prev.expect("answers");
        assert_eq!(
            final_counts[w], last,
            "worker {w}: the count in Redis is the last answer's"
        );
        if !on_victim.contains(&w) {
            assert_eq!(
                last, ok,
                "worker {w}: a surviving key counts every OK answer"
            );
        } else {
            assert!(
                last + 1 >= ok && last <= ok + failed,
                "worker {w}: counted {last} for {ok} OK answers and {failed} failed"
            );
        }
    }
    let window = window_end.duration_since(killed_at);
    eprintln!(
        "cluster failover: {} keys on the killed primary, {errors} UNAVAILABLE answers \
         (slowest {slowest:?}), failover window {window:?} (replica promoted after \
         {promoted_in:?}), test {:?}",
        on_victim.len(),
        started.elapsed()
    );
    assert!(!on_victim.is_empty());
    // The surviving node holds the victim's keys now.
    for &w in &on_victim {
        let found = cluster.keys_matching(&tag("k", w));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].0, replica,
            "worker {w}'s key on the promoted replica"
        );
    }
}

/// Move the slots of three workers' keys to another primary, one by one, while every worker
/// sends requests: a slot `MIGRATING` (the key still on the source, then moved: `ASK`), then
/// assigned (`MOVED`). No request fails and no hit is lost or doubled: every key's count
/// equals its OK answers exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_migrate_under_traffic_without_errors_or_lost_hits() {
    let started = Instant::now();
    let cluster = FaultCluster::start(3);
    let s = start_sluice(&cluster).await;
    let traffic = Traffic::start(&s, "k").await;
    traffic.wait_ok(20, &s).await;

    let homes = homes(&cluster, "k");
    let mut moved_slots = Vec::new();
    let mut asking = 0;
    for (w, (from, key)) in homes.iter().enumerate() {
        let slot = cluster.slot_of(key);
        if moved_slots.len() == 3 {
            break;
        }
        if moved_slots
            .iter()
            .any(|m: &(u16, usize, usize)| m.0 == slot)
        {
            continue;
        }
        let from = *from;
        let to = (0..cluster.nodes.len())
            .find(|&n| n != from && cluster.is_primary(n))
            .expect("another primary");
        let asking_before = cluster.command_calls(to, "asking");
        cluster.begin_migration(slot, from, to);
        // Requests while the slot is MIGRATING and its key still on the source.
        traffic.wait_ok(5, &s).await;
        let n = cluster.migrate_keys(slot, from, to);
        assert!(n >= 1, "worker {w}'s key migrated");
        // Requests while the key is on the target and the slot still the source's: ASK.
        traffic.wait_ok(5, &s).await;
        asking += cluster.command_calls(to, "asking") - asking_before;
        cluster.end_migration(slot, from, to);
        // Requests once the slot is the target's: MOVED, then the new map.
        traffic.wait_ok(5, &s).await;
        moved_slots.push((slot, from, to));
    }
    traffic.wait_ok(20, &s).await;
    let answers = traffic.stop().await;
    let final_counts = counts(&s, "k").await;

    for (w, log) in answers.iter().enumerate() {
        let failures: Vec<(&Answer, &str)> = log
            .iter()
            .filter(|a| a.result.is_err())
            .map(|a| (a, a.message.as_str()))
            .collect();
        assert!(failures.is_empty(), "worker {w}: {failures:?}");
        let counted: Vec<u64> = log.iter().filter_map(|a| a.result.ok()).collect();
        for (i, c) in counted.iter().enumerate() {
            assert_eq!(*c, i as u64 + 1, "worker {w}: answer {i}");
        }
        assert_eq!(final_counts[w], counted.len() as u64, "worker {w}");
    }
    for &(slot, _, to) in &moved_slots {
        assert_eq!(cluster.owner(slot), to, "slot {slot} moved");
    }
    eprintln!(
        "cluster slot migration: {} slots moved under traffic, {asking} ASKING redirects \
         followed, 0 errors, test {:?}",
        moved_slots.len(),
        started.elapsed()
    );
    assert!(asking > 0, "requests met ASK while a key was in flight");
}

/// A descriptor with two limits (two keys, one hash tag, one slot) while its slot moves one
/// key at a time: between the two `MIGRATE`s a call's keys are split over two nodes, and
/// Redis answers `TRYAGAIN` (source) or `ASK` then `TRYAGAIN` (target) until the second key
/// arrives. Calls may fail with UNAVAILABLE only inside that split (Redis cannot run the
/// script anywhere then), succeed again as soon as it ends, and no hit is lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_split_between_two_nodes_fails_only_while_split() {
    let cluster = FaultCluster::start(3);
    let s = start_sluice(&cluster).await;
    let traffic = Traffic::start(&s, "m").await;
    traffic.wait_ok(20, &s).await;

    let (from, key) = homes(&cluster, "m").swap_remove(0);
    let slot = cluster.slot_of(&key);
    let to = (0..cluster.nodes.len())
        .find(|&n| n != from && cluster.is_primary(n))
        .expect("another primary");
    cluster.begin_migration(slot, from, to);
    traffic.wait_ok(5, &s).await;
    let port = cluster.nodes[to].port().to_string();
    let _: redis::Value =
        cluster.nodes[from].query(&["MIGRATE", "127.0.0.1", &port, &key, "0", "5000"]);
    let split_at = Instant::now();
    // Let requests meet the split for a while (they may fail: counted, not waited on).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let moved = cluster.migrate_keys(slot, from, to);
    let joined_at = Instant::now();
    assert!(moved >= 1, "the second key moved");
    cluster.end_migration(slot, from, to);
    traffic.wait_ok(20, &s).await;
    let answers = traffic.stop().await;
    let final_counts = counts(&s, "m").await;

    let mut failed = 0;
    let mut messages = Vec::new();
    for (w, log) in answers.iter().enumerate() {
        let mut prev = 0;
        for a in log {
            match a.result {
                Err(code) => {
                    assert_eq!(code, tonic::Code::Unavailable, "worker {w}: {a:?}");
                    assert!(
                        a.done >= split_at && a.sent <= joined_at,
                        "worker {w}: a failure outside the split: {a:?}"
                    );
                    failed += 1;
                    messages.push(format!("{} after {:?}", a.message, a.done - a.sent));
                }
                Ok(used) => {
                    // A failed call wrote nothing (the script never ran): exact counts.
                    assert_eq!(used, prev + 1, "worker {w}: {a:?}");
                    prev = used;
                }
            }
        }
        assert_eq!(final_counts[w], prev, "worker {w}");
    }
    eprintln!(
        "cluster slot split: {failed} UNAVAILABLE answers while the slot was split for {:?}: \
         {messages:?}",
        joined_at - split_at
    );
}
