//! `docker-compose.yml`: the demo stack. sluice is built from the Dockerfile and talks to
//! the redis service; Envoy loads `examples/envoy.yaml`, whose clusters must be the
//! services and ports compose defines, and whose descriptors the mounted rules limit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_yaml::Value;
use sluice::settings::{Settings, parse_duration};

use super::binary::{Rules, assert_rules_cover, load_rules, resolve};
use super::docker::image;
use super::envoy::{ENVOY_YAML, envoy_bootstrap};
use super::files::{assert_pinned, at, env_map, root, scalar, seq_at, str_at, strings, yaml};

/// (host ip, host port, container port) of a `ports:` entry in either syntax.
fn published(entry: &Value) -> (Option<String>, u16, u16) {
    if let Some(target) = entry.get("target") {
        let target: u16 = scalar(target).unwrap().parse().unwrap();
        let host = entry
            .get("published")
            .and_then(scalar)
            .map_or(target, |p| p.parse().unwrap());
        return (entry.get("host_ip").and_then(scalar), host, target);
    }
    let s = scalar(entry).expect("ports entry");
    let s = s.split('/').next().unwrap();
    let parts: Vec<&str> = s.rsplitn(3, ':').collect();
    match parts.as_slice() {
        [c] => (None, c.parse().unwrap(), c.parse().unwrap()),
        [c, h] => (None, h.parse().unwrap(), c.parse().unwrap()),
        [c, h, ip] => (Some(ip.to_string()), h.parse().unwrap(), c.parse().unwrap()),
        _ => unreachable!(),
    }
}

struct Service {
    name: String,
    def: &'static Value,
}

impl Service {
    /// Container ports reachable from other services (`expose` and `ports`).
    fn container_ports(&self) -> BTreeSet<u16> {
        let mut ports: BTreeSet<u16> = strings(at(self.def, "expose"))
            .iter()
            .map(|p| p.parse().expect("expose port"))
            .collect();
        ports.extend(seq_at(self.def, "ports").iter().map(|p| published(p).2));
        ports
    }

    fn published_container_ports(&self) -> BTreeSet<u16> {
        seq_at(self.def, "ports")
            .iter()
            .map(|p| published(p).2)
            .collect()
    }

    fn depends_on(&self) -> BTreeSet<String> {
        match at(self.def, "depends_on") {
            Value::Mapping(m) => m.keys().filter_map(scalar).collect(),
            v => strings(v).into_iter().collect(),
        }
    }

    /// Bind mounts: container path → host path (relative to the repository root).
    fn binds(&self) -> BTreeMap<String, PathBuf> {
        seq_at(self.def, "volumes")
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => {
                    let mut parts = s.split(':');
                    let (src, dst) = (parts.next()?, parts.next()?);
                    Some((src.to_string(), dst.to_string()))
                }
                _ => Some((
                    str_at(v, "source").to_string(),
                    str_at(v, "target").to_string(),
                )),
            })
            .filter(|(src, _)| src.starts_with('.') || src.starts_with('/'))
            .map(|(src, dst)| (dst, root().join(src)))
            .collect()
    }

    /// The host path bound at `container_path` (or at a parent of it).
    fn host_path(&self, container_path: &Path) -> PathBuf {
        self.binds()
            .into_iter()
            .find_map(|(dst, host)| {
                container_path
                    .strip_prefix(&dst)
                    .ok()
                    .map(|rest| host.join(rest))
            })
            .unwrap_or_else(|| {
                panic!(
                    "compose service `{}` mounts nothing at {}",
                    self.name,
                    container_path.display()
                )
            })
    }

    fn image(&self) -> &'static str {
        at(self.def, "image").as_str().unwrap_or("")
    }

    fn is_built(&self) -> bool {
        !at(self.def, "build").is_null()
    }
}

fn compose() -> &'static Value {
    static COMPOSE: OnceLock<Value> = OnceLock::new();
    COMPOSE.get_or_init(|| yaml("docker-compose.yml"))
}

/// The services of `docker-compose.yml`, parsed once.
fn services() -> &'static [Service] {
    static SERVICES: OnceLock<Vec<Service>> = OnceLock::new();
    SERVICES.get_or_init(|| {
        at(compose(), "services")
            .as_mapping()
            .expect("docker-compose.yml has services")
            .iter()
            .map(|(k, v)| Service {
                name: scalar(k).unwrap(),
                def: v,
            })
            .collect()
    })
}

fn find_service(what: &str, pred: impl Fn(&Service) -> bool) -> &'static Service {
    let found: Vec<_> = services().iter().filter(|s| pred(s)).collect();
    assert_eq!(
        found.len(),
        1,
        "docker-compose.yml: expected one {what} service"
    );
    found[0]
}

