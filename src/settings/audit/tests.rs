//! The audit holds: every variable of the reference's is in exactly one list, and each list says what
//! `Settings::resolve` really does with it.

use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::settings::Settings;

/// The names of `tests/data/envoyproxy-ratelimit-settings.txt`.
fn ref_names() -> Vec<&'static str> {
    include_str!("../../../tests/data/envoyproxy-ratelimit-settings.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Every entry of the three lists, with the list it is in.
fn listed() -> Vec<(&'static str, &'static str)> {
    let mut all: Vec<_> = honoured()
        .iter()
        .map(|(t, _)| (t.name, "honoured"))
        .collect();
    all.extend(REFUSED.iter().map(|r| (r.name, "REFUSED")));
    all.extend(NO_EFFECT.iter().map(|(n, _)| (*n, "NO_EFFECT")));
    all
}

/// `sluice serve` with only the reference's variables `env`.
fn resolve(env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::resolve::<_, &str>([], &|k| env.get(k).cloned()).map_err(|e| match e {
        crate::settings::Error::Setting { error, .. } => error,
        other => panic!("the command line is not refused: {other}"),
    })
}

/// `with`, then `name=value` (replacing a companion of the same name).
fn with_set<'a>(
    with: &[(&'a str, &'a str)],
    name: &'a str,
    value: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<_> = with.iter().filter(|(k, _)| *k != name).copied().collect();
    env.push((name, value));
    env
}

#[test]
fn the_data_file_lists_each_name_once() {
    let names = ref_names();
    let mut seen = BTreeMap::new();
    for n in &names {
        *seen.entry(*n).or_insert(0) += 1;
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                || (is_pattern(n) && !n[..n.len() - 1].contains('*')),
            "not a variable name or pattern: {n}"
        );
    }
    let twice: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).collect();
    assert!(twice.is_empty(), "listed twice: {twice:?}");
    assert!(names.len() > 100, "the data file looks truncated");
}

#[test]
fn every_name_of_theirs_is_in_exactly_one_list() {
    let listed = listed();
    let mut bad = Vec::new();
    for name in ref_names() {
        let lists: Vec<_> = listed
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, l)| *l)
            .collect();
        if lists.len() != 1 {
            bad.push(format!("{name}: in {lists:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "each name must be in exactly one list:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_listed_name_is_theirs_and_listed_once() {
    let ref_vars = ref_names();
    let listed = listed();
    let mut bad = Vec::new();
    for (name, list) in &listed {
        if !ref_vars.contains(name) {
            bad.push(format!("{name} ({list}) is not in the data file"));
        }
        if listed.iter().filter(|(n, _)| n == name).count() > 1 {
            bad.push(format!("{name} is listed more than once"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Refusals and notes look names up one by one, so a family of names can only be honoured
/// (by the code that builds its names).
#[test]
fn patterns_are_only_honoured() {
    for r in REFUSED {
        assert!(!is_pattern(r.name), "{}", r.name);
    }
    for (n, _) in NO_EFFECT {
        assert!(!is_pattern(n), "{n}");
    }
}

#[test]
fn every_honoured_name_changes_the_resolved_settings() {
    let mut bad = Vec::new();
    for (t, _) in honoured() {
        let (name, value, with) = (t.probe_as.unwrap_or(t.name), t.probe, t.with);
        assert!(
            t.probe_as.is_some() == is_pattern(t.name),
            "{}: a family of names probes one member (`probe_as`), a name itself",
            t.name
        );
        let base = resolve(with);
        let set = resolve(&with_set(with, name, value));
        match (base, set) {
            (Ok(mut base), Ok(mut set)) => {
                if set.notes.iter().any(|n| n.starts_with(&format!("{name}="))) {
                    bad.push(format!("{name}={value}: noted as having no effect"));
                }
                base.notes.clear();
                set.notes.clear();
                if base == set {
                    bad.push(format!("{name}={value}: the settings did not change"));
                }
            }
            (base, set) => bad.push(format!(
                "{name}={value} with {with:?}: {:?} / {:?}",
                base.err().map(|e| e.to_string()),
                set.err().map(|e| e.to_string())
            )),
        }
    }
    assert!(
        bad.is_empty(),
        "honoured names not honoured:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_refused_name_stops_startup_with_its_reason() {
    for r in REFUSED {
        let value = match r.inert {
            Inert::Nothing => "/var/run/ratelimit.sock",
            Inert::False => "true",
            Inert::Zero => "32",
        };
        let e = resolve(&[(r.name, value)]).expect_err(r.name);
        assert_eq!(e.name, r.name);
        let shown = e.to_string();
        assert!(shown.contains(r.name) && shown.contains(r.why), "{shown}");
        // The reference's default changes nothing and passes, unremarked.
        let inert = match r.inert {
            Inert::Nothing => continue,
            Inert::False => "false",
            Inert::Zero => "0",
        };
        let s = resolve(&[(r.name, inert)]).expect(r.name);
        assert!(s.notes.is_empty(), "{:?}", s.notes);
    }
}

#[test]
fn every_no_effect_name_is_noted_once_with_its_reason() {
    for (name, why) in NO_EFFECT {
        let s = resolve(&[(name, "1")]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mine: Vec<_> = s.notes.iter().filter(|n| n.contains(name)).collect();
        assert_eq!(mine.len(), 1, "{name}: {:?}", s.notes);
        assert!(mine[0].starts_with(&format!("{name}=1 ")), "{}", mine[0]);
        assert!(mine[0].contains(why), "{}", mine[0]);
    }
    assert!(resolve(&[]).unwrap().notes.is_empty());
}
