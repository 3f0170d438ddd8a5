//! The `consistency` field: its values, where `batched` is refused, and file/line/field in
//! its errors.

use super::{build_files, find, inline, load_str};
use crate::limit::Consistency;

#[test]
fn consistency_is_read_per_rule() {
    let c = load_str(
        "domain: d\ndescriptors:\n  - key: a\n    consistency: batched\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: b\n    consistency: strict\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: gcra}\n  - key: c\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}\n",
    );
    let rule = |k| find(&c, "d", &[(k, "")]).map(|m| m.rule.consistency);
    assert_eq!(rule("a"), Some(Some(Consistency::Batched)));
    assert_eq!(rule("b"), Some(Some(Consistency::Strict)));
    assert_eq!(rule("c"), Some(None));
}

#[test]
fn consistency_errors_name_file_line_and_field() {
    let cases = [
        (
            "domain: d\ndescriptors:\n  - key: a\n    consistency: eventual\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
            "consistency must be strict or batched, found 'eventual'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: a\n    consistency: batched\n    rate_limits:\n      - {unit: minute, requests_per_unit: 5}\n      - {unit: hour, requests_per_unit: 50, algorithm: sliding_log}\n",
            "consistency batched is not supported with algorithm sliding_log (a batch would charge its hits at flush time; the log records each hit's own time)",
        ),
    ];
    for (doc, want) in cases {
        let got = match build_files(&[inline("x.yaml", doc)], false) {
            Ok(_) => panic!("should fail:\n{doc}"),
            Err(e) => e,
        };
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].to_string(), format!("x.yaml: {want}"));
        assert_eq!(got[0].line, Some(4), "{doc}");
        assert!(
            format!("{:?}", got[0]).contains("consistency"),
            "{:?}",
            got[0]
        );
    }
}
