//! The rate limit service: `ShouldRateLimit` over gRPC (and `/json`), health.
//!
//! Protocol types stop here: a request is validated, its descriptors matched against the
//! active config (`config`), turned into plans for the `limiter`, decided in one store call,
//! and the decision converted back into a `RateLimitResponse`.
//!
//! One file per job: this one holds the shared state ([`RateLimitService`]) and the request
//! flow; `validate` (bounds and their messages), `plan` (matching → plans, `replaces`),
//! `record` (per-rule statistics), `response` (decision → response, the deciding rule's
//! body and headers), `headers` (rate limit headers to the client and to the upstream),
//! `metadata` (dynamic metadata, the decision's included), `log` (a decision as a debug
//! line), `health`, the two
//! codecs, `grpc` and `json`, `inspect` (operator queries: `/explain`, a descriptor's
//! state peeked or reset), `top` (the heavy hitters each decision feeds, `/top`) and
//! `unknown_domain` (requests for a domain no rule declares, said in the log) and
//! `view_metrics` (the local view's numbers on `/metrics`).

pub mod grpc;
mod headers;
pub mod health;
pub mod inspect;
pub mod json;
mod log;
mod metadata;
mod plan;
pub mod proto;
mod record;
mod response;
pub mod rlqs;
pub mod routes;
mod top;
mod unknown_domain;
mod validate;
mod view_metrics;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;

use crate::admission::Admission;
use crate::config::{EntryRef, RateLimitConfig};
use crate::limit::Consistency;
use crate::limiter::{self, LocalView, Modes, OverLimitCache};
use crate::metrics::{Metrics, RuleCounters};
use crate::settings::DecisionSettings;
use crate::store::{Backend, StoreError};
use crate::telemetry::{RequestSpan, Tracer};
use crate::top::TopHitters;
use proto::{Entry, RateLimitRequest};

impl EntryRef for Entry {
    fn key(&self) -> &[u8] {
        &self.key
    }
    fn value(&self) -> &[u8] {
        &self.value
    }
}

/// Why a request failed. [`ServiceError::to_status`] is the one mapping to gRPC.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    InvalidArgument(String),
    /// The request message is not valid protobuf for `RateLimitRequest`.
    #[error("malformed RateLimitRequest: {0}")]
    Malformed(String),
    /// The request message is over `--max-request-bytes`.
    #[error("request message over --max-request-bytes")]
    TooLarge,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No config has loaded yet: the startup files were invalid, or xDS has not answered
    /// (with `FORCE_START_WITHOUT_INITIAL_CONFIG`). Their message.
    #[error("no rate limit configuration loaded")]
    NoConfig,
    /// The caller's deadline passed before an answer (before the call was read, or while
    /// it was worked on).
    #[error("the caller's deadline (grpc-timeout) passed before an answer")]
    DeadlineExceeded,
    /// Refused by admission: no in-flight slot within what the queue or the call's deadline
    /// allows (`crate::admission`).
    #[error("{0}")]
    Overloaded(crate::admission::Refusal),
    /// A method of the rate limit service this server does not have.
    #[error("unknown method")]
    UnknownMethod,
    /// The response could not be encoded (the buffer grows as needed: not expected).
    #[error("encoding the response: {0}")]
    Encoding(String),
}

impl ServiceError {
    /// The gRPC status for this error, for `ShouldRateLimit` and RLQS streams alike: bad
    /// input is the client's problem (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED` when too
    /// big); a store failure is `UNAVAILABLE`, so Envoy's `failure_mode_deny` decides. So is
    /// a missing config: the server cannot decide yet (envoyproxy/ratelimit answers
    /// `UNKNOWN` with the same message; Envoy treats every error status alike). A call
    /// shed under overload is `RESOURCE_EXHAUSTED`, one past its deadline
    /// `DEADLINE_EXCEEDED`, as gRPC names them.
    pub fn to_status(&self) -> tonic::Status {
        let message = self.to_string();
        match self {
            ServiceError::InvalidArgument(_) | ServiceError::Malformed(_) => {
                tonic::Status::invalid_argument(message)
            }
            ServiceError::TooLarge | ServiceError::Overloaded(_) => {
                tonic::Status::resource_exhausted(message)
            }
            ServiceError::Store(_) | ServiceError::NoConfig => tonic::Status::unavailable(message),
            ServiceError::DeadlineExceeded => tonic::Status::deadline_exceeded(message),
            ServiceError::UnknownMethod => tonic::Status::unimplemented(message),
            ServiceError::Encoding(_) => tonic::Status::internal(message),
        }
    }
}

