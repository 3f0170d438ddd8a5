//! Stats keys (their §2.13 and every key their tests assert), state tags
//! (`share_threshold`), and `/rlconfig`.

use std::borrow::Cow;

use super::{find, load, load_str};
use crate::config::{RateLimitConfig, override_state_tag, override_stats_key};
use crate::limit::StateTag;

/// The stats key of a lookup that must match.
fn stats(c: &RateLimitConfig, domain: &str, entries: &[(&str, &str)]) -> String {
    match find(c, domain, entries) {
        Some(m) => m.stats_key(entries).into_owned(),
        None => panic!("{entries:?} should match"),
    }
}

fn tag(c: &RateLimitConfig, domain: &str, entries: &[(&str, &str)]) -> StateTag {
    match find(c, domain, entries) {
        Some(m) => m.state_tag(entries),
        None => panic!("{entries:?} should match"),
    }
}

#[test]
fn stats_keys_their_tests_assert() {
    let basic = load(&["basic_config.yaml"]);
    let share = load(&["share_threshold.yaml"]);
    let vtm = load(&["value_to_metric.yaml"]);
    type Case<'a> = (
        &'a RateLimitConfig,
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a str,
    );
    let cases: &[Case] = &[
        (
            &basic,
            "test-domain",
            &[("key1", "value1"), ("subkey1", "x")],
            "test-domain.key1_value1.subkey1",
        ),
        (
            &basic,
            "test-domain",
            &[("key7", "unspecified_value")],
            "test-domain.key7_unspecified_value",
        ),
        (
            &vtm,
            "domain",
            &[
                ("route", "draw"),
                ("http_method", "GET"),
                ("subject_id", "123"),
            ],
            "domain.route_draw.http_method_GET.subject_id",
        ),
        (
            &share,
            "test-domain",
            &[("route", "api/v1"), ("method", "GET")],
            "test-domain.route_api/*.method",
        ),
        (
            &share,
            "test-domain",
            &[("service", "svc/a"), ("endpoint", "get")],
            "test-domain.service_svc/*.endpoint_get",
        ),
        (
            &share,
            "test-domain",
            &[("files", "top/a"), ("files", "nested/b")],
            "test-domain.files_top/*.files_nested/*",
        ),
    ];
    for (c, domain, entries, want) in cases {
        assert_eq!(stats(c, domain, entries), *want, "{entries:?}");
    }
}

#[test]
fn value_to_metric_and_detailed_metric() {
    let c = load(&["value_to_metric.yaml"]);
    let cases: &[(&[(&str, &str)], &str)] = &[
        // empty runtime value: no `_`
        (
            &[("route", "draw"), ("http_method", ""), ("subject_id", "1")],
            "domain.route_draw.http_method.subject_id",
        ),
        // a wildcard level with value_to_metric shows the runtime value
        (&[("wild", "foo1")], "domain.wild_foo1"),
        // detailed_metric overrides value_to_metric
        (
            &[("plain", "fixed"), ("detailed", "x")],
            "domain.plain_fixed.detailed_x",
        ),
        (
            &[("plain", "fixed"), ("detailed", "")],
            "domain.plain_fixed.detailed_",
        ),
    ];
    for (entries, want) in cases {
        assert_eq!(stats(&c, "domain", entries), *want, "{entries:?}");
    }
    let nested = load_str(
        "domain: nested\ndescriptors:\n  - key: key_2\n    value: key-2-value\n    descriptors:\n      - key: key_3\n        detailed_metric: true\n        rate_limit: {unit: minute, requests_per_unit: 1}\n",
    );
    let entries = [("key_2", "key-2-value"), ("key_3", "requested-key3-value")];
    assert_eq!(
        stats(&nested, "nested", &entries),
        "nested.key_2_key-2-value.key_3_requested-key3-value"
    );
    // A request shorter than the config matches nothing.
    assert!(find(&nested, "nested", &[("key_2", "key-2-value")]).is_none());
}

