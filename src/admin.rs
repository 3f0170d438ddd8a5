//! The admin listener: one descriptor's current state per limit, peeked without charging
//! (`GET /state?domain=…&descriptor=k=v,…`) or reset (`DELETE`, same query), on both stores;
//! and a domain's heavy hitters (`GET /top?domain=…[&n=N][&by=hits|denied]`).
//!
//! Security stance: it binds loopback by default (`--admin-addr 127.0.0.1:8082`; `off`
//! disables it) and has no authentication and no TLS: whoever reaches it can read any
//! descriptor's counters and lift any client's limit. Keep it on loopback (reach it with
//! `kubectl port-forward` or SSH), or put it behind an authenticating proxy and a network
//! policy before binding it elsewhere (`docs/how-to/inspect-and-reset.md`). Every reset is logged.

use std::sync::Arc;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::response::Response;
use axum::routing::get;

use crate::http::reply;
use crate::service::RateLimitService;

/// The admin router.
pub fn router(service: Arc<RateLimitService>) -> Router {
    Router::new()
        .route("/state", get(peek).delete(reset))
        .route("/top", get(top))
        .with_state(service)
}

async fn peek(State(s): State<Arc<RateLimitService>>, RawQuery(query): RawQuery) -> Response {
    reply(s.state_query(query.as_deref(), false).await)
}

async fn reset(State(s): State<Arc<RateLimitService>>, RawQuery(query): RawQuery) -> Response {
    reply(s.state_query(query.as_deref(), true).await)
}

async fn top(State(s): State<Arc<RateLimitService>>, RawQuery(query): RawQuery) -> Response {
    reply(s.top_query(query.as_deref()))
}
