//! Their `value-included-in-stats-key-when-unspecified` script: `detailed_metric` puts the
//! request's value in the stats key.

use super::stack::{Outcomes, Stack};

/// Follows
/// envoyproxy/ratelimit:integration-test/scripts/value-included-in-stats-key-when-unspecified.sh:
/// (unspec: *), 2 per minute with `detailed_metric`, on `/unspec` with `unspec:
/// unspecified_value`. Two requests pass (the script checks the second), the third is
/// limited. Then the statsd exporter's `ratelimit_service_rate_limit_over_limit` line for
/// `unspec_unspecified_value` must read 1 (the script's `grep`, `cut -d} -f2` and removal
/// of spaces, which must leave exactly "1"). The script sleeps 5 s for the stats to arrive;
/// the scenario polls for them.
#[tokio::test]
async fn value_included_in_stats_key_when_unspecified() {
    let s = Stack::start().await;
    let unspec = [("unspec", "unspecified_value")];
    s.passes("/unspec", &unspec).await;
    s.passes("/unspec", &unspec).await;
    s.limited("/unspec", &unspec).await;
    let ours = |l: &str| {
        l.contains("ratelimit_service_rate_limit_over_limit")
            && l.contains("unspec_unspecified_value")
    };
    let metrics = s.exporter_metrics(ours).await;
    let stats: Vec<String> = metrics
        .lines()
        .filter(|l| ours(l))
        .map(|l| l.split('}').nth(1).unwrap_or("").replace(' ', ""))
        .collect();
    if stats.join("\n") != "1" {
        s.fail(&format!(
            "over_limit should be 1, got {stats:?} in:\n{metrics}"
        ));
    }
    s.finish(Outcomes::answered(2, 1)).await;
}
