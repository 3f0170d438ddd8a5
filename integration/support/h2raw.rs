//! A raw HTTP/2 client (the h2 crate) for what a gRPC library hides: the server's SETTINGS,
//! its GOAWAY, a request left open on purpose.

use prost::Message;
use prost::bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::codegen::http;

pub type Send = h2::client::SendRequest<Bytes>;
pub type Conn<T> = h2::client::Connection<T, Bytes>;

pub async fn handshake<T>(io: T) -> (Send, Conn<T>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    h2::client::handshake(io).await.expect("HTTP/2 handshake")
}

/// A gRPC length-prefixed message.
pub fn frame(msg: &impl Message) -> Bytes {
    let body = msg.encode_to_vec();
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(0);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Bytes::from(out)
}

/// Open a gRPC call on `path` with no body yet; send it (or part of it) on the stream.
pub async fn start(
    send: &mut Send,
    path: &str,
) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), h2::Error> {
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request");
    let mut ready = send.clone().ready().await?;
    ready.send_request(req, false)
}

/// The answer: HTTP status, `grpc-status` (trailers, or headers for trailers-only), body.
pub async fn finish(
    resp: h2::client::ResponseFuture,
) -> Result<(u16, Option<String>, Vec<u8>), h2::Error> {
    let resp = resp.await?;
    let status = resp.status().as_u16();
    let mut grpc_status = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    if let Some(trailers) = body.trailers().await?
        && let Some(s) = trailers.get("grpc-status").and_then(|v| v.to_str().ok())
    {
        grpc_status = Some(s.to_string());
    }
    Ok((status, grpc_status, bytes))
}

/// A whole unary call of `msg` on `path`.
pub async fn call(
    send: &mut Send,
    path: &str,
    msg: &impl Message,
) -> Result<(u16, Option<String>, Vec<u8>), h2::Error> {
    let (resp, mut stream) = start(send, path).await?;
    stream.send_data(frame(msg), true)?;
    finish(resp).await
}

/// A whole unary call of `msg` on `path` with extra request headers (e.g. a `grpc-timeout`
/// a gRPC library would enforce on the client side as well).
pub async fn call_with_headers(
    send: &mut Send,
    path: &str,
    headers: &[(&str, &str)],
    msg: &impl Message,
) -> Result<(u16, Option<String>, Vec<u8>), h2::Error> {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(()).expect("request");
    let mut ready = send.clone().ready().await?;
    let (resp, mut stream) = ready.send_request(req, false)?;
    stream.send_data(frame(msg), true)?;
    finish(resp).await
}
