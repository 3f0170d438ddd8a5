//! Their `token-quota` script: a quota checked on the request, charged when the response is
//! done.

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/token-quota.sh: `/tokenquota`
/// checks (service: service_2), 2 per minute in quota mode, with `hits_addend: 0`, and
/// charges it 1 when the response is done. Three requests pass (counts 0, 1 and 2 seen; the
/// script checks the third), the fourth sees 3 and is limited, and a minute later the fifth
/// passes (the script's `curl -i` cannot tell; the scenario asserts it). Each request
/// carries `request-no: <n>`.
///
/// Before each next request the scenario waits until sluice has counted the previous one's
/// charge, which their script leaves to curl being slower than Envoy's report.
#[tokio::test]
async fn token_quota() {
    let s = Stack::start().await;
    for n in 1..=3 {
        s.passes("/tokenquota", &[("request-no", &n.to_string())])
            .await;
        s.wait_reports(n).await;
    }
    s.limited("/tokenquota", &[("request-no", "4")]).await;
    s.wait_a_minute().await;
    s.passes("/tokenquota", &[("request-no", "5")]).await;
    s.finish(Outcomes::answered(4, 1)).await;
}