fn sluice_service() -> &'static Service {
    find_service("sluice (build: .)", Service::is_built)
}

fn envoy_service() -> &'static Service {
    find_service("envoy", |s| s.image().starts_with("envoyproxy/envoy:"))
}

fn redis_service() -> &'static Service {
    find_service("redis", |s| s.image().starts_with("redis:"))
}

/// What the sluice service runs with: the image's default command unless the compose
/// file overrides it, under the service's environment. Resolved once.
fn sluice_settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let svc = sluice_service();
        let argv = match at(svc.def, "command") {
            Value::Null => image().cmd,
            v => strings(v),
        };
        let env = env_map(at(svc.def, "environment"));
        resolve(&argv, &env, "compose service sluice")
    })
}

/// The rules sluice serves: its config paths, through their bind mounts. Loaded once
/// (loading runs `sluice check`).
fn sluice_rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| {
        let svc = sluice_service();
        let img = image();
        let host_dirs: Vec<PathBuf> = sluice_settings()
            .config_paths
            .iter()
            .map(|p| svc.host_path(&img.in_image(p)))
            .collect();
        load_rules(&host_dirs, "compose sluice config")
    })
}

/// (URL, host, port) of each of sluice's Redis URLs.
fn redis_hosts_and_ports() -> Vec<(String, String, String)> {
    let redis_settings = sluice_settings()
        .redis
        .as_ref()
        .expect("the compose sluice uses Redis, not the in-memory store");
    let mut out = Vec::new();
    for url in redis_settings.main.urls() {
        let authority = url
            .split("://")
            .nth(1)
            .and_then(|r| r.split(['/', '?']).next())
            .unwrap();
        let hostport = authority.rsplit('@').next().unwrap();
        let (host, port) = hostport.split_once(':').unwrap_or((hostport, "6379"));
        out.push((url.clone(), host.to_string(), port.to_string()));
    }
    out
}

#[test]
fn compose_images_are_pinned() {
    for s in services() {
        if !s.is_built() {
            assert_pinned(s.image(), &format!("compose service `{}`", s.name));
        }
    }
}

#[test]
fn compose_sluice_builds_from_the_repository_dockerfile() {
    let svc = sluice_service();
    let context = scalar(at(svc.def, "build"))
        .or_else(|| scalar(at(svc.def, "build.context")))
        .expect("build context");
    assert!(
        root().join(&context).join("Dockerfile").is_file(),
        "sluice builds from {context}/Dockerfile"
    );
}

#[test]
fn compose_sluice_redis_url_names_the_redis_service() {
    let redis = redis_service();
    for (url, host, _) in redis_hosts_and_ports() {
        assert_eq!(host, redis.name, "sluice's Redis URL {url}");
    }
}

#[test]
fn compose_sluice_redis_url_uses_port_6379() {
    for (url, _, port) in redis_hosts_and_ports() {
        assert_eq!(
            port, "6379",
            "sluice's Redis URL {url} (redis listens on 6379)"
        );
    }
}

#[test]
fn compose_sluice_depends_on_redis() {
    assert!(
        sluice_service()
            .depends_on()
            .contains(&redis_service().name),
        "sluice must depend on redis"
    );
}

#[test]
fn compose_sluice_publishes_its_http_and_grpc_ports() {
    let settings = sluice_settings();
    let ports = sluice_service().published_container_ports();
    for (port, what) in [
        (settings.http_addr.port(), "HTTP"),
        (settings.grpc_addr.port(), "gRPC"),
    ] {
        assert!(
            ports.contains(&port),
            "sluice's {what} port {port} is not published"
        );
    }
}

/// Compose waits for sluice's drain before it kills it.
#[test]
fn compose_stop_grace_period_exceeds_sluice_drain() {
    let settings = sluice_settings();
    let stop =
        scalar(at(sluice_service().def, "stop_grace_period")).unwrap_or_else(|| "10s".into());
    let stop = parse_duration("stop_grace_period", &stop).unwrap();
    assert!(
        stop > settings.shutdown_delay + settings.shutdown_grace,
        "sluice's stop_grace_period {stop:?} must exceed its shutdown delay + grace"
    );
}

/// The rule directory sluice serves is a bind mount of files `sluice check` accepts.
#[test]
fn compose_sluice_serves_valid_rules_from_a_bind_mount() {
    sluice_rules();
}

#[test]
fn compose_envoy_loads_examples_envoy_yaml() {
    let envoy = envoy_service();
    let command = strings(at(envoy.def, "command"));
    let config_flag = command
        .iter()
        .position(|a| a == "-c" || a == "--config-path")
        .and_then(|i| command.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "/etc/envoy/envoy.yaml".into());
    let mounted = envoy.host_path(Path::new(&config_flag));
    assert_eq!(
        mounted,
        root().join(ENVOY_YAML),
        "envoy must load {ENVOY_YAML}"
    );
}

