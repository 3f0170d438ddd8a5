//! Calendar windows on Redis: the boundary comes from Redis's own clock (`TIME`), so instances
//! whose clocks disagree by less than a period count one period; a clock a period or more
//! away is refused with a clear error; and on a cluster, calendar windows and budgets past
//! 2^32 count exactly on every slot.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use sluice::limit::{Algorithm, Calendar, Clock, LimitSpec, ManualClock, SystemClock, Unit};
use sluice::store::redis::{RedisConfig, RedisStore, TimeSource};
use sluice::store::{Call, Store};

use super::ops::checks;
use super::{Env, local_config, run_on, spec, tag};
use crate::support::redis::{RedisCluster, RedisServer};

const HOUR: u64 = 3_600_000;

fn daily(algorithm: Algorithm, rate: u64, zone: &str) -> LimitSpec {
    LimitSpec {
        calendar: Some(Calendar::new(zone).expect("a known zone")),
        overdraft: false,
        ..spec(algorithm, rate, Unit::Day)
    }
}

/// The local midnights around real time in `zone` (jiff's own arithmetic): today's and
/// tomorrow's.
fn today(zone: &str) -> (u64, u64) {
    let tz = TimeZone::get(zone).expect("zone");
    let now = Timestamp::from_millisecond(SystemClock.now_ms() as i64).expect("now");
    let date = tz.to_datetime(now).date();
    let at = |d: jiff::civil::Date| {
        u64::try_from(
            tz.to_timestamp(d.into())
                .expect("midnight")
                .as_millisecond(),
        )
        .expect("after 1970")
    };
    (at(date), at(date.tomorrow().expect("date")))
}

/// A store reading Redis `TIME` whose own clock (where it computes calendar periods) is
/// `skew_ms` away from real time.
async fn skewed(server: &RedisServer, skew_ms: i64) -> RedisStore {
    let clock = Arc::new(ManualClock::new(
        SystemClock.now_ms().saturating_add_signed(skew_ms),
    ));
    let cfg = RedisConfig {
        time_source: TimeSource::Redis,
        ..local_config(server)
    };
    let store = RedisStore::new(cfg, clock).expect("config");
    assert!(store.wait_ready(Duration::from_secs(10)).await, "connected");
    store
}

#[tokio::test]
async fn instances_with_skewed_clocks_count_one_calendar_day() {
    let server = RedisServer::start();
    // Three instances, 20 hours apart: each may think the day is another, yet every one
    // counts in the day Redis's clock is in.
    let stores = [
        skewed(&server, 0).await,
        skewed(&server, 20 * HOUR as i64).await,
        skewed(&server, -20 * HOUR as i64).await,
    ];
    let zone = "Asia/Kolkata";
    let (start, end) = today(zone);
    for algorithm in [Algorithm::FixedWindow, Algorithm::SlidingWindow] {
        let l = daily(algorithm, 5, zone);
        let t = tag(algorithm.name());
        let mut allowed = 0;
        for i in 0..9 {
            let checks = [sluice::limit::Check {
                tag: t,
                limits: std::slice::from_ref(&l),
                cost: 1,
                refund: false,
            }];
            let r = run_on(&stores[i % 3], &checks, "a check").await[0];
            assert_eq!(r.used_before, allowed, "{algorithm}, hit {i}: {r:?}");
            allowed += u64::from(r.allowed);
            if algorithm == Algorithm::FixedWindow {
                // Until the local midnight after Redis's now, whichever instance asked.
                let left = end - SystemClock.now_ms();
                assert!(
                    r.reset_ms <= left + 1000 && r.reset_ms + 60_000 >= left,
                    "{r:?}, {left} ms to midnight"
                );
            }
        }
        assert_eq!(allowed, 5, "{algorithm}: one day's budget across the three");
    }
    // The fixed window's count sits under the local midnight that began Redis's day.
    let key = stores[0].state_key(tag("fixed_window"), &daily(Algorithm::FixedWindow, 5, zone));
    let h: Vec<String> = server.query(&["HGETALL", &key]);
    assert_eq!(h, vec![start.to_string(), "5".to_string()], "{key}");
}

