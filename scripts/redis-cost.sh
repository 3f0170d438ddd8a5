#!/usr/bin/env bash
# Redis cost per check, measured with counts that do not depend on how loaded the machine is
# (BENCHMARKS.md, "Redis cost per decision"):
#   - script calls and Redis command calls per request (INFO commandstats);
#   - instructions Redis executes per check (valgrind --tool=callgrind on redis-server, zeroed
#     after the warm-up and dumped after the measured requests: parsing, networking, the
#     script, everything), with CALLGRIND=1;
#   - as indicative figures: Redis CPU per check (INFO cpu) and usec per check inside
#     commands (INFO commandstats), both wall-clock-ish on a shared machine.
#
#   scripts/redis-cost.sh KEY DESCRIPTORS [REQUESTS]
#   CALLGRIND=1 scripts/redis-cost.sh fixed_window 4 2000
#   SLUICE=/path/to/other/sluice scripts/redis-cost.sh sliding_log 1
#   EXTRA="--local-cache-size-bytes 1048576" scripts/redis-cost.sh limited 1
#
# KEY is a rule of examples/loadgen-config (one per algorithm, `key` = fixed_window, and
# `limited`: 10/minute, so almost every request is over the limit). Builds nothing: set
# SLUICE and LOADGEN, or build target/release first (`cargo build --release --bin sluice
# --example loadgen`).
set -euo pipefail
cd "$(dirname "$0")/.."

KEY=${1:?key}
D=${2:?descriptors}
N=${3:-20000}
SLUICE=${SLUICE:-target/release/sluice}
LOADGEN=${LOADGEN:-target/release/examples/loadgen}
RPORT=${RPORT:-16399}
GRPC=127.0.0.1:${GRPC_PORT:-18091}
HTTP=127.0.0.1:${HTTP_PORT:-18090}
KEYS=${KEYS:-10000}
OUT=$(mktemp -d)

cleanup() {
    [ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null || true
    redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
    [ -n "${RPID:-}" ] && wait "$RPID" 2>/dev/null || true
    rm -rf "$OUT"
}
trap cleanup EXIT

if [ -n "${CALLGRIND:-}" ]; then
    valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p" \
        redis-server --port "$RPORT" --save "" --appendonly no >/dev/null 2>&1 &
    TIMEOUT=2s
else
    redis-server --port "$RPORT" --save "" --appendonly no >/dev/null 2>&1 &
    TIMEOUT=${TIMEOUT:-10ms}
fi
RPID=$!
for _ in $(seq 200); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

# shellcheck disable=SC2086
"$SLUICE" serve --config examples/loadgen-config --grpc-addr "$GRPC" --http-addr "$HTTP" \
    --redis-url "redis://127.0.0.1:$RPORT" --redis-timeout "$TIMEOUT" ${EXTRA:-} \
    >"$OUT/sluice.log" 2>&1 &
SPID=$!
for _ in $(seq 200); do curl -fs "http://$HTTP/healthcheck" >/dev/null 2>&1 && break; sleep 0.1; done

load() {
    "$LOADGEN" --json --target "http://$GRPC" --connections "${CONNECTIONS:-4}" \
        --concurrency "${CONCURRENCY:-16}" --requests "$1" --warmup 0s --keys "$KEYS" \
        --key "$KEY" --descriptors "$D" 2>/dev/null
}
load $((N / 4 + 100)) >/dev/null

info() { redis-cli -p "$RPORT" info "$1" | tr -d '\r'; }
redis-cli -p "$RPORT" config resetstat >/dev/null
cpu0=$(info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}')
[ -n "${CALLGRIND:-}" ] && callgrind_control -z "$RPID" >/dev/null 2>&1
res=$(load "$N")
[ -n "${CALLGRIND:-}" ] && callgrind_control -d "$RPID" >/dev/null 2>&1
cpu1=$(info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}')
info commandstats >"$OUT/commandstats"
instr=0
if [ -n "${CALLGRIND:-}" ]; then
    sleep 0.5
    # The dump made by callgrind_control -d: its totals are the measured requests only.
    f=$(ls -t "$OUT"/cg.* | head -1)
    instr=$(awk '/^totals:/ {print $2}' "$f")
fi
python3 - "$res" "$KEY" "$D" "$cpu0" "$cpu1" "$instr" "$OUT/commandstats" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); key, d = sys.argv[2], int(sys.argv[3])
cpu0, cpu1, instr = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6] or 0)
stats = {}
for line in open(sys.argv[7]):
    if line.startswith("cmdstat_"):
        name, rest = line[8:].strip().split(":", 1)
        stats[name] = dict(kv.split("=") for kv in rest.split(","))
n = max(r["requests"], 1); checks = n * d
calls = sum(int(s["calls"]) for s in stats.values())
usec = sum(int(s["usec"]) for s in stats.values())
scripts = sum(int(stats.get(c, {}).get("calls", 0)) for c in ("evalsha", "eval", "fcall"))
line = (f"{key:14} d={d:<2} requests {n:6}  errors {r['errors']:4}  "
        f"script calls/req {scripts / n:5.2f}  redis calls/req {calls / n:5.2f}  "
        f"usec/check: cpu {(cpu1 - cpu0) / checks * 1e6:5.2f} in-command {usec / checks:5.2f}")
if instr:
    line += f"  instr/check {instr / checks / 1000:6.1f}k"
print(line)
PY
