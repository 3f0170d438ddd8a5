# syntax=docker/dockerfile:1
#
# sluice container image.
#
#   docker build -t sluice:0.1.0 .
#   docker run --rm -p 8080:8080 -p 8081:8081 sluice:0.1.0
#
# Two stages: Cargo builds a release binary in the full Rust image, and only that
# binary plus the bundled rule files go into a distroless runtime (glibc, libgcc,
# CA certificates, no shell, no package manager), running as a non-root user.
#
# Probes: the runtime image has no shell or curl, so there is deliberately no
# HEALTHCHECK instruction. Orchestrators probe sluice from the outside:
#   - HTTP  GET :8080/healthcheck  -> 200 "OK" when ready; 500 while Redis is
#     unreachable, before the first config is loaded (when required) and from the
#     moment SIGTERM arrives;
#   - gRPC  grpc.health.v1.Health/Check on :8081, service "" or "ratelimit"
#     (Kubernetes `grpc:` probes, Envoy `grpc_health_check`).
# See examples/kubernetes/base/deployment.yaml and docker-compose.yml.

# Keep the builder's Debian release equal to the runtime's (bookworm = debian12):
# the binary links against the builder's glibc. The Rust version is the toolchain
# the project is tested with; the crate's minimum is rust-version in Cargo.toml.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /build

# Dependencies first, in their own layer: build the whole dependency graph against
# stub sources, so this (slow) layer is reused until Cargo.toml or Cargo.lock
# change. Only `--bin sluice` is built, so the integration-test target and the
# dev-dependencies are never needed here.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
 && echo 'fn main() {}' > src/main.rs \
 && : > src/lib.rs \
 && cargo build --release --locked --bin sluice \
 && rm -rf src

# The real sources. COPY keeps the files' own mtimes, which may be older than the
# stub build's fingerprints: touch the crate roots so Cargo rebuilds the crate.
COPY src ./src
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin sluice \
 && cp target/release/sluice /usr/local/bin/sluice

# Fail the image build, not the first deployment, if the bundled rules are invalid.
COPY config ./config
RUN sluice check config

# gcr.io/distroless/cc-debian12 = glibc + libgcc (what a Rust binary needs; TLS to
# Redis uses rustls, so no OpenSSL). The :nonroot tag runs as uid/gid 65532.
# Distroless publishes no major.minor tags: pin by digest for reproducible
# production builds (…/cc-debian12:nonroot@sha256:…).
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime

COPY --from=builder /usr/local/bin/sluice /usr/local/bin/sluice
# envoyproxy/ratelimit's binary path: Envoy Gateway runs its rate limit deployment with
# `command: [/bin/ratelimit]` and no arguments, which sluice takes as `serve` (settings
# from the environment), so swapping the image is enough. A copy, not a symlink: the
# runtime image has no shell to make one, and a copied symlink would depend on whether
# the base image's /bin is itself a link.
COPY --from=builder /usr/local/bin/sluice /bin/ratelimit
# The bundled rule files. Mount your own directory over /etc/sluice/config (as
# docker-compose.yml does), set envoyproxy/ratelimit's RUNTIME_ROOT/
# RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY as their manifests do, or point
# --config/SLUICE_CONFIG elsewhere. sluice watches the directory and reloads on
# change, Kubernetes ConfigMap swaps included.
COPY --from=builder /build/config /etc/sluice/config
# `serve` with no --config reads ./config: from here, the bundled rules.
WORKDIR /etc/sluice

# Numeric, so Kubernetes `runAsNonRoot` can verify it without reading /etc/passwd.
USER 65532:65532

# 8080: HTTP (/healthcheck, /json, /metrics, /rlconfig); 8081: gRPC (rate limit
# service + grpc.health.v1). With USE_PROMETHEUS=true a separate metrics listener
# opens on PROMETHEUS_ADDR (default :9090).
EXPOSE 8080 8081

# The binary is PID 1 and handles SIGTERM itself: health turns NOT_SERVING at once,
# it keeps answering for --shutdown-delay (default 0s; set it to cover your load
# balancer's reaction time), then drains in-flight requests for at most
# --shutdown-grace (default 10s). Give the orchestrator a longer stop timeout.
ENTRYPOINT ["/usr/local/bin/sluice"]
# No --config here: it would win over envoyproxy/ratelimit's RUNTIME_ROOT/
# RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, so a manifest of theirs that sets them
# and keeps the image's arguments would serve the bundled rules instead of its own.
# Without them, the default ./config (WORKDIR above) is the bundled rules. Their
# compose files' `command: /bin/ratelimit` also serves (sluice takes it as `serve`).
CMD ["serve"]
