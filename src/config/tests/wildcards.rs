//! Wildcards (their `TestWildcardConfig` and the glob's edges) and the walk's refusal to
//! backtrack.

use super::load;
use super::load_str;
use super::matching::{Want, check};
use crate::limit::Unit;

#[test]
fn wildcards() {
    let c = load(&["wildcard.yaml"]);
    let m = Unit::Minute;
    let cases: &[(&[(&str, &str)], Want)] = &[
        (&[("wild", "foo1")], Some((20, m, "test-domain.wild_foo*"))),
        (&[("wild", "foo")], Some((20, m, "test-domain.wild_foo*"))),
        (&[("wild", "fo")], None),
        (
            &[("noWild", "foo")],
            Some((20, m, "test-domain.noWild_foo")),
        ),
        // plain values never prefix-match
        (&[("noWild", "foo1")], None),
        (&[("noVal", "anything")], Some((20, m, "test-domain.noVal"))),
        (
            &[("midWild", "barb")],
            Some((20, m, "test-domain.midWild_bar*b")),
        ),
        (
            &[("midWild", "bar123b")],
            Some((20, m, "test-domain.midWild_bar*b")),
        ),
        (&[("midWild", "bar123")], None),
        (&[("midWild", "xbarb")], None),
        (
            &[("multiWild", "foobarbaz")],
            Some((10, m, "test-domain.multiWild_foo*bar*baz")),
        ),
        (
            &[("multiWild", "foo1bar2baz")],
            Some((10, m, "test-domain.multiWild_foo*bar*baz")),
        ),
        (&[("multiWild", "foo1baz2bar")], None),
        (&[("multiWild", "foobaz")], None),
        (
            &[("nestedWild", "val1"), ("wild", "goo1")],
            Some((20, m, "test-domain.nestedWild_val1.wild_goo*")),
        ),
        (&[("nestedWild", "val1"), ("wild", "foo1")], None),
        (&[("nestedWild", "val2"), ("wild", "goo1")], None),
    ];
    for (entries, want) in cases {
        check(&c, "test-domain", entries, *want);
    }
}

#[test]
fn wildcard_edges() {
    let c = load_str(
        "domain: d\ndescriptors:
  - {key: star, value: '*', rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: 'ke*', rate_limit: {unit: second, requests_per_unit: 2}}
  - {key: order, value: 'a*', rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: order, value: 'ab*', rate_limit: {unit: second, requests_per_unit: 4}}
  - {key: order, value: abc, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: order, rate_limit: {unit: second, requests_per_unit: 6}}
  - {key: double, value: 'x**y', rate_limit: {unit: second, requests_per_unit: 7}}
  - {key: over, value: 'ab*ba', rate_limit: {unit: second, requests_per_unit: 8}}
",
    );
    let s = Unit::Second;
    let cases: &[(&[(&str, &str)], Want)] = &[
        // `*` matches an empty value
        (&[("star", "")], Some((1, s, "d.star_*"))),
        (&[("star", "x")], Some((1, s, "d.star_*"))),
        // a `*` in the key: globbed against `key_value`
        (&[("key", "v")], Some((2, s, "d.key_ke*"))),
        (&[("kez", "")], Some((2, s, "d.kez_ke*"))),
        // exact beats wildcard, first wildcard in declaration order, key-only last
        (&[("order", "abc")], Some((5, s, "d.order_abc"))),
        (&[("order", "abd")], Some((3, s, "d.order_a*"))),
        (&[("order", "zzz")], Some((6, s, "d.order"))),
        // a literal `*` value matches the wildcard node exactly
        (&[("order", "a*")], Some((3, s, "d.order_a*"))),
        (&[("double", "xy")], Some((7, s, "d.double_x**y"))),
        (&[("double", "x--y")], Some((7, s, "d.double_x**y"))),
        // prefix and suffix may not overlap
        (&[("over", "aba")], None),
        (&[("over", "abba")], Some((8, s, "d.over_ab*ba"))),
        // non-ASCII around a glob
        (&[("order", "aé")], Some((3, s, "d.order_a*"))),
    ];
    for (entries, want) in cases {
        check(&c, "d", entries, *want);
    }
}

