use super::*;
use crate::metrics::{HitStats, Metrics};

/// envoyproxy/ratelimit's built-in mapping as Envoy Gateway mounts it.
const THEIRS: &str = r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.near_limit"
    name: "ratelimit_service_rate_limit_near_limit"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2"}
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels: {domain: "$1", key1: "$2"}
  - match: "ratelimit\\.service\\.rate_limit\\.(.*)\\.(.*)\\.(.*)(\\..*)\\.total_hits"
    match_type: regex
    name: "ratelimit_service_rate_limit_total_hits"
    labels: {domain: "$1", key1: "$2", key2: "$3"}
  - match: "ratelimit.service.call.should_rate_limit.*"
    name: "ratelimit_service_should_rate_limit_error"
    match_metric_type: counter
    labels: {err_type: "$1"}
  - match: "ratelimit_server.*.total_requests"
    name: "ratelimit_service_total_requests"
    match_metric_type: counter
    labels: {grpc_method: "$1"}
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    labels: {grpc_method: "$1"}
  - match: "ratelimit.service.config_load_success"
    name: "ratelimit_service_config_load_success"
    match_metric_type: counter
"#;

#[test]
fn globs_then_regexes_with_their_captures() {
    let m = Mapper::parse(THEIRS).unwrap();
    let t = |n| m.map(n, StatType::Counter);
    assert_eq!(
        t("ratelimit.service.rate_limit.dom.k_v.total_hits"),
        Some((
            "ratelimit_service_rate_limit_total_hits".into(),
            vec![
                ("domain".into(), "dom".into()),
                ("key1".into(), "k_v".into())
            ]
        ))
    );
    // Four levels: the glob has the wrong length, the regex (unanchored) takes it and
    // drops the fourth level from the labels.
    assert_eq!(
        t("ratelimit.service.rate_limit.dom.a.b.c.total_hits"),
        Some((
            "ratelimit_service_rate_limit_total_hits".into(),
            vec![
                ("domain".into(), "dom".into()),
                ("key1".into(), "a".into()),
                ("key2".into(), "b".into())
            ]
        ))
    );
    // Unmapped: escaped statsd name, no labels.
    assert_eq!(
        t("ratelimit.service.rate_limit.dom.k.over_limit"),
        Some((
            "ratelimit_service_rate_limit_dom_k_over_limit".into(),
            vec![]
        ))
    );
    // match_metric_type: a counter-only mapping does not take an observer.
    assert_eq!(
        m.map("ratelimit_server.X.total_requests", StatType::Observer),
        Some(("ratelimit_server_X_total_requests".into(), vec![]))
    );
    assert!(m.ignored.iter().any(|f| f.ends_with("timer_type")));
}

#[test]
fn drop_and_templates() {
    let m = Mapper::parse(
        r#"
defaults: {match_type: regex}
mappings:
  - match: 'rate_limit\.noisy\.'
    action: drop
  - match: 'rate_limit\.([^.]+)\.(.*)\.(\w+)$'
    name: "rl_${3}"
    labels: {domain: "$1", key: "$2", literal: "$$x"}
"#,
    )
    .unwrap();
    assert_eq!(
        m.map(
            "ratelimit.service.rate_limit.noisy.k.total_hits",
            StatType::Counter
        ),
        None
    );
    assert_eq!(
        m.map(
            "ratelimit.service.rate_limit.d.a.b.over_limit",
            StatType::Counter
        ),
        Some((
            "rl_over_limit".into(),
            vec![
                ("domain".into(), "d".into()),
                ("key".into(), "a.b".into()),
                ("literal".into(), "$x".into())
            ]
        ))
    );
    assert_eq!(expand_glob("a_$1_${2}_$3_$x", &["p", "q"]), "a_p_q__$x");
}

#[test]
fn bad_files_are_refused_with_the_mapping() {
    for (text, want) in [
        (
            "mappings:\n  - match: a.b\n",
            "mapping 0: metric mapping didn't set a metric name",
        ),
        (
            "mappings:\n  - match: a.b\n    name: x\n    colour: red\n",
            "mapping 0: unknown field 'colour'",
        ),
        (
            "mappings:\n  - match: a.b*\n    name: x\n",
            "mapping 0: invalid match: a.b*",
        ),
        (
            "mappings:\n  - match: '('\n    match_type: regex\n    name: x\n",
            "mapping 0: invalid regex (",
        ),
        (
            "mappings:\n  - match: a.b\n    name: 9x\n",
            "mapping 0: metric name '9x' is not valid",
        ),
        (
            "mappings:\n  - match: a.b\n    name: x\n    labels: {'a-b': c}\n",
            "mapping 0: invalid label key: a-b",
        ),
    ] {
        let err = Mapper::parse(text).unwrap_err().to_string();
        assert!(err.starts_with(want), "{text}: {err}");
    }
}

#[test]
fn rendering_renames_relabels_and_sums() {
    let mut metrics = Metrics::new(0.8, 100, "memory");
    metrics.set_mapper(
        Mapper::parse(
            r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "hits"
    labels: {domain: "$1"}
  - match: "ratelimit.service.rate_limit.*.*.*"
    action: drop
"#,
        )
        .unwrap(),
    );
    let hit = HitStats {
        limit: 10,
        before: 0,
        hits: 2,
        over: false,
        penalized: false,
        shadowed: false,
        cached: false,
    };
    for key in ["dom.a", "dom.b", "other.c"] {
        let c = metrics.rule_counters(key);
        metrics.record_hit(&c, hit);
    }
    metrics.total_requests.inc();
    let text = metrics.render();
    // Two keys of one domain fold into one series, summed.
    assert!(text.contains("hits{domain=\"dom\"} 4\n"), "{text}");
    assert!(text.contains("hits{domain=\"other\"} 2\n"), "{text}");
    // Dropped: the other per-rule stats of two-level keys (the one-level overflow series
    // matches neither mapping and keeps its escaped name); sluice's own metrics stay.
    assert!(!text.contains("dom_a"), "{text}");
    assert!(!text.contains("within_limit{"), "{text}");
    assert!(
        text.contains("ratelimit_service_rate_limit___overflow___within_limit 0\n"),
        "{text}"
    );
    assert!(text.contains("sluice_rules_loaded"), "{text}");
    // Unmapped service stats keep their escaped statsd names.
    assert!(
        text.contains("ratelimit_server_ShouldRateLimit_total_requests 1\n"),
        "{text}"
    );
}
