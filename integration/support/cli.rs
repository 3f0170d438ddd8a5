//! The one-shot commands of the real binary (`sluice check`, `explain`, `query`) as a
//! script runs them, and the rule files a directory holds.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `sluice SUBCOMMAND` run in the repository root, without the variables that would change
/// what it reads (`MERGE_DOMAIN_CONFIG`, `CACHE_KEY_PREFIX`, `RUNTIME_*` and the `SLUICE_*`
/// ones).
pub fn command(subcommand: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.arg(subcommand).current_dir(env!("CARGO_MANIFEST_DIR"));
    for name in [
        "MERGE_DOMAIN_CONFIG",
        "SLUICE_MERGE_DOMAINS",
        "CACHE_KEY_PREFIX",
        "SLUICE_CACHE_KEY_PREFIX",
        "SLUICE_CONFIG",
        "SLUICE_MAX_CONFIG_FILE_BYTES",
        "RUNTIME_ROOT",
        "RUNTIME_SUBDIRECTORY",
        "RUNTIME_APPDIRECTORY",
    ] {
        c.env_remove(name);
    }
    c
}

/// `sluice check ARGS`: (accepted, stdout then stderr).
pub fn check<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> (bool, String) {
    let out = command("check")
        .args(args)
        .output()
        .expect("run sluice check");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Every `*.yaml`/`*.yml` under `dir`, recursively and sorted, dot-entries skipped: the
/// files sluice discovers there.
pub fn rule_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            out.extend(rule_files(&p));
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(p);
        }
    }
    out
}
