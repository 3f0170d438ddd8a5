//! The HTTP listener: `/healthcheck`, `/json`, `/metrics`, `/rlconfig` (envoyproxy/ratelimit's
//! endpoints), and the optional separate metrics listener.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;

use crate::service::health::Health;
use crate::service::{RateLimiter, ServiceError, json};

#[derive(Clone)]
pub struct HttpState {
    pub limiter: Arc<RateLimiter>,
    pub health: Arc<Health>,
}

/// The main HTTP router.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthcheck", any(healthcheck))
        .route("/json", any(json_endpoint))
        .route("/metrics", get(metrics))
        .route("/rlconfig", get(rlconfig))
        .with_state(state)
}

/// The separate metrics listener (`--metrics-addr` / `PROMETHEUS_ADDR`).
pub fn metrics_router(state: HttpState, path: &str) -> Router {
    Router::new().route(path, get(metrics)).with_state(state)
}

async fn healthcheck(State(s): State<HttpState>) -> Response {
    if s.health.is_healthy() {
        (StatusCode::OK, "OK").into_response()
    } else {
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}

async fn json_endpoint(State(s): State<HttpState>, body: Bytes) -> Response {
    let req = match json::parse_request(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("Bad Request: {e}\n")).into_response(),
    };
    match s.limiter.should_rate_limit(&req).await {
        Ok(resp) => {
            let code = if resp.overall_code == PbCode::OverLimit as i32 {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::OK
            };
            (
                code,
                [(header::CONTENT_TYPE, "application/json")],
                json::render_response(&resp).to_string(),
            )
                .into_response()
        }
        Err(ServiceError::InvalidArgument(e)) => {
            (StatusCode::BAD_REQUEST, format!("Bad Request: {e}\n")).into_response()
        }
        Err(ServiceError::Store(e)) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
        }
    }
}

async fn metrics(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.limiter.metrics().render(),
    )
        .into_response()
}

async fn rlconfig(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        s.limiter.config().config.dump(),
    )
        .into_response()
}
