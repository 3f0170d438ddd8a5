#!/usr/bin/env bash
# Capacity of one Redis core, side by side in one run (BENCHMARKS.md, "Capacity: checks per
# second per Redis core"). Against ONE redis-server this script starts, it measures:
#
#   - sluice, for each algorithm (a rule of examples/loadgen-config, limits never reached)
#     at each number of descriptors per request, under the load generator (4 connections x
#     16 requests in flight, 10 000 random descriptor values): throughput (requests and
#     checks per second), p50/p99 latency, errors (loadgen --json); sluice CPU per request
#     (/proc/PID/stat utime+stime); script calls and Redis commands per request (INFO
#     commandstats; commands a script runs count too); Redis CPU per check (INFO cpu);
#   - the reference's command sequence, INCRBY + EXPIRE per check, pipelined x16 by
#     redis-benchmark (envoyproxy/ratelimit's fixed window);
#   - a minimal INCRBY + PEXPIRE Lua script (SCRIPT LOAD, then EVALSHA pipelined x16 by
#     redis-benchmark), the floor for any scripted check;
#   - the reference's pair as its own client sends it ("request"): one pipeline of D x
#     (INCRBY + EXPIRE) per request (envoyproxy/ratelimit's single-node client flushes each
#     request's pipeline at once, src/redis/fixed_cache_impl.go), as many in flight as the
#     load generator keeps (redis-benchmark -c CONNECTIONS*CONCURRENCY -P 2D, one run per
#     command); what Redis pays per check for their fleet at a realistic batch size, where
#     the x16 pair is its best case;
#
# and, when valgrind is installed (CALLGRIND=auto, the default) or with CALLGRIND=1, a
# callgrind pass with redis-server under valgrind --tool=callgrind:
# instructions Redis executes per check (zeroed after each warm-up, dumped after the measured
# load: sockets, parsing, scripts, everything). Instructions do not depend on how loaded the
# machine is; INFO cpu and throughput do. Microseconds from instructions use IPUS (default
# 11 700 instructions per µs, the conversion BENCHMARKS.md states), and a Redis core's
# capacity is 1e6 / (µs per check).
#
# The plain pass runs REPEAT times (default 3: a fresh Redis and sluice each time); every
# figure it prints is the median over the repeats. Last comes the table the targets are set
# in (BENCHMARKS.md, "Redis cost per decision"): per algorithm and D, Redis CPU per check divided by the reference pair's
# measured in the same repeat (median of those ratios), by INFO cpu and, from the callgrind
# pass, by instructions, next to the same ratio for the minimal script. The callgrind pass
# runs once (instruction counts do not drift with the machine's load; it takes ~2 min more).
#
#   scripts/redis-capacity.sh                    # every algorithm at D=1 and 4, 3 repeats,
#                                                # then callgrind: ~9 min
#   CALLGRIND=0 REPEAT=1 scripts/redis-capacity.sh   # one plain pass only, ~2 min
#   CALLGRIND=only CG_N=500 scripts/redis-capacity.sh
#   FORMAT=md scripts/redis-capacity.sh          # markdown tables, ready for BENCHMARKS.md
#   ALGOS=gcra DESCRIPTORS="1 16" BASELINES=none DURATION=3s scripts/redis-capacity.sh
#
# Settings (environment):
#   ALGOS        rules (descriptor keys) of examples/loadgen-config [the six algorithms]
#   DESCRIPTORS  descriptors per request, one run each [1 4]
#   BASELINES    any of "reference script request", or "none" [reference script request]
#   DURATION     measured time per sluice run [8s]; N=requests instead of a duration
#   WARMUP       warm-up per sluice run [1s] (with N: N/4+100 requests)
#   BENCH_N      redis-benchmark operations per baseline command [200000]
#   REPEAT       plain passes, medians over them [3]
#   CALLGRIND    auto: as 1 when valgrind is installed, else as 0 [auto]; empty or 0: plain
#                pass only; 1: plain passes then callgrind pass; only: callgrind
#   CG_N, CG_BENCH_N  requests per sluice run and operations per baseline command under
#                callgrind [1000, 10000]
#   CG_KEYS      keys under callgrind [as many as keep the plain pass's hits per key per
#                second; KEYS without a plain pass]
#   CONNECTIONS, CONCURRENCY, KEYS  the load [4, 16, 10000]
#   TIMEOUT      sluice's --redis-timeout in the plain pass [10ms] (callgrind pass: 30s)
#   EXTRA        more sluice serve flags (e.g. "--local-cache-size-bytes 1048576")
#   SLUICE, LOADGEN  binaries [target/release/sluice, target/release/examples/loadgen];
#                builds nothing: `nice cargo build --release --bin sluice --example loadgen`
#   SLUICES      several sluice builds measured in the same passes against the same Redis and
#                baselines, "label=path ...": rows read "algorithm@label" (a before/after
#                that does not depend on how the VM drifted between two runs) [SLUICE alone]
#   PIN          auto: with 2+ CPUs and taskset, redis-server runs alone on the last CPU and
#                every client (sluice, the load generator, redis-benchmark) on the others; 0:
#                no pinning [auto]. Redis in production has its core to itself; on a small VM
#                sharing it with the clients makes INFO cpu measure their cache and scheduler
#                contention, which falls unevenly on a light client (redis-benchmark) and a
#                heavy one (sluice + the load generator). Both sides are pinned alike.
#   FORMAT       text or md [text]; IPUS [11700]; NICE: niceness of the whole run [10]
#
# Progress goes to stderr, the tables to stdout. Every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ALGOS=${ALGOS:-fixed_window sliding_window sliding_log token_bucket leaky_bucket gcra}
DESCRIPTORS=${DESCRIPTORS:-1 4}
BASELINES=${BASELINES:-reference script request}
CALLGRIND=${CALLGRIND-auto}
REPEAT=${REPEAT:-3}
DURATION=${DURATION:-8s}
N=${N:-}
WARMUP=${WARMUP:-1s}
BENCH_N=${BENCH_N:-200000}
CG_N=${CG_N:-1000}
CG_BENCH_N=${CG_BENCH_N:-10000}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
TIMEOUT=${TIMEOUT:-10ms}
SLUICE=${SLUICE:-target/release/sluice}
LOADGEN=${LOADGEN:-target/release/examples/loadgen}
FORMAT=${FORMAT:-text}
IPUS=${IPUS:-11700}
[ "$BASELINES" = none ] && BASELINES=""

