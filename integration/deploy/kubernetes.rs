//! `examples/kubernetes/*`, parsed once into objects by (kind, name), with the sluice
//! Deployment's pod resolved the way the kubelet and the binary would see it: which
//! container ports back a probe or a Service, which ConfigMaps back the config paths.
//! The claims live in `pod` (the Deployment itself) and `wiring` (how the objects and
//! the other example files refer to each other); the Istio example reuses this model.

mod pod;
mod wiring;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_yaml::Value;
use sluice::settings::Settings;

use super::binary::{Rules, load_rules, resolve, rule_files};
use super::docker::image;
use super::files::{at, env_map, port_at, root, scalar, seq_at, str_at, strings, yaml_docs};

const K8S: &str = "examples/kubernetes";

/// Kubernetes objects by (kind, name).
type Objects = BTreeMap<(String, String), Value>;

/// Every object of every manifest, read once.
fn objects() -> &'static Objects {
    static OBJECTS: OnceLock<Objects> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let mut objects = Objects::new();
        for f in rule_files(&root().join(K8S)) {
            let rel = f.strip_prefix(root()).unwrap().to_path_buf();
            for doc in yaml_docs(&rel) {
                let kind = str_at(&doc, "kind").to_string();
                if kind == "Kustomization" {
                    continue;
                }
                let name = str_at(&doc, "metadata.name").to_string();
                let dup = objects.insert((kind.clone(), name.clone()), doc);
                assert!(dup.is_none(), "{kind}/{name} defined twice");
            }
        }
        objects
    })
}

fn object(kind: &str, name: &str) -> &'static Value {
    objects()
        .get(&(kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("{K8S}: no {kind}/{name}"))
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
        self.settings
            .config_paths
            .iter()
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

/// The sluice Deployment's container, and what it runs with: `command` replaces the
/// image's ENTRYPOINT (checked in `pod`), `args` its CMD. Resolved once.
pub fn sluice_pod() -> &'static SluicePod {
    static POD: OnceLock<SluicePod> = OnceLock::new();
    POD.get_or_init(|| {
        let deployment = object("Deployment", "sluice");
        let container = seq_at(deployment, "spec.template.spec.containers")
            .iter()
            .find(|c| str_at(c, "name") == "sluice")
            .expect("a container named sluice");
        let args = match at(container, "args") {
            Value::Null => image().cmd,
            v => strings(v),
        };
        let env = env_map(at(container, "env"));
        let settings = resolve(&args, &env, "Deployment sluice");
        SluicePod {
            deployment,
            container,
            settings,
        }
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
