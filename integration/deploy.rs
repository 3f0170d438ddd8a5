//! The deployment files agree with each other and with the binary: `Dockerfile`,
//! `.dockerignore`, `docker-compose.yml`, `examples/envoy.yaml`, the demo rules,
//! `examples/kubernetes/*` and `examples/istio/envoyfilter.yaml`.
//!
//! Nothing runs in a container here (there is no Docker engine in CI): the files are
//! parsed, sluice's settings are resolved from each file's command line and environment
//! with the binary's own resolution code, and rule files are validated by the real
//! binary (`sluice check`). What a file claims about another file (a service name, a
//! port, a path, a domain, a descriptor key) is checked against that other file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{CommandFactory, Parser};
use serde::Deserialize;
use serde_yaml::Value;
use sluice::config::{LoadOptions, RateLimitConfig};
use sluice::settings::{Cli, Command as SluiceCommand, Settings, parse_duration};

use crate::support::sluice::sluice;

// ---------------------------------------------------------------------------------------
// Files

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: impl AsRef<Path>) -> String {
    let p = root().join(rel.as_ref());
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// Every YAML document of a file (`---`-separated), empty documents skipped.
fn yaml_docs(rel: impl AsRef<Path>) -> Vec<Value> {
    let rel = rel.as_ref();
    let text = read(rel);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", rel.display())))
        .filter(|v| !v.is_null())
        .collect()
}

fn yaml(rel: impl AsRef<Path>) -> Value {
    let rel = rel.as_ref();
    let mut docs = yaml_docs(rel);
    assert_eq!(
        docs.len(),
        1,
        "{}: expected one YAML document",
        rel.display()
    );
    docs.remove(0)
}

/// `v[a][b]…`, `Null` when any step is missing (string keys and list indexes).
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    path.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) if v.is_sequence() => v.get(i).unwrap_or(&NULL),
        _ => v.get(k).unwrap_or(&NULL),
    })
}

fn str_at<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("`{path}` is not a string in {v:?}"))
}

fn seq_at<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    at(v, path).as_sequence().map_or(&[], |s| s.as_slice())
}

/// A scalar as text (ports are written as numbers or strings).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn port_at(v: &Value, path: &str) -> u16 {
    scalar(at(v, path))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("`{path}` is not a port in {v:?}"))
}

/// A `name=value` list or a map (docker-compose `environment`, Kubernetes `env`).
fn env_map(v: &Value) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = scalar(k).expect("env name");
                env.insert(k, scalar(v).unwrap_or_default());
            }
        }
        Value::Sequence(items) => {
            for item in items {
                if let Some(s) = item.as_str() {
                    let (k, v) = s.split_once('=').unwrap_or((s, ""));
                    env.insert(k.to_string(), v.to_string());
                } else if let Some(name) = item.get("name").and_then(Value::as_str) {
                    // Kubernetes: only literal values are known here (valueFrom is not).
                    if let Some(value) = item.get("value").and_then(scalar) {
                        env.insert(name.to_string(), value);
                    }
                }
            }
        }
        _ => {}
    }
    env
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(s) => s.iter().filter_map(scalar).collect(),
        Value::String(s) => s.split_whitespace().map(String::from).collect(),
        _ => Vec::new(),
    }
}

/// `image:tag` pinned to a version: never `latest`, and a version number in the tag or,
/// for images that carry it in their name (`distroless/cc-debian12:nonroot`), there.
fn assert_pinned(image: &str, what: &str) {
    let image = image.split('@').next().unwrap_or(image);
    let last = image.rsplit('/').next().unwrap_or(image);
    let (name, tag) = last
        .split_once(':')
        .unwrap_or_else(|| panic!("{what}: image `{image}` has no tag"));
    assert!(
        tag != "latest" && format!("{name}{tag}").chars().any(|c| c.is_ascii_digit()),
        "{what}: image `{image}` is not pinned to a version"
    );
}

// ---------------------------------------------------------------------------------------
// sluice's own view of a command line + environment

/// What `sluice <argv>` would run with under `env`, resolved by the binary's code.
/// `SLUICE_*` variables are turned into their flags, because clap reads them from the
/// process environment, which a test cannot set for a container.
fn resolve(argv: &[String], env: &BTreeMap<String, String>, what: &str) -> Settings {
    let mut args = vec!["sluice".to_string()];
    args.extend(argv.iter().cloned());
    let cli = Cli::command();
    let serve = cli
        .find_subcommand("serve")
        .expect("sluice has a serve subcommand");
    for arg in serve.get_arguments() {
        let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let flag = format!("--{long}");
        let given = argv
            .iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        if let Some(value) = var.to_str().and_then(|v| env.get(v))
            && !given
        {
            args.push(format!("{flag}={value}"));
        }
    }
    let parsed = Cli::try_parse_from(&args)
        .unwrap_or_else(|e| panic!("{what}: `{}` does not parse: {e}", args.join(" ")));
    let SluiceCommand::Serve(serve) = parsed.command else {
        panic!("{what}: `{}` is not `sluice serve`", args.join(" "));
    };
    Settings::resolve(&serve, &|name| env.get(name).cloned())
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// `sluice check PATH...` must pass.
fn assert_rules_valid(paths: &[PathBuf], what: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("check")
        .args(paths)
        .env_remove("MERGE_DOMAIN_CONFIG")
        .env_remove("SLUICE_MERGE_DOMAINS")
        .output()
        .expect("run sluice check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what}: sluice check failed:\n{text}");
    assert_eq!(text.trim(), "all rate limit configs ok", "{what}");
}

// ---------------------------------------------------------------------------------------
// Rule files, loaded and matched by sluice's own config code

/// Rule files under `dir` (recursively, dot-entries skipped, as sluice discovers them).
fn rule_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            out.extend(rule_files(&p));
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(p);
        }
    }
    out
}

