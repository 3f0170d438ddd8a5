//! At debug level each decision is one line naming the domain, the overall code as a word,
//! the rule that decided, and each descriptor with its code and rule; what a client sent is
//! cut short and escaped.

use super::*;

#[tokio::test]
async fn a_decision_at_debug_level_names_its_rules_and_codes_in_words() {
    let s = in_process()
        .file("d.yaml", RULES)
        .args(["--log-level", "debug"])
        .start()
        .await;
    let mut c = s.client().await;
    for _ in 0..3 {
        call(
            &mut c,
            req("d", vec![desc(&[("k", "a\"b")]), desc(&[("other", "x")])]),
        )
        .await;
    }
    let long = format!("\n{}", "v".repeat(100));
    call(&mut c, req("d", vec![desc(&[("k", &long)])])).await;

    let decided: Vec<serde_json::Value> = s
        .logs()
        .iter()
        .filter(|l| l.contains("\"message\":\"decided\""))
        .map(|l| serde_json::from_str(l).expect("JSON log line"))
        .collect();
    assert_eq!(decided.len(), 4, "{:?}", s.logs());
    let last_of_three = &decided[2];
    assert_eq!(last_of_three["domain"], "d");
    assert_eq!(last_of_three["code"], "OVER_LIMIT");
    assert_eq!(last_of_three["rule"], "d.k");
    assert_eq!(
        last_of_three["descriptors"],
        "k=a\\\"b → OVER_LIMIT d.k; other=x → OK (no rule)"
    );
    assert_eq!(decided[0]["code"], "OK");
    assert_eq!(decided[0]["rule"], "-");
    let v = format!("k=\\n{}… → OK d.k", "v".repeat(63));
    assert_eq!(decided[3]["descriptors"], v);
}
