//! `config/schema.json`, the JSON Schema editors use to check rule files, against the real
//! loader (`sluice check`): every rule file in the repo carries the schema modeline and
//! validates; every fixture and inline document gets the same verdict from both, except
//! the errors listed in `NOT_EXPRESSIBLE`, which need more than JSON Schema can say.
//!
//! Documents are read the way an editor's YAML 1.2 parser reads them (serde_yaml into a
//! JSON value, first document only, like the loader): `yes`/`on` stay strings, which is why
//! the schema accepts YAML 1.1's boolean words as strings.

use std::path::{Component, Path};

use serde::Deserialize;
use serde_json::Value;

use crate::support::cli::{check, rule_files};

mod cases;

const SCHEMA: &str = "config/schema.json";
const MODELINE: &str = "# yaml-language-server: $schema=";

/// Error fixtures the schema must reject (structure: unknown or misplaced keys, types,
/// enums, ranges, required fields, and the per-object rules the schema spells out with
/// `if`/`then` and `not`).
const REJECTED_BY_SCHEMA: &[&str] = &[
    "bad_limit_unit.yaml",
    "empty_domain.yaml",
    "empty_key.yaml",
    "ext_bad_algorithm.yaml",
    "ext_both_limits.yaml",
    "ext_bucket_zero_rate.yaml",
    "ext_buckets_range.yaml",
    "ext_buckets_wrong_algorithm.yaml",
    "ext_burst_on_window.yaml",
    "ext_burst_zero.yaml",
    "ext_calendar_bucket.yaml",
    "ext_calendar_hour.yaml",
    "ext_calendar_log.yaml",
    "ext_calendar_unlimited.yaml",
    "ext_empty_limits.yaml",
    "ext_list_bad_unit.yaml",
    "ext_log_overdraft.yaml",
    "ext_log_too_large.yaml",
    "ext_multiplier_not_integer.yaml",
    "ext_multiplier_unlimited.yaml",
    "ext_multiplier_zero.yaml",
    "ext_penalty_negative.yaml",
    "ext_response_unlimited.yaml",
    "ext_rpu_not_integer.yaml",
    "ext_too_many_limits.yaml",
    "ext_unlimited_in_list.yaml",
    "ext_unlimited_with_algorithm.yaml",
    "ext_wrong_level.yaml",
    "misspelled_key.yaml",
    "misspelled_key2.yaml",
    "non_map_list.yaml",
    "non_string_key.yaml",
    "replaces_empty.yaml",
    "share_threshold_no_wildcard.yaml",
    "unlimited_with_unit.yaml",
];

/// Error fixtures JSON Schema cannot express; the schema accepts them and `sluice check`
/// (or the server's reload) reports them.
const NOT_EXPRESSIBLE: &[(&str, &str)] = &[
    (
        "duplicate_key.yaml",
        "composite keys must be unique among siblings: a comparison across array items",
    ),
    (
        "ext_list_replaces_sibling.yaml",
        "replaces may not name a sibling rate_limits entry: a comparison across items",
    ),
    (
        "replaces_self.yaml",
        "replaces may not name the limit's own name: a comparison between two values",
    ),
    (
        "ext_scaled_too_large.yaml",
        "burst × unit ≤ 2^53 request-ms (2^52 at requests_per_unit 1): arithmetic across fields",
    ),
    (
        "ext_multiplier_scaled_too_large.yaml",
        "burst × unit × unit_multiplier ≤ 2^53 request-ms: arithmetic across fields",
    ),
    (
        "ext_response_duplicate_header.yaml",
        "response header names are compared without case: a comparison across keys",
    ),
    (
        "ext_calendar_unknown_zone.yaml",
        "an IANA time zone name the bundled database knows: a list JSON Schema would need to copy",
    ),
    (
        "ext_multiplier_too_large.yaml",
        "unit × unit_multiplier ≤ 100 years: arithmetic across fields",
    ),
];

/// Fixtures that are not YAML at all: the editor's YAML parser reports them.
const NOT_YAML: &[&str] = &["bad_yaml.yaml"];

