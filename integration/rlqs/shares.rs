//! How a share moves (`quota::settle`): the floor before an Envoy's demand is known, and a
//! re-split finished by the stream's tick, without waiting for the next report.

use super::*;

async fn report_over(e: &mut Envoy, b: &BucketId, allowed: u64, denied: u64, ms: u64) -> u32 {
    e.send(vec![usage(b, allowed, denied, ms)]).await;
    tokens(&e.action_for(b).await)
}

#[tokio::test]
async fn a_report_covering_no_time_gets_the_floor_until_one_does() {
    let s = start(&[]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    // Envoy's first report of a bucket comes with its first request, over no time: no
    // demand is known, and the Envoy starts on the floor (1 % of 100), alone or not.
    assert_eq!(report_over(&mut e, &api, 0, 1, 0).await, 1);
    // Its next report says what it needs: all but the floor kept free.
    assert_eq!(report_over(&mut e, &api, 1, 4, 5_000).await, 99);
}

/// B's share is held below its target by what A holds; once A has reported and shrunk,
/// B's stream settles B again at its next tick and pushes the new share, unasked.
#[tokio::test]
async fn a_share_waiting_on_another_is_pushed_within_a_tick() {
    let s = start(&[]).await;
    let mut a = Envoy::connect(&s, "rlqs").await;
    let mut b = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    assert_eq!(report_over(&mut a, &api, 1, 29, 1_000).await, 99);
    // Target 24 (a quarter of the 99 not kept free), but A holds 99: the floor kept free,
    // for now.
    assert_eq!(report_over(&mut b, &api, 1, 9, 1_000).await, 1);
    assert_eq!(report_over(&mut a, &api, 1, 29, 1_000).await, 74);
    // B sends nothing more.
    assert_eq!(tokens(&b.action_for(&api).await), 24);
}

/// A newcomer's demand is unknown at first, and A makes room for it at A's own demand;
/// once the newcomer's demand is known, A's stream settles A again at its next tick.
#[tokio::test]
async fn an_envoy_counted_at_the_mean_is_corrected_within_a_tick() {
    let s = start(&[]).await;
    let mut a = Envoy::connect(&s, "rlqs").await;
    let mut b = Envoy::connect(&s, "rlqs").await;
    let api = bucket(&[("name", "api")]);
    assert_eq!(report_over(&mut a, &api, 1, 29, 1_000).await, 99);
    assert_eq!(report_over(&mut b, &api, 0, 1, 0).await, 1);
    // B counted at A's demand: half of what is not kept free.
    assert_eq!(report_over(&mut a, &api, 1, 29, 1_000).await, 49);
    // B needs a third of A's.
    assert_eq!(report_over(&mut b, &api, 1, 9, 1_000).await, 24);
    // A sends nothing more.
    assert_eq!(tokens(&a.action_for(&api).await), 74);
}

/// Shares are rates: a rule of a second reported over five seconds (as Envoy 1.40 reports)
/// is five seconds of requests, not one window's usage, and its bucket banks the whole
/// share (a second's worth).
#[tokio::test]
async fn a_report_spanning_many_windows_is_a_rate() {
    let s = start(&[]).await;
    let mut e = Envoy::connect(&s, "rlqs").await;
    let shop = bucket(&[("name", "shop"), ("tier", "gold")]);
    e.send(vec![usage(&shop, 50, 0, 5_000)]).await;
    let a = e.action_for(&shop).await;
    assert!(
        matches!(
            got(&a).0,
            Got::Tokens {
                tokens: 9,
                burst: 9,
                fill_ms: 1_000
            }
        ),
        "{a:?}"
    );
}
