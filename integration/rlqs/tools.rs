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
