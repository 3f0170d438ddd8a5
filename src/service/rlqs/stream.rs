//! One Envoy's stream: reports in, assignments out, until the Envoy goes, the stream turns
//! out malformed, or the server drains.
//!
//! - A report batch: each bucket is matched (once, when first seen, and again after a
//!   reload), its usage counted in the metrics and turned into a demand over the report's
//!   span (the longer of Envoy's `time_elapsed`, which Envoy 1.40 sends in whole seconds,
//!   and the time since this stream's previous report of the bucket; none for the first
//!   report, which Envoy sends at the bucket's first request), and every shared bucket of
//!   the batch goes to the store in **one** call, which settles this Envoy's shares. An
//!   assignment is sent when it differs from the one the Envoy holds, or, unchanged, when
//!   half its TTL has passed (sending the same strategy again extends it).
//! - A tick (a quarter of the shorter of the TTL and `--rlqs-abandon-after`, at most a
//!   second): the buckets whose last grant was pending are settled again, in one store
//!   call (a re-split completes within a tick, not a reporting interval); buckets without
//!   requests (reported with none, or not reported) for `--rlqs-abandon-after` get
//!   `AbandonAction` and leave the store; a config reload (a new config object) re-matches
//!   every bucket and resends what changed.
//! - Drain: every bucket holding an assignment gets it again with TTL 0, so the Envoy falls
//!   back to its `expired_assignment_behavior` at once, and the stream ends.
//! - Malformed input (no domain first, another domain later, a bucket without entries or
//!   over the request bounds, an undecodable message) ends the stream with
//!   `INVALID_ARGUMENT`; other streams are not affected.
//!
//! Whatever the end, the stream's subscriptions leave the store, so the other Envoys get
//! its share at their next report.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc::Sender;
use tonic::{Code, Status, Streaming};

use super::Shared;

mod lifecycle;
use super::bucket::{action_name, assign, bucket_descriptor};
use crate::limit::StateTag;
use crate::metrics::quota::UNKNOWN_DOMAIN;
use crate::quota::{self, Assignment, Policy, Quota};
use crate::service::proto::Entry;
use crate::service::{ActiveConfig, ServiceError};
use crate::store::quota::{QuotaReport, QuotaStore, Subscriber};

type Out = Sender<Result<RateLimitQuotaResponse, Status>>;

struct Bucket {
    id: BucketId,
    quota: Quota,
    tag: StateTag,
    /// Thousandths of a request per second, from the last report that covered some time
    /// (`None` before).
    demand: Option<u64>,
    /// When the last report of the bucket arrived (the server clock's milliseconds).
    last_report_ms: u64,
    /// The last grant was pending: settle again at the next tick.
    pending: bool,
    /// The last report with requests in it (or the first report), in the server clock's
    /// milliseconds: Envoy reports every bucket it holds at each interval, traffic or not,
    /// so idleness is no requests.
    last_active_ms: u64,
    /// What the Envoy holds, and when it was sent (the server clock's milliseconds).
    sent: Option<(Assignment, u64)>,
}

impl Bucket {
    fn held(&self) -> u64 {
        match self.sent {
            Some((Assignment::TokenBucket { tokens, .. }, _)) => u64::from(tokens),
            _ => 0,
        }
    }
}

pub(super) struct Stream {
    shared: Arc<Shared>,
    id: String,
    domain: Option<String>,
    /// The `domain` label: the domain if configured when the stream began.
    label: String,
    buckets: HashMap<Vec<Entry>, Bucket>,
    /// The config the buckets were matched against (a reload swaps in another object).
    config: Option<Arc<ActiveConfig>>,
}

impl Stream {
    pub(super) fn new(shared: Arc<Shared>, id: String) -> Stream {
        Stream {
            shared,
            id,
            domain: None,
            label: UNKNOWN_DOMAIN.to_owned(),
            buckets: HashMap::new(),
            config: None,
        }
    }

