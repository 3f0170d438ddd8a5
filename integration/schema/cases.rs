//! The inline documents of `schema::inline_documents_get_the_same_verdict_from_schema_and_loader`:
//! each a rule file and whether both the loader and the schema must accept it.

/// (document, valid) pairs, grouped by the rule they exercise.
pub(super) fn inline_cases() -> Vec<(String, bool)> {
    let d = "domain: d\ndescriptors:\n";
    let limit = |body: &str| format!("{d}  - key: k\n    rate_limit: {{{body}}}\n");
    let desc = |body: &str| format!("{d}  - {{{body}}}\n");
    vec![
        // Units and algorithms in any case; empty algorithm = default.
        (limit("unit: Second, requests_per_unit: 1"), true),
        (limit("unit: HOUR, requests_per_unit: 1"), true),
        (limit("unit: wEeK, requests_per_unit: 1"), true),
        (limit("unit: fortnight, requests_per_unit: 1"), false),
        (limit("unit: '', requests_per_unit: 1"), false),
        (limit("requests_per_unit: 1"), false),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {}\n".into(),
            false,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: GCRA, burst: 2"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: Token_Bucket"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: ''"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: ~"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: fixed"),
            false,
        ),
        // Integers: range, type; null is unset.
        (limit("unit: second"), true),
        (limit("unit: second, requests_per_unit: ~"), true),
        (limit("unit: second, requests_per_unit: 0"), true),
        (limit("unit: second, requests_per_unit: 4294967295"), true),
        (limit("unit: second, requests_per_unit: 4294967296"), true),
        (
            limit("unit: second, requests_per_unit: 9007199254740992"),
            true,
        ),
        // (2^53 + 1 is a double's 2^53 to a JSON Schema validator: the loader alone refuses it.)
        (
            limit("unit: second, requests_per_unit: 9007199254740994"),
            false,
        ),
        (limit("unit: second, requests_per_unit: -1"), false),
        (limit("unit: second, requests_per_unit: '5'"), false),
        (limit("unit: second, requests_per_unit: 1.5"), false),
        // Calendars: day, week, month or year; the window algorithms; a zone or UTC.
        (
            limit(
                "unit: Month, requests_per_unit: 30000000000, calendar: {time_zone: Asia/Kolkata}",
            ),
            true,
        ),
        (limit("unit: day, requests_per_unit: 5, calendar: {}"), true),
        (limit("unit: day, requests_per_unit: 5, calendar: ~"), true),
        (
            limit(
                "unit: week, requests_per_unit: 5, algorithm: Sliding_Window, calendar: {time_zone: ~}",
            ),
            true,
        ),
        (
            limit("unit: minute, requests_per_unit: 5, calendar: {}"),
            false,
        ),
        (
            limit("unit: day, requests_per_unit: 5, algorithm: gcra, calendar: {}"),
            false,
        ),
        (
            limit("unit: day, requests_per_unit: 5, calendar: {zone: UTC}"),
            false,
        ),
        (
            limit("unit: day, requests_per_unit: 5, calendar: UTC"),
            false,
        ),
        (
            format!(
                "{d}  - key: k\n    rate_limits: [{{unit: year, requests_per_unit: 5, calendar: {{}}}}]\n"
            ),
            true,
        ),
        // unlimited: no unit, no extension; null and empty count as unset.
        (limit("unlimited: true"), true),
        (limit("unlimited: yes"), true),
        (
            limit("unlimited: true, unit: ~, burst: ~, algorithm: ''"),
            true,
        ),
        (limit("unlimited: true, requests_per_unit: 5"), true),
        (limit("unlimited: true, unit: DAY"), false),
        (limit("unlimited: true, penalty_seconds: 5"), false),
        (limit("unlimited: true, overdraft: false"), false),
        (limit("unlimited: false, unit: day"), true),
        (limit("unlimited: maybe"), false),
        // Extension fields and where they belong.
        (limit("unit: second, requests_per_unit: 5, burst: ~"), true),
        (
            limit("unit: second, requests_per_unit: 5, buckets: ~"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: sliding_window, buckets: 2"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: sliding_window, buckets: 1"),
            false,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: gcra, buckets: 10"),
            false,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: sliding_log, burst: 9"),
            false,
        ),
        (
            limit("unit: second, requests_per_unit: 10000, algorithm: sliding_log"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: sliding_log, overdraft: off"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, algorithm: Sliding_Log, overdraft: on"),
            false,
        ),
        (limit("unit: second, algorithm: token_bucket"), false),
        (
            limit("unit: second, requests_per_unit: 5, penalty_seconds: 0"),
            true,
        ),
        (
            limit("unit: second, requests_per_unit: 5, overdraft: 'no'"),
            true,
        ),
        // Scalars read as text; floats are not.
        (desc("key: 404, value: 7"), true),
        (desc("key: true, value: false"), true),
        (desc("key: k, value: ~"), true),
        (desc("key: k, value: 1.5"), false),
        (desc("key: ~"), false),
        (desc("key: ''"), false),
        ("domain: 7\n".into(), true),
        ("domain: ''\n".into(), false),
        ("domain: [d]\n".into(), false),
        ("".into(), false),
        // Flags: YAML 1.1 words, quoted or not; null is false.
        (
            desc("key: k, shadow_mode: yes, quota_mode: Off, detailed_metric: 'true'"),
            true,
        ),
        (desc("key: k, value_to_metric: ~"), true),
        (desc("key: k, shadow_mode: maybe"), false),
        (desc("key: k, shadow_mode: 1"), false),
        // Null lists and limits are empty / absent.
        ("domain: d\ndescriptors: ~\n".into(), true),
        (
            desc("key: k, rate_limit: ~, rate_limits: ~, descriptors: ~"),
            true,
        ),
        (
            desc("key: k, rate_limit: ~, rate_limits: [{unit: second}]"),
            true,
        ),
        (
            desc("key: k, rate_limits: [{unit: second, unlimited: false}]"),
            true,
        ),
        (desc("key: k, rate_limit: []"), false),
        ("domain: d\ndescriptors: {key: a}\n".into(), false),
        (desc("key: k, descriptors: [x]"), false),
        // share_threshold needs a glob in the composite key.
        (desc("key: k, value: 'a*', share_threshold: true"), true),
        (desc("key: 'k*', share_threshold: true"), true),
        (desc("key: k, value: a, share_threshold: false"), true),
        (desc("key: k, share_threshold: on"), false),
        // metadata: any mapping, unchecked inside.
        (
            desc("key: k, metadata: {x: 1.5, y: [a, {b: ~}], unit: 3}"),
            true,
        ),
        (desc("key: k, metadata: ~"), true),
        (desc("key: k, metadata: x"), false),
        // replaces entries: maps with a non-empty name.
        (
            limit("unit: second, name: a, replaces: [{name: b}, {name: 7}]"),
            true,
        ),
        (limit("unit: second, replaces: ~"), true),
        (limit("unit: second, replaces: [b]"), false),
        (limit("unit: second, replaces: [{name: ''}]"), false),
        (limit("unit: second, replaces: [{}]"), false),
        (limit("unit: second, replaces: [{name: b, unit: x}]"), false),
        // Windows of several units: an integer of at least 1 (null is the default, 1), not
        // with unlimited.
        (
            limit("unit: minute, requests_per_unit: 5, unit_multiplier: 5"),
            true,
        ),
        (
            limit("unit: minute, requests_per_unit: 5, unit_multiplier: 1"),
            true,
        ),
        (
            limit("unit: minute, requests_per_unit: 5, unit_multiplier: ~"),
            true,
        ),
        (
            limit("unit: minute, requests_per_unit: 5, unit_multiplier: 0"),
            false,
        ),
        (
            limit("unit: minute, requests_per_unit: 5, unit_multiplier: '5'"),
            false,
        ),
        (limit("unlimited: true, unit_multiplier: 5"), false),
        // A rule's response: only where there is a limit to deny with, not unlimited;
        // content_type with raw_body; hide_current_limit with hidden; headers by name.
        (
            format!(
                "{d}  - key: k\n    rate_limit: {{unit: second}}\n    response:\n      \
                 raw_body: '{{\"e\": 1}}'\n      content_type: application/json\n      \
                 headers: {{X-Rule: per-k, n: 7, ok: true}}\n      hidden: yes\n      \
                 hide_current_limit: on\n"
            ),
            true,
        ),
        (
            desc("key: k, rate_limits: [{unit: second}], response: {hidden: true}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: second}, response: {}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: second}, response: ~"),
            true,
        ),
        (desc("key: k, response: ~"), true),
        (desc("key: k, response: {}"), false),
        (
            desc("key: k, rate_limit: ~, response: {hidden: true}"),
            false,
        ),
        (
            desc("key: k, rate_limit: ~, rate_limits: [{unit: day}], response: {hidden: on}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unlimited: yes}, response: {}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unlimited: false, unit: day}, response: {}"),
            true,
        ),
        (desc("key: k, rate_limit: {unit: day}, response: x"), false),
        (
            desc("key: k, rate_limit: {unit: day}, response: {raw_body: ''}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {raw_body: ~}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {raw_body: 404}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {content_type: text/html}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {raw_body: x, content_type: ' '}"),
            false,
        ),
        (
            desc(
                "key: k, rate_limit: {unit: day}, response: {raw_body: x, content_type: \"a\\tb\"}",
            ),
            true,
        ),
        (
            desc(
                "key: k, rate_limit: {unit: day}, response: {raw_body: x, content_type: \"a\\nb\"}",
            ),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {hide_current_limit: true}"),
            false,
        ),
        (
            desc(
                "key: k, rate_limit: {unit: day}, response: {hidden: off, hide_current_limit: yes}",
            ),
            false,
        ),
        (
            desc(
                "key: k, rate_limit: {unit: day}, response: {hidden: on, hide_current_limit: off}",
            ),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {hidden: maybe}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: ~}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: [x]}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {a: [1]}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {a: ~}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {a: ''}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {a: 1.5}}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {'a b': x}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {':path': x}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {'': x}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {Content-Length: '1'}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {Transfer-Encoding: x}}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {headers: {x-content-type: x}}"),
            true,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {body: x}"),
            false,
        ),
        (
            desc("key: k, rate_limit: {unit: day}, response: {unit: day}"),
            false,
        ),
        (desc("key: k, rate_limit: {unit: day, hidden: true}"), false),
        (desc("key: k, hidden: true"), false),
        // Keys at the wrong level.
        (desc("key: k, name: x"), false),
        (desc("key: k, unit: second"), false),
        (limit("unit: second, key: x"), false),
        ("domain: d\nkey: a\n".into(), false),
        ("domain: d\nfoo: 1\n".into(), false),
    ]
}
