#!/usr/bin/env bash
# Server CPU per decision, side by side in one run (BENCHMARKS.md, "CPU per decision"):
# sluice, the gRPC floor (examples/floor.rs: a default tonic server answering a fixed
# RateLimitResponse) and Kuadrant/limitador's limitador-server, interleaved round by round,
# under the same load generator (examples/loadgen/main.rs), on the memory store and on one
# redis-server this script starts.
#
# Each server run: start it (pinned to SERVER_CPU), warm up, then
#   - loaded: CONNECTIONS x CONCURRENCY requests in flight (4 x 16), closed loop, for DURATION:
#     answered calls per second, p50/p99, errors (by gRPC code); the server's CPU over the window from
#     /proc/PID/stat (utime + stime, every thread) divided by the answered calls (OK and
#     OVER_LIMIT answers); Redis's CPU per answered call apart (INFO cpu, user + sys);
#   - unloaded: 1 connection x 1 request in flight for UNLOADED: its p50.
# Then the next server. Every round runs every server once per store, in an order rotated
# round by round, so a machine that drifts (other builds, a noisy neighbour) moves all of
# them alike. The tables give every run, the medians per server, and the ratios of the
# medians of per-round ratios (sluice / floor, sluice / limitador) for CPU per decision, p50
# and p99.
#
#   scripts/cpu-compare.sh                            # 2 rounds, memory and redis, ~3 min
#   LIMITADOR=/path/to/limitador-server scripts/cpu-compare.sh
#   SLUICES="before=/tmp/sluice-a after=target/release/sluice" STORES=memory ROUNDS=3 \
#       scripts/cpu-compare.sh                        # an interleaved A/B of two builds
#
# limitador is not built here. To build it outside the repository (Rust toolchain, protoc):
#
#   git clone https://github.com/Kuadrant/limitador /tmp/limitador   # main; measured: 2981b2b
#   cd /tmp/limitador && cargo build --release --bin limitador-server
#   LIMITADOR=/tmp/limitador/target/release/limitador-server scripts/cpu-compare.sh
#
# It runs with scripts/lib/limitador-limits.yaml: namespace `bench` (the load generator's
# domain), 10^9 per second, one counter per value of the descriptor's `key` entry, as
# sluice's `bench/key` rule in examples/loadgen-config; `memory` or `redis URL` storage.
# Without LIMITADOR its rows are left out (said on stderr and under the tables).
#
# Settings (environment):
#   ROUNDS       interleaved rounds [2]
#   STORES       any of "memory redis" [memory redis]; the floor has no store and runs with
#                the memory group
#   DURATION     loaded window per run [8s]; N=requests instead (tiny runs: N/4 to warm up
#                and N/4, at least 20, unloaded)
#   WARMUP       loaded warm-up before the window [2s]
#   UNLOADED     the 1 x 1 run [3s]
#   CONNECTIONS, CONCURRENCY, KEYS, DESCRIPTORS  the loaded run [4, 16, 10000, 1]
#   SLUICE, FLOOR, LOADGEN  binaries [target/release/sluice, target/release/examples/floor,
#                target/release/examples/loadgen]; builds nothing:
#                `cargo build --release --bin sluice --example floor --example loadgen`
#   SLUICES      several sluice builds, "label=path ...", measured in the same rounds (rows
#                read sluice@label) [SLUICE alone]
#   LIMITADOR    limitador-server's path [unset: not run]
#   EXTRA        more sluice serve flags
#   PIN          auto: with 2+ CPUs and taskset, the server alone on SERVER_CPU [the last
#                CPU], the load generator on CLIENT_CPUS [the others], redis-server on
#                REDIS_CPUS [as the load generator]; 0: no pinning [auto]
#   FORMAT       md or text (tab-separated) [md]
#
# Progress goes to stderr, the tables to stdout. Every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-2}
STORES=${STORES:-memory redis}
DURATION=${DURATION:-8s}
N=${N:-}
WARMUP=${WARMUP:-2s}
UNLOADED=${UNLOADED:-3s}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
DESCRIPTORS=${DESCRIPTORS:-1}
SLUICE=${SLUICE:-target/release/sluice}
FLOOR=${FLOOR:-target/release/examples/floor}
LOADGEN=${LOADGEN:-target/release/examples/loadgen}
LIMITADOR=${LIMITADOR:-}
FORMAT=${FORMAT:-md}

