//! `sluice explain` and `/explain` through the real binary: the text on the bundled config,
//! the JSON of the CLI equal to the endpoint's, its exit codes, and Redis keys that are the
//! ones the Redis store really writes.

use std::path::Path;

use serde_json::Value;

use crate::support::cli::command;
use crate::support::redis::RedisServer;
use crate::support::sluice::*;

/// `sluice explain ARGS` in the repository root: (exit code, stdout, stderr).
fn explain(args: &[&str]) -> (i32, String, String) {
    let out = command("explain")
        .args(args)
        .output()
        .expect("run sluice explain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn bundled(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("config")
            .join(name),
    )
    .expect("bundled rule file")
}

#[test]
fn explain_walks_the_bundled_config_in_words() {
    let (code, out, err) = explain(&[
        "--domain",
        "edge",
        "--descriptor",
        "path=/api/v1/login/reset,method=GET",
    ]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "descriptor 1: path=/api/v1/login/reset, method=GET",
        "  entry 1 path=/api/v1/login/reset: wildcard -> path_/api/v1/login*",
        "    (the key-only child 'path' of this level is not tried: no backtracking)",
        "  entry 2 method=GET: no_match",
        "    this level has: method_POST",
    ] {
        assert!(out.lines().any(|l| l == want), "missing {want:?} in\n{out}");
    }
    assert!(
        out.contains("=> no_limit: the walk stopped at entry 2 (method=GET)"),
        "{out}"
    );
}

