//! The benchmark scripts under `scripts/` keep working: each parses (`bash -n`), with the
//! pieces they share in `scripts/lib/`, and `scripts/redis-capacity.sh` (BENCHMARKS.md's
//! capacity table) runs end to end in a tiny mode against the debug binaries: its own
//! redis-server on a free port, sluice, the load generator and redis-benchmark, with every
//! column it reports filled; so do `scripts/overload.sh` (RELIABILITY.md's overload table),
//! unconfined, `scripts/cpu-compare.sh` (sluice beside the gRPC floor, examples/floor.rs),
//! `scripts/calendar-cost.sh` (calendar windows beside plain ones), and the two through a real
//! Envoy and h2load: `scripts/envoy-overhead.sh` (what a check adds to a request) and
//! `scripts/envoy-overload.sh` (overload through Envoy). Speeds are not
//! asserted (they are what the scripts measure); the counts that do not depend on speed are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_script_parses() {
    let mut scripts: Vec<PathBuf> = ["scripts", "scripts/lib"]
        .into_iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).expect(dir))
        .map(|e| e.expect("scripts/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sh"))
        .collect();
    scripts.sort();
    assert!(scripts.len() >= 4, "scripts: {scripts:?}");
    for s in scripts {
        let out = Command::new("bash")
            .arg("-n")
            .arg(&s)
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{} does not parse:\n{}",
            s.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The debug load generator beside the debug sluice.
fn loadgen() -> PathBuf {
    example("loadgen")
}

/// A debug example beside the debug sluice: `cargo test` builds the examples; when only
/// this test binary was built (`cargo test --test integration`), build it the way a shell
/// would, so no shared dependency is rebuilt for a different environment.
fn example(name: &str) -> PathBuf {
    let sluice = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let profile = sluice.parent().expect("target/<profile>");
    let exe = profile.join("examples").join(name);
    if exe.exists() {
        return exe;
    }
    let target = profile.parent().expect("target directory");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("CARGO") && k != "CARGO_HOME")
        {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .current_dir(root())
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .args(["build", "--locked", "--example", name])
        .output()
        .unwrap_or_else(|e| panic!("cargo build --example {name}: {e}"));
    assert!(
        out.status.success(),
        "cargo build --example {name}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Run `cmd`, the script at `script` (its path from the repository's root); its stdout, after
/// checking that it succeeded (its stdout and stderr in the panic message when not).
fn succeed(script: &str, cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The cells of a Markdown table row.
fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_owned())
        .collect()
}

/// Rows of the first markdown table in `text`, as header → cell maps, keyed by "what D".
fn first_table(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("| what"))
        .take_while(|l| l.starts_with('|'));
    let header = cells(lines.next().expect("a markdown table"));
    lines
        .skip(1)
        .map(|l| {
            let row: HashMap<String, String> = header.iter().cloned().zip(cells(l)).collect();
            (format!("{} {}", row["what"], row["D"]), row)
        })
        .collect()
}

fn number(row: &HashMap<String, String>, column: &str) -> f64 {
    let cell = row
        .get(column)
        .unwrap_or_else(|| panic!("no column {column:?} in {row:?}"));
    cell.trim_end_matches('k')
        .parse()
        .unwrap_or_else(|_| panic!("{column}: {cell:?} is not a number ({row:?})"))
}

/// Run `scripts/redis-capacity.sh` in a tiny configuration (markdown tables, no callgrind
/// pass, a 2 s Redis deadline: the debug build under a parallel test suite must not miss it)
/// with `env` on top; its stdout, after checking that it succeeded. Four calls in flight at
/// most: the admission's floor, so a suite that starves the debug build of CPU (round trips
/// of hundreds of ms) never has a call queued and refused; these tests count calls, not
/// capacity.
fn capacity(env: &[(&str, String)]) -> String {
    tiny("scripts/redis-capacity.sh", env)
}

/// [`capacity`]'s tiny run of `script` (`scripts/redis-capacity.sh` or a script over it).
fn tiny(script: &str, env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(root().join(script));
    cmd.env("LOADGEN", loadgen())
        .env("ALGOS", "fixed_window")
        .env("BENCH_N", "2000")
        .env("TIMEOUT", "2s")
        .env("CONNECTIONS", "1")
        .env("CONCURRENCY", "4")
        .env("FORMAT", "md")
        .env("CALLGRIND", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    succeed(script, &mut cmd)
}

#[test]
fn redis_capacity_runs_sluice_and_both_baselines_against_one_redis() {
    let stdout = capacity(&[
        ("SLUICE", env!("CARGO_BIN_EXE_sluice").to_owned()),
        ("DESCRIPTORS", "1 2".to_owned()),
        ("N", "40".to_owned()),
        // Two plain passes (the figures are medians over them).
        ("REPEAT", "2".to_owned()),
    ]);
    let rows = first_table(&stdout);
    assert_eq!(rows.len(), 6, "{stdout}");
    for d in [1.0, 2.0] {
        let row = &rows[&format!("fixed_window {d}")];
        assert_eq!(number(row, "errors"), 0.0, "{stdout}");
        // At most one script call per request (concurrent requests may share one).
        let scripts = number(row, "script calls/req");
        assert!(scripts > 0.0 && scripts <= 1.0, "{stdout}");
        assert!(number(row, "Redis commands/req") >= scripts, "{stdout}");
        for column in [
            "req/s",
            "sluice CPU µs/req",
            "Redis CPU µs/check (INFO cpu)",
        ] {
            assert!(number(row, column) > 0.0, "{column}: {stdout}");
        }
        // Both rates are printed rounded to whole numbers, so on a slow machine (a debug
        // binary on two busy cores answers under 100 req/s) the ratio is off by up to
        // (d/2 + 1/2) / req/s: compare the rates, allowing that rounding.
        let checks = number(row, "checks/s");
        let requests = number(row, "req/s");
        assert!((checks - d * requests).abs() <= d / 2.0 + 0.5, "{stdout}");
    }
    // The baselines are exact counts: INCRBY + EXPIRE per check; one EVALSHA running two.
    let reference = &rows["reference: INCRBY + EXPIRE, -P 16 –"];
    assert_eq!(number(reference, "script calls/req"), 0.0, "{stdout}");
    assert_eq!(number(reference, "Redis commands/req"), 2.0, "{stdout}");
    let script = &rows["INCRBY + PEXPIRE script, EVALSHA -P 16 –"];
    assert_eq!(number(script, "script calls/req"), 1.0, "{stdout}");
    assert_eq!(number(script, "Redis commands/req"), 3.0, "{stdout}");
    // Their client's pipelines: one per request, D x (INCRBY + EXPIRE).
    let theirs: Vec<_> = [1, 2]
        .map(|d| &rows[&format!("their client: INCRBY + EXPIRE, one pipeline per request {d}")])
        .into();
    for row in &theirs {
        assert_eq!(number(row, "script calls/req"), 0.0, "{stdout}");
        assert_eq!(number(row, "Redis commands/req"), 2.0, "{stdout}");
    }
    for row in [reference, script, theirs[0], theirs[1]] {
        assert_eq!(number(row, "errors"), 0.0, "{stdout}");
        assert!(
            number(row, "Redis CPU µs/check (INFO cpu)") > 0.0,
            "{stdout}"
        );
    }
    // The capacity table: one row per line of the first, a figure per D.
    assert!(
        stdout.contains("| what | D=1 (INFO cpu) | D=2 (INFO cpu) |"),
        "{stdout}"
    );
    // The targets' table: each sluice row as a ratio to the reference pair of the same run.
    assert!(
        stdout
            .contains("| algorithm | D | Redis CPU µs/check (INFO cpu) | × reference | × script | × their client |"),
        "{stdout}"
    );
    for d in [1, 2] {
        let line = format!("| fixed_window | {d} | ");
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&line))
            .unwrap_or_else(|| panic!("no ratio row for D={d}: {stdout}"));
        let ratio: f64 = row
            .split(" | ")
            .nth(3)
            .and_then(|c| c.trim_end_matches('×').parse().ok())
            .unwrap_or_else(|| panic!("no ratio in {row:?}"));
        assert!(ratio > 0.0, "{stdout}");
    }
    assert!(stdout.contains("| reference pair | – | "), "{stdout}");
    assert!(stdout.contains("| their client | 2 | "), "{stdout}");
}

