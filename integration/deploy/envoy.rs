//! `examples/envoy.yaml`, the bootstrap the compose demo runs and the Kubernetes example
//! reuses, and the Envoy config fragments shared with the Istio EnvoyFilter: the rate
//! limit filter's settings, the descriptors its `rate_limits` actions build, clusters'
//! endpoints. Parsed once; what the other files claim about Envoy is checked against it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use serde_yaml::Value;
use sluice::settings::{Settings, parse_duration};

use super::binary::Entry;
use super::files::{at, port_at, scalar, seq_at, str_at, yaml};

pub const ENVOY_YAML: &str = "examples/envoy.yaml";

pub const RATELIMIT_FILTER: &str = "envoy.filters.http.ratelimit";
const RATELIMIT_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";
const ROUTER_FILTER: &str = "envoy.filters.http.router";

/// The descriptor one `rate_limits` entry produces (keys as Envoy names them).
fn descriptor(rate_limit: &Value, what: &str) -> Vec<Entry> {
    seq_at(rate_limit, "actions")
        .iter()
        .map(|action| {
            let (kind, body) = action
                .as_mapping()
                .and_then(|m| m.iter().next())
                .map(|(k, v)| (k.as_str().unwrap_or(""), v))
                .unwrap_or_else(|| panic!("{what}: bad action {action:?}"));
            let named = |default: &str| {
                body.get("descriptor_key")
                    .and_then(Value::as_str)
                    .unwrap_or(default)
                    .to_string()
            };
            let fixed = || Some(str_at(body, "descriptor_value").to_string());
            match kind {
                "source_cluster" => ("source_cluster".into(), None),
                "destination_cluster" => ("destination_cluster".into(), None),
                "remote_address" => ("remote_address".into(), None),
                "masked_remote_address" => ("masked_remote_address".into(), None),
                "request_headers" => (str_at(body, "descriptor_key").into(), None),
                "query_parameters" => (str_at(body, "descriptor_key").into(), None),
                "metadata" => (str_at(body, "descriptor_key").into(), None),
                "generic_key" => (named("generic_key"), fixed()),
                "header_value_match" => (named("header_match"), fixed()),
                "query_parameter_value_match" => (named("query_match"), fixed()),
                other => panic!("{what}: action `{other}` is not understood by this test"),
            }
        })
        .collect()
}

pub fn descriptors(rate_limits: &[Value], what: &str) -> Vec<Vec<Entry>> {
    rate_limits.iter().map(|r| descriptor(r, what)).collect()
}

/// `socket_address`es of a cluster's `load_assignment`.
pub fn cluster_endpoints(cluster: &Value) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    for group in seq_at(cluster, "load_assignment.endpoints") {
        for lb in seq_at(group, "lb_endpoints") {
            let sa = at(lb, "endpoint.address.socket_address");
            out.push((str_at(sa, "address").to_string(), port_at(sa, "port_value")));
        }
    }
    assert!(!out.is_empty(), "cluster without endpoints: {cluster:?}");
    out
}