/// The rules a deployment serves, and for each descriptor key the request values worth
/// trying against them: every value the rules name (globs with `*` → `x`), plus one
/// they do not name (for key-only rules).
struct Rules {
    config: RateLimitConfig,
    values: BTreeMap<String, BTreeSet<String>>,
}

const UNNAMED_VALUE: &str = "value-named-by-no-rule";

fn collect_values(descriptors: &Value, values: &mut BTreeMap<String, BTreeSet<String>>) {
    for d in descriptors.as_sequence().into_iter().flatten() {
        let key = str_at(d, "key").to_string();
        let set = values.entry(key).or_default();
        set.insert(UNNAMED_VALUE.into());
        if let Some(v) = d.get("value").and_then(scalar) {
            set.insert(v.replace('*', "x"));
        }
        collect_values(at(d, "descriptors"), values);
    }
}

fn load_rules(paths: &[PathBuf], what: &str) -> Rules {
    assert_rules_valid(paths, what);
    let config = RateLimitConfig::load(paths, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let mut values = BTreeMap::new();
    for p in paths {
        let files = if p.is_dir() {
            rule_files(p)
        } else {
            vec![p.clone()]
        };
        for f in files {
            let v: Value = serde_yaml::from_str(&std::fs::read_to_string(&f).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            collect_values(at(&v, "descriptors"), &mut values);
        }
    }
    Rules { config, values }
}

/// One descriptor entry as Envoy builds it: the key, and the value when it is fixed by
/// the config (`generic_key`, `header_value_match`) rather than taken from the request.
type Entry = (String, Option<String>);

/// Every descriptor Envoy sends is limited by some rule for some request values, as
/// sluice's matcher (`Domain::find`) decides.
fn assert_rules_cover(rules: &Rules, domain: &str, descriptors: &[Vec<Entry>], what: &str) {
    let tree = rules
        .config
        .domain(domain)
        .unwrap_or_else(|| panic!("{what}: domain `{domain}` is in no rule file"));
    assert!(!descriptors.is_empty(), "{what}: no rate_limits actions");
    for d in descriptors {
        // The candidate values of each entry, then every combination of them.
        let choices: Vec<Vec<&str>> = d
            .iter()
            .map(|(key, fixed)| match fixed {
                Some(v) => vec![v.as_str()],
                None => rules
                    .values
                    .get(key)
                    .map(|vs| vs.iter().map(String::as_str).collect())
                    .unwrap_or_default(),
            })
            .collect();
        let mut combos: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
        for ((key, _), values) in d.iter().zip(&choices) {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((key.as_str(), *v));
                        c
                    })
                })
                .collect();
        }
        assert!(
            combos.iter().any(|entries| tree.find(entries).is_some()),
            "{what}: descriptor {d:?} is limited by no rule of domain `{domain}`"
        );
    }
}

/// `*` globs (`.dockerignore` patterns).
fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, rest)) => {
            let Some(s) = s.strip_prefix(head) else {
                return false;
            };
            (0..=s.len())
                .filter(|&i| s.is_char_boundary(i))
                .any(|i| glob(rest, &s[i..]))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Envoy

const RATELIMIT_FILTER: &str = "envoy.filters.http.ratelimit";
const RATELIMIT_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";

/// The descriptor one `rate_limits` entry produces (keys as Envoy names them).
fn descriptor(rate_limit: &Value, what: &str) -> Vec<Entry> {
    seq_at(rate_limit, "actions")
        .iter()
        .map(|action| {
            let (kind, body) = action
                .as_mapping()
                .and_then(|m| m.iter().next())
                .map(|(k, v)| (k.as_str().unwrap_or(""), v))
                .unwrap_or_else(|| panic!("{what}: bad action {action:?}"));
            let named = |default: &str| {
                body.get("descriptor_key")
                    .and_then(Value::as_str)
                    .unwrap_or(default)
                    .to_string()
            };
            let fixed = || Some(str_at(body, "descriptor_value").to_string());
            match kind {
                "source_cluster" => ("source_cluster".into(), None),
                "destination_cluster" => ("destination_cluster".into(), None),
                "remote_address" => ("remote_address".into(), None),
                "masked_remote_address" => ("masked_remote_address".into(), None),
                "request_headers" => (str_at(body, "descriptor_key").into(), None),
                "query_parameters" => (str_at(body, "descriptor_key").into(), None),
                "metadata" => (str_at(body, "descriptor_key").into(), None),
                "generic_key" => (named("generic_key"), fixed()),
                "header_value_match" => (named("header_match"), fixed()),
                "query_parameter_value_match" => (named("query_match"), fixed()),
                other => panic!("{what}: action `{other}` is not understood by this test"),
            }
        })
        .collect()
}

fn descriptors(rate_limits: &[Value], what: &str) -> Vec<Vec<Entry>> {
    rate_limits.iter().map(|r| descriptor(r, what)).collect()
}

/// `socket_address`es of a cluster's `load_assignment`.
fn cluster_endpoints(cluster: &Value) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    for group in seq_at(cluster, "load_assignment.endpoints") {
        for lb in seq_at(group, "lb_endpoints") {
            let sa = at(lb, "endpoint.address.socket_address");
            out.push((str_at(sa, "address").to_string(), port_at(sa, "port_value")));
        }
    }
    assert!(!out.is_empty(), "cluster without endpoints: {cluster:?}");
    out
}

