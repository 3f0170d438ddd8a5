#!/usr/bin/env bash
# Overload (RELIABILITY.md, "Overload"): sluice offered 1×, 2× and 4× its measured capacity,
# for the memory store, strict Redis and Redis with --store-failure-mode local. Goodput is
# what matters: answers (OK or OVER_LIMIT) within the caller's deadline, per second.
#
# The load is examples/loadgen --rate: an open loop (requests start at a fixed rate whatever
# the answers), each request carrying TIMEOUT as its grpc-timeout as Envoy sends it, and
# counted as late unless answered within TIMEOUT of when it was *due* (waiting for a
# connection or a stream included, as Envoy's filter timeout counts). Like Envoy with the
# circuit breakers docs/how-to/overload-and-tuning.md pairs with sluice's stream limit, the generator keeps at most
# OUTSTANDING calls outstanding (sent, or waiting for a stream) and fails the excess at once
# ("client overflow": such a call costs the server nothing). Capacity is what a closed loop
# (CONNECTIONS × CONCURRENCY in flight) answers first, per setup.
#
# So that a 2-core machine can show it, the server side is made small and the generator
# given a core of its own: sluice and its redis-server run pinned to SERVER_CPU under a CPU
# quota (QUOTA percent of one CPU, cgroup v2 cpu.max or v1 cpu.cfs_quota_us, whichever the
# machine has; a short PERIOD keeps the quota from adding stalls of its own), the generator
# alone on CLIENT_CPU. The generator's CPU is reported: near a whole core, the run measured
# the client, not the server. Without root (no cgroup) or without taskset the script says so
# and runs unconfined.
#
#   scripts/overload.sh                            # 3 setups × (capacity, 1×, 2×, 4×): ~4 min
#   SETUPS=memory MULTIPLES="2 4" scripts/overload.sh
#   QUOTA=50 PERIOD_US=20000 scripts/overload.sh
#   EXTRA="--grpc-max-concurrent-streams 1024" scripts/overload.sh   # more sluice flags
#   SLUICE=target-base/sluice scripts/overload.sh  # another build (builds nothing then)
#
# Settings (environment):
#   SETUPS       any of "memory redis local" [all three]
#   MULTIPLES    offered load as multiples of capacity [1 2 4]
#   DURATION, WARMUP   per run [10s, 2s]
#   TIMEOUT      the callers' deadline (grpc-timeout) [20ms: Envoy's default filter timeout]
#   CONNECTIONS, CONCURRENCY, KEYS, THREADS   the load generator's [4, 16, 10000, 1]
#   OUTSTANDING  the generator's circuit breaker (loadgen --max-outstanding); 0: none
#                [CONNECTIONS × 16 + 16: max_requests and max_pending_requests of docs/how-to/overload-and-tuning.md's
#                Envoy cluster, for as many connections]
#   QUOTA        percent of one CPU for sluice + redis-server; 0: no quota [25]
#   PERIOD_US    the quota's period in µs [the shortest the kernel allows: its quota 1 ms,
#                so 4000 at 25%]. A longer one stalls the server for the rest of each
#                period (7.5 ms of every 10 at 25%): calls pile up past the generator's
#                circuit breaker in every pause, which measures the quota, not the server
#   PIN          auto: sluice and redis on SERVER_CPU, the generator on CLIENT_CPU when the
#                machine has 2+ CPUs and taskset; 0: no pinning [auto]
#   SERVER_CPU, CLIENT_CPU   [1, 0]
#   WEIGHT       CPU weight of the server's and the generator's cgroups, as a multiple of
#                the default [1]; on a machine others are using, e.g. 20 keeps their work
#                from taking the measured CPUs (niceness would not: the kernel's autogroups
#                confine it to a session)
#   CAPACITY     skip the capacity runs: offer multiples of this rate to every setup (an A/B of
#                two builds at the same offered rates)
#   EXTRA        more `sluice serve` flags
#   SLUICE, LOADGEN   binaries [target/release/sluice, target/release/examples/loadgen, built
#                with `cargo build --release --locked` when neither is given]
#
# Progress goes to stderr; stdout gets the Markdown tables RELIABILITY.md records. Every
# process and cgroup it creates is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

SETUPS=${SETUPS:-memory redis local}
MULTIPLES=${MULTIPLES:-1 2 4}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
TIMEOUT=${TIMEOUT:-20ms}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
THREADS=${THREADS:-1}
OUTSTANDING=${OUTSTANDING:-$((CONNECTIONS * 16 + 16))}
QUOTA=${QUOTA:-25}
EXTRA=${EXTRA:-}