/// A cluster's `http2_protocol_options` under its typed `HttpProtocolOptions`.
fn http2_options(cluster: &Value) -> Option<&Value> {
    // (Extension names contain dots, so no `at` here.)
    cluster
        .get("typed_extension_protocol_options")
        .and_then(|o| o.get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"))
        .and_then(|o| o.get("explicit_http_config"))
        .and_then(|c| c.get("http2_protocol_options"))
}

pub fn speaks_http2(cluster: &Value) -> bool {
    http2_options(cluster).is_some()
        // The deprecated cluster-level field (the istio.io sample still uses it).
        || cluster.get("http2_protocol_options").is_some()
}

/// How long Envoy's gRPC health check of `cluster` may take, at worst, to take out a sluice
/// instance that has just started reporting NOT_SERVING: `unhealthy_threshold` checks, each
/// up to an interval after the previous one ended, and each up to its `timeout` long. The
/// interval is the larger of `interval` and `no_traffic_interval` (default 60s), which Envoy
/// uses for a cluster only the rate limit filter calls.
pub fn health_check_notices_within(cluster: &Value, what: &str) -> Duration {
    let checks = seq_at(cluster, "health_checks");
    let check = checks
        .iter()
        .find(|c| at(c, "grpc_health_check.service_name").as_str() == Some("ratelimit"))
        .unwrap_or_else(|| {
            panic!("{what}: the sluice cluster has no gRPC health check of service `ratelimit`")
        });
    let duration = |field: &str, default: &str| {
        let text = scalar(at(check, field)).unwrap_or_else(|| default.into());
        parse_duration(field, &text).unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    let interval = duration("interval", "").max(duration("no_traffic_interval", "60s"));
    let threshold: u32 = scalar(at(check, "unhealthy_threshold"))
        .map(|t| t.parse().expect("unhealthy_threshold"))
        .unwrap_or_else(|| panic!("{what}: say unhealthy_threshold"));
    (interval + duration("timeout", "")) * threshold
}

/// [`assert_checks_bounded_as_the_guide`] for the rate limit cluster of `examples/envoy.yaml`,
/// with `whose` settings.
pub fn assert_rls_checks_bounded_as_the_guide(settings: &Settings, whose: &str) {
    let boot = envoy_bootstrap();
    let cluster = &boot.clusters[&boot.rls_cluster];
    assert_checks_bounded_as_the_guide(cluster, settings, &format!("{ENVOY_YAML} with {whose}"));
}

/// A rolling restart fails no check: Envoy takes an instance out (`health_checks` of
/// [`assert_health_check_within_shutdown_delay`] for the rate limit cluster of
/// `examples/envoy.yaml`, with `whose` settings.
pub fn assert_rls_health_check_within_shutdown_delay(settings: &Settings, whose: &str) {
    let boot = envoy_bootstrap();
    let cluster = &boot.clusters[&boot.rls_cluster];
    let what = format!("{ENVOY_YAML} with {whose}");
    assert_health_check_within_shutdown_delay(cluster, settings, &what);
}

/// `cluster`) before the instance closes its listener (`settings`' shutdown delay).
pub fn assert_health_check_within_shutdown_delay(cluster: &Value, settings: &Settings, what: &str) {
    let notices = health_check_notices_within(cluster, what);
    assert!(
        notices < settings.shutdown_delay,
        "{what}: Envoy's health check takes up to {notices:?} to notice a stopping sluice, \
         which closes its listener after {:?} (--shutdown-delay): checks sent in between fail",
        settings.shutdown_delay
    );
}

/// The overload guide's bound on the checks one Envoy keeps on sluice
/// (docs/how-to/overload-and-tuning.md): the cluster's HTTP/2 `max_concurrent_streams` no
/// more than sluice's stream limit (`settings`), and its circuit breakers set. Envoy's
/// defaults (1 024 each) queue the checks an overloaded sluice cannot take until they are
/// late: goodput 0.02–0.09 of capacity at 2× through a real Envoy (RELIABILITY.md,
/// "Overload through Envoy"). `max_requests` at most `max_connections` × the streams, and
/// `max_pending_requests` at most a quarter of all the calls outstanding.
pub fn assert_checks_bounded_as_the_guide(cluster: &Value, settings: &Settings, what: &str) {
    let streams = http2_options(cluster)
        .and_then(|h| h.get("max_concurrent_streams"))
        .and_then(Value::as_u64)
        .unwrap_or_else(|| {
            panic!("{what}: the sluice cluster's http2_protocol_options must set max_concurrent_streams")
        });
    let limit = u64::from(settings.listen.grpc_max_concurrent_streams);
    assert!(
        streams <= limit,
        "{what}: max_concurrent_streams {streams} is past sluice's --grpc-max-concurrent-streams {limit}"
    );
    let thresholds = seq_at(cluster, "circuit_breakers.thresholds");
    let default = thresholds
        .iter()
        .find(|t| t.get("priority").and_then(Value::as_str).unwrap_or("DEFAULT") == "DEFAULT")
        .unwrap_or_else(|| {
            panic!("{what}: the sluice cluster needs circuit_breakers (Envoy's defaults queue checks until they are late)")
        });
    let n = |field: &str| {
        default
            .get(field)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| {
                panic!("{what}: say the circuit breakers' {field} (Envoy's default is 1024)")
            })
    };
    let (connections, requests, pending) = (
        n("max_connections"),
        n("max_requests"),
        n("max_pending_requests"),
    );
    assert!(
        requests <= connections * streams,
        "{what}: max_requests {requests} is past max_connections {connections} × {streams} streams"
    );
    assert!(
        pending * 4 <= requests + pending,
        "{what}: max_pending_requests {pending} is over a quarter of the {} calls outstanding",
        requests + pending
    );
}

// What every deployment here relies on from the rate limit filter's config, one claim
// per function so that each file's tests name the claim that fails.

/// The filter is the v3 RateLimit filter and calls sluice over the v3 RLS API.
pub fn assert_ratelimit_filter_speaks_v3(config: &Value, what: &str) {
    assert_eq!(str_at(config, "@type"), RATELIMIT_TYPE, "{what}");
    assert_eq!(
        str_at(config, "rate_limit_service.transport_api_version"),
        "V3",
        "{what}: sluice speaks only the v3 RLS API"
    );
}

pub fn assert_ratelimit_filter_fails_open(config: &Value, what: &str) {
    assert_eq!(
        at(config, "failure_mode_deny").as_bool(),
        Some(false),
        "{what}: the examples fail open (say so explicitly)"
    );
}

pub fn assert_ratelimit_filter_sends_draft_03_headers(config: &Value, what: &str) {
    assert_eq!(
        str_at(config, "enable_x_ratelimit_headers"),
        "DRAFT_VERSION_03",
        "{what}"
    );
}

/// The filter's (domain, rate limit cluster name).
pub fn ratelimit_filter_target(config: &Value) -> (String, String) {
    let domain = str_at(config, "domain").to_string();
    let cluster = str_at(
        config,
        "rate_limit_service.grpc_service.envoy_grpc.cluster_name",
    )
    .to_string();
    (domain, cluster)
}

pub struct Bootstrap {
    pub domain: String,
    /// Where the rate limit filter's gRPC calls go.
    pub rls: Vec<(String, u16)>,
    /// Every other cluster's endpoints, by cluster name.
    pub upstreams: BTreeMap<String, Vec<(String, u16)>>,
    pub descriptors: Vec<Vec<Entry>>,
    pub listener_ports: Vec<u16>,
    pub admin_port: Option<u16>,
    /// Each HTTP connection manager's HTTP filter names, in order.
    http_filters: Vec<Vec<String>>,
    /// Each HTTP connection manager's rate limit filter `typed_config`.
    ratelimit_filters: Vec<Value>,
    rls_cluster: String,
    clusters: BTreeMap<String, Value>,
    /// The clusters routes send requests to.
    routed: BTreeSet<String>,
}

fn parse_bootstrap(b: &Value, what: &str) -> Bootstrap {
    let clusters: BTreeMap<String, Value> = seq_at(b, "static_resources.clusters")
        .iter()
        .map(|c| (str_at(c, "name").to_string(), c.clone()))
        .collect();
    let mut domain = None;
    let mut rls_cluster = None;
    let mut descs = Vec::new();
    let mut routed = BTreeSet::new();
    let mut listener_ports = Vec::new();
    let mut http_filter_names = Vec::new();
    let mut ratelimit_filters = Vec::new();
    for listener in seq_at(b, "static_resources.listeners") {
        listener_ports.push(port_at(listener, "address.socket_address.port_value"));
        for chain in seq_at(listener, "filter_chains") {
            for filter in seq_at(chain, "filters") {
                if str_at(filter, "name") != "envoy.filters.network.http_connection_manager" {
                    continue;
                }
                let hcm = at(filter, "typed_config");
                let http_filters = seq_at(hcm, "http_filters");
                http_filter_names.push(
                    http_filters
                        .iter()
                        .map(|f| str_at(f, "name").to_string())
                        .collect(),
                );
                let rl = http_filters
                    .iter()
                    .find(|f| str_at(f, "name") == RATELIMIT_FILTER)
                    .unwrap_or_else(|| panic!("{what}: no {RATELIMIT_FILTER} filter"));
                let config = at(rl, "typed_config");
                let (d, c) = ratelimit_filter_target(config);
                ratelimit_filters.push(config.clone());
                domain = Some(d);
                rls_cluster = Some(c);
                for vhost in seq_at(hcm, "route_config.virtual_hosts") {
                    descs.extend(descriptors(seq_at(vhost, "rate_limits"), what));
                    for route in seq_at(vhost, "routes") {
                        routed.insert(str_at(route, "route.cluster").to_string());
                        descs.extend(descriptors(seq_at(route, "route.rate_limits"), what));
                    }
                }
            }
        }
    }
    let domain = domain.unwrap_or_else(|| panic!("{what}: no HTTP connection manager"));
    let rls_cluster = rls_cluster.expect("rate limit cluster");
    let rls = clusters
        .get(&rls_cluster)
        .unwrap_or_else(|| panic!("{what}: cluster `{rls_cluster}` is not defined"));
    let upstreams = clusters
        .iter()
        .filter(|(name, _)| **name != rls_cluster)
        .map(|(name, c)| (name.clone(), cluster_endpoints(c)))
        .collect();
    let admin_port = scalar(at(b, "admin.address.socket_address.port_value"))
        .map(|p| p.parse().expect("admin port"));
    Bootstrap {
        domain,
        rls: cluster_endpoints(rls),
        upstreams,
        descriptors: descs,
        listener_ports,
        admin_port,
        http_filters: http_filter_names,
        ratelimit_filters,
        rls_cluster,
        clusters,
        routed,
    }
}

/// `examples/envoy.yaml`, parsed once for every test that relies on it.
pub fn envoy_bootstrap() -> &'static Bootstrap {
    static BOOTSTRAP: OnceLock<Bootstrap> = OnceLock::new();
    BOOTSTRAP.get_or_init(|| parse_bootstrap(&yaml(ENVOY_YAML), ENVOY_YAML))
}

