//! Where the rule files are and how they are read: `--config` (their `RUNTIME_*` layout),
//! `--merge-domains` and `--sanitize-metric-dots` (how stats keys are built), which `serve`,
//! `check` and `explain` read, declared once here.

use std::path::PathBuf;

use super::decl::{RefVar, Setting};
use super::env::{Env, var};
use super::parse::SettingsError;
use super::resolver::{Resolver, Source};
use super::values::paths;

/// `--config`: rule files or directories.
pub(super) static CONFIG: Setting<Vec<PathBuf>> = Setting::repeated("config", "PATH", paths)
    .default("config")
    .shown_default("`./config`")
    .help("Rule file or directory; repeatable, or comma-separated")
    .map(runtime_dir)
    .shown_vars("`RUNTIME_ROOT`/`RUNTIME_SUBDIRECTORY`/`RUNTIME_APPDIRECTORY`")
    .ref_var(RefVar::new("RUNTIME_ROOT", "/srv/runtime").does(
        "rule files are read from `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY` \
         (`--config`)",
    ))
    .ref_var(RefVar::new("RUNTIME_SUBDIRECTORY", "ratelimit").does("see `RUNTIME_ROOT`"))
    .ref_var(RefVar::new("RUNTIME_APPDIRECTORY", "rules").does("see `RUNTIME_ROOT`; `config`"));

/// `--merge-domains`.
pub(super) static MERGE_DOMAINS: Setting<bool> = Setting::switch("merge-domains")
    .help("Allow one domain to be split over several files")
    .same(RefVar::new("MERGE_DOMAIN_CONFIG", "true"));

/// `--sanitize-metric-dots`: their `SANITIZE_DESCRIPTOR_METRIC_DOTS`.
pub(super) static SANITIZE_METRIC_DOTS: Setting<bool> = Setting::switch("sanitize-metric-dots")
    .help(
        "Replace the dots of descriptor keys and values with `_` in stats keys (metric names \
         and labels), so a value like `10.0.0.1` or `foo.bar` adds no level to them",
    )
    .same(RefVar::new("SANITIZE_DESCRIPTOR_METRIC_DOTS", "true"));

/// The reference's variables that place the rule files.
const RUNTIME: [&str; 3] = [
    "RUNTIME_ROOT",
    "RUNTIME_SUBDIRECTORY",
    "RUNTIME_APPDIRECTORY",
];

/// What named the rule files, for the startup log: `--config`, `SLUICE_CONFIG`, their
/// `RUNTIME_*` variables or the default. Set beside their variables, sluice's flag or
/// variable wins (as every setting's does); a note logged at startup says so, naming both,
/// so a manifest's `RUNTIME_*` is never ignored in silence.
pub(super) fn config_from(r: &Resolver<'_>) -> Result<String, SettingsError> {
    let given = r.given(&CONFIG)?;
    let runtime: Vec<String> = RUNTIME
        .iter()
        .filter_map(|name| var(r.env(), name).map(|v| format!("{name}={v}")))
        .collect();
    Ok(match given.source {
        Source::Flag | Source::Var => {
            if !runtime.is_empty() {
                let paths: Vec<String> = given
                    .value
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                r.note(format!(
                    "rule files from {} ({}); {} ignored: sluice's own flag or variable wins \
                     over envoyproxy/ratelimit's (drop {} to use them)",
                    given.name,
                    paths.join(","),
                    runtime.join(" "),
                    given.name,
                ));
            }
            given.name
        }
        Source::RefVar => RUNTIME.join("/"),
        Source::Default => "the default".to_owned(),
    })
}

/// The reference's layout: the rule files live in ROOT/SUBDIRECTORY/APPDIRECTORY, with their defaults
/// for the parts not set.
fn runtime_dir(env: Env<'_>) -> Result<Option<Vec<PathBuf>>, SettingsError> {
    let root = var(env, "RUNTIME_ROOT");
    let sub = var(env, "RUNTIME_SUBDIRECTORY");
    let app = var(env, "RUNTIME_APPDIRECTORY");
    if root.is_none() && sub.is_none() && app.is_none() {
        return Ok(None);
    }
    let mut dir = PathBuf::from(root.unwrap_or_else(|| "/srv/runtime_data/current".into()));
    if let Some(sub) = sub {
        dir.push(sub);
    }
    dir.push(app.unwrap_or_else(|| "config".into()));
    Ok(Some(vec![dir]))
}
