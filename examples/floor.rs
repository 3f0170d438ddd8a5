//! The gRPC floor: the cheapest server that speaks Envoy's rate limit protocol with the
//! stack sluice is built on. A default tonic server (`tonic::transport::Server`, tonic's
//! generated `RateLimitService` from envoy-types, the same tonic and prost versions as
//! sluice, a multi-thread tokio runtime as `#[tokio::main]` builds it) that decodes each
//! `ShouldRateLimit` and answers one fixed `RateLimitResponse` (overall OK, one descriptor
//! status OK) without looking at it.
//!
//! What it costs per call is what any tonic-based rate limit service pays before deciding
//! anything; `scripts/cpu-compare.sh` runs it beside sluice and limitador so the gap between
//! sluice and its transport is a number (BENCHMARKS.md, "CPU per decision").
//!
//! ```text
//! cargo run --release --example floor -- 127.0.0.1:18091
//! ```

use std::net::SocketAddr;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

struct Floor {
    answer: RateLimitResponse,
}

#[tonic::async_trait]
impl RateLimitService for Floor {
    async fn should_rate_limit(
        &self,
        _request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        Ok(Response::new(self.answer.clone()))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into())
        .parse()?;
    let floor = Floor {
        answer: RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: vec![DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            }],
            ..Default::default()
        },
    };
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(floor))
        .serve(addr)
        .await?;
    Ok(())
}
