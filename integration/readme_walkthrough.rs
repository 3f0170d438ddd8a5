//! The README's walkthrough is run as a reader would type it: every ```` ```console ```` block
//! of README.md, in order, in one bash session in a fresh directory, with `sluice` on `PATH`
//! (the binary under test), a real `redis-server` and `curl`. Each command's output is
//! compared with the lines shown under it. The troubleshooting page
//! (`docs/how-to/troubleshoot.md`) is run the same way ([`walk`]).
//!
//! What the test changes, and why: the ports (the page's fixed ones would collide between
//! parallel tests, so each is swapped for a free one in the commands, and back in what they
//! print), the output of commands sent to the background (a terminal shows their logs, the
//! page does not; a redirection of their own still applies), a wait after each of them
//! until it serves (a reader's typing is slower than a script), and durations (they count
//! down with the clock, so `3599.921s` and `3600s` compare equal).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::redis::free_port;

/// One command of a block and the output shown under it.
struct Step {
    command: String,
    shown: Vec<String>,
    background: bool,
}

/// The console blocks of a Markdown text, each as its steps.
fn console_blocks(text: &str) -> Vec<Vec<Step>> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() != "```console" {
            continue;
        }
        let mut steps: Vec<Step> = Vec::new();
        let mut heredoc: Option<String> = None;
        for line in lines.by_ref() {
            if heredoc.is_none() && line.starts_with("```") {
                break;
            }
            if let Some(end) = &heredoc {
                let step = steps.last_mut().expect("a heredoc follows its command");
                step.command.push('\n');
                step.command.push_str(line);
                if line == end {
                    heredoc = None;
                }
            } else if let Some(command) = line.strip_prefix("$ ") {
                heredoc = command
                    .split_once("<<'")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .map(|(end, _)| end.to_owned());
                let (command, background) = match command.strip_suffix(" &") {
                    Some(c) => (c, true),
                    None => (command, false),
                };
                steps.push(Step {
                    command: command.to_owned(),
                    shown: Vec::new(),
                    background,
                });
            } else {
                let step = steps.last_mut().expect("output follows a command");
                step.shown.push(line.to_owned());
            }
        }
        blocks.push(steps);
    }
    blocks
}

/// The README's ports and Redis address, each with the free one the test uses instead.
struct Ports {
    swaps: Vec<(String, String)>,
    http: Vec<(String, u16)>,
}

impl Ports {
    fn new() -> Ports {
        let [grpc, http, admin, grpc2, http2, redis] = std::array::from_fn(|_| free_port());
        let swaps = [
            ("localhost:8081", format!("127.0.0.1:{grpc}")),
            ("localhost:8080", format!("127.0.0.1:{http}")),
            ("localhost:8082", format!("127.0.0.1:{admin}")),
            ("localhost:9081", format!("127.0.0.1:{grpc2}")),
            ("localhost:9080", format!("127.0.0.1:{http2}")),
            (":9081", format!("127.0.0.1:{grpc2}")),
            (":9080", format!("127.0.0.1:{http2}")),
            ("6379", redis.to_string()),
        ];
        Ports {
            swaps: swaps.map(|(a, b)| (a.to_owned(), b)).to_vec(),
            http: vec![
                (
                    "--http-addr 127.0.0.1:".to_owned() + &http2.to_string(),
                    http2,
                ),
                (String::new(), http),
            ],
        }
    }

    fn apply(&self, command: &str) -> String {
        self.swaps
            .iter()
            .fold(command.to_owned(), |c, (from, to)| c.replace(from, to))
    }

    /// A printed line with the page's ports back: an address the test swapped in
    /// (`127.0.0.1:<free port>`) reads as the page wrote it (a Redis at
    /// `127.0.0.1:6379`, as the page names it).
    fn unapply(&self, printed: &str) -> String {
        self.swaps
            .iter()
            .fold(printed.to_owned(), |line, (from, to)| {
                if to.starts_with("127.0.0.1:") {
                    line.replace(
                        to,
                        &format!("127.0.0.1:{}", from.rsplit(':').next().unwrap_or(from)),
                    )
                } else {
                    line.replace(&format!("127.0.0.1:{to}"), &format!("127.0.0.1:{from}"))
                }
            })
    }

    /// The env a reader's shell would not have: the default listeners on free ports.
    fn env(&self) -> Vec<(&'static str, String)> {
        let port = |from: &str| {
            self.swaps
                .iter()
                .find(|(f, _)| f == from)
                .map(|(_, t)| t.clone())
                .unwrap_or_default()
        };
        vec![
            ("SLUICE_GRPC_ADDR", port("localhost:8081")),
            ("SLUICE_HTTP_ADDR", port("localhost:8080")),
            ("SLUICE_ADMIN_ADDR", port("localhost:8082")),
        ]
    }