#[tokio::test]
async fn a_clock_a_period_or_more_away_is_refused() {
    let server = RedisServer::start();
    let store = skewed(&server, 3 * 24 * HOUR as i64).await;
    let l = daily(Algorithm::FixedWindow, 5, "UTC");
    let mut out = Vec::new();
    let checks = [sluice::limit::Check {
        tag: tag("far"),
        limits: std::slice::from_ref(&l),
        cost: 1,
        refund: false,
    }];
    let e = store
        .run(&Call::new(&checks), &mut out)
        .await
        .expect_err("three days away from Redis's clock");
    // The script's message, somewhere in the error's chain of causes.
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        chain.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    assert!(
        chain.contains("store clock is outside the calendar periods sent"),
        "{chain}"
    );
    // An epoch-aligned window in the same call shape is unaffected.
    let plain = spec(Algorithm::FixedWindow, 5, Unit::Day);
    let checks = [sluice::limit::Check {
        limits: std::slice::from_ref(&plain),
        ..checks[0]
    }];
    run_on(&store, &checks, "no calendar").await;
}

#[tokio::test]
async fn cluster_counts_calendar_months_and_big_budgets_on_every_slot() {
    let cluster = RedisCluster::start(3);
    let store = super::cluster_store(&cluster).await;
    const BUDGET: u64 = 30_000_000_000;
    let month = LimitSpec {
        calendar: Some(Calendar::new("Asia/Kolkata").expect("zone")),
        ..spec(Algorithm::FixedWindow, BUDGET, Unit::Month)
    };
    let day = LimitSpec {
        slot: 1,
        buckets: 24,
        ..daily(Algorithm::SlidingWindow, 1 << 53, "America/New_York")
    };
    let limits = [month, day];
    let tags: Vec<sluice::limit::StateTag> = (0..24).map(|i| tag(&format!("tok{i}"))).collect();
    let run = |cost: u64| {
        let store = &store;
        let checks: Vec<sluice::limit::Check<'_>> = checks(&tags, &limits)
            .into_iter()
            .map(|c| sluice::limit::Check { cost, ..c })
            .collect();
        async move { run_on(store, &checks, "cluster run").await }
    };
    let first = run(BUDGET - 3).await;
    assert_eq!(first.len(), 48);
    for pair in first.chunks(2) {
        assert!(pair[0].allowed && pair[0].remaining == 3, "{pair:?}");
        assert!(
            pair[1].allowed && pair[1].remaining == (1 << 53) - (BUDGET - 3),
            "{pair:?}"
        );
    }
    // 4 more do not fit the month: all-or-nothing, so the day is not charged either.
    let second = run(4).await;
    for pair in second.chunks(2) {
        assert!(
            !pair[0].allowed && pair[0].used_before == BUDGET - 3,
            "{pair:?}"
        );
        assert!(
            pair[1].allowed && pair[1].used_before == BUDGET - 3,
            "{pair:?}"
        );
    }
    let holding = cluster.nodes_holding_keys();
    assert!(holding >= 2, "keys on {holding} node(s)");
}

#[tokio::test]
async fn the_local_time_mode_counts_calendar_periods_on_its_own_clock() {
    // In local time mode the instance's clock is the store's: a day ends at its local
    // midnight, whatever Redis's clock says.
    let env = Env::new().await;
    let zone = "Europe/Berlin";
    let l = daily(Algorithm::FixedWindow, 2, zone);
    let t = tag("local-day");
    let p = l.periods(env.clock.now_ms()).expect("calendar");
    env.clock.set(p.bounds[2] - 10);
    assert!(env.hit1(t, &l, 2).await.allowed);
    let r = env.hit1(t, &l, 1).await;
    assert_eq!((r.allowed, r.retry_ms), (false, Some(10)));
    env.clock.set(p.bounds[2]);
    let r = env.hit1(t, &l, 2).await;
    assert_eq!((r.allowed, r.reset_ms), (true, p.bounds[3] - p.bounds[2]));
}
