//! Envoy's quota protocol: `envoy.service.rate_limit_quota.v3.RateLimitQuotaService/
//! StreamRateLimitQuotas` (RLQS), served from the same rules as `ShouldRateLimit`.
//!
//! One bidirectional stream per Envoy (`stream.rs`): the domain comes with the first
//! report; every `BucketId` becomes a descriptor of that domain, its entries **sorted by
//! key** (a `BucketId` is an unordered map), matched against the rule tree like an RLS
//! descriptor (`bucket.rs`). Each report batch goes to the store in one call
//! (`store::quota`), which records the subscription, the demand and the usage and settles
//! this Envoy's share (`quota`); the answer is a token-bucket assignment, or a blanket rule.
//! Protocol types stop here: `quota` and `store` see tags, numbers and assignments.

mod bucket;
mod stream;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio_util::sync::CancellationToken;
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::service::Routes;
use tonic::{Request, Response, Status, Streaming};

pub use bucket::bucket_descriptor;

use super::RateLimitService;
use crate::limit::Clock;
use crate::settings::RlqsSettings;

/// What every stream of this replica shares.
struct Shared {
    service: Arc<RateLimitService>,
    settings: RlqsSettings,
    /// Cancelled when the server drains: every stream sends TTL-0 assignments and ends.
    stop: CancellationToken,
    /// The server's clock: assignment expiry, resends and idleness are measured on it.
    clock: Arc<dyn Clock>,
    /// Names this process among the replicas sharing a Redis (subscriber ids are
    /// `<replica>:<stream>`).
    replica: String,
    streams: AtomicU64,
}

/// The RLQS gRPC service, added to `routes` (the gRPC listener's, so TLS and mutual TLS
/// apply as to `ShouldRateLimit`). Streams end, after TTL-0 assignments, when `stop` fires.
pub fn add_route(
    routes: Routes,
    service: Arc<RateLimitService>,
    settings: RlqsSettings,
    stop: CancellationToken,
    clock: Arc<dyn Clock>,
) -> Routes {
    let max = service.settings.limits.max_request_bytes;
    let shared = Arc::new(Shared {
        service,
        settings,
        stop,
        clock,
        replica: replica_id(),
        streams: AtomicU64::new(0),
    });
    routes
        .add_service(RateLimitQuotaServiceServer::new(Rlqs(shared)).max_decoding_message_size(max))
}

/// Unique enough among replicas (a random draw per start).
fn replica_id() -> String {
    format!("{:016x}", crate::limit::random::random_u64())
}

struct Rlqs(Arc<Shared>);

#[tonic::async_trait]
impl RateLimitQuotaService for Rlqs {
    type StreamRateLimitQuotasStream = ReceiverStream<Result<RateLimitQuotaResponse, Status>>;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Self::StreamRateLimitQuotasStream>, Status> {
        let inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let n = self.0.streams.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}:{n}", self.0.replica);
        tokio::spawn(stream::Stream::new(self.0.clone(), id).run(inbound, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
