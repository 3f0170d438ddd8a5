//! Their `replaces` script: a rule's `replaces` takes named limits out of a request's
//! decision.

use super::stack::{Outcomes, Stack};

/// Follows envoyproxy/ratelimit:integration-test/scripts/replaces.sh, its three parts in
/// order, each request asserted as the script's `assert_ok` (passes) or `assert_limited`
/// after it says.
#[tokio::test]
async fn replaces() {
    let s = Stack::start().await;

    // Replaces raises a limit. (foo: *, bar: banned) is `banned_limit`, 0 per minute;
    // (source_cluster: proxy, destination_cluster: override) replaces it with 2 per minute.
    let banned = [("foo", "bkthomps"), ("bar", "banned")];
    s.limited("/twoheader", &banned).await;
    let to_mock = [
        ("foo", "bkthomps"),
        ("bar", "banned"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "mock"),
    ];
    s.limited("/fourheader", &to_mock).await;
    let to_override = [
        ("foo", "bkthomps"),
        ("bar", "banned"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "override"),
    ];
    s.passes("/fourheader", &to_override).await;
    s.passes("/fourheader", &to_override).await;
    s.limited("/fourheader", &to_override).await;

    // Replaces leaves the replaced limit alone elsewhere. (foo: *, bar: bkthomps) is
    // `bkthomps`, 1 per minute; (source_cluster: proxy, destination_cluster: bkthomps)
    // replaces it with 2 per minute.
    let to_bkthomps = [
        ("foo", "my_foo"),
        ("bar", "bkthomps"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "bkthomps"),
    ];
    s.passes("/fourheader", &to_bkthomps).await;
    s.passes("/fourheader", &to_bkthomps).await;
    s.limited("/fourheader", &to_bkthomps).await;
    let to_not_bkthomps = [
        ("foo", "my_foo"),
        ("bar", "bkthomps"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "not_bkthomps"),
    ];
    s.passes("/fourheader", &to_not_bkthomps).await;
    s.limited("/fourheader", &to_not_bkthomps).await;
    s.limited("/fourheader", &to_bkthomps).await;

    // Replaces takes out several limits. (category: account), 4 per minute, replaces
    // `bkthomps` and (source_cluster: proxy, destination_cluster: fake), `fake_name`, 2 per
    // minute.
    let account = [
        ("foo", "my_foo"),
        ("bar", "bkthomps"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "fake"),
        ("category", "account"),
    ];
    for _ in 0..4 {
        s.passes("/fiveheader", &account).await;
    }
    s.limited("/fiveheader", &account).await;
    let foo_2 = [("foo", "foo_2"), ("bar", "bkthomps")];
    s.passes("/twoheader", &foo_2).await;
    s.limited("/twoheader", &foo_2).await;
    let foo_3 = [
        ("foo", "foo_3"),
        ("bar", "bar_3"),
        ("source_cluster", "proxy"),
        ("destination_cluster", "fake"),
    ];
    s.passes("/fourheader", &foo_3).await;
    s.passes("/fourheader", &foo_3).await;
    s.limited("/fourheader", &foo_3).await;
    s.limited("/fiveheader", &account).await;

    s.finish(Outcomes::answered(12, 10)).await;
}
