//! Explanations of every way a walk can go, checked against the matcher's own answer and
//! the Redis store's own key functions.

use std::path::PathBuf;

use super::*;
use crate::config::{ConfigFile, LoadOptions};
use crate::limit::{Descriptor, StateTag, parse_descriptor};

const RULES: &str = r#"
domain: d
descriptors:
  - key: a
    value: "1"
    descriptors:
      - key: b
        value: "2"
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: a
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /api/*
    share_threshold: true
    rate_limit: {name: api, unit: minute, unit_multiplier: 5, requests_per_unit: 100}
  - key: path
    value: /static/*
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 7, algorithm: gcra, burst: 3, penalty_seconds: 30}
  - key: user
    value: vip
    rate_limit: {unlimited: true}
  - key: user
    rate_limit: {name: per_user, unit: second, requests_per_unit: 10}
  - key: partner
    rate_limit: {unit: second, requests_per_unit: 50, replaces: [{name: per_user}]}
  - key: shadow
    shadow_mode: true
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {unit: day, requests_per_unit: 10, algorithm: sliding_window, buckets: 4}
"#;

fn config() -> RateLimitConfig {
    let file = ConfigFile {
        name: "d.yaml".into(),
        path: PathBuf::from("d.yaml"),
        content: RULES.into(),
    };
    RateLimitConfig::build(&[file], &LoadOptions::default()).expect("valid rules")
}

const KEYS: KeyLayout<'static> = KeyLayout {
    prefix: "rl:",
    store: None,
};

fn one(c: &RateLimitConfig, descriptor: &str) -> DescriptorExplanation {
    let d = parse_descriptor(descriptor).expect("descriptor");
    let mut e = explain(c, "d", &[d], KEYS);
    e.descriptors.remove(0)
}

fn results(d: &DescriptorExplanation) -> Vec<&str> {
    d.steps.iter().map(|s| s.result).collect()
}

#[test]
fn exact_levels_and_the_limit_with_its_redis_key() {
    let c = config();
    let d = one(&c, "a=1,b=2");
    assert_eq!(results(&d), ["exact", "exact"]);
    assert_eq!(d.steps[0].node.as_deref(), Some("a_1"));
    // The key-only `a` of level 1 will never be tried.
    assert_eq!(d.steps[0].key_only_not_tried.as_deref(), Some("a"));
    assert_eq!(d.outcome, "limited");
    assert_eq!(d.stats_key.as_deref(), Some("d.a_1.b_2"));
    let tag = StateTag::compute("d", [("a", "1"), ("b", "2")]);
    assert_eq!(d.state_tag, Some(tag.to_base64url()));
    let l = &d.limits[0];
    assert_eq!(
        (l.head.algorithm, l.head.requests_per_unit, l.head.unit),
        ("fixed_window", 5, "MINUTE")
    );
    assert_eq!(
        l.redis_key,
        format!("rl:{{{}}}:1:60:0:0:h", tag.to_base64url())
    );
    assert_eq!(
        l.redis_key,
        state_key("rl:", tag, &c_limits(&c, "a=1,b=2")[0])
    );
    assert_eq!(l.redis_lock_key, None, "no penalty, no lock key");
}

/// The limits the matcher itself finds for `descriptor`.
fn c_limits(c: &RateLimitConfig, descriptor: &str) -> Vec<LimitSpec> {
    let d = parse_descriptor(descriptor).expect("descriptor");
    let refs: Vec<(&str, &str)> = d.0.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    c.domain("d")
        .and_then(|t| t.find(&refs))
        .map(|m| m.rule.limits.to_vec())
        .unwrap_or_default()
}

#[test]
fn no_backtracking_is_named_where_the_walk_stopped() {
    let c = config();
    // `a=1` is taken exactly; `c` exists only under the key-only `a`.
    let d = one(&c, "a=1,c=x");
    assert_eq!(results(&d), ["exact", "no_match"]);
    assert_eq!(d.steps[1].children, ["b_2"]);
    assert_eq!(d.outcome, "no_limit");
    assert!(
        d.reason.contains("stopped at entry 2 (c=x)"),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("no backtracking"), "{}", d.reason);
    assert!(c_limits(&c, "a=1,c=x").is_empty(), "the matcher agrees");
    // Through the key-only child it matches.
    let d = one(&c, "a=2,c=x");
    assert_eq!(results(&d), ["key_only", "key_only"]);
    assert_eq!(d.outcome, "limited");
}

#[test]
fn wildcards_say_which_pattern_matched_and_which_did_not() {
    let c = config();
    let d = one(&c, "path=/static/x.css");
    assert_eq!(results(&d), ["wildcard", "no_rule"]);
    assert_eq!(d.steps[0].node.as_deref(), Some("path_/static/*"));
    assert_eq!(d.steps[0].wildcards_not_matching, ["path_/api/*"]);
    assert_eq!(d.outcome, "no_limit");
    assert!(d.reason.contains("has no rate_limit"), "{}", d.reason);
    // share_threshold: the pattern stands for the value in the state tag.
    let d = one(&c, "path=/api/users");
    assert_eq!(results(&d), ["wildcard"]);
    let tag = StateTag::compute("d", [("path", "/api/*")]);
    assert_eq!(d.state_tag, Some(tag.to_base64url()));
    let l = &d.limits[0];
    assert_eq!((l.head.unit_multiplier, l.window_seconds), (5, 300));
    assert_eq!(
        (l.current_limit.requests_per_unit, l.current_limit.unit),
        (20, "MINUTE")
    );
    assert!(l.redis_key.ends_with(":1:300:0:0:h"), "{}", l.redis_key);
    // No wildcard matches: the key-only child, after trying both.
    let d = one(&c, "path=/other");
    assert_eq!(results(&d), ["key_only"]);
    assert_eq!(
        d.steps[0].wildcards_not_matching,
        ["path_/api/*", "path_/static/*"]
    );
    let l = &d.limits[0];
    assert_eq!(
        (l.head.algorithm, l.burst, l.penalty_seconds),
        ("gcra", Some(3), 30)
    );
    assert!(
        l.redis_lock_key
            .as_deref()
            .is_some_and(|k| k.ends_with(":6:3600:0:0:p"))
    );
}

#[test]
fn too_deep_or_too_short_requests_say_so() {
    let c = config();
    let d = one(&c, "user=bob,extra=1");
    assert_eq!(results(&d), ["key_only", "no_children"]);
    assert!(d.reason.contains("nothing below it"), "{}", d.reason);
    let d = one(&c, "a=1");
    assert_eq!(results(&d), ["exact", "no_rule"]);
    let e = explain(&c, "d", &[Descriptor::default()], KEYS);
    assert_eq!(results(&e.descriptors[0]), ["no_entries"]);
}

#[test]
fn unlimited_replaced_and_shadow_rules() {
    let c = config();
    assert_eq!(one(&c, "user=vip").outcome, "unlimited");
    let request = [
        parse_descriptor("user=bob").expect("d"),
        parse_descriptor("partner=acme").expect("d"),
    ];
    let e = explain(&c, "d", &request, KEYS);
    let user = &e.descriptors[0];
    assert_eq!(user.outcome, "replaced");
    let by = user
        .rule
        .as_ref()
        .and_then(|r| r.replaced_by.as_ref())
        .expect("replaced_by");
    assert_eq!(
        (by.rule.as_str(), by.descriptor, by.name.as_str()),
        ("d.partner", 2, "per_user")
    );
    assert!(user.limits.is_empty());
    assert_eq!(e.descriptors[1].outcome, "limited");
    let d = one(&c, "shadow=x");
    assert_eq!(d.outcome, "limited");
    assert!(d.reason.contains("shadow mode"), "{}", d.reason);
    assert_eq!(d.limits.len(), 2);
    assert_eq!((d.limits[1].head.slot, d.limits[1].buckets), (1, Some(4)));
}

#[test]
fn an_unknown_domain_lists_the_loaded_ones() {
    let c = config();
    let e = explain(&c, "nope", &[parse_descriptor("a=1").expect("d")], KEYS);
    assert!(!e.domain_found);
    assert_eq!(e.domains, ["d"]);
    assert_eq!(e.descriptors[0].outcome, "unknown_domain");
    assert!(render(&e).contains("domain 'nope' (NOT LOADED; loaded: d)"));
}

#[test]
fn text_and_json_carry_the_same_story() {
    let c = config();
    let e = explain(
        &c,
        "d",
        &[parse_descriptor("path=/other").expect("d")],
        KEYS,
    );
    let text = render(&e);
    for want in [
        "descriptor 1: path=/other",
        "  entry 1 path=/other: key_only -> path",
        "  => limited: rule d.path applies",
        "  stats key: d.path",
        "  limit (slot 0): 7 per hour, gcra: burst 3; only admitted hits are charged; a denial locks the descriptor out for 30 s",
        "    current_limit: 7 per HOUR",
    ] {
        assert!(
            text.lines().any(|l| l == want),
            "missing {want:?} in\n{text}"
        );
    }
    let json = serde_json::to_value(&e).expect("json");
    assert_eq!(json["descriptors"][0]["outcome"], "limited");
    assert_eq!(json["descriptors"][0]["steps"][0]["result"], "key_only");
    assert_eq!(json["descriptors"][0]["limits"][0]["algorithm"], "gcra");
    assert_eq!(json["redis_key_prefix"], "rl:");
    assert!(json.get("store").is_none(), "offline: no store");
}
