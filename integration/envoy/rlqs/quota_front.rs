//! An Envoy whose `rate_limit_quota` filter asks sluice, shaped as `examples/rlqs/envoy.yaml`
//! (`/healthz` → bucket `{name: health}`, anything else → `{name: api, tier: <x-tier>}`),
//! with `no_assignment_behavior` DENY_ALL so nothing passes before sluice has decided; and
//! a load generator that offers it a steady rate and records every answer.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::envoy::{Envoy, endpoint, grpc_cluster, hcm, http1, socket};
use crate::support::redis::free_port;

/// How an Envoy's filter is configured, beyond its bucket matchers.
#[derive(Clone, Debug)]
pub struct QuotaFront {
    pub domain: String,
    /// The sluice replicas this Envoy's RLQS cluster holds (one: its stream goes there).
    pub sluice: Vec<SocketAddr>,
    /// After an assignment expires (`expired_assignment_behavior`), or none: back to
    /// `no_assignment_behavior`.
    pub expired: Option<Value>,
}

impl QuotaFront {
    pub fn new(domain: &str, sluice: SocketAddr) -> QuotaFront {
        QuotaFront {
            domain: domain.into(),
            sluice: vec![sluice],
            expired: None,
        }
    }

    /// `expired_assignment_behavior`: `ALLOW_ALL` for a minute.
    pub fn allow_all_when_expired(mut self) -> QuotaFront {
        self.expired = Some(json!({
            "expired_assignment_behavior_timeout": "60s",
            "fallback_rate_limit": { "blanket_rule": "ALLOW_ALL" },
        }));
        self
    }

    fn bucket_settings(&self, name: &str, id: Value) -> Value {
        let mut s = json!({
            "@type": "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings",
            "bucket_id_builder": { "bucket_id_builder": id },
            // Envoy 1.40 reports every 5 s whatever this says.
            "reporting_interval": "5s",
            "no_assignment_behavior": { "fallback_rate_limit": { "blanket_rule": "DENY_ALL" } },
            "deny_response_settings": { "http_status": { "code": 429 } },
        });
        if let Some(e) = &self.expired {
            s["expired_assignment_behavior"] = e.clone();
        }
        json!({ "action": { "name": name, "typed_config": s } })
    }

    pub fn bootstrap(&self, front: u16, upstream: u16) -> Value {
        let header = |h: &str| {
            json!({
                "name": h,
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput",
                    "header_name": h,
                }
            })
        };
        let health =
            self.bucket_settings("health", json!({ "name": { "string_value": "health" } }));
        let api = self.bucket_settings(
            "api",
            json!({
                "name": { "string_value": "api" },
                "tier": { "custom_value": header("x-tier") },
            }),
        );
        let filter = json!({
            "name": "envoy.filters.http.rate_limit_quota",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig",
                "rlqs_server": { "envoy_grpc": { "cluster_name": "sluice" } },
                "domain": self.domain,
                "bucket_matchers": {
                    "matcher_list": { "matchers": [{
                        "predicate": { "single_predicate": {
                            "input": header(":path"),
                            "value_match": { "exact": "/healthz" },
                        }},
                        "on_match": health,
                    }]},
                    "on_no_match": api,
                },
            }
        });
        let routes = |route: Value| json!({ "virtual_hosts": [{ "name": "all", "domains": ["*"], "routes": [route] }] });
        let endpoints: Vec<Value> = self.sluice.iter().map(|&a| endpoint(a)).collect();
        json!({
            "static_resources": {
                "listeners": [
                    {
                        "name": "front",
                        "address": socket(front),
                        "filter_chains": [{ "filters": [hcm("front", routes(json!({
                            "match": { "prefix": "/" },
                            "route": { "cluster": "upstream", "timeout": "5s" },
                        })), vec![filter], None)] }],
                    },
                    {
                        "name": "upstream",
                        "address": socket(upstream),
                        "filter_chains": [{ "filters": [hcm("upstream", routes(json!({
                            "match": { "prefix": "/" },
                            "direct_response": { "status": 200 },
                        })), vec![], None)] }],
                    }
                ],
                "clusters": [
                    {
                        "name": "upstream",
                        "type": "STATIC",
                        "connect_timeout": "1s",
                        "load_assignment": { "cluster_name": "upstream", "endpoints": [{
                            "lb_endpoints": [{ "endpoint": { "address": socket(upstream) } }]
                        }]},
                    },
                    // RLQS is a gRPC stream: HTTP/2.
                    grpc_cluster("sluice", endpoints),
                ]
            }
        })
    }

    pub async fn start(&self) -> QuotaEnvoy {
        let front = free_port();
        let upstream = free_port();
        let envoy = Envoy::start(self.bootstrap(front, upstream)).await;
        QuotaEnvoy {
            _envoy: envoy,
            addr: SocketAddr::from(([127, 0, 0, 1], front)),
        }
    }
}

/// A running [`QuotaFront`].
pub struct QuotaEnvoy {
    _envoy: Envoy,
    pub addr: SocketAddr,
}

impl QuotaEnvoy {
    /// One request in bucket `{name: api, tier}`; its status (0: no answer).
    pub async fn get(&self, tier: &str) -> u16 {
        status(self.addr, "/", tier).await
    }

    /// One request to `/healthz` (bucket `{name: health}`).
    pub async fn health(&self) -> u16 {
        status(self.addr, "/healthz", "").await
    }
}

async fn status(addr: SocketAddr, path: &str, tier: &str) -> u16 {
    match http1(addr, "GET", path, &[("x-tier", tier)], "").await {
        Ok(r) => r.status,
        Err(_) => 0,
    }
}

/// Every answer of an offered load: when its request was sent, and its status.
#[derive(Debug, Default)]
pub struct Answers(pub Vec<(Instant, u16)>);

impl Answers {
    /// Requests sent within `[from, to)` that passed (200).
    pub fn passed(&self, from: Instant, to: Instant) -> u64 {
        self.count(from, to, 200)
    }

    fn count(&self, from: Instant, to: Instant, status: u16) -> u64 {
        self.0
            .iter()
            .filter(|(at, s)| *at >= from && *at < to && *s == status)
            .count() as u64
    }

    /// All that passed.
    pub fn all_passed(&self) -> u64 {
        self.0.iter().filter(|(_, s)| *s == 200).count() as u64
    }

    /// Anything but 200 or 429 (a broken request, not a decision).
    pub fn broken(&self) -> u64 {
        self.0
            .iter()
            .filter(|(_, s)| *s != 200 && *s != 429)
            .count() as u64
    }
}

/// Offer `rate` requests a second in bucket `{name: api, tier}` of `e` until `until`, each
/// request on its own task (a slow answer does not slow the offer down).
pub async fn offer(e: &QuotaEnvoy, tier: &str, rate: u32, until: Instant) -> Answers {
    let mut tasks = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let at = Instant::now();
        if at >= until {
            break;
        }
        let addr = e.addr;
        let tier = tier.to_owned();
        tasks.push(tokio::spawn(
            async move { (at, status(addr, "/", &tier).await) },
        ));
    }
    let mut answers = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Ok(a) = t.await {
            answers.push(a);
        }
    }
    Answers(answers)
}
