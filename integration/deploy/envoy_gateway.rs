//! `examples/envoy-gateway/`: Envoy Gateway's configuration with the sluice image, and the
//! rate limit Deployment Envoy Gateway generates from it. The Deployment's command and
//! environment are resolved with sluice's own code (`settings::invocation`,
//! `settings::resolve`), so what the walkthrough promises is what the binary does; the
//! metrics mapping file it mounts is served by the real binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde_yaml::Value;
use sluice::settings::{ConfigSource, Settings, XdsSettings, invocation};

use super::binary::try_resolve;
use super::docker::{dockerfile_stages, image};
use super::files::{assert_pinned, at, env_map, port_at, scalar, seq_at, str_at, strings, yaml};
use super::kubernetes::assert_termination_grace_exceeds_drain;
use crate::support::sluice::*;

const DIR: &str = "examples/envoy-gateway";

/// The EnvoyGateway resource inside the `envoy-gateway-config` ConfigMap.
fn envoy_gateway() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| {
        let cm = yaml(format!("{DIR}/envoy-gateway-config.yaml"));
        assert_eq!(str_at(&cm, "kind"), "ConfigMap");
        let text = at(&cm, "data")
            .get("envoy-gateway.yaml")
            .and_then(Value::as_str)
            .expect("data: envoy-gateway.yaml");
        serde_yaml::from_str(text).expect("envoy-gateway.yaml parses")
    })
}

fn rate_limit_container_spec() -> &'static Value {
    at(
        envoy_gateway(),
        "provider.kubernetes.rateLimitDeployment.container",
    )
}

fn deployment() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| yaml(format!("{DIR}/ratelimit-deployment.yaml")))
}

fn container() -> &'static Value {
    let containers = seq_at(deployment(), "spec.template.spec.containers");
    containers
        .iter()
        .find(|c| str_at(c, "name") == "envoy-ratelimit")
        .expect("the envoy-ratelimit container")
}

fn env() -> BTreeMap<String, String> {
    env_map(at(container(), "env"))
}

/// What the container runs with: its command through sluice's own argv handling, its
/// environment through `settings::resolve`.
fn settings() -> &'static Settings {
    static S: OnceLock<Settings> = OnceLock::new();
    S.get_or_init(|| {
        let mut argv = strings(at(container(), "command"));
        argv.extend(strings(at(container(), "args")));
        let argv: Vec<String> = invocation(argv.into_iter().map(Into::into).collect())
            .into_iter()
            .skip(1)
            .map(|a| a.into_string().expect("utf-8 argument"))
            .collect();
        let what = "Envoy Gateway's rate limit Deployment";
        try_resolve(&argv, &env(), what).unwrap_or_else(|e| panic!("{what}: {e}"))
    })
}

fn xds() -> &'static XdsSettings {
    match &settings().config_source {
        ConfigSource::Xds(x) => x,
        other => panic!("Envoy Gateway's environment must select xDS: {other:?}"),
    }
}

#[test]
fn envoy_gateway_runs_a_pinned_sluice_image_of_this_version() {
    let image = str_at(rate_limit_container_spec(), "image");
    assert_pinned(image, "envoy-gateway-config.yaml");
    let tag = image.rsplit(':').next().unwrap_or_default();
    assert_eq!(
        tag,
        env!("CARGO_PKG_VERSION"),
        "the example image is the release of this version (release.yml tags v<version>)"
    );
    assert!(
        image.starts_with("ghcr.io/"),
        "release.yml pushes to ghcr.io: {image}"
    );
}

#[test]
fn envoy_gateway_deployment_reflects_the_configuration() {
    let spec = rate_limit_container_spec();
    assert_eq!(str_at(container(), "image"), str_at(spec, "image"));
    // Envoy Gateway's rule: container.env entries replace variables of the same name or
    // are appended.
    let env = env();
    for (k, v) in env_map(at(spec, "env")) {
        assert_eq!(env.get(&k), Some(&v), "the Deployment lacks {k}={v}");
    }
    let redis = str_at(envoy_gateway(), "rateLimit.backend.redis.url");
    assert_eq!(env.get("REDIS_URL").map(String::as_str), Some(redis));
}

#[test]
fn envoy_gateway_command_is_a_binary_the_image_provides() {
    let command = strings(at(container(), "command"));
    let path = command.first().expect("a command");
    let stages = dockerfile_stages();
    let runtime = stages.last().expect("a runtime stage");
    let source_of = |dest: &str| {
        runtime
            .copies()
            .into_iter()
            .find(|(from, _, d)| from.is_some() && d == dest)
            .map(|(from, sources, _)| (from, sources))
    };
    let entrypoint = source_of(&image().binary).expect("the ENTRYPOINT binary is copied");
    assert_eq!(
        source_of(path),
        Some(entrypoint),
        "the image must carry {path} as the same binary as its ENTRYPOINT"
    );
}