die() {
    echo "redis-capacity: $*" >&2
    exit 1
}
say() { echo "redis-capacity: $*" >&2; }

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }
need redis-server "apt-get install -y redis-server"
need redis-cli "apt-get install -y redis-tools"
need python3 "apt-get install -y python3"
need curl "apt-get install -y curl"
[ -n "$BASELINES" ] && need redis-benchmark "apt-get install -y redis-tools"
case "$REPEAT" in '' | *[!0-9]* | 0) die "REPEAT must be a positive integer (got '$REPEAT')" ;; esac
if [ "$CALLGRIND" = auto ]; then
    if command -v valgrind >/dev/null 2>&1 && command -v callgrind_control >/dev/null 2>&1; then
        CALLGRIND=1
    else
        say "valgrind not found: no callgrind pass (apt-get install -y valgrind)"
        CALLGRIND=0
    fi
fi
PLAINS=$(for r in $(seq "$REPEAT"); do printf 'plain:%s ' "$r"; done)
case "$CALLGRIND" in
"" | 0) PASSES=$PLAINS ;;
1) PASSES="$PLAINS callgrind:1" ;;
only) PASSES=callgrind:1 ;;
*) die "CALLGRIND must be empty, 1 or only (got '$CALLGRIND')" ;;
esac
case "$PASSES" in *callgrind*)
    need valgrind "apt-get install -y valgrind"
    need callgrind_control "apt-get install -y valgrind"
    ;;
