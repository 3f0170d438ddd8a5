//! RLQS subscriptions in Redis (`store/quota.rs`): one call of `lua/quota.lua` per report
//! batch, so Envoys connected to different replicas share one limit.
//!
//! Keys: `<prefix>{rlqs}:<tag>`, one hash per bucket. The `{rlqs}` hash tag puts every
//! bucket in one slot, so a batch of any buckets is one call on a cluster too; quota
//! traffic is a report per Envoy every few seconds, not a call per request, so one slot
//! carries it. The call goes to a connection of the ring, outside the check pipelines
//! (as `reset.rs` does); `Script` loads the script on `NOSCRIPT`.

use std::sync::LazyLock;

use deadpool_redis::redis::{self, Script};

use super::conn::Conn;
use super::{RedisStore, is_connection_error};
use crate::limit::StateTag;
use crate::quota::Grant;
use crate::store::StoreError;
use crate::store::quota::{QuotaReport, Subscriber};

/// `lua/quota.lua`.
pub const QUOTA_SCRIPT: &str = include_str!("../lua/quota.lua");

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(QUOTA_SCRIPT));

/// The hash of bucket `tag`.
pub fn quota_key(prefix: &str, tag: StateTag) -> String {
    format!("{prefix}{{rlqs}}:{}", tag.to_base64url())
}

impl RedisStore {
    pub(crate) async fn quota_report(
        &self,
        sub: Subscriber<'_>,
        reports: &[QuotaReport],
        out: &mut Vec<Grant>,
    ) -> Result<(), StoreError> {
        if reports.is_empty() {
            return Ok(());
        }
        let mut inv = SCRIPT.prepare_invoke();
        self.quota_args(&mut inv, "r", sub.id, sub.ttl_ms, sub);
        for r in reports {
            inv.key(quota_key(&self.prefix, r.bucket));
            inv.arg(r.limit)
                .arg(r.window_ms)
                .arg(r.allowed)
                .arg(r.demand)
                .arg(r.held);
        }
        let reply: Vec<i64> = self.quota_call(inv).await?;
        if reply.len() != reports.len() * 4 {
            return Err(StoreError::Backend(
                format!(
                    "quota script answered {} values for {} buckets",
                    reply.len(),
                    reports.len()
                )
                .into(),
            ));
        }
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        out.extend(reply.chunks_exact(4).map(|c| Grant {
            share: n(c[0]),
            subscribers: n(c[1]),
            used: n(c[2]),
            window_end_ms: n(c[3]),
        }));
        Ok(())
    }

    pub(crate) async fn quota_leave(
        &self,
        sub: &str,
        buckets: &[StateTag],
    ) -> Result<(), StoreError> {
        if buckets.is_empty() {
            return Ok(());
        }
        let mut inv = SCRIPT.prepare_invoke();
        let none = Subscriber {
            id: sub,
            ttl_ms: 0,
            policy: crate::quota::Policy::new(0.0, 0.0),
        };
        self.quota_args(&mut inv, "l", sub, 0, none);
        for t in buckets {
            inv.key(quota_key(&self.prefix, *t));
        }
        let _: i64 = self.quota_call(inv).await?;
        Ok(())
    }

    fn quota_args(
        &self,
        inv: &mut redis::ScriptInvocation<'_>,
        mode: &str,
        id: &str,
        ttl_ms: u64,
        sub: Subscriber<'_>,
    ) {
        inv.arg(mode)
            .arg(id)
            .arg(self.clock.now_ms())
            .arg(ttl_ms)
            .arg(sub.policy.min_share_ppm)
            .arg(sub.policy.threshold_ppm);
    }

    async fn quota_call<T: redis::FromRedisValue>(
        &self,
        inv: redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let limit = self.admin_timeout;
        let lease = self
            .ring
            .pick()
            .ok_or_else(|| StoreError::Unavailable("redis is not connected".into()))?;
        let call = async {
            match &lease.conn {
                Conn::Single(batcher) => inv.invoke_async::<T>(&mut batcher.connection()).await,
                Conn::Cluster(conn) => inv.invoke_async::<T>(&mut conn.clone()).await,
            }
            .map_err(|e| {
                if is_connection_error(&e) {
                    StoreError::Unavailable(e.into())
                } else {
                    StoreError::Backend(e.into())
                }
            })
        };
        tokio::time::timeout(limit, call)
            .await
            .map_err(|_| StoreError::Timeout(limit))?
    }
}
