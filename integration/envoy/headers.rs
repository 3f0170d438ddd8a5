//! Headers through Envoy: Envoy's own `x-ratelimit-*` (DRAFT_VERSION_03) to the client, the
//! `RateLimit-*` headers sluice adds to the response (`--response-headers`, both styles),
//! `Retry-After` (`--retry-after-header`), and the request headers sluice has Envoy add for
//! the upstream (`--request-headers`, their `LIMIT_REQUEST_HEADERS_ENABLED`).

use super::setup;

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 2, name: two_per_minute")
}

#[tokio::test]
async fn x_ratelimit_headers_on_every_answer() {
    let s = setup::serving(&rules()).start_healthy().await;
    let front = setup::front_asking(&s).start().await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = front.get("/", &[]).await;
        seen.push((
            r.status,
            r.header("x-ratelimit-limit").map(String::from),
            r.header("x-ratelimit-remaining").map(String::from),
            r.header("x-ratelimit-reset").is_some(),
        ));
    }
    // Envoy names the limit when the status does.
    let limit = Some("2, 2;w=60;name=\"two_per_minute\"".to_string());
    assert_eq!(
        seen,
        [
            (200, limit.clone(), Some("1".into()), true),
            (200, limit.clone(), Some("0".into()), true),
            (429, limit, Some("0".into()), true),
        ]
    );
}

#[tokio::test]
async fn response_headers_and_retry_after_reach_the_client() {
    let s = setup::serving(&rules())
        .args(["--response-headers", "--retry-after-header"])
        .start_healthy()
        .await;
    let front = setup::front_asking(&s).start().await;
    let first = front.get("/", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("ratelimit-limit"), Some("2"), "{first:?}");
    assert_eq!(first.header("ratelimit-remaining"), Some("1"));
    assert!(first.header("ratelimit-reset").is_some());
    assert_eq!(first.header("retry-after"), None, "only on a denial");
    front.get("/", &[]).await;
    let third = front.get("/", &[]).await;
    assert_eq!(third.status, 429);
    assert_eq!(third.header("ratelimit-remaining"), Some("0"), "{third:?}");
    let retry: u64 = third
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("Retry-After in seconds: {third:?}"));
    assert!((1..=60).contains(&retry), "{retry}");
}

#[tokio::test]
async fn ietf_style_response_headers_reach_the_client() {
    let s = setup::serving(&rules())
        .args(["--response-headers", "--response-headers-style", "ietf"])
        .start_healthy()
        .await;
    let front = setup::front_asking(&s).start().await;
    let r = front.get("/", &[]).await;
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"two_per_minute\";q=2;w=60"),
        "{r:?}"
    );
    let ratelimit = r.header("ratelimit").unwrap_or_default();
    assert!(
        ratelimit.starts_with("\"two_per_minute\";r=1;t="),
        "{ratelimit}"
    );
}

/// `--request-headers`: the upstream sees its quota on the request Envoy forwards (the
/// upstream echoes them back as `upstream-saw-*`); the client's response does not carry them.
#[tokio::test]
async fn request_headers_reach_the_upstream() {
    let s = setup::serving(&rules())
        .env("LIMIT_REQUEST_HEADERS_ENABLED", "true")
        .start_healthy()
        .await;
    let mut f = setup::front_asking(&s);
    f.upstream_echo = ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]
        .map(String::from)
        .to_vec();
    let front = f.start().await;
    let r = front.get("/", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("upstream-saw-ratelimit-limit"), Some("2"), "{r:?}");
    assert_eq!(r.header("upstream-saw-ratelimit-remaining"), Some("1"));
    assert!(
        r.header("upstream-saw-ratelimit-reset")
            .is_some_and(|v| !v.is_empty())
    );
    assert_eq!(r.header("ratelimit-limit"), None, "{r:?}");
    let second = front.get("/", &[]).await;
    assert_eq!(second.header("upstream-saw-ratelimit-remaining"), Some("0"));
}
