//! Shared helpers of the integration tests.

pub mod model;
pub mod redis;
