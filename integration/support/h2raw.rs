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

/// How one stream of [`calls_with_authority`] ended: the gRPC message bytes it answered
/// (DATA, length prefix stripped), or the RST_STREAM error code it got.
#[derive(Debug, PartialEq, Eq)]
pub enum RawEnd {
    Answered(Vec<u8>),
    Reset(u32),
}

/// `n` unary calls of `msg` on `path` over one connection, framed and HPACK-encoded by hand
/// (the h2 client cannot send an `:authority` that is not a URI authority): the first with
/// `authority` as a literal the server's table keeps (`None`: no `:authority` at all), the
/// next ones referring to that table entry, as gRPC C-core's encoder does.
pub async fn calls_with_authority<T>(
    mut io: T,
    authority: Option<&[u8]>,
    path: &str,
    msg: &impl Message,
    n: u32,
) -> Vec<RawEnd>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, 0x4, 0, 0, &[]);
    for i in 0..n {
        let stream = 1 + 2 * i;
        // :method POST, :scheme http (static), :path (literal, not indexed).
        let mut block = vec![0x83, 0x86, 0x04, path.len() as u8];
        block.extend_from_slice(path.as_bytes());
        if let Some(a) = authority {
            if i == 0 {
                // Literal with incremental indexing, name `:authority` (static 1).
                block.extend_from_slice(&[0x41, a.len() as u8]);
                block.extend_from_slice(a);
            } else {
                // The entry just added: dynamic index 62.
                block.push(0x80 | 62);
            }
        }
        // content-type (static 31, not indexed) and te, both literal.
        block.extend_from_slice(&[0x0f, 0x10, 16]);
        block.extend_from_slice(b"application/grpc");
        block.extend_from_slice(&[0x00, 2, b't', b'e', 8]);
        block.extend_from_slice(b"trailers");
        frame(&mut out, 0x1, 0x4, stream, &block);
        frame(&mut out, 0x0, 0x1, stream, &frame_bytes(msg));
    }
    io.write_all(&out).await.expect("write frames");
    let mut ends: Vec<Option<RawEnd>> = (0..n).map(|_| None).collect();
    let mut data: Vec<Vec<u8>> = vec![Vec::new(); n as usize];
    let read = async {
        while ends.iter().any(Option::is_none) {
            let mut head = [0u8; 9];
            io.read_exact(&mut head).await?;
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0; len];
            io.read_exact(&mut payload).await?;
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            if kind == 0x4 && flags & 0x1 == 0 {
                let mut ack = Vec::new();
                frame(&mut ack, 0x4, 0x1, 0, &[]);
                io.write_all(&ack).await?;
            }
            if stream == 0 || stream % 2 == 0 {
                continue;
            }
            let i = ((stream - 1) / 2) as usize;
            match kind {
                0x0 => data[i].extend_from_slice(&payload),
                0x3 => {
                    ends[i] = Some(RawEnd::Reset(u32::from_be_bytes(
                        payload[..4].try_into().expect("RST_STREAM code"),
                    )))
                }
                _ => {}
            }
            if flags & 0x1 != 0 && kind != 0x4 && ends[i].is_none() {
                ends[i] = Some(RawEnd::Answered(data[i].get(5..).unwrap_or(&[]).to_vec()));
            }
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("answers within 10 s")
        .expect("read frames");
    ends.into_iter().map(|e| e.expect("ended")).collect()
}

fn frame_bytes(msg: &impl Message) -> Bytes {
    frame(msg)
}
