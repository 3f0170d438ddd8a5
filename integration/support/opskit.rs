//! The operator's kit as data for tests: the Grafana dashboard's queries (panels and
//! template variables) and the Prometheus alert rules, each with where it comes from.

use std::path::Path;

use serde_json::Value;

use super::promql::template_labels;

pub const DASHBOARD: &str = "examples/grafana/sluice-dashboard.json";
pub const ALERTS: &str = "examples/prometheus/sluice-alerts.yaml";
pub const PROMETHEUS_RULE: &str = "examples/prometheus/prometheusrule.yaml";
/// The datasource variable every panel and template query uses.
pub const DATASOURCE: &str = "${DS_PROMETHEUS}";

/// A file of the repository.
pub fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

/// One query of the dashboard or the alerts, with where it comes from.
pub struct Query {
    pub origin: String,
    pub expr: String,
    /// Labels its legend or annotations refer to.
    pub templates: Vec<String>,
}

/// Every panel, rows' nested panels included.
pub fn panels(dash: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

pub fn dashboard_queries(dash: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    for p in panels(dash) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let origin = format!("panel {} '{}' target {}", p["id"], p["title"], t["refId"]);
            assert_eq!(t["datasource"]["uid"], DATASOURCE, "{origin}");
            out.push(Query {
                expr: t["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{origin}: no expr"))
                    .to_owned(),
                templates: template_labels(t["legendFormat"].as_str().unwrap_or_default()),
                origin,
            });
        }
    }
    // Template variables: `label_values(selector, label)` queries.
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let origin = format!("variable {}", v["name"]);
        assert_eq!(v["datasource"]["uid"], DATASOURCE, "{origin}");
        let q = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap_or_default();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{origin}: not a label_values() query: {q}"));
        let (selector, label) = inner
            .rsplit_once(',')
            .expect("label_values(selector, label)");
        out.push(Query {
            origin,
            expr: selector.to_owned(),
            templates: vec![label.trim().to_owned()],
        });
    }
    out
}

pub fn alert_groups(rel: &str) -> Value {
    let v: Value = serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    if rel == PROMETHEUS_RULE {
        assert_eq!(v["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(v["kind"], "PrometheusRule");
        assert!(v["metadata"]["name"].is_string());
        v["spec"]["groups"].clone()
    } else {
        v["groups"].clone()
    }
}

pub fn alert_rules(groups: &Value) -> Vec<&Value> {
    groups
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .collect()
}

pub fn alert_queries(groups: &Value) -> Vec<Query> {
    alert_rules(groups)
        .into_iter()
        .map(|r| {
            let templates = r["annotations"]
                .as_object()
                .into_iter()
                .flatten()
                .chain(r["labels"].as_object().into_iter().flatten())
                .flat_map(|(_, v)| template_labels(v.as_str().unwrap_or_default()))
                .collect();
            Query {
                origin: format!("alert {}", r["alert"]),
                expr: r["expr"].as_str().expect("expr").to_owned(),
                templates,
            }
        })
        .collect()
}
