//! `config/`, the rules a default `sluice serve` loads (and the image serves): what the
//! Envoy example sends is limited by them, so pointing `examples/envoy.yaml` at a sluice
//! started with no flags works as the compose demo does.

use std::collections::BTreeMap;

use super::binary::{assert_rules_cover, load_rules, resolve};
use super::envoy::{ENVOY_YAML, envoy_bootstrap};
use super::files::{read, root};

/// The rule lines of a file: everything but comments and blank lines.
fn rules_of(rel: &str) -> Vec<String> {
    read(rel)
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_default_sluice_serve_limits_what_the_envoy_example_sends() {
    let settings = resolve(&["serve".to_owned()], &BTreeMap::new(), "sluice serve");
    // Relative paths are the working directory's: the repository root, as in the README.
    let paths: Vec<_> = settings
        .config_paths
        .iter()
        .map(|p| root().join(p))
        .collect();
    let rules = load_rules(&paths, "the bundled config");
    let boot = envoy_bootstrap();
    assert_rules_cover(
        &rules,
        &boot.domain,
        &boot.descriptors,
        &format!("{ENVOY_YAML} against a default `sluice serve`"),
    );
}

#[test]
fn bundled_demo_rules_are_the_demo_example_rules() {
    assert_eq!(
        rules_of("config/demo.yaml"),
        rules_of("examples/demo/config/demo.yaml"),
        "config/demo.yaml and examples/demo/config/demo.yaml differ (comments aside)"
    );
}
