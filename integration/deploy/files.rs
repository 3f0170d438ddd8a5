//! Reading the repository's deployment files and walking their YAML. The files are
//! hand-written in either of YAML's spellings (ports as numbers or strings, env as lists
//! or maps), so the accessors accept both rather than each test coping on its own.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_yaml::Value;

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn read(rel: impl AsRef<Path>) -> String {
    let p = root().join(rel.as_ref());
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// Every YAML document of a file (`---`-separated), empty documents skipped.
pub fn yaml_docs(rel: impl AsRef<Path>) -> Vec<Value> {
    let rel = rel.as_ref();
    let text = read(rel);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", rel.display())))
        .filter(|v| !v.is_null())
        .collect()
}

pub fn yaml(rel: impl AsRef<Path>) -> Value {
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
pub fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    path.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) if v.is_sequence() => v.get(i).unwrap_or(&NULL),
        _ => v.get(k).unwrap_or(&NULL),
    })
}

pub fn str_at<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("`{path}` is not a string in {v:?}"))
}

pub fn seq_at<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    at(v, path).as_sequence().map_or(&[], |s| s.as_slice())
}

/// A scalar as text (ports are written as numbers or strings).
pub fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub fn port_at(v: &Value, path: &str) -> u16 {
    scalar(at(v, path))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("`{path}` is not a port in {v:?}"))
}

/// A `name=value` list or a map (docker-compose `environment`, Kubernetes `env`).
pub fn env_map(v: &Value) -> BTreeMap<String, String> {
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

pub fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(s) => s.iter().filter_map(scalar).collect(),
        Value::String(s) => s.split_whitespace().map(String::from).collect(),
        _ => Vec::new(),
    }
}

/// `image:tag` pinned to a version: never `latest`, and a version number in the tag or,
/// for images that carry it in their name (`distroless/cc-debian12:nonroot`), there.
pub fn assert_pinned(image: &str, what: &str) {
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
