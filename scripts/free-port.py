#!/usr/bin/env python3
"""Print a free loopback TCP port for the benchmark scripts' servers.

Taken from below the kernel's ephemeral range: a port the kernel hands out for port 0 is one
it also hands out as the local end of outgoing connections, and with a load generator (or
the test suite) connecting in parallel, one of those can take it before the server binds it.
Below the range only listeners take ports. Falls back to port 0 when the range starts too low.
"""
import random
import socket

FIRST = 10000
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768

ports = list(range(FIRST, low))
random.shuffle(ports)
for port in ports[:2000] + [0]:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(s.getsockname()[1])
        break
