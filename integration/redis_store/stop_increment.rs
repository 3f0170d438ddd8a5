//! Stop-increment (`Charge::StopWhenOver`) on the Redis store: decided atomically inside the
//! one script call of a request, or, for a request split over several calls, with a dry run
//! first.

use sluice::limit::{Algorithm, Check, StateTag, Unit};
use sluice::store::{Call, Store};

use super::{Env, spec, tag};

/// Stop-increment: one call decides atomically; a request split over two calls (more than 16
/// limits) decides with a dry run first. Either way a denied descriptor stops every other
/// descriptor's charge, and the denied one follows its own rules (overdraft charged).
#[tokio::test]
async fn stop_increment_holds_admitted_checks_in_one_call_and_over_several() {
    use sluice::limit::Charge;
    let env = Env::new().await;
    let fw = spec(Algorithm::FixedWindow, 5, Unit::Minute);
    for n in [2usize, 20] {
        let tags: Vec<StateTag> = (0..n).map(|i| tag(&format!("stop{n}-{i}"))).collect();
        // The last descriptor is already at its limit.
        env.hit1(tags[n - 1], &fw, 5).await;
        let checks: Vec<Check<'_>> = tags
            .iter()
            .map(|&tag| Check {
                tag,
                limits: std::slice::from_ref(&fw),
                cost: 1,
                refund: false,
            })
            .collect();
        let before = env.server.command_calls("evalsha");
        let mut out = Vec::new();
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
        let calls = env.server.command_calls("evalsha") - before;
        assert_eq!(calls, if n == 2 { 1 } else { 4 }, "{n} descriptors");
        assert!(out[..n - 1].iter().all(|r| r.allowed && r.remaining == 5));
        assert!(!out[n - 1].allowed);
        for &t in &tags[..n - 1] {
            assert_eq!(env.fixed_window_state(t, &fw), None, "not charged");
        }
        // The denied one: overdraft, charged.
        assert_eq!(
            env.fixed_window_state(tags[n - 1], &fw).map(|s| s.1),
            Some(6)
        );
        // Without stop-increment every admitted one is charged.
        let mut out = Vec::new();
        env.store
            .run(&Call::new(&checks), &mut out)
            .await
            .expect("run");
        assert!(out[..n - 1].iter().all(|r| r.allowed && r.remaining == 4));
    }
}