#[test]
fn share_threshold_stats_keys() {
    let c = load(&["share_threshold.yaml"]);
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("files", "files/a")], "test-domain.files_files/*"),
        (
            &[("nested_parent", "x"), ("files", "nested/a")],
            "test-domain.nested_parent.files_nested/*",
        ),
        (
            &[("path", "path/a"), ("file", "file/x"), ("type", "t")],
            "test-domain.path_path/*.file_file/*.type",
        ),
        (
            &[
                ("user", "user/1"),
                ("resource", "res/2"),
                ("action", "read"),
            ],
            "test-domain.user_user/*.resource_res/*.action",
        ),
        (&[("file", "test1")], "test-domain.file_test1"),
        (&[("file", "test2")], "test-domain.file_test*"),
        (&[("midpath", "/api/foo/v1")], "test-domain.midpath_/api*v1"),
        (
            &[("multiroute", "svc-a-ep-b-rpc")],
            "test-domain.multiroute_svc*ep*rpc",
        ),
        (&[("midroute", "/api/x/v2")], "test-domain.midroute_/api*v2"),
        (
            &[("tenant", "t1prod"), ("resource", "res9v2")],
            "test-domain.tenant_t*prod.resource_res*v2",
        ),
    ];
    for (entries, want) in cases {
        assert_eq!(stats(&c, "test-domain", entries), *want, "{entries:?}");
    }
    // The explicit value has its own limit.
    let limit =
        |e: &[(&str, &str)]| find(&c, "test-domain", e).map(|m| m.rule.limits[0].requests_per_unit);
    assert_eq!(limit(&[("file", "test1")]), Some(50));
    assert_eq!(limit(&[("file", "test2")]), Some(100));
}

#[test]
fn share_threshold_state_tags() {
    let c = load(&["share_threshold.yaml"]);
    let t = |e: &[(&str, &str)]| tag(&c, "test-domain", e);
    let shared = [
        (vec![("files", "files/a")], vec![("files", "files/b")]),
        (
            vec![("files", "top/a"), ("files", "nested/1")],
            vec![("files", "top/b"), ("files", "nested/2")],
        ),
        (
            vec![("path", "path/a"), ("file", "file/x"), ("type", "t")],
            vec![("path", "path/b"), ("file", "file/x"), ("type", "t")],
        ),
        (
            vec![("user", "user/1"), ("resource", "res/1"), ("action", "r")],
            vec![("user", "user/2"), ("resource", "res/2"), ("action", "r")],
        ),
        (
            vec![("midpath", "/apiv1")],
            vec![("midpath", "/api/long/v1")],
        ),
        (
            vec![("multiroute", "svcepr rpc")],
            vec![("multiroute", "svc1ep2rpc")],
        ),
        (
            vec![("tenant", "t1prod"), ("resource", "resAv2")],
            vec![("tenant", "t2prod"), ("resource", "resBv2")],
        ),
        (vec![("file", "test2")], vec![("file", "test3")]),
    ];
    for (a, b) in &shared {
        assert_eq!(t(a), t(b), "{a:?} and {b:?} should share");
    }
    let distinct = [
        // the non-shared wildcard level keeps its value
        (
            vec![("path", "path/a"), ("file", "file/x"), ("type", "t")],
            vec![("path", "path/a"), ("file", "file/y"), ("type", "t")],
        ),
        // a plain level keeps its value
        (
            vec![("route", "api/1"), ("method", "GET")],
            vec![("route", "api/1"), ("method", "PUT")],
        ),
        (vec![("file", "test1")], vec![("file", "test2")]),
    ];
    for (a, b) in &distinct {
        assert_ne!(t(a), t(b), "{a:?} and {b:?} should not share");
    }
    // The shared pattern stands in for the value.
    assert_eq!(
        t(&[("files", "files/a")]),
        StateTag::compute("test-domain", [("files", "files/*")])
    );
    // Without share_threshold every value has its own state, tagged like an override.
    let w = load(&["wildcard.yaml"]);
    let e = [("wild", "foo1")];
    assert_eq!(
        tag(&w, "test-domain", &e),
        override_state_tag("test-domain", &e)
    );
    assert_ne!(
        tag(&w, "test-domain", &e),
        tag(&w, "test-domain", &[("wild", "foo2")])
    );
}

#[test]
fn static_stats_keys_borrow() {
    let c = load(&["basic_config.yaml"]);
    let e = [("key1", "value1"), ("subkey1", "x")];
    let m = find(&c, "test-domain", &e);
    assert!(m.is_some_and(|m| matches!(m.stats_key(&e), Cow::Borrowed(_))));
    assert!(m.is_some_and(|m| &*m.rule.full_key == "test-domain.key1_value1.subkey1"));
    // An exact match of a `key_` entry with an empty value prints without `_` (their code).
    let c = load_str(
        "domain: d\ndescriptors:\n  - {key: a_, rate_limit: {unit: second, requests_per_unit: 1}}\n",
    );
    assert_eq!(stats(&c, "d", &[("a", "")]), "d.a");
    assert_eq!(stats(&c, "d", &[("a_", "x")]), "d.a_");
}

