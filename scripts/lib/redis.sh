# Sourced by the benchmark scripts that start their own redis-server (scripts/overload.sh,
# scripts/envoy-overhead.sh, scripts/envoy-overload.sh).
#
#   in:   WORK (the caller's scratch directory), die and free_port (lib/prelude.sh)
#   out:  start_redis PREFIX…: a redis-server on a free loopback port (RPORT), no
#         persistence, started with the command prefix given (e.g. taskset -c 1; none for
#         none), answering PING; REDIS_PID its process. stop_redis: SHUTDOWN NOSAVE, then
#         SIGKILL if it is still there after 10 s.

REDIS_PID="" RPORT=""

start_redis() {
    RPORT=$(free_port)
    "$@" redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$WORK" --logfile /dev/null &
    REDIS_PID=$!
    for _ in $(seq 200); do
        redis-cli -p "$RPORT" ping >/dev/null 2>&1 && return 0
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.05
    done
    die "redis-server did not start (port $RPORT)"
}

stop_redis() {
    if [ -n "$REDIS_PID" ]; then
        redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || kill "$REDIS_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
    fi
}
