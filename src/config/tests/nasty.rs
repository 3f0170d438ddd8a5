//! Inputs that must be rejected (or loaded) without panicking.

use super::{build_files, inline};

fn survives(content: &str) {
    let _ = build_files(&[inline("nasty.yaml", content)], false);
    let _ = build_files(&[inline("nasty.yaml", content)], true);
}

#[test]
fn nasty_inputs_never_panic() {
    let deep_lists = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let deep_maps = (0..300)
        .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
        .collect::<String>();
    let mut deep_descriptors = String::from("domain: d\ndescriptors:\n");
    for i in 0..80 {
        let pad = "  ".repeat(2 * i + 1);
        deep_descriptors.push_str(&format!(
            "{pad}- key: k{i}\n{pad}  rate_limit: {{unit: second}}\n{pad}  descriptors:\n"
        ));
    }
    let laughs = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    let inputs = [
        deep_lists.as_str(),
        deep_maps.as_str(),
        deep_descriptors.as_str(),
        laughs,
        "domain: d\ndescriptors:\n  - &x {key: a, rate_limit: {unit: second}}\n  - *x\n",
        "domain: &d d\ndescriptors:\n  - key: *d\n    value: *d\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
        "domain: *missing\n",
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 99999999999999999999999999999999999999999}\n",
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -99999999999999999999999999999999999}\n",
        "domain: 1e400\n",
        "domain: d\ndescriptors:\n  - key: a\n    metadata: {x: &m [1, 2], y: *m, z: 1e999, w: -.inf}\n",
        "\u{feff}domain: d\n",
        "domain: \"\\u0000\"\ndescriptors: [{key: \"\\u0000\", value: '*'}]\n",
        "!!map {domain: d}\n",
        "!tag {domain: d}\n",
        "domain: !tag d\n",
        "? !tag k\n: v\n",
        "domain: d\ndescriptors: !!seq [{key: !!str 1}]\n",
        "%YAML 1.2\n---\ndomain: d\n...\n---\nfoo: [\n",
        "\t\tdomain: d",
        ":\n",
        "- - - -\n",
        "{{{{",
        "domain: d\ndescriptors:\n  - key: a\n    rate_limits: [{unit: second, algorithm: token_bucket, burst: 4294967295, requests_per_unit: 4294967295}]\n",
    ];
    for input in inputs {
        survives(input);
    }
}

#[test]
fn deep_descriptors_are_rejected_cleanly() {
    let mut content = String::from("domain: d\ndescriptors:\n");
    for i in 0..80 {
        let pad = "  ".repeat(2 * i + 1);
        content.push_str(&format!("{pad}- key: k{i}\n{pad}  descriptors:\n"));
    }
    let errors = build_files(&[inline("deep.yaml", &content)], false)
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .message
            .starts_with("deep.yaml: error loading config file: recursion limit exceeded"),
        "{}",
        errors[0]
    );
}

#[test]
fn lookups_with_odd_requests_never_panic() {
    let c = super::load(&["wildcard.yaml"]);
    let Some(d) = c.domain("test-domain") else {
        panic!()
    };
    let long = "x".repeat(100_000);
    let many: Vec<(&str, &str)> = (0..200).map(|_| ("nestedWild", "val1")).collect();
    let odd: [&[(&str, &str)]; 6] = [
        &[],
        &[("", "")],
        &[("wild", &long)],
        &[("é", "ü*")],
        &[("multiWild", "foobarbazfoobarbaz")],
        &many,
    ];
    for entries in odd {
        if let Some(m) = d.find(entries) {
            let _ = (m.stats_key(entries), m.state_tag(entries));
        }
    }
}
