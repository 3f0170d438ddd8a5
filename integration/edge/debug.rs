//! The debug listener (envoyproxy/ratelimit's DEBUG_HOST/DEBUG_PORT): an index and
//! `/rlconfig`, with the same connection hygiene as every listener.

use super::*;

#[tokio::test]
async fn their_debug_port_serves_rlconfig() {
    let s = sluice()
        .file("t.yaml", RULES)
        .env("DEBUG_HOST", "127.0.0.1")
        .env("DEBUG_PORT", "0")
        .start()
        .await;
    let debug = s.serving_addr("debug").expect("debug listener");
    let (code, index) = http_request(debug, "GET", "/", "").await;
    assert_eq!(code, 200);
    assert!(index.contains("/rlconfig:"), "{index}");
    let (code, rlconfig) = http_request(debug, "GET", "/rlconfig", "").await;
    assert_eq!(code, 200);
    assert!(
        rlconfig.contains("t.k: unit=HOUR requests_per_unit=1000"),
        "{rlconfig}"
    );
    // The same text as on the HTTP port.
    assert_eq!(rlconfig, s.http_get("/rlconfig").await.1);
    let (code, _) = http_request(debug, "POST", "/json", "{}").await;
    assert_eq!(code, 404, "the debug port serves no decisions");
}

#[tokio::test]
async fn without_a_debug_address_there_is_no_debug_listener() {
    let s = sluice().file("t.yaml", RULES).start_healthy().await;
    assert_eq!(s.serving_addr("debug"), None);
}