/// `SLUICES`: two builds measured in the same pass against one Redis and one baseline, each
/// row named after its label (here the same binary twice).
#[test]
fn redis_capacity_measures_several_builds_in_one_pass() {
    let bin = env!("CARGO_BIN_EXE_sluice");
    let stdout = capacity(&[
        ("SLUICES", format!("before={bin} after={bin}")),
        ("DESCRIPTORS", "1".to_owned()),
        ("BASELINES", "reference".to_owned()),
        ("N", "20".to_owned()),
        ("REPEAT", "1".to_owned()),
    ]);
    let rows = first_table(&stdout);
    assert_eq!(rows.len(), 3, "{stdout}");
    for label in ["before", "after"] {
        let row = &rows[&format!("fixed_window@{label} 1")];
        assert_eq!(number(row, "errors"), 0.0, "{stdout}");
        assert!(number(row, "req/s") > 0.0, "{stdout}");
        assert!(
            stdout.contains(&format!("| fixed_window@{label} | 1 | ")),
            "no ratio row for {label}: {stdout}"
        );
    }
}

/// `scripts/calendar-cost.sh` (BENCHMARKS.md's calendar rows): the four day rules, plain and
/// calendar, measured in one pass against one Redis beside the reference pair.
#[test]
fn calendar_cost_measures_calendar_and_plain_days_in_one_pass() {
    // Its own rules (ALGOS unset) beside the reference pair.
    let stdout = tiny(
        "scripts/calendar-cost.sh",
        &[
            ("SLUICE", env!("CARGO_BIN_EXE_sluice").to_owned()),
            ("ALGOS", String::new()),
            ("BASELINES", "reference".to_owned()),
            ("DESCRIPTORS", "1".to_owned()),
            ("N", "20".to_owned()),
            ("REPEAT", "1".to_owned()),
        ],
    );
    let rows = first_table(&stdout);
    for rule in [
        "fixed_window_day",
        "fixed_window_calendar",
        "sliding_window_day",
        "sliding_window_calendar",
    ] {
        let row = &rows[&format!("{rule} 1")];
        assert_eq!(number(row, "errors"), 0.0, "{stdout}");
        let scripts = number(row, "script calls/req");
        assert!(scripts > 0.0 && scripts <= 1.0, "{rule}: {stdout}");
        assert!(
            number(row, "Redis CPU µs/check (INFO cpu)") > 0.0,
            "{rule}: {stdout}"
        );
    }
    assert!(
        rows.contains_key("reference: INCRBY + EXPIRE, -P 16 –"),
        "{stdout}"
    );
}

