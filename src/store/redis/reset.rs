//! Resetting one descriptor's state (the admin listener's `DELETE`): one `DEL` of its
//! limits' state and lock keys. They share the descriptor's hash tag, so on a cluster they
//! live in one slot and one command reaches them all.
//!
//! It goes to a connection of the ring, whatever the topology (single node, sentinel's
//! master, cluster), but not through a batcher's pipeline, which carries only the check
//! script: on a single node, straight onto the batcher's multiplexed connection.

use redis::{self, RedisError};

use super::conn::Conn;
use super::{RedisStore, is_connection_error};
use crate::limit::{LimitSpec, StateTag};
use crate::store::StoreError;

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
        let lease = self
            .ring
            .pick()
            .ok_or_else(|| StoreError::Unavailable("redis is not connected".into()))?;
        let deleted = async {
            match &lease.conn {
                Conn::Single(batcher) => {
                    let mut conn = batcher.connection();
                    cmd.query_async::<u64>(&mut conn).await
                }
                Conn::Cluster(conn) => cmd.query_async::<u64>(&mut conn.clone()).await,
            }
            .map_err(classify)
        };
        tokio::time::timeout(limit, deleted)
            .await
            .map_err(|_| StoreError::Timeout(limit))?
    }
}

fn classify(e: RedisError) -> StoreError {
    if is_connection_error(&e) {
        StoreError::Unavailable(e.into())
    } else {
        StoreError::Backend(e.into())
    }
}
