# Sourced first by the benchmark scripts that share its checks (scripts/cpu-compare.sh,
# scripts/overload.sh, scripts/envoy-overhead.sh, scripts/envoy-overload.sh): how they speak,
# what they check before measuring anything, and how they clean up.
#
#   in:   $0 (the script: every message starts with its name, without `.sh`)
#   out:  log MESSAGE (to stderr); die MESSAGE (logs it, exits 1); need TOOL INSTALL (dies
#         naming INSTALL unless TOOL is on the PATH); need_store_tools STORES (python3 and
#         curl, and redis-server and redis-cli when the words STORES hold `redis`);
#         need_redis; positive NAME (dies unless the variable NAME holds a positive integer);
#         known_stores (dies unless every word of STORES is memory or redis); on_exit
#         FUNCTION (runs it on exit, which SIGINT and SIGTERM make with 130 and 143);
#         build_sluice_and_loadgen (builds both unless SLUICE or LOADGEN is given, then sets
#         SLUICE and LOADGEN to their defaults where unset); free_port

ME=$(basename "$0" .sh)

log() { echo "$ME: $*" >&2; }
die() {
    log "$*"
    exit 1
}
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }
need_redis() {
    need redis-server "apt-get install -y redis-server"
    need redis-cli "apt-get install -y redis-tools"
}
need_store_tools() {
    need python3 "apt-get install -y python3"
    need curl "apt-get install -y curl"
    case " $1 " in *" redis "*) need_redis ;; esac
}
positive() {
    case "${!1}" in '' | *[!0-9]* | 0) die "$1 must be a positive integer (got '${!1}')" ;; esac
}
known_stores() {
    for s in $STORES; do
        case "$s" in memory | redis) ;; *) die "STORES: '$s' is neither memory nor redis" ;; esac
    done
}
on_exit() {
    # shellcheck disable=SC2064 # the function's name, fixed now
    trap "$1" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
build_sluice_and_loadgen() {
    if [ -z "${SLUICE:-}" ] && [ -z "${LOADGEN:-}" ]; then
        cargo build --release --locked --quiet --bin sluice --example loadgen
    fi
    SLUICE=${SLUICE:-target/release/sluice}
    LOADGEN=${LOADGEN:-target/release/examples/loadgen}
}
free_port() { python3 scripts/free-port.py; } # below the ephemeral range: see the script
