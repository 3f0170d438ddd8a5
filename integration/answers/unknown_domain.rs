//! A request for a domain no rule file declares is answered OK and named in a warning, once
//! a minute per domain, beside the counter.

use super::*;

#[tokio::test]
async fn an_unknown_domain_is_named_in_a_warning_once() {
    let s = in_process().file("d.yaml", RULES).start().await;
    let mut c = s.client().await;
    for _ in 0..3 {
        let r = call(&mut c, req("shop", vec![desc(&[("k", "v")])])).await;
        assert_eq!(r.overall_code, 1, "OK, as the reference answers");
    }
    call(&mut c, req("edge", vec![desc(&[("k", "v")])])).await;
    let warned = |domain: &str| {
        s.logs()
            .iter()
            .filter(|l| {
                l.contains("\"level\":\"WARN\"") && l.contains(&format!("\"domain\":\"{domain}\""))
            })
            .count()
    };
    assert_eq!(warned("shop"), 1, "{:?}", s.logs());
    assert_eq!(warned("edge"), 1);
    assert!(s.logs().iter().any(|l| l.contains("no rule file declares")));
    assert_eq!(s.metric("sluice_domain_not_found_total").await, 4.0);
}
