//! The state-of-the-world stream: what sluice sends and what it makes of each response.

use super::*;
use crate::support::xds_server::{Received, XdsServer};
use sluice::xds::TYPE_URL;

fn is_ack_of(xds: &XdsServer, version: &str) -> impl Fn(&Received) -> bool {
    let nonce = xds.nonce_of(version);
    move |r: &Received| {
        r.request.error_detail.is_none()
            && r.request.version_info == version
            && Some(&r.request.response_nonce) == nonce.as_ref()
    }
}

#[tokio::test]
async fn first_load_then_updates_each_acked_with_its_version_and_nonce() {
    let xds = XdsServer::start();
    xds.set("v1", vec![rules("edge-rules", "edge", 3)]);
    let s = xds_sluice(&xds)
        .env("CONFIG_GRPC_XDS_NODE_METADATA", "zone=eu-1,team=edge")
        .env(
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "x-tenant:acme,authorization:Bearer t0k",
        )
        .start()
        .await;
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "edge").await, Some(3), "first load");

    // The subscription: their node, the resource type, no version yet.
    let sub = &xds.received()[0];
    assert_eq!(sub.request.type_url, TYPE_URL);
    assert_eq!(sub.request.version_info, "");
    assert!(
        sub.request.resource_names.is_empty(),
        "wildcard subscription"
    );
    let node = sub
        .request
        .node
        .as_ref()
        .expect("node in the first request");
    assert_eq!(node.id, "test-node");
    let meta = &node.metadata.as_ref().expect("node metadata").fields;
    let text = |k: &str| match meta.get(k).and_then(|v| v.kind.as_ref()) {
        Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(s)) => s.clone(),
        other => panic!("node metadata {k}: {other:?}"),
    };
    assert_eq!((text("zone"), text("team")), ("eu-1".into(), "edge".into()));
    assert_eq!(sub.metadata.get("x-tenant").unwrap(), "acme");
    assert_eq!(sub.metadata.get("authorization").unwrap(), "Bearer t0k");

    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v1"))
            .await
            .is_some(),
        "v1 ACKed with its nonce: {:?}",
        xds.received()
    );

    // Each response replaces the whole config: the new domain arrives, the old one goes.
    xds.set("v2", vec![rules("other-rules", "other", 5)]);
    assert!(wait_limit(&mut c, "other", Some(5)).await, "update");
    assert_eq!(limit(&mut c, "edge").await, None, "v2 replaced v1 whole");
    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v2"))
            .await
            .is_some()
    );
    assert!(s.metric("ratelimit_service_config_load_success").await >= 2.0);

    // An empty resource list is an empty config, not an error.
    xds.set("v3", Vec::new());
    assert!(wait_limit(&mut c, "other", None).await, "empty snapshot");
    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v3"))
            .await
            .is_some()
    );
    assert_eq!(s.metric("ratelimit_service_config_load_error").await, 0.0);
}

#[tokio::test]
async fn an_invalid_response_is_nacked_and_the_last_good_config_keeps_serving() {
    let xds = XdsServer::start();
    xds.set("v1", vec![rules("good", "edge", 3)]);
    let s = xds_sluice(&xds).start().await;
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "edge").await, Some(3));
    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v1"))
            .await
            .is_some()
    );

    // Two resources for one domain, the second with a limit but no unit: every error is
    // reported, each under its resource name, with the rule files' messages.
    let mut dup = rules("dup", "edge", 4);
    dup.descriptors[0].key = "other".into();
    xds.set(
        "v2",
        vec![bad_rules("broken", "other"), rules("a", "edge", 9), dup],
    );
    let nonce = loop {
        if let Some(n) = xds.nonce_of("v2") {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let nack = xds
        .wait_request(WAIT, |r| r.request.error_detail.is_some())
        .await
        .expect("a NACK");
    assert_eq!(
        nack.request.response_nonce, nonce,
        "NACK names the response"
    );
    assert_eq!(
        nack.request.version_info, "v1",
        "NACK carries the last good version"
    );
    let detail = nack.request.error_detail.unwrap();
    assert_eq!(detail.code, 3, "INVALID_ARGUMENT");
    assert_eq!(
        detail.message,
        "broken: invalid rate limit unit 'UNKNOWN'\ndup: duplicate domain 'edge' in config file"
    );
    assert!(
        s.wait_log("broken: invalid rate limit unit 'UNKNOWN'", WAIT)
            .await
    );
    assert_eq!(limit(&mut c, "edge").await, Some(3), "v1 keeps serving");
    assert_eq!(s.metric("ratelimit_service_config_load_error").await, 1.0);

    // The next good response loads.
    xds.set("v3", vec![rules("good", "edge", 7)]);
    assert!(wait_limit(&mut c, "edge", Some(7)).await);
    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v3"))
            .await
            .is_some()
    );
}

#[tokio::test]
async fn after_a_server_restart_the_client_resubscribes_and_resyncs() {
    let mut xds = XdsServer::start();
    xds.set("v1", vec![rules("r", "edge", 3)]);
    let s = xds_sluice(&xds).start().await;
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "edge").await, Some(3));
    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v1"))
            .await
            .is_some()
    );

    // The management server goes away: requests keep being served from v1.
    let (addr, state) = (xds.addr, xds.state.clone());
    xds.stop();
    let before = xds.received().len();
    assert!(
        s.wait_log("xDS stream failed", WAIT).await || s.wait_log("closed the stream", WAIT).await,
        "{:?}",
        s.logs()
    );
    assert_eq!(
        limit(&mut c, "edge").await,
        Some(3),
        "served while the server is down"
    );

    // It comes back on the same address with a new version.
    let xds = XdsServer::start_on(addr, state, None);
    xds.set("v2", vec![rules("r", "edge", 8)]);
    assert!(
        wait_limit(&mut c, "edge", Some(8)).await,
        "resync after restart"
    );
    let resub = xds
        .received()
        .into_iter()
        .skip(before)
        .find(|r| r.request.response_nonce.is_empty())
        .expect("a new subscription");
    assert_eq!(
        resub.request.version_info, "v1",
        "announces the last version it accepted"
    );
    assert_eq!(
        resub.request.node.as_ref().map(|n| n.id.as_str()),
        Some("test-node")
    );
    assert!(xds.streams() >= 2);
    assert!(
        xds.wait_request(WAIT, is_ack_of(&xds, "v2"))
            .await
            .is_some()
    );
}

/// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES` bounds a response; a larger one fails the stream
/// (nothing of it loads) and the client reconnects.
#[tokio::test]
async fn a_response_over_the_size_limit_is_refused() {
    let xds = XdsServer::start();
    let mut big = rules("big", "edge", 3);
    big.descriptors[0].value = "x".repeat(4096);
    xds.set("v1", vec![big]);
    let s = xds_sluice(&xds)
        .env("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "2048")
        .env("FORCE_START_WITHOUT_INITIAL_CONFIG", "true")
        .start()
        .await;
    assert!(
        s.wait_log("message length too large", WAIT).await,
        "{:?}",
        s.logs()
    );
    xds.set("v2", vec![rules("small", "edge", 5)]);
    let mut c = s.client().await;
    assert!(wait_limit(&mut c, "edge", Some(5)).await, "{:?}", s.logs());
    // SIGHUP reloads files; with xDS it changes nothing (and does not end the process).
    s.signal("HUP");
    assert!(s.wait_log("SIGHUP ignored", WAIT).await);
    assert_eq!(limit(&mut c, "edge").await, Some(5));
}
