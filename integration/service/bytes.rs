//! Descriptor values are bytes: a value that is not UTF-8 (Envoy copies header bytes into
//! values) is counted and limited like any other, never a decoding error that Envoy's
//! `failure_mode_deny: false` would turn into an unlimited pass. And undecodable requests
//! get gRPC's codes: malformed → INVALID_ARGUMENT, oversized → RESOURCE_EXHAUSTED.
//!
//! Requests are encoded by hand (envoy-types refuses to encode or decode such values) and
//! sent through a codec that writes the bytes as they are.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;

use crate::support::in_process::*;

const RULES: &str = r#"
domain: bytes
descriptors:
  - key: header
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: glob
    value: "a*"
    rate_limit: {unit: hour, requests_per_unit: 1}
"#;

/// Pre-encoded request bytes out, envoy-types' response in.
#[derive(Clone, Copy)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = RateLimitResponse;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut;
        buf.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = RateLimitResponse;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        buf: &mut DecodeBuf<'_>,
    ) -> Result<Option<RateLimitResponse>, tonic::Status> {
        RateLimitResponse::decode(buf)
            .map(Some)
            .map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

async fn send(s: &Server, body: Vec<u8>) -> Result<RateLimitResponse, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(s.channel().await);
    grpc.ready().await.expect("channel ready");
    let path =
        PathAndQuery::from_static("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit");
    grpc.unary(tonic::Request::new(body), path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

/// `RateLimitRequest{domain, descriptors: [{entries: [{key, value}]}]}`, written field by
/// field: tag, length, bytes.
fn request(domain: &str, key: &[u8], value: &[u8]) -> Vec<u8> {
    request_raw(domain.as_bytes(), key, value)
}

fn request_raw(domain: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
        out.push(tag << 3 | 2);
        prost::encoding::encode_varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }
    let mut entry = Vec::new();
    field(&mut entry, 1, key);
    field(&mut entry, 2, value);
    let mut descriptor = Vec::new();
    field(&mut descriptor, 1, &entry);
    let mut req = Vec::new();
    field(&mut req, 1, domain);
    field(&mut req, 2, &descriptor);
    req
}

fn code(r: &RateLimitResponse) -> i32 {
    r.overall_code
}

#[tokio::test]
async fn values_that_are_not_utf8_are_limited() {
    let s = in_process().file("bytes.yaml", RULES).start().await;
    let ff = request("bytes", b"header", &[0xff, 0xfe, b'!']);
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        let r = send(&s, ff.clone()).await.expect("decoded and decided");
        assert_eq!(code(&r), want as i32, "{r:?}");
    }
    // Another byte string is another counter, even one that would show alike.
    let fd = request("bytes", b"header", &[0xff, 0xfd, b'!']);
    assert_eq!(code(&send(&s, fd).await.unwrap()), Code::Ok as i32);
    let typed = request("bytes", b"header", b"\\xFF\\xFE!");
    assert_eq!(code(&send(&s, typed).await.unwrap()), Code::Ok as i32);
    // Globs match bytes too: `a*` takes `a` followed by anything.
    let glob = request("bytes", b"glob", &[b'a', 0xc0]);
    assert_eq!(
        code(&send(&s, glob.clone()).await.unwrap()),
        Code::Ok as i32
    );
    assert_eq!(code(&send(&s, glob).await.unwrap()), Code::OverLimit as i32);
    // Shown escaped in metrics (detailed_metric puts the value in the stats key): `\xFF`,
    // whose backslash Prometheus' text format escapes once more.
    let hits = s
        .metric(r#"ratelimit_service_rate_limit_over_limit{descriptor="bytes.header_\\xFF\\xFE!",domain="bytes",key1="header_\\xFF\\xFE!",key2=""}"#)
        .await;
    assert_eq!(hits, 1.0, "{}", s.http_get("/metrics").await.1);
}

#[tokio::test]
async fn malformed_requests_are_invalid_argument() {
    let s = in_process().file("bytes.yaml", RULES).start().await;
    // Field 1 claims 255 bytes and the message ends after one.
    let e = send(&s, vec![0x0a, 0xff, 0x01, b'x']).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("malformed RateLimitRequest"), "{e:?}");
    // A domain that is not UTF-8 (Envoy's own configuration, never a client's bytes).
    let e = send(&s, request_raw(&[0xff], b"k", b"v"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    // Counted as failed calls.
    assert_eq!(
        s.metric("ratelimit_service_should_rate_limit_error{err_type=\"service_error\"}")
            .await,
        2.0
    );
}

#[tokio::test]
async fn oversized_requests_are_resource_exhausted() {
    let s = in_process()
        .file("bytes.yaml", RULES)
        .arg("--max-request-bytes")
        .arg("1000")
        .start()
        .await;
    let fits = request("bytes", b"header", &[b'v'; 900]);
    assert!(send(&s, fits).await.is_ok());
    let big = request("bytes", b"header", &[b'v'; 1000]);
    let e = send(&s, big).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e:?}");
    // The connection is still good for the next call.
    let fits = request("bytes", b"header", b"w");
    assert!(send(&s, fits).await.is_ok());
}
