//! Health: gRPC `grpc.health.v1.Health` (service names `""`, `ratelimit` and the full
//! service name) and `/healthcheck` report the same state: the store is ready, a config is
//! loaded when required, and the process is not shutting down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use super::RateLimitService;
use crate::store::Store;

const SERVICE_NAMES: [&str; 3] = [
    "",
    "ratelimit",
    "envoy.service.ratelimit.v3.RateLimitService",
];

pub struct Health {
    service: Arc<RateLimitService>,
    reporter: HealthReporter,
    requires_config: bool,
    shutting_down: AtomicBool,
    /// Last published state: 0 none yet, 1 serving, 2 not serving.
    last: AtomicU8,
}

impl Health {
    pub fn new(
        service: Arc<RateLimitService>,
        reporter: HealthReporter,
        requires_config: bool,
    ) -> Health {
        Health {
            service,
            reporter,
            requires_config,
            shutting_down: AtomicBool::new(false),
            last: AtomicU8::new(0),
        }
    }

    pub fn is_healthy(&self) -> bool {
        !self.shutting_down.load(Ordering::SeqCst) && healthy(&self.service, self.requires_config)
    }

    /// Mark the process as draining: every health check fails from now on.
    pub async fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.refresh().await;
    }

    /// Push the current state to the gRPC health service when it changed (called on a
    /// timer; Watch streams see transitions only).
    pub async fn refresh(&self) {
        let healthy = self.is_healthy();
        let state = if healthy { 1 } else { 2 };
        if self.last.swap(state, Ordering::SeqCst) == state {
            return;
        }
        tracing::info!(healthy, "health changed");
        let status = if healthy {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for name in SERVICE_NAMES {
            self.reporter.set_service_status(name, status).await;
        }
    }
}

/// The store is ready and, when required, at least one domain is loaded.
///
/// With `--store-failure-mode local` decisions go on without the store, so health stays
/// SERVING unless `--unhealthy-when-degraded`.
pub fn healthy(service: &RateLimitService, requires_config: bool) -> bool {
    (service.store().is_ready() || service.serves_without_store())
        && !service.degraded_unhealthy()
        && (!requires_config || service.config().config.domain_count() > 0)
}
