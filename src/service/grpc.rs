//! The gRPC adapter: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` served
//! by [`RateLimitService`], next to `grpc.health.v1.Health`. Nothing outside `service`
//! names a protocol type: the server gets opaque [`GrpcRoutes`] (`routes.rs`:
//! `ShouldRateLimit` direct, the rest through tonic's router).
//!
//! The service is wired by hand rather than through envoy-types' generated server, for the
//! request side: requests decode into our own messages (`proto.rs`, entries as bytes), and
//! decoding errors get gRPC's codes: malformed protobuf is `INVALID_ARGUMENT` (the
//! generated codec says `INTERNAL`), a message over `--max-request-bytes` is
//! `RESOURCE_EXHAUSTED` (tonic says `OUT_OF_RANGE`; see `size_status`). Responses are
//! envoy-types' messages, encoded as prost does.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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
use super::routes::GrpcRoutes;
use super::{RateLimitService, ServiceError};
use crate::admission::Refusal;
use crate::telemetry::Headers;

const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// Every gRPC service sluice serves, and the health state that drives the health service.
pub fn routes(
    service: Arc<RateLimitService>,
    requires_config: bool,
) -> (Arc<Health>, RateLimitRoutes) {
    let (reporter, health_server) = tonic_health::server::health_reporter();
    let health = Arc::new(Health::new(service.clone(), reporter, requires_config));
    let server = RateLimitServer { service };
    let routes = Routes::new(server.clone()).add_service(health_server);
    (health, GrpcRoutes::new(SHOULD_RATE_LIMIT, server, routes))
}

/// The gRPC port's service: `ShouldRateLimit` direct, the rest through tonic's router.
pub type RateLimitRoutes = GrpcRoutes<RateLimitServer>;

/// `envoy.service.ratelimit.v3.RateLimitService` as a tower service.
#[derive(Clone)]
pub struct RateLimitServer {
    service: Arc<RateLimitService>,
}

/// The caller's timeout from its `grpc-timeout` header (`1-8 digits` + `H M S m u n`, which
/// Envoy always sends: the rate limit filter's timeout). A malformed header is ignored, as
/// gRPC servers do.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// What a call keeps of its timeout to answer after its store work: a tenth, at least 1 ms
/// (encoding and sending the response, and the scheduling in between on a busy machine), at
/// most 5 ms. The store gets the rest (the store call's deadline, `store::Call`).
fn answer_margin(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_millis(1), Duration::from_millis(5))
}

/// A call whose deadline passed before it reached the service: counted, not worked on.
fn expired(service: &RateLimitService) -> Status {
    service.metrics().total_requests.inc();
    service.metrics().deadline_exceeded.inc();
    ServiceError::DeadlineExceeded.to_status()
}

