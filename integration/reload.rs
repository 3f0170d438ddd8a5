//! Hot reload through the real binary: edits, creates, deletes, a Kubernetes ConfigMap
//! symlink swap and SIGHUP all reload; a bad file keeps the last good config.

use std::path::Path;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

use crate::support::sluice::*;

mod files;

fn rules(domain: &str, rpu: u32) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {rpu}}}\n"
    )
}

#[tokio::test]
async fn edits_creates_and_deletes_reload() {
    let s = sluice().file("a.yaml", &rules("a", 5)).start().await;
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "a").await, Some(5));
    // Edit in place.
    write(&s.config_path("a.yaml"), &rules("a", 6));
    assert!(wait_limit(&mut c, "a", Some(6)).await, "edit");
    // Create, in a subdirectory.
    std::fs::create_dir_all(s.config_path("sub")).unwrap();
    write(&s.config_path("sub/b.yaml"), &rules("b", 7));
    assert!(wait_limit(&mut c, "b", Some(7)).await, "create");
    // Delete.
    std::fs::remove_file(s.config_path("sub/b.yaml")).unwrap();
    assert!(wait_limit(&mut c, "b", None).await, "delete");
    assert!(s.metric("ratelimit_service_config_load_success").await >= 4.0);
}

/// A file written into a directory created an instant before, many times, each right after
/// the previous reload (while the watches are being re-established): the file's own event
/// can be lost (the new directory's watch comes after it), and the reload must happen
/// anyway.
#[tokio::test]
async fn files_in_directories_created_an_instant_before_reload() {
    let s = sluice().file("a.yaml", &rules("a", 5)).start().await;
    let mut c = s.client().await;
    for i in 0..12u32 {
        let dir = match i % 3 {
            0 => s.config_path(&format!("d{i}")),
            // Several levels at once: none of them watched when the file lands.
            1 => s.config_path(&format!("d{i}/x/y")),
            _ => s.config_path(&format!("d{}/more{i}", i - 2)),
        };
        std::fs::create_dir_all(&dir).unwrap();
        let domain = format!("n{i}");
        write(&dir.join("r.yaml"), &rules(&domain, 10 + i));
        // Polled without a pause, so the next directory comes as soon as this reload is
        // visible: before the watches are back, when that takes long enough.
        let deadline = std::time::Instant::now() + WAIT;
        while limit(&mut c, &domain).await != Some(10 + i) {
            assert!(
                std::time::Instant::now() < deadline,
                "directory {i}: {:?}",
                s.logs()
            );
        }
    }
}

