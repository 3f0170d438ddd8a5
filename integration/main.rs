//! Integration tests: one binary (`cargo test --test integration`), one module per area.

mod redis_store;
mod redis_vs_native;
mod support;
