//! The tonic adapter: `envoy.service.ratelimit.v3.RateLimitService` served by
//! [`RateLimitService`]. The generated server type is built here so that nothing outside
//! `service` names a protocol type.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as RateLimitServiceApi, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use super::RateLimitService;

/// The gRPC service to add to a tonic router.
pub fn server(service: Arc<RateLimitService>) -> RateLimitServiceServer<GrpcService> {
    RateLimitServiceServer::new(GrpcService(service))
}

#[derive(Clone)]
pub struct GrpcService(pub Arc<RateLimitService>);

#[tonic::async_trait]
impl RateLimitServiceApi for GrpcService {
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
