//! Every error of their test suite, byte for byte, and ours.

use super::{build, build_files, inline, messages};

/// Load `files` (in order) and expect exactly one error, `expected`.
fn check(files: &[&str], merge: bool, expected: &str) {
    let got = messages(build(files, merge));
    assert_eq!(got, vec![expected.to_owned()], "files {files:?}");
}

#[test]
fn their_error_fixtures() {
    let cases: &[(&[&str], bool, &str)] = &[
        (
            &["bad_limit_unit.yaml"],
            false,
            "bad_limit_unit.yaml: invalid rate limit unit 'foo'",
        ),
        (
            &["basic_config.yaml", "duplicate_domain.yaml"],
            false,
            "duplicate_domain.yaml: duplicate domain 'test-domain' in config file",
        ),
        (
            &["duplicate_key.yaml"],
            false,
            "duplicate_key.yaml: duplicate descriptor composite key 'test-domain.key1_value1'",
        ),
        (
            &["empty_domain.yaml"],
            false,
            "empty_domain.yaml: config file cannot have empty domain",
        ),
        (
            &["empty_key.yaml"],
            false,
            "empty_key.yaml: descriptor has empty key",
        ),
        (
            &["misspelled_key.yaml"],
            false,
            "misspelled_key.yaml: config error, unknown key 'ratelimit'",
        ),
        (
            &["misspelled_key2.yaml"],
            false,
            "misspelled_key2.yaml: config error, unknown key 'requestsperunit'",
        ),
        (
            &["non_string_key.yaml"],
            false,
            "non_string_key.yaml: config error, key is not of type string: 0.25",
        ),
        (
            &["replaces_empty.yaml"],
            false,
            "replaces_empty.yaml: should not have an empty replaces entry",
        ),
        (
            &["replaces_self.yaml"],
            false,
            "replaces_self.yaml: replaces should not contain name of same descriptor",
        ),
        (
            &["unlimited_with_unit.yaml"],
            false,
            "unlimited_with_unit.yaml: should not specify rate limit unit when unlimited",
        ),
        (
            &["share_threshold_no_wildcard.yaml"],
            false,
            "share_threshold_no_wildcard.yaml: share_threshold can only be used with wildcard values (containing '*'), but found key 'files_files/a'",
        ),
        (
            &["merge_domain_key1.yaml", "merge_domain_key1.yaml"],
            true,
            "merge_domain_key1.yaml: duplicate descriptor composite key 'test-domain.key1_value1'",
        ),
        (
            &["merge_domain_key1.yaml", "merge_domain_key2.yaml"],
            false,
            "merge_domain_key2.yaml: duplicate domain 'test-domain' in config file",
        ),
    ];
    for (files, merge, expected) in cases {
        check(files, *merge, expected);
    }
}

/// Their fixture lists three elements that are not maps: theirs stops at the first, ours
/// names each.
#[test]
fn every_element_that_is_not_a_map_is_named() {
    let got = messages(build(&["non_map_list.yaml"], false));
    let expected: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|v| {
            format!("non_map_list.yaml: config error, yaml file contains list of type other than map: {v}")
        })
        .collect();
    assert_eq!(got, expected);
}

/// One file, three errors of three passes (an unknown key, a unit, a duplicate key, and a
/// duplicate descriptor): one run names them all, in file order within each pass, the
/// key walk's first (their first message is the reference's own).
#[test]
fn one_run_reports_every_error_of_a_file() {
    let content = "domain: d\ndescriptors:\n  - key: a\n    ratelimit: {unit: second}\n  - key: b\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - key: c\n    rate_limit: {unit: hour, requests_per_unit: 1}\n    value: x\n    value: y\n  - key: b\n";
    let errors = build_files(&[inline("x.yaml", content)], false)
        .err()
        .unwrap_or_default();
    let got: Vec<(String, Option<usize>)> =
        errors.iter().map(|e| (e.message.clone(), e.line)).collect();
    assert_eq!(
        got,
        [
            (
                "x.yaml: config error, unknown key 'ratelimit'".to_owned(),
                Some(4)
            ),
            (
                "x.yaml: config error, duplicate key 'value'".to_owned(),
                Some(10)
            ),
            (
                "x.yaml: invalid rate limit unit 'fortnight'".to_owned(),
                Some(6)
            ),
            (
                "x.yaml: duplicate descriptor composite key 'd.b'".to_owned(),
                Some(11)
            ),
        ]
    );
}

#[test]
fn bad_yaml_keeps_the_parser_message() {
    let got = messages(build(&["bad_yaml.yaml"], false));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with("bad_yaml.yaml: error loading config file: ") && got[0].len() > 45,
        "{got:?}"
    );
}

/// Inline documents and the one message each must produce (file name `x.yaml`).
fn check_str(content: &str, expected: &str) {
    let got = messages(build_files(&[inline("x.yaml", content)], false));
    assert_eq!(got, vec![format!("x.yaml: {expected}")], "for:\n{content}");
}

