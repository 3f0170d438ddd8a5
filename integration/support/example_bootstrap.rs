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
        let listeners = resources["listeners"]
            .as_array_mut()
            .expect("static listeners");
        assert_eq!(
            names(listeners),
            sorted(self.listeners.iter().map(|(n, _)| n.clone())),
            "the test places every listener of the file"
        );
        for l in listeners {
            let port = self.port(l["name"].as_str().unwrap_or_default());
            l["address"] =
                json!({ "socket_address": { "address": "127.0.0.1", "port_value": port } });
        }
        let clusters = resources["clusters"]
            .as_array_mut()
            .expect("static clusters");
        assert_eq!(
            names(clusters),
            sorted(self.clusters.iter().map(|(n, _)| n.clone())),
            "the test places every cluster of the file"
        );
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

fn names(items: &[Value]) -> Vec<String> {
    sorted(
        items
            .iter()
            .map(|i| i["name"].as_str().unwrap_or_default().to_string()),
    )
}

fn sorted(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = names.collect();
    v.sort();
    v
}