#[test]
fn no_backtracking() {
    let c = load_str(
        "domain: d\ndescriptors:
  - key: a
    value: '1'
    descriptors:
      - {key: b, value: x, rate_limit: {unit: second, requests_per_unit: 1}}
  - key: a
    descriptors:
      - {key: b, rate_limit: {unit: second, requests_per_unit: 2}}
  - key: w
    value: 'x*'
    descriptors:
      - {key: c, value: '1', rate_limit: {unit: second, requests_per_unit: 3}}
  - key: w
    value: 'xy*'
    descriptors:
      - {key: c, rate_limit: {unit: second, requests_per_unit: 4}}
  - key: leaf
    value: '1'
    rate_limit: {unit: second, requests_per_unit: 5}
",
    );
    let s = Unit::Second;
    // a_1 matched, so the key-only `a` branch is never tried for level 2.
    check(&c, "d", &[("a", "1"), ("b", "y")], None);
    check(
        &c,
        "d",
        &[("a", "1"), ("b", "x")],
        Some((1, s, "d.a_1.b_x")),
    );
    check(&c, "d", &[("a", "2"), ("b", "y")], Some((2, s, "d.a.b")));
    // The first wildcard wins even when only the second leads to a limit.
    check(&c, "d", &[("w", "xy1"), ("c", "2")], None);
    check(
        &c,
        "d",
        &[("w", "xy1"), ("c", "1")],
        Some((3, s, "d.w_x*.c_1")),
    );
    // (a, 1), (b, 2) does not match a leaf `a_1`: depth must match.
    check(&c, "d", &[("leaf", "1"), ("b", "2")], None);
    // `(a, b)` looks up `a_b`, which a `key: a_b` entry answers.
    let k = load_str(
        "domain: d\ndescriptors:\n  - {key: a_b, rate_limit: {unit: second, requests_per_unit: 9}}\n",
    );
    check(&k, "d", &[("a", "b")], Some((9, s, "d.a_b")));
    check(&k, "d", &[("a_b", "zz")], Some((9, s, "d.a_b")));
}

/// Request values are bytes: one that is not UTF-8 matches key-only rules and globs, gets
/// its own state tag, and shows escaped in stats keys.
#[test]
fn values_that_are_not_utf8() {
    let c = load_str(
        "domain: d\ndescriptors:\n  - key: any\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n  - key: glob\n    value: \"a*z\"\n    value_to_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n  - key: exact\n    value: \"\u{e9}\"\n    rate_limit: {unit: hour, requests_per_unit: 1}\n",
    );
    let Some(d) = c.domain("d") else { panic!() };
    let bytes = |k: &'static str, v: &'static [u8]| [(k.as_bytes(), v)];
    let ff = bytes("any", b"\xff\xfe");
    let m = d.find(&ff).expect("key-only rule");
    assert_eq!(m.stats_key(&ff), "d.any_\\xFF\\xFE");
    let fd = bytes("any", b"\xff\xfd");
    let typed = bytes("any", b"\\xFF\\xFE");
    let tag = |e: &[(&[u8], &[u8]); 1]| d.find(e).map(|m| m.state_tag(e));
    assert_ne!(tag(&ff), tag(&fd));
    assert_ne!(tag(&ff), tag(&typed), "shown alike, counted apart");
    let glob = bytes("glob", b"a\xc0\xffz");
    let m = d.find(&glob).expect("glob over bytes");
    assert_eq!(m.stats_key(&glob), "d.glob_a\\xC0\\xFFz");
    assert!(d.find(&bytes("glob", b"a\xc0\xff")).is_none());
    // Half a character never equals the whole one.
    assert!(d.find(&bytes("exact", b"\xc3")).is_none());
    assert!(d.find(&bytes("exact", "\u{e9}".as_bytes())).is_some());
    assert_eq!(crate::config::shown(b"ok"), "ok");
    assert_eq!(crate::config::shown(b"\xe2\x82"), "\\xE2\\x82");
}
