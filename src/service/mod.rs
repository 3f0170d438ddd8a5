//! The rate limit service: `ShouldRateLimit` over gRPC (and `/json`), health.
//!
//! Protocol types stop here: a request is validated, its descriptors matched against the
//! active config (`config`), turned into plans for the `limiter`, decided in one store call,
//! and the decision converted back into a `RateLimitResponse`.

pub mod grpc;
pub mod health;
pub mod json;
mod response;
#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

use crate::config::{self, EntryRef, Match, RateLimitConfig};
use crate::limit::{LimitSpec, Unit};
use crate::limiter::{self, LimitSet, Metered, Modes, Outcome, Plan};
use crate::metrics::{HitStats, Metrics, RuleCounters};
use crate::settings::DecisionSettings;
use crate::store::{Backend, Store, StoreError};

impl EntryRef for Entry {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
}

/// Why a request failed. [`ServiceError::to_status`] is the one mapping to gRPC.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ServiceError {
    /// The gRPC status for this error: bad input is the client's problem
    /// (`INVALID_ARGUMENT`); a store failure is `UNAVAILABLE`, so Envoy's
    /// `failure_mode_deny` decides.
    pub fn to_status(&self) -> tonic::Status {
        match self {
            ServiceError::InvalidArgument(m) => tonic::Status::invalid_argument(m.clone()),
            ServiceError::Store(e) => tonic::Status::unavailable(e.to_string()),
        }
    }
}

/// A loaded config plus what the service caches per rule.
pub struct ActiveConfig {
    pub config: RateLimitConfig,
    /// Counters of each rule's static stats key, resolved on first use.
    counters: Vec<OnceLock<Arc<RuleCounters>>>,
}

impl ActiveConfig {
    pub fn new(config: RateLimitConfig) -> ActiveConfig {
        let counters = (0..config.rules().len()).map(|_| OnceLock::new()).collect();
        ActiveConfig { config, counters }
    }
}

/// The service state shared by gRPC, `/json` and the reloader.
pub struct RateLimitService {
    config: ArcSwap<ActiveConfig>,
    store: Arc<Backend>,
    metrics: Arc<Metrics>,
    settings: DecisionSettings,
}

/// A descriptor's match, kept for statistics and metadata after the decision.
struct Matched<'a> {
    m: Option<Match<'a>>,
    /// Stats key of a request override.
    override_key: Option<String>,
}

impl RateLimitService {
    pub fn new(
        config: RateLimitConfig,
        store: Arc<Backend>,
        metrics: Arc<Metrics>,
        settings: DecisionSettings,
    ) -> RateLimitService {
        metrics.rules_loaded.set(config.rules().len() as i64);
        metrics.domains_loaded.set(config.domain_count() as i64);
        RateLimitService {
            config: ArcSwap::from_pointee(ActiveConfig::new(config)),
            store,
            metrics,
            settings,
        }
    }

