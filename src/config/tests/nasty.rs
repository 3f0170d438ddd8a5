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
    assert_eq!(
        errors[0].message,
        "deep.yaml: error loading config file: YAML nested more than 128 levels deep (recursion limit exceeded)"
    );
    assert!(errors[0].line.is_some(), "{:?}", errors[0]);
}

/// One error for `content`: (message, line).
fn only_error(content: &str) -> (String, Option<usize>) {
    let errors = build_files(&[inline("x.yaml", content)], false)
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1, "{errors:?}");
    (errors[0].message.clone(), errors[0].line)
}

/// Nine anchors, each nine aliases of the one before: 9^8 nodes if expanded.
fn laughs(indent: &str, map: bool) -> String {
    let mut s = String::new();
    for (i, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        let item = match i {
            0 => "x".to_string(),
            _ => format!("*{}", ["a", "b", "c", "d", "e", "f", "g"][i - 1]),
        };
        let body = if map {
            (1..=9)
                .map(|k| format!("k{k}: {item}"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            vec![item; 9].join(", ")
        };
        let (open, close) = if map { ("{", "}") } else { ("[", "]") };
        s.push_str(&format!("{indent}{name}: &{name} {open}{body}{close}\n"));
    }
    s
}

#[test]
fn alias_bombs_and_nesting_name_their_cause_and_place() {
    let head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
    // In metadata (expanded only by the typed decode): serde_yaml's alias limit.
    let bomb = format!("{head}    metadata:\n{}", laughs("      ", false));
    assert_eq!(
        only_error(&bomb),
        (
            "x.yaml: error loading config file: descriptors[0].metadata: YAML aliases expand to too much data (repetition limit exceeded: an alias bomb?)".into(),
            Some(5)
        )
    );
    // Aliased into a rule field (expanded by the key walk).
    let bomb = format!(
        "{head}    metadata:\n{}  - key: j\n    value: *h\n",
        laughs("      ", false)
    );
    let (msg, line) = only_error(&bomb);
    assert_eq!(
        (msg.as_str(), line),
        (
            "x.yaml: error loading config file: descriptors[1].value: YAML aliases expand to too much data (repetition limit exceeded: an alias bomb?)",
            Some(15)
        )
    );
    // Descriptor lists aliased into each other: stopped by the node budget long before
    // serde_yaml's limit, at the descriptor that holds the aliases.
    let mut bomb = String::from(
        "domain: d\ndescriptors:\n  - key: k1\n    descriptors: &l1 [{key: a}, {key: b}, {key: c}, {key: d}, {key: e}, {key: f}, {key: g}, {key: h}]\n",
    );
    for n in 2..=7 {
        let items = ["a", "b", "c", "d", "e", "f", "g", "h"]
            .map(|k| format!("{{key: {k}, descriptors: *l{}}}", n - 1))
            .join(", ");
        bomb.push_str(&format!(
            "  - key: k{n}\n    descriptors: &l{n} [{items}]\n"
        ));
    }
    let (msg, line) = only_error(&bomb);
    assert_eq!(
        (msg.as_str(), line),
        (
            "x.yaml: error loading config file: descriptors[3].descriptors: YAML aliases expand to more nodes than the file could hold without them (an alias bomb?)",
            Some(10)
        )
    );
    // Nesting in metadata: the depth limit, not "'metadata' must be a mapping".
    let deep = format!(
        "{head}    metadata: {{a: {}{}}}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert_eq!(
        only_error(&deep),
        (
            "x.yaml: error loading config file: descriptors[0].metadata: YAML nested more than 128 levels deep (recursion limit exceeded)".into(),
            Some(5)
        )
    );
    // A maps-of-aliases bomb used where a rate limit belongs.
    let bomb = format!(
        "{head}    metadata:\n{}  - key: j\n    rate_limit: *h\n",
        laughs("      ", true)
    );
    // Each unknown key of the expansion once, where the anchor defines it, then the walk
    // stops at the first repetition.
    let errors = build_files(&[inline("x.yaml", &bomb)], false)
        .err()
        .unwrap_or_default();
    assert!(errors[0].message.contains("unknown key 'k1'"), "{errors:?}");
    assert!(errors.len() < 20, "{errors:?}");
}

#[test]
fn honest_aliases_load() {
    let mut content = String::from(
        "domain: d\ndescriptors:\n  - key: k0\n    rate_limit: &common {unit: second, requests_per_unit: 5}\n",
    );
    for i in 1..200 {
        content.push_str(&format!("  - key: k{i}\n    rate_limit: *common\n"));
    }
    let c = build_files(&[inline("x.yaml", &content)], false).expect("loads");
    assert_eq!(c.rules().len(), 200);
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
