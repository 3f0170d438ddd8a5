//! Errors carry the line and column of the node they are about.

use super::{build_files, inline};

/// `(file, content, expected line, expected column)` of the first error.
#[test]
fn errors_carry_line_numbers() {
    let cases: &[(&str, usize, usize)] = &[
        // unknown key: the key itself
        (
            "domain: d\ndescriptors:\n  - key: a\n    ratelimit: {}\n",
            4,
            5,
        ),
        // non-map list element: the element
        ("domain: d\ndescriptors:\n  - key: a\n  - b\n", 4, 5),
        // invalid unit: the unit value
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: foo\n",
            5,
            13,
        ),
        // duplicate composite key: the second descriptor
        (
            "domain: d\ndescriptors:\n  - key: a\n  - key: b\n  - key: a\n",
            5,
            5,
        ),
        // duplicate domain / empty domain: the domain value
        ("domain: ''\n", 1, 9),
        // bad integer: the value
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: x\n",
            6,
            26,
        ),
        // replaces entry
        (
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: n\n      unit: second\n      replaces:\n        - name: n\n",
            8,
            11,
        ),
        // float leaf
        (
            "domain: d\ndescriptors:\n  - key: a\n    value: 2.5\n",
            4,
            12,
        ),
    ];
    for (content, line, column) in cases {
        let errors = build_files(&[inline("x.yaml", content)], false)
            .err()
            .unwrap_or_default();
        let e = errors
            .first()
            .unwrap_or_else(|| panic!("no error for {content}"));
        assert_eq!(
            (e.line, e.column),
            (Some(*line), Some(*column)),
            "{e} for:\n{content}"
        );
        assert_eq!(e.path.as_deref(), Some(std::path::Path::new("x.yaml")));
    }
    // A missing key points at the descriptor.
    let errors = messages_with_lines("domain: d\ndescriptors:\n  - key: a\n  - value: b\n");
    assert_eq!(
        errors,
        vec![("x.yaml: descriptor has empty key".to_owned(), Some(4))]
    );
}

fn messages_with_lines(content: &str) -> Vec<(String, Option<usize>)> {
    build_files(&[inline("x.yaml", content)], false)
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.to_string(), e.line))
        .collect()
}