#[test]
fn their_pipeline_on_inline_documents() {
    let d = "domain: d\ndescriptors:\n";
    let cases: &[(&str, &str)] = &[
        ("", "config file cannot have empty domain"),
        ("# only a comment\n", "config file cannot have empty domain"),
        ("domain: ''\n", "config file cannot have empty domain"),
        // Later YAML documents are ignored, like yaml.v2.
        (
            "descriptors: []\n---\ndomain: d\n",
            "config file cannot have empty domain",
        ),
        ("domain: d\nfoo: 1\n", "config error, unknown key 'foo'"),
        (
            "domain: d\n1: x\n",
            "config error, key is not of type string: 1",
        ),
        (
            "domain: d\ntrue: x\n",
            "config error, key is not of type string: true",
        ),
        (
            "domain: d\n~: x\n",
            "config error, key is not of type string: <nil>",
        ),
        (
            "domain: d\n? [a, b]\n: x\n",
            "config error, key is not of type string: [a b]",
        ),
        (
            &format!("{d}  - 5\n"),
            "config error, yaml file contains list of type other than map: 5",
        ),
        (
            &format!("{d}  - [x, y]\n"),
            "config error, yaml file contains list of type other than map: [x y]",
        ),
        (
            &format!("{d}  -\n"),
            "config error, yaml file contains list of type other than map: <nil>",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit:\n      unit: second\n      replaces: [foo]\n"),
            "config error, yaml file contains list of type other than map: foo",
        ),
        (
            &format!("{d}  - key: a\n    value: 1.5\n"),
            "error checking config",
        ),
        (
            &format!("{d}  - key: a\n    value: 9223372036854775808\n"),
            "error checking config",
        ),
        // Not checked under metadata.
        (
            &format!("{d}  - key: ''\n    metadata: {{x: 1.5, 2: [a]}}\n"),
            "descriptor has empty key",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{}}\n"),
            "invalid rate limit unit ''",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{unit: UNKNOWN}}\n"),
            "invalid rate limit unit 'UNKNOWN'",
        ),
        (
            &format!("{d}  - key: a\n  - key: a\n"),
            "duplicate composite key placeholder",
        ),
        // String-based composite keys collide, as theirs do.
        (
            &format!("{d}  - key: a\n    value: b\n  - key: a_b\n"),
            "duplicate descriptor composite key 'd.a_b'",
        ),
        (
            &format!(
                "{d}  - key: a\n    descriptors:\n      - key: b\n        value: c\n      - key: b\n        value: c\n"
            ),
            "duplicate descriptor composite key 'd.a.b_c'",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{unit: second, replaces: [{{name: ''}}]}}\n"),
            "should not have an empty replaces entry",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{unit: second, requests_per_unit: -1}}\n"),
            "error loading config file: 'requests_per_unit' must be an integer between 0 and 9007199254740992, found '-1'",
        ),
        // Budgets go to 2^53 (the largest count every store keeps exact), no further.
        (
            &format!(
                "{d}  - key: a\n    rate_limit: {{unit: second, requests_per_unit: 9007199254740993}}\n"
            ),
            "error loading config file: 'requests_per_unit' must be an integer between 0 and 9007199254740992, found '9007199254740993'",
        ),
        (
            &format!(
                "{d}  - key: a\n    rate_limit: {{unit: second, requests_per_unit: 5, algorithm: gcra, burst: 9007199254740993}}\n"
            ),
            "error loading config file: 'burst' must be an integer between 0 and 9007199254740992, found '9007199254740993'",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{unit: second, requests_per_unit: '5'}}\n"),
            "error loading config file: 'requests_per_unit' must be an integer between 0 and 9007199254740992, found '5'",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: []\n"),
            "error loading config file: 'rate_limit' must be a mapping",
        ),
        (
            "domain: d\ndescriptors: x\n",
            "error loading config file: 'descriptors' must be a list of descriptors",
        ),
        (
            "domain: d\ndescriptors: {key: a}\n",
            "error loading config file: 'descriptors' must be a list of descriptors",
        ),
        (
            "domain: [d]\n",
            "config error, yaml file contains list of type other than map: d",
        ),
        (
            "domain: {key: d}\n",
            "error loading config file: 'domain' must be a string",
        ),
        (
            &format!("{d}  - key: a\n    shadow_mode: maybe\n"),
            "error loading config file: 'shadow_mode' must be true or false, found 'maybe'",
        ),
        (
            &format!("{d}  - key: a\n    metadata: x\n"),
            "error loading config file: 'metadata' must be a mapping",
        ),
        (
            &format!("{d}  - key: a\n    metadata: {{x: .nan}}\n"),
            "error parsing metadata: invalid number NaN",
        ),
        (
            &format!("{d}  - key: a\n    metadata: {{1: x}}\n"),
            "error parsing metadata: key is not of type string: 1",
        ),
        (
            "- a\n",
            "error loading config file: the top level must be a mapping with 'domain' and 'descriptors', found a list",
        ),
        (
            "just text\n",
            "error loading config file: the top level must be a mapping with 'domain' and 'descriptors', found a string",
        ),
        // Ours: duplicate keys, and known keys at the wrong level.
        (
            "domain: d\ndomain: e\n",
            "config error, duplicate key 'domain'",
        ),
        (
            &format!("{d}  - key: a\n    unit: second\n"),
            "config error, key 'unit' is not allowed in a descriptor (it belongs in rate_limit)",
        ),
        (
            &format!("{d}  - key: a\n    domain: x\n"),
            "config error, key 'domain' is not allowed in a descriptor (it belongs at the top level)",
        ),
        (
            "domain: d\nkey: a\n",
            "config error, key 'key' is not allowed at the top level (it belongs in a descriptor)",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{unit: second, key: x}}\n"),
            "config error, key 'key' is not allowed in rate_limit (it belongs in a descriptor)",
        ),
        (
            &format!("{d}  - key: a\n    rate_limit: {{unit: second, replaces: [{{unit: x}}]}}\n"),
            "config error, key 'unit' is not allowed in a replaces entry (it belongs in rate_limit)",
        ),
        (
            &format!("{d}  - key: a\n    name: x\n"),
            "config error, key 'name' is not allowed in a descriptor (it belongs in rate_limit or a replaces entry)",
        ),
        (
            &format!("{d}  - key: a\n    <<: {{value: b}}\n"),
            "config error, unknown key '<<'",
        ),
        (
            &format!("{d}  - key: a\n    value: !custom b\n"),
            "error loading config file: YAML tags are not supported",
        ),
    ];
    for (content, expected) in cases {
        if expected.contains("placeholder") {
            check_str(content, "duplicate descriptor composite key 'd.a'");
        } else {
            check_str(content, expected);
        }
    }
}

