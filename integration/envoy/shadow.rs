//! Shadow mode as Envoy sees it: a rule's `shadow_mode` and the global `SHADOW_MODE` both
//! let every request through (Envoy counts them OK, not over limit), while the quota is
//! still spent and reported.

use std::time::Duration;

use crate::support::envoy::RunningFront;

use super::setup;

async fn all_pass_while_spent(front: &RunningFront) {
    assert_eq!(
        front.statuses_and_remaining(3).await,
        [
            (200, Some("0".into())),
            (200, Some("0".into())),
            (200, Some("0".into()))
        ],
        "{}",
        front.envoy.log()
    );
    let ok = front
        .envoy
        .wait_stat("cluster.upstream.ratelimit.ok", 3, Duration::from_secs(5))
        .await;
    assert_eq!(ok, 3);
    let over = front
        .envoy
        .stat("cluster.upstream.ratelimit.over_limit")
        .await;
    assert_eq!(over.unwrap_or(0), 0);
}

#[tokio::test]
async fn a_shadow_rule_lets_everything_through() {
    let rules = setup::rules("unit: minute, requests_per_unit: 1") + "    shadow_mode: true\n";
    let s = setup::serving(&rules)
        .arg("--decision-metadata")
        .start_healthy()
        .await;
    let front = setup::front_asking(&s).start().await;
    all_pass_while_spent(&front).await;
    // The access log tells which passes were shadowed: all but the first.
    let log = front.wait_access_log(3, Duration::from_secs(20)).await;
    let shadowed: Vec<bool> = log
        .iter()
        .map(|e| e["ratelimit"]["descriptors"][0]["shadowed"] == true)
        .collect();
    assert_eq!(shadowed, [false, true, true], "{log:?}");
}

#[tokio::test]
async fn global_shadow_mode_lets_everything_through() {
    let s = setup::serving(&setup::rules("unit: minute, requests_per_unit: 1"))
        .env("SHADOW_MODE", "true")
        .start_healthy()
        .await;
    let front = setup::front_asking(&s).start().await;
    all_pass_while_spent(&front).await;
}
