//! Test support: the real `sluice` binary, real redis-server processes, a real xDS
//! management server, certificates made with openssl, and a transcription of
//! docs/algorithms.md used as a model.

#![allow(dead_code)]

pub mod certs;
pub mod model;
pub mod model_store;
pub mod redis;
pub mod requests;
pub mod sluice;
pub mod xds_server;
