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

# promtool (integration/dashboards.rs: alert rule unit tests, PromQL of every dashboard query)
# comes with Debian's prometheus package.
if ! command -v promtool >/dev/null 2>&1; then
    echo "promtool not found: installing the Debian prometheus package" >&2
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo -n"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -q --no-install-recommends prometheus </dev/null \
        || { $SUDO apt-get update -q </dev/null \
            && $SUDO apt-get install -y -q --no-install-recommends prometheus </dev/null; }
fi
promtool --version 2>&1 | sed -n 1p

# kubectl (integration/deploy/kubernetes: `kubectl kustomize` renders every overlay) and
# kubernetes-validate (PyPI: validates the renderings against Kubernetes' schemas).
if ! command -v kubectl >/dev/null 2>&1; then
    echo "kubectl not found: installing the Debian package" >&2
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo -n"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -q kubectl </dev/null \
        || { $SUDO apt-get update -q </dev/null && $SUDO apt-get install -y -q kubectl </dev/null; }
fi
kubectl version --client 2>&1 | sed -n 1,2p
if ! python3 -m kubernetes_validate --version >/dev/null 2>&1; then
    echo "kubernetes-validate not found: installing it from PyPI" >&2
    python3 -m pip install -q --disable-pip-version-check kubernetes-validate </dev/null
fi
python3 -m kubernetes_validate --version

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked "$@"
