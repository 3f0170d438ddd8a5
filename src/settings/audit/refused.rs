//! The reference's variables that sluice refuses, and those that have no effect here, each with the
//! reason given at startup (and in the reference's table of the reference's variables).

use super::Refusal;

/// Set to anything but their inert value, these stop startup: ignoring them would silently
/// change behaviour. None today: every variable of the reference's but memcache's is honoured or
/// has no effect (`BACKEND_TYPE=memcache` is refused by its setting's parser).
pub const REFUSED: &[Refusal] = &[];

const PIPELINE_WINDOW: &str = "concurrent requests on a connection are always coalesced into one \
                               pipeline, with no flush timer (a lone request is sent at once)";
const PIPELINE_LIMIT: &str = "deprecated and unused in envoyproxy/ratelimit too";
const PARALLELISM: &str = "on a cluster a request's calls, one per hash slot, are always sent \
                           concurrently: one round trip of latency";
const POOL_ON_EMPTY: &str = "connections are multiplexed: a request never waits for a free \
                             connection (theirs accepts only WAIT; CREATE and ERROR stop their \
                             startup)";
const STARTUP: &str = "startup never waits for Redis: listeners open at once, a background task \
                       connects and reconnects with its own backoff, never giving up, and health \
                       is NOT_SERVING until Redis answers";
const MEMCACHE: &str = "memcache is not supported (BACKEND_TYPE=memcache is refused); without it \
                        theirs ignores this too";

/// Set, each is reported once at startup with its reason: sluice already behaves one way,
/// whatever the value.
pub const NO_EFFECT: &[(&str, &str)] = &[
    (
        "PROTO",
        "listeners are TCP, in the address family of their host (HOST, GRPC_HOST, DEBUG_HOST: \
         `::` listens on IPv6)",
    ),
    (
        "MAX_CONCURRENT_REQUESTS",
        "not read by envoyproxy/ratelimit (proposed by its open pull request #1241: a cap on \
         ShouldRateLimit calls worked on at once); sluice's cap adapts to the store's round \
         trip, at most --max-in-flight (1024); past it a call is refused with \
         RESOURCE_EXHAUSTED before its message is read",
    ),
    (
        "REQUEST_TIMEOUT",
        "not read by envoyproxy/ratelimit (proposed with MAX_CONCURRENT_REQUESTS); a \
         request's store work is already bounded by the caller's deadline (grpc-timeout, \
         less a margin to answer), or by --redis-timeout without one; past it the call \
         fails with UNAVAILABLE",
    ),
    (
        "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
        "xDS reconnects wait as XDS_CLIENT_BACKOFF_* say",
    ),
    (
        "RUNTIME_IGNOREDOTFILES",
        "dot-files and dot-directories are never loaded (their `true`)",
    ),
    (
        "RUNTIME_WATCH_ROOT",
        "the config directory is always watched, ConfigMap and RUNTIME_ROOT symlink swaps \
         included (both of their modes at once)",
    ),
    (
        "EXPIRATION_JITTER_MAX_SECONDS",
        "no jitter is added: each key's TTL is set in its script to exactly as long as its \
         state means something",
    ),
    ("REDIS_PIPELINE_WINDOW", PIPELINE_WINDOW),
    ("REDIS_PIPELINE_LIMIT", PIPELINE_LIMIT),
    ("REDIS_CLUSTER_PIPELINE_PARALLELISM", PARALLELISM),
    ("REDIS_PERSECOND_PIPELINE_WINDOW", PIPELINE_WINDOW),
    ("REDIS_PERSECOND_PIPELINE_LIMIT", PIPELINE_LIMIT),
    ("REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", PARALLELISM),
    (
        "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
        "health always follows Redis (their `true`): NOT_SERVING while no connection is up, or \
         while Redis refuses writes; SERVING again once it answers",
    ),
    (
        "REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR",
        "a READONLY reply always drops its connection, and the next one resolves the \
         address again (their `true`), so a failover behind a DNS name or proxy heals itself",
    ),
    ("REDIS_POOL_ON_EMPTY_BEHAVIOR", POOL_ON_EMPTY),
    ("REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", POOL_ON_EMPTY),
    ("REDIS_STARTUP_INITIAL_INTERVAL", STARTUP),
    ("REDIS_STARTUP_MAX_INTERVAL", STARTUP),
    ("REDIS_STARTUP_MAX_ELAPSED_TIME", STARTUP),
    ("MEMCACHE_HOST_PORT", MEMCACHE),
    ("MEMCACHE_MAX_IDLE_CONNS", MEMCACHE),
    ("MEMCACHE_SRV", MEMCACHE),
    ("MEMCACHE_SRV_REFRESH", MEMCACHE),
    ("MEMCACHE_TLS", MEMCACHE),
    ("MEMCACHE_TLS_CLIENT_CERT", MEMCACHE),
    ("MEMCACHE_TLS_CLIENT_KEY", MEMCACHE),
    ("MEMCACHE_TLS_CACERT", MEMCACHE),
    ("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", MEMCACHE),
];
