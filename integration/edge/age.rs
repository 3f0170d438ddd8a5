//! The maximum connection age (GRPC_MAX_CONNECTION_AGE/_GRACE): after the age, GOAWAY; new
//! streams go elsewhere (a new connection, likely to another pod behind a ClusterIP), streams
//! in flight finish within the grace, and past it the connection is closed anyway.

use std::time::{Duration, Instant};

use super::*;
use crate::support::h2raw;

/// Wait until the server refuses new streams on `send` (it sent its final GOAWAY).
async fn refused_within(send: &h2raw::Send, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if send.clone().ready().await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn after_the_age_goaway_and_in_flight_requests_finish() {
    // envoyproxy/ratelimit's variable names.
    let s = sluice()
        .file("t.yaml", RULES)
        .env("GRPC_MAX_CONNECTION_AGE", "1s")
        .env("GRPC_MAX_CONNECTION_AGE_GRACE", "60s")
        .start()
        .await;
    let tcp = TcpStream::connect(s.grpc).await.expect("connect");
    let (mut send, conn) = h2raw::handshake(tcp).await;
    let conn = tokio::spawn(conn);
    let (_, status, _) = h2raw::call(&mut send, SHOULD_RATE_LIMIT, &ask())
        .await
        .expect("a call before the age");
    assert_eq!(status.as_deref(), Some("0"));

    // A request in flight across the age: headers sent, body not yet.
    let (response, mut body) = h2raw::start(&mut send, SHOULD_RATE_LIMIT)
        .await
        .expect("open a stream");
    assert!(
        refused_within(&send, Duration::from_secs(10)).await,
        "GOAWAY after the age"
    );
    body.send_data(h2raw::frame(&ask()), true)
        .expect("the in-flight stream still takes its body");
    let (http, status, _) = h2raw::finish(response)
        .await
        .expect("the in-flight request is answered after the GOAWAY");
    assert_eq!((http, status.as_deref()), (200, Some("0")));
    // With nothing left in flight the server closes the connection.
    let _ended = tokio::time::timeout(Duration::from_secs(10), conn)
        .await
        .expect("connection closed after its last stream");

    // A new connection is served as usual.
    let mut c = s.client().await;
    call(&mut c, ask()).await;
}

#[tokio::test]
async fn past_the_grace_a_stuck_request_is_cut() {
    let s = sluice()
        .file("t.yaml", RULES)
        .args(["--grpc-max-connection-age", "500ms"])
        .args(["--grpc-max-connection-age-grace", "1s"])
        .start()
        .await;
    let tcp = TcpStream::connect(s.grpc).await.expect("connect");
    let (mut send, conn) = h2raw::handshake(tcp).await;
    let conn = tokio::spawn(conn);
    let (response, _body) = h2raw::start(&mut send, SHOULD_RATE_LIMIT)
        .await
        .expect("open a stream that never finishes");
    let _ended = tokio::time::timeout(Duration::from_secs(15), conn)
        .await
        .expect("the connection is closed after age + grace");
    assert!(
        h2raw::finish(response).await.is_err(),
        "the stuck request got no answer"
    );
}
