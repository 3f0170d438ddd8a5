//! What Envoy's rate limit actions put in a descriptor besides its entries: the `limit`
//! override (`RateLimit.limit` from dynamic metadata, Envoy's `RateLimitOverride`) and
//! `hits_addend` (a number, or a format string read per request).

use serde_json::json;

use super::setup;

fn rules() -> String {
    setup::rules("unit: minute, requests_per_unit: 100")
}

/// The route's limit override from dynamic metadata (set here by Envoy's `set_metadata`
/// filter, as an auth filter would per client) replaces the rule's 100 per minute.
#[tokio::test]
async fn the_limit_override_from_dynamic_metadata_applies() {
    let s = setup::serving(&rules()).start_healthy().await;
    let mut f = setup::front_asking(&s);
    f.filters_before = vec![json!({
        "name": "envoy.filters.http.set_metadata",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config",
            "metadata": [{
                "metadata_namespace": "test.limits",
                "value": { "override": { "requests_per_unit": 2, "unit": "MINUTE" } },
            }],
        },
    })];
    f.route_rate_limits = json!([{
        "actions": [{ "generic_key": { "descriptor_value": "front" } }],
        "limit": { "dynamic_metadata": { "metadata_key": {
            "key": "test.limits", "path": [{ "key": "override" }]
        } } },
    }]);
    let front = f.start().await;
    let first = front.get("/", &[]).await;
    assert_eq!(first.status, 200, "{}", front.envoy.log());
    assert_eq!(
        first.header("x-ratelimit-limit"),
        Some("2, 2;w=60"),
        "{first:?}"
    );
    assert_eq!(front.get("/", &[]).await.status, 200);
    assert_eq!(front.get("/", &[]).await.status, 429);
}

/// `hits_addend: {number: N}` in the filter's `rate_limits` (Envoy sends none from the
/// route's): each request costs N.
#[tokio::test]
async fn hits_addend_number_is_the_cost() {
    let s = setup::serving(&rules()).start_healthy().await;
    let front = setup::front_asking(&s)
        .filter_rate_limits_yaml(
            "- actions: [{generic_key: {descriptor_value: front}}]\n  hits_addend: {number: 40}\n",
        )
        .start()
        .await;
    assert_eq!(
        front.statuses_and_remaining(3).await,
        [
            (200, Some("60".into())),
            (200, Some("20".into())),
            (429, Some("0".into()))
        ],
        "{}",
        front.envoy.log()
    );
}

/// `hits_addend: {format: ...}`: the cost read from the request (a header here).
#[tokio::test]
async fn hits_addend_format_reads_the_cost_per_request() {
    let s = setup::serving(&rules()).start_healthy().await;
    let front = setup::front_asking(&s)
        .filter_rate_limits_yaml(
            "- actions: [{generic_key: {descriptor_value: front}}]\n  hits_addend: {format: \"%REQ(x-cost)%\"}\n",
        )
        .start()
        .await;
    let r = front.get("/", &[("x-cost", "70")]).await;
    assert_eq!(
        (r.status, r.header("x-ratelimit-remaining")),
        (200, Some("30")),
        "{r:?}"
    );
    let r = front.get("/", &[("x-cost", "30")]).await;
    assert_eq!(
        (r.status, r.header("x-ratelimit-remaining")),
        (200, Some("0")),
        "{r:?}"
    );
    assert_eq!(front.get("/", &[("x-cost", "1")]).await.status, 429);
}
