//! Their `multiservice-tokenquota` script: the proxy routes to a service with quota left,
//! which is charged when its response is done.

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/multiservice-tokenquota.sh:
/// `/multiservice-tokenquota` checks (service: service_1), 1 per minute, and (service:
/// service_2), 2 per minute, both in quota mode, with `hits_addend: 0`; sluice's answer
/// names a service with quota left in its metadata, the proxy sends the request there, and
/// the service that answered is charged 1 when the response is done. So service 1 answers
/// two requests, service 2 the next three (the script greps each body for its service and
/// checks the fifth), the sixth finds both spent and is limited (no "Hello World from
/// Service" in its output), and a minute later service 1 answers again. Each request
/// carries `request-no: <n>`.
///
/// Before each next request the scenario waits until sluice has counted the previous one's
/// charge, which their script leaves to curl being slower than Envoy's report.
#[tokio::test]
async fn multiservice_tokenquota() {
    let s = Stack::start().await;
    let path = "/multiservice-tokenquota";
    for (n, from) in [
        (1, "from Service 1"),
        (2, "from Service 1"),
        (3, "from Service 2"),
        (4, "from Service 2"),
        (5, "from Service 2"),
    ] {
        s.served_by(path, &[("request-no", &n.to_string())], from)
            .await;
        s.wait_reports(n).await;
    }
    let sixth = s.limited(path, &[("request-no", "6")]).await;
    if sixth.body.contains("Hello World from Service") {
        s.fail(&format!(
            "quota limiting should fail the request: {sixth:?}"
        ));
    }
    s.wait_a_minute().await;
    s.served_by(path, &[("request-no", "7")], "from Service 1")
        .await;
    s.finish(Outcomes::answered(6, 1)).await;
}
