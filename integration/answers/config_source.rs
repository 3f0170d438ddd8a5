//! `--config` beside envoyproxy/ratelimit's `RUNTIME_*`: sluice's flag wins, as every flag
//! does, and the log says so, naming both; the startup line says what named the rules.

use super::*;

#[tokio::test]
async fn config_beside_runtime_variables_is_said_in_the_log() {
    // The harness passes --config (its private directory).
    let s = in_process()
        .file("d.yaml", RULES)
        .env("RUNTIME_ROOT", "/data")
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .start()
        .await;
    let logs = s.logs();
    let note = logs
        .iter()
        .find(|l| l.contains("\"level\":\"WARN\"") && l.contains("rule files from --config"))
        .unwrap_or_else(|| panic!("{logs:?}"));
    assert!(
        note.contains("RUNTIME_ROOT=/data RUNTIME_SUBDIRECTORY=ratelimit ignored"),
        "{note}"
    );
    assert!(
        logs.iter()
            .any(|l| l.contains("\"message\":\"config loaded\"")
                && l.contains("\"from\":\"--config\"")),
        "{logs:?}"
    );
}