esac
case "$FORMAT" in text | md) ;; *) die "FORMAT must be text or md (got '$FORMAT')" ;; esac
PIN=${PIN:-auto}
REDIS_PIN=() CLIENT_PIN=() PINNED="not pinned"
case "$PIN" in
auto)
    CPUS=$(nproc)
    if [ "$CPUS" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
        REDIS_PIN=(taskset -c $((CPUS - 1)))
        CLIENT_PIN=(taskset -c "0-$((CPUS - 2))")
        PINNED="redis-server pinned to CPU $((CPUS - 1)), clients to CPUs 0-$((CPUS - 2))"
    fi
    ;;
0) ;;
*) die "PIN must be auto or 0 (got '$PIN')" ;;
esac
BUILDS=${SLUICES:-=$SLUICE}
for SL in $BUILDS; do
    case "$SL" in *=*) ;; *) die "SLUICES: '$SL' is not label=path" ;; esac
    [ -z "${ALGOS// /}" ] || [ -x "${SL#*=}" ] || die "no sluice binary at ${SL#*=}"
done
if [ -n "${ALGOS// /}" ]; then
    [ -x "${SLUICE}" ] || [ -n "${SLUICES:-}" ] || die "no sluice binary at $SLUICE (nice cargo build --release --bin sluice --example loadgen, or set SLUICE)"
    [ -x "$LOADGEN" ] || die "no load generator at $LOADGEN (nice cargo build --release --bin sluice --example loadgen, or set LOADGEN)"
fi
renice -n "${NICE:-10}" -p $$ >/dev/null 2>&1 || true