    pub(super) async fn run(mut self, mut inbound: Streaming<RateLimitQuotaUsageReports>, tx: Out) {
        let s = &self.shared.settings;
        let period = (s.assignment_ttl.min(s.abandon_after) / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = self.shared.stop.clone();
        loop {
            tokio::select! {
                _ = stop.cancelled() => {
                    self.expire_all(&tx).await;
                    break;
                }
                _ = tx.closed() => break,
                msg = inbound.message() => match msg {
                    Ok(Some(m)) => {
                        if let Err(status) = self.on_report(m, &tx).await {
                            self.refuse(status, &tx).await;
                            break;
                        }
                    }
                    Ok(None) => break,
                    // tonic's decoder says INTERNAL for bytes that are not the message: the
                    // client's fault, as gRPC names it.
                    Err(e) if e.code() == Code::Internal => {
                        let e = ServiceError::InvalidArgument(format!(
                            "malformed RateLimitQuotaUsageReports: {}",
                            e.message()
                        ));
                        self.refuse(e, &tx).await;
                        break;
                    }
                    Err(_) => break,
                },
                _ = tick.tick() => self.on_tick(&tx).await,
            }
        }
        self.leave_all().await;
        if self.domain.is_some() {
            let m = &self.shared.service.metrics.quota;
            m.streams.with_label_values(&[&self.label]).dec();
        }
    }

    async fn refuse(&self, e: ServiceError, tx: &Out) {
        let m = &self.shared.service.metrics.quota;
        m.errors.with_label_values(&["invalid"]).inc();
        tracing::debug!(stream = %self.id, error = %e, "RLQS stream refused");
        let _ = tx.send(Err(e.to_status())).await;
    }

    async fn on_report(
        &mut self,
        m: RateLimitQuotaUsageReports,
        tx: &Out,
    ) -> Result<(), ServiceError> {
        let shared = self.shared.clone();
        let limits = &shared.service.settings.limits;
        let active = arc_swap::Guard::into_inner(self.shared.service.config());
        match &self.domain {
            None => {
                if m.domain.is_empty() {
                    return Err(ServiceError::InvalidArgument(
                        "the first RateLimitQuotaUsageReports of a stream must name its domain"
                            .into(),
                    ));
                }
                if m.domain.len() > limits.max_value_bytes {
                    return Err(ServiceError::InvalidArgument(format!(
                        "domain over --max-value-bytes ({})",
                        limits.max_value_bytes
                    )));
                }
                if active.config.domain(&m.domain).is_some() {
                    self.label = m.domain.clone();
                }
                let metrics = &self.shared.service.metrics.quota;
                metrics.streams.with_label_values(&[&self.label]).inc();
                self.domain = Some(m.domain.clone());
            }
            Some(d) if !m.domain.is_empty() && *d != m.domain => {
                return Err(ServiceError::InvalidArgument(format!(
                    "domain changed from '{d}' to '{}' within a stream; open a new stream for \
                     another domain",
                    m.domain
                )));
            }
            Some(_) => {}
        }
        if !active.loaded {
            // No rules yet: no assignment, Envoy applies its no_assignment_behavior.
            return Ok(());
        }
        if self
            .config
            .as_ref()
            .is_none_or(|c| !Arc::ptr_eq(c, &active))
        {
            self.rematch(&active);
        }
        let now = self.shared.clock.now_ms();
        let mut batch = Vec::with_capacity(m.bucket_quota_usages.len());
        for u in m.bucket_quota_usages {
            let Some(id) = u.bucket_id.filter(|b| !b.bucket.is_empty()) else {
                return Err(ServiceError::InvalidArgument(
                    "a BucketQuotaUsage without a bucket_id (or with an empty one)".into(),
                ));
            };
            if id.bucket.len() > limits.max_entries {
                return Err(ServiceError::InvalidArgument(format!(
                    "bucket_id over --max-entries ({})",
                    limits.max_entries
                )));
            }
            if id.bucket.iter().any(|(k, v)| {
                k.is_empty() || k.len() > limits.max_key_bytes || v.len() > limits.max_value_bytes
            }) {
                return Err(ServiceError::InvalidArgument(
                    "bucket_id with an empty key, or a key or value over --max-key-bytes / \
                     --max-value-bytes"
                        .into(),
                ));
            }
            let elapsed_ms = match u.time_elapsed {
                Some(d) if d.seconds < 0 || d.nanos < 0 => {
                    return Err(ServiceError::InvalidArgument(
                        "negative time_elapsed".into(),
                    ));
                }
                Some(d) => Some(
                    u64::try_from(d.seconds)
                        .unwrap_or(0)
                        .saturating_mul(1000)
                        .saturating_add(u64::try_from(d.nanos / 1_000_000).unwrap_or(0)),
                ),
                None => None,
            };
            let metrics = &self.shared.service.metrics.quota;
            metrics
                .usage
                .with_label_values(&[&self.label, "allowed"])
                .inc_by(u.num_requests_allowed);
            metrics
                .usage
                .with_label_values(&[&self.label, "denied"])
                .inc_by(u.num_requests_denied);
            let key = bucket_descriptor(&id.bucket);
            let first = !self.buckets.contains_key(&key);
            if first {
                if self.buckets.len() >= self.shared.settings.max_buckets {
                    metrics
                        .errors
                        .with_label_values(&["too_many_buckets"])
                        .inc();
                    continue;
                }
                let (quota, tag) = self.matched(&active, &key);
                metrics.buckets.with_label_values(&[&self.label]).inc();
                self.buckets.insert(
                    key.clone(),
                    Bucket {
                        id,
                        quota,
                        tag,
                        demand: None,
                        last_report_ms: now,
                        pending: false,
                        last_active_ms: now,
                        sent: None,
                    },
                );
            }
            if let Some(b) = self.buckets.get_mut(&key) {
                let since = (!first).then(|| now.saturating_sub(b.last_report_ms));
                let span = elapsed_ms.filter(|&e| e > 0).max(since.filter(|&e| e > 0));
                if let Some(d) =
                    quota::demand_milli(u.num_requests_allowed, u.num_requests_denied, span)
                {
                    b.demand = Some(d);
                }
                b.last_report_ms = now;
                if u.num_requests_allowed > 0 || u.num_requests_denied > 0 {
                    b.last_active_ms = now;
                }
            }
            if !batch.contains(&key) {
                batch.push(key);
            }
        }
        self.settle(batch, tx).await;
        Ok(())
    }

    /// The bucket's quota and state tag under `active`.
    fn matched(&self, active: &ActiveConfig, key: &[Entry]) -> (Quota, StateTag) {
        let domain = self.domain.as_deref().unwrap_or_default();
        match active.config.domain(domain).and_then(|d| d.find(key)) {
            Some(m) => (
                Quota::of_rule(&m.rule.limits, m.rule.unlimited, m.rule.shadow_mode),
                m.state_tag(key),
            ),
            // Unmatched: as RLS answers an unmatched descriptor, nothing is enforced.
            None => (Quota::AllowAll, StateTag(0)),
        }
    }

    /// Match every bucket again (a new config).
    fn rematch(&mut self, active: &Arc<ActiveConfig>) {
        let keys: Vec<Vec<Entry>> = self.buckets.keys().cloned().collect();
        for k in keys {
            let (quota, tag) = self.matched(active, &k);
            if let Some(b) = self.buckets.get_mut(&k) {
                b.quota = quota;
                b.tag = tag;
            }
        }
        self.config = Some(active.clone());
    }

    /// Settle `keys` in one store call and send what changed (or is due for extension).
    /// A report's buckets come with their new demand; a tick's pending ones with the last.
    async fn settle(&mut self, keys: Vec<Vec<Entry>>, tx: &Out) {
        let settings = &self.shared.settings;
        let ttl = settings.assignment_ttl;
        let mut reports = Vec::new();
        for k in &keys {
            if let Some(b) = self.buckets.get(k)
                && let Quota::Shared { limit, .. } = b.quota
            {
                reports.push(QuotaReport {
                    bucket: b.tag,
                    limit,
                    demand: b.demand,
                    held: b.held(),
                });
            }
        }
        let mut grants = Vec::with_capacity(reports.len());
        if !reports.is_empty() {
            let sub = Subscriber {
                id: &self.id,
                ttl_ms: ttl.as_millis() as u64,
                policy: Policy::new(settings.min_share, settings.resend_threshold),
            };
            if let Err(e) = self
                .shared
                .service
                .store
                .report(sub, &reports, &mut grants)
                .await
            {
                let m = &self.shared.service.metrics.quota;
                m.errors.with_label_values(&["store"]).inc();
                tracing::warn!(stream = %self.id, error = %e, "RLQS report not recorded; Envoys keep their assignments until they expire");
                return;
            }
        }
        let now_ms = self.shared.clock.now_ms();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut grants = grants.iter();
        let mut actions = Vec::new();
        for k in &keys {
            let Some(b) = self.buckets.get_mut(k) else {
                continue;
            };
            let grant = match b.quota {
                Quota::Shared { .. } => grants.next(),
                _ => None,
            };
            b.pending = grant.is_some_and(|g| g.pending);
            let d = quota::decide(b.quota, grant, ttl_ms);
            let send = match b.sent {
                None => true,
                Some((held, at)) => held != d.assignment || now_ms.saturating_sub(at) >= ttl_ms / 2,
            };
            if send {
                b.sent = Some((d.assignment, now_ms));
                actions.push((assign(&b.id, d), action_name(d.assignment)));
            }
        }
        self.send(actions, tx).await;
    }

    async fn send(&self, actions: Vec<(BucketAction, &'static str)>, tx: &Out) {
        if actions.is_empty() {
            return;
        }
        let m = &self.shared.service.metrics.quota;
        let mut bucket_action = Vec::with_capacity(actions.len());
        for (a, name) in actions {
            m.assignments.with_label_values(&[&self.label, name]).inc();
            bucket_action.push(a);
        }
        let _ = tx.send(Ok(RateLimitQuotaResponse { bucket_action })).await;
    }
}
