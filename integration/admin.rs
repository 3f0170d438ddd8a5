//! The admin listener: a descriptor's state per limit, peeked without charging (`GET
//! /state`) and reset (`DELETE /state`), on the memory store and on a real redis-server,
//! its errors, its log lines and turning it off, in process; its address when taken, through
//! the real binary.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::Value;

use crate::support::in_process::*;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

const RULES: &str = r#"
domain: shop
descriptors:
  - key: user
    rate_limits:
      - {name: per_hour, unit: hour, requests_per_unit: 3}
      - {name: per_day, unit: day, requests_per_unit: 100, algorithm: token_bucket}
  - key: login
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: sliding_log, penalty_seconds: 600}
  - key: vip
    rate_limit: {unlimited: true}
"#;

async fn admin(addr: Option<SocketAddr>, method: &str, query: &str) -> (u16, Value) {
    let addr = addr.expect("the admin listener is on");
    let (code, body) = http_request(addr, method, &format!("/state?{query}"), "").await;
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (code, json)
}

async fn hit(c: &mut Client, pairs: &[(&str, &str)]) -> Code {
    let r = call(c, req("shop", vec![desc(pairs)])).await;
    Code::try_from(r.overall_code).expect("code")
}

/// `(used, remaining)` of each limit of a state report.
fn usage(report: &Value) -> Vec<(u64, u64)> {
    report["limits"]
        .as_array()
        .expect("limits")
        .iter()
        .map(|l| {
            (
                l["used"].as_u64().unwrap(),
                l["remaining"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Peek, charge, peek again (nothing charged by peeking), reset, peek: fresh.
async fn peek_and_reset(s: &Server) {
    let mut c = s.client().await;
    let q = "domain=shop&descriptor=user=alice";
    let (code, fresh) = admin(s.admin, "GET", q).await;
    assert_eq!(code, 200, "{fresh}");
    assert_eq!(fresh["rule"], "shop.user");
    assert_eq!(usage(&fresh), [(0, 3), (0, 100)]);
    for _ in 0..2 {
        assert_eq!(hit(&mut c, &[("user", "alice")]).await, Code::Ok);
    }
    for _ in 0..3 {
        let (code, seen) = admin(s.admin, "GET", q).await;
        assert_eq!(code, 200);
        assert_eq!(usage(&seen), [(2, 1), (2, 98)], "a peek charges nothing");
    }
    let (_, seen) = admin(s.admin, "GET", q).await;
    let l = &seen["limits"][0];
    assert_eq!(
        (l["name"].as_str(), l["algorithm"].as_str()),
        (Some("per_hour"), Some("fixed_window"))
    );
    // The clock stands one second into the hour.
    assert_eq!(l["reset_ms"].as_u64(), Some(3_599_000));
    // Another descriptor is untouched by all of this.
    assert_eq!(hit(&mut c, &[("user", "bob")]).await, Code::Ok);
    let (code, gone) = admin(s.admin, "DELETE", q).await;
    assert_eq!(code, 200, "{gone}");
    assert!(
        gone["removed"].as_u64().unwrap() >= 2,
        "both limits had state: {gone}"
    );
    let (_, after) = admin(s.admin, "GET", q).await;
    assert_eq!(usage(&after), [(0, 3), (0, 100)]);
    let (_, bob) = admin(s.admin, "GET", "domain=shop&descriptor=user=bob").await;
    assert_eq!(usage(&bob), [(1, 2), (1, 99)]);
    // The three hits of a fresh hour are there again.
    for _ in 0..3 {
        assert_eq!(hit(&mut c, &[("user", "alice")]).await, Code::Ok);
    }
    assert_eq!(hit(&mut c, &[("user", "alice")]).await, Code::OverLimit);
}

#[tokio::test]
async fn memory_state_is_peeked_without_charging_and_reset() {
    let s = in_process().file("shop.yaml", RULES).start().await;
    peek_and_reset(&s).await;
}

#[tokio::test]
async fn redis_state_is_peeked_without_charging_and_reset_deletes_its_keys() {
    let redis = RedisServer::start();
    let s = in_process()
        .file("shop.yaml", RULES)
        .redis(redis.url())
        .start_healthy()
        .await;
    peek_and_reset(&s).await;
    // alice's keys came back with her last hits; bob's were never touched.
    let keys = |redis: &RedisServer| {
        let mut k: Vec<String> = redis.query(&["KEYS", "*"]);
        k.sort();
        k
    };
    let before = keys(&redis);
    assert_eq!(
        before.len(),
        4,
        "two limits for each of two users: {before:?}"
    );
    let (code, gone) = admin(s.admin, "DELETE", "domain=shop&descriptor=user=alice").await;
    assert_eq!(code, 200);
    assert_eq!(gone["removed"], 2, "DEL counts keys: {gone}");
    let after = keys(&redis);
    assert_eq!(after.len(), 2, "only bob's keys are left: {after:?}");
    assert!(after.iter().all(|k| before.contains(k)));
}

#[tokio::test]
async fn a_penalty_shows_in_the_state_and_a_reset_lifts_it() {
    let s = in_process().file("shop.yaml", RULES).start().await;
    let mut c = s.client().await;
    let q = "domain=shop&descriptor=login=carol";
    assert_eq!(hit(&mut c, &[("login", "carol")]).await, Code::Ok);
    assert_eq!(hit(&mut c, &[("login", "carol")]).await, Code::OverLimit);
    let (_, locked) = admin(s.admin, "GET", q).await;
    let l = &locked["limits"][0];
    assert_eq!(l["penalized"], true, "{locked}");
    assert_eq!(l["penalty_left_ms"].as_u64(), Some(600_000));
    let (code, _) = admin(s.admin, "DELETE", q).await;
    assert_eq!(code, 200);
    let (_, free) = admin(s.admin, "GET", q).await;
    assert_eq!(free["limits"][0]["penalized"], false);
    assert_eq!(hit(&mut c, &[("login", "carol")]).await, Code::Ok);
}

#[tokio::test]
async fn descriptors_without_a_rule_and_bad_queries_are_refused() {
    let s = in_process().file("shop.yaml", RULES).start().await;
    let (code, body) = admin(s.admin, "GET", "domain=shop&descriptor=nobody=x").await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("nothing at that level matches"),
        "{body}"
    );
    let (code, body) = admin(s.admin, "DELETE", "domain=nope&descriptor=user=a").await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("domain 'nope'"),
        "{body}"
    );
    for bad in [
        "descriptor=user=a",
        "domain=shop",
        "domain=shop&descriptor=user",
        "domain=shop&descriptor=user=a&descriptor=user=b",
        "domain=shop&descriptor=user=a&hits=3",
    ] {
        let (code, body) = admin(s.admin, "GET", bad).await;
        assert_eq!(code, 400, "{bad}: {body}");
    }
    // Unlimited: a state that is never counted.
    let (code, vip) = admin(s.admin, "GET", "domain=shop&descriptor=vip=x").await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            vip["unlimited"].as_bool(),
            vip["limits"].as_array().map(Vec::len)
        ),
        (Some(true), Some(0))
    );
    // Values are URL-decoded.
    let (code, body) = admin(s.admin, "GET", "domain=shop&descriptor=user%3Da%2Fb%20c").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["entries"][0]["value"], "a/b c");
}