OUT=$(mktemp -d)
RPID="" SPID="" CHILD=""
stop_sluice() {
    if [ -n "$SPID" ]; then
        kill "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
        SPID=""
    fi
}
stop_stack() {
    stop_sluice
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
    stop_stack
    rm -rf "$OUT"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A measured child runs in the background so that a signal reaches the traps at once.
# run_child FILE CMD...: CMD's stdout to FILE, its stderr to FILE.err.
run_child() {
    local file=$1
    shift
    "$@" >"$file" 2>"$file.err" &
    CHILD=$!
    local rc=0
    wait "$CHILD" || rc=$?
    CHILD=""
    return $rc
}

free_port() { python3 scripts/free-port.py; } # below the ephemeral range: see the script

start_redis() {
    local pass=$1 wrap=() tries
    [ "$pass" = callgrind ] && wrap=(valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p")
    for tries in 1 2 3 4 5; do
        RPORT=$(free_port)
        "${REDIS_PIN[@]}" "${wrap[@]}" redis-server --bind 127.0.0.1 --port "$RPORT" --save "" --appendonly no \
            --dir "$OUT" >"$OUT/redis.log" 2>&1 &
        RPID=$!
        for _ in $(seq 600); do
            redis-cli -p "$RPORT" ping >/dev/null 2>&1 && return 0
            kill -0 "$RPID" 2>/dev/null || break
            sleep 0.1
        done
        kill "$RPID" 2>/dev/null || true
        wait "$RPID" 2>/dev/null || true
        RPID=""
        say "redis-server did not start on port $RPORT (try $tries)"
    done
    tail -5 "$OUT/redis.log" >&2
    die "redis-server does not start"
}

# An address sluice logged when it started listening (JSON log: "grpc":"127.0.0.1:PORT").
logged_addr() { grep -o "\"$1\":\"[0-9.]*:[0-9]*\"" "$OUT/sluice.log" | head -1 | cut -d'"' -f4 || true; }

start_sluice() {
    local timeout=$1
    # Ports chosen by the kernel (port 0), read back from the "serving" log line.
    # shellcheck disable=SC2086
    "${CLIENT_PIN[@]}" "$BIN" serve --config examples/loadgen-config --grpc-addr 127.0.0.1:0 \
        --http-addr 127.0.0.1:0 --admin-addr off --log-format json \
        --redis-url "redis://127.0.0.1:$RPORT" --redis-timeout "$timeout" ${EXTRA:-} \
        >"$OUT/sluice.log" 2>&1 &
    SPID=$!
    local http=""
    # Serving, then healthy (its Redis connections up), so that no warm-up request fails.
    for _ in $(seq 600); do
        GRPC=$(logged_addr grpc)
        http=$(logged_addr http)
        [ -n "$GRPC" ] && [ -n "$http" ] && curl -fs "http://$http/healthcheck" >/dev/null 2>&1 && return 0
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    tail -20 "$OUT/sluice.log" >&2
    die "sluice does not start or does not become healthy"
}

rinfo() { redis-cli -p "$RPORT" info "$1" | tr -d '\r'; }
# Redis CPU seconds so far, "user,sys" (its main thread and the rest: INFO cpu).
redis_cpu() { rinfo cpu | awk -F: '/^used_cpu_user:/ {u = $2} /^used_cpu_sys:/ {s = $2} END {printf "%.6f,%.6f", u, s}'; }
sluice_ticks() { awk '{print $14 + $15}' "/proc/$SPID/stat"; }
now() { date +%s.%N; }

# Callgrind: zero before the measured load, dump after; the counts in between.
cg_zero() { [ "$PASS" = callgrind ] && callgrind_control -z "$RPID" >/dev/null 2>&1 || true; }
cg_dump() {
    CG_INSTR=0
    [ "$PASS" = callgrind ] || return 0
    rm -f "$OUT"/cg."$RPID".*
    callgrind_control -d "$RPID" >/dev/null 2>&1 || die "callgrind_control -d failed"
    local f=""
    for _ in $(seq 300); do
        f=$(ls "$OUT"/cg."$RPID".* 2>/dev/null | head -1)
        [ -n "$f" ] && grep -q '^totals:' "$f" && break
        sleep 0.1
    done
    [ -n "$f" ] || die "no callgrind dump"
    CG_INSTR=$(awk '/^totals:/ {print $2}' "$f")
}

# Counters before and after a measured window: Redis CPU, callgrind, commandstats.
window_start() {
    redis-cli -p "$RPORT" config resetstat >/dev/null
    CPU0=$(redis_cpu)
    cg_zero
    T0=$(now)
}
window_end() {
    T1=$(now)
    cg_dump
    CPU1=$(redis_cpu)
    rinfo commandstats >"$OUT/commandstats"
}

loadgen() {
    local key=$1 d=$2 file=$3
    shift 3
    if ! run_child "$file" "${CLIENT_PIN[@]}" "$LOADGEN" --json --target "http://$GRPC" --connections "$CONNECTIONS" \
        --concurrency "$CONCURRENCY" --warmup 0s --keys "$RUN_KEYS" --key "$key" --descriptors "$d" \
        --timeout "$LG_TIMEOUT" "$@"; then
        cat "$file.err" >&2
        die "the load generator failed ($key, $d descriptors)"
    fi
}

# Under callgrind Redis is ~50x slower. What a check costs depends on the state it finds
# (a sliding log with runs in its window costs more than a fresh key), and that state on
# how often each key is hit: so the callgrind pass spreads its load over fewer keys, as many
# as keep the hits per key per second of the plain pass (rate measured in its warm-up).
# CG_KEYS fixes the number instead; without a plain pass, KEYS is used.
callgrind_keys() {
    python3 - "$OUT/records.jsonl" "$OUT/warm" "$1" "$2" "$KEYS" <<'PY'
import json, os, sys
path, warm, name, d, keys = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
plain = [json.loads(l) for l in open(path)] if os.path.exists(path) else []
plain = [r for r in plain if r["pass"] == "plain" and r["rep"] == 1 and r["kind"] == "sluice" and r["name"] == name and r["d"] == d]
if not plain or plain[0]["rps"] <= 0:
    print(keys)
else:
    rate = json.load(open(warm))["requests_per_second"]
    print(max(d, min(keys, round(keys * rate / plain[0]["rps"]))))
PY
}

measure_sluice() {
    local key=$1 d=$2 s0 s1
    RUN_KEYS=$KEYS
    if [ "$PASS" = callgrind ]; then
        loadgen "$key" "$d" "$OUT/warm" --requests $((CG_N / 4 + 50))
        RUN_KEYS=${CG_KEYS:-$(callgrind_keys "$key$LABEL" "$d")}
        [ "$RUN_KEYS" = "$KEYS" ] || loadgen "$key" "$d" "$OUT/warm" --requests $((CG_N / 4 + 50))
    elif [ -n "$N" ]; then
        loadgen "$key" "$d" "$OUT/warm" --requests $((N / 4 + 100))
    else
        loadgen "$key" "$d" "$OUT/warm" --duration "$WARMUP"
    fi
    window_start
    s0=$(sluice_ticks)
    if [ "$PASS" = callgrind ]; then
        loadgen "$key" "$d" "$OUT/load" --requests "$CG_N"
    elif [ -n "$N" ]; then
        loadgen "$key" "$d" "$OUT/load" --requests "$N"
    else
        loadgen "$key" "$d" "$OUT/load" --duration "$DURATION"
    fi
    s1=$(sluice_ticks)
    window_end
    record sluice "$key$LABEL" "$d" "$OUT/load" "$s0" "$s1" "$RUN_KEYS"
}

SCRIPT_SRC="local n = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('PEXPIRE', KEYS[1], ARGV[2]) return n"
measure_baseline() {
    local name=$1 d=${2:-1} ops=$BENCH_N cmds=() sha c clients=$CONNECTIONS pipe=16
    [ "$PASS" = callgrind ] && ops=$CG_BENCH_N
    case "$name" in
    reference)
        cmds=("INCRBY cap:ref:__rand_int__ 1" "EXPIRE cap:ref:__rand_int__ 60")
        ;;
    request)
        cmds=("INCRBY cap:req:__rand_int__ 1" "EXPIRE cap:req:__rand_int__ 60")
        clients=$((CONNECTIONS * CONCURRENCY)) pipe=$((2 * d))
        ;;
    script)
        sha=$(redis-cli -p "$RPORT" script load "$SCRIPT_SRC")
        cmds=("EVALSHA $sha 1 cap:lua:__rand_int__ 1 60000")
        ;;
    *) die "unknown baseline '$name' (reference, script)" ;;
    esac
    bench() {
        # shellcheck disable=SC2086
        run_child "$OUT/bench" "${CLIENT_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$RPORT" -c "$clients" -P "$pipe" \
            -r "$KEYS" -n "$1" -q $2 || {
            cat "$OUT/bench" "$OUT/bench.err" >&2
            die "redis-benchmark failed ($2)"
        }
    }
    # Warm-up: every key exists before the measured run (3 x KEYS random hits miss ~5%).
    local warm=$((ops / 10 + 100))
    [ "$warm" -lt $((3 * KEYS)) ] && warm=$((3 * KEYS))
    for c in "${cmds[@]}"; do bench "$warm" "$c"; done
    window_start
    for c in "${cmds[@]}"; do bench "$ops" "$c"; done
    window_end
    echo '{}' >"$OUT/load"
    record "$name" "$name" "$d" "$OUT/load" 0 0 "$KEYS"
}

