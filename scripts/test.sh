#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, unit and integration tests.
# Integration tests start their own redis-server processes and make their certificates
# with openssl; install the Debian packages that are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# command → Debian package
needed=""
command -v redis-server >/dev/null 2>&1 || needed="$needed redis-server"
command -v openssl >/dev/null 2>&1 || needed="$needed openssl"
if [ -n "$needed" ]; then
    echo "installing the Debian packages:$needed" >&2
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo -n"; fi
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q $needed </dev/null \
        || { $SUDO apt-get update -q </dev/null && $SUDO apt-get install -y -q $needed </dev/null; }
fi
redis-server --version
openssl version

cargo fmt --all -- --check
# Before the tests: deploy::docker_build checks the Docker build context into this target
# directory and reuses the dependencies clippy has checked.
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked "$@"
