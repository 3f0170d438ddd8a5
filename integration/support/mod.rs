//! Test support: sluice in process (`in_process`) and the real `sluice` binary, real
//! redis-server processes, a real xDS management server, certificates made with rcgen, and a transcription of
//! docs/explanation/algorithms.md used as a model.

#![allow(dead_code)]

pub mod certs;
pub mod cli;
pub mod delay_proxy;
pub mod envoy;
pub mod example_bootstrap;
pub mod fault_cluster;
pub mod h2raw;
pub mod health;
pub mod http;
pub mod in_process;
pub mod model;
pub mod model_store;
pub mod opskit;
pub mod promql;
pub mod redis;
pub mod requests;
pub mod sentinel;
pub mod sluice;
pub mod statsd_exporter;
pub mod unix;
pub mod upstream;
pub mod xds_server;