# shellcheck source=lib/prelude.sh
. scripts/lib/prelude.sh
need_store_tools "$STORES"
positive ROUNDS
case "$FORMAT" in md | text) ;; *) die "FORMAT must be md or text (got '$FORMAT')" ;; esac
known_stores
BUILDS=${SLUICES:-=$SLUICE}
for b in $BUILDS; do
    case "$b" in *=*) ;; *) die "SLUICES: '$b' is not label=path" ;; esac
    [ -x "${b#*=}" ] || die "no sluice binary at ${b#*=} (cargo build --release --bin sluice --example floor --example loadgen)"
done
[ -x "$FLOOR" ] || die "no floor server at $FLOOR (cargo build --release --example floor)"
[ -x "$LOADGEN" ] || die "no load generator at $LOADGEN (cargo build --release --example loadgen)"
if [ -n "$LIMITADOR" ]; then
    [ -x "$LIMITADOR" ] || die "LIMITADOR: no executable at $LIMITADOR"
else
    log "LIMITADOR unset: limitador is not measured (see this script's header to build it)"
fi

PIN=${PIN:-auto}
SERVER_PIN=() CLIENT_PIN=() REDIS_PIN=() PINNED="not pinned"
case "$PIN" in
auto)
    CPUS=$(nproc)
    if [ "$CPUS" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
        SERVER_CPU=${SERVER_CPU:-$((CPUS - 1))}
        CLIENT_CPUS=${CLIENT_CPUS:-0-$((CPUS - 2))}
        REDIS_CPUS=${REDIS_CPUS:-$CLIENT_CPUS}
        SERVER_PIN=(taskset -c "$SERVER_CPU")
        CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
        REDIS_PIN=(taskset -c "$REDIS_CPUS")
        PINNED="server on CPU $SERVER_CPU, load generator on CPU $CLIENT_CPUS, redis-server on CPU $REDIS_CPUS"
    fi
    ;;
0) ;;
*) die "PIN must be auto or 0 (got '$PIN')" ;;
esac

OUT=$(mktemp -d)
SPID="" RPID="" RPORT="" CHILD=""
stop_server() {
    if [ -n "$SPID" ]; then
        kill "$SPID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
        SPID=""
    fi
}
stop_redis() {
    if [ -n "$RPID" ]; then
        redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || kill "$RPID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$RPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$RPID" 2>/dev/null || true
        wait "$RPID" 2>/dev/null || true
        RPID=""
    fi
}
cleanup() {
    [ -n "$CHILD" ] && kill "$CHILD" 2>/dev/null || true
    stop_server
    stop_redis
    rm -rf "$OUT"
}
on_exit cleanup

listening() { python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' "$1" 2>/dev/null; }

start_redis() {
    for _ in 1 2 3 4 5; do
        RPORT=$(free_port)
        "${REDIS_PIN[@]}" redis-server --bind 127.0.0.1 --port "$RPORT" --save "" --appendonly no \
            --dir "$OUT" >"$OUT/redis.log" 2>&1 &
        RPID=$!
        for _ in $(seq 100); do
            redis-cli -p "$RPORT" ping >/dev/null 2>&1 && return 0
            kill -0 "$RPID" 2>/dev/null || break
            sleep 0.1
        done
        stop_redis
    done
    die "redis-server does not start"
}
redis_cpu() {
    if [ -z "$RPID" ]; then
        echo 0
        return
    fi
    redis-cli -p "$RPORT" info cpu | tr -d '\r' |
        awk -F: '/^used_cpu_user:/ {u = $2} /^used_cpu_sys:/ {s = $2} END {printf "%.6f", u + s}'
}

# start_server KIND PATH STORE: PORT set, SPID running and answering.
start_server() {
    local kind=$1 bin=$2 store=$3 http ready=""
    PORT=$(free_port)
    http=$(free_port)
    case "$kind" in
    sluice)
        local redis=()
        [ "$store" = redis ] && redis=(--redis-url "redis://127.0.0.1:$RPORT")
        # shellcheck disable=SC2086
        "${SERVER_PIN[@]}" "$bin" serve --config examples/loadgen-config \
            --grpc-addr "127.0.0.1:$PORT" --http-addr "127.0.0.1:$http" --admin-addr off \
            "${redis[@]}" ${EXTRA:-} >"$OUT/server.log" 2>&1 &
        ;;
    floor)
        "${SERVER_PIN[@]}" "$bin" "127.0.0.1:$PORT" >"$OUT/server.log" 2>&1 &
        ;;
    limitador)
        local storage=(memory)
        [ "$store" = redis ] && storage=(redis "redis://127.0.0.1:$RPORT")
        "${SERVER_PIN[@]}" "$bin" -b 127.0.0.1 -p "$PORT" -B 127.0.0.1 -P "$http" \
            scripts/lib/limitador-limits.yaml "${storage[@]}" >"$OUT/server.log" 2>&1 &
        ;;
    esac
    SPID=$!
    for _ in $(seq 600); do
        if [ "$kind" = sluice ]; then
            # Healthy: config loaded and, with Redis, its connections up.
            curl -fs "http://127.0.0.1:$http/healthcheck" >/dev/null 2>&1 && ready=1
        else
            listening "$PORT" && ready=1
        fi
        [ -n "$ready" ] && return 0
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    tail -20 "$OUT/server.log" >&2
    die "$kind ($bin) does not start"
}

