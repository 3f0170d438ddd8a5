#!/usr/bin/env bash
# The Redis cost of a calendar window against a plain one of the same unit (BENCHMARKS.md,
# "Calendar windows"): scripts/redis-capacity.sh over four rules of examples/loadgen-config,
# fixed_window and sliding_window over one day, from the epoch and from midnight in
# Asia/Kolkata (`calendar`), at D = 1 and 4 in the same run (one Redis, the same load), with
# the reference pair beside them. It reports Redis CPU per check (INFO cpu) and, with
# valgrind, the instructions Redis executes per check; the rows to compare are
# `*_day` against `*_calendar` of the same run.
#
#   scripts/calendar-cost.sh                               # 3 repeats, then callgrind: ~5 min
#   CALLGRIND=only CG_N=2000 scripts/calendar-cost.sh      # instructions only
#   CALLGRIND=0 REPEAT=1 DURATION=2s scripts/calendar-cost.sh
#
# Builds nothing: set SLUICE and LOADGEN, or build target/release first (`cargo build
# --release --bin sluice --example loadgen`). Every other setting of
# scripts/redis-capacity.sh applies (DESCRIPTORS, KEYS, CONCURRENCY, FORMAT…).
set -euo pipefail
export ALGOS=${ALGOS:-fixed_window_day fixed_window_calendar sliding_window_day sliding_window_calendar}
export BASELINES=${BASELINES:-reference}
exec "$(dirname "$0")/redis-capacity.sh"