/// `scripts/overload.sh` end to end in a tiny mode: every setup (memory, strict Redis, Redis
/// with the local fallback), its capacity then 1× and 2× of it, against the debug binaries,
/// unconfined (no CPU quota or pinning: the suite need not run as root). Speeds are not
/// asserted; that every row and column of both tables is filled is.
#[test]
fn overload_runs_every_setup_and_prints_its_tables() {
    let stdout = succeed(
        "scripts/overload.sh",
        Command::new(root().join("scripts/overload.sh"))
            .env("SLUICE", env!("CARGO_BIN_EXE_sluice"))
            .env("LOADGEN", loadgen())
            .env("DURATION", "1s")
            .env("WARMUP", "200ms")
            .env("MULTIPLES", "1 2")
            .env("CONCURRENCY", "4")
            .env("QUOTA", "0")
            .env("PIN", "0"),
    );
    for setup in ["memory", "redis", "local"] {
        for load in ["1×", "2×"] {
            let prefix = format!("| {setup} | {load} | ");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("no {setup} {load} row:\n{stdout}"));
            let row = cells(row);
            assert_eq!(row.len(), 15, "{row:?}");
            for cell in &row[2..] {
                assert!(cell.parse::<f64>().is_ok(), "{cell:?} in {row:?}");
            }
            assert!(
                row[2].parse::<f64>().unwrap_or(0.0) > 0.0,
                "offered: {row:?}"
            );
        }
        let summary = format!("| {setup} | ");
        let row = stdout
            .lines()
            .filter(|l| l.starts_with(&summary))
            .map(cells)
            .find(|r| r.len() == 7)
            .unwrap_or_else(|| panic!("no summary row for {setup}:\n{stdout}"));
        assert!(
            row[1].parse::<f64>().unwrap_or(0.0) > 0.0,
            "capacity: {row:?}"
        );
        // No connection is dropped by the breaker while Redis is alive.
        assert_eq!(row[5], "0", "{row:?}");
    }
}

