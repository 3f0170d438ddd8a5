//! The Envoy the scenarios call: what envoyproxy/ratelimit's example proxy
//! (envoyproxy/ratelimit:examples/envoy/proxy.yaml at f2fb157) does for the paths the
//! scenarios use, and their mock upstream (envoyproxy/ratelimit:examples/envoy/mock.yaml):
//! two services answering "Hello World from Service 1" and "… 2", here listeners of the
//! same Envoy.
//!
//! The HTTP filters, in their order: `ratelimit` with their settings; a header mutation
//! copying the service sluice names in its dynamic metadata (`service_with_quota`) into
//! `x-envoy-service-with-quota`; `header_to_metadata` turning that header into the load
//! balancer's `service` key, so `/multiservice-tokenquota` goes to a service with quota
//! left; the router.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::support::envoy::{endpoint, grpc_cluster, hcm, socket};

/// Where the proxy listens and its two upstream services do.
pub struct Ports {
    pub front: u16,
    pub service_1: u16,
    pub service_2: u16,
}

/// The bootstrap, asking sluice at `rls` (its gRPC port).
pub fn bootstrap(rls: SocketAddr, ports: &Ports) -> Value {
    json!({
        "static_resources": {
            "listeners": [
                front(ports.front),
                upstream("service_1", ports.service_1, "Hello World from Service 1"),
                upstream("service_2", ports.service_2, "Hello World from Service 2"),
            ],
            "clusters": [
                ratelimit_cluster(rls),
                mock_cluster(ports.service_1),
                multiservice_cluster(ports),
            ],
        }
    })
}

/// The listener the scenarios call.
fn front(port: u16) -> Value {
    let ratelimit = json!({
        "name": "envoy.filters.http.ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
            "domain": "rl",
            "request_type": "external",
            "stage": 0,
            "rate_limited_as_resource_exhausted": true,
            "failure_mode_deny": false,
            "enable_x_ratelimit_headers": "DRAFT_VERSION_03",
            // Theirs leaves Envoy's 20 ms: see the suite's module comment.
            "timeout": "2s",
            "rate_limit_service": {
                "grpc_service": { "envoy_grpc": { "cluster_name": "ratelimit" } },
                "transport_api_version": "V3",
            },
        }
    });
    let service_with_quota = json!({
        "name": "envoy.filters.http.header_mutation",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
            "mutations": { "request_mutations": [{ "append": {
                "header": {
                    "key": "x-envoy-service-with-quota",
                    "value": "%DYNAMIC_METADATA(envoy.filters.http.ratelimit:metadata:service_with_quota:name)%",
                },
                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
            }}]},
        }
    });
    let to_lb_metadata = json!({
        "name": "envoy.filters.http.header_to_metadata",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config",
            "request_rules": [{
                "header": "x-envoy-service-with-quota",
                "on_header_present": {
                    "metadata_namespace": "envoy.lb", "key": "service", "type": "STRING",
                },
            }],
        }
    });
    let foo_bar = headers(&["foo", "bar"]);
    let source_destination = headers(&["source_cluster", "destination_cluster"]);
    let routes = json!([
        route(
            "/twoheader",
            "mock",
            json!([foo_bar, headers(&["foo", "baz"])])
        ),
        route("/fourheader", "mock", json!([foo_bar, source_destination])),
        route(
            "/fiveheader",
            "mock",
            json!([foo_bar, source_destination, headers(&["category"])]),
        ),
        route("/unspec", "mock", json!([headers(&["unspec"])])),
        // Both quotas checked and charged.
        filter_route(
            "/quota",
            "mock",
            json!([{ "actions": [entry("service_1")] }, { "actions": [entry("service_2")] }]),
        ),
        // service_2 checked without a charge; charged when the response is done.
        filter_route(
            "/tokenquota",
            "mock",
            json!([
                { "actions": [entry("service_2")], "hits_addend": { "number": 0 } },
                { "actions": [entry("service_2")], "hits_addend": { "number": 1 },
                  "apply_on_stream_done": true },
            ]),
        ),
        // Both quotas checked without a charge; the service that answered (its locality's
        // name) is charged when the response is done.
        filter_route(
            "/multiservice-tokenquota",
            "multiservice",
            json!([
                { "actions": [entry("service_1")], "hits_addend": { "number": 0 } },
                { "actions": [entry("service_2")], "hits_addend": { "number": 0 } },
                { "actions": [{ "metadata": {
                    "descriptor_key": "service",
                    "source": "CLUSTER_LOCALITY_ENTRY",
                    "metadata_key": {
                        "key": "envoy.cluster.locality", "path": [{ "key": "name" }],
                    },
                  }}],
                  "hits_addend": { "number": 1 },
                  "apply_on_stream_done": true },
            ]),
        ),
    ]);
    json!({
        "name": "front",
        "address": socket(port),
        "filter_chains": [{ "filters": [hcm(
            "front",
            json!({ "virtual_hosts": [{ "name": "backend", "domains": ["*"], "routes": routes }] }),
            vec![ratelimit, service_with_quota, to_lb_metadata],
            None,
        )]}],
    })
}

