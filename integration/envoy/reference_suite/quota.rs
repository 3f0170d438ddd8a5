//! Their `quota` script: quota mode, where a request is over only when every quota is
//! spent.

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/quota.sh: `/quota` makes (service:
/// service_1), 1 per minute, and (service: service_2), 2 per minute, both in quota mode and
/// both charged. Two requests pass (the script checks the second); the third finds both
/// spent and is limited; a minute later a request passes again.
///
/// The script cannot see either of the last two: it greps the third's `curl -f` output for
/// "Too Many Requests", which `-f` never prints, and the fourth's `curl -i` succeeds on a
/// 429 as on a 200. The scenario asserts both statuses.
#[tokio::test]
async fn quota() {
    let s = Stack::start().await;
    s.passes("/quota", &[]).await;
    s.passes("/quota", &[]).await;
    s.limited("/quota", &[]).await;
    s.wait_a_minute().await;
    s.passes("/quota", &[]).await;
    s.finish(Outcomes::answered(3, 1)).await;
}
