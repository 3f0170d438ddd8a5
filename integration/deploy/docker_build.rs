//! The image builds: the Docker build context is rebuilt without Docker and the builder
//! stage's own commands run in it. A target, file or ignore rule that would stop
//! `docker build` stops this test.
//!
//! The context is what `docker build` sends: each file a builder-stage COPY names, minus
//! what `.dockerignore` excludes (Docker's matching, `dockerignore.rs`). The instructions
//! then run in order in a directory standing for `/` (WORKDIR, COPY destinations and
//! absolute paths map below it), with two substitutions, both written out here:
//! - `cargo build` runs as `cargo check` with the same arguments but `--release` (`--locked`
//!   stays as the Dockerfile writes it): the same manifest, lock file and targets, every
//!   crate type-checked, no code generation (a release build here would take ten minutes),
//!   in the dev profile so the dependencies clippy has already checked are reused. Cargo may
//!   reach the registry, as it does inside `docker build`: it fetches only what this
//!   platform's build of the context needs, which the suite's own build has fetched already
//!   on any machine. (Forcing cargo's no-network mode here once broke a new machine: cargo
//!   then needs every platform's crates in the local cache, and a new machine's cache holds
//!   only what its own build fetched.)
//! - `cp target/<profile>/<bin> <path>` installs the binary this test suite built at
//!   `<path>`, so a later `RUN sluice check config` runs the real binary on the copied rules.
//!
//! Any other command runs with `sh` in WORKDIR and must not name an absolute path (the test
//! refuses rather than touch this machine). Whatever the runtime stage copies from the
//! builder must exist afterwards.
//!
//! Cost: the context is rebuilt in `target/docker-context/` on every run, and cargo checks
//! into the suite's own `target/`, where `scripts/test.sh`'s clippy run has checked the
//! dependencies: only the few whose features differ without the dev-dependencies, and the
//! copied sluice crate (twice: stub, then real sources), are checked here: about a minute on
//! two cores, under ten seconds when nothing changed. (A separate target directory costs a
//! full check of every dependency on a clean CI machine: over ten minutes on two busy
//! cores.) Cargo sees the environment a shell would give it, not the test's, so build
//! scripts that watch variables do not rebuild the shared dependencies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::docker::{Stage, dockerfile_stages};
use super::dockerignore::{dockerignore, dockerignore_excludes};
use super::files::root;

/// The directory standing for `/` while the builder runs, and cargo's target directory.
fn scratch() -> (PathBuf, PathBuf) {
    // The test binary's target directory: <target>/debug/sluice.
    let bin = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let target = bin
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .to_path_buf();
    (target.join("docker-context"), target)
}

/// `path` (absolute, or relative to `workdir`, both container paths) under `fs_root`.
fn host(fs_root: &Path, workdir: &str, path: &str) -> PathBuf {
    let abs = if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        Path::new(workdir).join(path)
    };
    let mut out = fs_root.to_path_buf();
    for c in abs.components() {
        match c {
            std::path::Component::Normal(n) => out.push(n),
            std::path::Component::ParentDir => panic!("`..` in Dockerfile path {path}"),
            _ => {}
        }
    }
    out
}

/// Copy one file, keeping its modification time (as COPY does), so cargo sees the same
/// freshness it would see in the image.
fn copy_file(from: &Path, to: &Path) {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    let modified = std::fs::metadata(from).and_then(|m| m.modified()).unwrap();
    let f = std::fs::File::options().write(true).open(to).unwrap();
    f.set_modified(modified).unwrap();
}