#[test]
fn compose_envoy_rate_limit_cluster_points_at_the_sluice_service_grpc_port() {
    assert_eq!(
        envoy_bootstrap().rls,
        vec![(
            sluice_service().name.clone(),
            sluice_settings().grpc_addr.port()
        )],
        "rate_limit_cluster must point at the sluice service's gRPC port"
    );
}

#[test]
fn compose_envoy_depends_on_sluice() {
    assert!(
        envoy_service()
            .depends_on()
            .contains(&sluice_service().name)
    );
}

#[test]
fn compose_envoy_routes_to_an_upstream() {
    assert!(
        !envoy_bootstrap().upstreams.is_empty(),
        "envoy routes to no upstream"
    );
}

#[test]
fn compose_envoy_upstream_clusters_target_ports_their_services_expose() {
    for (cluster, endpoints) in &envoy_bootstrap().upstreams {
        for (host, port) in endpoints {
            let svc = services()
                .iter()
                .find(|s| s.name == *host)
                .unwrap_or_else(|| panic!("cluster `{cluster}` targets unknown service `{host}`"));
            assert!(
                svc.container_ports().contains(port),
                "cluster `{cluster}` targets {host}:{port}, which `{host}` does not expose"
            );
        }
    }
}

#[test]
fn compose_envoy_depends_on_its_upstream_services() {
    let depends_on = envoy_service().depends_on();
    for endpoints in envoy_bootstrap().upstreams.values() {
        for (host, _) in endpoints {
            assert!(depends_on.contains(host));
        }
    }
}

#[test]
fn compose_envoy_listener_ports_are_published() {
    let envoy_ports: Vec<_> = seq_at(envoy_service().def, "ports")
        .iter()
        .map(published)
        .collect();
    for port in &envoy_bootstrap().listener_ports {
        assert!(
            envoy_ports.iter().any(|(_, _, c)| c == port),
            "envoy listener port {port} is not published"
        );
    }
}

#[test]
fn compose_envoy_admin_is_published_on_localhost_only() {
    let envoy_ports: Vec<_> = seq_at(envoy_service().def, "ports")
        .iter()
        .map(published)
        .collect();
    let admin = envoy_bootstrap().admin_port.expect("envoy admin port");
    assert!(
        envoy_ports
            .iter()
            .any(|(ip, _, c)| *c == admin && ip.as_deref() == Some("127.0.0.1")),
        "envoy admin {admin} must be published on 127.0.0.1 only"
    );
}

#[test]
fn compose_rules_limit_every_descriptor_envoy_sends() {
    let boot = envoy_bootstrap();
    assert_rules_cover(sluice_rules(), &boot.domain, &boot.descriptors, "compose");
}

/// The compose demo's sluice puts the decision where that access log reads it.
#[test]
fn envoy_access_log_reads_what_the_demo_sluice_reports() {
    assert!(
        sluice_settings().decision.decision_metadata,
        "docker-compose.yml: sluice should run with SLUICE_DECISION_METADATA=true for the \
         access log of {ENVOY_YAML}"
    );
}

/// The sluices `examples/envoy.yaml` fronts, and whose they are: the compose demo's, the
/// Kubernetes Deployment's (the file runs unchanged beside it) and sluice's defaults.
fn sluices_behind_envoy_yaml() -> [(&'static Settings, &'static str); 3] {
    static DEFAULTS: OnceLock<Settings> = OnceLock::new();
    let defaults =
        DEFAULTS.get_or_init(|| resolve(&["serve".into()], &BTreeMap::new(), "defaults"));
    [
        (sluice_settings(), "docker-compose.yml"),
        (
            &super::kubernetes::sluice_pod().settings,
            "examples/kubernetes",
        ),
        (defaults, "sluice's defaults"),
    ]
}

/// Envoy keeps on sluice no more checks than the overload guide allows, with the compose
/// demo's settings, the Kubernetes Deployment's and sluice's defaults.
#[test]
fn envoy_bounds_the_checks_it_keeps_on_sluice() {
    for (settings, whose) in sluices_behind_envoy_yaml() {
        super::envoy::assert_rls_checks_bounded_as_the_guide(settings, whose);
    }
}

/// Envoy notices a stopping sluice before it stops answering: with the compose demo's
/// settings, the Kubernetes Deployment's (this file runs unchanged beside it) and sluice's
/// defaults.
#[test]
fn envoy_health_check_notices_a_stopping_sluice_within_its_shutdown_delay() {
    for (settings, whose) in sluices_behind_envoy_yaml() {
        super::envoy::assert_rls_health_check_within_shutdown_delay(settings, whose);
    }
}
