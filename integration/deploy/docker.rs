//! `Dockerfile` and `.dockerignore`: the image builds in stages, caches its dependency
//! layer, runs as a numeric non-root user and, by default, serves the config it ships on
//! the ports it exposes. The image's ENTRYPOINT and CMD are also what the compose and
//! Kubernetes tests resolve when those files do not override them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sluice::settings::Settings;

use super::binary::resolve;
use super::dockerignore::{dockerignore, dockerignore_excludes};
use super::files::{assert_pinned, read, root};

pub(super) struct Stage {
    pub base: String,
    pub name: Option<String>,
    /// (instruction, arguments) in order, continuation lines joined.
    pub instructions: Vec<(String, String)>,
}

pub(super) fn dockerfile_stages() -> Vec<Stage> {
    let text = read("Dockerfile");
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(t);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    for l in logical {
        let (ins, args) = l.split_once(char::is_whitespace).unwrap_or((&l, ""));
        let (ins, args) = (ins.to_ascii_uppercase(), args.trim().to_string());
        if ins == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let base = words
                .iter()
                .find(|w| !w.starts_with("--"))
                .expect("FROM image");
            let name = words
                .iter()
                .position(|w| w.eq_ignore_ascii_case("as"))
                .and_then(|i| words.get(i + 1));
            stages.push(Stage {
                base: base.to_string(),
                name: name.map(|n| n.to_string()),
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push((ins, args));
        }
    }
    stages
}

impl Stage {
    fn last(&self, ins: &str) -> Option<&str> {
        self.instructions
            .iter()
            .rev()
            .find(|(i, _)| i == ins)
            .map(|(_, a)| a.as_str())
    }

    /// COPY instructions: (`--from` stage, sources, destination).
    pub(super) fn copies(&self) -> Vec<(Option<String>, Vec<String>, String)> {
        self.instructions
            .iter()
            .filter(|(i, _)| i == "COPY")
            .map(|(_, a)| {
                let mut words: Vec<String> = a.split_whitespace().map(String::from).collect();
                let from = words
                    .iter()
                    .find_map(|w| w.strip_prefix("--from=").map(String::from));
                words.retain(|w| !w.starts_with("--"));
                let dest = words.pop().expect("COPY destination");
                (from, words, dest)
            })
            .collect()
    }
}

/// The runtime stage: the last one.
fn runtime_stage(stages: &[Stage]) -> &Stage {
    stages.last().expect("Dockerfile has a FROM")
}

/// An exec-form (JSON array) CMD or ENTRYPOINT.
fn exec_form(args: &str, what: &str) -> Vec<String> {
    serde_json::from_str(args)
        .unwrap_or_else(|e| panic!("Dockerfile {what} must be exec form (JSON): {e}"))
}

/// The image's default command line, after the binary: ENTRYPOINT + CMD.
pub struct Image {
    pub binary: String,
    pub cmd: Vec<String>,
    /// The runtime stage's WORKDIR: where relative paths (the default `./config`) point.
    pub workdir: PathBuf,
    exposed: Vec<u16>,
}

impl Image {
    /// `path` as the container sees it: relative ones from the WORKDIR.
    pub fn in_image(&self, path: &Path) -> PathBuf {
        self.workdir.join(path)
    }
}

pub fn image() -> Image {
    let stages = dockerfile_stages();
    let last = runtime_stage(&stages);
    let entrypoint = exec_form(last.last("ENTRYPOINT").expect("ENTRYPOINT"), "ENTRYPOINT");
    let cmd = exec_form(last.last("CMD").expect("CMD"), "CMD");
    let exposed = last
        .instructions
        .iter()
        .filter(|(i, _)| i == "EXPOSE")
        .flat_map(|(_, a)| a.split_whitespace())
        .map(|p| p.split('/').next().unwrap().parse().expect("EXPOSE port"))
        .collect();
    assert_eq!(entrypoint.len(), 1, "ENTRYPOINT is the binary alone");
    Image {
        binary: entrypoint[0].clone(),
        cmd,
        workdir: PathBuf::from(last.last("WORKDIR").unwrap_or("/")),
        exposed,
    }
}

/// What the image's default command runs with, resolved once.
fn image_settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| resolve(&image().cmd, &BTreeMap::new(), "Dockerfile CMD"))
}

/// Sources every stage copies from the build context (not `--from` another stage).
fn context_sources(stages: &[Stage]) -> Vec<String> {
    stages
        .iter()
        .flat_map(Stage::copies)
        .filter(|(from, _, _)| from.is_none())
        .flat_map(|(_, sources, _)| sources)
        .collect()
}

#[test]
fn dockerfile_is_multi_stage() {
    assert!(
        dockerfile_stages().len() >= 2,
        "the Dockerfile must be multi-stage"
    );
}

