#!/usr/bin/env bash
# Server CPU per request (µs): robust to other load on the machine, unlike req/s.
# usage: scripts/cpu-per-request.sh PID [loadgen args...]
set -euo pipefail
pid=$1; shift
ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
out=$("$(dirname "$0")/../target/release/examples/loadgen" --json "$@")
t1=$(ticks)
python3 - "$out" "$t0" "$t1" "$hz" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); t0, t1, hz = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cpu = (t1 - t0) / hz
# warm-up requests are not in r["requests"]; the ratio is computed over the measured window
# only when warmup is 0.
l = r["latency_ms"] or {}
print(f'{r["requests_per_second"]:.0f} req/s  server cpu {cpu:.2f}s = {cpu/r["requests"]*1e6:.1f} us/req  '
      f'client {r["client_cpu_s"]/r["requests"]*1e6:.1f} us/req  p50 {l.get("p50")} p99 {l.get("p99")}  errors {r["errors"]}')
PY