#[tokio::test]
async fn a_bad_file_keeps_the_last_good_config() {
    let s = sluice().file("a.yaml", &rules("a", 5)).start().await;
    let mut c = s.client().await;
    write(
        &s.config_path("a.yaml"),
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
    );
    assert!(
        s.wait_log("invalid rate limit unit 'fortnight'", WAIT)
            .await,
        "error logged: {:?}",
        s.logs()
    );
    let line = s
        .logs()
        .into_iter()
        .find(|l| l.contains("fortnight"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["level"], "ERROR");
    assert!(
        v["file"].as_str().unwrap_or_default().contains("a.yaml"),
        "{line}"
    );
    assert!(
        v["line"].as_str().is_some() || v["line"].is_number(),
        "{line}"
    );
    assert_eq!(limit(&mut c, "a").await, Some(5), "old config still serves");
    assert_eq!(s.metric("ratelimit_service_config_load_error").await, 1.0);
    // Fixing the file loads it.
    write(&s.config_path("a.yaml"), &rules("a", 8));
    assert!(wait_limit(&mut c, "a", Some(8)).await);
}

#[tokio::test]
async fn counters_survive_a_reload_that_changes_the_limit() {
    let s = sluice().file("a.yaml", &rules("a", 5)).start().await;
    let mut c = s.client().await;
    for _ in 0..3 {
        call(&mut c, req("a", vec![desc(&[("k", "v")])])).await;
    }
    write(&s.config_path("a.yaml"), &rules("a", 10));
    assert!(wait_limit(&mut c, "a", Some(10)).await);
    let r = call(&mut c, req("a", vec![desc(&[("k", "v")])])).await;
    assert_eq!(
        r.statuses[0].limit_remaining, 6,
        "3 earlier hits kept, new limit applied"
    );
}

/// The layout kubelet writes for a ConfigMap volume: files are symlinks through `..data`,
/// which points at a timestamped directory and is replaced atomically on update.
#[tokio::test]
async fn kubernetes_configmap_symlink_swap_reloads() {
    let dir = tempfile::TempDir::new().unwrap();
    let mount = dir.path().join("config");
    std::fs::create_dir_all(&mount).unwrap();
    let v1 = mount.join("..2024_01_01_00_00_00.000000001");
    std::fs::create_dir_all(&v1).unwrap();
    write(&v1.join("rules.yaml"), &rules("cm", 5));
    std::os::unix::fs::symlink("..2024_01_01_00_00_00.000000001", mount.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/rules.yaml", mount.join("rules.yaml")).unwrap();

    let s = sluice()
        .arg("--config")
        .arg(mount.to_str().unwrap())
        .start()
        .await;
    let mut c = s.client().await;
    assert_eq!(
        limit(&mut c, "cm").await,
        Some(5),
        "each domain loaded once"
    );

    // kubelet: write the new version, then atomically rename a new `..data` link over it.
    let v2 = mount.join("..2024_01_01_00_00_01.000000002");
    std::fs::create_dir_all(&v2).unwrap();
    write(&v2.join("rules.yaml"), &rules("cm", 9));
    std::os::unix::fs::symlink("..2024_01_01_00_00_01.000000002", mount.join("..data_tmp"))
        .unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    std::fs::remove_dir_all(&v1).unwrap();
    assert!(wait_limit(&mut c, "cm", Some(9)).await, "{:?}", s.logs());
}

/// `RUNTIME_ROOT` as envoyproxy/ratelimit deployments use it: a `current` symlink swapped to
/// a new directory.
#[tokio::test]
async fn runtime_root_symlink_swap_reloads() {
    let dir = tempfile::TempDir::new().unwrap();
    let make = |name: &str, rpu: u32| {
        let d = dir.path().join(name).join("ratelimit/config");
        std::fs::create_dir_all(&d).unwrap();
        write(&d.join("rules.yaml"), &rules("rt", rpu));
    };
    make("v1", 5);
    std::os::unix::fs::symlink(dir.path().join("v1"), dir.path().join("current")).unwrap();
    let s = sluice()
        .no_default_args()
        .env("RUNTIME_ROOT", dir.path().join("current").to_str().unwrap())
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .their_listeners()
        .start()
        .await;
    let mut c = s.client().await;
    assert_eq!(limit(&mut c, "rt").await, Some(5));
    make("v2", 11);
    std::os::unix::fs::symlink(dir.path().join("v2"), dir.path().join("current.tmp")).unwrap();
    std::fs::rename(dir.path().join("current.tmp"), dir.path().join("current")).unwrap();
    assert!(wait_limit(&mut c, "rt", Some(11)).await, "{:?}", s.logs());
}

#[tokio::test]
async fn sighup_forces_a_reload() {
    let s = sluice()
        .file("a.yaml", &rules("a", 5))
        .arg("--watch-config")
        .arg("false")
        .start()
        .await;
    let mut c = s.client().await;
    write(&s.config_path("a.yaml"), &rules("a", 6));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(limit(&mut c, "a").await, Some(5), "not watching");
    s.signal("HUP");
    assert!(wait_limit(&mut c, "a", Some(6)).await);
}

#[allow(dead_code)]
fn exists(p: &Path) -> bool {
    p.exists()
}

#[tokio::test]
async fn no_request_fails_during_reloads() {
    let s = sluice()
        .file("a.yaml", &rules("a", 1_000_000))
        .start()
        .await;
    let mut c = s.client().await;
    let path = s.config_path("a.yaml");
    let writer = tokio::spawn(async move {
        for i in 0..20 {
            write(&path, &rules("a", 1_000_000 + i));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    });
    let mut n = 0;
    while !writer.is_finished() {
        let r = call(&mut c, req("a", vec![desc(&[("k", "v")])])).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
        assert!(r.statuses[0].current_limit.is_some(), "never a half config");
        n += 1;
    }
    assert!(n > 0);
}
