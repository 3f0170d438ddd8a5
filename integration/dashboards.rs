//! The Grafana dashboard (`examples/grafana/`) and the Prometheus alert rules
//! (`examples/prometheus/`) against a real scrape: every metric name and label their
//! queries use must be in what sluice exports once it has served traffic; and the
//! dashboard is a well-formed, importable model. Data-driven: a new panel, template
//! variable or alert is checked without touching this file.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::Value;

use crate::rlqs::envoy::{Envoy, bucket};
use crate::support::opskit::*;
use crate::support::promql::refs;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: &[&str] = &["job", "instance"];
/// Series Prometheus makes itself for every target.
const SYNTHETIC: &[&str] = &["up"];

const RULES: &str = r#"
domain: ops
descriptors:
  - key: free
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: user
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
"#;

/// Sample name → label names, from the Prometheus text format.
fn parse_scrape(body: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..end].to_owned()).or_default();
        if line[end..].starts_with('{') {
            // `{a="x",b="y"}`: a label name ends at `=`; values are quoted with escapes.
            let mut rest = &line[end + 1..];
            while let Some(eq) = rest.find('=') {
                labels.insert(rest[..eq].trim_start_matches(',').trim().to_owned());
                let value = &rest[eq + 2..];
                let mut close = 0;
                let bytes = value.as_bytes();
                while close < bytes.len() && bytes[close] != b'"' {
                    close += if bytes[close] == b'\\' { 2 } else { 1 };
                }
                rest = &value[(close + 1).min(value.len())..];
                if rest.starts_with('}') {
                    break;
                }
            }
        }
    }
    out
}

/// Everything `q` names exists in `scrape`: its metrics, the labels of its selectors,
/// and the labels it groups by or shows (on one of its metrics, or added by Prometheus).
fn check_query(q: &Query, scrape: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let r = refs(&q.expr);
    let mut problems = Vec::new();
    let mut known: BTreeSet<&str> = TARGET_LABELS.iter().copied().collect();
    if r.selectors.iter().all(|s| s.metric.is_empty()) {
        problems.push(format!("{}: no metric in `{}`", q.origin, q.expr));
    }
    for s in &r.selectors {
        let labels = if SYNTHETIC.contains(&s.metric.as_str()) {
            None
        } else if let Some(labels) = scrape.get(&s.metric) {
            known.extend(labels.iter().map(String::as_str));
            Some(labels)
        } else {
            problems.push(format!(
                "{}: metric `{}` is not exported",
                q.origin, s.metric
            ));
            continue;
        };
        for l in &s.labels {
            let ok =
                TARGET_LABELS.contains(&l.as_str()) || labels.is_some_and(|set| set.contains(l));
            if !ok {
                problems.push(format!("{}: `{}` has no label `{l}`", q.origin, s.metric));
            }
        }
    }
    for l in r.grouping.iter().chain(&q.templates) {
        if !known.contains(l.as_str()) {
            problems.push(format!(
                "{}: label `{l}` is on none of its metrics",
                q.origin
            ));
        }
    }
    problems
}

/// Serve traffic that makes every series move (OK, OVER_LIMIT, shadow mode, a detailed
/// stats key, an invalid request, an unknown domain, a rejected reload, RLQS usage), then
/// scrape.
async fn scrape_after_traffic() -> String {
    let redis = RedisServer::start();
    let s = sluice()
        .file("ops.yaml", RULES)
        .redis(redis.url())
        .start_healthy()
        .await;
    let mut c = s.client().await;
    for (entries, code) in [
        (&[("free", "a")], Code::Ok),
        (&[("blocked", "a")], Code::OverLimit),
        (&[("trial", "a")], Code::Ok),
        (&[("user", "alice")], Code::Ok),
    ] {
        let r = call(&mut c, req("ops", vec![desc(entries)])).await;
        assert_eq!(r.overall_code, code as i32, "{entries:?}");
    }
    call(&mut c, req("nowhere", vec![desc(&[("k", "v")])])).await;
    let _ = c.should_rate_limit(req("", vec![])).await; // INVALID_ARGUMENT
    // A bad rule file is rejected (the counter the config alert watches).
    write(&s.config_path("bad.yaml"), "domain: bad\nbogus: 1\n");
    assert!(
        s.wait_log("config rejected", Duration::from_secs(10)).await,
        "{:?}",
        s.logs()
    );
    // An Envoy on RLQS reports usage of one bucket and holds its stream open, so the quota
    // families are in the scrape.
    let mut envoy = Envoy::connect(&s, "ops").await;
    envoy.report(&bucket(&[("user", "bob")]), 3, 1).await;
    let body = s.http_get("/metrics").await.1;
    drop(envoy);
    let m = |series: &str| metric_value(&body, series).unwrap_or(-1.0);
    assert_eq!(m("ratelimit_service_config_load_error"), 1.0, "{body}");
    assert_eq!(m("sluice_rules_loaded"), 4.0, "{body}");
    assert_eq!(
        m("ratelimit_service_should_rate_limit_error{err_type=\"service_error\"}"),
        1.0
    );
    assert!(
        body.contains("ratelimit_service_rate_limit_shadow_mode{descriptor=\"ops.trial\""),
        "{body}"
    );
    body
}

