#!/usr/bin/env bash
# Strict against batched consistency in one run (BENCHMARKS.md, "Consistency: strict,
# batched and the outage"; the outage itself, counted exactly, is the ignored integration test
# `outage::table::outage_table`):
#
#  1. One hot descriptor through 2 and 3 sluice instances sharing one redis-server, strict
#     and `--consistency batched` (100 ms interval): throughput, p99, and Redis script calls
#     per request (INFO commandstats).
#  2. The overshoot: one descriptor of 20 000/hour hammered through 3 instances for 5 s,
#     admitted against the README's bound.
#
#   scripts/consistency.sh
#   SLUICE=target/debug/sluice LOADGEN=target/debug/examples/loadgen DURATION=3s scripts/consistency.sh
#
# Builds the release binaries unless SLUICE and LOADGEN are set. Prints Markdown tables.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
INTERVAL=${INTERVAL:-100ms}
if [ -z "${SLUICE:-}" ] || [ -z "${LOADGEN:-}" ]; then
    cargo build --release --quiet --bin sluice --example loadgen
fi
SLUICE=${SLUICE:-target/release/sluice}
LOADGEN=${LOADGEN:-target/release/examples/loadgen}

free_port() { python3 scripts/free-port.py; } # below the ephemeral range: see the script
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ -n "${RPID:-}" ] && kill -9 "$RPID" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/rules.yaml" <<'EOF'
domain: bench
descriptors:
  - key: key
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
  - key: capped
    rate_limit:
      unit: hour
      requests_per_unit: 20000
EOF

RPORT=$(free_port)
rcli() { redis-cli -p "$RPORT" "$@"; }
start_redis() {
    redis-server --bind 127.0.0.1 --port "$RPORT" --save "" --dir "$work" "$@" \
        --logfile "$work/redis.log" &
    RPID=$!
    for _ in $(seq 100); do rcli ping >/dev/null 2>&1 && return; sleep 0.05; done
    echo "redis-server did not start" >&2; exit 1
}
calls() { rcli info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_evalsha:|^cmdstat_eval:/ {n += $3} END {print n + 0}'; }
# start_sluice N ARGS...: N instances; sets TARGETS and HTTPS.
start_sluice() {
    local n=$1; shift
    TARGETS=""; HTTPS=()
    for i in $(seq "$n"); do
        local g h
        g=$(free_port); h=$(free_port)
        SLUICE_ADMIN_ADDR=off "$SLUICE" serve --config "$work/rules.yaml" --grpc-addr "127.0.0.1:$g" \
            --http-addr "127.0.0.1:$h" --redis-url "redis://127.0.0.1:$RPORT" \
            --batch-interval "$INTERVAL" "$@" >"$work/sluice-$i.log" 2>&1 &
        pids+=($!)
        TARGETS="${TARGETS:+$TARGETS,}http://127.0.0.1:$g"
        HTTPS+=("127.0.0.1:$h")
        for _ in $(seq 200); do curl -fs "http://127.0.0.1:$h/healthcheck" >/dev/null 2>&1 && break; sleep 0.05; done
    done
}
stop_sluice() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pids=()
}
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); v=r; [v := v[k] for k in sys.argv[2].split('.')]; print(v)" "$1" "$2"; }

echo "| scenario | mode | instances | requests/s | p99 ms | errors | Redis calls / request |"
echo "|---|---|---|---|---|---|---|"
start_redis --appendonly no
for n in 2 3; do
    for mode in strict batched; do
        rcli flushall >/dev/null
        start_sluice "$n" --consistency "$mode"
        "$LOADGEN" --target "$TARGETS" --connections $((CONNECTIONS * n / 2)) --concurrency "$CONCURRENCY" \
            --duration "$WARMUP" --warmup 0s --keys 1 --domain bench --key key >/dev/null 2>&1
        c0=$(calls)
        "$LOADGEN" --target "$TARGETS" --connections $((CONNECTIONS * n / 2)) --concurrency "$CONCURRENCY" \
            --duration "$DURATION" --warmup 0s --keys 1 --domain bench --key key --json >"$work/r.json" 2>/dev/null
        c1=$(calls)
        req=$(field "$work/r.json" requests)
        printf '| hot key | %s | %s | %.0f | %.2f | %s | %.4f |\n' "$mode" "$n" \
            "$(field "$work/r.json" requests_per_second)" "$(field "$work/r.json" latency_ms.p99)" \
            "$(field "$work/r.json" errors)" "$(python3 -c "print(($c1 - $c0) / max(1, $req))")"
        stop_sluice
    done
done
echo
echo "| overshoot: one descriptor of limit L = 20 000/hour, 5 s flat out | mode | instances | requests | errors | admitted | bound L + 2(N−1)·r·(I+d) | admitted / L |"
echo "|---|---|---|---|---|---|---|---|"
for mode in strict batched; do
    rcli flushall >/dev/null
    start_sluice 3 --consistency "$mode"
    "$LOADGEN" --target "$TARGETS" --connections 6 --concurrency "$CONCURRENCY" \
        --duration 5s --warmup 0s --keys 1 --domain bench --key capped --json >"$work/c.json" 2>/dev/null
    ok=$(field "$work/c.json" ok); req=$(field "$work/c.json" requests)
    # r: each instance's rate; d: bounded by the p99 of a whole decision.
    bound=$(python3 -c "r = $(field "$work/c.json" requests_per_second) / 3; d = $(field "$work/c.json" latency_ms.p99) / 1000; print(round(20000 + 2 * 2 * r * (0.1 + d)))")
    printf '| capped | %s | 3 | %s | %s | %s | %s | %.3f |\n' "$mode" "$req" "$(field "$work/c.json" errors)" "$ok" "$bound" \
        "$(python3 -c "print($ok / 20000)")"
    stop_sluice
done
kill -9 "$RPID"; wait "$RPID" 2>/dev/null || true