fn speaks_http2(cluster: &Value) -> bool {
    // (Extension names contain dots, so no `at` here.)
    cluster
        .get("typed_extension_protocol_options")
        .and_then(|o| o.get("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"))
        .and_then(|o| o.get("explicit_http_config"))
        .and_then(|c| c.get("http2_protocol_options"))
        .is_some()
        // The deprecated cluster-level field (the istio.io sample still uses it).
        || cluster.get("http2_protocol_options").is_some()
}

/// The rate limit filter's config, checked for what every deployment here relies on.
fn check_ratelimit_filter(config: &Value, what: &str) -> (String, String) {
    assert_eq!(str_at(config, "@type"), RATELIMIT_TYPE, "{what}");
    assert_eq!(
        str_at(config, "rate_limit_service.transport_api_version"),
        "V3",
        "{what}: sluice speaks only the v3 RLS API"
    );
    assert_eq!(
        at(config, "failure_mode_deny").as_bool(),
        Some(false),
        "{what}: the examples fail open (say so explicitly)"
    );
    assert_eq!(
        str_at(config, "enable_x_ratelimit_headers"),
        "DRAFT_VERSION_03",
        "{what}"
    );
    let domain = str_at(config, "domain").to_string();
    let cluster = str_at(
        config,
        "rate_limit_service.grpc_service.envoy_grpc.cluster_name",
    )
    .to_string();
    (domain, cluster)
}

struct Bootstrap {
    domain: String,
    /// Where the rate limit filter's gRPC calls go.
    rls: Vec<(String, u16)>,
    /// Every other cluster's endpoints, by cluster name.
    upstreams: BTreeMap<String, Vec<(String, u16)>>,
    descriptors: Vec<Vec<Entry>>,
    listener_ports: Vec<u16>,
    admin_port: Option<u16>,
}

fn parse_bootstrap(b: &Value, what: &str) -> Bootstrap {
    let clusters: BTreeMap<String, &Value> = seq_at(b, "static_resources.clusters")
        .iter()
        .map(|c| (str_at(c, "name").to_string(), c))
        .collect();
    let mut domain = None;
    let mut rls_cluster = None;
    let mut descs = Vec::new();
    let mut routed = BTreeSet::new();
    let mut listener_ports = Vec::new();
    for listener in seq_at(b, "static_resources.listeners") {
        listener_ports.push(port_at(listener, "address.socket_address.port_value"));
        for chain in seq_at(listener, "filter_chains") {
            for filter in seq_at(chain, "filters") {
                if str_at(filter, "name") != "envoy.filters.network.http_connection_manager" {
                    continue;
                }
                let hcm = at(filter, "typed_config");
                let http_filters = seq_at(hcm, "http_filters");
                let names: Vec<&str> = http_filters.iter().map(|f| str_at(f, "name")).collect();
                assert_eq!(
                    names.last(),
                    Some(&"envoy.filters.http.router"),
                    "{what}: the router must be the last HTTP filter"
                );
                let rl = http_filters
                    .iter()
                    .find(|f| str_at(f, "name") == RATELIMIT_FILTER)
                    .unwrap_or_else(|| panic!("{what}: no {RATELIMIT_FILTER} filter"));
                let (d, c) = check_ratelimit_filter(at(rl, "typed_config"), what);
                domain = Some(d);
                rls_cluster = Some(c);
                for vhost in seq_at(hcm, "route_config.virtual_hosts") {
                    descs.extend(descriptors(seq_at(vhost, "rate_limits"), what));
                    for route in seq_at(vhost, "routes") {
                        routed.insert(str_at(route, "route.cluster").to_string());
                        descs.extend(descriptors(seq_at(route, "route.rate_limits"), what));
                    }
                }
            }
        }
    }
    let domain = domain.unwrap_or_else(|| panic!("{what}: no HTTP connection manager"));
    let rls_cluster = rls_cluster.expect("rate limit cluster");
    let rls = clusters
        .get(&rls_cluster)
        .unwrap_or_else(|| panic!("{what}: cluster `{rls_cluster}` is not defined"));
    assert!(
        speaks_http2(rls),
        "{what}: cluster `{rls_cluster}` must speak HTTP/2 (gRPC)"
    );
    for c in &routed {
        assert!(
            clusters.contains_key(c),
            "{what}: routes to undefined cluster `{c}`"
        );
    }
    let upstreams = clusters
        .iter()
        .filter(|(name, _)| **name != rls_cluster)
        .map(|(name, c)| (name.clone(), cluster_endpoints(c)))
        .collect();
    let admin_port = scalar(at(b, "admin.address.socket_address.port_value"))
        .map(|p| p.parse().expect("admin port"));
    Bootstrap {
        domain,
        rls: cluster_endpoints(rls),
        upstreams,
        descriptors: descs,
        listener_ports,
        admin_port,
    }
}

