//! `examples/kubernetes/`: a kustomize base, overlays (`memory`, `redis`, `redis-tls`)
//! and a prometheus-operator component. Each overlay is rendered once with the real
//! `kubectl kustomize` and parsed into objects by (kind, name), with the sluice
//! Deployment's pod resolved the way the kubelet and the binary would see it: which
//! container ports back a probe or a Service, which ConfigMaps back the config paths.
//! The claims live in `pod` (the Deployment itself, as the `redis` overlay renders it),
//! `wiring` (how the objects and the other example files refer to each other) and
//! `overlays` (what each overlay adds, and that every rendering passes
//! kubernetes-validate); the Istio example reuses this model.

mod overlays;
mod pod;
mod wiring;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use serde_yaml::Value;
use sluice::settings::Settings;

use super::binary::{Rules, load_rules, resolve};
use super::docker::image;
use super::files::{at, env_map, port_at, scalar, seq_at, str_at, strings};

const K8S: &str = "examples/kubernetes";
/// Every overlay under `examples/kubernetes/overlays/`.
const OVERLAYS: [&str; 3] = ["memory", "redis", "redis-tls"];
/// The overlay the pod and wiring claims are made on: the production shape (Redis,
/// several replicas); the others differ from it only where `overlays` says.
const MAIN: &str = "redis";

/// Kubernetes objects by (kind, name).
type Objects = BTreeMap<(String, String), Value>;

/// `kubectl kustomize` of an overlay: the YAML `kubectl apply -k` would send.
fn rendered(overlay: &str) -> &'static str {
    static RENDERED: Mutex<BTreeMap<String, &'static str>> = Mutex::new(BTreeMap::new());
    let mut cache = RENDERED.lock().unwrap_or_else(|e| e.into_inner());
    cache.entry(overlay.to_string()).or_insert_with(|| {
        let dir = super::files::root()
            .join(K8S)
            .join("overlays")
            .join(overlay);
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| {
                panic!("running kubectl kustomize (scripts/test.sh installs kubectl): {e}")
            });
        assert!(
            out.status.success(),
            "kubectl kustomize {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Box::leak(
            String::from_utf8(out.stdout)
                .expect("UTF-8 YAML")
                .into_boxed_str(),
        )
    })
}

/// The objects an overlay renders, parsed once.
fn objects_of(overlay: &str) -> &'static Objects {
    static PARSED: Mutex<BTreeMap<String, &'static Objects>> = Mutex::new(BTreeMap::new());
    let mut cache = PARSED.lock().unwrap_or_else(|e| e.into_inner());
    cache.entry(overlay.to_string()).or_insert_with(|| {
        use serde::Deserialize;
        let mut objects = Objects::new();
        for d in serde_yaml::Deserializer::from_str(rendered(overlay)) {
            let doc = Value::deserialize(d).unwrap_or_else(|e| panic!("{overlay}: {e}"));
            if doc.is_null() {
                continue;
            }
            let kind = str_at(&doc, "kind").to_string();
            let name = str_at(&doc, "metadata.name").to_string();
            let dup = objects.insert((kind.clone(), name.clone()), doc);
            assert!(dup.is_none(), "{overlay}: {kind}/{name} rendered twice");
        }
        Box::leak(Box::new(objects))
    })
}

/// The objects of the main overlay.
fn objects() -> &'static Objects {
    objects_of(MAIN)
}

fn object_of(overlay: &str, kind: &str, name: &str) -> Option<&'static Value> {
    objects_of(overlay).get(&(kind.to_string(), name.to_string()))
}

fn object(kind: &str, name: &str) -> &'static Value {
    object_of(MAIN, kind, name).unwrap_or_else(|| panic!("{K8S}/overlays/{MAIN}: no {kind}/{name}"))
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    let sel = selector.as_mapping().expect("selector");
    !sel.is_empty()
        && sel
            .iter()
            .all(|(k, v)| labels.get(k.as_str().unwrap()) == Some(v))
}

pub struct SluicePod {
    deployment: &'static Value,
    container: &'static Value,
    pub settings: Settings,
}