/// `scripts/cpu-compare.sh` in a tiny mode: sluice (memory and Redis) and the floor
/// interleaved, every column filled, the ratio table present. limitador is not built here;
/// without `LIMITADOR` its rows are left out, and the output says so.
#[test]
fn cpu_compare_runs_sluice_and_the_floor_interleaved() {
    let stdout = succeed(
        "scripts/cpu-compare.sh",
        Command::new(root().join("scripts/cpu-compare.sh"))
            .env("SLUICE", env!("CARGO_BIN_EXE_sluice"))
            .env("FLOOR", example("floor"))
            .env("LOADGEN", loadgen())
            .env_remove("LIMITADOR")
            .env("ROUNDS", "1")
            .env("N", "80")
            .env("CONCURRENCY", "4")
            .env("PIN", "0")
            .env("EXTRA", "--redis-timeout 2s"),
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .take_while(|l| !l.starts_with("Medians"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| server"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let names: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        names,
        [
            ("sluice", "memory"),
            ("floor", "memory"),
            ("sluice", "redis")
        ],
        "{stdout}"
    );
    for r in &rows {
        // answered/s, p50, p99, unloaded p50: measured; errors: none. The server's CPU is
        // read in clock ticks (10 ms), which a tiny run may not reach: a number, maybe 0.
        for i in [3, 6, 7, 8] {
            let v: f64 = r[i].parse().unwrap_or_else(|_| panic!("{r:?}: {stdout}"));
            assert!(v > 0.0, "{r:?}: {stdout}");
        }
        let cpu: f64 = r[4].parse().unwrap_or_else(|_| panic!("{r:?}: {stdout}"));
        assert!(cpu >= 0.0, "{r:?}: {stdout}");
        assert_eq!(r[9], "0", "{stdout}");
        // Redis CPU only where there is a Redis.
        assert_eq!(r[5] == "–", r[1] == "memory", "{r:?}: {stdout}");
    }
    assert!(stdout.contains("| sluice / floor | memory | "), "{stdout}");
    assert!(stdout.contains("| sluice / floor | redis | "), "{stdout}");
    assert!(stdout.contains("limitador: not measured"), "{stdout}");
}

/// A cell that must be a number.
fn num(cell: &str, row: &[String], stdout: &str) -> f64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a number in {row:?}:\n{stdout}"))
}

/// Run one of the Envoy scripts with `env` (the suite's Envoy, the debug sluice, no pinning);
/// its stdout, after checking that it succeeded.
fn envoy_script(script: &str, env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(root().join(script));
    cmd.env("ENVOY_BIN", crate::support::envoy::envoy_bin())
        .env("SLUICE", env!("CARGO_BIN_EXE_sluice"))
        .env("PIN", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    succeed(script, &mut cmd)
}

/// `scripts/envoy-overhead.sh` in a tiny mode: one round of a real Envoy without the filter,
/// and with it asking sluice on the memory store and on Redis, at a low rate (nothing waits
/// for a busy debug build) with a generous filter timeout. Every column filled; every request
/// made one check (Envoy's stats) and sluice decided each by the benchmark rule (its hits), so
/// every request did the whole path; none failed. limitador is not built here: without
/// `LIMITADOR` its rows are left out, and the output says so.
#[test]
fn envoy_overhead_runs_no_filter_and_sluice_through_one_envoy() {
    let stdout = envoy_script(
        "scripts/envoy-overhead.sh",
        &[
            ("ROUNDS", "1".to_owned()),
            ("RATE", "20".to_owned()),
            ("DURATION", "2s".to_owned()),
            ("WARMUP", "500ms".to_owned()),
            ("TIMEOUT", "5s".to_owned()),
            ("LIMITADOR", String::new()), // not built here
        ],
    );
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .take_while(|l| !l.starts_with("Medians"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| configuration"))
        .map(cells)
        .collect();
    let names: Vec<(&str, &str)> = rows.iter().map(|r| (&*r[0], &*r[1])).collect();
    assert_eq!(
        names,
        [
            ("no filter", "–"),
            ("sluice", "memory"),
            ("sluice", "redis")
        ],
        "{stdout}"
    );
    for r in &rows {
        assert_eq!(r.len(), 13, "{r:?}");
        let filter = r[0] != "no filter";
        // req/s, p50, p99, Envoy's CPU: measured.
        for i in [3, 4, 5, 6] {
            assert!(num(&r[i], r, &stdout) > 0.0, "{r:?}: {stdout}");
        }
        assert!(num(&r[5], r, &stdout) >= num(&r[4], r, &stdout), "{r:?}");
        // The server's CPU where there is a server, Redis's where there is a Redis.
        assert_eq!(r[7] == "–", !filter, "{r:?}: {stdout}");
        assert_eq!(r[8] == "–", r[1] != "redis", "{r:?}: {stdout}");
        assert!(num(&r[9], r, &stdout) >= 0.0, "{r:?}");
        // One check per request through the filter (a request in flight when h2load stops
        // may end either side of the count), none without it.
        let checks = num(&r[10], r, &stdout);
        if filter {
            assert!((0.9..=1.1).contains(&checks), "{r:?}: {stdout}");
            let hits = num(&r[11], r, &stdout);
            assert!((0.9..=1.1).contains(&hits), "rule hits: {r:?}: {stdout}");
        } else {
            assert_eq!(checks, 0.0, "{r:?}: {stdout}");
        }
        assert_eq!(r[12], "0", "errors: {r:?}: {stdout}");
    }
    // The medians, with what the filter adds over the round without it.
    for store in ["memory", "redis"] {
        let prefix = format!("| sluice | {store} | ");
        let row = stdout
            .lines()
            .skip_while(|l| !l.starts_with("Medians"))
            .find(|l| l.starts_with(&prefix))
            .map(cells)
            .unwrap_or_else(|| panic!("no median row for sluice, {store}:\n{stdout}"));
        assert_eq!(row.len(), 12, "{row:?}");
        for (i, cell) in row.iter().enumerate().skip(2) {
            // Redis's CPU only where there is a Redis.
            if i == 9 && store == "memory" {
                assert_eq!(cell, "–", "{row:?}");
            } else {
                num(cell, &row, &stdout);
            }
        }
    }
    assert!(stdout.contains("limitador: not measured"), "{stdout}");
}

/// `scripts/envoy-overload.sh` in a tiny mode: the memory store and strict Redis, each's
/// capacity and then 2× it through a real Envoy with the overload guide's settings, with them
/// sized to the instance's capacity and with Envoy's defaults, unconfined (no quota or pinning: the suite need not run as root).
/// Speeds are not asserted (a debug build under a parallel suite); that every row and column
/// of both tables is filled is, and that with the guide's settings (sized or not) Envoy kept
/// to the guide's connections.
#[test]
fn envoy_overload_runs_every_setting_and_prints_its_tables() {
    let stdout = envoy_script(
        "scripts/envoy-overload.sh",
        &[
            ("LOADGEN", loadgen().display().to_string()),
            ("SETUPS", "memory redis".to_owned()),
            ("DURATION", "1s".to_owned()),
            ("WARMUP", "200ms".to_owned()),
            ("CONCURRENCY", "4".to_owned()),
            ("QUOTA", "0".to_owned()),
        ],
    );
    for setup in ["memory", "redis"] {
        for envoy in ["guide", "sized", "default"] {
            let prefix = format!("| {setup} | {envoy} | 2× | ");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .map(cells)
                .unwrap_or_else(|| panic!("no {setup} {envoy} row:\n{stdout}"));
            assert_eq!(row.len(), 20, "{row:?}");
            for (i, cell) in row.iter().enumerate().skip(3) {
                // Redis's CPU only where there is a Redis.
                if i == 17 && setup == "memory" {
                    assert_eq!(cell, "–", "{row:?}");
                } else {
                    num(cell, &row, &stdout);
                }
            }
            assert!(num(&row[3], &row, &stdout) > 0.0, "offered: {row:?}");
            // Breaker overflow and timeouts are failed checks.
            let failed = num(&row[7], &row, &stdout);
            assert!(num(&row[8], &row, &stdout) <= failed, "{row:?}");
            if envoy != "default" {
                // examples/envoy.yaml's max_connections (one Envoy worker, so no more).
                assert!(num(&row[13], &row, &stdout) <= 4.0, "{row:?}: {stdout}");
            }
        }
        let prefix = format!("| {setup} | ");
        let summary = stdout
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(cells)
            .find(|r| r.len() == 7)
            .unwrap_or_else(|| panic!("no summary row for {setup}:\n{stdout}"));
        assert!(num(&summary[1], &summary, &stdout) > 0.0, "{summary:?}");
        for cell in &summary[2..5] {
            num(cell, &summary, &stdout);
        }
    }
}
