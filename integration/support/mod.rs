//! Test support: the real `sluice` binary (and, in `redis`, a real redis-server).

#![allow(dead_code)]

pub mod sluice;
