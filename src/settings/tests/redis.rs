//! Redis settings: Sentinel, the per-second Redis and TLS files, from the reference's variables and
//! from flags.

use super::*;

#[test]
fn sentinel_in_their_format() {
    let s = serve(
        &[],
        &[
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", "mymaster,s1:26379, s2:26379"),
            ("REDIS_AUTH", "masterpw"),
            ("REDIS_SENTINEL_AUTH", "sentpw"),
            ("REDIS_TLS", "true"),
        ],
    )
    .unwrap();
    let r = s.redis.unwrap().main.sentinel.expect("sentinel");
    assert_eq!(r.master, "mymaster");
    assert_eq!(r.master_auth.as_deref(), Some("masterpw"));
    assert_eq!(
        r.sentinels,
        ["rediss://:sentpw@s1:26379", "rediss://:sentpw@s2:26379"]
    );
    let e = serve(
        &[],
        &[("REDIS_TYPE", "sentinel"), ("REDIS_URL", "mymaster")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("REDIS_URL") && e.contains("Expected master name and a list of urls"),
        "{e}"
    );
    let s = serve(
        &[
            "--redis-type",
            "sentinel",
            "--redis-url",
            "m,redis://:x@h:1,h:2",
            "--redis-sentinel-auth",
            "y",
        ],
        &[],
    )
    .unwrap();
    let sentinels = s.redis.unwrap().main.sentinel.expect("sentinel").sentinels;
    assert_eq!(sentinels, ["redis://:x@h:1", "redis://:y@h:2"]);
}

#[test]
fn per_second_redis_from_their_variables_and_flags() {
    let s = serve(
        &[],
        &[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "main:6379"),
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_SOCKET_TYPE", "tcp"),
            ("REDIS_PERSECOND_URL", "fast:6379"),
            ("REDIS_PERSECOND_POOL_SIZE", "9"),
            ("REDIS_PERSECOND_AUTH", "pw"),
            ("CACHE_KEY_PREFIX", "p:"),
        ],
    )
    .unwrap();
    let r = s.redis.unwrap();
    let p = r.per_second.as_ref().expect("per-second redis");
    assert_eq!(p.url, "redis://:pw@fast:6379");
    assert_eq!(p.pool_size, 9);
    assert_eq!(p.key_prefix, "p:");

    // Off unless REDIS_PERSECOND is true; their default socket when on without a URL.
    let s = serve(
        &[],
        &[("REDIS_URL", "redis://m"), ("REDIS_PERSECOND_URL", "x:1")],
    )
    .unwrap();
    assert!(s.redis.unwrap().per_second.is_none());
    let s = serve(&[], &[("REDIS_URL", "redis://m"), ("REDIS_PERSECOND", "1")]).unwrap();
    assert_eq!(
        s.redis.unwrap().per_second.unwrap().url,
        "unix:///var/run/nutcracker/ratelimitpersecond.sock"
    );

    let s = serve(
        &[
            "--redis-url",
            "redis://m:1",
            "--redis-per-second-url",
            "redis://a:1,redis://b:2",
            "--redis-per-second-type",
            "cluster",
        ],
        &[],
    )
    .unwrap();
    let p = s.redis.unwrap().per_second.unwrap();
    // A cluster of two nodes.
    assert_eq!(p.cluster_nodes.len(), 2);
}

#[test]
fn redis_tls_files_need_a_tls_connection() {
    let s = serve(
        &[],
        &[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "r:6380"),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CACERT", "/ca.pem"),
            ("REDIS_TLS_CLIENT_CERT", "/c.pem"),
            ("REDIS_TLS_CLIENT_KEY", "/k.pem"),
            ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
        ],
    )
    .unwrap();
    let t = s.redis.unwrap().tls;
    assert_eq!(t.ca_cert, Some(PathBuf::from("/ca.pem")));
    assert_eq!(t.client_key, Some(PathBuf::from("/k.pem")));
    assert!(t.skip_hostname_verification);

    let e = serve(
        &[
            "--redis-url",
            "redis://r:6379",
            "--redis-tls-ca-cert",
            "/ca.pem",
        ],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no Redis connection uses TLS"), "{e}");
    let e = serve(
        &[
            "--redis-url",
            "rediss://r:6379",
            "--redis-tls-client-cert",
            "/c.pem",
        ],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("go together"), "{e}");
    let e = serve(&["--redis-url", "rediss://r:6379/#insecure"], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("#insecure turns off all certificate verification"),
        "{e}"
    );
}

#[test]
fn reference_keys_need_the_local_clock() {
    let s = serve(
        &["--redis-reference-keys", "--redis-time-source", "local"],
        &[("REDIS_URL", "r:6379")],
    )
    .unwrap();
    assert!(s.redis.as_ref().unwrap().main.reference_prefix.is_some());
    assert!(s.decision.reference_keys);
    let s = serve(
        &["--redis-time-source", "local"],
        &[("REDIS_URL", "r:6379")],
    )
    .unwrap();
    assert!(!s.decision.reference_keys);
    let e = serve(&["--redis-reference-keys"], &[("REDIS_URL", "r:6379")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--redis-reference-keys") && e.contains("--redis-time-source local"),
        "{e}"
    );
    let e = serve(
        &["--redis-reference-keys", "--redis-time-source", "local"],
        &[
            ("REDIS_URL", "r:6379"),
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_URL", "s:6379"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("per-second"), "{e}");
}
