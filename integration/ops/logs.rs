//! Text logs carry terminal colours only when they go to a terminal, and never with
//! `NO_COLOR` set: written to a pipe (a container's log stream, a file) escape codes are
//! garbage to whoever reads them. JSON logs never had any.
//!
//! The binary is started so that it logs a warning (their `PROTO`, noted as having no
//! effect) and an error, then stops at once (a Redis CA file that does not exist); under
//! `script` its stderr is a pseudo-terminal.

use std::process::{Command, Stdio};

const ESC: u8 = 0x1b;

/// The arguments of a `serve` that logs a warning and an error, then exits.
fn failing_serve(dir: &std::path::Path) -> Vec<String> {
    let missing = dir.join("missing").display().to_string();
    [
        "serve",
        "--config",
        &missing,
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
        "--admin-addr",
        "off",
        "--redis-url",
        "rediss://127.0.0.1:1",
        "--redis-tls-ca-cert",
        &missing,
    ]
    .map(String::from)
    .to_vec()
}

fn command(program: &str, no_color: Option<&str>) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PROTO", "tcp")
        .stdin(Stdio::null());
    if let Some(v) = no_color {
        c.env("NO_COLOR", v);
    }
    c
}

/// Everything the binary wrote to stderr, through a pipe.
fn piped(format: Option<&str>) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut c = command(env!("CARGO_BIN_EXE_sluice"), None);
    if let Some(f) = format {
        c.env("LOG_FORMAT", f);
    }
    let out = c
        .args(failing_serve(dir.path()))
        .output()
        .expect("run sluice");
    assert!(!out.status.success());
    out.stderr
}

/// Everything the binary wrote to its terminal (a pseudo-terminal `script` opens).
fn on_a_terminal(no_color: Option<&str>) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_sluice").to_string())
        .chain(failing_serve(dir.path()))
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let out = command("script", no_color)
        .args(["-qec", &line.join(" "), "/dev/null"])
        .output()
        .expect("run script (util-linux)");
    out.stdout
}

fn warned(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes).contains("PROTO=tcp has no effect here")
}

#[test]
fn text_logs_to_a_pipe_carry_no_escape_codes() {
    let text = piped(None);
    assert!(warned(&text), "{}", String::from_utf8_lossy(&text));
    assert!(!text.contains(&ESC), "{}", String::from_utf8_lossy(&text));
    let json = piped(Some("json"));
    assert!(!json.contains(&ESC));
    let line = String::from_utf8_lossy(&json);
    let first = line.lines().next().expect("a log line");
    let v: serde_json::Value = serde_json::from_str(first).expect("a JSON log line");
    assert_eq!(v["level"], "WARN", "{first}");
}

#[test]
fn a_terminal_gets_colours_unless_no_color_is_set() {
    let coloured = on_a_terminal(None);
    assert!(warned(&coloured), "{}", String::from_utf8_lossy(&coloured));
    assert!(
        coloured.contains(&ESC),
        "a terminal gets colours: {}",
        String::from_utf8_lossy(&coloured)
    );
    let plain = on_a_terminal(Some("1"));
    assert!(warned(&plain), "{}", String::from_utf8_lossy(&plain));
    assert!(!plain.contains(&ESC), "{}", String::from_utf8_lossy(&plain));
}
