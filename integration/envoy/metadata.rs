//! `--decision-metadata` as Envoy logs it: the ratelimit filter's dynamic metadata in the
//! access log (`Front` writes `%DYNAMIC_METADATA(envoy.filters.http.ratelimit)%`).

use std::time::Duration;

use super::setup;

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 1, name: one_per_minute")
}

#[tokio::test]
async fn the_decision_is_in_envoys_access_log() {
    let s = setup::serving(&rules())
        .arg("--decision-metadata")
        .start_healthy()
        .await;
    let front = setup::front_asking(&s).start().await;
    assert_eq!(front.get("/ok", &[]).await.status, 200);
    assert_eq!(front.get("/denied", &[]).await.status, 429);
    let log = front.wait_access_log(2, Duration::from_secs(20)).await;
    assert_eq!(log.len(), 2, "{log:?}");
    let ok = &log[0]["ratelimit"];
    assert_eq!(log[0]["path"], "/ok");
    assert_eq!(ok["overallCode"], "OK", "{ok}");
    assert_eq!(ok["domain"], "front");
    let d = &ok["descriptors"][0];
    assert_eq!(d["code"], "OK", "{d}");
    assert_eq!(d["limitName"], "one_per_minute");
    assert_eq!(d["unit"], "MINUTE");
    assert_eq!(d["remaining"], 0.0);
    let rule = d["rule"]
        .as_str()
        .expect("the rule's stats key")
        .to_string();
    assert!(rule.contains("generic_key"), "{rule}");
    let denied = &log[1]["ratelimit"];
    assert_eq!(log[1]["status"], 429);
    assert_eq!(denied["overallCode"], "OVER_LIMIT", "{denied}");
    assert_eq!(denied["decidingRule"], rule.as_str());
    assert_eq!(denied["descriptors"][0]["code"], "OVER_LIMIT");
}
