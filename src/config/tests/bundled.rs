//! The example rule files shipped in `config/` (what `serve` loads by default).

use std::path::PathBuf;

use super::find;
use crate::config::{LoadOptions, RateLimitConfig};
use crate::limiter::Algorithm;

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
}