    /// Swap in a new config atomically: requests in flight keep the one they started with.
    pub fn set_config(&self, config: RateLimitConfig) {
        self.metrics.rules_loaded.set(config.rules().len() as i64);
        self.metrics
            .domains_loaded
            .set(config.domain_count() as i64);
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

    /// `ShouldRateLimit`.
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, ServiceError> {
        let started = Instant::now();
        self.metrics.total_requests.inc();
        let result = self.evaluate(req).await;
        self.metrics
            .response_time
            .observe(started.elapsed().as_secs_f64());
        match &result {
            Ok(resp) => tracing::debug!(
                domain = %req.domain,
                descriptors = req.descriptors.len(),
                overall_code = resp.overall_code,
                "decided"
            ),
            Err(ServiceError::InvalidArgument(m)) => {
                self.metrics.service_error.inc();
                tracing::debug!(domain = %req.domain, error = %m, "invalid request");
            }
            Err(ServiceError::Store(e)) => {
                self.metrics.redis_error.inc();
                tracing::debug!(domain = %req.domain, error = %e, "store error");
            }
        }
        result
    }

    async fn evaluate(&self, req: &RateLimitRequest) -> Result<RateLimitResponse, ServiceError> {
        validate(req, &self.settings)?;
        let active = self.config.load();
        let domain = active.config.domain(&req.domain);
        if domain.is_none() {
            self.metrics
                .domain_not_found
                .inc_by(req.descriptors.len() as u64);
        }
        let request_cost = u64::from(req.hits_addend.max(1));

        let mut plans = Vec::with_capacity(req.descriptors.len());
        let mut matched = Vec::with_capacity(req.descriptors.len());
        for d in &req.descriptors {
            let (plan, m) = self.plan(&req.domain, domain, d, request_cost)?;
            plans.push(plan);
            matched.push(m);
        }
        apply_replaces(&mut plans, &matched);

        let modes = Modes {
            global_shadow: self.settings.shadow_mode,
        };
        let started = Instant::now();
        let decision = limiter::decide(&*self.store, &plans, modes).await;
        self.metrics
            .store_latency
            .observe(started.elapsed().as_secs_f64());
        let decision = decision.inspect_err(|e| {
            self.metrics
                .store_errors
                .with_label_values(&[self.store.name(), e.kind()])
                .inc();
        })?;
        if decision.global_shadowed {
            self.metrics.global_shadow_mode.inc();
        }
        self.record(&active, req, &plans, &matched, &decision);
        Ok(response::build(
            req,
            &plans,
            &matched,
            &decision,
            &self.settings,
        ))
    }

    fn plan<'a>(
        &self,
        domain_name: &str,
        domain: Option<&'a config::Domain>,
        d: &RateLimitDescriptor,
        request_cost: u64,
    ) -> Result<(Plan<'a>, Matched<'a>), ServiceError> {
        let none = Matched {
            m: None,
            override_key: None,
        };
        let Some(domain) = domain else {
            return Ok((Plan::NoLimit, none));
        };
        let cost = d.hits_addend.as_ref().map_or(request_cost, |h| h.value);
        if let Some(o) = &d.limit {
            // Their semantics: an override bypasses the tree and is a fixed window.
            let unit = override_unit(o.unit)?;
            let plan = Plan::Metered(Metered {
                limits: LimitSet::Override(LimitSpec::fixed_window(o.requests_per_unit, unit)),
                tag: config::override_state_tag(domain_name, &d.entries),
                cost,
                refund: d.is_negative_hits,
                shadow: false,
                quota: self.settings.quota_mode,
            });
            let key = config::override_stats_key(domain_name, &d.entries);
            return Ok((
                plan,
                Matched {
                    m: None,
                    override_key: Some(key),
                },
            ));
        }
        let Some(m) = domain.find(&d.entries) else {
            return Ok((Plan::NoLimit, none));
        };
        let plan = if m.rule.unlimited {
            Plan::Unlimited
        } else {
            Plan::Metered(Metered {
                limits: LimitSet::Rule(&m.rule.limits),
                tag: m.state_tag(&d.entries),
                cost,
                refund: d.is_negative_hits,
                shadow: m.rule.shadow_mode,
                quota: m.rule.quota_mode || self.settings.quota_mode,
            })
        };
        Ok((
            plan,
            Matched {
                m: Some(m),
                override_key: None,
            },
        ))
    }

