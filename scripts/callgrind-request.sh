#!/usr/bin/env bash
# Instructions per ShouldRateLimit request of the sluice binary under valgrind's callgrind,
# for several sets of serve flags, one after the other (BENCHMARKS.md, "Costs on the request
# path"). Instruction counts do not drift with other load on the machine, so an on/off
# comparison made on a busy machine holds; a time figure needs a quiet one (cpu-compare.sh).
#
# Each set: start `sluice serve --config examples/loadgen-config --worker-threads 1 FLAGS`
# under callgrind on free loopback ports (memory store, admin listener off), send WARMUP
# requests, zero the counters, send N requests (CONNECTIONS x CONCURRENCY in flight, KEYS
# descriptor values, DESCRIPTORS per request), dump, stop. Instructions per request = the
# dump's total / answered requests (idle loops included: they are few).
#
#   scripts/callgrind-request.sh 'on=' 'off=--top-capacity 0'    # heavy hitters on and off
#   N=200 WARMUP=50 scripts/callgrind-request.sh 'smoke='        # seconds, not minutes
#
# Settings (environment):
#   N, WARMUP                         measured and warm-up requests [10000, 2000]
#   CONNECTIONS, CONCURRENCY          in flight [4, 16]
#   KEYS, DESCRIPTORS                 descriptor values, descriptors per request [10000, 1]
#   SLUICE, LOADGEN                   binaries [target/release/sluice,
#                                     target/release/examples/loadgen]; builds nothing:
#                                     `cargo build --release --bin sluice --example loadgen`
#
# One row per set, tab-separated: label, flags, answered requests, instructions per request.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000}
WARMUP=${WARMUP:-2000}
CONNECTIONS=${CONNECTIONS:-4}
CONCURRENCY=${CONCURRENCY:-16}
KEYS=${KEYS:-10000}
DESCRIPTORS=${DESCRIPTORS:-1}
SLUICE=${SLUICE:-target/release/sluice}
LOADGEN=${LOADGEN:-target/release/examples/loadgen}

[ $# -gt 0 ] || { echo "usage: $0 LABEL=FLAGS..." >&2; exit 2; }
for tool in valgrind callgrind_control; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is not installed" >&2; exit 2; }
done

work=$(mktemp -d)
server=
cleanup() {
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

printf 'label\tflags\tanswered\tinstructions/request\n'
for set in "$@"; do
    label=${set%%=*}
    flags=${set#*=}
    grpc=$(scripts/free-port.py)
    http=$(scripts/free-port.py)
    # shellcheck disable=SC2086 # FLAGS are words
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.$label" \
        "$SLUICE" serve --config examples/loadgen-config --worker-threads 1 \
        --grpc-addr "127.0.0.1:$grpc" --http-addr "127.0.0.1:$http" --admin-addr off \
        $flags 2>"$work/$label.log" &
    server=$!
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$http/healthcheck" >/dev/null && break
        sleep 0.2
    done
    curl -sf "http://127.0.0.1:$http/healthcheck" >/dev/null \
        || { echo "$label: sluice never served:" >&2; cat "$work/$label.log" >&2; exit 1; }
    load() {
        "$LOADGEN" --json --target "http://127.0.0.1:$grpc" --connections "$CONNECTIONS" \
            --concurrency "$CONCURRENCY" --keys "$KEYS" --descriptors "$DESCRIPTORS" \
            --warmup 0s --requests "$1" 2>/dev/null
    }
    load "$WARMUP" >/dev/null
    callgrind_control -z "$server" >/dev/null 2>&1
    answered=$(load "$N" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["requests"] - r["errors"])')
    callgrind_control -d "$server" >/dev/null 2>&1
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    # The dump made after zeroing: the part file with the highest number.
    dump=$(ls "$work/cg.$label".* | sort -t. -k3 -n | tail -1)
    total=$(awk '/^summary:/ {print $2}' "$dump")
    python3 -c "import sys; t,a=int(sys.argv[1]),int(sys.argv[2]); print(f'$label\t$flags\t{a}\t{t/a:.0f}')" "$total" "$answered"
done
