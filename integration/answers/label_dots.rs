//! The per-rule metrics beside the rule that denied: `descriptor` is the stats key as the
//! decision metadata's `decidingRule` (and `/rlconfig`, `explain`) write it, dots and all,
//! while `domain`, `key1` and `key2` are the levels envoyproxy/ratelimit's Prometheus
//! output shows (their statsd names, where an IPv4 address's dots became `_`).

use super::*;

#[tokio::test]
async fn the_descriptor_label_is_the_rule_the_access_log_names() {
    let s = in_process()
        .file(
            "edge.yaml",
            "domain: edge_proxy\ndescriptors:\n  - key: remote_address\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n",
        )
        .args(["--decision-metadata"])
        .start()
        .await;
    let mut c = s.client().await;
    let ask = || req("edge_proxy", vec![desc(&[("remote_address", "50.0.0.5")])]);
    call(&mut c, ask()).await;
    let denied = metadata_json(&call(&mut c, ask()).await);
    let rule = denied["decidingRule"].as_str().expect("decidingRule");
    assert_eq!(rule, "edge_proxy.remote_address_50.0.0.5");
    let series = format!(
        "ratelimit_service_rate_limit_over_limit{{descriptor=\"{rule}\",domain=\"edge_proxy\",\
         key1=\"remote_address_50_0_0_5\",key2=\"\"}}"
    );
    assert_eq!(s.metric(&series).await, 1.0, "{series}");
}
