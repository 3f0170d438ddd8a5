//! Their `simple-get` script: the happy path, one request.

use std::time::Duration;

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/simple-get.sh: `GET /twoheader`
/// with `foo: test` and `baz: shady` passes. Its one descriptor, (foo: test, baz: shady),
/// is the shadow-mode rule's (3 per minute); `bar` is absent, so the route's (foo, bar)
/// action makes none.
async fn scenario(s: &Stack) {
    s.passes("/twoheader", &[("foo", "test"), ("baz", "shady")])
        .await;
    s.finish(Outcomes::answered(1, 0)).await;
}

#[tokio::test]
async fn simple_get() {
    scenario(&Stack::start().await).await;
}

/// The script alone passes when Envoy lets the request through because sluice is gone
/// (`failure_mode_deny: false`); the scenario does not.
#[tokio::test]
#[should_panic(expected = "error: 1, failure_mode_allowed: 1 }")]
async fn a_pass_on_failed_checks_fails() {
    let mut s = Stack::start().await;
    s.sluice.signal("KILL");
    s.sluice.wait_exit(Duration::from_secs(10)).await;
    scenario(&s).await;
}
