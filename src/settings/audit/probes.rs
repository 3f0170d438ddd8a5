//! One probe per honoured variable: (variable, a valid non-default value, the variables it
//! needs beside it). Resolving with the probe must give other settings than resolving with
//! its companions alone, so a variable listed as honoured that the code stopped reading
//! fails the audit. A companion may name the probed variable itself: the probe's value
//! replaces it (so pairs such as a certificate and its key stay valid).

type Env = &'static [(&'static str, &'static str)];

const NONE: Env = &[];
const GRPC_TLS: Env = &[
    ("GRPC_SERVER_USE_TLS", "true"),
    ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
    ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
];
const GRPC_TLS_FILES: Env = &[
    ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
    ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
];
const GRPC_MTLS: Env = &[
    ("GRPC_SERVER_USE_TLS", "true"),
    ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
    ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
    ("GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt"),
];
const XDS: Env = &[("CONFIG_TYPE", "GRPC_XDS_SOTW")];
const XDS_TLS: Env = &[
    ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
    ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
];
const XDS_MTLS: Env = &[
    ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
    ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
    ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/xds/tls.crt"),
    ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/xds/tls.key"),
];
const STATSD: Env = &[("USE_STATSD", "true")];
const DOG: Env = &[
    ("USE_DOG_STATSD", "true"),
    ("DOG_STATSD_MOGRIFIER_A_PATTERN", "^ratelimit\\.(.*)$"),
    ("DOG_STATSD_MOGRIFIER_A_NAME", "rl.$1"),
];
const DOG_MOGRIFIED: Env = &[
    ("USE_DOG_STATSD", "true"),
    ("USE_DOG_STATSD_MOGRIFIERS", "A"),
    ("DOG_STATSD_MOGRIFIER_A_PATTERN", "^ratelimit\\.(.*)$"),
    ("DOG_STATSD_MOGRIFIER_A_NAME", "rl.$1"),
];
const REDIS: Env = &[("REDIS_URL", "redis.example:6379")];
const REDIS_TLS: Env = &[("REDIS_URL", "redis.example:6379"), ("REDIS_TLS", "true")];
const REDIS_MTLS: Env = &[
    ("REDIS_URL", "redis.example:6379"),
    ("REDIS_TLS", "true"),
    ("REDIS_TLS_CLIENT_CERT", "/redis/tls.crt"),
    ("REDIS_TLS_CLIENT_KEY", "/redis/tls.key"),
];
const SENTINEL: Env = &[
    ("REDIS_TYPE", "sentinel"),
    ("REDIS_URL", "mymaster,sentinel.example:26379"),
];
const PER_SECOND: Env = &[
    ("REDIS_URL", "redis.example:6379"),
    ("REDIS_PERSECOND", "true"),
    ("REDIS_PERSECOND_URL", "persecond.example:6380"),
];
const PER_SECOND_SENTINEL: Env = &[
    ("REDIS_URL", "redis.example:6379"),
    ("REDIS_PERSECOND", "true"),
    ("REDIS_PERSECOND_TYPE", "sentinel"),
    ("REDIS_PERSECOND_URL", "psmaster,sentinel.example:26379"),
];
const TRACING: Env = &[("TRACING_ENABLED", "true")];

