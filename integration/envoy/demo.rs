//! `scripts/demo.sh`, the demo without Docker, run as a user runs it: it starts sluice, Envoy
//! and the upstream, prints what to curl, limits a request as it says, and on SIGTERM or
//! Ctrl-C stops every process it started and removes its temporary directory. Ports come
//! from its `DEMO_*` variables, so it runs beside the other tests.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::envoy::{envoy_bin, http1};
use crate::support::redis::free_port;

/// The running script, and the processes it started once they are known: all killed on drop,
/// so a failing test leaves nothing behind either.
struct Demo {
    child: Child,
    stdout: mpsc::Receiver<String>,
    started: Vec<(u32, String)>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for (pid, _) in &self.started {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Demo {
    /// The lines printed up to and including the one containing `needle`.
    fn read_until(&self, needle: &str, timeout: Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => {
                    let done = line.contains(needle);
                    lines.push(line);
                    if done {
                        return lines;
                    }
                }
                Err(_) => panic!("the demo never printed `{needle}`; it printed {lines:?}"),
            }
        }
    }
}

/// Every process of the machine as `(pid, parent, command)`, from `/proc`.
fn processes() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // A zombie has exited; its parent has yet to reap it.
        if fields.first() == Some(&"Z") {
            continue;
        }
        let Some(ppid) = fields.get(1).and_then(|p| p.parse().ok()) else {
            continue;
        };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or_default();
        out.push((pid, ppid, comm.to_string()));
    }
    out
}

/// The processes descended from `root`, as `(pid, command)`.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let all = processes();
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for (pid, ppid, comm) in &all {
            if *ppid == parent {
                found.push((*pid, comm.clone()));
                parents.push(*pid);
            }
        }
    }
    found
}

/// Which of `pids` still run.
fn alive(pids: &[(u32, String)]) -> Vec<(u32, String)> {
    let running: Vec<u32> = processes().into_iter().map(|(p, _, _)| p).collect();
    pids.iter()
        .filter(|(p, _)| running.contains(p))
        .cloned()
        .collect()
}

/// How the demo is stopped.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// `kill <script>`, as a service manager stops it.
    Sigterm,
    /// SIGINT to the script's process group, as a terminal's Ctrl-C sends it.
    CtrlC,
}

#[tokio::test]
async fn demo_script_serves_limits_and_stops_everything_on_sigterm() {
    run_demo(Stop::Sigterm).await;
}

#[tokio::test]
async fn demo_script_stops_everything_on_ctrl_c() {
    run_demo(Stop::CtrlC).await;
}

/// Start the demo, check what it prints and serves, stop it, and check nothing it started
/// is left.
async fn run_demo(stop: Stop) {
    let envoy_port = free_port();
    let ports = [
        ("DEMO_ENVOY_PORT", envoy_port),
        ("DEMO_ENVOY_ADMIN_PORT", free_port()),
        ("DEMO_GRPC_PORT", free_port()),
        ("DEMO_HTTP_PORT", free_port()),
        ("DEMO_ADMIN_PORT", free_port()),
        ("DEMO_UPSTREAM_PORT", free_port()),
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Through python3, which puts SIGINT back to its default before it becomes bash: a
    // process started in the background of a script inherits SIGINT ignored, and bash cannot
    // trap a signal ignored on entry, while a terminal's shell starts it with the default. The
    // script leads a process group of its own, as a terminal's foreground job does.
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); \
         os.execvp('bash', ['bash', sys.argv[1]])",
    ])
    .arg(root.join("scripts/demo.sh"))
    .env("SLUICE", env!("CARGO_BIN_EXE_sluice"))
    .env("ENVOY_BIN", envoy_bin())
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in ports {
        cmd.env(k, v.to_string());
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("bash scripts/demo.sh");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut demo = Demo {
        child,
        stdout: rx,
        started: Vec::new(),
    };

    let printed = demo.read_until("Ctrl-C stops everything", Duration::from_secs(90));
    let text = printed.join("\n");
    assert!(
        text.contains(&format!("localhost:{envoy_port}/limited")),
        "the demo prints the URL that gets a 429:\n{text}"
    );
    let dir: PathBuf = printed
        .iter()
        .find_map(|l| {
            l.strip_prefix("Logs in ")?
                .split_once(':')
                .map(|(d, _)| d.into())
        })
        .unwrap_or_else(|| panic!("the demo names its log directory:\n{text}"));
    assert!(dir.is_dir(), "{}", dir.display());

    // What it prints: /limited passes twice a second, then 429.
    let front = SocketAddr::from(([127, 0, 0, 1], envoy_port));
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let r = http1(front, "GET", "/limited", &[], "")
            .await
            .expect("GET /limited through the demo's Envoy");
        statuses.push(r.status);
        if r.status == 429 {
            break;
        }
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert!(statuses.len() >= 3, "{statuses:?}");

    demo.started = descendants(demo.child.id());
    for name in ["sluice", "envoy", "python3"] {
        assert!(
            demo.started.iter().any(|(_, c)| c.starts_with(name)),
            "the demo runs {name}: {:?}",
            demo.started
        );
    }
    let script = demo.child.id().to_string();
    let (args, code) = match stop {
        Stop::Sigterm => (vec!["-TERM".to_string(), script], 143),
        Stop::CtrlC => (vec!["-INT".into(), "--".into(), format!("-{script}")], 130),
    };
    let ok = Command::new("kill")
        .args(&args)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {args:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = demo.child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the demo did not exit on {stop:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(code), "exit status after {stop:?}");
    let left = alive(&demo.started);
    assert!(left.is_empty(), "processes left behind: {left:?}");
    assert!(!dir.exists(), "{} left behind", dir.display());
}
