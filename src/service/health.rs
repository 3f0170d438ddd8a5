//! Health: gRPC `grpc.health.v1.Health` (service names `""`, `ratelimit` and the full
//! service name) and `/healthcheck` report the same state, from one source: the state is
//! evaluated here (the store is ready, a config is loaded when required, the process is not
//! shutting down) and published to the gRPC health service; `/healthcheck` publishes the
//! state as it is now, then answers what that service says, so the two never disagree, and
//! says why when it is not serving (the Redis it cannot reach, by address). It
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

/// Why the server is not serving: what `/healthcheck` answers after `NOT_SERVING: `.
#[derive(Debug, thiserror::Error)]
pub enum NotServing {
    #[error("shutting down: draining before exit")]
    ShuttingDown,
    /// The store's own reason (the Redis it cannot reach, by address).
    #[error("{0}")]
    StoreNotReady(String),
    /// With the local fallback, which a store never ready since startup does not get.
    #[error("{0}; it has not been ready since startup, so decisions do not go local")]
    StoreNeverReady(String),
    #[error("decisions are local because the store failed (--unhealthy-when-degraded)")]
    Degraded,
    #[error("no rule file loaded (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED requires one)")]
    NoConfig,
    /// The state changed between publishing it and reading it back.
    #[error("not serving (it changed as it was asked)")]
    Changed,
}

pub struct Health {
    service: Arc<RateLimitService>,
    reporter: HealthReporter,
    /// What gRPC health answers from (the reporter's statuses).
    published: HealthService,
    requires_config: bool,
    shutting_down: AtomicBool,
    /// The store has been ready since startup (see `Health::unhealthy`).
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
    /// whole (`""`): `/healthcheck`'s answer, with why when it is not serving.
    pub async fn check(&self) -> Result<(), NotServing> {
        self.refresh().await;
        if self.is_serving().await {
            return Ok(());
        }
        // The state may have changed between the two reads: then say what was published.
        Err(self.why_not().unwrap_or(NotServing::Changed))
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
        self.why_not().is_none()
    }

    /// Why the state now is not serving; `None` when it is serving.
    fn why_not(&self) -> Option<NotServing> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Some(NotServing::ShuttingDown);
        }
        self.unhealthy()
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

    /// Why the store or the config keeps the server from serving: `None` when the store is
    /// ready and, when required, at least one domain is loaded.
    ///
    /// With `--store-failure-mode local` decisions go on without the store, so health stays
    /// SERVING through an outage unless `--unhealthy-when-degraded`; but only once the store
    /// has been ready since startup: an instance that never reached it (a wrong address,
    /// password or certificate) is NOT_SERVING, so a readiness probe keeps it out of rotation
    /// and a rolling update stops there instead of replacing working instances.
    fn unhealthy(&self) -> Option<NotServing> {
        let service = &self.service;
        let store = service.store();
        let ready = store.is_ready();
        if ready {
            self.store_was_ready.store(true, Ordering::Relaxed);
        }
        let was_ready = self.store_was_ready.load(Ordering::Relaxed);
        let goes_local = service.serves_without_store() && was_ready;
        if !(ready || goes_local) {
            let why = store
                .not_ready_reason()
                .unwrap_or_else(|| "the store is not ready".to_owned());
            return Some(if service.serves_without_store() {
                NotServing::StoreNeverReady(why)
            } else {
                NotServing::StoreNotReady(why)
            });
        }
        if service.degraded_unhealthy() {
            return Some(NotServing::Degraded);
        }
        if self.requires_config && service.config().config.domain_count() == 0 {
            return Some(NotServing::NoConfig);
        }
        None
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