#[tokio::test]
async fn dashboard_and_alerts_use_only_exported_metrics() {
    let dash: Value = serde_json::from_str(&read(DASHBOARD)).expect("dashboard JSON");
    let groups = alert_groups(ALERTS);
    let mut queries = dashboard_queries(&dash);
    queries.extend(alert_queries(&groups));
    assert!(queries.len() > 20, "only {} queries", queries.len());

    let scrape = parse_scrape(&scrape_after_traffic().await);
    let problems: BTreeSet<String> = queries
        .iter()
        .flat_map(|q| check_query(q, &scrape))
        .collect();
    assert!(
        problems.is_empty(),
        "{}",
        Vec::from_iter(problems).join("\n")
    );

    // Every histogram and counter family the dashboard is about appears in some query, so
    // a panel cannot silently disappear.
    let used: BTreeSet<String> = queries
        .iter()
        .flat_map(|q| refs(&q.expr).selectors)
        .map(|s| s.metric)
        .collect();
    for family in [
        "ratelimit_service_total_requests",
        "ratelimit_service_response_time_seconds_bucket",
        "ratelimit_service_rate_limit_over_limit",
        "ratelimit_service_rate_limit_near_limit",
        "ratelimit_service_rate_limit_within_limit",
        "ratelimit_service_should_rate_limit_error",
        "ratelimit_service_config_load_success",
        "ratelimit_service_config_load_error",
        "sluice_store_latency_seconds_bucket",
        "sluice_store_errors_total",
        "sluice_rules_loaded",
        "sluice_domains_loaded",
        "sluice_metrics_overflow_total",
        "sluice_build_info",
        "sluice_rlqs_usage_total",
        "sluice_rlqs_assignments_total",
        "sluice_rlqs_streams",
        "sluice_rlqs_buckets",
        "up",
    ] {
        assert!(used.contains(family), "no panel or alert uses {family}");
    }
}

#[test]
fn dashboard_is_an_importable_model() {
    let dash: Value = serde_json::from_str(&read(DASHBOARD)).expect("dashboard JSON");
    assert!(dash["title"].is_string() && dash["uid"].is_string());
    assert!(dash["schemaVersion"].as_u64().is_some());
    let vars = dash["templating"]["list"].as_array().expect("templating");
    let ds = vars
        .iter()
        .find(|v| v["type"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(format!("${{{}}}", ds["name"].as_str().unwrap()), DATASOURCE);
    assert_eq!(ds["query"], "prometheus");
    let mut ids = BTreeSet::new();
    for p in panels(&dash) {
        let id = p["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("panel without id: {}", p["title"]));
        assert!(ids.insert(id), "duplicate panel id {id}");
        assert!(p["title"].is_string(), "panel {id} has no title");
        for k in ["h", "w", "x", "y"] {
            assert!(p["gridPos"][k].is_u64(), "panel {id}: gridPos.{k}");
        }
        if p["type"] != "row" {
            assert_eq!(p["datasource"]["uid"], DATASOURCE, "panel {id}");
            assert!(
                p["targets"].as_array().is_some_and(|t| !t.is_empty()),
                "panel {id} has no query"
            );
        }
    }
}
