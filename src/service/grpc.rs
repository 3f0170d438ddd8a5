//! The tonic adapter: `envoy.service.ratelimit.v3.RateLimitService` served by
//! [`RateLimitService`], next to `grpc.health.v1.Health`. The generated server types are
//! built here, so nothing outside `service` names a protocol type: the server gets opaque
//! [`Routes`].

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as RateLimitServiceApi, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use super::RateLimitService;
use super::health::Health;

/// Every gRPC service sluice serves, and the health state that drives the health service.
pub fn routes(service: Arc<RateLimitService>, requires_config: bool) -> (Arc<Health>, Routes) {
    let (reporter, health_server) = tonic_health::server::health_reporter();
    let health = Arc::new(Health::new(service.clone(), reporter, requires_config));
    let routes =
        Routes::new(RateLimitServiceServer::new(GrpcService(service))).add_service(health_server);
    (health, routes)
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
