//! The example rule files shipped in `config/` (what `serve` loads by default).

use std::path::PathBuf;

use super::find;
use crate::config::{LoadOptions, RateLimitConfig};
use crate::limit::Algorithm;

fn bundled() -> RateLimitConfig {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    match RateLimitConfig::load(&[dir], &LoadOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("bundled config/ must load: {e:?}"),
    }
}

#[test]
fn bundled_config_builds() {
    let c = bundled();
    assert!(c.domain_count() >= 2);
    assert!(!c.rules().is_empty());
    // Every algorithm is demonstrated.
    for a in Algorithm::ALL {
        assert!(
            c.rules()
                .iter()
                .any(|r| r.limits.iter().any(|l| l.algorithm == a)),
            "{a} missing"
        );
    }
    assert!(c.rules().iter().any(|r| r.limits.len() > 1));
    assert!(c.rules().iter().any(|r| r.unlimited));
    assert!(
        c.rules()
            .iter()
            .any(|r| r.limits.iter().any(|l| l.penalty_ms > 0))
    );
    assert!(!c.dump().is_empty());
}

#[test]
fn bundled_envoy_example_matches() {
    let c = bundled();
    assert!(find(&c, "edge", &[("remote_address", "10.0.0.1")]).is_some());
    assert!(find(&c, "edge", &[("client_id", "internal-batch")]).is_some_and(|m| m.rule.unlimited));
    let partner = find(&c, "edge", &[("client_id", "partner-acme")]).map(|m| m.rule);
    assert!(partner.is_some_and(|r| r.replaces.iter().any(|n| &**n == "per_address")));
    let per_address = find(&c, "edge", &[("remote_address", "10.0.0.1")]).map(|m| m.rule);
    assert!(per_address.is_some_and(|r| r.names().any(|n| n == "per_address")));
    let login = [("path", "/api/v1/login"), ("method", "POST")];
    assert!(find(&c, "edge", &login).is_some_and(|m| m.rule.limits[0].requests_per_unit == 10));
    // Whitelisted: the node exists but has no limit.
    assert!(find(&c, "edge", &[("path", "/static/app.js")]).is_none());
    let search = |p| find(&c, "edge", &[("path", p)]).map(|m| m.state_tag(&[("path", p)]));
    assert_eq!(search("/api/v1/search"), search("/api/v2/search"));
    assert!(find(&c, "edge", &[("user_tier", "free")]).is_some_and(|m| m.rule.shadow_mode));
    let other = [("path", "/x"), ("method", "GET")];
    let stats = find(&c, "edge", &other).map(|m| m.stats_key(&other).into_owned());
    assert_eq!(stats.as_deref(), Some("edge.path_/x.method"));
}
