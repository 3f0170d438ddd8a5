#!/usr/bin/env bash
# Soak: sluice (release build) on a local redis-server for DURATION (default 30m) at a
# steady open-loop load with key churn: examples/loadgen --rate RATE --churn spreads
# requests over the six algorithms' rules and makes new descriptor values every second
# (the previous second's go idle and must expire); the rule file is rewritten every
# RELOAD (default 60s), so sluice reloads it under load. Every INTERVAL (default 30s) one
# line: sluice's RSS and open file descriptors, Redis used memory and key count, and the
# p99 / answered rate of that interval's requests. At the end, the slope of each (per hour,
# least squares) and its change over the run.
#
#   scripts/soak.sh                               # 30 minutes
#   DURATION=10m nice -n 19 scripts/soak.sh       # what RELIABILITY.md records
#   RATE=2000 INTERVAL=60s DURATION=2h scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-30m}
INTERVAL=${INTERVAL:-30s}
RELOAD=${RELOAD:-60}
RATE=${RATE:-1000}
KEYS=${KEYS:-600}
TIMEOUT=${TIMEOUT:-100ms}
GRPC=127.0.0.1:18101
HTTP=127.0.0.1:18100
ADMIN=127.0.0.1:18102
RPORT=16399

secs() { python3 -c "import sys,re; m=re.fullmatch(r'(\d+)(ms|s|m|h)?', sys.argv[1]); n=int(m[1]); print({'ms':n/1000,'s':n,'m':n*60,'h':n*3600,None:n}[m[2]])" "$1"; }
total=$(secs "$DURATION"); step=$(secs "$INTERVAL")

# PROFILE=debug uses the dev build (quicker to build; slower, so lower RATE with it).
PROFILE=${PROFILE:-release}
if [ "$PROFILE" = debug ]; then
    cargo build --quiet --bin sluice --example loadgen
else
    cargo build --release --quiet --bin sluice --example loadgen
fi
BIN=target/$PROFILE
dir=$(mktemp -d)
log=$(mktemp)
cleanup() {
    [ -n "${RELOADER:-}" ] && kill "$RELOADER" 2>/dev/null || true
    [ -n "${SLUICE:-}" ] && kill "$SLUICE" 2>/dev/null || true
    redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$dir" "$log"
}
trap cleanup EXIT

rules() {
    cat <<YAML
# soak rules, generation $1
domain: soak
descriptors:
  - {key: fixed_window, rate_limit: {unit: second, requests_per_unit: 100, algorithm: fixed_window}}
  - {key: sliding_window, rate_limit: {unit: minute, requests_per_unit: 1000, algorithm: sliding_window, buckets: 6}}
  - {key: sliding_log, rate_limit: {unit: second, requests_per_unit: 20, algorithm: sliding_log}}
  - {key: token_bucket, rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}}
  - {key: leaky_bucket, rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 20}}
  - {key: gcra, rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 20}}
YAML
}
rules 0 > "$dir/soak.yaml"

redis-server --port $RPORT --save "" --appendonly no --daemonize yes --logfile /dev/null
sleep 0.3
SLUICE_ADMIN_ADDR=$ADMIN ./$BIN/sluice serve --config "$dir" --grpc-addr $GRPC \
    --http-addr $HTTP --redis-url "redis://127.0.0.1:$RPORT" --redis-timeout 50ms >"$log" 2>&1 &
SLUICE=$!
for _ in $(seq 100); do
    curl -fs "http://$HTTP/healthcheck" >/dev/null 2>&1 && break
    sleep 0.1
done

# A reload every RELOAD seconds (a new generation comment: new content, same rules).
( g=0; while sleep "$RELOAD"; do g=$((g + 1)); rules "$g" > "$dir/soak.yaml.tmp"; mv "$dir/soak.yaml.tmp" "$dir/soak.yaml"; done ) &
RELOADER=$!

rinfo() { redis-cli -p $RPORT info "$1" | tr -d '\r' | grep -E "^$2:" | cut -d: -f2; }
echo "soak: $DURATION at $RATE req/s open loop, $KEYS values per second churned over 6 algorithms, reload every ${RELOAD}s, sample every $INTERVAL"
printf '%8s %9s %5s %11s %9s %9s %9s %9s\n' t_s rss_mib fds redis_mib keys p99_ms answered errors
samples=$(mktemp)
start=$(date +%s)
while :; do
    now=$(date +%s); elapsed=$((now - start))
    [ "$elapsed" -ge "${total%.*}" ] && break
    out=$(./$BIN/examples/loadgen --json --target "http://$GRPC" --rate "$RATE" \
        --connections 2 --duration "$INTERVAL" --warmup 0s --timeout "$TIMEOUT" --keys "$KEYS" \
        --key fixed_window,sliding_window,sliding_log,token_bucket,leaky_bucket,gcra \
        --domain soak --churn 2>/dev/null || true)
    t=$(( $(date +%s) - start ))
    rss=$(awk '/VmRSS/ {print $2}' /proc/$SLUICE/status)
    fds=$(ls /proc/$SLUICE/fd | wc -l)
    rmem=$(rinfo memory used_memory)
    keys=$(redis-cli -p $RPORT dbsize | tr -d '\r')
    python3 - "$out" "$t" "$rss" "$fds" "$rmem" "$keys" <<'PY' | tee -a "$samples"
import json, sys
r = json.loads(sys.argv[1] or "{}"); t, rss, fds, rmem, keys = map(int, sys.argv[2:7])
l = r.get("latency_ms") or {}
print(f'{t:8d} {rss / 1024:9.1f} {fds:5d} {rmem / 1048576:11.2f} {keys:9d} '
      f'{l.get("p99", 0):9.3f} {r.get("answered_per_second", 0):9.0f} {r.get("errors", 0):9d}')
PY
done
reloads=$(grep -c "config reloaded" "$log" || true)
python3 - "$samples" "$reloads" <<'PY'
import sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
names = ["rss_mib", "fds", "redis_mib", "keys", "p99_ms"]
print(f"\n{len(rows)} samples; reloads logged: {sys.argv[2]}")
if len(rows) >= 3:
    # Skip the first sample (warm-up: connections, allocator, the first keys).
    rows = rows[1:]
    t = [r[0] / 3600 for r in rows]
    mt = sum(t) / len(t)
    for i, name in enumerate(names, start=1):
        y = [r[i] for r in rows]
        my = sum(y) / len(y)
        slope = sum((a - mt) * (b - my) for a, b in zip(t, y)) / max(sum((a - mt) ** 2 for a in t), 1e-12)
        print(f"{name:10} first {y[0]:10.2f}  last {y[-1]:10.2f}  min {min(y):10.2f}  max {max(y):10.2f}  slope {slope:+10.3f}/h")
PY
rm -f "$samples"
