//! The gRPC adapter: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` served
//! by [`RateLimitService`], next to `grpc.health.v1.Health`. Nothing outside `service`
//! names a protocol type: the server gets opaque [`Routes`].
//!
//! The service is wired by hand rather than through envoy-types' generated server, for the
//! request side: requests decode into our own messages (`proto.rs`, entries as bytes), and
//! decoding errors get gRPC's codes: malformed protobuf is `INVALID_ARGUMENT` (the
//! generated codec says `INTERNAL`), a message over `--max-request-bytes` is
//! `RESOURCE_EXHAUSTED` (tonic says `OUT_OF_RANGE`; see [`size_status`]). Responses are
//! envoy-types' messages, encoded as prost does.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use prost::Message;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::service::Routes;
use tonic::{Code, Status};

use super::health::Health;
use super::proto::RateLimitRequest;
use super::{RateLimitService, ServiceError};
use crate::telemetry::Headers;

const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// Every gRPC service sluice serves, and the health state that drives the health service.
pub fn routes(service: Arc<RateLimitService>, requires_config: bool) -> (Arc<Health>, Routes) {
    let (reporter, health_server) = tonic_health::server::health_reporter();
    let health = Arc::new(Health::new(service.clone(), reporter, requires_config));
    let routes = Routes::new(RateLimitServer(service)).add_service(health_server);
    (health, routes)
}

/// `envoy.service.ratelimit.v3.RateLimitService` as a tower service.
#[derive(Clone)]
struct RateLimitServer(Arc<RateLimitService>);

impl NamedService for RateLimitServer {
    const NAME: &'static str = SERVICE;
}

impl Service<http::Request<Body>> for RateLimitServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move {
            if req.uri().path() != SHOULD_RATE_LIMIT {
                return Ok(Status::unimplemented("unknown method").into_http());
            }
            let max = service.settings.limits.max_request_bytes;
            let mut grpc = Grpc::new(RequestCodec(service.clone()))
                .apply_max_message_size_config(Some(max), None);
            let mut resp = grpc.unary(ShouldRateLimit(service.clone()), req).await;
            size_status(&service, &mut resp);
            Ok(resp)
        })
    }
}

/// tonic refuses a message over the size limit, before any decoder runs, with
/// `OUT_OF_RANGE`; gRPC's convention (and every other gRPC server's answer) is
/// `RESOURCE_EXHAUSTED`. The handler never answers `OUT_OF_RANGE` ([`ServiceError::to_status`]
/// has no such case), so on this method that code means exactly the size check: it is
/// rewritten in the (trailers-only) response, message kept.
fn size_status(service: &RateLimitService, resp: &mut http::Response<Body>) {
    let out_of_range = http::HeaderValue::from(Code::OutOfRange as i32);
    let headers = resp.headers_mut();
    if headers.get(Status::GRPC_STATUS) == Some(&out_of_range) {
        let e = ServiceError::TooLarge;
        service.count_failure(&e);
        let code = e.to_status().code();
        headers.insert(Status::GRPC_STATUS, http::HeaderValue::from(code as i32));
    }
}

struct ShouldRateLimit(Arc<RateLimitService>);

impl UnaryService<RateLimitRequest> for ShouldRateLimit {
    type Response = RateLimitResponse;
    type Future = BoxFuture<tonic::Response<RateLimitResponse>, Status>;

    fn call(&mut self, request: tonic::Request<RateLimitRequest>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move {
            let req = request.get_ref();
            // No span (nor header lookup) unless tracing is on.
            let span = service.tracer().map(|t| {
                t.request(
                    &Metadata(request.metadata()),
                    &req.domain,
                    req.descriptors.len(),
                )
            });
            service
                .should_rate_limit_traced(req, span)
                .await
                .map(tonic::Response::new)
                .map_err(|e| e.to_status())
        })
    }
}

/// Our request messages in, envoy-types' response out. Holds the service to count a
/// request that never reaches it (malformed) in its metrics.
struct RequestCodec(Arc<RateLimitService>);

impl Codec for RequestCodec {
    type Encode = RateLimitResponse;
    type Decode = RateLimitRequest;
    type Encoder = ResponseEncoder;
    type Decoder = RequestDecoder;

    fn encoder(&mut self) -> ResponseEncoder {
        ResponseEncoder
    }

    fn decoder(&mut self) -> RequestDecoder {
        RequestDecoder(self.0.clone())
    }
}

struct ResponseEncoder;

impl Encoder for ResponseEncoder {
    type Item = RateLimitResponse;
    type Error = Status;

    fn encode(&mut self, item: RateLimitResponse, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The buffer grows as needed; encoding into it cannot run out of room.
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

struct RequestDecoder(Arc<RateLimitService>);

impl Decoder for RequestDecoder {
    type Item = RateLimitRequest;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<RateLimitRequest>, Status> {
        match RateLimitRequest::decode(buf) {
            Ok(req) => Ok(Some(req)),
            Err(e) => {
                let e = ServiceError::Malformed(e.to_string());
                self.0.count_failure(&e);
                Err(e.to_status())
            }
        }
    }
}

/// gRPC metadata as trace-context headers (`traceparent`, `b3`, `x-b3-*`).
struct Metadata<'a>(&'a tonic::metadata::MetadataMap);

impl Headers for Metadata<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }
}