pub(super) const PROBES: &[(&str, &str, Env)] = &[
    ("HOST", "127.0.0.1", NONE),
    ("PORT", "9080", NONE),
    ("DEBUG_HOST", "127.0.0.1", NONE),
    ("DEBUG_PORT", "6071", NONE),
    ("GRPC_HOST", "127.0.0.1", NONE),
    ("GRPC_PORT", "9081", NONE),
    ("GRPC_MAX_CONNECTION_AGE", "1h", NONE),
    ("GRPC_MAX_CONNECTION_AGE_GRACE", "5m", NONE),
    ("GRPC_MAX_CONCURRENT_STREAMS", "32", NONE),
    ("GRPC_SERVER_USE_TLS", "true", GRPC_TLS_FILES),
    ("GRPC_SERVER_TLS_CERT", "/certs/other.crt", GRPC_TLS),
    ("GRPC_SERVER_TLS_KEY", "/certs/other.key", GRPC_TLS),
    ("GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt", GRPC_TLS),
    ("GRPC_CLIENT_TLS_SAN", "envoy.example", GRPC_MTLS),
    ("LOG_LEVEL", "debug", NONE),
    ("LOG_FORMAT", "json", NONE),
    ("CONFIG_TYPE", "GRPC_XDS_SOTW", NONE),
    ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true", NONE),
    ("CONFIG_GRPC_XDS_NODE_ID", "node-1", XDS),
    ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a", XDS),
    ("CONFIG_GRPC_XDS_SERVER_URL", "xds.example:18000", XDS),
    (
        "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
        "x-team:rl",
        XDS,
    ),
    ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true", XDS),
    (
        "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
        "/xds/other.crt",
        XDS_MTLS,
    ),
    ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/xds/other.key", XDS_MTLS),
    ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/xds/ca.crt", XDS_TLS),
    ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.internal", XDS_TLS),
    ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s", XDS),
    ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "2m", XDS),
    ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2", XDS),
    ("XDS_CLIENT_BACKOFF_JITTER", "false", XDS),
    ("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "1048576", XDS),
    ("USE_DOG_STATSD", "true", NONE),
    ("USE_DOG_STATSD_MOGRIFIERS", "A", DOG),
    ("DOG_STATSD_MOGRIFIER_A_TAGS", "service:$1", DOG_MOGRIFIED),
    ("USE_STATSD", "true", NONE),
    ("STATSD_HOST", "statsd.example", NONE),
    ("STATSD_PORT", "9125", NONE),
    ("EXTRA_TAGS", "team:rl", STATSD),
    ("STATS_FLUSH_INTERVAL", "1s", STATSD),
    ("DISABLE_STATS", "true", STATSD),
    ("USE_PROMETHEUS", "true", NONE),
    ("PROMETHEUS_ADDR", ":9191", &[("USE_PROMETHEUS", "true")]),
    ("PROMETHEUS_PATH", "/prom", NONE),
    ("PROMETHEUS_MAPPER_YAML", "/etc/mapper.yaml", NONE),
    ("RUNTIME_ROOT", "/srv/runtime", NONE),
    ("RUNTIME_SUBDIRECTORY", "ratelimit", NONE),
    ("RUNTIME_APPDIRECTORY", "rules", NONE),
    ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576", NONE),
    ("NEAR_LIMIT_RATIO", "0.5", NONE),
    ("CACHE_KEY_PREFIX", "rl:", REDIS),
    ("BACKEND_TYPE", "redis", NONE),
    ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true", NONE),
    ("LIMIT_RESPONSE_HEADERS_ENABLED", "true", NONE),
    ("LIMIT_LIMIT_HEADER", "X-Limit", NONE),
    ("LIMIT_REMAINING_HEADER", "X-Remaining", NONE),
    ("LIMIT_RESET_HEADER", "X-Reset", NONE),
    ("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true", NONE),
    ("REDIS_SOCKET_TYPE", "unix", REDIS),
    ("REDIS_TYPE", "cluster", REDIS),
    ("REDIS_URL", "redis.example:6379", NONE),
    ("REDIS_POOL_SIZE", "8", REDIS),
    ("REDIS_AUTH", "secret", REDIS),
    ("REDIS_TLS", "true", REDIS),
    ("REDIS_TLS_CLIENT_CERT", "/redis/other.crt", REDIS_MTLS),
    ("REDIS_TLS_CLIENT_KEY", "/redis/other.key", REDIS_MTLS),
    ("REDIS_TLS_CACERT", "/redis/ca.crt", REDIS_TLS),
    ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true", REDIS_TLS),
    ("REDIS_PERSECOND", "true", REDIS),
    ("REDIS_PERSECOND_SOCKET_TYPE", "unix", PER_SECOND),
    ("REDIS_PERSECOND_TYPE", "cluster", PER_SECOND),
    ("REDIS_PERSECOND_URL", "other.example:6380", PER_SECOND),
    ("REDIS_PERSECOND_POOL_SIZE", "8", PER_SECOND),
    ("REDIS_PERSECOND_AUTH", "secret", PER_SECOND),
    ("REDIS_PERSECOND_TLS", "true", PER_SECOND),
    ("REDIS_SENTINEL_AUTH", "secret", SENTINEL),
    (
        "REDIS_PERSECOND_SENTINEL_AUTH",
        "secret",
        PER_SECOND_SENTINEL,
    ),
    ("REDIS_TIMEOUT", "2s", REDIS),
    ("REDIS_PERSECOND_TIMEOUT", "2s", PER_SECOND),
    ("SHADOW_MODE", "true", NONE),
    ("QUOTA_MODE", "true", NONE),
    ("RESPONSE_DYNAMIC_METADATA", "true", NONE),
    ("MERGE_DOMAIN_CONFIG", "true", NONE),
    ("TRACING_ENABLED", "true", NONE),
    ("TRACING_SERVICE_NAME", "sluice", TRACING),
    ("TRACING_SERVICE_NAMESPACE", "edge", TRACING),
    ("TRACING_SERVICE_INSTANCE_ID", "pod-1", TRACING),
    ("TRACING_EXPORTER_PROTOCOL", "grpc", TRACING),
    ("TRACING_SAMPLING_RATE", "0.5", TRACING),
];
