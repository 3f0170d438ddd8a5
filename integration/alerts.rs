//! The Prometheus alert rules (`examples/prometheus/`): the plain rule file and the
//! PrometheusRule hold the same rules, each alert is complete (severity, `for`, runbook
//! annotations), and Prometheus's own `promtool` accepts them, runs their unit tests and
//! parses every dashboard query.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::support::opskit::*;
use crate::support::promql::refs;

/// The scrape job `up` alerts expect (documented in the alert files' headers).
const JOB: &str = "sluice";

#[test]
fn alert_files_hold_the_same_rules() {
    let plain = alert_groups(ALERTS);
    let operator = alert_groups(PROMETHEUS_RULE);
    let names = |g: &Value| -> Vec<String> {
        alert_rules(g)
            .iter()
            .map(|r| r["alert"].to_string())
            .collect()
    };
    assert_eq!(
        names(&plain),
        names(&operator),
        "{ALERTS} vs {PROMETHEUS_RULE}"
    );
    for (a, b) in alert_rules(&plain).into_iter().zip(alert_rules(&operator)) {
        assert_eq!(
            a, b,
            "{} differs between {ALERTS} and {PROMETHEUS_RULE}",
            a["alert"]
        );
    }
    assert_eq!(
        plain, operator,
        "{ALERTS} and {PROMETHEUS_RULE}: groups differ"
    );
    let mut names = BTreeSet::new();
    for r in alert_rules(&plain) {
        let name = r["alert"].as_str().expect("every rule is an alert");
        assert!(names.insert(name), "duplicate alert {name}");
        assert!(r["for"].is_string(), "{name}: no `for`");
        let severity = r["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for a in ["summary", "description", "runbook"] {
            assert!(r["annotations"][a].is_string(), "{name}: no {a} annotation");
        }
    }
    // Instance-down alerting needs `up` of the documented job.
    let up = alert_rules(&plain)
        .into_iter()
        .find(|r| {
            refs(r["expr"].as_str().unwrap())
                .selectors
                .iter()
                .any(|s| s.metric == "up")
        })
        .expect("an alert on `up`");
    assert!(
        up["expr"]
            .as_str()
            .unwrap()
            .contains(&format!("job=\"{JOB}\"")),
        "{up}"
    );
    assert!(read(ALERTS).contains(&format!("job_name: {JOB}")));
}

/// Grafana's variables in a query, replaced so that Prometheus can parse it: time macros
/// (`$__rate_interval`, `$__range`, …) sit in range selectors, the others in regex matchers.
fn without_grafana_variables(expr: &str) -> String {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let var = &rest[at + 1..];
        let len = if var.starts_with('{') {
            var.find('}').map_or(var.len(), |e| e + 1)
        } else {
            var.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(var.len())
        };
        out.push_str(if var.starts_with("__") { "5m" } else { ".*" });
        rest = &var[len..];
    }
    out.push_str(rest);
    out
}

fn promtool(args: &[&str], dir: &Path) -> String {
    let out = std::process::Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool not found: install Debian's prometheus package (scripts/test.sh does)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

/// Prometheus's own tool: the alert rules are valid, their unit tests
/// (`examples/prometheus/sluice-alerts_test.yaml`) pass and cover every alert, and every
/// dashboard query is valid PromQL.
#[test]
fn promtool_checks_alerts_their_tests_and_every_panel_query() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus");
    promtool(&["check", "rules", "sluice-alerts.yaml"], &examples);
    let out = promtool(&["test", "rules", "sluice-alerts_test.yaml"], &examples);
    assert!(out.contains("SUCCESS"), "{out}");
    let tests = read("examples/prometheus/sluice-alerts_test.yaml");
    for r in alert_rules(&alert_groups(ALERTS)) {
        let name = r["alert"].as_str().unwrap();
        assert!(
            tests.contains(&format!("alertname=\"{name}\"")),
            "{name} has no unit test in sluice-alerts_test.yaml"
        );
    }

    let dash: Value = serde_json::from_str(&read(DASHBOARD)).expect("dashboard JSON");
    let rules: Vec<Value> = dashboard_queries(&dash)
        .iter()
        .enumerate()
        .map(|(i, q)| {
            serde_json::json!({
                "record": format!("dashboard:query_{i}"),
                "expr": without_grafana_variables(&q.expr),
                "labels": {"origin": q.origin},
            })
        })
        .collect();
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("dashboard-queries.yaml");
    let doc = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(&file, serde_yaml::to_string(&doc).unwrap()).unwrap();
    promtool(&["check", "rules", file.to_str().unwrap()], dir.path());
}