/// What a config about to serve holds that has no effect, each a warning with its file and
/// line (every load says them again: startup, reloads, xDS).
fn log_warnings(config: &RateLimitConfig) {
    for w in config.warnings() {
        tracing::warn!(
            warning = %w,
            file = w.path.as_ref().map(|p| tracing::field::display(p.display())),
            line = w.line.map(|l| l as u64),
            "rule file: this has no effect"
        );
    }
}

/// A loaded config plus what the service caches per rule.
pub struct ActiveConfig {
    pub config: RateLimitConfig,
    /// False until a first config loads: every request then fails with
    /// [`ServiceError::NoConfig`] (`config` is empty meanwhile).
    pub loaded: bool,
    /// Counters of each rule's static stats key, resolved on first use.
    counters: Vec<OnceLock<Arc<RuleCounters>>>,
    /// Some rule says `consistency: batched` (else, with a strict default, requests skip the
    /// local view entirely).
    any_batched: bool,
}

impl ActiveConfig {
    pub fn new(config: RateLimitConfig) -> ActiveConfig {
        let counters = (0..config.rules().len()).map(|_| OnceLock::new()).collect();
        let any_batched = config
            .rules()
            .iter()
            .any(|r| r.consistency == Some(Consistency::Batched));
        ActiveConfig {
            config,
            loaded: true,
            counters,
            any_batched,
        }
    }

    fn none() -> ActiveConfig {
        ActiveConfig {
            loaded: false,
            ..ActiveConfig::new(RateLimitConfig::empty())
        }
    }
}

/// The service state shared by gRPC, `/json` and the reloader.
pub struct RateLimitService {
    config: ArcSwap<ActiveConfig>,
    store: Arc<Backend>,
    metrics: Arc<Metrics>,
    settings: DecisionSettings,
    /// Present only when tracing is on: otherwise no span is ever created.
    tracer: Option<Arc<Tracer>>,
    /// The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`), if enabled.
    cache: Option<OverLimitCache>,
    /// The local view (batched rules, the store-failure fallback), if kept.
    view: Option<Arc<LocalView>>,
    /// `--consistency`: rules that do not say.
    consistency: Consistency,
    /// `--unhealthy-when-degraded`.
    unhealthy_when_degraded: bool,
    /// Which gRPC calls get store work (the gRPC adapter asks; [`Self::evaluate`] reports
    /// each store call's round trip).
    admission: Arc<Admission>,
    /// The heavy hitters (`--top-capacity`), fed after each decision; `None` when off.
    top: Option<Arc<TopHitters>>,
    /// `--top-metrics`: descriptors per domain in the `sluice_top_*` gauges.
    top_metrics: usize,
    /// When each unknown domain was last named in the log.
    unknown_domains: unknown_domain::UnknownDomains,
    /// The local view's counts last published as Prometheus counters.
    view_published: parking_lot::Mutex<view_metrics::Published>,
}

impl RateLimitService {
    /// A service answering from `config`, or, with `None`, failing every request with
    /// [`ServiceError::NoConfig`] until [`RateLimitService::set_config`] is called.
    pub fn new(
        config: Option<RateLimitConfig>,
        store: Arc<Backend>,
        metrics: Arc<Metrics>,
        settings: DecisionSettings,
    ) -> RateLimitService {
        let active = match config {
            Some(c) => {
                log_warnings(&c);
                ActiveConfig::new(c)
            }
            None => ActiveConfig::none(),
        };
        metrics.rules_loaded.set(active.config.rules().len() as i64);
        metrics
            .domains_loaded
            .set(active.config.domain_count() as i64);
        // The memory store has no round trip to follow: its calls are CPU, which the stream
        // limit and the queue's delays bound.
        let remote = !matches!(*store, Backend::Memory(_));
        let admission = Arc::new(Admission::new(settings.limits.max_in_flight, remote));
        RateLimitService {
            config: ArcSwap::from_pointee(active),
            store,
            metrics,
            settings,
            admission,
            tracer: None,
            cache: None,
            view: None,
            consistency: Consistency::Strict,
            unhealthy_when_degraded: false,
            top: None,
            top_metrics: 0,
            unknown_domains: Default::default(),
            view_published: Default::default(),
        }
    }