# One JSON line per measured window into records.jsonl.
record() {
    python3 - "$PASS" "$REP" "$@" "$CPU0" "$CPU1" "$T0" "$T1" "$CG_INSTR" "$(getconf CLK_TCK)" \
        "$OUT/commandstats" >>"$OUT/records.jsonl" <<'PY'
import json, sys
(pass_, rep, kind, name, d, load, s0, s1, keys, cpu0, cpu1, t0, t1, instr, hz, cs) = sys.argv[1:]
d = int(d)
stats = {}
for line in open(cs):
    if line.startswith("cmdstat_"):
        cmd, rest = line[8:].strip().split(":", 1)
        stats[cmd] = {k: int(float(v)) for k, v in (kv.split("=") for kv in rest.split(","))}
# What this script itself sends (INFO, CONFIG RESETSTAT) and redis-benchmark's CONFIG GET
# at connect are not the workload.
work = {c: s for c, s in stats.items() if c not in ("info", "config", "config|resetstat", "config|get")}
commands = sum(s["calls"] for s in work.values())
failed = sum(s.get("failed_calls", 0) + s.get("rejected_calls", 0) for s in work.values())
scripts = sum(work.get(c, {}).get("calls", 0) for c in ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"))
rec = {"pass": pass_, "rep": int(rep), "kind": kind, "name": name, "d": d, "keys": int(keys), "instr": int(instr or 0),
       "commands": commands, "script_calls": scripts, "failed": failed}
(u0, k0), (u1, k1) = (map(float, c.split(",")) for c in (cpu0, cpu1))
rec.update(redis_cpu_s=(u1 + k1) - (u0 + k0), redis_sys_s=k1 - k0, seconds=float(t1) - float(t0))
if kind == "sluice":
    r = json.load(open(load))
    lat = r.get("latency_ms") or {}
    rec.update(requests=r["requests"], checks=r["requests"] * d, errors=r["errors"],
               rps=r["requests_per_second"], p50=lat.get("p50"), p99=lat.get("p99"),
               sluice_cpu_s=(int(s1) - int(s0)) / int(hz))
else:
    # One check = one INCRBY (+ EXPIRE) or one EVALSHA (+ the two commands it runs).
    checks = work.get("evalsha" if kind == "script" else "incrby", {}).get("calls", 0)
    if checks == 0:
        sys.exit(f"redis-capacity: the {kind} baseline ran no command: {sorted(stats)}")
    rec.update(requests=checks, checks=checks, errors=failed,
               rps=checks / max(rec["seconds"], 1e-9), p50=None, p99=None, sluice_cpu_s=None)
print(json.dumps(rec))
PY
}

COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || COMMIT="$COMMIT+changes"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)
for RUN in $PASSES; do
    PASS=${RUN%%:*} REP=${RUN##*:}
    CG_INSTR=0
    say "$PASS pass $REP: starting redis-server"
    start_redis "$PASS"
    for SL in $BUILDS; do
        [ -n "${ALGOS// /}" ] || break
        LABEL=${SL%%=*} BIN=${SL#*=}
        [ -n "$LABEL" ] && LABEL="@$LABEL"
        if [ "$PASS" = callgrind ]; then
            # Redis is ~50x slower under valgrind: deadlines to match.
            start_sluice 30s
            LG_TIMEOUT=120s
        else
            start_sluice "$TIMEOUT"
            LG_TIMEOUT=5s
        fi
        for key in $ALGOS; do
            for d in $DESCRIPTORS; do
                say "$PASS pass: sluice$LABEL $key, $d descriptor(s) per request"
                measure_sluice "$key" "$d"
            done
        done
        stop_sluice
    done
    for b in $BASELINES; do
        if [ "$b" = request ]; then
            for d in $DESCRIPTORS; do
                say "$PASS pass: baseline $b, $d descriptor(s) per request"
                measure_baseline "$b" "$d"
            done
        else
            say "$PASS pass: baseline $b"
            measure_baseline "$b"
        fi
    done
    stop_stack
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT/records.jsonl" "$FORMAT" "$IPUS" "$COMMIT" "${SLUICES:-$SLUICE}" \
    "$(redis-server --version | grep -o 'v=[0-9.]*' | cut -d= -f2)" "$(nproc)" "$LOAD0" "$LOAD1" \
    "$(($(date +%s) - START))" "$CONNECTIONS x $CONCURRENCY" "$KEYS" "$DESCRIPTORS" "$REPEAT" "$PINNED" <<'PY'
import json, statistics, sys
(path, fmt, ipus, commit, sluice, redis_v, cpus, load0, load1, secs, load, keys,
 ds, repeat, pinned) = sys.argv[1:]
ipus = float(ipus)
ds = [int(d) for d in ds.split()]
recs = [json.loads(l) for l in open(path)]
rows = {}  # (kind, name, d) -> {"plain": [rec per repeat], "callgrind": [rec]}
for r in recs:
    rows.setdefault((r["kind"], r["name"], r["d"]), {}).setdefault(r["pass"], []).append(r)
has_cg = any("callgrind" in v for v in rows.values())
has_plain = any("plain" in v for v in rows.values())

LABEL = {"reference": "reference: INCRBY + EXPIRE, -P 16",
         "script": "INCRBY + PEXPIRE script, EVALSHA -P 16",
         "request": "their client: INCRBY + EXPIRE, one pipeline per request"}

def num(x, f="{:.0f}"):
    return "–" if x is None else f.format(x)

def k(x):
    return "–" if x is None else f"{x / 1000:.0f}k"

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def derived(v):
    """One table row: each figure the median of the plain repeats' (callgrind: one pass)."""
    c = (v.get("callgrind") or [None])[0]
    outs = [derived1(p, c) for p in v.get("plain") or [None]]
    out = {}
    for key in outs[0]:
        vals = [o.get(key) for o in outs]
        if all(isinstance(x, (int, float)) or x is None for x in vals) and key != "d":
            out[key] = median(vals)
        else:
            out[key] = outs[0][key]
    return out

def derived1(p, c):
    any_ = p or c
    out = {"what": LABEL.get(any_["kind"], any_["name"]),
           "d": any_["d"] if any_["kind"] in ("sluice", "request") else None}
    n = max(any_["requests"], 1)
    out["scripts"] = any_["script_calls"] / n
    out["commands"] = any_["commands"] / n
    if p:
        pn, pc = max(p["requests"], 1), max(p["checks"], 1)
        out.update(rps=p["rps"] if p["kind"] == "sluice" else None,
                   cps=p["rps"] * p["d"] if p["kind"] == "sluice" else p["rps"],
                   p50=p["p50"], p99=p["p99"], errors=p["errors"],
                   sluice_us=None if p["sluice_cpu_s"] is None else p["sluice_cpu_s"] / pn * 1e6,
                   cpu_us=p["redis_cpu_s"] / pc * 1e6,
                   sys_share=p["redis_sys_s"] / p["redis_cpu_s"] if p["redis_cpu_s"] > 0 else None)
    if c:
        out["instr"] = c["instr"] / max(c["checks"], 1)
        out["cg_load"] = f'{c["keys"]}, {c["commands"] / max(c["requests"], 1):.2f}'
        out["cg_us"] = out["instr"] / ipus
        if not p:
            out["errors"] = c["errors"]
    out["cap_cg"] = 1e6 / out["cg_us"] if out.get("cg_us") else None
    out["cap_cpu"] = 1e6 / out["cpu_us"] if out.get("cpu_us") else None
    return out

order = []
for key, v in rows.items():
    order.append(derived(v))

cols = [("what", "what", lambda o: o["what"]),
        ("D", "D", lambda o: num(o["d"], "{}"))]
if has_plain:
    cols += [("req/s", "req/s", lambda o: num(o.get("rps"))),
             ("checks/s", "checks/s", lambda o: num(o.get("cps"))),
             ("p50 ms", "p50 ms", lambda o: num(o.get("p50"), "{:.2f}")),
             ("p99 ms", "p99 ms", lambda o: num(o.get("p99"), "{:.2f}"))]
cols += [("errors", "errors", lambda o: num(o.get("errors"), "{}")),
         ("script calls/req", "script calls/req", lambda o: f"{o['scripts']:.2f}"),
         ("Redis cmds/req", "Redis commands/req", lambda o: f"{o['commands']:.2f}")]
if has_plain:
    cols += [("sluice CPU us/req", "sluice CPU µs/req", lambda o: num(o.get("sluice_us"), "{:.1f}")),
             ("Redis CPU us/check", "Redis CPU µs/check (INFO cpu)", lambda o: num(o.get("cpu_us"), "{:.2f}")),
             ("kernel", "of which kernel", lambda o: num(o.get("sys_share") and o["sys_share"] * 100, "{:.0f}%"))]
if has_cg:
    cols += [("instr/check", "Redis instructions/check", lambda o: k(o.get("instr"))),
             ("~us/check", "≈ Redis µs/check", lambda o: num(o.get("cg_us"), "{:.2f}")),
             ("cg keys, cmds/req", "callgrind pass: keys, commands/req", lambda o: o.get("cg_load", "–"))]

def table(headers, body):
    if fmt == "md":
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    w = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r))
    return "\n".join([line(headers), line(["-" * x for x in w])] + [line(r) for r in body])

