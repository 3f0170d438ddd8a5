//! Their `trigger-ratelimit` script: a limit of 3 per minute, exceeded.

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/trigger-ratelimit.sh: (foo: pelle,
/// baz: not-so-shady), 3 per minute, on `/twoheader`. Three requests pass (the script
/// checks the third), the fourth is limited (`curl -f` fails), and so is the fifth, whose
/// `curl -i` output must hold "Too Many Requests": the status line of a 429.
#[tokio::test]
async fn trigger_ratelimit() {
    let s = Stack::start().await;
    let pelle = [("foo", "pelle"), ("baz", "not-so-shady")];
    for _ in 0..3 {
        s.passes("/twoheader", &pelle).await;
    }
    s.limited("/twoheader", &pelle).await;
    s.limited("/twoheader", &pelle).await;
    s.finish(Outcomes::answered(3, 2)).await;
}