const ENVOY_YAML: &str = "examples/envoy.yaml";

fn envoy_bootstrap() -> Bootstrap {
    parse_bootstrap(&yaml(ENVOY_YAML), ENVOY_YAML)
}

// ---------------------------------------------------------------------------------------
// Dockerfile

struct Stage {
    base: String,
    name: Option<String>,
    /// (instruction, arguments) in order, continuation lines joined.
    instructions: Vec<(String, String)>,
}

fn dockerfile_stages() -> Vec<Stage> {
    let text = read("Dockerfile");
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(t);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for l in logical {
        let (ins, args) = l.split_once(char::is_whitespace).unwrap_or((&l, ""));
        let (ins, args) = (ins.to_ascii_uppercase(), args.trim().to_string());
        if ins == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let base = words
                .iter()
                .find(|w| !w.starts_with("--"))
                .expect("FROM image");
            let name = words
                .iter()
                .position(|w| w.eq_ignore_ascii_case("as"))
                .and_then(|i| words.get(i + 1));
            stages.push(Stage {
                base: base.to_string(),
                name: name.map(|n| n.to_string()),
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push((ins, args));
        }
    }
    stages
}

impl Stage {
    fn last(&self, ins: &str) -> Option<&str> {
        self.instructions
            .iter()
            .rev()
            .find(|(i, _)| i == ins)
            .map(|(_, a)| a.as_str())
    }

    /// COPY instructions: (`--from` stage, sources, destination).
    fn copies(&self) -> Vec<(Option<String>, Vec<String>, String)> {
        self.instructions
            .iter()
            .filter(|(i, _)| i == "COPY")
            .map(|(_, a)| {
                let mut words: Vec<String> = a.split_whitespace().map(String::from).collect();
                let from = words
                    .iter()
                    .find_map(|w| w.strip_prefix("--from=").map(String::from));
                words.retain(|w| !w.starts_with("--"));
                let dest = words.pop().expect("COPY destination");
                (from, words, dest)
            })
            .collect()
    }
}

/// An exec-form (JSON array) CMD or ENTRYPOINT.
fn exec_form(args: &str, what: &str) -> Vec<String> {
    serde_json::from_str(args)
        .unwrap_or_else(|e| panic!("Dockerfile {what} must be exec form (JSON): {e}"))
}

/// The image's default command line, after the binary: ENTRYPOINT + CMD.
struct Image {
    binary: String,
    cmd: Vec<String>,
    exposed: Vec<u16>,
}

fn image() -> Image {
    let stages = dockerfile_stages();
    let last = stages.last().expect("Dockerfile has a FROM");
    let entrypoint = exec_form(last.last("ENTRYPOINT").expect("ENTRYPOINT"), "ENTRYPOINT");
    let cmd = exec_form(last.last("CMD").expect("CMD"), "CMD");
    let exposed = last
        .instructions
        .iter()
        .filter(|(i, _)| i == "EXPOSE")
        .flat_map(|(_, a)| a.split_whitespace())
        .map(|p| p.split('/').next().unwrap().parse().expect("EXPOSE port"))
        .collect();
    assert_eq!(entrypoint.len(), 1, "ENTRYPOINT is the binary alone");
    Image {
        binary: entrypoint[0].clone(),
        cmd,
        exposed,
    }
}

fn dockerignore_excludes(patterns: &[String], rel: &str) -> bool {
    let first = rel.trim_start_matches("./").split('/').next().unwrap_or("");
    patterns.iter().any(|p| {
        let p = p.trim_start_matches('/').trim_end_matches('/');
        !p.contains('/') && glob(p, first)
    })
}

#[test]
fn dockerfile_builds_in_stages_and_runs_the_bundled_config_as_non_root() {
    let stages = dockerfile_stages();
    assert!(stages.len() >= 2, "the Dockerfile must be multi-stage");
    let last = stages.last().unwrap();
    let builders: BTreeSet<&str> = stages[..stages.len() - 1]
        .iter()
        .filter_map(|s| s.name.as_deref())
        .collect();

    // Non-root: an explicit numeric USER other than 0 (Kubernetes' runAsNonRoot can
    // only verify a numeric one), on a base that is not the build image.
    let user = last.last("USER").expect("the final stage must set USER");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER `{user}` must be a numeric non-root uid"
    );
    assert!(
        !last.base.starts_with("rust:"),
        "the final stage must not be the Rust build image"
    );
    assert_pinned(&last.base, "Dockerfile runtime stage");

    // Dependency caching: the builder compiles the dependencies (Cargo.lock copied, a
    // cargo build run) before the sources are copied, so source edits reuse that layer.
    let builder = &stages[0];
    let position = |pred: &dyn Fn(&str, &str) -> bool| {
        builder.instructions.iter().position(|(i, a)| pred(i, a))
    };
    let lock = position(&|i, a| i == "COPY" && a.contains("Cargo.lock"));
    let deps = position(&|i, a| i == "RUN" && a.contains("cargo build"));
    let sources = position(&|i, a| i == "COPY" && a.split_whitespace().any(|w| w == "src"));
    assert!(
        matches!((lock, deps, sources), (Some(l), Some(d), Some(s)) if l < d && d < s),
        "the builder must build the dependencies before it copies src/"
    );

    // The binary comes from a builder stage and is the ENTRYPOINT.
    let img = image();
    let copies = last.copies();
    assert!(
        copies.iter().any(
            |(from, _, dest)| from.as_deref().is_some_and(|f| builders.contains(f))
                && *dest == img.binary
        ),
        "the final stage must copy {} from a builder stage",
        img.binary
    );

    // The default command serves the config the image ships, on the ports it exposes.
    let settings = resolve(&img.cmd, &BTreeMap::new(), "Dockerfile CMD");
    for p in &settings.config_paths {
        let p = p.to_str().unwrap();
        assert!(
            copies
                .iter()
                .any(|(_, _, dest)| dest.trim_end_matches('/') == p),
            "CMD serves {p}, which the final stage does not COPY"
        );
    }
    for (port, what) in [
        (settings.http_addr.port(), "HTTP"),
        (settings.grpc_addr.port(), "gRPC"),
    ] {
        assert!(
            img.exposed.contains(&port),
            "EXPOSE lacks the {what} port {port}"
        );
    }

    // Everything copied from the build context exists and is not .dockerignored, and
    // build outputs stay out of the context.
    let ignore: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    assert!(
        dockerignore_excludes(&ignore, "target"),
        ".dockerignore must exclude target/"
    );
    for stage in &stages {
        for (from, sources, _) in stage.copies() {
            if from.is_some() {
                continue;
            }
            for s in sources {
                assert!(root().join(&s).exists(), "Dockerfile copies missing `{s}`");
                assert!(
                    !dockerignore_excludes(&ignore, &s),
                    "Dockerfile copies `{s}`, which .dockerignore excludes"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// docker-compose.yml

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

struct Service<'a> {
    name: String,
    def: &'a Value,
}

impl Service<'_> {
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
}

fn compose_services(compose: &Value) -> Vec<Service<'_>> {
    at(compose, "services")
        .as_mapping()
        .expect("docker-compose.yml has services")
        .iter()
        .map(|(k, v)| Service {
            name: scalar(k).unwrap(),
            def: v,
        })
        .collect()
}

fn find_service<'a, 'b>(
    services: &'b [Service<'a>],
    what: &str,
    pred: impl Fn(&Service) -> bool,
) -> &'b Service<'a> {
    let found: Vec<_> = services.iter().filter(|s| pred(s)).collect();
    assert_eq!(
        found.len(),
        1,
        "docker-compose.yml: expected one {what} service"
    );
    found[0]
}

fn image_of<'a>(s: &Service<'a>) -> &'a str {
    at(s.def, "image").as_str().unwrap_or("")
}