#[test]
fn override_keys() {
    let e = [("key1", "value1"), ("subkey1", "something")];
    assert_eq!(
        override_stats_key("test-domain", &e, false),
        "test-domain.key1_value1.subkey1_something"
    );
    assert_eq!(
        override_stats_key("d", &[("a", ""), ("b", "c")], false),
        "d.a.b_c"
    );
    assert_ne!(
        override_state_tag("d", &[("a", "b_c")]),
        override_state_tag("d", &[("a_b", "c")])
    );
}

#[test]
fn dump_format() {
    let c = load(&["basic_config.yaml"]);
    let dump = c.dump();
    let lines: Vec<&str> = dump.lines().collect();
    assert_eq!(lines.len(), 10);
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted);
    for want in [
        "test-domain.key1_value1.subkey1: unit=SECOND requests_per_unit=5, shadow_mode: false, quota_mode: false, algorithm=fixed_window",
        "test-domain.key6: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false",
        "test-domain.key4: unit=DAY requests_per_unit=1, shadow_mode: false, quota_mode: false, algorithm=fixed_window",
    ] {
        assert!(lines.contains(&want), "missing {want} in\n{dump}");
    }
    assert!(dump.ends_with('\n'));
    let ext = load(&["extensions.yaml"]);
    let dump = ext.dump();
    for want in [
        "ext.sliding: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false, algorithm=sliding_window buckets=20",
        "ext.token: unit=SECOND requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm=token_bucket burst=40",
        "ext.gcra: unit=MINUTE requests_per_unit=60, shadow_mode: false, quota_mode: false, algorithm=gcra burst=5 overdraft=true penalty_seconds=30",
        "ext.no_overdraft: unit=HOUR requests_per_unit=1, shadow_mode: false, quota_mode: false, algorithm=fixed_window overdraft=false",
        "ext.multi: unit=SECOND requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm=token_bucket burst=20 slot=0",
        "ext.multi: unit=DAY requests_per_unit=10000, shadow_mode: false, quota_mode: false, algorithm=fixed_window slot=1",
        "ext.five_minutes: unit=MINUTE unit_multiplier=5 requests_per_unit=100, shadow_mode: false, quota_mode: false, algorithm=fixed_window",
    ] {
        assert!(dump.lines().any(|l| l == want), "missing {want} in\n{dump}");
    }
    assert_eq!(RateLimitConfig::empty().dump(), "");
}

/// `SANITIZE_DESCRIPTOR_METRIC_DOTS`: dots of keys and values become `_` in stats keys —
/// from the config path, from request values and in overrides — while matching, the
/// config path (`full_key`, messages) and the state are untouched.
#[test]
fn sanitized_dots_in_stats_keys_only() {
    let rules = r#"domain: my.domain
descriptors:
  - key: host
    value: api.example.com
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: ip.v4
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: "/svc.*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: method
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 1}
"#;
    let file = super::inline("dots.yaml", rules);
    let load = |sanitize: bool| {
        RateLimitConfig::build(
            std::slice::from_ref(&file),
            &crate::config::LoadOptions {
                sanitize_metric_dots: sanitize,
                ..crate::config::LoadOptions::default()
            },
        )
        .expect("loads")
    };
    let (plain, clean) = (load(false), load(true));
    let host = [("host", "api.example.com")];
    let ip = [("ip.v4", "10.0.0.1")];
    let path = [("path", "/svc.Greeter/Say")];
    let method = [("method", "Get.v2")];
    for (entries, before, after) in [
        (
            &host[..],
            "my.domain.host_api.example.com",
            "my.domain.host_api_example_com",
        ),
        (
            &ip[..],
            "my.domain.ip.v4_10.0.0.1",
            "my.domain.ip_v4_10_0_0_1",
        ),
        (&path[..], "my.domain.path_/svc.*", "my.domain.path_/svc_*"),
        (
            &method[..],
            "my.domain.method_Get.v2",
            "my.domain.method_Get_v2",
        ),
    ] {
        assert_eq!(stats(&plain, "my.domain", entries), before);
        assert_eq!(stats(&clean, "my.domain", entries), after);
        // Same counter either way.
        assert_eq!(
            tag(&plain, "my.domain", entries),
            tag(&clean, "my.domain", entries)
        );
    }
    let m = find(&clean, "my.domain", &host).expect("matches");
    assert_eq!(&*m.rule.full_key, "my.domain.host_api.example.com");
    let d = clean.domain("my.domain").expect("domain");
    assert_eq!(
        d.override_stats_key(&[("a.b", "1.2"), ("c", "")]),
        "my.domain.a_b_1_2.c"
    );
    assert_eq!(
        plain
            .domain("my.domain")
            .expect("domain")
            .override_stats_key(&[("a.b", "1.2")]),
        "my.domain.a.b_1.2"
    );
}
