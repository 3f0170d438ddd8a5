//! The Envoy bootstraps of `examples/` as a test runs them: read from the file as it is, with
//! only their addresses rewritten (every listener and every cluster endpoint to a loopback
//! port the test chose). Everything else (filters, routes, health checks, circuit breakers,
//! timeouts) is the file's, so a test through it tests what a user copies.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use super::envoy::serde_yaml_to_json;

/// `rel` (a path from the repository's root) as the JSON value Envoy reads.
pub fn read(rel: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_yaml_to_json(&text)
}

/// The cluster named `name` of a bootstrap's `static_resources`.
pub fn cluster<'a>(bootstrap: &'a Value, name: &str) -> &'a Value {
    bootstrap["static_resources"]["clusters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no cluster `{name}` in the bootstrap"))
}

/// Where a test puts each listener and each cluster of a bootstrap.
#[derive(Default)]
pub struct Addresses {
    listeners: Vec<(String, u16)>,
    clusters: Vec<(String, Vec<SocketAddr>)>,
}

impl Addresses {
    /// Listener `name` on `127.0.0.1:port`.
    pub fn listener(mut self, name: &str, port: u16) -> Self {
        self.listeners.push((name.into(), port));
        self
    }

    /// Cluster `name`'s endpoints: these addresses instead of the file's host names.
    pub fn cluster(mut self, name: &str, endpoints: &[SocketAddr]) -> Self {
        self.clusters.push((name.into(), endpoints.to_vec()));
        self
    }

    /// The bootstrap with these addresses, and no `admin` ([`super::envoy::Envoy::start`]
    /// sets its own). Panics when the file has a listener or cluster the test did not place
    /// (or the test names one the file lacks): a new one in an example is then noticed
    /// here rather than left pointing at a host name the machine cannot resolve.
    pub fn apply(&self, mut bootstrap: Value) -> Value {
        if let Some(b) = bootstrap.as_object_mut() {
            b.remove("admin");
        }
        let resources = &mut bootstrap["static_resources"];
        let listeners = placed(&mut resources["listeners"], &self.listeners, "listener");
        for l in listeners {
            let port = self.port(l["name"].as_str().unwrap_or_default());
            l["address"] =
                json!({ "socket_address": { "address": "127.0.0.1", "port_value": port } });
        }
        let clusters = placed(&mut resources["clusters"], &self.clusters, "cluster");
        for c in clusters {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            let endpoints: Vec<Value> = self
                .endpoints(&name)
                .iter()
                .map(|a| {
                    json!({ "endpoint": { "address": { "socket_address": {
                        "address": a.ip().to_string(), "port_value": a.port() } } } })
                })
                .collect();
            c["load_assignment"] = json!({
                "cluster_name": name,
                "endpoints": [{ "lb_endpoints": endpoints }],
            });
        }
        bootstrap
    }

    fn port(&self, listener: &str) -> u16 {
        self.listeners
            .iter()
            .find(|(n, _)| n == listener)
            .map(|(_, p)| *p)
            .expect("placed")
    }

    fn endpoints(&self, cluster: &str) -> &[SocketAddr] {
        self.clusters
            .iter()
            .find(|(n, _)| n == cluster)
            .map(|(_, e)| e.as_slice())
            .expect("placed")
    }
}

/// The static `items` (listeners or clusters) of a bootstrap, once checked to be exactly those
/// the test placed.
fn placed<'a, T>(items: &'a mut Value, by_test: &[(String, T)], what: &str) -> &'a mut Vec<Value> {
    let items = items
        .as_array_mut()
        .unwrap_or_else(|| panic!("static {what}s"));
    let mut in_file: Vec<&str> = items
        .iter()
        .map(|i| i["name"].as_str().unwrap_or_default())
        .collect();
    in_file.sort();
    let mut placed: Vec<&str> = by_test.iter().map(|(n, _)| n.as_str()).collect();
    placed.sort();
    assert_eq!(in_file, placed, "the test places every {what} of the file");
    items
}