#[test]
fn compose_wires_envoy_to_sluice_redis_and_the_demo_upstream() {
    let compose = yaml("docker-compose.yml");
    let services = compose_services(&compose);
    let sluice_svc = find_service(&services, "sluice (build: .)", |s| {
        !at(s.def, "build").is_null()
    });
    let envoy = find_service(&services, "envoy", |s| {
        image_of(s).starts_with("envoyproxy/envoy:")
    });
    let redis = find_service(&services, "redis", |s| image_of(s).starts_with("redis:"));
    for s in &services {
        if at(s.def, "build").is_null() {
            assert_pinned(image_of(s), &format!("compose service `{}`", s.name));
        }
    }

    // sluice is built from this repository's Dockerfile and runs its default command
    // unless the compose file overrides it.
    let context = scalar(at(sluice_svc.def, "build"))
        .or_else(|| scalar(at(sluice_svc.def, "build.context")))
        .expect("build context");
    assert!(
        root().join(&context).join("Dockerfile").is_file(),
        "sluice builds from {context}/Dockerfile"
    );
    let img = image();
    let argv = match at(sluice_svc.def, "command") {
        Value::Null => img.cmd.clone(),
        v => strings(v),
    };
    let env = env_map(at(sluice_svc.def, "environment"));
    let settings = resolve(&argv, &env, "compose service sluice");

    // Redis: the URL names the redis service, which sluice waits for.
    let redis_settings = settings
        .redis
        .as_ref()
        .expect("the compose sluice uses Redis, not the in-memory store");
    for url in &redis_settings.urls {
        let authority = url
            .split("://")
            .nth(1)
            .and_then(|r| r.split(['/', '?']).next())
            .unwrap();
        let hostport = authority.rsplit('@').next().unwrap();
        let (host, port) = hostport.split_once(':').unwrap_or((hostport, "6379"));
        assert_eq!(host, redis.name, "sluice's Redis URL {url}");
        assert_eq!(
            port, "6379",
            "sluice's Redis URL {url} (redis listens on 6379)"
        );
    }
    assert!(
        sluice_svc.depends_on().contains(&redis.name),
        "sluice must depend on redis"
    );

    // Its HTTP and gRPC ports are the ones published.
    let ports = sluice_svc.published_container_ports();
    for (port, what) in [
        (settings.http_addr.port(), "HTTP"),
        (settings.grpc_addr.port(), "gRPC"),
    ] {
        assert!(
            ports.contains(&port),
            "sluice's {what} port {port} is not published"
        );
    }

    // Compose waits for sluice's drain before it kills it.
    let stop = scalar(at(sluice_svc.def, "stop_grace_period")).unwrap_or_else(|| "10s".into());
    let stop = parse_duration("stop_grace_period", &stop).unwrap();
    assert!(
        stop > settings.shutdown_delay + settings.shutdown_grace,
        "sluice's stop_grace_period {stop:?} must exceed its shutdown delay + grace"
    );

    // The rule directory sluice serves is a bind mount of valid rule files.
    let host_dirs: Vec<PathBuf> = settings
        .config_paths
        .iter()
        .map(|p| sluice_svc.host_path(p))
        .collect();
    let rules = load_rules(&host_dirs, "compose sluice config");

    // Envoy runs examples/envoy.yaml: the file it is told to load is that mount.
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
    let boot = envoy_bootstrap();

    // The rate limit cluster is sluice's gRPC port; the other clusters are services.
    assert_eq!(
        boot.rls,
        vec![(sluice_svc.name.clone(), settings.grpc_addr.port())],
        "rate_limit_cluster must point at the sluice service's gRPC port"
    );
    assert!(envoy.depends_on().contains(&sluice_svc.name));
    for (cluster, endpoints) in &boot.upstreams {
        for (host, port) in endpoints {
            let svc = services
                .iter()
                .find(|s| s.name == *host)
                .unwrap_or_else(|| panic!("cluster `{cluster}` targets unknown service `{host}`"));
            assert!(
                svc.container_ports().contains(port),
                "cluster `{cluster}` targets {host}:{port}, which `{host}` does not expose"
            );
            assert!(envoy.depends_on().contains(host));
        }
    }
    assert!(!boot.upstreams.is_empty(), "envoy routes to no upstream");

    // Envoy's listener and admin ports are published.
    let envoy_ports: Vec<_> = seq_at(envoy.def, "ports").iter().map(published).collect();
    for port in &boot.listener_ports {
        assert!(
            envoy_ports.iter().any(|(_, _, c)| c == port),
            "envoy listener port {port} is not published"
        );
    }
    let admin = boot.admin_port.expect("envoy admin port");
    assert!(
        envoy_ports
            .iter()
            .any(|(ip, _, c)| *c == admin && ip.as_deref() == Some("127.0.0.1")),
        "envoy admin {admin} must be published on 127.0.0.1 only"
    );

    // Every descriptor Envoy sends is limited by the rules sluice serves.
    assert_rules_cover(&rules, &boot.domain, &boot.descriptors, "compose");
}

