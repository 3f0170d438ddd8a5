//! Settings resolution: flags, `SLUICE_*` variables and the reference's variable names.
//!
//! Why this file is long: one test per group of settings, all through the same resolver;
//! each is short.

use std::collections::HashMap;
use std::path::Path;

use super::*;

/// `sluice serve ARGS` resolved under the environment `env`, a map: the process's is never
/// read (the settings tests of every group use it).
pub(super) fn serve(args: &[&str], env: &[(&str, &str)]) -> Result<Settings, Error> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::resolve(args, &|k| env.get(k).cloned())
}

/// [`serve`]'s settings error (a command line clap refuses fails the test).
pub(super) fn setting_error(args: &[&str], env: &[(&str, &str)]) -> SettingsError {
    match serve(args, env) {
        Err(Error::Setting { error, .. }) => error,
        other => panic!("not a settings error: {other:?}"),
    }
}

#[test]
fn defaults_serve_config_dir_in_memory() {
    let s = serve(&[], &[]).unwrap();
    assert_eq!(s.config_paths, vec![PathBuf::from("config")]);
    assert_eq!(s.grpc_addr.to_string(), "0.0.0.0:8081");
    assert_eq!(s.http_addr.to_string(), "0.0.0.0:8080");
    assert!(s.redis.is_none());
    assert_eq!(s.decision.limits, RequestLimits::default());
    assert_eq!(s.decision.near_limit_ratio, 0.8);
}

#[test]
fn flags_win_over_compat_variables() {
    let s = serve(
        &[
            "--grpc-addr",
            "127.0.0.1:9000",
            "--config",
            "a",
            "--config",
            "b",
        ],
        &[("GRPC_PORT", "7000"), ("RUNTIME_ROOT", "/srv")],
    )
    .unwrap();
    assert_eq!(s.grpc_addr.to_string(), "127.0.0.1:9000");
    assert_eq!(s.config_paths, vec![PathBuf::from("a"), PathBuf::from("b")]);
}

#[test]
fn envoyproxy_ratelimit_variables() {
    let s = serve(
        &[],
        &[
            ("GRPC_PORT", "7081"),
            ("HOST", "127.0.0.1"),
            ("PORT", "7080"),
            ("RUNTIME_ROOT", "/data"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("RUNTIME_WATCH_ROOT", "false"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "redis.default:6379"),
            ("REDIS_AUTH", "user:p@ss"),
            ("REDIS_TLS", "true"),
            ("REDIS_POOL_SIZE", "7"),
            ("REDIS_TIMEOUT", "2s"),
            ("CACHE_KEY_PREFIX", "rl:"),
            ("SHADOW_MODE", "true"),
            ("QUOTA_MODE", "1"),
            ("NEAR_LIMIT_RATIO", "0.5"),
            ("MERGE_DOMAIN_CONFIG", "true"),
            ("LOG_LEVEL", "WARN"),
            ("LOG_FORMAT", "json"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_RESET_HEADER", "X-Reset"),
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", ":9191"),
            ("PROMETHEUS_PATH", "/prom"),
        ],
    )
    .unwrap();
    assert_eq!(s.grpc_addr.to_string(), "0.0.0.0:7081");
    assert_eq!(s.http_addr.to_string(), "127.0.0.1:7080");
    assert_eq!(
        s.config_paths,
        vec![PathBuf::from("/data/ratelimit/config")]
    );
    let r = &s.redis.as_ref().unwrap().main;
    assert_eq!(r.url, "rediss://user:p%40ss@redis.default:6379");
    assert_eq!(r.pool_size, 7);
    assert_eq!(r.connect_timeout, Duration::from_secs(2));
    assert_eq!(r.request_timeout, Duration::from_secs(1));
    assert_eq!(r.key_prefix, "rl:");
    assert!(s.decision.shadow_mode && s.decision.quota_mode && s.merge_domains);
    assert_eq!(s.decision.near_limit_ratio, 0.5);
    assert_eq!(s.log_level, "warn");
    assert_eq!(s.log_format, LogFormat::Json);
    assert!(s.decision.headers.enabled);
    assert_eq!(s.decision.headers.reset_header, "X-Reset");
    assert_eq!(s.metrics_addr.unwrap().to_string(), "0.0.0.0:9191");
    assert_eq!(s.metrics_path, "/prom");
    assert!(s.notes.iter().any(|n| n.starts_with("RUNTIME_WATCH_ROOT")));
}

#[test]
fn unix_socket_and_cluster_urls() {
    let s = serve(&[], &[("REDIS_URL", "/var/run/redis.sock")]).unwrap();
    assert_eq!(s.redis.unwrap().main.url, "unix:///var/run/redis.sock");
    let s = serve(
        &[],
        &[
            ("REDIS_TYPE", "CLUSTER"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "a:7000,b:7001"),
        ],
    )
    .unwrap();
    // A cluster: its nodes.
    assert_eq!(
        s.redis.unwrap().main.cluster_nodes,
        vec!["redis://a:7000".to_string(), "redis://b:7001".to_string()]
    );
}

#[test]
fn bad_values_are_clear_errors() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("REDIS_TYPE", "foo"), ("REDIS_URL", "x:1")],
            "Unrecognized redis type foo",
        ),
        (&[("BACKEND_TYPE", "memcache")], "memcache is not supported"),
        (&[("SHADOW_MODE", "maybe")], "'maybe' is not a boolean"),
        (&[("GRPC_PORT", "http")], "'http' is not a port number"),
        (&[("LOG_LEVEL", "loud")], "'loud' is not one of"),
        (&[("CONFIG_TYPE", "GRPC_XDS")], "not FILE or GRPC_XDS_SOTW"),
        (
            &[
                ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
                ("CONFIG_GRPC_XDS_NODE_METADATA", "cluster:edge"),
            ],
            "'cluster:edge' is not key=value",
        ),
        (
            &[
                ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
                ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
                ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/c.pem"),
            ],
            "go together",
        ),
        (
            &[
                ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
                ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0"),
            ],
            "must be a positive number",
        ),
        (&[("NEAR_LIMIT_RATIO", "2")], "between 0 and 1"),
        (
            &[("CACHE_KEY_PREFIX", "a{b}"), ("REDIS_URL", "redis://x")],
            "must not contain",
        ),
        (
            &[("REDIS_SOCKET_TYPE", "udp"), ("REDIS_URL", "x:1")],
            "not tcp or unix",
        ),
    ];
    for (env, want) in cases {
        let e = serve(&[], env).unwrap_err().to_string();
        assert!(e.contains(want), "{env:?}: {e}");
    }
    let e = serve(&["--redis-url", "localhost:6379"], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("must start with redis://"), "{e}");
    let e = serve(
        &["--redis-timeout", "soon", "--redis-url", "redis://x"],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("is not a duration"), "{e}");
}

