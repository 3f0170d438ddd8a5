//! Unit tests of the config module. Fixtures live in `tests/data/config/`.

mod bundled;
mod consistency;
mod discover;
mod errors;
mod extensions;
mod locations;
mod matching;
mod nasty;
mod response;
mod stats;
mod wildcards;

use std::path::PathBuf;

use super::{ConfigError, ConfigFile, LoadOptions, Match, RateLimitConfig};

pub(super) fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/config")
}

/// A fixture as the loader sees it: named by its file name, as their tests do.
pub(super) fn fixture(name: &str) -> ConfigFile {
    let path = fixture_dir().join(name);
    let content = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    ConfigFile {
        name: name.to_owned(),
        path,
        content,
    }
}

pub(super) fn inline(name: &str, content: &str) -> ConfigFile {
    ConfigFile {
        name: name.to_owned(),
        path: PathBuf::from(name),
        content: content.to_owned(),
    }
}

pub(super) fn build_files(
    files: &[ConfigFile],
    merge: bool,
) -> Result<RateLimitConfig, Vec<ConfigError>> {
    RateLimitConfig::build(
        files,
        &LoadOptions {
            merge_domains: merge,
            ..LoadOptions::default()
        },
    )
}

pub(super) fn build(names: &[&str], merge: bool) -> Result<RateLimitConfig, Vec<ConfigError>> {
    let files: Vec<ConfigFile> = names.iter().map(|n| fixture(n)).collect();
    build_files(&files, merge)
}

/// Load fixtures that must be valid.
pub(super) fn load(names: &[&str]) -> RateLimitConfig {
    match build(names, false) {
        Ok(config) => config,
        Err(errors) => panic!("{names:?} should load: {errors:?}"),
    }
}

pub(super) fn load_str(content: &str) -> RateLimitConfig {
    match build_files(&[inline("inline.yaml", content)], false) {
        Ok(config) => config,
        Err(errors) => panic!("should load: {errors:?}"),
    }
}

/// The messages of a config that must fail.
pub(super) fn messages(result: Result<RateLimitConfig, Vec<ConfigError>>) -> Vec<String> {
    match result {
        Ok(_) => panic!("config should have been rejected"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

pub(super) fn find<'a>(
    config: &'a RateLimitConfig,
    domain: &str,
    entries: &[(&str, &str)],
) -> Option<Match<'a>> {
    config.domain(domain)?.find(entries)
}