/// One `rate_limits` entry: each header as a descriptor entry of its own name.
fn headers(names: &[&str]) -> Value {
    let actions: Vec<Value> = names
        .iter()
        .map(|h| json!({ "request_headers": { "header_name": h, "descriptor_key": h } }))
        .collect();
    json!({ "actions": actions })
}

/// The action for the entry `service=<name>`.
fn entry(name: &str) -> Value {
    json!({ "generic_key": { "descriptor_key": "service", "descriptor_value": name } })
}

/// A route with its `rate_limits` on the route.
fn route(prefix: &str, cluster: &str, rate_limits: Value) -> Value {
    json!({
        "match": { "prefix": prefix },
        "route": { "cluster": cluster, "rate_limits": rate_limits },
    })
}

/// A route with its `rate_limits` in the filter's per-route config (where Envoy honours
/// `hits_addend` and `apply_on_stream_done`), added to the virtual host's.
fn filter_route(prefix: &str, cluster: &str, rate_limits: Value) -> Value {
    json!({
        "match": { "prefix": prefix },
        "route": { "cluster": cluster },
        "typed_per_filter_config": { "envoy.filters.http.ratelimit": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute",
            "vh_rate_limits": "INCLUDE",
            "override_option": "INCLUDE_POLICY",
            "rate_limits": rate_limits,
        }},
    })
}

/// One of the mock upstream's services.
fn upstream(name: &str, port: u16, body: &str) -> Value {
    json!({
        "name": name,
        "address": socket(port),
        "filter_chains": [{ "filters": [hcm(
            name,
            json!({ "virtual_hosts": [{ "name": name, "domains": ["*"], "routes": [{
                "match": { "prefix": "/" },
                "direct_response": { "status": 200, "body": { "inline_string": body } },
            }]}]}),
            vec![],
            None,
        )]}],
    })
}

/// sluice's gRPC port, over HTTP/2.
fn ratelimit_cluster(rls: SocketAddr) -> Value {
    grpc_cluster("ratelimit", vec![endpoint(rls)])
}

/// Service 1, for the routes with plain limits.
fn mock_cluster(service_1: u16) -> Value {
    json!({
        "name": "mock",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": { "cluster_name": "mock", "endpoints": [{ "lb_endpoints": [
            { "endpoint": { "address": socket(service_1) } }
        ]}]},
    })
}

/// Both services, one locality each (named after it, for the stream-done report), chosen by
/// the `service` key the filters put in `envoy.lb` metadata; any service without one.
fn multiservice_cluster(ports: &Ports) -> Value {
    let locality = |region: &str, name: &str, port: u16| {
        json!({
            "locality": { "region": region },
            "metadata": { "filter_metadata": { "envoy.cluster.locality": { "name": name } } },
            "lb_endpoints": [{
                "endpoint": { "address": socket(port) },
                "metadata": { "filter_metadata": { "envoy.lb": { "service": name } } },
            }],
        })
    };
    json!({
        "name": "multiservice",
        "type": "STATIC",
        "connect_timeout": "1s",
        "lb_subset_config": {
            "fallback_policy": "ANY_ENDPOINT",
            "subset_selectors": [{ "keys": ["service"] }],
        },
        "load_assignment": { "cluster_name": "multiservice", "endpoints": [
            locality("region_1", "service_1", ports.service_1),
            locality("region_2", "service_2", ports.service_2),
        ]},
    })
}
