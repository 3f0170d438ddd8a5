//! What sluice's own code makes of a deployment: the settings a command line and
//! environment resolve to (`settings::resolve`, the binary's own), whether rule files pass
//! `sluice check`, and which rules match the descriptors Envoy sends (`Domain::find`).
//! Reusing the binary's code keeps these tests from drifting from what ships.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_yaml::Value;
use sluice::config::{LoadOptions, RateLimitConfig};
use sluice::settings::{Error, Invocation, Settings};

use super::files::{at, scalar, str_at};
use crate::support::cli::{check, rule_files};

/// What `sluice <argv>` would run with under `env`, resolved by the binary's code: the
/// environment is the map, for `SLUICE_*` and their variables alike.
pub fn resolve(argv: &[String], env: &BTreeMap<String, String>, what: &str) -> Settings {
    try_resolve(argv, env, what).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// [`resolve`], returning the settings error (a command line clap refuses still panics).
pub fn try_resolve(
    argv: &[String],
    env: &BTreeMap<String, String>,
    what: &str,
) -> Result<Settings, Error> {
    let argv = std::iter::once("sluice").chain(argv.iter().map(String::as_str));
    match sluice::settings::resolve(argv, &|name| env.get(name).cloned()) {
        Ok(Invocation::Serve(s)) => Ok(*s),
        Ok(other) => panic!("{what}: not `sluice serve`: {other:?}"),
        Err(e @ Error::Setting { .. }) => Err(e),
        Err(Error::CommandLine(e)) => panic!("{what}: the command line does not parse: {e}"),
    }
}

/// `sluice check PATH...` must pass.
fn assert_rules_valid(paths: &[PathBuf], what: &str) {
    let (ok, text) = check(paths);
    assert!(ok, "{what}: sluice check failed:\n{text}");
    assert_eq!(text.trim(), "all rate limit configs ok", "{what}");
}

/// The rules a deployment serves, and for each descriptor key the request values worth
/// trying against them: every value the rules name (globs with `*` → `x`), plus one
/// they do not name (for key-only rules).
pub struct Rules {
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

/// The rules at `paths`, which must pass `sluice check` (so a file sluice would reject
/// cannot look fine here).
pub fn load_rules(paths: &[PathBuf], what: &str) -> Rules {
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
pub type Entry = (String, Option<String>);

/// Every descriptor Envoy sends is limited by some rule for some request values, as
/// sluice's matcher (`Domain::find`) decides.
pub fn assert_rules_cover(rules: &Rules, domain: &str, descriptors: &[Vec<Entry>], what: &str) {
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
