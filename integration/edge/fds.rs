//! Out of file descriptors: `accept` fails with EMFILE while the listening socket stays
//! readable. The accept loop must back off and say so, not spin a core, and recover once
//! descriptors are free again.

use std::time::Duration;

use super::*;

/// User + system CPU time of a process so far, in clock ticks (`/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name (which may hold spaces), from field 3 on.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    utime + stime
}

fn ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

#[tokio::test]
async fn out_of_descriptors_accepting_backs_off_and_logs() {
    let s = sluice()
        .file("t.yaml", RULES)
        .nofile(64)
        // Held connections must stay open while we measure.
        .args(["--header-timeout", "120s", "--idle-timeout", "0"])
        .start()
        .await;
    // Half-open connections until the process has no descriptor left to accept with; the
    // rest wait in the kernel's backlog, until that is full too.
    let mut held = Vec::new();
    for _ in 0..200 {
        match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(s.grpc)).await {
            Ok(Ok(c)) => held.push(c),
            _ => break,
        }
    }
    assert!(held.len() > 64, "more connections than descriptors");
    assert!(
        s.wait_log("accept failed", Duration::from_secs(10)).await,
        "a log line says why: {:?}",
        s.logs()
    );
    assert!(
        s.logs()
            .iter()
            .any(|l| l.contains("accept failed") && l.contains("Too many open files")),
        "{:?}",
        s.logs()
    );

    let before = cpu_ticks(s.pid());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = (cpu_ticks(s.pid()) - before) as f64 / ticks_per_second() as f64;
    assert!(
        used < 0.25,
        "the process used {used:.2} s of CPU in 1 s while out of descriptors"
    );
    let warnings = s
        .logs()
        .iter()
        .filter(|l| l.contains("accept failed"))
        .count();
    assert!(
        warnings <= 3,
        "the failure is logged, not flooded: {warnings} lines"
    );

    // Descriptors come back: accepting resumes and requests are served.
    drop(held);
    assert!(
        s.wait_log("accepting connections again", Duration::from_secs(10))
            .await
    );
    let mut c = s.client().await;
    call(&mut c, ask()).await;
}
