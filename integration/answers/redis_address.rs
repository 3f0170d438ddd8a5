//! A Redis that cannot be reached is named by its address, never with its password: in the
//! connection errors of the log and in `/healthcheck`'s body, which says why it fails.

use super::*;
use crate::support::redis::free_port;

#[tokio::test]
async fn connection_errors_and_the_health_check_name_the_redis_address() {
    let port = free_port();
    let s = in_process()
        .file("d.yaml", RULES)
        // Their variables, as their manifests set them (the address without a scheme).
        .env("REDIS_SOCKET_TYPE", "tcp")
        .env("REDIS_URL", format!("127.0.0.1:{port}"))
        .env("REDIS_AUTH", "s3cret")
        .start()
        .await;
    let addr = format!("redis://127.0.0.1:{port}");
    assert!(
        s.wait_log("redis connect failed", std::time::Duration::from_secs(20))
            .await,
        "{:?}",
        s.logs()
    );
    let failed: Vec<String> = s
        .logs()
        .into_iter()
        .filter(|l| l.contains("redis connect failed"))
        .collect();
    assert!(
        failed[0].contains(&format!("\"addr\":\"{addr}\"")),
        "{failed:?}"
    );
    let (code, body) = s.http_get("/healthcheck").await;
    assert_eq!(code, 500);
    assert!(
        body.starts_with(&format!("NOT_SERVING: no connection to redis at {addr} (")),
        "{body}"
    );
    assert!(
        s.logs()
            .iter()
            .any(|l| l.contains("\"message\":\"store configured\"") && l.contains(&addr))
    );
    let all = format!("{}\n{body}", s.logs().join("\n"));
    assert!(
        !all.contains("s3cret"),
        "a password in the log or the health check:\n{all}"
    );
}

#[tokio::test]
async fn a_healthy_server_answers_ok_and_one_without_rules_says_why_not() {
    let s = in_process()
        .file(
            "d.yaml",
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n",
        )
        .env("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")
        .start()
        .await;
    let (code, body) = s.http_get("/healthcheck").await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        "NOT_SERVING: no rule file loaded (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED requires one)\n"
    );
    let ok = in_process().file("d.yaml", RULES).start().await;
    assert_eq!(ok.http_get("/healthcheck").await, (200, "OK".to_owned()));
}
