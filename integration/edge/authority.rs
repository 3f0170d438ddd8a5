//! Any `:authority` a gRPC client sends is served, on TCP and on a unix socket, as the
//! reference (grpc-go) does: gRPC C-core on `unix:` sends the socket path (grpcio here, as
//! Envoy's `google_grpc` in `envoy::transports`), and an empty or path authority sent raw.

use std::process::Command;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use prost::Message;

use super::*;
use crate::support::h2raw::{RawEnd, calls_with_authority};

const RULES: &str = "\
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 2}
";

const METHOD: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

fn codes(ends: &[RawEnd]) -> Vec<Result<i32, u32>> {
    ends.iter()
        .map(|e| match e {
            RawEnd::Answered(b) => Ok(RateLimitResponse::decode(&b[..])
                .expect("a RateLimitResponse")
                .overall_code),
            RawEnd::Reset(code) => Err(*code),
        })
        .collect()
}

#[tokio::test]
async fn raw_empty_path_and_missing_authorities_are_served_over_tcp() {
    let s = sluice().file("d.yaml", RULES).start_healthy().await;
    let (ok, over) = (Ok(Code::Ok as i32), Ok(Code::OverLimit as i32));
    for (authority, key) in [
        (Some(&b""[..]), "empty"),
        (Some(&b"/tmp/rls.sock"[..]), "path"),
        (Some(&b"tmp%2Frls.sock"[..]), "percent"),
        (None, "none"),
        (Some(&b"rls"[..]), "cluster"),
    ] {
        let io = TcpStream::connect(s.grpc).await.expect("connect");
        let msg = req("d", vec![desc(&[("k", key)])]);
        let ends = calls_with_authority(io, authority, METHOD, &msg, 3).await;
        // The three streams are served concurrently: two pass, one is over, in any order.
        let mut got = codes(&ends);
        got.sort();
        assert_eq!(got, [ok, ok, over], "{key}");
    }
}

/// A grpcio (gRPC C-core) client on `unix:PATH`, no `grpc.default_authority`: a generic
/// unary call with the request's bytes, several on one channel.
#[tokio::test]
async fn grpcio_on_a_unix_socket_is_served() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rls.sock");
    let _s = sluice()
        .file("d.yaml", RULES)
        .arg("--grpc-uds")
        .arg(path.display().to_string())
        .start_healthy()
        .await;
    let request = req("d", vec![desc(&[("k", "grpcio")])]).encode_to_vec();
    let script = format!(
        "import grpc, sys\n\
         ch = grpc.insecure_channel('unix:{path}')\n\
         call = ch.unary_unary('{METHOD}')\n\
         for _ in range(3):\n\
         \x20   try:\n\
         \x20       print(call(bytes.fromhex('{hex}'), timeout=10).hex())\n\
         \x20   except grpc.RpcError as e:\n\
         \x20       print('error', e.code(), e.details())\n",
        path = path.display(),
        hex = hex(&request),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg("-c")
            .arg(script)
            .output()
            .expect("python3")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grpcio is installed by scripts/test.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<i32> = stdout
        .lines()
        .map(|l| {
            let bytes = unhex(l).unwrap_or_else(|| panic!("a call failed: {stdout}"));
            RateLimitResponse::decode(&bytes[..])
                .expect("response")
                .overall_code
        })
        .collect();
    assert_eq!(
        got,
        [Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