# A measured child runs in the background so that a signal reaches the traps at once.
loadgen() {
    local file=$1 rc=0
    shift
    "${CLIENT_PIN[@]}" "$LOADGEN" --json --target "http://127.0.0.1:$PORT" --warmup 0s \
        --keys "$KEYS" --descriptors "$DESCRIPTORS" "$@" >"$file" 2>"$file.err" &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=""
    if [ "$rc" != 0 ]; then
        cat "$file.err" >&2
        die "the load generator failed against $NAME ($STORE)"
    fi
}
ticks() { awk '{print $14 + $15}' "/proc/$SPID/stat"; }
HZ=$(getconf CLK_TCK)

measure() {
    local round=$1 name=$2 kind=$3 bin=$4 store=$5 t0 t1 r0 r1 loaded=() warm=() unloaded=()
    NAME=$name STORE=$store
    log "round $round: $name, $store"
    [ -n "$RPID" ] && redis-cli -p "$RPORT" flushall >/dev/null
    start_server "$kind" "$bin" "$store"
    if [ -n "$N" ]; then
        loaded=(--requests "$N")
        warm=(--requests $((N / 4 + 1)))
        unloaded=(--requests $((N / 4 > 20 ? N / 4 : 20)))
    else
        loaded=(--duration "$DURATION")
        warm=(--duration "$WARMUP")
        unloaded=(--duration "$UNLOADED")
    fi
    local fan=(--connections "$CONNECTIONS" --concurrency "$CONCURRENCY")
    loadgen "$OUT/warm" "${fan[@]}" "${warm[@]}"
    r0=$(redis_cpu)
    t0=$(ticks)
    loadgen "$OUT/loaded" "${fan[@]}" "${loaded[@]}"
    t1=$(ticks)
    r1=$(redis_cpu)
    loadgen "$OUT/unloaded" --connections 1 --concurrency 1 "${unloaded[@]}"
    stop_server
    python3 - "$OUT/loaded" "$OUT/unloaded" "$round" "$name" "$store" "$t0" "$t1" "$HZ" \
        "$r0" "$r1" >>"$OUT/records.jsonl" <<'PY'
import json, sys
loaded, unloaded = (json.load(open(p)) for p in sys.argv[1:3])
rnd, name, store = int(sys.argv[3]), sys.argv[4], sys.argv[5]
t0, t1, hz = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
r0, r1 = float(sys.argv[9]), float(sys.argv[10])
answered = loaded["ok"] + loaded["over_limit"] + loaded["unknown_code"]
lat, ulat = loaded["latency_ms"] or {}, unloaded["latency_ms"] or {}
n = max(answered, 1)
print(json.dumps({
    "round": rnd, "name": name, "store": store,
    "rps": answered / max(loaded["duration_s"], 1e-9),
    "cpu_us": (t1 - t0) / hz / n * 1e6,
    "redis_us": (r1 - r0) / n * 1e6 if store == "redis" else None,
    "p50": lat.get("p50"), "p99": lat.get("p99"), "unloaded_p50": ulat.get("p50"),
    "errors": loaded["errors"] + unloaded["errors"], "answered": answered,
    "codes": {c: loaded["errors_by_code"].get(c, 0) + unloaded["errors_by_code"].get(c, 0)
              for c in set(loaded["errors_by_code"]) | set(unloaded["errors_by_code"])},
}))
PY
}

