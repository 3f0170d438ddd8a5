//! The tonic `RateLimitService` adapter.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use super::RateLimiter;

#[derive(Clone)]
pub struct GrpcService(pub Arc<RateLimiter>);

#[tonic::async_trait]
impl RateLimitService for GrpcService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.0
            .should_rate_limit(request.get_ref())
            .await
            .map(Response::new)
            .map_err(|e| e.to_status())
    }
}
