//! Reload against what users and file systems really do: a relative config path, FIFOs,
//! devices and oversized files in the config directory, and a load that never returns.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice::config::{ConfigError, ConfigFile, LoadOptions, RateLimitConfig};
use sluice::limit::SystemClock;
use sluice::metrics::Metrics;
use sluice::reload::Reloader;
use sluice::service::RateLimitService;
use sluice::settings::DecisionSettings;
use sluice::store::Backend;
use sluice::store::memory::MemoryStore;

use super::{WAIT, limit, rules, wait_limit};
use crate::support::sluice::*;

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {path:?}");
}

/// The README's default, `./config`, typed as is: file events name absolute paths, and
/// the watch must match them.
#[tokio::test]
async fn a_relative_config_path_reloads_on_edit() {
    let s = sluice()
        .relative_config()
        .file("a.yaml", &rules("a", 5))
        .start()
        .await;
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "a").await, Some(5));
    write(&s.config_path("a.yaml"), &rules("a", 6));
    assert!(wait_limit(&mut c, "a", Some(6)).await, "{:?}", s.logs());
    write(&s.config_path("b.yaml"), &rules("b", 7));
    assert!(wait_limit(&mut c, "b", Some(7)).await, "create");
}

/// A FIFO or a link to `/dev/zero` named like a rule file is reported, never opened or
/// read; reloads go on, and SIGTERM exits within `--shutdown-grace` with the FIFO still
/// there (no shutdown delay: what the test times is the drain).
#[tokio::test]
async fn special_files_are_refused_and_block_nothing() {
    let mut s = sluice()
        .file("a.yaml", &rules("a", 5))
        .args(["--shutdown-delay", "0s"])
        .arg("--shutdown-grace")
        .arg("2s")
        .start()
        .await;
    let mut c = s.client().await;
    mkfifo(&s.config_path("x.yaml"));
    assert!(
        s.wait_log("is a FIFO, not a regular file", WAIT).await,
        "{:?}",
        s.logs()
    );
    std::os::unix::fs::symlink("/dev/zero", s.config_path("z.yaml")).unwrap();
    assert!(
        s.wait_log("is a character device, not a regular file", WAIT)
            .await,
        "{:?}",
        s.logs()
    );
    assert_eq!(limit(&mut c, "a").await, Some(5), "the last good config");
    // Later reloads are not held by the FIFO.
    std::fs::remove_file(s.config_path("x.yaml")).unwrap();
    std::fs::remove_file(s.config_path("z.yaml")).unwrap();
    write(&s.config_path("a.yaml"), &rules("a", 6));
    assert!(wait_limit(&mut c, "a", Some(6)).await, "{:?}", s.logs());
    // Shutdown with a FIFO in the directory, after a reload that met it.
    let errors = s.metric("ratelimit_service_config_load_error").await;
    mkfifo(&s.config_path("y.yaml"));
    let deadline = Instant::now() + WAIT;
    while s.metric("ratelimit_service_config_load_error").await <= errors {
        assert!(Instant::now() < deadline, "the FIFO was never reported");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.signal("TERM");
    let exited = s.wait_exit(Duration::from_secs(5)).await;
    assert!(exited.is_some(), "still running past --shutdown-grace 2s");
}

/// `sluice check` on the same files: every one named, at once.
#[test]
fn check_refuses_special_and_oversized_files() {
    let dir = tempfile::TempDir::new().unwrap();
    let root = dir.path();
    write(&root.join("a.yaml"), &rules("a", 5));
    write(&root.join("big.yaml"), &"#".repeat(2000));
    mkfifo(&root.join("x.yaml"));
    std::os::unix::fs::symlink("/dev/zero", root.join("z.yaml")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--max-config-file-bytes", "1000"])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice check");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sluice check hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!status.success(), "{text}");
    let big = root.join("big.yaml");
    for want in [
        format!(
            "config file '{}' is 2000 bytes, over the limit of 1000 bytes (--max-config-file-bytes)",
            big.display()
        ),
        format!(
            "config file '{}' is a FIFO, not a regular file: only regular files (or symlinks to them) are read",
            root.join("x.yaml").display()
        ),
        format!(
            "config file '{}' is a character device, not a regular file: only regular files (or symlinks to them) are read",
            root.join("z.yaml").display()
        ),
    ] {
        assert!(
            text.lines().any(|l| l == want),
            "missing {want:?} in\n{text}"
        );
    }
}

/// Set while the stand-in file system hangs.
static HANG: AtomicBool = AtomicBool::new(true);

/// Loads `domain: stuck` after hanging while [`HANG`] is set, else `domain: fresh`.
fn hanging_load(_: &[PathBuf], _: &LoadOptions) -> Result<RateLimitConfig, Vec<ConfigError>> {
    let domain = if HANG.load(Ordering::SeqCst) {
        while HANG.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        "stuck"
    } else {
        "fresh"
    };
    let file = ConfigFile {
        name: "x.yaml".into(),
        path: "x.yaml".into(),
        content: rules(domain, 1),
    };
    RateLimitConfig::build(&[file], &LoadOptions::default())
}

/// A read that never returns (a hung network file system) costs its thread, not the next
/// reload; and its config, should it ever finish, is not swapped in over a newer one.
#[tokio::test]
async fn a_stuck_load_is_abandoned_and_later_reloads_proceed() {
    let service = Arc::new(RateLimitService::new(
        Some(RateLimitConfig::empty()),
        Arc::new(Backend::Memory(MemoryStore::new(Arc::new(SystemClock)))),
        Arc::new(Metrics::new(0.8, 100, "memory")),
        DecisionSettings::default(),
    ));
    let reloader = Reloader::with_loader(
        vec![PathBuf::from("unused")],
        LoadOptions::default(),
        service.clone(),
        hanging_load,
        Duration::from_millis(300),
    );
    let errors = reloader.reload_detached().await.expect_err("stuck");
    assert!(errors[0].message.contains("did not finish"), "{errors:?}");
    HANG.store(false, Ordering::SeqCst);
    reloader.reload_detached().await.expect("the next reload");
    assert!(service.config().config.domain("fresh").is_some());
    // The abandoned load has finished by now (it polls every 10 ms): its result is dropped.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let active = service.config();
    assert!(active.config.domain("stuck").is_none() && active.config.domain("fresh").is_some());
    assert_eq!(service.metrics().config_load_error.get(), 1);
}
