//! Test support: the real `sluice` binary, real redis-server processes, and a transcription
//! of docs/algorithms.md used as a model.

#![allow(dead_code)]

pub mod certs;
pub mod h2raw;
pub mod http;
pub mod model;
pub mod model_store;
pub mod redis;
pub mod sluice;
