#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, unit and integration tests.
# Integration tests start their own redis-server and redis-sentinel processes.
set -euo pipefail
cd "$(dirname "$0")/.."

# Install the Debian packages when missing. The TLS tests need a redis-server built with
# TLS (`--tls-port`): Debian's is (bookworm 7.0.15 checked).
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v redis-sentinel >/dev/null 2>&1 || missing="$missing redis-sentinel"
if [ -n "$missing" ]; then
    echo "installing the Debian packages:$missing" >&2
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo -n"; fi
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q $missing </dev/null \
        || { $SUDO apt-get update -q </dev/null && $SUDO apt-get install -y -q $missing </dev/null; }
fi
redis-server --version

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked "$@"
