//! The `--self-test` stand-in: a tonic server with the real service definition and no
//! limiter, for checking the load generator's measurement and reporting on its own.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

struct StandIn {
    delay: Duration,
}

#[tonic::async_trait]
impl RateLimitService for StandIn {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let request = request.into_inner();
        if request.domain.is_empty() {
            // What sluice answers too.
            return Err(Status::invalid_argument(
                "rate limit domain must not be empty",
            ));
        }
        let mut overall = Code::Ok;
        let statuses = request
            .descriptors
            .iter()
            .map(|d| {
                let code = if d.entries.iter().any(|e| e.key == "limited") {
                    overall = Code::OverLimit;
                    Code::OverLimit
                } else {
                    Code::Ok
                };
                DescriptorStatus {
                    code: code as i32,
                    ..Default::default()
                }
            })
            .collect();
        Ok(Response::new(RateLimitResponse {
            overall_code: overall as i32,
            statuses,
            ..Default::default()
        }))
    }
}

/// Start the stand-in on 127.0.0.1 (kernel-chosen port) on a thread of its own, so it
/// does not share the client's runtime workers. Runs until the process exits.
pub fn spawn(delay: Duration) -> anyhow::Result<SocketAddr> {
    // Bound before returning, so the client can connect at once.
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("binding the stand-in server")?;
    listener
        .set_nonblocking(true)
        .context("binding the stand-in server")?;
    let addr = listener
        .local_addr()
        .context("binding the stand-in server")?;
    std::thread::Builder::new()
        .name("standin".into())
        .spawn(move || {
            let served = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the stand-in runtime")
                .and_then(|rt| {
                    rt.block_on(async move {
                        let listener = tokio::net::TcpListener::from_std(listener)?;
                        tonic::transport::Server::builder()
                            .add_service(RateLimitServiceServer::new(StandIn { delay }))
                            .serve_with_incoming(
                                TcpIncoming::from(listener).with_nodelay(Some(true)),
                            )
                            .await?;
                        anyhow::Ok(())
                    })
                });
            if let Err(e) = served {
                eprintln!("loadgen: stand-in server: {e:#}");
            }
        })
        .context("starting the stand-in thread")?;
    Ok(addr)
}
