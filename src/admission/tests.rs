use tokio::time::Instant;

use super::*;

fn gate(max: usize) -> Arc<Admission> {
    Arc::new(Admission::new(max, true))
}

/// A call of its own task, once it waits in the queue.
async fn queued(a: &Arc<Admission>) -> tokio::task::JoinHandle<Result<(), Refusal>> {
    let waiter = {
        let a = a.clone();
        tokio::spawn(async move { a.admit(Instant::now(), None).await.map(|_| ()) })
    };
    while a.queued() == 0 {
        tokio::task::yield_now().await;
    }
    waiter
}

#[tokio::test(start_paused = true)]
async fn admits_up_to_the_limit_then_queues_and_hands_over_on_release() {
    let a = gate(2);
    let now = Instant::now();
    let p1 = a.admit(now, None).await.expect("first");
    let _p2 = a.admit(now, None).await.expect("second");
    assert_eq!((a.in_flight(), a.limit()), (2, 2));
    let waiter = queued(&a).await;
    drop(p1);
    waiter
        .await
        .expect("task")
        .expect("granted the released slot");
    // The waiter's permit was dropped with its task: one left.
    assert_eq!(a.in_flight(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_call_whose_deadline_leaves_no_time_to_wait_is_refused_at_once() {
    let a = gate(1);
    let now = Instant::now();
    let _p = a.admit(now, None).await.expect("first");
    let r = a.admit(now, Some(now)).await.map(|_| ());
    assert!(matches!(r, Err(Refusal::Waited { limit: 1, .. })), "{r:?}");
    assert_eq!(a.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_waited_its_patience_is_refused_and_leaves_the_queue() {
    let a = gate(1);
    let now = Instant::now();
    let _p = a.admit(now, None).await.expect("first");
    // Arrived an interval ago: no patience left.
    let long_ago = now.checked_sub(INTERVAL).unwrap_or(now);
    let r = a.admit(long_ago, None).await.map(|_| ());
    assert!(matches!(r, Err(Refusal::Waited { .. })), "{r:?}");
    // A little patience: it waits, then gives up.
    let r = a
        .admit(
            Instant::now(),
            Some(Instant::now() + Duration::from_millis(2)),
        )
        .await
        .map(|_| ());
    assert!(matches!(r, Err(Refusal::Waited { .. })), "{r:?}");
    assert_eq!((a.queued(), a.in_flight()), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn the_queue_is_bounded_by_the_ceiling() {
    let a = gate(1);
    let _p = a.admit(Instant::now(), None).await.expect("first");
    let waiter = queued(&a).await;
    let r = a.admit(Instant::now(), None).await.map(|_| ());
    assert_eq!(r, Err(Refusal::QueueFull { limit: 1 }));
    waiter.abort();
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_gives_up_its_place_and_leaks_no_slot() {
    let a = gate(1);
    let p = a.admit(Instant::now(), None).await.expect("first");
    let waiter = queued(&a).await;
    waiter.abort();
    let _ = waiter.await;
    assert_eq!(a.queued(), 0);
    drop(p);
    assert_eq!(a.in_flight(), 0);
    let _again = a.admit(Instant::now(), None).await.expect("free again");
}

/// Holds calls in flight up to the limit (a busy store) and reports round trips of `rtt`
/// for `windows` windows.
async fn feed(a: &Arc<Admission>, permits: &mut Vec<Permit>, rtt: Duration, windows: usize) {
    for _ in 0..windows {
        while a.in_flight() < a.limit() {
            permits.push(
                a.admit(Instant::now(), None)
                    .await
                    .expect("below the limit"),
            );
        }
        for _ in 0..WINDOW_SAMPLES {
            a.observe(rtt);
        }
        tokio::time::advance(WINDOW).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_lowers_the_limit_and_a_fast_one_raises_it() {
    let a = gate(1024);
    assert_eq!(a.limit(), INITIAL_LIMIT);
    let mut permits = Vec::new();
    feed(&a, &mut permits, Duration::from_micros(500), 30).await;
    let fast = a.limit();
    assert!(fast > INITIAL_LIMIT, "{fast}");
    feed(&a, &mut permits, Duration::from_millis(20), 10).await;
    let slow = a.limit();
    assert!(slow < fast, "{fast} -> {slow}");
    feed(&a, &mut permits, Duration::from_micros(500), 30).await;
    assert!(a.limit() > slow, "{slow} -> {}", a.limit());
}

#[tokio::test(start_paused = true)]
async fn few_calls_in_flight_leave_the_limit_alone() {
    let a = gate(1024);
    for _ in 0..3 {
        let _p = a.admit(Instant::now(), None).await.expect("admitted");
        for _ in 0..1000 {
            a.observe(Duration::from_millis(50));
        }
        tokio::time::advance(WINDOW).await;
    }
    assert_eq!(a.limit(), INITIAL_LIMIT);
}

#[tokio::test(start_paused = true)]
async fn without_a_remote_store_the_limit_is_the_ceiling() {
    let a = Arc::new(Admission::new(100, false));
    assert_eq!(a.limit(), 100);
    let _p = a.admit(Instant::now(), None).await.expect("admitted");
    for _ in 0..1000 {
        a.observe(Duration::from_secs(1));
    }
    tokio::time::advance(WINDOW_MAX).await;
    a.observe(Duration::from_secs(1));
    assert_eq!(a.limit(), 100, "no store work to follow, and never busy");
}
