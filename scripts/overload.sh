#!/usr/bin/env bash
# Overload: sluice (release build, Redis store) under an open-loop offered load of 1×, 1.5×
# and 2× its measured capacity (examples/loadgen --rate: requests start at a fixed rate
# whatever the answers, each carrying --timeout as its grpc-timeout, as Envoy sends it).
# Capacity is what a closed-loop run (CONNECTIONS × CONCURRENCY in flight) sustains first.
# Prints, per multiple: offered and answered rate, shed rate (RESOURCE_EXHAUSTED, past
# --max-in-flight), DEADLINE_EXCEEDED (client- or server-side), other errors, and the p99 /
# max latency of what was answered (counted from when each request was due).
#
#   scripts/overload.sh                          # defaults below
#   DURATION=20s TIMEOUT=20ms scripts/overload.sh
#   MAX_IN_FLIGHT=64 scripts/overload.sh         # sluice's --max-in-flight (default: its own)
#   CAPACITY=12000 scripts/overload.sh           # skip the capacity run
#   WORKERS=1 scripts/overload.sh                # sluice --worker-threads 1: leaves the
#                                                # load generator a core on a 2-core box
#
# RELIABILITY.md records a run.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
TIMEOUT=${TIMEOUT:-20ms}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
MULTIPLES=${MULTIPLES:-"1 1.5 2"}
THREADS=${THREADS:-1}   # load generator threads (its CPU use is reported: client-bound runs say so)
GRPC=127.0.0.1:18091
HTTP=127.0.0.1:18090
ADMIN=127.0.0.1:18092
RPORT=16389

# PROFILE=debug uses the dev build (quicker to build; slower, so lower RATE with it).
PROFILE=${PROFILE:-release}
if [ "$PROFILE" = debug ]; then
    cargo build --quiet --bin sluice --example loadgen
else
    cargo build --release --quiet --bin sluice --example loadgen
fi
BIN=target/$PROFILE
cleanup() {
    [ -n "${SLUICE:-}" ] && kill "$SLUICE" 2>/dev/null || true
    redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true
}
trap cleanup EXIT

redis-server --port $RPORT --save "" --appendonly no --daemonize yes --logfile /dev/null
sleep 0.3
extra=()
[ -n "${MAX_IN_FLIGHT:-}" ] && extra+=(--max-in-flight "$MAX_IN_FLIGHT")
[ -n "${WORKERS:-}" ] && extra+=(--worker-threads "$WORKERS")
SLUICE_ADMIN_ADDR=$ADMIN ./$BIN/sluice serve --config examples/loadgen-config \
    --grpc-addr $GRPC --http-addr $HTTP --redis-url "redis://127.0.0.1:$RPORT" \
    "${extra[@]}" >/dev/null 2>&1 &
SLUICE=$!
for _ in $(seq 100); do
    curl -fs "http://$HTTP/healthcheck" >/dev/null 2>&1 && break
    sleep 0.1
done

lg() { ./$BIN/examples/loadgen --json --target "http://$GRPC" --keys "$KEYS" --threads "$THREADS" "$@" 2>/dev/null; }

if [ -z "${CAPACITY:-}" ]; then
    CAPACITY=$(lg --connections "$CONNECTIONS" --concurrency "$CONCURRENCY" --duration "$DURATION" \
        --warmup "$WARMUP" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["requests_per_second"]))')
fi
echo "capacity (closed loop, $CONNECTIONS x $CONCURRENCY in flight): $CAPACITY req/s; timeout (grpc-timeout) $TIMEOUT"
printf '%-5s %9s %9s %9s %9s %9s %9s %9s %7s  %s\n' load offered answered shed/s deadline/s other/s "p99 ms" "max ms" client other_codes
for m in $MULTIPLES; do
    rate=$(python3 -c "print(round($CAPACITY * $m))")
    out=$(lg --rate "$rate" --connections "$CONNECTIONS" --duration "$DURATION" --warmup "$WARMUP" \
        --timeout "$TIMEOUT" || true)
    python3 - "$out" "$m" "$rate" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); m, rate = sys.argv[2], int(sys.argv[3])
secs = max(r["duration_s"], 1e-9); e = r["errors_by_code"]; l = r["latency_ms"] or {}
shed = e.get("ResourceExhausted", 0)
late = e.get("DeadlineExceeded", 0) + e.get("Cancelled", 0)
other = r["errors"] - shed - late
rest = {k: v for k, v in e.items() if k not in ("ResourceExhausted", "DeadlineExceeded", "Cancelled")}
print(f'{m + "x":5} {rate:9d} {r["answered_per_second"]:9.0f} {shed / secs:9.0f} {late / secs:9.0f} '
      f'{other / secs:9.0f} {l.get("p99", 0):9.2f} {l.get("max", 0):9.2f} {r.get("client_cpu_cores") or 0:7.2f}  {rest}')
if rest and r.get("error_sample"):
    print(f'      first error: {r["error_sample"]}')
PY
done
