//! Every algorithm's core behaviour, exact to the millisecond (local time mode).

use sluice::limiter::{Algorithm, Unit};

use super::{Env, allow, deny, spec, tag};

#[tokio::test]
async fn fixed_window_counts_and_retries_at_window_end() {
    let env = Env::new().await;
    let l = spec(Algorithm::FixedWindow, 3, Unit::Second);
    let t = tag("fw");
    assert_eq!(env.hit1(t, &l, 1).await, allow(2, 1000, 0));
    env.at(10);
    assert_eq!(env.hit1(t, &l, 1).await, allow(1, 990, 1));
    assert_eq!(env.hit1(t, &l, 1).await, allow(0, 990, 2));
    env.at(250);
    // Denied and, with the default overdraft, still counted (envoyproxy/ratelimit).
    assert_eq!(env.hit1(t, &l, 1).await, deny(750, Some(750), 3));
    env.at(999);
    assert_eq!(env.hit1(t, &l, 1).await, deny(1, Some(1), 4));
    env.at(1000);
    assert_eq!(env.hit1(t, &l, 1).await, allow(2, 1000, 0));
}