hi = 1 if fmt == "md" else 0
side = table([c[hi] for c in cols], [[c[2](o) for c in cols] for o in order])

# Capacity: checks per second one Redis core sustains, per algorithm and D.
names = []
for o in order:
    if o["what"] not in names:
        names.append(o["what"])
by = {(o["what"], o["d"]): o for o in order}
cap_heads = ["what"]
sources = ([("cap_cg", "from instructions")] if has_cg else []) + \
          ([("cap_cpu", "INFO cpu" + (", indicative" if has_cg else ""))] if has_plain else [])
for field, src in sources:
    cap_heads += [f"D={d} ({src})" for d in ds]
cap_body = []
for n in names:
    row = [n]
    for field, _ in sources:
        for d in ds:
            o = by.get((n, d)) or by.get((n, None))
            row.append(k(o.get(field)) if o else "–")
    cap_body.append(row)
cap = table(cap_heads, cap_body)

head = (f"commit {commit}, {sluice}; Redis {redis_v}; {cpus} CPUs, load average "
        f"{load0} before, {load1} after; {secs} s. Load: {load} in flight, {keys} keys")
if any(r["kind"] != "sluice" for r in recs):
    head += f"; baselines: redis-benchmark -c {load.split(' x ')[0]} -P 16 -r {keys}"
    if any(r["kind"] == "request" for r in recs):
        c, n = (int(x) for x in load.split(" x "))
        head += f" (their client: -c {c * n} -P 2D)"