#[test]
fn envoy_gateway_environment_takes_rules_from_its_xds_server() {
    let x = xds();
    assert_eq!(x.server_url, "envoy-gateway:18001");
    assert_eq!(x.node_id, "envoy-ratelimit");
    assert!(
        settings().force_start_without_initial_config,
        "Envoy Gateway starts the service before it pushes rules"
    );
}

#[test]
fn envoy_gateway_xds_connection_is_mutual_tls() {
    let tls = xds().tls.as_ref().expect("TLS to the xDS server");
    assert!(tls.client_cert.is_some() && tls.client_key.is_some() && tls.ca_cert.is_some());
}

/// Every TLS file the environment names is a key of the mounted secret.
#[test]
fn envoy_gateway_tls_files_come_from_the_mounted_secret() {
    let mounts = seq_at(container(), "volumeMounts");
    let volumes = seq_at(deployment(), "spec.template.spec.volumes");
    let env = env();
    let names = [
        "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
        "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
        "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        "GRPC_SERVER_TLS_CERT",
        "GRPC_SERVER_TLS_KEY",
        "GRPC_CLIENT_TLS_CACERT",
    ];
    for name in names {
        let file = Path::new(env.get(name).unwrap_or_else(|| panic!("{name} is not set")));
        let mount = mounts
            .iter()
            .find(|m| file.parent() == Some(Path::new(str_at(m, "mountPath"))))
            .unwrap_or_else(|| panic!("{name}={} is under no volume mount", file.display()));
        let volume = volumes
            .iter()
            .find(|v| str_at(v, "name") == str_at(mount, "name"))
            .expect("the mount's volume");
        assert_eq!(
            str_at(volume, "secret.secretName"),
            "envoy-rate-limit",
            "{name}: Envoy Gateway's certgen secret"
        );
        let key = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert!(
            ["tls.crt", "tls.key", "ca.crt"].contains(&key),
            "{name}: {key} is not a key of the TLS secret"
        );
    }
}

/// The gRPC listener's TLS uses sluice's (and envoyproxy/ratelimit's) names; Envoy
/// Gateway's own CA variable is read by neither, so the configuration adds the real one.
#[test]
fn envoy_gateway_grpc_listener_tls_uses_the_setting_names_sluice_reads() {
    let env = env();
    for name in [
        "GRPC_SERVER_USE_TLS",
        "GRPC_SERVER_TLS_CERT",
        "GRPC_SERVER_TLS_KEY",
    ] {
        assert!(env.contains_key(name), "{name} is not set");
    }
    let added = env_map(at(rate_limit_container_spec(), "env"));
    assert_eq!(
        added.get("GRPC_CLIENT_TLS_CACERT").map(String::as_str),
        env.get("GRPC_SERVER_TLS_CA_CERT").map(String::as_str),
        "mutual TLS: the client CA is Envoy Gateway's CA, under the name sluice reads"
    );
}

#[test]
fn envoy_gateway_grpc_port_is_the_one_sluice_serves() {
    let grpc = seq_at(container(), "ports")
        .iter()
        .find(|p| str_at(p, "name") == "grpc")
        .map(|p| port_at(p, "containerPort"))
        .expect("a grpc port");
    assert_eq!(grpc, settings().grpc_addr.port());
}

#[test]
fn envoy_gateway_probes_ask_sluices_healthcheck() {
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let get = at(container(), &format!("{probe}.httpGet"));
        assert_eq!(port_at(get, "port"), settings().http_addr.port(), "{probe}");
        assert_eq!(str_at(get, "path"), "/healthcheck", "{probe}");
    }
}

/// The Deployment Envoy Gateway makes sets no shutdown settings: sluice's defaults (a 5s
/// delay for Envoy and the endpoints to stop sending, then up to 10s of drain) apply, and
/// the kubelet waits longer than both.
#[test]
fn envoy_gateway_termination_grace_exceeds_sluice_drain() {
    let pod = at(deployment(), "spec.template");
    assert_termination_grace_exceeds_drain(pod, settings(), DIR);
}

