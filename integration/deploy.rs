//! The deployment files agree with each other and with the binary: `Dockerfile`,
//! `.dockerignore`, `.github/workflows/release.yml`, `docker-compose.yml`,
//! `examples/envoy.yaml`, the demo rules, the bundled rules (`config/`),
//! `examples/kubernetes/` (its kustomize overlays), `examples/istio/envoyfilter.yaml` and
//! `examples/envoy-gateway/*`.
//!
//! Nothing runs in a container here (there is no Docker engine in CI): the image's build
//! context is rebuilt and its cargo commands run in it (`docker_build`), the files are
//! parsed, sluice's settings are resolved from each file's command line and environment
//! with the binary's own resolution code, and rule files are validated by the real
//! binary (`sluice check`). What a file claims about another file (a service name, a
//! port, a path, a domain, a descriptor key) is checked against that other file.
//!
//! One module per artifact, one test per claim, so a failing test names the claim it
//! checks. Run: `cargo test --test integration deploy::`.

mod binary;
mod files;

mod bundled;
mod compose;
mod docker;
mod docker_build;
mod dockerignore;
mod envoy;
mod envoy_gateway;
mod istio;
mod kubernetes;
mod release_workflow;
