//! `sluice query`: a gRPC client for any server of the RLS v3 API
//! (`envoy.service.ratelimit.v3.RateLimitService`), sluice or envoyproxy/ratelimit: one
//! `ShouldRateLimit` call built from the command line, its answer as a table or JSON, and an
//! exit status scripts can branch on (0 OK, 1 OVER_LIMIT, 2 error). And `sluice top`
//! (`top`): a sluice admin listener's heavy hitters, over HTTP.
//!
//! It is a client of the protocol, not of sluice's internals: it builds the request with the
//! envoy-types messages itself (so `service` stays the server's boundary) and uses `tls` for
//! certificates. `connect` gives any caller (tests, tools) a plaintext or TLS channel.

mod connect;
mod render;
mod top;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;

pub use connect::{Target, TlsTarget, connect};
pub use top::{TopReport, top};

use crate::settings::{Descriptor, QueryArgs};
use crate::tls::{ClientTlsFiles, TlsError};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Address(String),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot connect to {addr}: {message}")]
    Connect { addr: String, message: String },
    #[error("the call failed: {code:?}: {message}")]
    Status { code: tonic::Code, message: String },
    /// An HTTP answer other than 200 (`sluice top`), with what the server said.
    #[error("HTTP {status}: {message}")]
    Http { status: u16, message: String },
}

/// A question and its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub descriptors: Vec<Descriptor>,
    pub response: RateLimitResponse,
}

impl Report {
    /// 0 for OK, 1 for OVER_LIMIT, 2 for anything else (an UNKNOWN overall code).
    pub fn exit_code(&self) -> u8 {
        match Code::try_from(self.response.overall_code) {
            Ok(Code::Ok) => 0,
            Ok(Code::OverLimit) => 1,
            _ => 2,
        }
    }

    /// One line per descriptor (code, limit, remaining, reset), then the overall code. The
    /// limit and remaining are the exact counts of the server's decision metadata when it
    /// sent them (sluice's `--decision-metadata`), else the status's `uint32`s.
    pub fn table(&self) -> String {
        render::table(self)
    }

    /// The response in proto3 JSON field names, every field present, and per status the
    /// exact counts of the decision metadata (`exact`, null where the server sent none).
    pub fn json(&self) -> String {
        render::json(self)
    }
}

/// The target `args` describe: TLS when any TLS option (or `https://`) is given.
pub fn target(args: &QueryArgs) -> Result<Target, ClientError> {
    let wants_tls =
        args.tls || args.ca.is_some() || args.cert.is_some() || args.server_name.is_some();
    let plain = Target::parse(&args.addr, None)?;
    if !wants_tls {
        return Ok(plain);
    }
    let server_name = match (&args.server_name, &plain.tls) {
        (Some(n), _) => n.clone(),
        (None, Some(t)) => t.server_name.clone(),
        (None, None) => plain.host(),
    };
    Target::parse(
        &args.addr,
        Some(TlsTarget {
            files: ClientTlsFiles {
                ca: args.ca.clone(),
                cert: args.cert.clone(),
                key: args.key.clone(),
            },
            server_name,
        }),
    )
}

/// The request `args` describe. `--hits 0` asks without charging: per-descriptor
/// `hits_addend` 0 (a request-level 0 means 1 in the protocol); so does a count above the
/// request field's `uint32` (each descriptor's `hits_addend` is a `uint64`).
pub fn request(args: &QueryArgs) -> RateLimitRequest {
    let request_hits = u32::try_from(args.hits).ok();
    let per_descriptor = args.hits == 0 || request_hits.is_none();
    RateLimitRequest {
        domain: args.domain.clone(),
        descriptors: args
            .descriptors
            .iter()
            .map(|d| RateLimitDescriptor {
                entries: d
                    .0
                    .iter()
                    .map(|(k, v)| Entry {
                        key: k.clone(),
                        value: v.clone(),
                    })
                    .collect(),
                hits_addend: per_descriptor.then_some(UInt64Value { value: args.hits }),
                ..Default::default()
            })
            .collect(),
        hits_addend: request_hits.unwrap_or(u32::MAX),
    }
}

/// Connect, ask, and return the answer.
pub async fn query(args: &QueryArgs) -> Result<Report, ClientError> {
    let target = target(args)?;
    let channel = connect(&target, args.timeout).await?;
    let response = RateLimitServiceClient::new(channel)
        .should_rate_limit(request(args))
        .await
        .map_err(|s| ClientError::Status {
            code: s.code(),
            message: s.message().to_string(),
        })?
        .into_inner();
    Ok(Report {
        descriptors: args.descriptors.clone(),
        response,
    })
}

#[cfg(test)]
mod tests;
