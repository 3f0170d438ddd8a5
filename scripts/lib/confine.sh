# Sourced by the scripts that measure a server on one CPU of a 2-CPU machine
# (scripts/overload.sh, scripts/envoy-overhead.sh, scripts/envoy-overload.sh): pinning with
# taskset, a CPU quota for the server's side in a cgroup of its own, and a CPU weight for
# both sides. It defines, from the caller's settings:
#
#   in:   PIN (auto or 0), SERVER_CPU, CLIENT_CPU, QUOTA (percent of one CPU, 0: none),
#         PERIOD_US, WEIGHT (a multiple of the default CPU weight), SERVER_SIDE and
#         CLIENT_SIDE (what runs on each CPU, for the description), log (a function)
#   out:  server_cmd and client_cmd (command prefixes: a process started with server_cmd is
#         pinned to SERVER_CPU, and joins the quota's cgroup with `confine PID`; one started
#         with client_cmd is pinned to CLIENT_CPU and joins the client's cgroup itself),
#         pinning and quota_desc (one line each, for the tables' machine line), CGROUP and
#         CLIENT_CGROUP (to remove on exit, once their processes are gone)
#
# Without root (no cgroup) or without taskset it says so and leaves that part out.

PIN=${PIN:-auto}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
QUOTA=${QUOTA:-0}
# The shortest period whose quota the kernel accepts (1 ms at least): 4 ms at 25%.
PERIOD_US=${PERIOD_US:-$((QUOTA > 0 ? (100000 + QUOTA - 1) / QUOTA : 10000))}
WEIGHT=${WEIGHT:-1}

# Pinning.
server_cmd=() client_cmd=()
if [ "$PIN" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    server_cmd+=(taskset -c "$SERVER_CPU")
    client_cmd+=(taskset -c "$CLIENT_CPU")
    pinning="$SERVER_SIDE on CPU $SERVER_CPU, $CLIENT_SIDE on CPU $CLIENT_CPU"
else
    pinning="no pinning"
fi

# The quota: a cgroup of our own for the server's side, v2 if mounted (cpu.max), else v1
# (cpu.cfs_*); with WEIGHT, one for the client's side too.
quota_desc="no CPU quota" CGROUP= CLIENT_CGROUP=
quota_us=$((PERIOD_US * QUOTA / 100))
make_cgroup() { # name → path, or nothing
    if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
        echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
        mkdir "/sys/fs/cgroup/$1" 2>/dev/null && echo "/sys/fs/cgroup/$1"
    elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
        mkdir "/sys/fs/cgroup/cpu/$1" 2>/dev/null && echo "/sys/fs/cgroup/cpu/$1"
    fi
    return 0
}
weigh() { # cgroup
    if [ -f "$1/cpu.weight" ]; then
        echo $((WEIGHT * 100 > 10000 ? 10000 : WEIGHT * 100)) >"$1/cpu.weight"
    elif [ -f "$1/cpu.shares" ]; then
        echo $((WEIGHT * 1024)) >"$1/cpu.shares"
    fi
}
cgroup_name="sluice-$(basename "$0" .sh)-$$"
if [ "$QUOTA" != 0 ] || [ "$WEIGHT" != 1 ]; then
    CGROUP=$(make_cgroup "$cgroup_name")
    if [ -z "$CGROUP" ]; then
        log "cannot create a cpu cgroup (not root?): running without a quota"
    elif [ "$QUOTA" = 0 ]; then
        weigh "$CGROUP"
    elif [ -f "$CGROUP/cpu.max" ]; then
        echo "$quota_us $PERIOD_US" >"$CGROUP/cpu.max"
        weigh "$CGROUP"
        quota_desc="cgroup v2 cpu.max $quota_us/$PERIOD_US µs ($QUOTA% of one CPU)"
    else
        echo "$PERIOD_US" >"$CGROUP/cpu.cfs_period_us"
        echo "$quota_us" >"$CGROUP/cpu.cfs_quota_us"
        weigh "$CGROUP"
        quota_desc="cgroup v1 cpu.cfs_quota_us $quota_us / cpu.cfs_period_us $PERIOD_US ($QUOTA% of one CPU)"
    fi
    if [ -n "$CGROUP" ] && [ "$WEIGHT" != 1 ]; then
        CLIENT_CGROUP=$(make_cgroup "$cgroup_name-client")
        [ -z "$CLIENT_CGROUP" ] || weigh "$CLIENT_CGROUP"
        quota_desc="$quota_desc; CPU weight ×$WEIGHT"
    fi
fi
confine() { if [ -n "$CGROUP" ]; then echo "$1" >"$CGROUP/cgroup.procs"; fi; }
# A client process joins its cgroup from a shell that then runs it (the same pid).
client_cmd=(sh -c 'if [ -n "$0" ]; then echo $$ >"$0/cgroup.procs"; fi; exec "$@"' "$CLIENT_CGROUP" "${client_cmd[@]}")
