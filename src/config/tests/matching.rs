//! The tree walk: their `TestBasicConfig` and `TestDomainMerge`, rule fields, and the
//! zero values of their typed decode.

use super::{build, find, load, load_str};
use crate::limit::{Algorithm, Unit};

/// What a lookup should give: `None`, or `(requests_per_unit, unit, stats key)`.
pub(super) type Want<'a> = Option<(u64, Unit, &'a str)>;

pub(super) fn check(
    config: &crate::config::RateLimitConfig,
    domain: &str,
    entries: &[(&str, &str)],
    want: Want,
) {
    let got = find(config, domain, entries).map(|m| {
        let l = m.rule.limits.first().cloned();
        let stats = m.stats_key(entries).into_owned();
        (l.map(|l| (l.requests_per_unit, l.unit)), stats)
    });
    match (got, want) {
        (None, None) => {}
        (Some((Some((rpu, unit)), stats)), Some((w_rpu, w_unit, w_stats))) => {
            assert_eq!(
                (rpu, unit, stats.as_str()),
                (w_rpu, w_unit, w_stats),
                "{entries:?}"
            )
        }
        (got, want) => panic!("{entries:?}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn basic_config_lookups() {
    let c = load(&["basic_config.yaml"]);
    assert_eq!(c.domain_count(), 1);
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Want<'a>);
    let cases: &[Case] = &[
        // 1. unknown domain; known domain without entries
        ("foo_domain", &[("key1", "value1")], None),
        ("test-domain", &[], None),
        // 2. no default for key1; no limit at key1_value1 itself
        ("test-domain", &[("key1", "something")], None),
        ("test-domain", &[("key1", "value1")], None),
        // 3. request deeper than the config; no default at level 2
        (
            "test-domain",
            &[("key2", "value2"), ("subkey", "subvalue")],
            None,
        ),
        (
            "test-domain",
            &[("key5", "value5"), ("subkey5", "subvalue")],
            None,
        ),
        // 4.
        (
            "test-domain",
            &[("key1", "value1"), ("subkey1", "something")],
            Some((5, Unit::Second, "test-domain.key1_value1.subkey1")),
        ),
        (
            "test-domain",
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            Some((
                10,
                Unit::Second,
                "test-domain.key1_value1.subkey1_subvalue1",
            )),
        ),
        // 5. default, specific value, whitelisted value
        (
            "test-domain",
            &[("key2", "something")],
            Some((20, Unit::Minute, "test-domain.key2")),
        ),
        (
            "test-domain",
            &[("key2", "value2")],
            Some((30, Unit::Minute, "test-domain.key2_value2")),
        ),
        ("test-domain", &[("key2", "value3")], None),
        // 6.
        (
            "test-domain",
            &[("key3", "foo")],
            Some((1, Unit::Hour, "test-domain.key3")),
        ),
        (
            "test-domain",
            &[("key4", "foo")],
            Some((1, Unit::Day, "test-domain.key4")),
        ),
        // a limit on an intermediate node applies only when the request ends there
        (
            "test-domain",
            &[("key5", "value5")],
            Some((15, Unit::Day, "test-domain.key5_value5")),
        ),
        (
            "test-domain",
            &[("key5", "value5"), ("subkey5", "subvalue5")],
            Some((25, Unit::Day, "test-domain.key5_value5.subkey5_subvalue5")),
        ),
        // 7. detailed_metric: one stats key per value
        (
            "test-domain",
            &[("key7", "unspecified_value")],
            Some((70, Unit::Minute, "test-domain.key7_unspecified_value")),
        ),
        (
            "test-domain",
            &[("key7", "another_value")],
            Some((70, Unit::Minute, "test-domain.key7_another_value")),
        ),
        (
            "test-domain",
            &[("key7", "")],
            Some((70, Unit::Minute, "test-domain.key7_")),
        ),
        // request depth must equal config depth
        ("test-domain", &[("key3", "foo"), ("x", "y")], None),
        // empty value: `key_` is never configured, the default matches
        (
            "test-domain",
            &[("key2", "")],
            Some((20, Unit::Minute, "test-domain.key2")),
        ),
    ];
    for (domain, entries, want) in cases {
        check(&c, domain, entries, *want);
    }
}

#[test]
fn rule_fields() {
    let c = load(&["basic_config.yaml"]);
    let key3 = find(&c, "test-domain", &[("key3", "x")]).map(|m| m.rule);
    assert!(key3.is_some_and(|r| r.name.is_none() && r.limits[0].name.is_none()));
    let key4 = find(&c, "test-domain", &[("key4", "x")]).map(|m| m.rule);
    assert_eq!(
        key4.and_then(|r| r.name.as_deref()),
        Some("key4_rate_limit")
    );
    assert_eq!(
        key4.and_then(|r| r.limits[0].name.as_deref()),
        Some("key4_rate_limit")
    );
    let key6 = find(&c, "test-domain", &[("key6", "x")]).map(|m| m.rule);
    assert!(key6.is_some_and(|r| r.unlimited && r.limits.is_empty()));
    // Defaults of an envoyproxy/ratelimit limit.
    let l = &find(&c, "test-domain", &[("key3", "x")])
        .map(|m| m.rule)
        .map(|r| r.limits[0].clone());
    let l = l.as_ref().map(|l| {
        (
            l.algorithm,
            l.burst,
            l.buckets,
            l.overdraft,
            l.penalty_ms,
            l.slot,
        )
    });
    assert_eq!(l, Some((Algorithm::FixedWindow, 1, 0, true, 0, 0)));
    // rules(): every node with a limit or unlimited, ids are indexes.
    assert_eq!(c.rules().len(), 10);
    assert!(c.rules().iter().enumerate().all(|(i, r)| r.id == i));
    assert_eq!(c.rules().iter().filter(|r| r.unlimited).count(), 1);
}

#[test]
fn replaces_shadow_quota_metadata_on_rules() {
    let c = load_str(
        "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: true\n    quota_mode: true\n    rate_limit:\n      name: n1\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: n2}, {name: n3}]\n  - key: b\n    rate_limit: {unlimited: true, name: u, replaces: [{name: n1}]}\n",
    );
    let a = find(&c, "d", &[("a", "1")]).map(|m| m.rule);
    let a = a.map(|r| {
        (
            r.shadow_mode,
            r.quota_mode,
            r.replaces.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    });
    assert_eq!(
        a,
        Some((true, true, vec!["n2".to_owned(), "n3".to_owned()]))
    );
    let b = find(&c, "d", &[("b", "1")]).map(|m| m.rule);
    assert!(
        b.is_some_and(|r| r.unlimited && r.name.as_deref() == Some("u") && r.names().eq(["u"]))
    );
    assert!(b.is_some_and(|r| r.replaces.len() == 1 && &*r.replaces[0] == "n1"));

    let s = load(&["shadowmode_config.yaml"]);
    let shadow = |e: &[(&str, &str)]| {
        find(&s, "test-domain", e).map(|m| (m.rule.shadow_mode, m.rule.quota_mode))
    };
    assert_eq!(
        shadow(&[("key1", "value1"), ("subkey1", "x")]),
        Some((false, false))
    );
    assert_eq!(
        shadow(&[("key1", "value1"), ("subkey1", "subvalue1")]),
        Some((true, false))
    );
    assert_eq!(shadow(&[("key2", "x")]), Some((true, false)));
    assert_eq!(shadow(&[("key2", "value2")]), Some((false, false)));
    assert_eq!(shadow(&[("key3", "x")]), Some((false, true)));
}

#[test]
fn metadata_is_a_json_object() {
    let c = load(&["metadata.yaml"]);
    let meta = |e: &[(&str, &str)]| {
        find(&c, "test-domain", e)
            .and_then(|m| m.rule.metadata.clone())
            .map(|m| serde_json::Value::Object((*m).clone()))
    };
    assert_eq!(
        meta(&[("key1", "value1"), ("subkey1", "x")]),
        Some(serde_json::json!({"name": "service_1"}))
    );
    assert_eq!(
        meta(&[("key2", "x")]),
        Some(serde_json::json!({"service_with_quota": {"name": "service_2"}}))
    );
    let c = load_str(
        "domain: d\ndescriptors:\n  - key: a\n    metadata: {n: 1, f: 1.5, b: true, z: null, l: [x, 2]}\n    rate_limit: {unit: second}\n",
    );
    let m = find(&c, "d", &[("a", "")]).and_then(|m| m.rule.metadata.clone());
    let want = serde_json::json!({"n": 1, "f": 1.5, "b": true, "z": null, "l": ["x", 2]});
    assert_eq!(
        m.map(|m| serde_json::Value::Object((*m).clone())),
        Some(want)
    );
}

#[test]
fn domain_merge() {
    let Ok(c) = build(&["merge_domain_key1.yaml", "merge_domain_key2.yaml"], true) else {
        panic!("merge should load");
    };
    assert_eq!(c.domain_count(), 1);
    check(
        &c,
        "test-domain",
        &[("key1", "value1")],
        Some((10, Unit::Minute, "test-domain.key1_value1")),
    );
    check(
        &c,
        "test-domain",
        &[("key2", "value2")],
        Some((20, Unit::Minute, "test-domain.key2_value2")),
    );
    check(&c, "foo_domain", &[("key1", "value1")], None);
}

#[test]
fn merged_wildcards_keep_file_order() {
    let a = super::inline(
        "a.yaml",
        "domain: d\ndescriptors:\n  - key: k\n    value: a*\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    let b = super::inline(
        "b.yaml",
        "domain: d\ndescriptors:\n  - key: k\n    value: ab*\n    rate_limit: {unit: second, requests_per_unit: 2}\n",
    );
    let Ok(c) = super::build_files(&[a.clone(), b.clone()], true) else {
        panic!()
    };
    check(&c, "d", &[("k", "abc")], Some((1, Unit::Second, "d.k_a*")));
    let Ok(c) = super::build_files(&[b, a], true) else {
        panic!()
    };
    check(&c, "d", &[("k", "abc")], Some((2, Unit::Second, "d.k_ab*")));
}

#[test]
fn units_are_case_insensitive() {
    for (text, unit) in [
        ("second", Unit::Second),
        ("MINUTE", Unit::Minute),
        ("Hour", Unit::Hour),
        ("day", Unit::Day),
        ("week", Unit::Week),
        ("Month", Unit::Month),
        ("YEAR", Unit::Year),
    ] {
        let c = load_str(&format!(
            "domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{unit: {text}, requests_per_unit: 3}}}}\n"
        ));
        check(&c, "d", &[("a", "")], Some((3, unit, "d.a")));
    }
}

#[test]
fn literal_scalar_text_and_yaml_1_1_bools() {
    let c = load_str(
        "domain: 123\ndescriptors:\n  - key: code\n    value: 007\n    shadow_mode: yes\n    rate_limit: {unit: second, requests_per_unit: 0}\n  - key: t\n    value: true\n    quota_mode: On\n    rate_limit: {unit: second}\n",
    );
    let code = find(&c, "123", &[("code", "007")])
        .map(|m| (m.rule.shadow_mode, m.rule.limits[0].requests_per_unit));
    assert_eq!(code, Some((true, 0)));
    assert!(find(&c, "123", &[("code", "7")]).is_none());
    assert!(find(&c, "123", &[("t", "true")]).is_some_and(|m| m.rule.quota_mode));
}

#[test]
fn null_and_missing_fields_take_go_zero_values() {
    let c = load_str(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n  - key: b\n    rate_limits:\n  - key: c\n    value:\n    descriptors:\n    rate_limit: {unit: second}\n  - key: e\n    rate_limit: {unit: minute, requests_per_unit: 7, name: ~, replaces: ~}\n",
    );
    // `rate_limit:` (null) and `rate_limits:` (null): a node without a limit.
    assert!(find(&c, "d", &[("a", "")]).is_none());
    assert!(find(&c, "d", &[("b", "")]).is_none());
    // Missing requests_per_unit is 0 (always over the limit), null value is no value.
    let rpu = find(&c, "d", &[("c", "x")]).map(|m| m.rule.limits[0].requests_per_unit);
    assert_eq!(rpu, Some(0));
    let e = find(&c, "d", &[("e", "")]).map(|m| m.rule);
    assert!(e.is_some_and(|r| r.name.is_none() && r.replaces.is_empty()));
    assert_eq!(c.rules().len(), 2);
}