    /// Bash that waits until a backgrounded command serves: a sluice answers its health
    /// check (on its own HTTP port), a Redis accepts connections.
    fn wait_for(&self, command: &str) -> String {
        // A server that never serves is written to errors.log, which the failure shows.
        let until = |test: String| {
            format!(
                "up=; for _ in $(seq 400); do {test} && up=1 && break; sleep 0.05; done; \
                 [ -n \"$up\" ] || echo \"never served: {}\" >>errors.log",
                command.replace('"', "'")
            )
        };
        if command.starts_with("sluice serve") {
            let port = self
                .http
                .iter()
                .find(|(flag, _)| command.contains(flag.as_str()))
                .map(|(_, p)| *p)
                .expect("the default HTTP port matches any command");
            until(format!(
                "curl -sf http://127.0.0.1:{port}/healthcheck >/dev/null"
            ))
        } else if command.starts_with("redis-server") {
            let port = command
                .split_whitespace()
                .skip_while(|w| *w != "--port")
                .nth(1)
                .expect("redis-server --port N");
            until(format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null"))
        } else {
            panic!("the walkthrough backgrounds `{command}`: the test knows no way to wait for it")
        }
    }
}

/// Durations count down with the clock: `3599.921s` and `3600s` are both `<duration>`, and
/// so is a `reset_ms` figure.
fn normalize(line: &str) -> String {
    let duration = regex::Regex::new(r"\b\d+(\.\d+)?s\b").expect("regex");
    let reset_ms = regex::Regex::new(r#""reset_ms":\d+"#).expect("regex");
    let line = duration.replace_all(line, "<duration>");
    let line = reset_ms.replace_all(&line, r#""reset_ms":<ms>"#);
    // Columns widen or narrow with the text in them.
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A Markdown page of the repository.
fn page(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_readme_walkthrough_prints_what_it_shows() {
    walk("README.md");
}

#[test]
fn the_troubleshooting_page_prints_what_it_shows() {
    walk("docs/how-to/troubleshoot.md");
}

/// Run every console block of `path` in order (see the module comment), and compare what
/// each command prints with the lines shown under it.
fn walk(path: &str) {
    let blocks = console_blocks(&page(path));
    assert!(blocks.len() >= 2, "{path} has a walkthrough");
    let steps: Vec<Step> = blocks.into_iter().flatten().collect();
    let ports = Ports::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_sluice"));
    let bin_dir = bin.parent().expect("the binary's directory");
    let search = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // One script: each command's output to a file of its own, background ones to a log.
    let mut script = String::new();
    for (i, step) in steps.iter().enumerate() {
        let command = ports.apply(&step.command);
        if step.background {
            // A group, so a redirection of the command's own (`2>sluice.log`) still applies;
            // `exec`, so the job is the command itself (`kill %1` stops it).
            script.push_str(&format!("{{ exec {command}; }} >>background.log 2>&1 &\n"));
            script.push_str(&ports.wait_for(&command));
            script.push('\n');
        } else {
            script.push_str(&format!("{{\n{command}\n}} >out.{i} 2>>errors.log\n"));
        }
    }
    script.push_str("kill $(jobs -p) 2>/dev/null; wait\n");
    std::fs::write(dir.path().join("walkthrough.sh"), &script).expect("write the script");

    let child = Command::new("bash")
        .arg("walkthrough.sh")
        .current_dir(dir.path())
        .env("PATH", search)
        .envs(ports.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash");
    let out = child.wait_with_output().expect("the walkthrough ends");
    let log = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let context = format!(
        "script:\n{script}\nstderr:\n{}\nbackground.log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        log("background.log"),
    );

    for (i, step) in steps.iter().enumerate() {
        if step.background {
            assert!(step.shown.is_empty(), "`{}` shows output", step.command);
            continue;
        }
        let printed: Vec<String> = log(&format!("out.{i}"))
            .lines()
            .map(|l| normalize(&ports.unapply(l)))
            .collect();
        let shown: Vec<String> = step.shown.iter().map(|l| normalize(l)).collect();
        if printed != shown {
            let _ = std::io::stderr().write_all(context.as_bytes());
        }
        // errors.log goes in the message: CI shows a failure's message whole, its output cut.
        assert_eq!(
            printed,
            shown,
            "{path}: `{}` printed something else than shown; errors.log:\n{}",
            step.command,
            log("errors.log"),
        );
    }
}

#[test]
fn console_blocks_are_read_as_a_reader_types_them() {
    let text = "```console\n$ cat > f <<'EOF'\na: 1\n$ not a command\nEOF\n\
                $ sluice serve &\n$ echo hi\nhi\n```\n```sh\n$ ignored\n```\n";
    let blocks = console_blocks(text);
    assert_eq!(blocks.len(), 1);
    let steps = &blocks[0];
    assert_eq!(steps.len(), 3);
    assert_eq!(
        steps[0].command,
        "cat > f <<'EOF'\na: 1\n$ not a command\nEOF"
    );
    assert!(steps[1].background && steps[1].command == "sluice serve");
    assert_eq!(steps[2].shown, vec!["hi".to_owned()]);
    assert_eq!(
        normalize("user=alice  OK    2/hour  1          3599.921s"),
        "user=alice OK 2/hour 1 <duration>"
    );
}