/// Rule files that may not carry the modeline yet, and why.
const MODELINE_PENDING: &[(&str, &str)] = &[];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Schema {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl Schema {
    fn load() -> Schema {
        let text = std::fs::read_to_string(root().join(SCHEMA)).expect("read config/schema.json");
        let json: Value = serde_json::from_str(&text).expect("config/schema.json is JSON");
        // A fixed URL: nothing is fetched, the schema refers only to itself.
        let url = "file:///sluice/config/schema.json";
        let mut compiler = boon::Compiler::new();
        compiler.add_resource(url, json).expect("add schema");
        let mut schemas = boon::Schemas::new();
        let index = compiler
            .compile(url, &mut schemas)
            .unwrap_or_else(|e| panic!("config/schema.json does not compile: {e:#}"));
        Schema { schemas, index }
    }

    /// `Err` holds the validator's explanation.
    fn validate(&self, yaml: &str) -> Result<(), String> {
        let doc = first_document(yaml).map_err(|e| format!("not YAML: {e}"))?;
        self.schemas
            .validate(&doc, self.index)
            .map_err(|e| format!("{e:#}"))
    }
}

/// The first YAML document as JSON (an empty file is null), as the loader reads it.
fn first_document(yaml: &str) -> Result<Value, serde_yaml::Error> {
    match serde_yaml::Deserializer::from_str(yaml).next() {
        Some(doc) => Value::deserialize(doc),
        None => Ok(Value::Null),
    }
}

/// `to` relative to the directory `from` (both relative to the repo root).
fn relative(from: &Path, to: &Path) -> String {
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); a.len() - common];
    parts.extend(
        b[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

fn is_rule_file(doc: &Value) -> bool {
    doc.get("domain").is_some()
}

/// Rule files embedded in a Kubernetes ConfigMap document (`data` values that are rule files).
fn configmap_rules(doc: &Value) -> Vec<(String, String)> {
    if doc.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
        return Vec::new();
    }
    let Some(data) = doc.get("data").and_then(Value::as_object) else {
        return Vec::new();
    };
    data.iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .filter(|(_, text)| first_document(text).is_ok_and(|d| is_rule_file(&d)))
        .collect()
}

#[test]
fn schema_is_draft_07_with_help_text() {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(SCHEMA)).unwrap()).unwrap();
    // yaml-language-server validates draft-07 fully; its 2019-09/2020-12 support is partial.
    assert_eq!(json["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(json["additionalProperties"], false);
    for def in ["descriptor", "rate_limit", "listed_rate_limit", "replace"] {
        let d = &json["definitions"][def];
        assert_eq!(d["additionalProperties"], false, "{def}");
        for (field, s) in d["properties"].as_object().expect("properties") {
            assert!(
                s.get("description").and_then(Value::as_str).is_some(),
                "{def}.{field} has no description for editors"
            );
        }
    }
    Schema::load();
}

#[test]
fn repo_rule_files_carry_the_modeline_and_match_the_schema() {
    let schema = Schema::load();
    let target = Path::new(SCHEMA);
    let mut seen = 0;
    for top in ["config", "examples"] {
        for path in rule_files(&root().join(top)) {
            let rel = path.strip_prefix(root()).unwrap().to_path_buf();
            let text = std::fs::read_to_string(&path).unwrap();
            let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
                .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{rel:?}: {e}")))
                .collect();
            if docs.first().is_some_and(is_rule_file) {
                seen += 1;
                let pending = MODELINE_PENDING.iter().any(|(p, _)| rel == Path::new(p));
                let want = format!("{MODELINE}{}", relative(rel.parent().unwrap(), target));
                if !pending {
                    assert_eq!(
                        text.lines().next(),
                        Some(want.as_str()),
                        "{rel:?} first line"
                    );
                }
                let (ok, out) = check([&path]);
                assert!(ok, "sluice check {rel:?}: {out}");
                if let Err(e) = schema.validate(&text) {
                    panic!("{rel:?} fails the schema: {e}");
                }
            } else {
                assert!(!rel.starts_with("config"), "{rel:?} is not a rule file");
            }
            let dir = tempfile::TempDir::new().unwrap();
            for doc in &docs {
                for (name, rules) in configmap_rules(doc) {
                    seen += 1;
                    let file = dir.path().join(&name);
                    std::fs::write(&file, &rules).unwrap();
                    let (ok, out) = check([&file]);
                    assert!(ok, "sluice check {rel:?} data.{name}: {out}");
                    if let Err(e) = schema.validate(&rules) {
                        panic!("{rel:?} data.{name} fails the schema: {e}");
                    }
                }
            }
        }
    }
    assert!(seen >= 4, "found only {seen} rule files");
}

#[test]
fn fixtures_get_the_same_verdict_from_schema_and_loader() {
    let schema = Schema::load();
    let dir = root().join("tests/data/config");
    let mut errors_seen = Vec::new();
    for path in rule_files(&dir) {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let (ok, out) = check([&path]);
        let verdict = schema.validate(&text);
        if ok {
            if let Err(e) = verdict {
                panic!("{name}: sluice accepts it, the schema does not: {e}");
            }
            continue;
        }
        errors_seen.push(name.clone());
        if NOT_YAML.contains(&name.as_str()) {
            assert!(first_document(&text).is_err(), "{name} parses as YAML");
        } else if REJECTED_BY_SCHEMA.contains(&name.as_str()) {
            assert!(
                verdict.is_err(),
                "{name}: sluice rejects it ({out}), the schema does not"
            );
        } else if NOT_EXPRESSIBLE.iter().any(|(n, _)| *n == name) {
            assert!(
                verdict.is_ok(),
                "{name} is listed as not expressible, but the schema rejects it: move it to \
                 REJECTED_BY_SCHEMA"
            );
        } else {
            panic!(
                "{name}: an error fixture ({out}) not classified: add it to REJECTED_BY_SCHEMA \
                 (and make the schema reject it) or to NOT_EXPRESSIBLE with the reason"
            );
        }
    }
    let listed = REJECTED_BY_SCHEMA
        .iter()
        .chain(NOT_YAML)
        .copied()
        .chain(NOT_EXPRESSIBLE.iter().map(|(n, _)| *n));
    for name in listed {
        assert!(
            errors_seen.iter().any(|s| s == name),
            "{name} is listed but is not an error fixture"
        );
    }
}

/// Documents the schema and the loader must judge alike: the leniencies the loader
/// inherits from Go's yaml.v2, and the rules the schema spells out.
#[test]
fn inline_documents_get_the_same_verdict_from_schema_and_loader() {
    let cases = cases::inline_cases();
    let schema = Schema::load();
    let dir = tempfile::TempDir::new().unwrap();
    for (i, (content, valid)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("case{i}.yaml"));
        std::fs::write(&file, content).unwrap();
        let (ok, out) = check([&file]);
        assert_eq!(ok, *valid, "sluice check of:\n{content}\n{out}");
        let verdict = schema.validate(content);
        assert_eq!(
            verdict.is_ok(),
            *valid,
            "schema on:\n{content}\n{}",
            verdict.err().unwrap_or_default()
        );
    }
}