#[test]
fn envoy_router_is_the_last_http_filter() {
    let boot = envoy_bootstrap();
    for names in &boot.http_filters {
        assert_eq!(
            names.last().map(String::as_str),
            Some(ROUTER_FILTER),
            "{ENVOY_YAML}: the router must be the last HTTP filter"
        );
    }
}

#[test]
fn envoy_ratelimit_filter_speaks_the_v3_api() {
    for config in &envoy_bootstrap().ratelimit_filters {
        assert_ratelimit_filter_speaks_v3(config, ENVOY_YAML);
    }
}

#[test]
fn envoy_ratelimit_filter_fails_open() {
    for config in &envoy_bootstrap().ratelimit_filters {
        assert_ratelimit_filter_fails_open(config, ENVOY_YAML);
    }
}

#[test]
fn envoy_ratelimit_filter_sends_draft_03_ratelimit_headers() {
    for config in &envoy_bootstrap().ratelimit_filters {
        assert_ratelimit_filter_sends_draft_03_headers(config, ENVOY_YAML);
    }
}

#[test]
fn envoy_rate_limit_cluster_speaks_http2() {
    let boot = envoy_bootstrap();
    let rls_cluster = &boot.rls_cluster;
    assert!(
        speaks_http2(&boot.clusters[rls_cluster]),
        "{ENVOY_YAML}: cluster `{rls_cluster}` must speak HTTP/2 (gRPC)"
    );
}