#[test]
fn durations_and_booleans() {
    assert_eq!(
        parse_duration("x", "150ms").unwrap(),
        Duration::from_millis(150)
    );
    assert_eq!(
        parse_duration("x", "1h30m").unwrap(),
        Duration::from_secs(5400)
    );
    assert_eq!(parse_duration("x", "0").unwrap(), Duration::ZERO);
    assert!(parse_bool("x", "T").unwrap());
    assert!(!parse_bool("x", "0").unwrap());
    assert!(parse_bool("x", "yes").is_err());
    assert_eq!(
        parse_addr("x", ":8080").unwrap().to_string(),
        "0.0.0.0:8080"
    );
}

#[test]
fn boolean_flags_need_no_value() {
    let s = serve(
        &["--shadow-mode", "--merge-domains", "--quota-mode", "false"],
        &[],
    )
    .unwrap();
    assert!(s.decision.shadow_mode && s.merge_domains && !s.decision.quota_mode);
}

#[test]
fn local_cache_and_stop_increment() {
    let s = serve(&[], &[]).expect("defaults");
    assert_eq!(s.local_cache_bytes, 0);
    assert!(!s.decision.stop_increment);
    let s = serve(
        &[],
        &[
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"),
        ],
    )
    .expect("their variables");
    assert_eq!(s.local_cache_bytes, 1 << 20);
    assert!(s.decision.stop_increment);
    assert!(
        !s.notes
            .iter()
            .any(|n| n.starts_with("LOCAL_CACHE") || n.starts_with("STOP_CACHE")),
        "honoured, not ignored: {:?}",
        s.notes
    );
    let s = serve(
        &[
            "--local-cache-size-bytes",
            "4096",
            "--stop-increment-when-over-limit",
        ],
        &[("LOCAL_CACHE_SIZE_IN_BYTES", "1048576")],
    )
    .expect("flags");
    assert_eq!(s.local_cache_bytes, 4096);
    assert!(s.decision.stop_increment);
    assert!(serve(&[], &[("LOCAL_CACHE_SIZE_IN_BYTES", "lots")]).is_err());
}

#[test]
fn the_admin_listener_is_on_loopback_unless_moved_or_off() {
    let s = serve(&[], &[]).unwrap();
    assert_eq!(
        s.admin_addr.map(|a| a.to_string()).as_deref(),
        Some("127.0.0.1:8082")
    );
    assert!(s.admin_addr.is_some_and(|a| a.ip().is_loopback()));
    let s = serve(&["--admin-addr", "10.0.0.5:9999"], &[]).unwrap();
    assert_eq!(
        s.admin_addr.map(|a| a.to_string()).as_deref(),
        Some("10.0.0.5:9999")
    );
    assert_eq!(
        serve(&["--admin-addr", "off"], &[]).unwrap().admin_addr,
        None
    );
    assert!(serve(&["--admin-addr", "nowhere"], &[]).is_err());
    // Only a chosen address makes a taken port a startup error (`server/listeners.rs`).
    assert!(!serve(&[], &[]).unwrap().admin_addr_explicit);
    assert!(
        serve(&["--admin-addr", "127.0.0.1:8082"], &[])
            .unwrap()
            .admin_addr_explicit
    );
}

mod redis;
mod table;
mod xds;