#[test]
fn every_bad_file_is_reported_and_good_ones_do_not_hide_them() {
    let files = [
        super::fixture("bad_limit_unit.yaml"),
        super::fixture("basic_config.yaml"),
        super::fixture("misspelled_key.yaml"),
        super::fixture("bad_yaml.yaml"),
    ];
    let got = messages(build_files(&files, false));
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0], "bad_limit_unit.yaml: invalid rate limit unit 'foo'");
    // A file that fails after its domain check still claims its domain: fixing it alone
    // would leave this conflict, so it is reported now.
    assert_eq!(
        got[1],
        "basic_config.yaml: duplicate domain 'test-domain' in config file"
    );
    assert_eq!(
        got[2],
        "misspelled_key.yaml: config error, unknown key 'ratelimit'"
    );
    // Its key error does not hide what validation finds beside it.
    assert_eq!(
        got[3],
        "misspelled_key.yaml: duplicate domain 'test-domain' in config file"
    );
    assert!(got[4].starts_with("bad_yaml.yaml: error loading config file: "));
}

#[test]
fn syntax_errors_win_over_key_errors_before_them() {
    let got = messages(build_files(
        &[inline("x.yaml", "domain: d\nfoo: 1\nbar: [\n")],
        false,
    ));
    assert!(
        got[0].starts_with("x.yaml: error loading config file: "),
        "{got:?}"
    );
}

#[test]
fn key_errors_come_before_type_errors_before_them() {
    let content = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: x}\n  - key: b\n    bogus: 1\n";
    let got = messages(build_files(&[inline("x.yaml", content)], false));
    assert_eq!(
        got,
        [
            "x.yaml: config error, unknown key 'bogus'",
            "x.yaml: error loading config file: 'requests_per_unit' must be an integer between 0 and 9007199254740992, found 'x'",
        ]
    );
}

#[test]
fn type_errors_win_over_validation_errors_before_them() {
    let content = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: foo}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: x}\n";
    check_str(
        content,
        "error loading config file: 'requests_per_unit' must be an integer between 0 and 9007199254740992, found 'x'",
    );
}

/// `detailed_metric` on a descriptor without limits, or unlimited, loads (their files must)
/// and is said to do nothing, with its line.
#[test]
fn detailed_metric_where_no_rule_counts_is_a_warning() {
    let content = "domain: d\ndescriptors:\n  - key: a\n    detailed_metric: true\n    descriptors:\n      - key: b\n        rate_limit: {unit: hour, requests_per_unit: 1}\n  - key: c\n    detailed_metric: true\n    rate_limit: {unlimited: true}\n  - key: e\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n";
    let config = build_files(&[inline("x.yaml", content)], false).expect("loads");
    let got: Vec<(String, Option<usize>)> = config
        .warnings()
        .iter()
        .map(|w| (w.message.clone(), w.line))
        .collect();
    assert_eq!(
        got,
        [
            (
                "x.yaml: detailed_metric has no effect: 'd.a' has no rate_limit: it names the series of the rule a request lands on, so put it on that descriptor".to_owned(),
                Some(4)
            ),
            (
                "x.yaml: detailed_metric has no effect: 'd.c' is unlimited, and unlimited rules count nothing".to_owned(),
                Some(9)
            ),
        ]
    );
}