    /// Per-rule statistics (their arithmetic). Refunds and unlimited rules count nothing.
    fn record(
        &self,
        active: &ActiveConfig,
        req: &RateLimitRequest,
        plans: &[Plan<'_>],
        matched: &[Matched<'_>],
        decision: &limiter::Decision,
    ) {
        let rows = plans.iter().zip(matched).zip(&decision.outcomes);
        for (i, ((plan, m), status)) in rows.enumerate() {
            let (Plan::Metered(l), Outcome::Metered(s)) = (plan, status) else {
                continue;
            };
            if l.refund || l.cost == 0 {
                continue;
            }
            let counters = if let Some(key) = &m.override_key {
                self.metrics.rule_counters(key)
            } else if let Some(mm) = &m.m {
                match mm.stats_key(&req.descriptors[i].entries) {
                    std::borrow::Cow::Borrowed(k) => active
                        .counters
                        .get(mm.rule.id)
                        .map(|c| c.get_or_init(|| self.metrics.rule_counters(k)).clone())
                        .unwrap_or_else(|| self.metrics.rule_counters(k)),
                    std::borrow::Cow::Owned(k) => self.metrics.rule_counters(&k),
                }
            } else {
                continue;
            };
            let r = decision.results[s.results.start + s.reported];
            let limit = &l.limits.as_slice()[s.reported];
            self.metrics.record_hit(
                &counters,
                HitStats {
                    limit: limit.capacity(),
                    before: r.used_before,
                    hits: l.cost,
                    over: s.over_limit,
                    penalized: r.penalized,
                    shadowed: s.shadowed,
                },
            );
        }
    }
}

/// Their `replaces`: every name replaced by any matched rule (unlimited ones included)
/// drops the limited rules carrying that name.
fn apply_replaces(plans: &mut [Plan<'_>], matched: &[Matched<'_>]) {
    let replaced: Vec<&str> = matched
        .iter()
        .filter_map(|m| m.m.as_ref())
        .flat_map(|m| m.rule.replaces.iter().map(|r| &**r))
        .collect();
    if replaced.is_empty() {
        return;
    }
    for (plan, m) in plans.iter_mut().zip(matched) {
        if let (Plan::Metered(_), Some(mm)) = (&*plan, &m.m)
            && mm.rule.names().any(|n| replaced.contains(&n))
        {
            *plan = Plan::NoLimit;
        }
    }
}

/// A request override's unit: the number is read as the response's unit enum (their
/// behaviour, so WEEK = 7 works); UNKNOWN is rejected instead of crashing as theirs does.
fn override_unit(raw: i32) -> Result<Unit, ServiceError> {
    Ok(match raw {
        1 => Unit::Second,
        2 => Unit::Minute,
        3 => Unit::Hour,
        4 => Unit::Day,
        5 => Unit::Month,
        6 => Unit::Year,
        7 => Unit::Week,
        other => {
            return Err(ServiceError::InvalidArgument(format!(
                "rate limit override has an unknown unit ({other})"
            )));
        }
    })
}

/// Their two messages for empty input, and documented bounds for oversized input.
fn validate(req: &RateLimitRequest, settings: &DecisionSettings) -> Result<(), ServiceError> {
    let bad = |m: String| Err(ServiceError::InvalidArgument(m));
    // "<what> <got>; the maximum is <max>" for every size bound.
    let bound = |got: usize, max: usize, what: &dyn Fn(usize) -> String| {
        if got > max {
            bad(format!("{}; the maximum is {max}", what(got)))
        } else {
            Ok(())
        }
    };
    let l = &settings.limits;
    if req.domain.is_empty() {
        return bad("rate limit domain must not be empty".into());
    }
    if req.descriptors.is_empty() {
        return bad("rate limit descriptor list must not be empty".into());
    }
    bound(req.domain.len(), l.max_value_bytes, &|n| {
        format!("domain is {n} bytes")
    })?;
    bound(req.descriptors.len(), l.max_descriptors, &|n| {
        format!("request has {n} descriptors")
    })?;
    if u64::from(req.hits_addend) > l.max_hits_addend {
        return bad(format!(
            "hits_addend {} exceeds the maximum {}",
            req.hits_addend, l.max_hits_addend
        ));
    }
    for (i, d) in req.descriptors.iter().enumerate() {
        bound(d.entries.len(), l.max_entries, &|n| {
            format!("descriptor {i} has {n} entries")
        })?;
        for (j, e) in d.entries.iter().enumerate() {
            bound(e.key.len(), l.max_key_bytes, &|n| {
                format!("descriptor {i} entry {j}: key is {n} bytes")
            })?;
            bound(e.value.len(), l.max_value_bytes, &|n| {
                format!("descriptor {i} entry {j}: value is {n} bytes")
            })?;
        }
        if let Some(h) = &d.hits_addend
            && h.value > l.max_hits_addend
        {
            return bad(format!(
                "descriptor {i}: hits_addend {} exceeds the maximum {}",
                h.value, l.max_hits_addend
            ));
        }
        if let Some(o) = &d.limit {
            override_unit(o.unit)
                .map_err(|e| ServiceError::InvalidArgument(format!("descriptor {i}: {e}")))?;
        }
    }
    Ok(())
}

/// The store is ready and, when required, at least one domain is loaded.
pub fn healthy(service: &RateLimitService, requires_config: bool) -> bool {
    service.store.is_ready() && (!requires_config || service.config().config.domain_count() > 0)
}