# shellcheck source=lib/prelude.sh
. scripts/lib/prelude.sh
build_sluice_and_loadgen

WORK=$(mktemp -d)
SLUICE_PID= REDIS_PID= CGROUP= CLIENT_CGROUP=
cleanup() {
    for p in $SLUICE_PID $REDIS_PID; do kill "$p" 2>/dev/null || true; done
    for p in $SLUICE_PID $REDIS_PID; do wait "$p" 2>/dev/null || true; done
    for g in $CGROUP $CLIENT_CGROUP; do rmdir "$g" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

SERVER_SIDE="sluice and redis-server" CLIENT_SIDE="the generator"
# shellcheck source=lib/confine.sh
. scripts/lib/confine.sh

# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# One Prometheus sample from sluice's /metrics (0 when absent).
metric() {
    curl -fs "http://$HTTP/metrics" | awk -v s="$1" '$1 == s { print $2; found = 1 } END { if (!found) print 0 }'
}

# shellcheck source=lib/redis.sh
. scripts/lib/redis.sh

start_sluice() {
    GRPC=127.0.0.1:$(free_port)
    HTTP=127.0.0.1:$(free_port)
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    SLUICE_ADMIN_ADDR=off "${server_cmd[@]}" "$SLUICE" serve --config examples/loadgen-config \
        --grpc-addr "$GRPC" --http-addr "$HTTP" "$@" $EXTRA >"$WORK/sluice.log" 2>&1 &
    SLUICE_PID=$!
    confine "$SLUICE_PID"
    for _ in $(seq 200); do
        curl -fs "http://$HTTP/healthcheck" >/dev/null 2>&1 && return
        sleep 0.05
    done
    log "sluice did not become healthy:"
    cat "$WORK/sluice.log" >&2
    exit 1
}

stop_all() {
    for p in $SLUICE_PID $REDIS_PID; do kill "$p" 2>/dev/null || true; done
    for p in $SLUICE_PID $REDIS_PID; do wait "$p" 2>/dev/null || true; done
    SLUICE_PID= REDIS_PID=
}

lg() {
    "${client_cmd[@]}" "$LOADGEN" --json --target "http://$GRPC" --keys "$KEYS" \
        --threads "$THREADS" --connections "$CONNECTIONS" --duration "$DURATION" \
        --warmup "$WARMUP" "$@" 2>"$WORK/loadgen.err" || true
}

ROWS=$WORK/rows
: >"$ROWS"
for setup in $SETUPS; do
    case $setup in
        memory) args=() ;;
        redis) start_redis "${server_cmd[@]}"; confine "$REDIS_PID"; args=(--redis-url "redis://127.0.0.1:$RPORT") ;;
        local) start_redis "${server_cmd[@]}"; confine "$REDIS_PID"; args=(--redis-url "redis://127.0.0.1:$RPORT" --store-failure-mode local) ;;
        *) log "unknown setup '$setup' (memory, redis, local)"; exit 1 ;;
    esac
    start_sluice "${args[@]}"
    if [ -n "${CAPACITY:-}" ]; then
        capacity=$CAPACITY out='{}'
    else
        log "$setup: measuring capacity (closed loop, $CONNECTIONS x $CONCURRENCY)"
        out=$(lg --concurrency "$CONCURRENCY" --timeout 5s)
        capacity=$(python3 -c 'import json,sys; print(int(json.loads(sys.argv[1] or "{}").get("answered_per_second") or 0))' "$out")
    fi
    if [ "$capacity" -le 0 ]; then
        log "$setup: no capacity measured"; cat "$WORK/loadgen.err" >&2; exit 1
    fi
    echo "capacity	$setup	$capacity	$out" >>"$ROWS"
    for m in $MULTIPLES; do
        rate=$(python3 -c "print(max(1, round($capacity * $m)))")
        log "$setup: ${m}x = $rate req/s offered"
        before=("$(cpu_ticks "$SLUICE_PID")" "$(cpu_ticks "${REDIS_PID:-0}")"
            "$(metric 'sluice_store_connections_dropped_total{store="redis"}')"
            "$(metric 'sluice_local_decisions_total{reason="overload"}')")
        breaker=()
        [ "$OUTSTANDING" = 0 ] || breaker=(--max-outstanding "$OUTSTANDING")
        out=$(lg --rate "$rate" --timeout "$TIMEOUT" "${breaker[@]}")
        after=("$(cpu_ticks "$SLUICE_PID")" "$(cpu_ticks "${REDIS_PID:-0}")"
            "$(metric 'sluice_store_connections_dropped_total{store="redis"}')"
            "$(metric 'sluice_local_decisions_total{reason="overload"}')")
        echo "run	$setup	$capacity	$m	$rate	${before[*]}	${after[*]}	$out" >>"$ROWS"
    done
    stop_all
