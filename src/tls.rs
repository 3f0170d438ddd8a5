//! TLS plumbing shared by every TLS connection sluice makes or accepts (Redis, gRPC).
//!
//! rustls 0.23 needs a process-wide `CryptoProvider` when more than one could be compiled
//! in or none is selected by features; without it, the first TLS handshake panics inside
//! the connection task. [`install_crypto_provider`] selects ring once, before anything
//! connects.

/// Install ring as the process-wide rustls provider. Idempotent: a provider installed
/// earlier (by this function or by an embedding program) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