# The servers of a store group: every sluice build, the floor (memory group), limitador.
servers() {
    local store=$1 b
    for b in $BUILDS; do
        local label=${b%%=*}
        echo "sluice${label:+@$label} sluice ${b#*=}"
    done
    [ "$store" = memory ] && echo "floor floor $FLOOR"
    [ -n "$LIMITADOR" ] && echo "limitador limitador $LIMITADOR"
    return 0
}

log "$PINNED"
STARTED=$(date +%s)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
    for store in $STORES; do
        [ "$store" = redis ] && start_redis
        mapfile -t list < <(servers "$store")
        # Rotate the order by the round, so no server always runs first or last.
        count=${#list[@]}
        for i in $(seq 0 $((count - 1))); do
            read -r name kind bin <<<"${list[$(((i + round - 1) % count))]}"
            measure "$round" "$name" "$kind" "$bin" "$store"
        done
        stop_redis
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT/records.jsonl" "$FORMAT" <<PY
import json, statistics, sys
from collections import defaultdict
records = [json.loads(l) for l in open(sys.argv[1])]
md = sys.argv[2] == "md"
def table(header, rows):
    if md:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        print("\t".join(header))
        for r in rows:
            print("\t".join(r))
    print()
def f(x, d=1):
    return "–" if x is None else f"{x:.{d}f}"
print("Machine: $(nproc) CPUs, $PINNED; load average $LOAD_BEFORE before, $LOAD_AFTER after; "
      f"$ROUNDS round(s), $((($(date +%s) - STARTED))) s. Load: $CONNECTIONS x $CONCURRENCY in "
      "flight, $KEYS keys, $DESCRIPTORS descriptor(s); unloaded: 1 x 1.")
print()
cols = ["server", "store", "round", "answered/s", "server CPU µs/decision",
        "Redis CPU µs/decision", "p50 ms", "p99 ms", "unloaded p50 ms", "errors"]
def row(r, rnd):
    return [r["name"], r["store"], rnd, f(r["rps"], 0), f(r["cpu_us"]), f(r["redis_us"]),
            f(r["p50"], 3), f(r["p99"], 3), f(r["unloaded_p50"], 3), errors(r)]
def errors(r):
    codes = ", ".join(f"{c} {n}" for c, n in sorted(r.get("codes", {}).items()) if n)
    return f'{r["errors"]} ({codes})' if codes else str(r["errors"])
table(cols, [row(r, str(r["round"])) for r in records])

groups = defaultdict(list)
for r in records:
    groups[(r["name"], r["store"])].append(r)
def med(rs, k):
    v = [r[k] for r in rs if r[k] is not None]
    return statistics.median(v) if v else None
medians = []
for (name, store), rs in groups.items():
    m = {k: med(rs, k) for k in ["rps", "cpu_us", "redis_us", "p50", "p99", "unloaded_p50"]}
    codes = defaultdict(int)
    for r in rs:
        for c, n in r["codes"].items():
            codes[c] += n
    m.update(name=name, store=store, errors=sum(r["errors"] for r in rs), codes=codes)
    medians.append(m)
print("Medians over the rounds:")
print()
table(cols, [row(m, "median") for m in medians])

# Ratios: per round, sluice's figure over the other's in the same store group (the floor's
# from the memory group: it has no store), then the median over the rounds.
by = {(r["name"], r["store"], r["round"]): r for r in records}
rows = []
for name in sorted({r["name"] for r in records if r["name"].startswith("sluice")}):
    for other, label in [("floor", "floor"), ("limitador", "limitador")]:
        for store in ["memory", "redis"]:
            ostore = "memory" if other == "floor" else store
            out = []
            for k in ["cpu_us", "p50", "p99", "unloaded_p50"]:
                ratios = []
                for rnd in sorted({r["round"] for r in records}):
                    a, b = by.get((name, store, rnd)), by.get((other, ostore, rnd))
                    if a and b and a[k] and b[k]:
                        ratios.append(a[k] / b[k])
                out.append(f"{statistics.median(ratios):.2f}×" if ratios else "–")
            if out[0] == "–":
                continue
            rows.append([f"{name} / {label}", store] + out)
if rows:
    print("Ratios (median of per-round ratios):")
    print()
    table(["ratio", "store", "CPU per decision", "p50", "p99", "unloaded p50"], rows)
if not any(r["name"] == "limitador" for r in records):
    print("limitador: not measured (LIMITADOR unset).")
PY