    /// Keep the heavy hitters in `top` (see `crate::top`), and export the `metrics`
    /// heaviest of each domain as gauges.
    pub fn with_top(mut self, top: Option<Arc<TopHitters>>, metrics: usize) -> RateLimitService {
        self.top = top;
        self.top_metrics = metrics;
        self
    }

    /// Decide `batched` rules (and rules without `consistency` when `default` is batched)
    /// from `view`, and fall back on it when the store fails if its options say so.
    pub fn with_local_view(
        mut self,
        view: Option<Arc<LocalView>>,
        default: Consistency,
        unhealthy_when_degraded: bool,
    ) -> RateLimitService {
        self.view = view;
        self.consistency = default;
        self.unhealthy_when_degraded = unhealthy_when_degraded;
        self
    }

    pub fn local_view(&self) -> Option<&Arc<LocalView>> {
        self.view.as_ref()
    }

    /// `--store-failure-mode local` (and no `--redis-reference-keys`, which keeps every
    /// decision strict): a call admission refuses is read and decided by the local view
    /// instead of refused (`limiter::decide`: overload).
    pub fn decides_overload_locally(&self) -> bool {
        !self.settings.reference_keys && self.view.as_ref().is_some_and(|v| v.options().fallback)
    }

    /// Count a failed store call in `sluice_store_errors_total`: `store` when it is not the
    /// configured store itself (the per-second Redis), and the error's kind. Every failure
    /// counts, whether the request failed with it, the fallback answered instead, or it was
    /// a write-back's.
    pub fn count_store_error(&self, store: Option<&'static str>, kind: &'static str) {
        self.metrics
            .store_errors
            .with_label_values(&[store.unwrap_or(self.store.name()), kind])
            .inc();
    }

