//! Connection hygiene on every port: idle and half-open connections are closed within their
//! timeouts, the HTTP/2 stream cap is advertised, and a shutdown does not wait on
//! connections that have nothing in flight.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::support::h2raw;

/// Wait until the server closes `s` (EOF or reset), at most `within`.
async fn closed_within(mut s: TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue, // a GOAWAY, a timeout response …
        }
    }
}

async fn connect_many(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(TcpStream::connect(addr).await.expect("connect"));
    }
    out
}

/// An HTTP/1.1 connection that has had one answer and is kept alive.
async fn kept_alive(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /healthcheck HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).await.expect("read");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "answered");
    s
}

/// How long connections with 1 s timeouts may take to be closed on a loaded machine.
const WITHIN: Duration = Duration::from_secs(5);

#[tokio::test]
async fn idle_and_half_open_connections_are_closed_within_their_timeouts() {
    let s = sluice()
        .file("t.yaml", RULES)
        .args(["--idle-timeout", "1s", "--header-timeout", "1s"])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .start()
        .await;
    let metrics = s.serving_addr("metrics").expect("metrics listener");

    // Half-open: connected, nothing sent, on every port.
    let mut idle = connect_many(s.grpc, 40).await;
    idle.extend(connect_many(s.http, 40).await);
    idle.extend(connect_many(metrics, 20).await);
    // Halfway through the HTTP/2 preface, or through HTTP/1 headers.
    for _ in 0..10 {
        let mut g = TcpStream::connect(s.grpc).await.expect("connect");
        g.write_all(b"PRI * HTTP/2.0\r\n").await.expect("write");
        idle.push(g);
        let mut h = TcpStream::connect(s.http).await.expect("connect");
        h.write_all(b"GET /healthcheck HTTP/1.1\r\nHost:")
            .await
            .expect("write");
        idle.push(h);
    }
    // Served once, then idle.
    for _ in 0..10 {
        idle.push(kept_alive(s.http).await);
    }
    let mut h2_idle = Vec::new();
    for _ in 0..10 {
        let tcp = TcpStream::connect(s.grpc).await.expect("connect");
        let (mut send, conn) = h2raw::handshake(tcp).await;
        let conn = tokio::spawn(conn);
        let (_, status, _) = h2raw::call(&mut send, SHOULD_RATE_LIMIT, &ask())
            .await
            .expect("call");
        assert_eq!(status.as_deref(), Some("0"));
        h2_idle.push((send, conn));
    }

    // Well past the 1 s the flags set, and well short of the defaults (a 10 s header
    // timeout, a 300 s idle timeout): a flag that was ignored would leave connections open.
    let started = Instant::now();
    let results =
        futures::future::join_all(idle.into_iter().map(|c| closed_within(c, WITHIN))).await;
    let open = results.iter().filter(|closed| !**closed).count();
    assert_eq!(
        open,
        0,
        "{open} of {} connections still open",
        results.len()
    );
    for (_send, conn) in h2_idle {
        let left = WITHIN.saturating_sub(started.elapsed());
        let ended = tokio::time::timeout(left, conn).await;
        assert!(ended.is_ok(), "an idle HTTP/2 connection is closed");
    }
    // And the server still serves.
    let mut c = s.client().await;
    call(&mut c, ask()).await;
}

#[tokio::test]
async fn the_stream_cap_is_advertised_in_settings() {
    let s = sluice()
        .file("t.yaml", RULES)
        .args(["--grpc-max-concurrent-streams", "7"])
        .start()
        .await;
    let tcp = TcpStream::connect(s.grpc).await.expect("connect");
    let (mut send, mut conn) = h2raw::handshake(tcp).await;
    let request = ask();
    let answered = tokio::select! {
        r = &mut conn => panic!("connection ended: {r:?}"),
        r = h2raw::call(&mut send, SHOULD_RATE_LIMIT, &request) => r.expect("call"),
    };
    assert_eq!(answered.1.as_deref(), Some("0"));
    assert_eq!(conn.max_concurrent_send_streams(), 7);
}

#[tokio::test]
async fn the_connection_cap_pauses_accepting_until_one_closes() {
    let s = sluice()
        .file("t.yaml", RULES)
        .args(["--max-connections", "3", "--header-timeout", "60s"])
        .start()
        .await;
    // Three half-open connections fill the gRPC listener.
    let held = connect_many(s.grpc, 3).await;
    assert!(
        s.wait_log("connection cap reached", Duration::from_secs(5))
            .await
    );
    // A fourth waits in the backlog: its call does not complete while the three are open.
    let waiting = async {
        let mut c = s.client().await;
        call(&mut c, ask()).await
    };
    tokio::pin!(waiting);
    let blocked = tokio::time::timeout(Duration::from_millis(500), &mut waiting).await;
    assert!(
        blocked.is_err(),
        "a fourth connection is not served at the cap"
    );
    drop(held);
    tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served once a connection closed");
    // The HTTP listener has its own cap.
    assert!(s.wait_healthy(HEALTHY_WITHIN).await);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_half_open_connections() {
    let mut s = sluice()
        .file("t.yaml", RULES)
        .args(["--shutdown-grace", "60s", "--header-timeout", "60s"])
        .args(["--idle-timeout", "0"])
        .start()
        .await;
    let mut held = connect_many(s.grpc, 50).await;
    held.extend(connect_many(s.http, 50).await);
    for _ in 0..5 {
        let mut h = TcpStream::connect(s.http).await.expect("connect");
        h.write_all(b"POST /json HTTP/1.1\r\nHost:")
            .await
            .expect("write");
        held.push(h);
        let mut g = TcpStream::connect(s.grpc).await.expect("connect");
        g.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .expect("write");
        held.push(g);
        held.push(kept_alive(s.http).await);
    }
    let started = Instant::now();
    s.signal("TERM");
    let status = s
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("exits well before its 60 s grace");
    assert!(status.success(), "{status}");
    assert!(started.elapsed() < Duration::from_secs(20));
    drop(held);
}
