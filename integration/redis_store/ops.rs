//! ops
