//! `sluice query` as a script would run it: the real binary against a real server, plain
//! and over mutual TLS; stdout, stderr and the exit status.

use std::process::Output;

use super::*;
use crate::support::certs::{Ca, Usage, write};

async fn query(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("query")
        .args(args)
        .env_clear()
        .output()
        .await
        .expect("run sluice query")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test]
async fn a_table_or_json_and_the_exit_status_follows_the_answer() {
    let s = sluice().file("t.yaml", RULES).start().await;
    let addr = s.grpc.to_string();

    let ok = query(&["--addr", &addr, "--domain", "t", "-d", "one=x", "-d", "k=v"]).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let out = stdout(&ok);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("DESCRIPTOR") && lines[0].contains("REMAINING"));
    let one: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&one[..4], &["one=x", "OK", "1/hour", "0"], "{out}");
    let k: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(&k[..4], &["k=v", "OK", "1000/hour", "999"], "{out}");
    assert_eq!(lines.last(), Some(&"overall: OK"));

    let over = query(&["--addr", &addr, "--domain", "t", "--descriptor", "one=x"]).await;
    assert_eq!(over.status.code(), Some(1), "{}", stderr(&over));
    assert!(stdout(&over).contains("OVER_LIMIT"));

    let json = query(&["--addr", &addr, "--domain", "t", "-d", "one=x", "--json"]).await;
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON");
    assert_eq!(v["overallCode"], "OVER_LIMIT");
    assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "HOUR");
    assert_eq!(v["statuses"][0]["limitRemaining"], 0);
    assert!(v["statuses"][0]["durationUntilReset"].as_str().is_some());

    // --hits charges that many.
    let five = query(&["--addr", &addr, "--domain", "t", "-d", "k=w", "--hits", "5"]).await;
    assert!(stdout(&five).contains("995"), "{}", stdout(&five));
}

#[tokio::test]
async fn errors_exit_2_with_a_message() {
    let s = sluice().file("t.yaml", RULES).start().await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let unused = free.local_addr().expect("addr").to_string();
    drop(free);
    let down = query(&[
        "--addr",
        &unused,
        "--domain",
        "t",
        "-d",
        "k=v",
        "--timeout",
        "2s",
    ])
    .await;
    assert_eq!(down.status.code(), Some(2));
    assert!(
        stderr(&down).contains("cannot connect"),
        "{}",
        stderr(&down)
    );

    let bad = query(&["--addr", &s.grpc.to_string(), "--domain", "", "-d", "k=v"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("InvalidArgument"), "{}", stderr(&bad));

    let usage = query(&["--domain", "t", "-d", "novalue"]).await;
    assert_eq!(
        usage.status.code(),
        Some(2),
        "a usage error is an error too"
    );
}

#[tokio::test]
async fn over_mutual_tls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    let ca = Ca::new("server CA");
    let server = ca.leaf(&["localhost"], Usage::Server);
    let clients = Ca::new("client CA");
    let client = clients.leaf(&["envoy.internal"], Usage::Client);
    let s = sluice()
        .file("t.yaml", RULES)
        .arg("--grpc-tls-cert")
        .arg(write(p, "tls.crt", &server.cert).display().to_string())
        .arg("--grpc-tls-key")
        .arg(write(p, "tls.key", &server.key).display().to_string())
        .arg("--grpc-tls-client-ca")
        .arg(
            write(p, "client-ca.crt", &clients.pem())
                .display()
                .to_string(),
        )
        .start()
        .await;
    let ca_path = write(p, "ca.crt", &ca.pem()).display().to_string();
    let cert = write(p, "client.crt", &client.cert).display().to_string();
    let key = write(p, "client.key", &client.key).display().to_string();
    let addr = s.grpc.to_string();
    let base = [
        "--addr",
        &addr,
        "--domain",
        "t",
        "-d",
        "k=v",
        "--ca",
        &ca_path,
        "--server-name",
        "localhost",
    ];

    let mut with_cert = base.to_vec();
    with_cert.extend(["--cert", &cert, "--key", &key]);
    let ok = query(&with_cert).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("overall: OK"));

    let refused = query(&base).await;
    assert_eq!(refused.status.code(), Some(2), "no client certificate");

    let plain = query(&[
        "--addr",
        &addr,
        "--domain",
        "t",
        "-d",
        "k=v",
        "--timeout",
        "2s",
    ])
    .await;
    assert_eq!(plain.status.code(), Some(2), "plaintext to a TLS port");
}

/// The command line reference runs `sluice query` against the bundled config: the command
/// there prints what the page says it prints.
#[tokio::test]
async fn the_cli_reference_query_prints_what_it_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = "docs/reference/cli.md";
    let doc = std::fs::read_to_string(root.join(page)).expect(page);
    let block = doc
        .split("```sh")
        .find(|b| b.contains("sluice query --addr localhost:"))
        .and_then(|b| b.split("```").next())
        .expect("a block with `sluice query --addr localhost:…`");
    let mut lines = block.lines().map(str::trim).filter(|l| !l.is_empty());
    let command = lines.next().expect("the command");
    let expected: Vec<&str> = lines
        .map(|l| l.strip_prefix("# ").expect("expected output as comments"))
        .collect();
    let args: Vec<&str> = command
        .strip_prefix("sluice query ")
        .expect("sluice query …")
        .split_whitespace()
        .collect();

    let s = sluice()
        .no_default_args()
        .args(["--config", &root.join("config").display().to_string()])
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .start()
        .await;
    let addr = s.grpc.to_string();
    let args: Vec<&str> = args
        .iter()
        .map(|a| {
            if a.starts_with("localhost:") {
                addr.as_str()
            } else {
                a
            }
        })
        .collect();
    let out = query(&args).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = stdout(&out);
    assert_eq!(printed.lines().collect::<Vec<_>>(), expected, "{printed}");
}
