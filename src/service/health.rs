//! Health: gRPC `grpc.health.v1.Health` (service names `""`, `ratelimit` and the full
//! service name) and `/healthcheck` report the same state, from one source: the state is
//! evaluated here (the store is ready, a config is loaded when required, the process is not
//! shutting down) and published to the gRPC health service; `/healthcheck` publishes the
//! state as it is now, then answers what that service says, so the two never disagree. It
//! is evaluated on a timer, at once when decisions go local or back to the store
//! ([`Health::wake`]), and by every `/healthcheck`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Mutex, Notify};
use tonic_health::ServingStatus;
use tonic_health::pb::health_check_response::ServingStatus as WireStatus;
use tonic_health::pb::health_server::Health as _;
use tonic_health::server::{HealthReporter, HealthService};

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
    /// What gRPC health answers from (the reporter's statuses).
    published: HealthService,
    requires_config: bool,
    shutting_down: AtomicBool,
    /// The store has been ready since startup (see [`Health::healthy`]).
    store_was_ready: AtomicBool,
    /// Last published state: 0 none yet, 1 serving, 2 not serving. Held while publishing, so
    /// two refreshes never interleave their pushes.
    last: Mutex<u8>,
    /// Wakes the refresher before its next tick.
    changed: Notify,
}

impl Health {
    pub fn new(
        service: Arc<RateLimitService>,
        reporter: HealthReporter,
        requires_config: bool,
    ) -> Health {
        Health {
            service,
            published: HealthService::from_health_reporter(reporter.clone()),
            reporter,
            requires_config,
            shutting_down: AtomicBool::new(false),
            store_was_ready: AtomicBool::new(false),
            last: Mutex::new(0),
            changed: Notify::new(),
        }
    }

    /// Publish the state as it is now, then say what gRPC health says for the server as a
    /// whole (`""`): `/healthcheck`'s answer.
    pub async fn check(&self) -> bool {
        self.refresh().await;
        self.is_serving().await
    }

    /// What gRPC health says for the server as a whole (`""`).
    pub async fn is_serving(&self) -> bool {
        let ask = tonic::Request::new(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        });
        matches!(
            self.published.check(ask).await,
            Ok(r) if r.get_ref().status == WireStatus::Serving as i32
        )
    }

    /// The state as it is now (what the next refresh publishes).
    fn evaluate(&self) -> bool {
        !self.shutting_down.load(Ordering::SeqCst) && self.healthy()
    }

    /// Mark the process as draining: every health check fails from now on.
    pub async fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.refresh().await;
    }

    /// Ask for a refresh now rather than at the next tick (the refresher waits on it).
    pub fn wake(&self) {
        self.changed.notify_one();
    }

    /// Until [`Health::wake`] is called.
    pub async fn woken(&self) {
        self.changed.notified().await;
    }

    /// Publish the current state to the gRPC health service when it changed (called on a
    /// timer and when woken; Watch streams see transitions only).
    pub async fn refresh(&self) {
        let mut last = self.last.lock().await;
        let healthy = self.evaluate();
        let state = if healthy { 1 } else { 2 };
        if *last == state {
            return;
        }
        *last = state;
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

    /// The store is ready and, when required, at least one domain is loaded.
    ///
    /// With `--store-failure-mode local` decisions go on without the store, so health stays
    /// SERVING through an outage unless `--unhealthy-when-degraded`; but only once the store
    /// has been ready since startup: an instance that never reached it (a wrong address,
    /// password or certificate) is NOT_SERVING, so a readiness probe keeps it out of rotation
    /// and a rolling update stops there instead of replacing working instances.
    fn healthy(&self) -> bool {
        let service = &self.service;
        let ready = service.store().is_ready();
        if ready {
            self.store_was_ready.store(true, Ordering::Relaxed);
        }
        let was_ready = self.store_was_ready.load(Ordering::Relaxed);
        (ready || (service.serves_without_store() && was_ready))
            && !service.degraded_unhealthy()
            && (!self.requires_config || service.config().config.domain_count() > 0)
    }
}

/// What health reads of the service (here, beside the one reader).
impl RateLimitService {
    /// Whether health may say SERVING with the store not ready: decisions are local
    /// meanwhile (`--store-failure-mode local`), unless `--unhealthy-when-degraded`.
    fn serves_without_store(&self) -> bool {
        !self.settings.reference_keys
            && self
                .view
                .as_ref()
                .is_some_and(|v| v.options().fallback && !self.unhealthy_when_degraded)
    }

    /// Degraded, and the operator asked health to say so.
    fn degraded_unhealthy(&self) -> bool {
        self.unhealthy_when_degraded && self.view.as_ref().is_some_and(|v| v.degraded())
    }
}
