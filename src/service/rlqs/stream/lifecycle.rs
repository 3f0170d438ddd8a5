//! A stream's life beyond reports: the tick (a reload's recomputation, pending shares
//! settled again, idle buckets abandoned), the TTL-0 assignments of a drain, and leaving
//! the store at the end.

use std::sync::Arc;

use super::{Out, Stream};
use crate::limit::StateTag;
use crate::quota::{Decision, Quota};
use crate::service::proto::Entry;
use crate::service::rlqs::bucket::{abandon, assign};
use crate::store::quota::QuotaStore;

impl Stream {
    pub(super) async fn on_tick(&mut self, tx: &Out) {
        if self.domain.is_none() {
            return;
        }
        // A reload: every share is recomputed and whatever changed is sent.
        let active = arc_swap::Guard::into_inner(self.shared.service.config());
        if active.loaded
            && self
                .config
                .as_ref()
                .is_some_and(|c| !Arc::ptr_eq(c, &active))
        {
            self.rematch(&active);
            let keys: Vec<Vec<Entry>> = self.buckets.keys().cloned().collect();
            self.settle(keys, tx).await;
        } else {
            // Shares waiting on the others, or computed before another Envoy's demand was
            // known: settled again now rather than at this Envoy's next report.
            let keys: Vec<Vec<Entry>> = self
                .buckets
                .iter()
                .filter(|(_, b)| b.pending)
                .map(|(k, _)| k.clone())
                .collect();
            if !keys.is_empty() {
                self.settle(keys, tx).await;
            }
        }
        // Idle buckets are abandoned.
        let idle_ms =
            u64::try_from(self.shared.settings.abandon_after.as_millis()).unwrap_or(u64::MAX);
        let now = self.shared.clock.now_ms();
        let gone: Vec<Vec<Entry>> = self
            .buckets
            .iter()
            .filter(|(_, b)| now.saturating_sub(b.last_active_ms) >= idle_ms)
            .map(|(k, _)| k.clone())
            .collect();
        if gone.is_empty() {
            return;
        }
        let mut actions = Vec::with_capacity(gone.len());
        let mut tags = Vec::new();
        for k in gone {
            if let Some(b) = self.buckets.remove(&k) {
                actions.push((abandon(&b.id), "abandon"));
                if matches!(b.quota, Quota::Shared { .. }) {
                    tags.push(b.tag);
                }
            }
        }
        let m = &self.shared.service.metrics.quota;
        m.buckets
            .with_label_values(&[&self.label])
            .sub(actions.len() as i64);
        self.send(actions, tx).await;
        self.leave(&tags).await;
    }

    /// Drain: the assignment of every bucket again, with TTL 0.
    pub(super) async fn expire_all(&mut self, tx: &Out) {
        let actions = self
            .buckets
            .values()
            .filter_map(|b| {
                let (a, _) = b.sent?;
                let d = Decision {
                    assignment: a,
                    ttl_ms: 0,
                };
                Some((assign(&b.id, d), "expire"))
            })
            .collect();
        self.send(actions, tx).await;
    }

    pub(super) async fn leave_all(&mut self) {
        let tags: Vec<StateTag> = self
            .buckets
            .values()
            .filter(|b| matches!(b.quota, Quota::Shared { .. }))
            .map(|b| b.tag)
            .collect();
        let m = &self.shared.service.metrics.quota;
        m.buckets
            .with_label_values(&[&self.label])
            .sub(self.buckets.len() as i64);
        self.buckets.clear();
        self.leave(&tags).await;
    }

    async fn leave(&self, tags: &[StateTag]) {
        if let Err(e) = self.shared.service.store.leave(&self.id, tags).await {
            let m = &self.shared.service.metrics.quota;
            m.errors.with_label_values(&["store"]).inc();
            tracing::debug!(stream = %self.id, error = %e, "RLQS subscriptions not removed; they expire with their TTL");
        }
    }
}
