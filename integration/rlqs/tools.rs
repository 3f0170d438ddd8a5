//! `sluice explain --bucket` and `/explain?bucket=`: a bucket, keys in any order, explained
//! as the descriptor a quota stream matches it as (entries sorted by key).

use serde_json::Value;

use super::*;
use crate::support::cli::command;

#[tokio::test]
async fn explain_takes_a_bucket_in_any_order() {
    let s = start(&[]).await;
    let dir = s.config_dir.to_string_lossy().into_owned();
    let out = command("explain")
        .args(["--config", &dir, "--domain", "rlqs", "--json"])
        .args(["--bucket", "tier=gold,name=shop"])
        .output()
        .expect("run sluice explain");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut cli: Value = serde_json::from_slice(&out.stdout).expect("json");
    let (code, body) = s
        .http_get("/explain?domain=rlqs&bucket=tier%3Dgold%2Cname%3Dshop")
        .await;
    assert_eq!(code, 200, "{body}");
    let mut http: Value = serde_json::from_str(&body).expect("json");
    http.as_object_mut().expect("object").remove("store");
    cli.as_object_mut().expect("object").remove("store");
    assert_eq!(http, cli);
    let d = &http["descriptors"][0];
    assert_eq!(d["outcome"], "limited", "{d}");
    assert!(d.to_string().contains("rlqs.name_shop.tier_gold"), "{d}");
    // The same keys in the descriptor's own order would not match.
    let out = command("explain")
        .args(["--config", &dir, "--domain", "rlqs", "--json"])
        .args(["--descriptor", "tier=gold,name=shop"])
        .output()
        .expect("run sluice explain");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_ne!(v["descriptors"][0]["outcome"], "limited", "{v}");
}

/// `examples/rlqs`: the bootstrap's domain is the rules', and the buckets its matchers
/// build get what the docs say from a server running those rules.
#[tokio::test]
async fn the_example_bootstrap_and_rules_agree() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rlqs");
    let envoy = std::fs::read_to_string(root.join("envoy.yaml")).expect("envoy.yaml");
    let rules = std::fs::read_to_string(root.join("rules.yaml")).expect("rules.yaml");
    let boot: serde_yaml::Value = serde_yaml::from_str(&envoy).expect("bootstrap YAML");
    let filter = &boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ["http_filters"][0];
    assert_eq!(filter["name"], "envoy.filters.http.rate_limit_quota");
    let domain = filter["typed_config"]["domain"].as_str().expect("domain");
    assert!(rules.contains(&format!("domain: {domain}\n")));
    let out = command("check")
        .arg(root.join("rules.yaml"))
        .output()
        .expect("run sluice check");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let s = sluice().file("rules.yaml", &rules).start().await;
    let mut e = Envoy::connect(&s, domain).await;
    let gold = bucket(&[("name", "api"), ("tier", "gold")]);
    let other = bucket(&[("name", "api"), ("tier", "free")]);
    let health = bucket(&[("name", "health")]);
    e.send(vec![
        usage(&gold, 1, 0, 5000),
        usage(&other, 1, 0, 5000),
        usage(&health, 1, 0, 5000),
    ])
    .await;
    let r = e.next().await.unwrap().unwrap();
    let find = |b: &BucketId| {
        r.bucket_action
            .iter()
            .find(|a| a.bucket_id.as_ref() == Some(b))
            .cloned()
            .expect("an action per bucket")
    };
    // Alone, an Envoy gets all but one floor (5 %) of each limit, in a bucket holding a
    // second of it.
    assert!(matches!(
        got(&find(&gold)).0,
        Got::Tokens {
            tokens: 570,
            burst: 10,
            fill_ms: 60_000
        }
    ));
    assert!(matches!(
        got(&find(&other)).0,
        Got::Tokens {
            tokens: 57,
            burst: 1,
            fill_ms: 60_000
        }
    ));
    assert!(matches!(got(&find(&health)).0, Got::Allow));
}
