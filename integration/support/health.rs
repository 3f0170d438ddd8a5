//! gRPC health (`grpc.health.v1.Health/Check`) as a test reads it.

use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// What gRPC health says of `service` ("" for the server as a whole) over `channel`.
pub async fn grpc_health(channel: Channel, service: &str) -> ServingStatus {
    let status = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health check")
        .into_inner()
        .status;
    ServingStatus::try_from(status).expect("a known serving status")
}