#[test]
fn envoy_gateway_scrapes_sluices_metrics_listener() {
    let s = settings();
    let metrics = s
        .metrics_addr
        .expect("USE_PROMETHEUS opens the metrics listener");
    let declared = seq_at(container(), "ports")
        .iter()
        .find(|p| str_at(p, "name") == "metrics")
        .map(|p| port_at(p, "containerPort"));
    assert_eq!(declared, Some(metrics.port()));
    let annotations = at(deployment(), "spec.template.metadata.annotations");
    let annotated = annotations
        .get("prometheus.io/port")
        .and_then(scalar)
        .and_then(|p| p.parse::<u16>().ok());
    assert_eq!(annotated, Some(metrics.port()));
    let path = annotations.get("prometheus.io/path").and_then(scalar);
    assert_eq!(path.as_deref(), Some(s.metrics_path.as_str()));
}

#[test]
fn envoy_gateway_redis_is_the_configured_backend() {
    let redis = settings().redis.as_ref().expect("a Redis store");
    let url = str_at(envoy_gateway(), "rateLimit.backend.redis.url");
    assert_eq!(redis.main.urls(), [&format!("redis://{url}")]);
}

/// The mapping file Envoy Gateway names in `PROMETHEUS_MAPPER_YAML` is a key of the
/// ConfigMap mounted at its directory (statsd-exporter-config.yaml).
fn mapping_file() -> String {
    let path = settings()
        .telemetry
        .metrics_mapper
        .clone()
        .expect("PROMETHEUS_MAPPER_YAML is set");
    let mount = seq_at(container(), "volumeMounts")
        .iter()
        .find(|m| path.parent() == Some(Path::new(str_at(m, "mountPath"))))
        .unwrap_or_else(|| panic!("{} is under no volume mount", path.display()));
    let volume = seq_at(deployment(), "spec.template.spec.volumes")
        .iter()
        .find(|v| str_at(v, "name") == str_at(mount, "name"))
        .expect("the mount's volume");
    let config_map = yaml(format!("{DIR}/statsd-exporter-config.yaml"));
    assert_eq!(str_at(&config_map, "kind"), "ConfigMap");
    assert_eq!(
        str_at(volume, "configMap.name"),
        str_at(&config_map, "metadata.name")
    );
    let key = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    at(&config_map, "data")
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("the ConfigMap has no key {key}"))
        .to_owned()
}

/// Envoy Gateway's own mapping file works as envoyproxy/ratelimit's exporter applies it:
/// per-rule series labelled domain/key1(/key2), the service's series under their names,
/// everything else dropped. No variable needs overriding.
#[tokio::test]
async fn envoy_gateway_metrics_mapping_file_is_served_as_mapped() {
    let added = env_map(at(rate_limit_container_spec(), "env"));
    assert!(
        !added.contains_key("PROMETHEUS_MAPPER_YAML"),
        "Envoy Gateway's own mapping file is kept"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conf.yaml");
    write(&path, &mapping_file());
    let s = sluice()
        // Rules of one depth: statsd_exporter (and sluice) keep the label names a metric
        // was first seen with, and Envoy Gateway's file maps two levels and three levels of
        // a stats key to different label sets.
        .file(
            "eg.yaml",
            "domain: eg\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: hour, requests_per_unit: 2}\n      - key: s\n        shadow_mode: true\n        rate_limit: {unit: hour, requests_per_unit: 0}\n",
        )
        .env("PROMETHEUS_MAPPER_YAML", path.display().to_string())
        .start()
        .await;
    let mut c = s.client().await;
    for _ in 0..3 {
        call(&mut c, req("eg", vec![desc(&[("a", "1"), ("b", "x")])])).await;
    }
    call(&mut c, req("eg", vec![desc(&[("a", "1"), ("s", "y")])])).await;
    let (_, body) = s.http_get("/metrics").await;
    for series in [
        "ratelimit_service_rate_limit_total_hits{domain=\"eg\",key1=\"a\",key2=\"b\"} 3",
        "ratelimit_service_rate_limit_within_limit{domain=\"eg\",key1=\"a\",key2=\"b\"} 2",
        "ratelimit_service_rate_limit_over_limit{domain=\"eg\",key1=\"a\",key2=\"b\"} 1",
        "ratelimit_service_rate_limit_shadow_mode{domain=\"eg\",key1=\"a\",key2=\"s\"} 1",
        "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"} 4",
        "ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"} 4",
        "ratelimit_service_config_load_success 1",
    ] {
        assert!(
            body.lines().any(|l| l == series),
            "{series} missing:\n{body}"
        );
    }
    // The catch-all drop: no series under an escaped statsd name, no descriptor label.
    assert!(!body.contains("descriptor=\""), "{body}");
    assert!(
        !body.contains("ratelimit_service_global_shadow_mode"),
        "{body}"
    );
}
