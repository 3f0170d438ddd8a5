//! Listener settings from flags and from envoyproxy/ratelimit's variables.

use std::path::PathBuf;
use std::time::Duration;

use crate::settings::GrpcTlsSettings;
use crate::settings::tests::serve;

fn error(args: &[&str], env: &[(&str, &str)]) -> String {
    serve(args, env).expect_err("refused").to_string()
}

#[test]
fn defaults_are_plaintext_with_their_connection_age() {
    let l = serve(&[], &[]).unwrap().listen;
    assert_eq!(l.grpc_tls, None);
    assert_eq!(l.debug_addr, None);
    assert_eq!(l.max_connections, 10_000);
    assert_eq!(l.header_timeout, Duration::from_secs(10));
    assert_eq!(l.idle_timeout, Some(Duration::from_secs(300)));
    assert_eq!(l.grpc_max_concurrent_streams, 16);
    assert_eq!(l.http2_keepalive_interval, Some(Duration::from_secs(60)));
    assert_eq!(l.grpc_max_connection_age, Some(Duration::from_secs(86_400)));
    assert_eq!(l.grpc_max_connection_age_grace, Duration::from_secs(3600));
}

#[test]
fn their_tls_variables_turn_on_mutual_tls() {
    let s = serve(
        &[],
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
            ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
            ("GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt"),
            ("GRPC_CLIENT_TLS_SAN", "envoy.example"),
        ],
    )
    .unwrap();
    assert_eq!(
        s.listen.grpc_tls,
        Some(GrpcTlsSettings {
            cert: PathBuf::from("/certs/tls.crt"),
            key: PathBuf::from("/certs/tls.key"),
            client_ca: Some(PathBuf::from("/certs/ca.crt")),
            client_san: Some("envoy.example".into()),
        })
    );
}

#[test]
fn their_tls_files_without_use_tls_are_noted_and_ignored() {
    let s = serve(&[], &[("GRPC_SERVER_TLS_CERT", "/certs/tls.crt")]).unwrap();
    assert_eq!(s.listen.grpc_tls, None);
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("GRPC_SERVER_TLS_CERT ignored")),
        "{:?}",
        s.notes
    );
}

#[test]
fn certificate_flags_imply_tls_unless_it_is_turned_off() {
    let on = serve(&["--grpc-tls-cert", "c", "--grpc-tls-key", "k"], &[]).unwrap();
    assert_eq!(on.listen.grpc_tls.map(|t| t.cert), Some(PathBuf::from("c")));
    let off = serve(
        &[
            "--grpc-tls=false",
            "--grpc-tls-cert",
            "c",
            "--grpc-tls-key",
            "k",
        ],
        &[("GRPC_SERVER_USE_TLS", "true")],
    )
    .unwrap();
    assert_eq!(off.listen.grpc_tls, None);
}

#[test]
fn incomplete_tls_settings_are_refused() {
    let e = error(&[], &[("GRPC_SERVER_USE_TLS", "true")]);
    assert!(e.contains("needs a certificate and a key"), "{e}");
    let e = error(&["--grpc-tls-cert", "c"], &[]);
    assert!(e.contains("needs a certificate and a key"), "{e}");
    let e = error(
        &[
            "--grpc-tls-cert",
            "c",
            "--grpc-tls-key",
            "k",
            "--grpc-tls-client-san",
            "x",
        ],
        &[],
    );
    assert!(e.contains("needs client certificates"), "{e}");
    let e = error(&["--grpc-tls-client-ca", "ca"], &[]);
    assert!(e.contains("mutual TLS needs TLS"), "{e}");
    let e = error(&[], &[("GRPC_SERVER_USE_TLS", "yes")]);
    assert!(e.contains("GRPC_SERVER_USE_TLS"), "{e}");
}

#[test]
fn connection_age_from_their_variables_and_zero_means_never() {
    let s = serve(
        &[],
        &[
            ("GRPC_MAX_CONNECTION_AGE", "10m"),
            ("GRPC_MAX_CONNECTION_AGE_GRACE", "30s"),
        ],
    )
    .unwrap();
    assert_eq!(
        s.listen.grpc_max_connection_age,
        Some(Duration::from_secs(600))
    );
    assert_eq!(
        s.listen.grpc_max_connection_age_grace,
        Duration::from_secs(30)
    );
    let s = serve(&[], &[("GRPC_MAX_CONNECTION_AGE", "0")]).unwrap();
    assert_eq!(s.listen.grpc_max_connection_age, None);
    let s = serve(
        &["--grpc-max-connection-age", "1h"],
        &[("GRPC_MAX_CONNECTION_AGE", "10m")],
    )
    .unwrap();
    assert_eq!(
        s.listen.grpc_max_connection_age,
        Some(Duration::from_secs(3600))
    );
    let e = error(&[], &[("GRPC_MAX_CONNECTION_AGE", "soon")]);
    assert!(e.contains("GRPC_MAX_CONNECTION_AGE"), "{e}");
}

#[test]
fn debug_listener_from_their_host_and_port() {
    let s = serve(&[], &[("DEBUG_PORT", "6071")]).unwrap();
    assert_eq!(s.listen.debug_addr.unwrap().to_string(), "0.0.0.0:6071");
    let s = serve(&[], &[("DEBUG_HOST", "127.0.0.1")]).unwrap();
    assert_eq!(s.listen.debug_addr.unwrap().to_string(), "127.0.0.1:6070");
    let s = serve(&["--debug-addr", "127.0.0.1:0"], &[("DEBUG_PORT", "6071")]).unwrap();
    assert_eq!(s.listen.debug_addr.unwrap().to_string(), "127.0.0.1:0");
}

#[test]
fn connection_limits_are_validated() {
    let s = serve(
        &[
            "--idle-timeout",
            "0",
            "--http2-keepalive-interval",
            "0",
            "--max-connections",
            "5",
        ],
        &[],
    )
    .unwrap();
    assert_eq!(s.listen.idle_timeout, None);
    assert_eq!(s.listen.http2_keepalive_interval, None);
    assert_eq!(s.listen.max_connections, 5);
    for (flag, value) in [
        ("--max-connections", "0"),
        ("--header-timeout", "0"),
        ("--grpc-max-concurrent-streams", "0"),
        ("--http2-keepalive-timeout", "0s"),
    ] {
        let e = error(&[flag, value], &[]);
        assert!(e.contains(flag), "{e}");
    }
}

#[test]
fn their_stream_cap_with_zero_for_no_cap() {
    let streams =
        |env: &[(&str, &str)]| serve(&[], env).unwrap().listen.grpc_max_concurrent_streams;
    assert_eq!(streams(&[("GRPC_MAX_CONCURRENT_STREAMS", "16")]), 16);
    assert_eq!(streams(&[("GRPC_MAX_CONCURRENT_STREAMS", "0")]), u32::MAX);
    let s = serve(
        &["--grpc-max-concurrent-streams", "8"],
        &[("GRPC_MAX_CONCURRENT_STREAMS", "16")],
    )
    .unwrap();
    assert_eq!(s.listen.grpc_max_concurrent_streams, 8);
    for bad in ["-1", "4294967296", "many"] {
        let e = error(&[], &[("GRPC_MAX_CONCURRENT_STREAMS", bad)]);
        assert!(e.contains("GRPC_MAX_CONCURRENT_STREAMS"), "{e}");
    }
}
