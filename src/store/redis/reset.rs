//! Resetting one descriptor's state (the admin listener's `DELETE`): one `DEL` of its
//! limits' state and lock keys. They share the descriptor's hash tag, so on a cluster they
//! live in one slot and one command reaches them all.
//!
//! Not on the request path, so it does not go through the batchers (they carry only the
//! check script): a single node gets a connection of its own from the pool (checked out,
//! used, returned), a cluster uses a connection of the ring (cluster connections take any
//! command).

use deadpool_redis::redis::{self, RedisError};

use super::conn::Conn;
use super::{RedisStore, is_connection_error};
use crate::limit::{LimitSpec, StateTag};
use crate::store::StoreError;

/// Where admin commands go.
pub(super) enum Admin {
    Single(deadpool_redis::Pool),
    /// A connection of the ring.
    Cluster,
}

impl RedisStore {
    /// See [`Store::reset`](crate::store::Store::reset): the number of keys deleted.
    pub(super) async fn delete_state(
        &self,
        tag: StateTag,
        limits: &[LimitSpec],
    ) -> Result<u64, StoreError> {
        if limits.is_empty() {
            return Ok(0);
        }
        let mut cmd = redis::cmd("DEL");
        for spec in limits {
            cmd.arg(self.state_key(tag, spec))
                .arg(self.lock_key(tag, spec));
        }
        let limit = self.admin_timeout;
        let deleted = async {
            match &self.admin {
                Admin::Single(pool) => {
                    let mut conn = pool
                        .get()
                        .await
                        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                    cmd.query_async::<u64>(&mut conn).await.map_err(classify)
                }
                Admin::Cluster => {
                    let lease = self.ring.pick().ok_or_else(|| {
                        StoreError::Unavailable("redis is not connected".to_owned())
                    })?;
                    let Conn::Cluster(mut conn) = lease.conn.clone() else {
                        return Err(StoreError::Backend("not a cluster connection".to_owned()));
                    };
                    cmd.query_async::<u64>(&mut conn).await.map_err(classify)
                }
            }
        };
        tokio::time::timeout(limit, deleted)
            .await
            .map_err(|_| StoreError::Timeout(limit))?
    }
}

fn classify(e: RedisError) -> StoreError {
    if is_connection_error(&e) {
        StoreError::Unavailable(e.to_string())
    } else {
        StoreError::Backend(e.to_string())
    }
}
