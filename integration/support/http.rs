//! A minimal HTTP/1.1 client for the HTTP endpoints, and reading one Prometheus sample.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub fn metric_value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .and_then(|v| v.trim().parse().ok())
}

/// A minimal HTTP/1.1 client (one request per connection).
pub async fn http_request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect http");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write http");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read http");
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(head, b)| {
            if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
            {
                dechunk(b)
            } else {
                b.to_string()
            }
        })
        .unwrap_or_default();
    (status, body)
}

/// A chunked body's data (`Transfer-Encoding: chunked`), up to its last chunk or the first
/// malformed size line.
pub fn dechunk(mut b: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = b.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        b = rest[n..].trim_start_matches("\r\n");
    }
    out
}