#[test]
fn envoy_routes_only_to_defined_clusters() {
    let boot = envoy_bootstrap();
    for c in &boot.routed {
        assert!(
            boot.clusters.contains_key(c),
            "{ENVOY_YAML}: routes to undefined cluster `{c}`"
        );
    }
}

/// The `%DYNAMIC_METADATA(envoy.filters.http.ratelimit:…)%` paths of the access logs'
/// JSON formats, each a list of keys.
fn access_log_ratelimit_paths(b: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for listener in seq_at(b, "static_resources.listeners") {
        for chain in seq_at(listener, "filter_chains") {
            for filter in seq_at(chain, "filters") {
                for log in seq_at(at(filter, "typed_config"), "access_log") {
                    let format = at(log, "typed_config.log_format.json_format");
                    let fields = format.as_mapping().expect("json_format is a mapping");
                    for value in fields.values().filter_map(Value::as_str) {
                        for part in value.split("%DYNAMIC_METADATA(").skip(1) {
                            let inner = part.split(')').next().unwrap_or_default();
                            let mut keys = inner.split(':').map(str::to_owned);
                            if keys.next().as_deref() == Some(RATELIMIT_FILTER) {
                                out.push(keys.collect());
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The example's access log prints the deciding rule: every rate limit field its format
/// names is one sluice emits (with `--decision-metadata`, as the compose demo runs it),
/// shown on a 429 that the demo rules' `/limited*` rule decides — with the JSON body and
/// content type that rule's `response` gives Envoy.
#[tokio::test]
async fn envoy_access_log_prints_fields_sluice_emits() {
    use crate::support::sluice::{call, desc, header, metadata_json, req, sluice};
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

    let paths = access_log_ratelimit_paths(&yaml(ENVOY_YAML));
    assert!(
        paths.iter().any(|p| p == &["decidingRule".to_string()]),
        "{ENVOY_YAML}: the access log should print the deciding rule: {paths:?}"
    );
    let rules = super::files::read("examples/demo/config/demo.yaml");
    let s = sluice()
        .file("demo.yaml", &rules)
        .env("SLUICE_DECISION_METADATA", "true")
        .start()
        .await;
    let mut c = s.client().await;
    // What Envoy sends for `GET /limited` from one client (no header_match: not a POST).
    let boot = envoy_bootstrap();
    let descriptors: Vec<_> = boot
        .descriptors
        .iter()
        .filter(|d| d.iter().all(|(k, _)| k != "header_match"))
        .map(|d| {
            let entries: Vec<(String, String)> = d
                .iter()
                .map(|(k, v)| {
                    let value = match (k.as_str(), v) {
                        (_, Some(v)) => v.clone(),
                        ("path", None) => "/limited".into(),
                        (_, None) => "192.0.2.1".into(),
                    };
                    (k.clone(), value)
                })
                .collect();
            let pairs: Vec<(&str, &str)> = entries
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            desc(&pairs)
        })
        .collect();
    // 2 per second on /limited*: a 429 comes within a few calls, whatever the clock.
    let mut denied = None;
    for _ in 0..50 {
        let r = call(&mut c, req(&boot.domain, descriptors.clone())).await;
        if r.overall_code == Code::OverLimit as i32 {
            denied = Some(r);
            break;
        }
    }
    let r = denied.expect("/limited* denies within 50 calls");
    let md = metadata_json(&r);
    for p in &paths {
        let found = p.iter().try_fold(&md, |v, k| v.get(k));
        assert!(
            found.is_some_and(|v| !v.is_null()),
            "{ENVOY_YAML} logs {p:?}, which sluice does not emit: {md}"
        );
    }
    assert_eq!(md["overallCode"], "OVER_LIMIT");
    assert_eq!(md["decidingRule"], "demo.path_/limited*");
    let limited = md["descriptors"]
        .as_array()
        .expect("descriptors")
        .iter()
        .find(|d| d["rule"] == "demo.path_/limited*")
        .expect("the /limited* descriptor");
    assert_eq!(limited["code"], "OVER_LIMIT");
    assert!(
        limited["limitName"]
            .as_str()
            .is_some_and(|n| n.starts_with("limited_per_"))
    );
    // What Envoy sends the client: the rule's body, with its content type.
    let body: serde_json::Value = serde_json::from_slice(&r.raw_body).expect("a JSON body");
    assert_eq!(body["rule"], "limited");
    assert_eq!(header(&r, "content-type"), Some("application/json"));
    assert_eq!(header(&r, "x-ratelimit-rule"), Some("limited"));
}