done
[ -z "${ROWS_OUT:-}" ] || cp "$ROWS" "$ROWS_OUT"

python3 - "$ROWS" "$DURATION" "$TIMEOUT" "$pinning" "$quota_desc" "$CONNECTIONS" "$CONCURRENCY" "$EXTRA" "$OUTSTANDING" <<'PY'
import json, os, platform, sys
rows, duration, timeout, pinning, quota, conns, conc, extra, outstanding = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
load = os.getloadavg()[0]
print(f"Machine: {os.cpu_count()} CPUs ({cpu}), load average {load:.1f} at the end; {pinning}; {quota}. Load: examples/loadgen, "
      f"{conns} connections, open loop, grpc-timeout {timeout}, "
      + (f"at most {outstanding} calls outstanding, " if outstanding != "0" else "")
      + f"{duration} per run"
      + (f"; sluice flags: {extra}" if extra else "") + ".")
print()
caps, runs = {}, []
for line in open(rows):
    f = line.rstrip("\n").split("\t")
    if f[0] == "capacity":
        caps[f[1]] = (int(f[2]), json.loads(f[3]))
    else:
        before, after = list(map(float, f[5].split())), list(map(float, f[6].split()))
        runs.append((f[1], int(f[2]), f[3], int(f[4]), before, after, json.loads(f[7] or "{}")))
HZ = os.sysconf("SC_CLK_TCK")
def cores(ticks, secs): return ticks / HZ / secs if secs > 0 else 0.0
print("| setup | load | offered/s | goodput/s | goodput ÷ capacity | client overflow/s | refused/s "
      "| decided locally (overload)/s | late/s | other errors/s | p99 ms (answered) | breaker drops "
      "| sluice CPU | redis CPU | generator CPU |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for setup, (cap, r) in caps.items():
    print(f"| {setup} | capacity ({conns} × {conc}, closed loop) | – | {cap} | 1.00 | – | – | – | – | – | "
          f"{(r.get('latency_ms') or {}).get('p99', 0):.2f} | – | – | – | {r.get('client_cpu_cores') or 0:.2f} |")
summary = {}
for setup, cap, m, rate, before, after, r in runs:
    secs = max(r.get("duration_s") or 0, 1e-9)
    e = r.get("errors_by_code") or {}
    refused = e.get("ResourceExhausted", 0)
    late = e.get("DeadlineExceeded", 0) + e.get("Cancelled", 0)
    other = (r.get("errors") or 0) - refused - late
    good = r.get("answered_per_second") or 0
    p99 = (r.get("latency_ms") or {}).get("p99", 0)
    drops = int(after[2] - before[2])
    # Descriptors the fallback decided because the store had no time for them (one per
    # call: the generator sends one descriptor); 0 without --store-failure-mode local.
    local = (after[3] - before[3]) if len(after) > 3 else 0
    s_cpu = cores(after[0] - before[0], secs)
    r_cpu = cores(after[1] - before[1], secs) if setup != "memory" else 0
    gen = r.get("client_cpu_cores") or 0
    overflow = r.get("client_overflow") or 0
    print(f"| {setup} | {m}× | {rate} | {good:.0f} | {good / cap:.2f} | {overflow / secs:.0f} | {refused / secs:.0f} | {local / secs:.0f} | "
          f"{late / secs:.0f} | {other / secs:.0f} | {p99:.2f} | {drops} | {s_cpu:.2f} | "
          f"{r_cpu:.2f} | {gen:.2f} |")
    summary.setdefault(setup, {})[m] = (good / cap, p99, drops, gen)
multiples = sorted({m for s in summary.values() for m in s}, key=float)
print()
print("| setup | capacity/s | " + " | ".join(f"goodput at {m}×" for m in multiples)
      + " | p99 ms at " + "/".join(f"{m}×" for m in multiples)
      + " | breaker drops | generator CPU (max) |")
print("|---|---|" + "---|" * len(multiples) + "---|---|---|")
for setup, by_m in summary.items():
    cells = [f"{by_m[m][0]:.2f}" if m in by_m else "–" for m in multiples]
    p99s = "/".join(f"{by_m[m][1]:.1f}" if m in by_m else "–" for m in multiples)
    drops = sum(v[2] for v in by_m.values())
    gen = max(v[3] for v in by_m.values())
    print(f"| {setup} | {caps[setup][0]} | " + " | ".join(cells) + f" | {p99s} | {drops} | {gen:.2f} |")
PY
