//! `.github/workflows/release.yml`: on a version tag, the test suite runs, then the image
//! is built from the repository's Dockerfile for linux/amd64 and linux/arm64 and pushed as
//! one multi-arch manifest. The workflow is parsed here (no GitHub runner in CI); what it
//! says about the Dockerfile (its path, its context, its build arguments) is checked
//! against the Dockerfile.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::Value;

use super::files::{at, read, root, scalar, seq_at, str_at, yaml};

const WORKFLOW: &str = ".github/workflows/release.yml";

fn workflow() -> Value {
    yaml(WORKFLOW)
}

fn jobs() -> BTreeMap<String, Value> {
    at(&workflow(), "jobs")
        .as_mapping()
        .expect("jobs")
        .iter()
        .map(|(k, v)| (k.as_str().expect("job name").to_string(), v.clone()))
        .collect()
}

/// Every step of every job: (job name, step).
fn steps() -> Vec<(String, Value)> {
    jobs()
        .into_iter()
        .flat_map(|(name, job)| {
            seq_at(&job, "steps")
                .iter()
                .map(|s| (name.clone(), s.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The steps using `docker/build-push-action`, with their job.
fn build_steps() -> Vec<(String, Value)> {
    let found: Vec<_> = steps()
        .into_iter()
        .filter(|(_, s)| {
            s.get("uses")
                .and_then(Value::as_str)
                .is_some_and(|u| u.starts_with("docker/build-push-action@"))
        })
        .collect();
    assert!(!found.is_empty(), "{WORKFLOW} builds no image");
    found
}

/// `ARG NAME[=default]` lines of the Dockerfile.
fn dockerfile_args() -> BTreeMap<String, Option<String>> {
    read("Dockerfile")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ARG "))
        .map(|a| match a.trim().split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (a.trim().to_string(), None),
        })
        .collect()
}

/// `build-args` of a build step: `NAME=value` lines.
fn build_args(step: &Value) -> BTreeMap<String, String> {
    at(step, "with.build-args")
        .as_str()
        .unwrap_or("")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('=').expect("build-args line NAME=value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The platforms a build step builds, matrix values expanded.
fn platforms(job: &str, step: &Value) -> BTreeSet<String> {
    let spec = str_at(step, "with.platforms");
    if spec.contains("matrix.platform") {
        let job = &jobs()[job];
        seq_at(job, "strategy.matrix.include")
            .iter()
            .map(|i| str_at(i, "platform").to_string())
            .collect()
    } else {
        spec.split(',').map(|p| p.trim().to_string()).collect()
    }
}

#[test]
fn release_runs_on_version_tags_only() {
    let workflow = workflow();
    let on = at(&workflow, "on");
    let tags: Vec<String> = seq_at(on, "push.tags").iter().filter_map(scalar).collect();
    assert!(
        tags.iter().any(|t| t.starts_with('v')),
        "release must trigger on v* tags: {on:?}"
    );
    assert!(
        at(on, "push.branches").is_null() && at(on, "pull_request").is_null(),
        "release must not run on branches or pull requests: {on:?}"
    );
}

#[test]
fn release_builds_linux_amd64_and_arm64() {
    let all: BTreeSet<String> = build_steps()
        .iter()
        .flat_map(|(job, s)| platforms(job, s))
        .collect();
    for want in ["linux/amd64", "linux/arm64"] {
        assert!(
            all.contains(want),
            "{WORKFLOW} does not build {want}: {all:?}"
        );
    }
}

#[test]
fn release_builds_the_repository_dockerfile_with_the_repository_as_context() {
    for (_, s) in build_steps() {
        let context = str_at(&s, "with.context");
        let file = str_at(&s, "with.file");
        assert_eq!(
            context, ".",
            "the build context must be the repository root"
        );
        assert!(
            root().join(context).join(file) == root().join("Dockerfile"),
            "the workflow builds `{file}`, not the Dockerfile the tests check"
        );
    }
}

#[test]
fn release_build_args_are_dockerfile_args_with_its_defaults() {
    let declared = dockerfile_args();
    for (_, s) in build_steps() {
        for (k, v) in build_args(&s) {
            let default = declared
                .get(&k)
                .unwrap_or_else(|| panic!("build-arg {k} is not an ARG of the Dockerfile"));
            // The image CI releases is the one the Dockerfile describes by default.
            assert_eq!(
                default.as_deref(),
                Some(v.as_str()),
                "build-arg {k}={v} differs from the Dockerfile's default"
            );
        }
    }
}

#[test]
fn release_pushes_images() {
    for (_, s) in build_steps() {
        let push = at(&s, "with.push").as_bool().unwrap_or(false)
            || at(&s, "with.outputs")
                .as_str()
                .is_some_and(|o| o.contains("push=true"));
        assert!(push, "a build step does not push: {s:?}");
    }
}

/// Digest pushes are only an image once joined under a tag.
#[test]
fn release_joins_the_platform_images_into_one_tagged_manifest() {
    let by_digest = build_steps().iter().any(|(_, s)| {
        at(s, "with.outputs")
            .as_str()
            .is_some_and(|o| o.contains("push-by-digest=true"))
    });
    if !by_digest {
        return;
    }
    let joins = steps().into_iter().any(|(_, s)| {
        s.get("run")
            .and_then(Value::as_str)
            .is_some_and(|r| r.contains("imagetools create") && r.contains("-t "))
    });
    assert!(joins, "images pushed by digest are never tagged");
}

#[test]
fn release_builds_only_after_the_test_suite_passes() {
    let jobs = jobs();
    let runs_ci = |job: &Value| {
        seq_at(job, "steps").iter().any(|s| {
            s.get("run")
                .and_then(Value::as_str)
                .is_some_and(|r| r.contains(".ci/run"))
        })
    };
    for (job, _) in build_steps() {
        let needs = strings_of(at(&jobs[&job], "needs"));
        assert!(
            needs.iter().any(|n| jobs.get(n).is_some_and(runs_ci)),
            "job {job} builds the image without waiting for .ci/run"
        );
    }
}

#[test]
fn release_actions_are_pinned() {
    for (job, s) in steps() {
        if let Some(uses) = s.get("uses").and_then(Value::as_str) {
            let (_, version) = uses
                .split_once('@')
                .unwrap_or_else(|| panic!("{job}: `{uses}` has no version"));
            assert!(
                version.starts_with('v') || version.len() == 40,
                "{job}: `{uses}` must be pinned to a version or a commit"
            );
        }
    }
}

fn strings_of(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(s) => s.iter().filter_map(scalar).collect(),
        other => scalar(other).into_iter().collect(),
    }
}