/// A call that admission refused: no permit within what the queue or its deadline allows.
/// Answered `RESOURCE_EXHAUSTED` at once, its message never read (Envoy's
/// `failure_mode_deny` then decides, as for any error). With the local fallback the call is
/// decided by the local view instead (see `call` below).
fn overloaded(service: &RateLimitService, refusal: Refusal) -> Status {
    service.metrics().total_requests.inc();
    service.metrics().shed.inc();
    tracing::debug!(%refusal, "call shed");
    ServiceError::Overloaded(refusal).to_status()
}

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

    /// Overload protection happens here, before the message is even read: a call whose
    /// deadline has passed is answered DEADLINE_EXCEEDED without work, and a call that
    /// admission does not let through in time (`crate::admission`: an adaptive limit on
    /// calls in flight, at most `--max-in-flight`, and a queue that refuses what waited too
    /// long) is refused with RESOURCE_EXHAUSTED, or, with `--store-failure-mode local`,
    /// decided by the local view without store work. A call admitted holds its slot until
    /// answered; its store work ends by what its deadline leaves less the margin to answer,
    /// and a call whose deadline passes while it is worked on is abandoned then (its store
    /// round trip may still count the hit, as a timeout may).
    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        // hyper calls this as soon as the stream's headers are read; the future below is
        // first polled when a worker gets to it. The wait in between counts: against the
        // caller's deadline, and as queueing for admission.
        let arrived = Instant::now();
        let service = self.service.clone();
        Box::pin(async move {
            if req.uri().path() != SHOULD_RATE_LIMIT {
                return Ok(ServiceError::UnknownMethod.to_status().into_http());
            }
            let timeout = grpc_timeout(req.headers());
            let deadline = timeout.and_then(|t| arrived.checked_add(t));
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Ok(expired(&service).into_http());
            }
            let local = service.decides_overload_locally();
            // When store work must end. Strict: what the deadline leaves less the margin to
            // answer (a late store answer is an error anyway). With the local fallback, half
            // the caller's time: a call the store cannot answer by then is decided locally,
            // and that answer needs time too (a CPU quota alone can stall a process for most
            // of its period), else it is as late as the store's would have been.
            let store_by = deadline.zip(timeout).map(|(d, t)| {
                let keep = if local { t / 2 } else { answer_margin(t) };
                d.checked_sub(keep).unwrap_or(arrived)
            });
            // With the local fallback, a call with a deadline that finds no free slot is
            // decided locally at once: time spent waiting for a slot is time its local answer
            // needs (waiting up to a quarter of the deadline took goodput at 4× capacity from
            // about 1.4 to 0.8, RELIABILITY.md).
            let admit_by = if local {
                deadline.map(|_| arrived)
            } else {
                deadline
            };
            let (_permit, store_deadline) = match service
                .admission()
                .admit(arrived.into(), admit_by.map(Into::into))
                .await
            {
                Ok(permit) => (Some(permit), store_by),
                // With the local fallback, a call that cannot get a timely store answer is
                // still answered, by the local view: read, and given no time for the store
                // (`limiter::decide`, overload). Goodput then follows the CPU.
                Err(refusal) if local => {
                    tracing::debug!(%refusal, "no store time: deciding locally");
                    (None, Some(arrived))
                }
                Err(refusal) => return Ok(overloaded(&service, refusal).into_http()),
            };
            let max = service.settings.limits.max_request_bytes;
            let mut grpc = Grpc::new(RequestCodec(service.clone()))
                .apply_max_message_size_config(Some(max), None);
            let handler = ShouldRateLimit {
                service: service.clone(),
                deadline,
                store_deadline,
            };
            let call = grpc.unary(handler, req);
            let mut resp = match deadline {
                None => call.await,
                Some(d) => match tokio::time::timeout_at(d.into(), call).await {
                    Ok(resp) => resp,
                    Err(_) => {
                        // Counted as a call already if it reached the service.
                        service.metrics().deadline_exceeded.inc();
                        ServiceError::DeadlineExceeded.to_status().into_http()
                    }
                },
            };
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

/// The handler, with the caller's deadline (checked once more after the message is read,
/// before any store work) and what of it the store gets.
struct ShouldRateLimit {
    service: Arc<RateLimitService>,
    deadline: Option<Instant>,
    store_deadline: Option<Instant>,
}

impl UnaryService<RateLimitRequest> for ShouldRateLimit {
    type Response = RateLimitResponse;
    type Future = BoxFuture<tonic::Response<RateLimitResponse>, Status>;

    fn call(&mut self, request: tonic::Request<RateLimitRequest>) -> Self::Future {
        let service = self.service.clone();
        let (deadline, store_deadline) = (self.deadline, self.store_deadline);
        Box::pin(async move {
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(expired(&service));
            }
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
                .should_rate_limit_traced(req, span, store_deadline)
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
            .map_err(|e| ServiceError::Encoding(e.to_string()).to_status())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(v: &str) -> Option<Duration> {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-timeout", http::HeaderValue::from_str(v).ok()?);
        grpc_timeout(&h)
    }

    #[test]
    fn grpc_timeout_units_and_malformed_values() {
        assert_eq!(timeout("20m"), Some(Duration::from_millis(20)));
        assert_eq!(timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(timeout("0n"), Some(Duration::ZERO));
        assert_eq!(timeout("99999999S"), Some(Duration::from_secs(99_999_999)));
        for bad in ["", "m", "123456789m", "5", "5x", "-5m", "5 m", "é", "1.5S"] {
            assert_eq!(timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_answer_keeps_a_tenth_of_the_timeout_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(answer_margin(ms(20)), ms(2));
        assert_eq!(answer_margin(ms(3)), ms(1));
        assert_eq!(answer_margin(Duration::from_secs(5)), ms(5));
    }
}