// ---------------------------------------------------------------------------------------
// Kubernetes

const K8S: &str = "examples/kubernetes";

/// Kubernetes objects by (kind, name).
type Objects = BTreeMap<(String, String), Value>;

/// Every object of every manifest.
fn k8s_objects() -> Objects {
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
}

fn object<'a>(objects: &'a Objects, kind: &str, name: &str) -> &'a Value {
    objects
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

struct SluicePod<'a> {
    deployment: &'a Value,
    container: &'a Value,
    settings: Settings,
}

impl SluicePod<'_> {
    fn pod(&self) -> &Value {
        at(self.deployment, "spec.template")
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

fn sluice_pod(objects: &Objects) -> SluicePod<'_> {
    let deployment = object(objects, "Deployment", "sluice");
    let container = seq_at(deployment, "spec.template.spec.containers")
        .iter()
        .find(|c| str_at(c, "name") == "sluice")
        .expect("a container named sluice");
    // `command` replaces the image's ENTRYPOINT, `args` its CMD.
    let img = image();
    let command = strings(at(container, "command"));
    assert!(
        command.is_empty() || command == [img.binary.clone()],
        "the container command must be the binary"
    );
    let args = match at(container, "args") {
        Value::Null => img.cmd,
        v => strings(v),
    };
    let env = env_map(at(container, "env"));
    let settings = resolve(&args, &env, "Deployment sluice");
    SluicePod {
        deployment,
        container,
        settings,
    }
}

/// The rule files of a ConfigMap, written to a fresh directory.
fn config_map_dir(objects: &Objects, name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = at(object(objects, "ConfigMap", name), "data")
        .as_mapping()
        .expect("ConfigMap data");
    for (k, v) in data {
        std::fs::write(dir.path().join(k.as_str().unwrap()), v.as_str().unwrap()).unwrap();
    }
    dir
}

