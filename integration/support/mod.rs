//! Test support: the real `sluice` binary, real redis-server processes, and a transcription
//! of docs/algorithms.md used as a model.

#![allow(dead_code)]

pub mod certs;
pub mod model;
pub mod model_store;
pub mod opskit;
pub mod promql;
pub mod redis;
pub mod sentinel;
pub mod sluice;
