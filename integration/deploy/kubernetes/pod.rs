//! The sluice Deployment on its own: what runs (command, image, replicas), where the
//! kubelet looks (ports, probes), how it stops (grace period vs sluice's drain) and how
//! it is hardened. Ports and durations are compared with the settings the binary
//! resolves from the container's args and env, not with numbers repeated here.

use serde_yaml::Value;

use super::{
    assert_termination_grace_exceeds_drain, config_map_dir, labels_match, objects, sluice_pod,
};
use crate::deploy::docker::image;
use crate::deploy::files::{assert_pinned, at, scalar, seq_at, str_at, strings};
use crate::support::cli::rule_files;
use crate::support::sluice::sluice;

#[test]
fn kubernetes_container_command_is_the_image_binary() {
    let command = strings(at(sluice_pod().container, "command"));
    assert!(
        command.is_empty() || command == [image().binary],
        "the container command must be the binary"
    );
}

#[test]
fn kubernetes_runs_at_least_two_replicas() {
    assert!(
        at(sluice_pod().deployment, "spec.replicas")
            .as_u64()
            .unwrap_or(1)
            >= 2,
        "run at least 2 replicas"
    );
}

#[test]
fn kubernetes_deployment_selector_matches_its_pod_labels() {
    let pod = sluice_pod();
    assert!(labels_match(
        at(pod.deployment, "spec.selector.matchLabels"),
        pod.labels()
    ));
}

#[test]
fn kubernetes_images_are_pinned() {
    assert_pinned(str_at(sluice_pod().container, "image"), "Deployment sluice");
    for ((kind, name), o) in objects() {
        for c in seq_at(o, "spec.template.spec.containers") {
            assert_pinned(str_at(c, "image"), &format!("{kind}/{name}"));
        }
    }
}

#[test]
fn kubernetes_container_declares_the_http_and_grpc_ports() {
    let pod = sluice_pod();
    let s = &pod.settings;
    assert_eq!(pod.container_port(&Value::from("http")), s.http_addr.port());
    assert_eq!(pod.container_port(&Value::from("grpc")), s.grpc_addr.port());
}

#[test]
fn kubernetes_container_declares_the_metrics_port() {
    let pod = sluice_pod();
    if let Some(m) = pod.settings.metrics_addr.map(|a| a.port()) {
        assert_eq!(pod.container_port(&Value::from("metrics")), m);
    }
}

/// Scrape annotations, when present, name the metrics listener and its path.
#[test]
fn kubernetes_prometheus_annotations_name_the_metrics_listener() {
    let pod = sluice_pod();
    let s = &pod.settings;
    if let Some(m) = s.metrics_addr.map(|a| a.port()) {
        // (Their names contain dots, so no `at` here.)
        let annotations = at(pod.pod(), "metadata.annotations");
        for (name, want) in [
            ("prometheus.io/port", m.to_string()),
            ("prometheus.io/path", s.metrics_path.clone()),
        ] {
            if let Some(got) = annotations.get(name).and_then(scalar) {
                assert_eq!(got, want, "{name} annotation");
            }
        }
    }
}

/// A probe exists and hits the HTTP listener (the paths themselves are exercised
/// against the binary in kubernetes_probe_paths_answer_on_the_http_listener).
fn assert_probe_uses_the_http_port(probe: &str) {
    let pod = sluice_pod();
    let p = at(pod.container, probe);
    assert!(!p.is_null(), "sluice needs a {probe}");
    assert_eq!(
        pod.container_port(at(p, "httpGet.port")),
        pod.settings.http_addr.port(),
        "{probe} must use sluice's HTTP port"
    );
}

#[test]
fn kubernetes_readiness_probe_uses_the_http_port() {
    assert_probe_uses_the_http_port("readinessProbe");
}

#[test]
fn kubernetes_liveness_probe_uses_the_http_port() {
    assert_probe_uses_the_http_port("livenessProbe");
}

#[test]
fn kubernetes_readiness_probe_uses_healthcheck() {
    assert_eq!(
        str_at(sluice_pod().container, "readinessProbe.httpGet.path"),
        "/healthcheck"
    );
}

#[tokio::test]
async fn kubernetes_probe_paths_answer_on_the_http_listener() {
    let pod = sluice_pod();
    let dir = config_map_dir(&pod.config_maps()[0]);
    let mut builder = sluice();
    for f in rule_files(dir.path()) {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        builder = builder.file(&name, &std::fs::read_to_string(&f).unwrap());
    }
    let s = builder.start().await;
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = str_at(pod.container, &format!("{probe}.httpGet.path"));
        let (status, body) = s.http_get(path).await;
        assert_eq!(status, 200, "{probe} GET {path}: {body}");
    }
}

/// The kubelet waits longer than sluice drains.
#[test]
fn kubernetes_termination_grace_exceeds_sluice_drain() {
    let pod = sluice_pod();
    assert_termination_grace_exceeds_drain(pod.pod(), &pod.settings, "Deployment sluice");
}

#[test]
fn kubernetes_sluice_runs_as_non_root() {
    let pod = sluice_pod();
    let pod_sc = at(pod.pod(), "spec.securityContext");
    let sc = at(pod.container, "securityContext");
    assert!(
        at(sc, "runAsNonRoot").as_bool() == Some(true)
            || at(pod_sc, "runAsNonRoot").as_bool() == Some(true),
        "runAsNonRoot"
    );
}

#[test]
fn kubernetes_root_filesystem_is_read_only() {
    let sc = at(sluice_pod().container, "securityContext");
    assert_eq!(at(sc, "readOnlyRootFilesystem").as_bool(), Some(true));
}

#[test]
fn kubernetes_privilege_escalation_is_disallowed() {
    let sc = at(sluice_pod().container, "securityContext");
    assert_eq!(at(sc, "allowPrivilegeEscalation").as_bool(), Some(false));
}

#[test]
fn kubernetes_sluice_requests_resources() {
    assert!(!at(sluice_pod().container, "resources.requests").is_null());
}

#[test]
fn kubernetes_sluice_memory_is_limited() {
    assert!(!at(sluice_pod().container, "resources.limits.memory").is_null());
}
