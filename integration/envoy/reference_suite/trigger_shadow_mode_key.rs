//! Their `trigger-shadow-mode-key` script: a limit in shadow mode, exceeded without effect.

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/trigger-shadow-mode-key.sh: (foo:
/// pelle, baz: shady), 3 per minute in shadow mode, on `/twoheader`. Five requests pass
/// (the script checks the fifth), and a sixth passes with `x-ratelimit-remaining` read from
/// its headers. The script fails when that reads "0", with the message "Remaining should be
/// zero"; it compares the header with the line's carriage return still on, so the check
/// cannot fail. What its message says is what envoyproxy/ratelimit answers (a shadow-mode
/// descriptor over its limit is OK with nothing remaining), so that is what is asserted.
#[tokio::test]
async fn trigger_shadow_mode_key() {
    let s = Stack::start().await;
    let pelle = [("foo", "pelle"), ("baz", "shady")];
    for _ in 0..5 {
        s.passes("/twoheader", &pelle).await;
    }
    let sixth = s.passes("/twoheader", &pelle).await;
    if sixth.header("x-ratelimit-remaining") != Some("0") {
        s.fail(&format!("remaining should be zero: {sixth:?}"));
    }
    s.finish(Outcomes::answered(6, 0)).await;
}