head += f"; {pinned}."
if has_cg:
    head += f" µs from instructions at {ipus / 1000:g}k instructions per µs."
if fmt == "md":
    print(head + "\n")
    print(side + "\n")
    print("Checks per second one Redis core sustains (1e6 / Redis µs per check; the baselines "
          "are per check whatever D):\n")
    print(cap)
else:
    print(head + "\n")
    print(side + "\n")
    print("checks per second per Redis core (1e6 / Redis us per check):")
    print(cap)

# The targets' table: Redis CPU per check / the reference pair's, in the same repeat (INFO
# cpu: median of the per-repeat ratios) or the same callgrind pass (instructions).
def per_rep(kind, name, d):
    v = rows.get((kind, name, d), {})
    return {p["rep"]: p["redis_cpu_s"] / max(p["checks"], 1) * 1e6 for p in v.get("plain", [])}

def cg(kind, name, d):
    v = rows.get((kind, name, d), {}).get("callgrind")
    return v[0]["instr"] / max(v[0]["checks"], 1) if v else None

ref, scr = per_rep("reference", "reference", 1), per_rep("script", "script", 1)
ref_cg, scr_cg = cg("reference", "reference", 1), cg("script", "script", 1)

def ratio(a, b):
    return median([a[r] / b[r] for r in a if r in b and b[r] > 0])

