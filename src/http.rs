//! The HTTP listener: `/healthcheck`, `/json`, `/metrics`, `/rlconfig` (envoyproxy/ratelimit's
//! endpoints) and `/explain` (which rule a descriptor matches and why), the optional
//! separate metrics listener, and the optional debug listener (their `DEBUG_PORT`: an index
//! and `/rlconfig`).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};

use crate::service::health::Health;
use crate::service::inspect::{self, Status};
use crate::service::{RateLimitService, json};

#[derive(Clone)]
pub struct HttpState {
    pub service: Arc<RateLimitService>,
    pub health: Arc<Health>,
}

/// The main HTTP router.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthcheck", any(healthcheck))
        .route("/json", any(json_endpoint))
        .route("/metrics", get(metrics))
        .route("/rlconfig", get(rlconfig))
        .route("/explain", get(explain))
        .with_state(state)
}

/// The separate metrics listener (`--metrics-addr` / `PROMETHEUS_ADDR`).
pub fn metrics_router(state: HttpState, path: &str) -> Router {
    Router::new().route(path, get(metrics)).with_state(state)
}

/// The debug listener (`--debug-addr` / `DEBUG_HOST`, `DEBUG_PORT`): envoyproxy/ratelimit's
/// debug port serves `/rlconfig` and an index of its endpoints at `/`; sluice adds
/// `/metrics`. Their Go-specific `/stats` (expvar) and `/debug/pprof` have no equivalent.
pub fn debug_router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(debug_index))
        .route("/rlconfig", get(rlconfig))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn debug_index() -> &'static str {
    "/metrics: Prometheus metrics\n/rlconfig: print out the currently loaded configuration for debugging\n"
}

/// 200 `OK`, or 500 with why (their 500 has an empty body; a probe reads only the code).
async fn healthcheck(State(s): State<HttpState>) -> Response {
    match s.health.check().await {
        Ok(()) => (StatusCode::OK, "OK").into_response(),
        Err(why) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("NOT_SERVING: {why}\n"),
        )
            .into_response(),
    }
}

async fn json_endpoint(State(s): State<HttpState>, body: Bytes) -> Response {
    let reply = json::handle(&s.service, &body).await;
    let code = match reply.outcome {
        json::Outcome::Ok => StatusCode::OK,
        json::Outcome::OverLimit => StatusCode::TOO_MANY_REQUESTS,
        json::Outcome::BadRequest => StatusCode::BAD_REQUEST,
        json::Outcome::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    };
    match reply.outcome {
        json::Outcome::Ok | json::Outcome::OverLimit => (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            reply.body,
        )
            .into_response(),
        json::Outcome::BadRequest | json::Outcome::Unavailable => {
            (code, reply.body).into_response()
        }
    }
}

async fn metrics(State(s): State<HttpState>) -> Response {
    s.service.publish_view_metrics();
    s.service.refresh_top_gauges();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.service.metrics().render(),
    )
        .into_response()
}

async fn rlconfig(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        s.service.config().config.dump(),
    )
        .into_response()
}

async fn explain(State(s): State<HttpState>, RawQuery(query): RawQuery) -> Response {
    reply(s.service.explain_query(query.as_deref()))
}

/// An operator query's answer: its status code and JSON body.
pub fn reply(r: inspect::Reply) -> Response {
    let code = match r.status {
        Status::Ok => StatusCode::OK,
        Status::BadRequest => StatusCode::BAD_REQUEST,
        Status::NotFound => StatusCode::NOT_FOUND,
        Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, [(header::CONTENT_TYPE, "application/json")], r.body).into_response()
}
