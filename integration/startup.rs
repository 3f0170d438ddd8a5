//! Starting with bad rule files, as envoyproxy/ratelimit does: the server runs, every call
//! fails with "no rate limit configuration loaded" (gRPC UNAVAILABLE, `/json` 503, counted
//! as `service_error`), health follows `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, and the
//! first valid config that appears (file watch or SIGHUP) is loaded. `sluice check` is the
//! fail-fast tool (`cli`).

use std::time::{Duration, Instant};

use tonic::Code;

use crate::support::sluice::*;
const BAD: &str =
    "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: foo, requests_per_unit: 1}\n";
const GOOD: &str =
    "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 4}\n";

async fn no_config(c: &mut Client) -> bool {
    // A peek (cost 0): nothing is counted once a config serves.
    match c
        .should_rate_limit(req("edge", vec![desc_hits(&[("k", "v")], 0)]))
        .await
    {
        Err(e) => {
            assert_eq!(e.code(), Code::Unavailable, "{e:?}");
            assert_eq!(e.message(), "no rate limit configuration loaded");
            true
        }
        Ok(_) => false,
    }
}

async fn wait_decided(c: &mut Client) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if !no_config(c).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_bad_rule_file_at_startup_serves_fails_every_call_and_loads_the_fix() {
    let s = sluice().file("bad.yaml", BAD).start().await;
    assert!(
        s.wait_log("bad.yaml: invalid rate limit unit 'foo'", WAIT)
            .await
    );
    let mut c = s.client().await;
    assert!(no_config(&mut c).await);
    assert_eq!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"service_error\"}")
            .await,
        1.0
    );
    assert_eq!(s.metric("ratelimit_service_config_load_error").await, 1.0);
    let (code, body) = s
        .http_post(
            "/json",
            r#"{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#,
        )
        .await;
    assert_eq!(
        (code, body.trim()),
        (503, "no rate limit configuration loaded")
    );
    // Request errors keep their precedence, as theirs: the domain is checked first.
    let e = c
        .should_rate_limit(req("", vec![desc(&[("k", "v")])]))
        .await;
    assert_eq!(e.unwrap_err().code(), Code::InvalidArgument);
    // Their default: health does not depend on the config.
    assert_eq!(s.http_get("/healthcheck").await.0, 200);

    write(&s.config_path("bad.yaml"), GOOD);
    assert!(wait_decided(&mut c).await, "the fixed file loads");
    let r = call(&mut c, req("edge", vec![desc(&[("k", "v")])])).await;
    assert_eq!(r.statuses[0].limit_remaining, 3);
}

#[tokio::test]
async fn health_waits_for_a_valid_config_when_required_and_sighup_loads_it() {
    let s = sluice()
        .file("bad.yaml", BAD)
        .arg("--watch-config")
        .arg("false")
        .env("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
        .start()
        .await;
    assert_eq!(s.http_get("/healthcheck").await.0, 500);
    let mut c = s.client().await;
    assert!(no_config(&mut c).await);

    write(&s.config_path("bad.yaml"), GOOD);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        no_config(&mut c).await,
        "not watching: nothing changes without SIGHUP"
    );
    s.signal("HUP");
    assert!(wait_decided(&mut c).await, "SIGHUP loads the fixed file");
    assert!(s.wait_healthy(WAIT).await);
}

#[tokio::test]
async fn a_config_directory_that_appears_later_is_loaded() {
    let dir = tempfile::TempDir::new().unwrap();
    let rules = dir.path().join("rules");
    let s = sluice()
        .no_default_args()
        .arg("--config")
        .arg(rules.display().to_string())
        .arg("--grpc-addr")
        .arg("127.0.0.1:0")
        .arg("--http-addr")
        .arg("127.0.0.1:0")
        .start()
        .await;
    assert!(s.wait_log("does not exist", WAIT).await, "{:?}", s.logs());
    let mut c = s.client().await;
    assert!(no_config(&mut c).await);
    std::fs::create_dir(&rules).unwrap();
    write(&rules.join("a.yaml"), GOOD);
    assert!(wait_decided(&mut c).await, "{:?}", s.logs());
}
