//! Finding rule files: explicit files as given, directories searched recursively for
//! `*.yaml`/`*.yml`.
//!
//! Names starting with `.` are skipped at every depth. That is what makes Kubernetes
//! ConfigMap mounts load each file once: the real files sit in `..2024_…/`, reached again
//! through the `..data` symlink, and the visible `x.yaml` entries are symlinks into it.
//! Symlinks are followed (a ConfigMap is nothing but symlinks); a directory already on the
//! current path is not entered twice, and one real file reached by two names is read once.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{ConfigError, ConfigFile};

/// Read every rule file under `paths` (files, or directories searched recursively for
/// `*.yaml`/`*.yml`, skipping dot-files and dot-directories), in a stable order.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<ConfigFile>, Vec<ConfigError>> {
    let mut found = Found::default();
    for root in paths {
        match fs::metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                found.errors.push(ConfigError::for_path(
                    root,
                    format!("config path '{}' does not exist", root.display()),
                ))
            }
            Err(e) => found.errors.push(ConfigError::for_path(
                root,
                format!("cannot read config path '{}': {e}", root.display()),
            )),
            Ok(meta) if meta.is_dir() => {
                let mut rel = Vec::new();
                let mut stack = Vec::new();
                found.walk(root, Path::new(""), &mut rel, &mut stack);
                rel.sort();
                for r in rel {
                    found.read(root.join(&r), display_name(&r));
                }
            }
            Ok(_) => {
                let name = root.file_name().map_or_else(
                    || root.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                found.read(root.clone(), name);
            }
        }
    }
    if found.errors.is_empty() {
        Ok(found.files)
    } else {
        Err(found.errors)
    }
}

#[derive(Default)]
struct Found {
    files: Vec<ConfigFile>,
    errors: Vec<ConfigError>,
    /// Canonical paths already read.
    seen: HashSet<PathBuf>,
}

/// `sub/x.yaml` on every platform.
fn display_name(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn is_rule_file(name: &Path) -> bool {
    name.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

impl Found {
    /// Collect rule files under `dir` as paths relative to the root. `stack` holds the
    /// canonical directories being walked, so a symlink loop is entered only once.
    fn walk(&mut self, dir: &Path, rel: &Path, out: &mut Vec<PathBuf>, stack: &mut Vec<PathBuf>) {
        let canonical = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        if stack.contains(&canonical) {
            return;
        }
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                let msg = format!("cannot read config directory '{}': {e}", dir.display());
                self.errors.push(ConfigError::for_path(dir, msg));
                return;
            }
        };
        stack.push(canonical);
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    let msg = format!("cannot read config directory '{}': {e}", dir.display());
                    self.errors.push(ConfigError::for_path(dir, msg));
                    continue;
                }
            };
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let rel = rel.join(&name);
            match fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => self.walk(&path, &rel, out, stack),
                Ok(_) if is_rule_file(&rel) => out.push(rel),
                Ok(_) => {}
                // A dangling symlink only matters if it claims to be a rule file.
                Err(e) if is_rule_file(&rel) => {
                    let msg = format!("cannot read config file '{}': {e}", path.display());
                    self.errors.push(ConfigError::for_path(&path, msg));
                }
                Err(_) => {}
            }
        }
        stack.pop();
    }

    fn read(&mut self, path: PathBuf, name: String) {
        if let Ok(canonical) = fs::canonicalize(&path)
            && !self.seen.insert(canonical)
        {
            return;
        }
        match fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(content) => self.files.push(ConfigFile {
                    name,
                    path,
                    content,
                }),
                Err(_) => {
                    let msg = format!("config file '{}' is not valid UTF-8", path.display());
                    self.errors.push(ConfigError::for_path(&path, msg));
                }
            },
            Err(e) => {
                let msg = format!("cannot read config file '{}': {e}", path.display());
                self.errors.push(ConfigError::for_path(&path, msg));
            }
        }
    }
}