#[tokio::test]
async fn the_admin_listener_can_be_turned_off() {
    let s = in_process()
        .file("shop.yaml", RULES)
        .arg("--admin-addr")
        .arg("off")
        .start()
        .await;
    assert_eq!(s.admin, None);
    // The line that announced the addresses may reach the log a moment after start().
    assert!(s.wait_log("\"serving\"", Duration::from_secs(5)).await);
    let serving = s
        .logs()
        .into_iter()
        .find(|l| l.contains("\"serving\""))
        .expect("serving line");
    assert!(serving.contains("\"admin\":\"off\""), "{serving}");
}

#[tokio::test]
async fn resets_are_logged() {
    let s = in_process().file("shop.yaml", RULES).start().await;
    let (code, _) = admin(s.admin, "DELETE", "domain=shop&descriptor=user=dave").await;
    assert_eq!(code, 200);
    assert!(
        s.wait_log("state reset", Duration::from_secs(5)).await,
        "{:?}",
        s.logs()
    );
}

/// Two instances on one host set up with envoyproxy/ratelimit's variables alone, as theirs
/// can be: the admin listener's default port, which no variable of theirs names, is taken
/// (held here, or by anything else on the host), so each logs a warning, runs without the
/// admin listener, and serves.
#[tokio::test]
async fn two_instances_on_one_host_with_their_variables_both_serve() {
    // Held here when free; otherwise something else on the host holds it (another test
    // run may let it go meanwhile: then one instance may get it, and only one).
    let held = std::net::TcpListener::bind("127.0.0.1:8082").ok();
    let dir = tempfile::TempDir::new().unwrap();
    let config = dir.path().join("ratelimit/config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("shop.yaml"), RULES).unwrap();
    let [grpc1, http1, debug1, grpc2, http2, debug2] =
        std::array::from_fn(|_| crate::support::redis::free_port());
    let mut instances = Vec::new();
    for (grpc, http, debug) in [(grpc1, http1, debug1), (grpc2, http2, debug2)] {
        let s = sluice()
            .default_admin()
            .no_default_args()
            .env("RUNTIME_ROOT", dir.path().to_str().unwrap())
            .env("RUNTIME_SUBDIRECTORY", "ratelimit")
            .env("USE_STATSD", "false")
            .env("HOST", "127.0.0.1")
            .env("PORT", http.to_string())
            .env("GRPC_HOST", "127.0.0.1")
            .env("GRPC_PORT", grpc.to_string())
            .env("DEBUG_HOST", "127.0.0.1")
            .env("DEBUG_PORT", debug.to_string())
            .start()
            .await;
        assert_eq!((s.grpc.port(), s.http.port()), (grpc, http));
        let warned = s.logs().iter().any(|l| {
            l.contains("WARN")
                && l.contains("running without the admin listener")
                && l.contains("127.0.0.1:8082")
        });
        match s.admin {
            None => assert!(warned, "{:?}", s.logs()),
            Some(a) => assert!(held.is_none() && a.port() == 8082, "{a}"),
        }
        instances.push((s, debug));
    }
    let with_admin = instances.iter().filter(|(s, _)| s.admin.is_some()).count();
    assert!(with_admin <= usize::from(held.is_none()), "{with_admin}");
    for (s, debug) in &instances {
        let mut c = s.client().await;
        let r = call(&mut c, req("shop", vec![desc(&[("user", "ann")])])).await;
        assert_eq!(Code::try_from(r.overall_code).expect("code"), Code::Ok);
        let limit = r.statuses[0].current_limit.as_ref().expect("a limit");
        assert_eq!(limit.requests_per_unit, 3);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], *debug));
        assert_eq!(http_request(addr, "GET", "/rlconfig", "").await.0, 200);
    }
}

/// An admin address that was asked for and cannot be used stops startup, naming it.
#[tokio::test]
async fn a_chosen_admin_address_that_is_taken_stops_startup() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let e = sluice()
        .file("shop.yaml", RULES)
        .env("SLUICE_ADMIN_ADDR", addr.to_string())
        .try_start()
        .await
        .err()
        .expect("startup fails");
    assert!(e.contains(&format!("cannot listen on {addr}")), "{e}");
    assert!(e.contains("--admin-addr"), "{e}");
}
