//! xDS settings with their names and defaults, their backoff formula, and being invoked
//! as `ratelimit` (Envoy Gateway's command).

use super::*;

#[test]
fn xds_settings_with_their_names_and_defaults() {
    let s = serve(&[], &[("CONFIG_TYPE", "grpc_xds_sotw")]).unwrap();
    let ConfigSource::Xds(x) = &s.config_source else {
        panic!("{:?}", s.config_source)
    };
    assert_eq!(**x, XdsSettings::default());
    assert_eq!(x.server_url, "localhost:18000");
    assert_eq!(x.node_id, "default");
    assert!(!s.force_start_without_initial_config);

    let s = serve(
        &[],
        &[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"),
            ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a, team=edge"),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "X-Tenant:t1,authorization:Bearer x",
            ),
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "eg.local"),
            ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s"),
            ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "30s"),
            ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2"),
            ("XDS_CLIENT_BACKOFF_JITTER", "false"),
            ("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "1048576"),
            ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"),
        ],
    )
    .unwrap();
    let ConfigSource::Xds(x) = &s.config_source else {
        panic!("{:?}", s.config_source)
    };
    assert_eq!(x.server_url, "envoy-gateway:18001");
    assert_eq!(x.node_id, "envoy-ratelimit");
    let kv = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(x.node_metadata, vec![kv("zone", "a"), kv("team", "edge")]);
    assert_eq!(
        x.headers,
        vec![kv("x-tenant", "t1"), kv("authorization", "Bearer x")]
    );
    let tls = x.tls.as_ref().unwrap();
    assert_eq!(
        tls.client_cert.as_deref(),
        Some(Path::new("/certs/tls.crt"))
    );
    assert_eq!(tls.ca_cert.as_deref(), Some(Path::new("/certs/ca.crt")));
    assert_eq!(tls.server_name.as_deref(), Some("eg.local"));
    assert_eq!(
        x.backoff,
        XdsBackoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: false,
        }
    );
    assert_eq!(x.max_message_bytes, Some(1 << 20));
    assert!(s.force_start_without_initial_config);
    assert_eq!(
        serve(&[], &[("CONFIG_TYPE", "FILE")])
            .unwrap()
            .config_source,
        ConfigSource::Files
    );
}

/// jpillora/backoff's arithmetic, which their client uses.
#[test]
fn xds_backoff_follows_their_formula() {
    let secs = Duration::from_secs;
    let mut b = XdsBackoff {
        initial: secs(1),
        max: secs(10),
        factor: 2.0,
        jitter: false,
    };
    let delays: Vec<_> = (0..6).map(|n| b.delay(n, 0.0)).collect();
    assert_eq!(delays, [1, 2, 4, 8, 10, 10].map(secs));
    b.jitter = true;
    assert_eq!(
        b.delay(3, 0.0),
        secs(1),
        "jitter draws between initial and the delay"
    );
    assert_eq!(b.delay(3, 0.5), Duration::from_millis(4500));
    // The reference's default factor, 0.5, never grows the delay past the initial interval.
    let ref_vars = XdsBackoff::default();
    assert!((0..10).all(|n| ref_vars.delay(n, 0.99) == secs(10)));
}

#[test]
fn invoked_as_ratelimit_sluice_serves() {
    let argv = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
    assert_eq!(
        invocation(argv(&["/bin/ratelimit"])),
        argv(&["/bin/ratelimit", "serve"])
    );
    assert_eq!(
        invocation(argv(&["ratelimit", "--grpc-addr", ":1"])),
        argv(&["ratelimit", "serve", "--grpc-addr", ":1"])
    );
    assert_eq!(
        invocation(argv(&["ratelimit", "check", "x"])),
        argv(&["ratelimit", "check", "x"])
    );
    assert_eq!(
        invocation(argv(&["/usr/local/bin/sluice"])),
        argv(&["/usr/local/bin/sluice"])
    );
    // Their compose files' `command: /bin/ratelimit`, after the image's entrypoint.
    assert_eq!(
        invocation(argv(&["/usr/local/bin/sluice", "/bin/ratelimit"])),
        argv(&["/usr/local/bin/sluice", "serve"])
    );
}
