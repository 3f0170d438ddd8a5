#!/usr/bin/env bash
# Redis cost per check of one rule at one number of descriptors per request (BENCHMARKS.md,
# "Redis cost per decision"): scripts/redis-capacity.sh restricted to one sluice run, no
# baselines. It reports script calls and Redis commands per request (INFO commandstats),
# Redis CPU per check (INFO cpu, indicative on a shared machine), sluice CPU per request,
# throughput and latency; with CALLGRIND=1, instead, the instructions redis-server executes
# per check under valgrind --tool=callgrind (counts, not times: robust to a loaded machine).
#
#   scripts/redis-cost.sh KEY DESCRIPTORS [REQUESTS]
#   CALLGRIND=1 scripts/redis-cost.sh fixed_window 4 2000
#   SLUICE=/path/to/other/sluice scripts/redis-cost.sh sliding_log 1
#   EXTRA="--local-cache-size-bytes 1048576" KEYS=20 scripts/redis-cost.sh limited 1 5000
#
# KEY is a rule of examples/loadgen-config (one per algorithm, `key` = fixed_window, and
# `limited`: 10/minute, so almost every request is over the limit). Builds nothing: set
# SLUICE and LOADGEN, or build target/release first (`cargo build --release --bin sluice
# --example loadgen`). Every other setting of scripts/redis-capacity.sh applies (KEYS,
# CONCURRENCY, TIMEOUT, EXTRA, FORMAT…).
set -euo pipefail
KEY=${1:?usage: scripts/redis-cost.sh KEY DESCRIPTORS [REQUESTS]}
D=${2:?usage: scripts/redis-cost.sh KEY DESCRIPTORS [REQUESTS]}
REQUESTS=${3:-20000}
export ALGOS=$KEY DESCRIPTORS=$D BASELINES=none
if [ -n "${CALLGRIND:-}" ] && [ "${CALLGRIND}" != 0 ]; then
    export CALLGRIND=only CG_N=$REQUESTS
else
    export CALLGRIND="" N=$REQUESTS
fi
exec "$(dirname "$0")/redis-capacity.sh"