    /// Trace each call and store call (`telemetry::trace`).
    pub fn with_tracer(mut self, tracer: Option<Arc<Tracer>>) -> RateLimitService {
        self.tracer = tracer;
        self
    }

    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_deref()
    }

    /// Answer descriptors known to be over their limit from `cache` (see
    /// [`limiter::local_cache`]).
    pub fn with_local_cache(mut self, cache: Option<OverLimitCache>) -> RateLimitService {
        self.cache = cache;
        self
    }

    /// Swap in a new config atomically: requests in flight keep the one they started with.
    pub fn set_config(&self, config: RateLimitConfig) {
        log_warnings(&config);
        self.metrics.rules_loaded.set(config.rules().len() as i64);
        self.metrics
            .domains_loaded
            .set(config.domain_count() as i64);
        if let Some(top) = &self.top {
            top.retain(|d| config.domain(d).is_some());
        }
        self.config.store(Arc::new(ActiveConfig::new(config)));
    }

    pub fn config(&self) -> arc_swap::Guard<Arc<ActiveConfig>> {
        self.config.load()
    }

    pub fn store(&self) -> &Backend {
        &self.store
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }

    /// `ShouldRateLimit`.
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, ServiceError> {
        self.should_rate_limit_traced(req, None, None).await
    }

    /// `ShouldRateLimit` inside a request span (gRPC, when tracing is on), its store work
    /// ending by `store_deadline` (what the caller's deadline leaves for it; `None`: the
    /// store's own timeout).
    pub async fn should_rate_limit_traced(
        &self,
        req: &RateLimitRequest,
        span: Option<RequestSpan>,
        store_deadline: Option<Instant>,
    ) -> Result<RateLimitResponse, ServiceError> {
        let started = Instant::now();
        self.metrics.total_requests.inc();
        let result = self.evaluate(req, span.as_ref(), store_deadline).await;
        self.metrics.observe_response_time(started.elapsed());
        if let Some(span) = span {
            span.finish(match &result {
                Ok(r) => Ok(response::code_name(r.overall_code)),
                Err(e) => Err(e),
            });
        }
        match &result {
            // Logged where the decision's parts are (`evaluate`).
            Ok(_) => {}
            Err(
                e @ (ServiceError::InvalidArgument(_)
                | ServiceError::Malformed(_)
                | ServiceError::TooLarge),
            ) => {
                self.metrics.service_error.inc();
                tracing::debug!(domain = %req.domain, error = %e, "invalid request");
            }
            Err(ServiceError::NoConfig) => {
                self.metrics.service_error.inc();
                tracing::debug!(domain = %req.domain, "no config loaded");
            }
            Err(ServiceError::Store(e)) => {
                self.metrics.redis_error.inc();
                tracing::debug!(domain = %req.domain, error = %e, "store error");
            }
            // The gRPC transport's own refusals, counted where they happen.
            Err(
                ServiceError::DeadlineExceeded
                | ServiceError::Overloaded(_)
                | ServiceError::UnknownMethod
                | ServiceError::Encoding(_),
            ) => {}
        }
        result
    }

    /// A request refused before it could be decoded (malformed, too large): counted like
    /// any other failed call.
    pub(crate) fn count_failure(&self, e: &ServiceError) {
        self.metrics.total_requests.inc();
        self.metrics.service_error.inc();
        tracing::debug!(error = %e, "undecodable request");
    }

    async fn evaluate(
        &self,
        req: &RateLimitRequest,
        span: Option<&RequestSpan>,
        store_deadline: Option<Instant>,
    ) -> Result<RateLimitResponse, ServiceError> {
        validate::validate(req, &self.settings)?;
        let active = self.config.load();
        // After the request checks, as theirs: an empty domain is still the client's error.
        if !active.loaded {
            return Err(ServiceError::NoConfig);
        }
        let domain = active.config.domain(&req.domain);
        if domain.is_none() {
            self.metrics
                .domain_not_found
                .inc_by(req.descriptors.len() as u64);
            self.unknown_domains.note(&req.domain);
        }
        let request_cost = u64::from(req.hits_addend.max(1));

        let mut plans = Vec::with_capacity(req.descriptors.len());
        let mut matched = Vec::with_capacity(req.descriptors.len());
        for d in &req.descriptors {
            let (plan, m) = self.plan(&req.domain, domain, d, request_cost)?;
            plans.push(plan);
            matched.push(m);
        }
        plan::apply_replaces(&mut plans, &matched);

        let modes = Modes {
            global_shadow: self.settings.shadow_mode,
            stop_increment: self.settings.stop_increment,
        };
        let started = Instant::now();
        let mut store_span = span.map(|s| s.store(self.store.name()));
        let batched = if active.any_batched || self.consistency == Consistency::Batched {
            self.batched(&plans, &matched)
        } else {
            Vec::new()
        };
        let sources = limiter::Sources {
            cache: self.cache.as_ref(),
            // `--redis-reference-keys` counts under envoyproxy/ratelimit's keys, which the
            // view's write-backs do not know: it keeps every decision strict.
            view: self
                .view
                .as_deref()
                .filter(|_| !self.settings.reference_keys),
            batched: &batched,
        };
        let decision = limiter::decide(&*self.store, sources, &plans, modes, store_deadline).await;
        let took = started.elapsed();
        self.metrics.store_latency.observe(took.as_secs_f64());
        // The round trip the admission limit follows. Calls that decide nothing, or that the
        // fallback decided without a round trip, have no store work to measure; the memory
        // store has none at all.
        if !matches!(*self.store, Backend::Memory(_))
            && plans.iter().any(|p| matches!(p, limiter::Plan::Metered(_)))
            && !decision.as_ref().is_ok_and(|d| d.skipped_store)
        {
            self.admission.observe(took);
        }
        if let (Some(s), Err(e)) = (&mut store_span, &decision) {
            s.failed(e);
        }
        drop(store_span);
        let decision = decision.inspect_err(|e| self.count_store_error(e.store(), e.kind()))?;
        if let Some(f) = decision.store_failure {
            self.count_store_error(f.store, f.kind);
        }
        if decision.global_shadowed {
            self.metrics.global_shadow_mode.inc();
        }
        self.record(&active, req, &plans, &matched, &decision);
        self.feed_top(req, &plans, &matched, &decision);
        let resp = response::build(req, &plans, &matched, &decision, &self.settings);
        if tracing::enabled!(tracing::Level::DEBUG) {
            log::decided(req, &plans, &matched, &decision, resp.overall_code);
        }
        Ok(resp)
    }
}
