//! The embedded in-memory store: native algorithms (`limiter::algorithm`) over sharded maps.
//! (Placeholder in this branch; the implementation lands from the `algo` branch.)

use std::sync::Arc;

use super::{Store, StoreError};
use crate::limiter::{Check, Clock, LimitResult};

pub struct MemoryStore {
    _clock: Arc<dyn Clock>,
}

impl MemoryStore {
    pub fn new(clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore { _clock: clock }
    }
}

impl Store for MemoryStore {
    async fn run(
        &self,
        checks: &[Check<'_>],
        out: &mut Vec<LimitResult>,
    ) -> Result<(), StoreError> {
        let _ = (checks, out);
        todo!()
    }
}