#[test]
fn explain_names_the_limit_and_its_redis_key() {
    let (code, out, err) = explain(&["--domain", "api", "--descriptor", "login=bob"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("=> limited: rule api.login applies"), "{out}");
    assert!(
        out.contains("limit (slot 0): 5 per minute, sliding_log: exact trailing window; only admitted hits are charged; a denial locks the descriptor out for 300 s"),
        "{out}"
    );
    let key = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis key: "))
        .expect("a redis key line");
    assert!(
        key.starts_with("sluice:{") && key.ends_with("}:3:60:0:0:r"),
        "{key}"
    );
    // The prefix is the Redis store's setting.
    let (_, out, _) = explain(&[
        "--domain",
        "api",
        "--descriptor",
        "login=bob",
        "--cache-key-prefix",
        "rl:",
    ]);
    assert!(out.contains("redis key: rl:{"), "{out}");
}

#[test]
fn explain_exit_codes() {
    let (code, out, _) = explain(&["--domain", "nope", "--descriptor", "a=b"]);
    assert_eq!(code, 0, "an unknown domain is an answer, not an error");
    assert!(
        out.starts_with("domain 'nope' (NOT LOADED; loaded: api, "),
        "{out}"
    );
    let (code, _, err) = explain(&["--domain", "edge", "--descriptor", "a"]);
    assert_eq!(code, 2, "a malformed descriptor");
    assert!(err.contains("is not key=value"), "{err}");
    let (code, _, err) = explain(&[
        "--domain",
        "edge",
        "--descriptor",
        "a=b",
        "--cache-key-prefix",
        "{x}",
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = explain(&[
        "--config",
        "tests/data/config/bad_limit_unit.yaml",
        "--domain",
        "edge",
        "--descriptor",
        "a=b",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("bad_limit_unit.yaml: invalid rate limit unit 'foo'"),
        "{out}"
    );
}

#[tokio::test]
async fn the_endpoint_answers_what_the_cli_answers() {
    let s = sluice()
        .file("envoy-compatible.yaml", &bundled("envoy-compatible.yaml"))
        .start()
        .await;
    let dir = s.config_dir.to_string_lossy().into_owned();
    let descriptors = [
        "client_id=partner-7",
        "remote_address=10.1.2.3",
        "user_tier=free",
    ];
    let mut args = vec!["--config", dir.as_str(), "--domain", "edge", "--json"];
    for d in &descriptors {
        args.extend(["--descriptor", d]);
    }
    let (code, cli, err) = explain(&args);
    assert_eq!(code, 0, "{err}");
    let mut cli: Value = serde_json::from_str(&cli).expect("json");
    let query: Vec<String> = descriptors
        .iter()
        .map(|d| format!("descriptor={}", d.replace('=', "%3D")))
        .collect();
    let (code, body) = s
        .http_get(&format!("/explain?domain=edge&{}", query.join("&")))
        .await;
    assert_eq!(code, 200, "{body}");
    let mut http: Value = serde_json::from_str(&body).expect("json");
    // The server says which store it runs; otherwise the answers are the same.
    assert_eq!(http["store"], "memory");
    http.as_object_mut().expect("object").remove("store");
    cli.as_object_mut().expect("object").remove("store");
    assert_eq!(http, cli);
    let outcomes: Vec<&str> = http["descriptors"]
        .as_array()
        .expect("descriptors")
        .iter()
        .map(|d| d["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["limited", "replaced", "limited"]);
    let (code, _) = s.http_get("/explain?domain=edge").await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn the_endpoint_keeps_the_request_bounds() {
    let s = sluice()
        .file("envoy-compatible.yaml", &bundled("envoy-compatible.yaml"))
        .arg("--max-descriptors")
        .arg("2")
        .arg("--max-entries")
        .arg("3")
        .start()
        .await;
    let (code, _) = s
        .http_get("/explain?domain=edge&descriptor=a%3D1&descriptor=b%3D2")
        .await;
    assert_eq!(code, 200);
    let (code, body) = s
        .http_get("/explain?domain=edge&descriptor=a%3D1&descriptor=b%3D2&descriptor=c%3D3")
        .await;
    assert_eq!(code, 400, "{body}");
    let (code, body) = s
        .http_get("/explain?domain=edge&descriptor=a%3D1,b%3D2,c%3D3,d%3D4")
        .await;
    assert_eq!(code, 400, "{body}");
}

#[tokio::test]
async fn the_keys_shown_are_the_keys_the_redis_store_writes() {
    let redis = RedisServer::start();
    let s = sluice()
        .file("extensions.yaml", &bundled("extensions.yaml"))
        .redis(redis.url())
        .arg("--cache-key-prefix")
        .arg("t1:")
        .start_healthy()
        .await;
    let mut c = s.client().await;
    // Two limits (and so two keys) on one descriptor, from a `rate_limits` list.
    call(&mut c, req("api", vec![desc(&[("api_key", "k-1")])])).await;
    let (code, body) = s
        .http_get("/explain?domain=api&descriptor=api_key%3Dk-1")
        .await;
    assert_eq!(code, 200, "{body}");
    let e: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        (e["store"].as_str(), e["redis_key_prefix"].as_str()),
        (Some("redis"), Some("t1:"))
    );
    let mut shown: Vec<String> = e["descriptors"][0]["limits"]
        .as_array()
        .expect("limits")
        .iter()
        .map(|l| l["redis_key"].as_str().unwrap_or_default().to_owned())
        .collect();
    shown.sort();
    let mut stored: Vec<String> = redis.query(&["KEYS", "*"]);
    stored.sort();
    assert_eq!(shown, stored);
    // The CLI, offline, names the same keys.
    let dir = s.config_dir.to_string_lossy().into_owned();
    let (_, out, _) = explain(&[
        "--config",
        &dir,
        "--domain",
        "api",
        "--descriptor",
        "api_key=k-1",
        "--cache-key-prefix",
        "t1:",
    ]);
    for key in &stored {
        assert!(
            out.contains(&format!("redis key: {key}")),
            "{key} in\n{out}"
        );
    }
}

/// The how-to guide shows `sluice explain` on the bundled config: its output is what the
/// binary prints (the state tag of the Redis key aside).
#[test]
fn the_inspect_guide_shows_what_explain_prints() {
    let page = "docs/how-to/inspect-and-reset.md";
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page)).expect(page);
    let command = "sluice explain --domain edge ";
    let start = readme
        .find(command)
        .expect("the guide runs sluice explain on domain edge");
    let rest = &readme[start..];
    let args_line = rest.lines().next().unwrap_or_default();
    let args: Vec<&str> = args_line["sluice explain ".len()..]
        .split_whitespace()
        .collect();
    let shown: Vec<&str> = rest
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.strip_prefix("# ").unwrap_or(l.trim_start_matches('#')))
        .collect();
    let (code, out, err) = explain(&args);
    assert_eq!(code, 0, "{err}");
    let printed: Vec<String> = out
        .lines()
        .map(|l| match (l.find('{'), l.find('}')) {
            (Some(a), Some(b)) if l.contains("redis key: ") => format!("{}…{}", &l[..=a], &l[b..]),
            _ => l.to_owned(),
        })
        .collect();
    assert_eq!(printed, shown, "{page}: the sluice explain output is stale");
}