/// Kubernetes' runAsNonRoot can only verify a numeric USER.
#[test]
fn dockerfile_runtime_stage_runs_as_a_numeric_non_root_user() {
    let stages = dockerfile_stages();
    let user = runtime_stage(&stages)
        .last("USER")
        .expect("the final stage must set USER");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER `{user}` must be a numeric non-root uid"
    );
}

#[test]
fn dockerfile_runtime_stage_is_not_the_rust_build_image() {
    let stages = dockerfile_stages();
    assert!(
        !runtime_stage(&stages).base.starts_with("rust:"),
        "the final stage must not be the Rust build image"
    );
}

#[test]
fn dockerfile_runtime_base_image_is_pinned() {
    let stages = dockerfile_stages();
    assert_pinned(&runtime_stage(&stages).base, "Dockerfile runtime stage");
}

/// Cargo.lock copied and a cargo build run before the sources are copied, so source
/// edits reuse the dependency layer.
#[test]
fn dockerfile_builder_builds_dependencies_before_copying_sources() {
    let stages = dockerfile_stages();
    let builder = &stages[0];
    let position = |pred: &dyn Fn(&str, &str) -> bool| {
        builder.instructions.iter().position(|(i, a)| pred(i, a))
    };
    let lock = position(&|i, a| i == "COPY" && a.contains("Cargo.lock"));
    let deps = position(&|i, a| i == "RUN" && a.contains("cargo build"));
    let sources = position(&|i, a| i == "COPY" && a.split_whitespace().any(|w| w == "src"));
    assert!(
        matches!((lock, deps, sources), (Some(l), Some(d), Some(s)) if l < d && d < s),
        "the builder must build the dependencies before it copies src/"
    );
}

#[test]
fn dockerfile_entrypoint_is_the_binary_copied_from_a_builder_stage() {
    let stages = dockerfile_stages();
    let last = runtime_stage(&stages);
    let builders: BTreeSet<&str> = stages[..stages.len() - 1]
        .iter()
        .filter_map(|s| s.name.as_deref())
        .collect();
    let img = image();
    let copies = last.copies();
    assert!(
        copies.iter().any(
            |(from, _, dest)| from.as_deref().is_some_and(|f| builders.contains(f))
                && *dest == img.binary
        ),
        "the final stage must copy {} from a builder stage",
        img.binary
    );
}

#[test]
fn dockerfile_cmd_serves_the_config_the_image_copies() {
    let stages = dockerfile_stages();
    let copies = runtime_stage(&stages).copies();
    let img = image();
    for p in &image_settings().config_paths {
        let p = img.in_image(p);
        let p = p.to_str().unwrap();
        assert!(
            copies
                .iter()
                .any(|(_, _, dest)| dest.trim_end_matches('/') == p),
            "CMD serves {p}, which the final stage does not COPY"
        );
    }
}

/// A manifest of envoyproxy/ratelimit's sets `RUNTIME_*` and keeps the image's arguments
/// (or, in their compose files, says `command: /bin/ratelimit`): the rules it names are
/// served, not the bundled ones.
#[test]
fn the_image_arguments_leave_the_rule_directory_to_their_runtime_variables() {
    let env = BTreeMap::from([
        ("RUNTIME_ROOT".to_owned(), "/data".to_owned()),
        ("RUNTIME_SUBDIRECTORY".to_owned(), "ratelimit".to_owned()),
    ]);
    let theirs = [PathBuf::from("/data/ratelimit/config")];
    let img = image();
    assert_eq!(
        resolve(&img.cmd, &env, "CMD with RUNTIME_*").config_paths,
        theirs
    );
    let compose = ["/bin/ratelimit".to_owned()];
    assert_eq!(
        resolve(&compose, &env, "command: /bin/ratelimit").config_paths,
        theirs
    );
}

#[test]
fn dockerfile_exposes_the_http_and_grpc_ports_cmd_serves() {
    let settings = image_settings();
    let img = image();
    for (port, what) in [
        (settings.http_addr.port(), "HTTP"),
        (settings.grpc_addr.port(), "gRPC"),
    ] {
        assert!(
            img.exposed.contains(&port),
            "EXPOSE lacks the {what} port {port}"
        );
    }
}

#[test]
fn dockerignore_excludes_target() {
    assert!(
        dockerignore_excludes(&dockerignore(), "target"),
        ".dockerignore must exclude target/"
    );
}

#[test]
fn dockerfile_copies_only_files_that_exist() {
    for s in context_sources(&dockerfile_stages()) {
        assert!(root().join(&s).exists(), "Dockerfile copies missing `{s}`");
    }
}

#[test]
fn dockerfile_copies_nothing_dockerignore_excludes() {
    let ignore = dockerignore();
    for s in context_sources(&dockerfile_stages()) {
        assert!(
            !dockerignore_excludes(&ignore, &s),
            "Dockerfile copies `{s}`, which .dockerignore excludes"
        );
    }
}
