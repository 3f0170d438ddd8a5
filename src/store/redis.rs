//! The Redis store: one Lua script per check, all checks of a request in one pipeline.
//! (Placeholder in this branch; the implementation lands from the `redis` branch.)

use super::{Store, StoreError};
use crate::limiter::{Check, LimitResult};

pub struct RedisStore {}

impl Store for RedisStore {
    async fn run(
        &self,
        checks: &[Check<'_>],
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let _ = (checks, out);
        todo!()
    }
}

pub fn from_settings(
    _: &crate::settings::RedisSettings,
    _: std::sync::Arc<dyn crate::limiter::Clock>,
) -> Result<RedisStore, StoreError> {
    todo!()
}
