//! Shared helpers of the integration tests.

pub mod model;
pub mod model_store;
pub mod redis;
