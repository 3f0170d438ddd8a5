//! `detailed_metric` where it cannot apply (a descriptor without a limit) loads, as under
//! envoyproxy/ratelimit, and is said: by `sluice check` (which still passes) and in the
//! server's log, with its file and line.

use super::*;
use crate::support::cli::check;

const NOT_A_LEAF: &str = "domain: edge\ndescriptors:\n  - key: remote_address\n    detailed_metric: true\n    descriptors:\n      - key: path\n        rate_limit: {unit: hour, requests_per_unit: 1}\n";

const WARNING: &str = "edge.yaml: detailed_metric has no effect: 'edge.remote_address' has no rate_limit: it names the series of the rule a request lands on, so put it on that descriptor";

#[test]
fn check_passes_and_says_what_has_no_effect() {
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("edge.yaml");
    std::fs::write(&file, NOT_A_LEAF).unwrap();
    let (ok, out) = check([dir.path().to_str().unwrap()]);
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            format!("warning: {WARNING}"),
            format!("  --> {}:4:22", file.display()),
            "all rate limit configs ok".to_owned(),
        ]
    );
}

#[tokio::test]
async fn the_server_logs_it_at_each_load() {
    let s = in_process().file("edge.yaml", NOT_A_LEAF).start().await;
    let warned = s
        .logs()
        .into_iter()
        .filter(|l| l.contains("\"level\":\"WARN\"") && l.contains(WARNING))
        .count();
    assert_eq!(warned, 1, "{:?}", s.logs());
}