def x(v):
    return "–" if v is None else f"{v:.2f}×"

if ref or ref_cg:
    heads = ["algorithm", "D"]
    has_req = any(kind == "request" for (kind, _, _) in rows)
    if has_plain:
        heads += ["Redis CPU µs/check (INFO cpu)", "× reference", "× script"]
        if has_req:
            heads += ["× their client"]
    if has_cg:
        heads += ["Redis instructions/check", "× reference (callgrind)", "× script (callgrind)"]
    body = []
    sluice_names = []
    for (kind, name, d) in rows:
        if kind == "sluice" and name not in sluice_names:
            sluice_names.append(name)
    for name in sluice_names:
        for d in ds:
            if (("sluice", name, d)) not in rows:
                continue
            row = [name, str(d)]
            if has_plain:
                mine = per_rep("sluice", name, d)
                row += [num(median(mine.values()), "{:.2f}"), x(ratio(mine, ref)), x(ratio(mine, scr))]
                if has_req:
                    row += [x(ratio(mine, per_rep("request", "request", d)))]
            if has_cg:
                i = cg("sluice", name, d)
                row += [k(i), x(i / ref_cg if i is not None and ref_cg else None),
                        x(i / scr_cg if i is not None and scr_cg else None)]
            body.append(row)
    for kind, label, d in [("reference", "reference pair", 1), ("script", "minimal script", 1)] + \
            [("request", "their client", d) for d in ds]:
        if (kind, kind, d) in rows:
            row = [label, str(d) if kind == "request" else "–"]
            if has_plain:
                mine = per_rep(kind, kind, d)
                row += [num(median(mine.values()), "{:.2f}"), x(ratio(mine, ref)), x(ratio(mine, scr))]
                if has_req:
                    row += [x(ratio(mine, per_rep("request", "request", d))) if kind == "request" else "–"]
            if has_cg:
                i = cg(kind, kind, d)
                row += [k(i), x(i / ref_cg if i is not None and ref_cg else None),
                        x(i / scr_cg if i is not None and scr_cg else None)]
            body.append(row)
    note = (f"Redis CPU per check ÷ the reference's INCRBY + EXPIRE pair's in the same run "
            f"(INFO cpu: median over {repeat} repeat(s) of the per-repeat ratio):")
    print("\n" + note + "\n")
    print(table(heads, body))
PY
