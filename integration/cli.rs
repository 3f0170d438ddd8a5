//! `sluice check`, startup failures and the `ratelimit` alias, through the binary.

use crate::support::cli::{check, command};
use crate::support::sluice::*;

#[test]
fn bundled_config_is_valid() {
    let (ok, out) = check(["config"]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "all rate limit configs ok");
}

#[test]
fn fixture_errors_match_envoyproxy_ratelimit_byte_for_byte() {
    let cases = [
        (
            "bad_limit_unit.yaml",
            "bad_limit_unit.yaml: invalid rate limit unit 'foo'",
        ),
        (
            "duplicate_key.yaml",
            "duplicate_key.yaml: duplicate descriptor composite key 'test-domain.key1_value1'",
        ),
        (
            "empty_domain.yaml",
            "empty_domain.yaml: config file cannot have empty domain",
        ),
        ("empty_key.yaml", "empty_key.yaml: descriptor has empty key"),
        (
            "misspelled_key.yaml",
            "misspelled_key.yaml: config error, unknown key 'ratelimit'",
        ),
        (
            "misspelled_key2.yaml",
            "misspelled_key2.yaml: config error, unknown key 'requestsperunit'",
        ),
        (
            "non_map_list.yaml",
            "non_map_list.yaml: config error, yaml file contains list of type other than map: a",
        ),
        (
            "non_string_key.yaml",
            "non_string_key.yaml: config error, key is not of type string: 0.25",
        ),
        (
            "replaces_empty.yaml",
            "replaces_empty.yaml: should not have an empty replaces entry",
        ),
        (
            "replaces_self.yaml",
            "replaces_self.yaml: replaces should not contain name of same descriptor",
        ),
        (
            "unlimited_with_unit.yaml",
            "unlimited_with_unit.yaml: should not specify rate limit unit when unlimited",
        ),
    ];
    for (file, want) in cases {
        let path = format!("tests/data/config/{file}");
        let (ok, out) = check([&path]);
        assert!(!ok, "{file} passed");
        assert_eq!(out.lines().next(), Some(want), "{file}: {out}");
    }
    let (ok, out) = check(["tests/data/config/bad_yaml.yaml"]);
    assert!(!ok);
    assert!(
        out.starts_with("bad_yaml.yaml: error loading config file: "),
        "{out}"
    );
}

#[test]
fn every_bad_file_is_reported() {
    let dir = tempfile::TempDir::new().unwrap();
    write(
        &dir.path().join("a.yaml"),
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
    );
    write(
        &dir.path().join("b.yaml"),
        "domain: b\ndescriptors:\n  - value: v\n",
    );
    write(&dir.path().join("c.yaml"), "domain: c\n");
    let (ok, out) = check([dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(
        out.contains("a.yaml: invalid rate limit unit 'fortnight'"),
        "{out}"
    );
    assert!(out.contains("b.yaml: descriptor has empty key"), "{out}");
    assert!(out.contains("--> "), "location lines: {out}");
}

/// One run names every error of a file, whatever pass finds it: an unknown key, a unit and
/// a repeated key (the three runs), each with its line.
#[test]
fn every_error_of_a_file_in_one_run() {
    let dir = tempfile::TempDir::new().unwrap();
    write(
        &dir.path().join("edge.yaml"),
        "domain: edge\ndescriptors:\n  - key: remote_address\n    ratelimit: {unit: second, requests_per_unit: 5}\n  - key: path\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n    rate_limit: {unit: day, requests_per_unit: 1}\n",
    );
    let (ok, out) = check([dir.path().to_str().unwrap()]);
    assert!(!ok);
    let path = dir.path().join("edge.yaml");
    let expected = [
        "edge.yaml: config error, unknown key 'ratelimit'".to_owned(),
        format!("  --> {}:4:5", path.display()),
        "edge.yaml: config error, duplicate key 'rate_limit'".to_owned(),
        format!("  --> {}:9:5", path.display()),
        "edge.yaml: invalid rate limit unit 'fortnight'".to_owned(),
        format!("  --> {}:6:24", path.display()),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{out}");
}

#[test]
fn merge_domains_flag() {
    let dir = tempfile::TempDir::new().unwrap();
    write(
        &dir.path().join("a.yaml"),
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    write(
        &dir.path().join("b.yaml"),
        "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    let p = dir.path().to_str().unwrap();
    let (ok, out) = check([p]);
    assert!(!ok);
    assert!(
        out.contains("b.yaml: duplicate domain 'd' in config file"),
        "{out}"
    );
    let (ok, out) = check(["--merge-domains", p]);
    assert!(ok, "{out}");
}

/// Their `MERGE_DOMAIN_CONFIG` (and the settings `check` and `explain` share with `serve`)
/// is read as `serve` reads it: a value it refuses, they refuse too, as a usage error.
#[test]
fn check_and_explain_refuse_a_setting_serve_refuses() {
    let dir = tempfile::TempDir::new().unwrap();
    write(
        &dir.path().join("a.yaml"),
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    write(
        &dir.path().join("b.yaml"),
        "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    let p = dir.path().to_str().unwrap();
    let explain = ["--config", p, "--domain", "d", "--descriptor", "a=1"];
    for (sub, args) in [("check", &[p][..]), ("explain", &explain[..])] {
        let out = command(sub)
            .args(args)
            .env("MERGE_DOMAIN_CONFIG", "maybe")
            .output()
            .expect("run sluice");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sub}: {stderr}");
        assert!(
            stderr.contains("invalid setting MERGE_DOMAIN_CONFIG: 'maybe' is not a boolean"),
            "{sub}: {stderr}"
        );
        // Their true merges the domain, as `--merge-domains` does.
        let out = command(sub)
            .args(args)
            .env("MERGE_DOMAIN_CONFIG", "true")
            .output()
            .expect("run sluice");
        assert!(out.status.success(), "{sub}: {out:?}");
    }
}

#[tokio::test]
async fn serve_refuses_bad_settings() {
    let e = sluice()
        .env("REDIS_TYPE", "foo")
        .env("REDIS_URL", "localhost:6379")
        .try_start()
        .await
        .err()
        .expect("must not start");
    assert!(e.contains("Unrecognized redis type foo"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// Envoy Gateway runs `/bin/ratelimit` with no arguments: the image's copy of sluice
/// under that name serves, its settings from their variables.
#[tokio::test]
async fn run_as_ratelimit_it_serves_with_their_environment() {
    let dir = tempfile::TempDir::new().unwrap();
    let link = dir.path().join("ratelimit");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), &link).unwrap();
    let rules = dir.path().join("srv/ratelimit/config");
    std::fs::create_dir_all(&rules).unwrap();
    write(
        &rules.join("a.yaml"),
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n",
    );
    let s = sluice()
        .run_as(link)
        .env("RUNTIME_ROOT", dir.path().join("srv").display().to_string())
        .env("RUNTIME_SUBDIRECTORY", "ratelimit")
        .their_listeners()
        .start()
        .await;
    let mut c = s.client().await;
    let r = call(&mut c, req("d", vec![desc(&[("k", "v")])])).await;
    assert_eq!(r.statuses[0].limit_remaining, 1);
}
