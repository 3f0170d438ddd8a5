#!/usr/bin/env bash
# The runs behind BENCHMARKS.md: the release binary on the memory store and on a local
# redis-server, 1 and 4 descriptors per request, driven by examples/loadgen/main.rs.
#
#   scripts/bench.sh                 # every run, default settings
#   WORKERS=1 scripts/bench.sh       # sluice with --worker-threads 1
#   DURATION=20s scripts/bench.sh
#   PIN=1 WORKERS=1 scripts/bench.sh # sluice and the load generator on CPU 0, Redis on CPU 1
#                                    # (Redis as if on its own machine)
#
# Prints one line per run (throughput, latency percentiles, CPU per request of sluice, the
# load generator and redis-server) and, for Redis, calls and socket reads per request.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
GRPC=127.0.0.1:18081
HTTP=127.0.0.1:18080
RPORT=16379

cargo build --release --quiet --bin sluice --example loadgen
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
info() { redis-cli -p $RPORT info "$1" | tr -d '\r' | grep -E "^$2" | sed -E "s/^$2[:=]//; s/,.*//"; }

cleanup() {
    [ -n "${SLUICE:-}" ] && kill "$SLUICE" 2>/dev/null || true
    redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true
}
trap cleanup EXIT

run() {
    local store=$1 descriptors=$2 extra=()
    cleanup; sleep 0.3
    if [ "$store" = redis ]; then
        ${PIN:+taskset -c 1} redis-server --port $RPORT --save "" --appendonly no --daemonize yes --logfile /dev/null
        sleep 0.3
        extra+=(--redis-url "redis://127.0.0.1:$RPORT")
    fi
    [ -n "${WORKERS:-}" ] && extra+=(--worker-threads "$WORKERS")
    ${PIN:+taskset -c 0} ./target/release/sluice serve --config examples/loadgen-config --grpc-addr $GRPC \
        --http-addr $HTTP "${extra[@]}" >/dev/null 2>&1 &
    SLUICE=$!
    for _ in $(seq 100); do
        curl -fs "http://$HTTP/healthcheck" >/dev/null 2>&1 && break
        sleep 0.1
    done
    local rpid="" s0 r0=0 calls0=0 reads0=0
    if [ "$store" = redis ]; then
        rpid=$(pgrep -f "redis-server.*:$RPORT" | head -1)
    fi
    # Warm up (connections, allocator), then measure a separate run.
    ${PIN:+taskset -c 0} ./target/release/examples/loadgen --target "http://$GRPC" --connections "$CONNECTIONS" \
        --concurrency "$CONCURRENCY" --duration "$WARMUP" --warmup 0s --keys "$KEYS" \
        --descriptors "$descriptors" >/dev/null 2>&1
    s0=$(ticks $SLUICE)
    if [ -n "$rpid" ]; then
        r0=$(ticks "$rpid"); calls0=$(info commandstats cmdstat_evalsha:calls); reads0=$(info stats total_reads_processed)
    fi
    local out
    out=$(${PIN:+taskset -c 0} ./target/release/examples/loadgen --json --target "http://$GRPC" \
        --connections "$CONNECTIONS" --concurrency "$CONCURRENCY" --duration "$DURATION" \
        --warmup 0s --keys "$KEYS" --descriptors "$descriptors" 2>/dev/null)
    local s1 r1=0 calls1=0 reads1=0
    s1=$(ticks $SLUICE)
    if [ -n "$rpid" ]; then
        r1=$(ticks "$rpid"); calls1=$(info commandstats cmdstat_evalsha:calls); reads1=$(info stats total_reads_processed)
    fi
    python3 - "$out" "$store" "$descriptors" "$hz" "$s0" "$s1" "$r0" "$r1" \
        "$calls0" "$calls1" "$reads0" "$reads1" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); store, d = sys.argv[2], sys.argv[3]
hz = int(sys.argv[4]); s0, s1, r0, r1, c0, c1, k0, k1 = map(int, sys.argv[5:13])
n = max(r["requests"], 1); l = r["latency_ms"] or {}
line = (f'{store:6} d={d}  {r["requests_per_second"]:8.0f} req/s  '
        f'p50 {l.get("p50", 0):.3f}  p90 {l.get("p90", 0):.3f}  p99 {l.get("p99", 0):.3f}  '
        f'p99.9 {l.get("p99_9", 0):.3f} ms  errors {r["errors"]}  cpu/req: '
        f'sluice {(s1 - s0) / hz / n * 1e6:.1f} us, loadgen {r["client_cpu_s"] / n * 1e6:.1f} us')
if store == "redis":
    line += (f', redis {(r1 - r0) / hz / n * 1e6:.1f} us; evalsha/req {(c1 - c0) / n:.2f}, '
             f'redis socket reads/req {(k1 - k0) / n:.3f}')
print(line)
PY
}

for d in 1 4; do
    run memory "$d"
    run redis "$d"
done