impl SluicePod {
    fn pod(&self) -> &'static Value {
        at(self.deployment, "spec.template")
    }

    fn labels(&self) -> &'static Value {
        at(self.pod(), "metadata.labels")
    }

    /// A probe's or Service's port (name or number) → container port.
    fn container_port(&self, port: &Value) -> u16 {
        let ports = seq_at(self.container, "ports");
        match port {
            Value::String(name) => ports
                .iter()
                .find(|p| at(p, "name").as_str() == Some(name))
                .map(|p| port_at(p, "containerPort"))
                .unwrap_or_else(|| panic!("the sluice container has no port named `{name}`")),
            v => {
                let n: u16 = scalar(v).and_then(|s| s.parse().ok()).expect("port");
                assert!(
                    ports.iter().any(|p| port_at(p, "containerPort") == n),
                    "the sluice container does not declare port {n}"
                );
                n
            }
        }
    }

    /// ConfigMap files served at the resolved config paths (directory mounts only).
    fn config_maps(&self) -> Vec<String> {
        let volumes = seq_at(self.pod(), "spec.volumes");
        let img = image();
        self.settings
            .config_paths
            .iter()
            .map(|path| img.in_image(path))
            .map(|path| {
                let mount = seq_at(self.container, "volumeMounts")
                    .iter()
                    .find(|m| path.starts_with(str_at(m, "mountPath")))
                    .unwrap_or_else(|| panic!("nothing is mounted at {}", path.display()));
                assert!(
                    at(mount, "subPath").is_null() && at(mount, "subPathExpr").is_null(),
                    "the config mount must be a directory (subPath mounts never update)"
                );
                let volume = volumes
                    .iter()
                    .find(|v| at(v, "name") == at(mount, "name"))
                    .expect("the mounted volume");
                str_at(volume, "configMap.name").to_string()
            })
            .collect()
    }
}

/// The kubelet waits longer than sluice takes to stop: a pod template's
/// `terminationGracePeriodSeconds` (Kubernetes' default 30 when absent) exceeds the shutdown
/// delay and the longest drain of the `settings` it runs with, or it SIGKILLs a pod mid-drain.
pub fn assert_termination_grace_exceeds_drain(pod: &Value, settings: &Settings, what: &str) {
    let grace = at(pod, "spec.terminationGracePeriodSeconds")
        .as_u64()
        .unwrap_or(30);
    assert!(
        std::time::Duration::from_secs(grace) > settings.shutdown_delay + settings.shutdown_grace,
        "{what}: terminationGracePeriodSeconds {grace} must exceed shutdown delay {:?} + grace {:?}",
        settings.shutdown_delay,
        settings.shutdown_grace
    );
}

/// The sluice Deployment's container in the main overlay.
pub fn sluice_pod() -> &'static SluicePod {
    sluice_pod_of(MAIN)
}

/// The sluice Deployment's container in an overlay, and what it runs with: `command`
/// replaces the image's ENTRYPOINT (checked in `pod`), `args` its CMD. Resolved once.
fn sluice_pod_of(overlay: &str) -> &'static SluicePod {
    static PODS: Mutex<BTreeMap<String, &'static SluicePod>> = Mutex::new(BTreeMap::new());
    let mut cache = PODS.lock().unwrap_or_else(|e| e.into_inner());
    cache.entry(overlay.to_string()).or_insert_with(|| {
        let deployment = object_of(overlay, "Deployment", "sluice")
            .unwrap_or_else(|| panic!("{overlay}: no Deployment sluice"));
        let container = seq_at(deployment, "spec.template.spec.containers")
            .iter()
            .find(|c| str_at(c, "name") == "sluice")
            .expect("a container named sluice");
        let args = match at(container, "args") {
            Value::Null => image().cmd,
            v => strings(v),
        };
        let env = env_map(at(container, "env"));
        let settings = resolve(&args, &env, &format!("{overlay}: Deployment sluice"));
        Box::leak(Box::new(SluicePod {
            deployment,
            container,
            settings,
        }))
    })
}

/// The rule files of a ConfigMap, written to a fresh directory.
fn config_map_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = at(object("ConfigMap", name), "data")
        .as_mapping()
        .expect("ConfigMap data");
    for (k, v) in data {
        std::fs::write(dir.path().join(k.as_str().unwrap()), v.as_str().unwrap()).unwrap();
    }
    dir
}

/// The rules of the ConfigMaps mounted at sluice's config paths. Loaded once (loading
/// runs `sluice check`).
pub fn k8s_rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| {
        let dirs: Vec<_> = sluice_pod()
            .config_maps()
            .iter()
            .map(|cm| config_map_dir(cm))
            .collect();
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
        load_rules(&paths, "ConfigMap rules")
    })
}

/// A Service port's `targetPort` (defaults to `port`).
fn target_port(p: &Value) -> &Value {
    match at(p, "targetPort") {
        Value::Null => at(p, "port"),
        t => t,
    }
}

/// The Service `name`'s port for `container_port`, with its target checked.
pub fn service_port(name: &str, container_port: u16) -> Option<u16> {
    let pod = sluice_pod();
    let svc = object("Service", name);
    assert!(
        labels_match(at(svc, "spec.selector"), pod.labels()),
        "Service {name} does not select the sluice pods"
    );
    seq_at(svc, "spec.ports")
        .iter()
        .find(|p| pod.container_port(target_port(p)) == container_port)
        .map(|p| port_at(p, "port"))
}
