//! Their variables that sluice reads with their meaning: (name, what it does here). The
//! README's table of their variables shows the second column; keep it short and true.

/// See the module documentation. Ordered as their settings struct.
pub const HONOURED: &[(&str, &str)] = &[
    // Listeners.
    ("HOST", "host of the HTTP listener (`--http-addr`)"),
    ("PORT", "port of the HTTP listener (`--http-addr`), 8080"),
    (
        "DEBUG_HOST",
        "host of the debug listener (`--debug-addr`: `/rlconfig`); off unless it or `DEBUG_PORT` is set (theirs always listens)",
    ),
    (
        "DEBUG_PORT",
        "port of the debug listener (`--debug-addr`), 6070; off unless it or `DEBUG_HOST` is set",
    ),
    ("GRPC_HOST", "host of the gRPC listener (`--grpc-addr`)"),
    (
        "GRPC_PORT",
        "port of the gRPC listener (`--grpc-addr`), 8081",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE",
        "GOAWAY to a gRPC connection after this age ±10% (`--grpc-max-connection-age`), 24h; `0`: never",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE_GRACE",
        "after that GOAWAY, close the connection this much later, requests in flight or not (`--grpc-max-connection-age-grace`), 1h",
    ),
    (
        "GRPC_MAX_CONCURRENT_STREAMS",
        "requests in flight per gRPC connection (`--grpc-max-concurrent-streams`); `0`: no cap, as theirs; unset: 16",
    ),
    (
        "GRPC_SERVER_USE_TLS",
        "gRPC over TLS (`--grpc-tls`); `GRPC_SERVER_TLS_*` and `GRPC_CLIENT_TLS_*` count only when it is true, as theirs",
    ),
    (
        "GRPC_SERVER_TLS_CERT",
        "gRPC certificate chain, PEM (`--grpc-tls-cert`), reloaded when it changes",
    ),
    (
        "GRPC_SERVER_TLS_KEY",
        "private key of the gRPC certificate, PEM (`--grpc-tls-key`), reloaded when it changes",
    ),
    (
        "GRPC_CLIENT_TLS_CACERT",
        "mutual TLS: client certificates must chain to this CA (`--grpc-tls-client-ca`), reloaded too",
    ),
    (
        "GRPC_CLIENT_TLS_SAN",
        "name every client certificate must be valid for (`--grpc-tls-client-san`)",
    ),
    (
        "LOG_LEVEL",
        "`--log-level`; their `fatal` and `panic` mean `error`",
    ),
    ("LOG_FORMAT", "`text` or `json` (`--log-format`)"),
    // Where the rules come from.
    (
        "CONFIG_TYPE",
        "`FILE` (rule files) or `GRPC_XDS_SOTW` (rules from an xDS server)",
    ),
    (
        "FORCE_START_WITHOUT_INITIAL_CONFIG",
        "with xDS: serve before the first config arrives (calls fail until it does)",
    ),
    ("CONFIG_GRPC_XDS_NODE_ID", "xDS node id, `default`"),
    (
        "CONFIG_GRPC_XDS_NODE_METADATA",
        "`k=v,k2=v2`: string fields of the xDS node's metadata",
    ),
    (
        "CONFIG_GRPC_XDS_SERVER_URL",
        "the xDS server, `localhost:18000`",
    ),
    (
        "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
        "`k:v,k2:v2`: gRPC metadata sent on the xDS stream",
    ),
    (
        "CONFIG_GRPC_XDS_SERVER_USE_TLS",
        "TLS to the xDS server; the `CONFIG_GRPC_XDS_*_TLS_*` files count only when it is true",
    ),
    (
        "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
        "client certificate to the xDS server (mutual TLS), read at each connection",
    ),
    (
        "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
        "private key of that client certificate, read at each connection",
    ),
    (
        "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        "CA of the xDS server's certificate (default: the public web roots)",
    ),
    (
        "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
        "name the xDS server's certificate must carry (default: the URL's host)",
    ),
    (
        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
        "first xDS reconnect delay, 10s",
    ),
    (
        "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
        "longest xDS reconnect delay, 60s",
    ),
    (
        "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
        "growth factor of the delay, 0.5 (theirs: below 1 the delay stays at the first)",
    ),
    (
        "XDS_CLIENT_BACKOFF_JITTER",
        "randomize each reconnect delay, true",
    ),
    (
        "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
        "largest xDS response accepted, 4 MiB",
    ),
    // Metrics.
    (
        "USE_DOG_STATSD",
        "send DogStatsD (`--dogstatsd`): tags as DogStatsD tags, UDP by default",
    ),
    (
        "USE_DOG_STATSD_MOGRIFIERS",
        "DogStatsD: the mogrifiers applied to stat names, in the order listed",
    ),
    (
        "DOG_STATSD_MOGRIFIER_*",
        "each listed mogrifier's `_PATTERN` (regex), `_NAME` and `_TAGS` (`$1`… are its captures)",
    ),
    (
        "USE_STATSD",
        "send statsd; unset, statsd is off here (theirs: on) unless `STATSD_HOST`/`STATSD_PORT` is set",
    ),
    (
        "STATSD_HOST",
        "statsd target host, `localhost` (`--statsd-addr`); setting it turns statsd on unless `USE_STATSD=false`",
    ),
    (
        "STATSD_PORT",
        "statsd target port, 8125; setting it turns statsd on unless `USE_STATSD=false`",
    ),
    (
        "EXTRA_TAGS",
        "`k:v,k2:v2` tags on every stat (`--statsd-tags`)",
    ),
    (
        "STATS_FLUSH_INTERVAL",
        "how often counter deltas are sent (`--stats-flush-interval`), 10s",
    ),
    (
        "DISABLE_STATS",
        "`true`: no statsd is sent; Prometheus `/metrics` is still served (theirs empties it too)",
    ),
    (
        "USE_PROMETHEUS",
        "a separate metrics listener at `PROMETHEUS_ADDR` (`--metrics-addr`); the HTTP port serves `/metrics` anyway",
    ),
    (
        "PROMETHEUS_ADDR",
        "address of the metrics listener `USE_PROMETHEUS` opens, `:9090`",
    ),
    (
        "PROMETHEUS_PATH",
        "path of metrics on the `USE_PROMETHEUS` listener (`--metrics-path`), `/metrics`",
    ),
    (
        "PROMETHEUS_MAPPER_YAML",
        "statsd_exporter mapping file applied to `/metrics` (`--metrics-mapper`)",
    ),
    // Rule files.
    (
        "RUNTIME_ROOT",
        "rule files are read from `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY` (`--config`)",
    ),
    ("RUNTIME_SUBDIRECTORY", "see `RUNTIME_ROOT`"),
    ("RUNTIME_APPDIRECTORY", "see `RUNTIME_ROOT`; `config`"),
    // Decisions and the store.
    (
        "LOCAL_CACHE_SIZE_IN_BYTES",
        "bytes of the local over-limit cache (`--local-cache-size-bytes`); `0`: off",
    ),
    (
        "NEAR_LIMIT_RATIO",
        "threshold of the `near_limit` metric (`--near-limit-ratio`), 0.8",
    ),
    (
        "CACHE_KEY_PREFIX",
        "prefix of every Redis key (`--cache-key-prefix`); unset: `sluice:`",
    ),
    (
        "BACKEND_TYPE",
        "`redis` (their default socket when `REDIS_URL` is unset) or `memory`; `memcache` is refused: without server-side scripts a request's limits could not be decided atomically",
    ),
    (
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
        "when any descriptor of a request is over its limit, no other is charged (`--stop-increment-when-over-limit`)",
    ),
    (
        "LIMIT_RESPONSE_HEADERS_ENABLED",
        "rate limit response headers (`--response-headers`)",
    ),
    ("LIMIT_LIMIT_HEADER", "name of the limit header"),
    ("LIMIT_REMAINING_HEADER", "name of the remaining header"),
    ("LIMIT_RESET_HEADER", "name of the reset header"),
    (
        "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
        "unhealthy while no domain is loaded",
    ),
    // Redis.
    (
        "REDIS_SOCKET_TYPE",
        "`tcp` or `unix`: how `REDIS_URL` is read (unset: by its form)",
    ),
    (
        "REDIS_TYPE",
        "`single`, `cluster` or `sentinel` (`--redis-type`)",
    ),
    (
        "REDIS_URL",
        "their forms (`host:port`, a socket path, `master,host:port,…`) or a URL (`--redis-url`); unset: the memory store",
    ),
    (
        "REDIS_POOL_SIZE",
        "multiplexed Redis connections (`--redis-pool-size`); unset: 4",
    ),
    (
        "REDIS_AUTH",
        "`password` or `user:password` of Redis (of the master, for sentinel)",
    ),
    (
        "REDIS_TLS",
        "TLS to their `host:port` addresses (`--redis-tls`)",
    ),
    (
        "REDIS_TLS_CLIENT_CERT",
        "client certificate for Redis, PEM (`--redis-tls-client-cert`)",
    ),
    (
        "REDIS_TLS_CLIENT_KEY",
        "private key of the Redis client certificate, PEM (`--redis-tls-client-key`)",
    ),
    (
        "REDIS_TLS_CACERT",
        "CA of the Redis certificates, a private CA (`--redis-tls-ca-cert`)",
    ),
    (
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
        "accept a Redis certificate for another name; the chain is still verified",
    ),
    (
        "REDIS_PERSECOND",
        "`true`: a second Redis for descriptors whose limits are all per second (`--redis-per-second-url`)",
    ),
    (
        "REDIS_PERSECOND_SOCKET_TYPE",
        "as `REDIS_SOCKET_TYPE`, for the per-second Redis",
    ),
    (
        "REDIS_PERSECOND_TYPE",
        "as `REDIS_TYPE`, for the per-second Redis",
    ),
    (
        "REDIS_PERSECOND_URL",
        "as `REDIS_URL`, for the per-second Redis; unset: their default socket",
    ),
    (
        "REDIS_PERSECOND_POOL_SIZE",
        "as `REDIS_POOL_SIZE`, for the per-second Redis",
    ),
    (
        "REDIS_PERSECOND_AUTH",
        "as `REDIS_AUTH`, for the per-second Redis",
    ),
    (
        "REDIS_PERSECOND_TLS",
        "as `REDIS_TLS`, for the per-second Redis (the TLS files are shared)",
    ),
    (
        "REDIS_SENTINEL_AUTH",
        "`password` or `user:password` of the sentinels",
    ),
    (
        "REDIS_PERSECOND_SENTINEL_AUTH",
        "as `REDIS_SENTINEL_AUTH`, for the per-second Redis",
    ),
    (
        "REDIS_TIMEOUT",
        "deadline to connect (`--redis-connect-timeout`), as theirs; a call's Redis work ends by what its grpc-timeout leaves, or after `--redis-timeout` (1s) without one",
    ),
    (
        "REDIS_PERSECOND_TIMEOUT",
        "as `REDIS_TIMEOUT`, for the per-second Redis",
    ),
    // Modes.
    (
        "SHADOW_MODE",
        "never deny: overall OVER_LIMIT becomes OK (`--shadow-mode`)",
    ),
    ("QUOTA_MODE", "every rule is a quota rule (`--quota-mode`)"),
    (
        "RESPONSE_DYNAMIC_METADATA",
        "rule metadata in the response's dynamic metadata (`--response-dynamic-metadata`)",
    ),
    (
        "MERGE_DOMAIN_CONFIG",
        "one domain may span several files (`--merge-domains`)",
    ),
    // Tracing.
    (
        "TRACING_ENABLED",
        "OpenTelemetry spans over OTLP (`--tracing`)",
    ),
    (
        "TRACING_SERVICE_NAME",
        "resource attribute `service.name`, `RateLimit`",
    ),
    (
        "TRACING_SERVICE_NAMESPACE",
        "resource attribute `service.namespace`",
    ),
    (
        "TRACING_SERVICE_INSTANCE_ID",
        "resource attribute `service.instance.id`; unset: a random UUID",
    ),
    (
        "TRACING_EXPORTER_PROTOCOL",
        "`http` or `grpc` (`--tracing-protocol`)",
    ),
    (
        "TRACING_SAMPLING_RATE",
        "share of new traces kept; a caller's decision is followed (`--tracing-sampling-rate`), 1",
    ),
];