/// Every file under `rel` (a context path) that `.dockerignore` lets into the context.
fn context_files(rel: &str, ignore: &[String]) -> Vec<String> {
    let abs = root().join(rel);
    if dockerignore_excludes(ignore, rel) {
        return Vec::new();
    }
    if !abs.is_dir() {
        assert!(abs.exists(), "COPY source `{rel}` is not in the repository");
        return vec![rel.to_string()];
    }
    let mut entries: Vec<_> = std::fs::read_dir(&abs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    entries
        .into_iter()
        .flat_map(|name| context_files(&format!("{rel}/{name}"), ignore))
        .collect()
}

/// COPY from the build context, as Docker does: a directory source copies its contents
/// into the destination; a file goes into a destination ending in `/`, else becomes it.
fn copy_from_context(sources: &[String], dest: &str, fs_root: &Path, workdir: &str) {
    let ignore = dockerignore();
    let dest_host = host(fs_root, workdir, dest);
    let into_dir = dest.ends_with('/') || sources.len() > 1;
    for src in sources {
        assert!(
            !src.contains(['*', '?']),
            "COPY source `{src}` is a wildcard; teach this test"
        );
        let src = src.trim_start_matches("./").trim_end_matches('/');
        let is_dir = root().join(src).is_dir();
        let files = context_files(src, &ignore);
        assert!(
            !files.is_empty() || is_dir,
            "COPY {src}: .dockerignore excludes it, so `docker build` fails here"
        );
        for f in files {
            let to = if is_dir {
                dest_host.join(Path::new(&f).strip_prefix(src).unwrap())
            } else if into_dir {
                dest_host.join(Path::new(&f).file_name().unwrap())
            } else {
                dest_host.clone()
            };
            copy_file(&root().join(&f), &to);
        }
    }
}

/// What running the builder left behind.
struct Builder {
    fs_root: PathBuf,
    target_dir: PathBuf,
    workdir: String,
    env: BTreeMap<String, String>,
    /// Container path → binary that stands for it.
    installed: BTreeMap<String, PathBuf>,
    /// `--bin` targets cargo has been asked to build.
    bins: Vec<String>,
}

impl Builder {
    fn path_var(&self) -> String {
        let mut dirs: Vec<String> = self
            .installed
            .keys()
            .filter_map(|p| Path::new(p).parent())
            .map(|d| {
                host(&self.fs_root, "/", d.to_str().unwrap())
                    .display()
                    .to_string()
            })
            .collect();
        dirs.push(std::env::var("PATH").unwrap_or_default());
        dirs.join(":")
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        let cwd = host(&self.fs_root, "/", &self.workdir);
        std::fs::create_dir_all(&cwd).unwrap();
        // The environment of a cargo run from a shell, as scripts/test.sh runs clippy:
        // without the variables `cargo test` gives this process. Build scripts watch some
        // of them (ring: CARGO_MANIFEST_DIR), and a difference would rebuild the shared
        // dependencies here and again in the next clippy run.
        for (k, _) in std::env::vars_os() {
            if k.to_str()
                .is_some_and(|k| k.starts_with("CARGO") && k != "CARGO_HOME")
            {
                cmd.env_remove(k);
            }
        }
        cmd.current_dir(cwd)
            .envs(&self.env)
            .env("PATH", self.path_var())
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env_remove("RUSTFLAGS");
        cmd
    }

    fn run(&self, mut cmd: Command, what: &str) {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
        assert!(
            out.status.success(),
            "`{what}` fails in the Docker build context ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn cargo(&mut self, words: &[&str], original: &str) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut args: Vec<String> = words[1..].iter().map(|w| w.to_string()).collect();
        if args.first().map(String::as_str) == Some("build") {
            args[0] = "check".into();
            // The dev profile, to reuse the dependencies clippy has checked (see above).
            args.retain(|a| a != "--release");
        }
        for pair in args.windows(2) {
            if pair[0] == "--bin" {
                self.bins.push(pair[1].clone());
            }
        }
        let mut cmd = self.command(&cargo);
        cmd.args(&args);
        self.run(
            cmd,
            &format!("{original} (run as: cargo {})", args.join(" ")),
        );
    }

    /// `cp target/<profile>/<bin> <dest>`: install the binary the suite built.
    fn install(&mut self, src: &str, dest: &str) {
        let name = Path::new(src).file_name().unwrap().to_str().unwrap();
        assert!(
            self.bins.iter().any(|b| b == name),
            "the Dockerfile copies {src}, which no earlier `cargo build --bin {name}` makes"
        );
        assert_eq!(
            name, "sluice",
            "only the sluice binary is built by this suite"
        );
        let dest_host = host(&self.fs_root, &self.workdir, dest);
        std::fs::create_dir_all(dest_host.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), &dest_host).unwrap();
        let abs = Path::new(&self.workdir).join(dest);
        self.installed
            .insert(abs.display().to_string(), dest_host.clone());
    }

    fn shell(&mut self, line: &str) {
        let command = line.trim();
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            ["cargo", ..] => {
                assert!(
                    !command.contains(['\'', '"', '$']),
                    "cargo command `{command}` uses quoting or variables; teach this test"
                );
                self.cargo(&words, command);
            }
            ["cp", src, dest] if src.starts_with("target/") => self.install(src, dest),
            _ => {
                assert!(
                    !words.iter().any(|w| w.starts_with('/')),
                    "`{command}` names an absolute path; teach this test what it means"
                );
                let mut cmd = self.command("sh");
                cmd.args(["-euc", command]);
                self.run(cmd, command);
            }
        }
    }

    fn stage(&mut self, stage: &Stage) {
        for (ins, args) in &stage.instructions {
            match ins.as_str() {
                "WORKDIR" => {
                    self.workdir = Path::new(&self.workdir)
                        .join(args.trim())
                        .display()
                        .to_string();
                }
                "ARG" | "LABEL" | "EXPOSE" | "USER" | "ENTRYPOINT" | "CMD" => {}
                "ENV" => {
                    let (k, v) = args
                        .split_once(['=', ' '])
                        .unwrap_or_else(|| panic!("ENV {args}"));
                    self.env.insert(k.trim().into(), v.trim().into());
                }
                "COPY" => {
                    let mut words: Vec<String> =
                        args.split_whitespace().map(String::from).collect();
                    assert!(
                        !words.iter().any(|w| w.starts_with("--from")),
                        "a builder stage copies from another stage; teach this test"
                    );
                    words.retain(|w| !w.starts_with("--"));
                    let dest = words.pop().expect("COPY destination");
                    copy_from_context(&words, &dest, &self.fs_root, &self.workdir);
                }
                "RUN" => {
                    assert!(
                        !args.trim_start().starts_with("--") && !args.contains(['|', ';']),
                        "RUN {args}: flags, pipes or `;` need teaching this test"
                    );
                    for part in args.split("&&") {
                        self.shell(part);
                    }
                }
                other => panic!("Dockerfile instruction {other} is new to this test; teach it"),
            }
        }
    }
}

#[test]
fn dockerfile_builder_commands_succeed_in_the_build_context() {
    let stages = dockerfile_stages();
    let (fs_root, target_dir) = scratch();
    if fs_root.exists() {
        std::fs::remove_dir_all(&fs_root).unwrap();
    }
    std::fs::create_dir_all(&fs_root).unwrap();
    let mut b = Builder {
        fs_root: fs_root.clone(),
        target_dir,
        workdir: "/".into(),
        env: BTreeMap::new(),
        installed: BTreeMap::new(),
        bins: Vec::new(),
    };
    let (runtime, builders) = stages.split_last().expect("stages");
    for stage in builders {
        b.workdir = "/".into();
        b.stage(stage);
    }
    // What the runtime stage takes from the builder must be there.
    for (from, sources, _) in runtime.copies() {
        if from.is_none() {
            continue;
        }
        for src in sources {
            assert!(
                b.installed.contains_key(&src) || host(&fs_root, "/", &src).exists(),
                "the runtime stage copies {src}, which the builder did not produce"
            );
        }
    }
}