/// The rules of the ConfigMaps mounted at sluice's config paths.
fn k8s_rules(objects: &Objects, pod: &SluicePod) -> Rules {
    let dirs: Vec<_> = pod
        .config_maps()
        .iter()
        .map(|cm| config_map_dir(objects, cm))
        .collect();
    let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
    load_rules(&paths, "ConfigMap rules")
}

/// A Service port's `targetPort` (defaults to `port`).
fn target_port(p: &Value) -> &Value {
    match at(p, "targetPort") {
        Value::Null => at(p, "port"),
        t => t,
    }
}

/// The Service `name`'s port for `container_port`, with its target checked.
fn service_port(
    objects: &Objects,
    pod: &SluicePod,
    name: &str,
    container_port: u16,
) -> Option<u16> {
    let svc = object(objects, "Service", name);
    assert!(
        labels_match(at(svc, "spec.selector"), at(pod.pod(), "metadata.labels")),
        "Service {name} does not select the sluice pods"
    );
    seq_at(svc, "spec.ports")
        .iter()
        .find(|p| pod.container_port(target_port(p)) == container_port)
        .map(|p| port_at(p, "port"))
}

#[test]
fn kubernetes_manifests_agree_with_each_other_and_the_binary() {
    // kustomization.yaml lists exactly the manifests of the directory.
    let kustomization = yaml(format!("{K8S}/kustomization.yaml"));
    let listed: BTreeSet<String> = strings(at(&kustomization, "resources"))
        .into_iter()
        .collect();
    let present: BTreeSet<String> = rule_files(&root().join(K8S))
        .iter()
        .map(|f| f.file_name().unwrap().to_str().unwrap().to_string())
        .filter(|f| f != "kustomization.yaml")
        .collect();
    assert_eq!(listed, present, "kustomization.yaml resources");

    let objects = k8s_objects();
    let pod = sluice_pod(&objects);
    let s = &pod.settings;
    let spec = at(pod.deployment, "spec");
    assert!(
        at(spec, "replicas").as_u64().unwrap_or(1) >= 2,
        "run at least 2 replicas"
    );
    assert!(labels_match(
        at(spec, "selector.matchLabels"),
        at(pod.pod(), "metadata.labels")
    ));
    assert_pinned(str_at(pod.container, "image"), "Deployment sluice");
    for ((kind, name), o) in &objects {
        for c in seq_at(o, "spec.template.spec.containers") {
            assert_pinned(str_at(c, "image"), &format!("{kind}/{name}"));
        }
    }

    // Ports: the container declares what the binary listens on.
    assert_eq!(pod.container_port(&Value::from("http")), s.http_addr.port());
    assert_eq!(pod.container_port(&Value::from("grpc")), s.grpc_addr.port());
    let metrics_port = s.metrics_addr.map(|a| a.port());
    if let Some(m) = metrics_port {
        assert_eq!(pod.container_port(&Value::from("metrics")), m);
        // Scrape annotations, when present, name that listener and its path. (Their
        // names contain dots, so no `at` here.)
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

    // Probes hit the HTTP listener (the paths themselves are exercised against the
    // binary in kubernetes_probe_paths_answer_on_the_http_listener).
    for probe in ["readinessProbe", "livenessProbe"] {
        let p = at(pod.container, probe);
        assert!(!p.is_null(), "sluice needs a {probe}");
        assert_eq!(
            pod.container_port(at(p, "httpGet.port")),
            s.http_addr.port(),
            "{probe} must use sluice's HTTP port"
        );
    }
    assert_eq!(
        str_at(pod.container, "readinessProbe.httpGet.path"),
        "/healthcheck"
    );

    // Shutdown: the kubelet waits longer than sluice drains.
    let grace = at(pod.pod(), "spec.terminationGracePeriodSeconds")
        .as_u64()
        .unwrap_or(30);
    assert!(
        std::time::Duration::from_secs(grace) > s.shutdown_delay + s.shutdown_grace,
        "terminationGracePeriodSeconds {grace} must exceed shutdown delay {:?} + grace {:?}",
        s.shutdown_delay,
        s.shutdown_grace
    );

    // Hardening and resources.
    let pod_sc = at(pod.pod(), "spec.securityContext");
    let sc = at(pod.container, "securityContext");
    assert!(
        at(sc, "runAsNonRoot").as_bool() == Some(true)
            || at(pod_sc, "runAsNonRoot").as_bool() == Some(true),
        "runAsNonRoot"
    );
    assert_eq!(at(sc, "readOnlyRootFilesystem").as_bool(), Some(true));
    assert_eq!(at(sc, "allowPrivilegeEscalation").as_bool(), Some(false));
    assert!(!at(pod.container, "resources.requests").is_null());
    assert!(!at(pod.container, "resources.limits.memory").is_null());

    // Redis: the URL names a Service with that port.
    let redis = s.redis.as_ref().expect("the Deployment uses Redis");
    for url in &redis.urls {
        let hostport = url
            .split("://")
            .nth(1)
            .unwrap()
            .split(['/', '?'])
            .next()
            .unwrap();
        let hostport = hostport.rsplit('@').next().unwrap();
        let (host, port) = hostport.split_once(':').unwrap_or((hostport, "6379"));
        let svc = object(&objects, "Service", host);
        assert!(
            seq_at(svc, "spec.ports")
                .iter()
                .any(|p| port_at(p, "port").to_string() == port),
            "Service {host} has no port {port} (Redis URL {url})"
        );
    }

    // Services target the container's ports; the main one exposes all of them.
    let want: Vec<u16> = [
        Some(s.http_addr.port()),
        Some(s.grpc_addr.port()),
        metrics_port,
    ]
    .into_iter()
    .flatten()
    .collect();
    for port in &want {
        assert!(
            service_port(&objects, &pod, "sluice", *port).is_some(),
            "Service sluice does not expose container port {port}"
        );
    }
    // Every port of every Service selecting the pods targets a declared container port
    // (container_port panics otherwise).
    for ((kind, _), svc) in &objects {
        if kind == "Service"
            && labels_match(at(svc, "spec.selector"), at(pod.pod(), "metadata.labels"))
        {
            for p in seq_at(svc, "spec.ports") {
                pod.container_port(target_port(p));
            }
        }
    }
    for ((kind, name), o) in &objects {
        if kind == "PodDisruptionBudget" {
            assert!(
                labels_match(
                    at(o, "spec.selector.matchLabels"),
                    at(pod.pod(), "metadata.labels")
                ),
                "PodDisruptionBudget {name} selects no sluice pod"
            );
        }
    }

    // The ConfigMap mounted at the config directory holds valid rules, the same as the
    // compose demo's (its header says so), limiting everything examples/envoy.yaml sends.
    // examples/envoy.yaml also works in-cluster: `sluice` is the Service's name.
    let rules = k8s_rules(&objects, &pod);
    let boot = envoy_bootstrap();
    assert_rules_cover(&rules, &boot.domain, &boot.descriptors, "ConfigMap");
    for (host, port) in &boot.rls {
        assert_eq!(
            service_port(&objects, &pod, host, s.grpc_addr.port()),
            Some(*port),
            "{ENVOY_YAML}: {host}:{port} is not sluice's gRPC port in Kubernetes"
        );
    }
    let demo_dir = root().join("examples/demo/config");
    for f in rule_files(&demo_dir) {
        let name = f.file_name().unwrap().to_str().unwrap();
        let cm = object(&objects, "ConfigMap", &pod.config_maps()[0]);
        assert_eq!(
            at(cm, "data").get(name).and_then(Value::as_str),
            Some(std::fs::read_to_string(&f).unwrap().as_str()),
            "ConfigMap {name} differs from examples/demo/config/{name}"
        );
    }
}

#[tokio::test]
async fn kubernetes_probe_paths_answer_on_the_http_listener() {
    let objects = k8s_objects();
    let pod = sluice_pod(&objects);
    let dir = config_map_dir(&objects, &pod.config_maps()[0]);
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

// ---------------------------------------------------------------------------------------
// Istio

#[test]
fn istio_envoyfilter_targets_the_kubernetes_service() {
    const FILE: &str = "examples/istio/envoyfilter.yaml";
    let ef = yaml(FILE);
    assert_eq!(str_at(&ef, "kind"), "EnvoyFilter");
    let patches = seq_at(&ef, "spec.configPatches");
    let patch = |apply: &str| -> Vec<&Value> {
        patches
            .iter()
            .filter(|p| str_at(p, "applyTo") == apply)
            .map(|p| at(p, "patch.value"))
            .collect()
    };

    let filters = patch("HTTP_FILTER");
    let filter = filters
        .iter()
        .find(|f| str_at(f, "name") == RATELIMIT_FILTER)
        .expect("an HTTP_FILTER patch adding the rate limit filter");
    let (domain, cluster_name) = check_ratelimit_filter(at(filter, "typed_config"), FILE);

    let clusters = patch("CLUSTER");
    let cluster = clusters
        .iter()
        .find(|c| str_at(c, "name") == cluster_name)
        .unwrap_or_else(|| panic!("{FILE}: no CLUSTER patch named `{cluster_name}`"));
    assert!(
        speaks_http2(cluster),
        "{FILE}: `{cluster_name}` must speak HTTP/2"
    );

    let objects = k8s_objects();
    let pod = sluice_pod(&objects);
    for (host, port) in cluster_endpoints(cluster) {
        let service = host
            .strip_suffix(".svc.cluster.local")
            .and_then(|h| h.split('.').next())
            .unwrap_or_else(|| panic!("{FILE}: `{host}` is not a Service FQDN"));
        assert_eq!(
            service_port(&objects, &pod, service, pod.settings.grpc_addr.port()),
            Some(port),
            "{FILE}: {host}:{port} is not sluice's gRPC port"
        );
    }

    let rate_limits: Vec<Value> = patch("VIRTUAL_HOST")
        .iter()
        .chain(patch("ROUTE_CONFIGURATION").iter())
        .flat_map(|v| seq_at(v, "rate_limits").to_vec())
        .collect();
    let rules = k8s_rules(&objects, &pod);
    assert_rules_cover(&rules, &domain, &descriptors(&rate_limits, FILE), FILE);
}
