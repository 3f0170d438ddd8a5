//! Finding rule files: explicit files as given, directories searched recursively for
//! `*.yaml`/`*.yml`.
//!
//! Names starting with `.` are skipped at every depth. That is what makes Kubernetes
//! ConfigMap mounts load each file once: the real files sit in `..2024_…/`, reached again
//! through the `..data` symlink, and the visible `x.yaml` entries are symlinks into it.
//! Symlinks are followed (a ConfigMap is nothing but symlinks); a directory already on the
//! current path is not entered twice, and one real file reached by two names is read once.
//!
//! Only regular files are read. A FIFO, device or socket named `x.yaml` (or a symlink to
//! one, e.g. to `/dev/zero`) is an error and is never opened: opening a FIFO blocks until a
//! writer comes, reading a device may never end, and opening some devices has effects. The
//! file is opened non-blocking and checked again on the open descriptor (it may have been
//! swapped since), and at most `max_file_bytes` are read: a bigger file is an error.
//!
//! [`fingerprint`] walks the same way without reading anything: which rule files there are
//! and each one's metadata, so a caller (`reload`) can tell whether the tree changed since
//! it was loaded, without relying on file events alone.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{ConfigError, ConfigFile};

/// Largest rule file read by default (`--max-config-file-bytes`): far above any real rule
/// file, far below what would hurt the process.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 << 20;

/// Read every rule file under `paths` (files, or directories searched recursively for
/// `*.yaml`/`*.yml`, skipping dot-files and dot-directories), in a stable order. Files over
/// `max_file_bytes` and anything but regular files are errors.
pub fn discover(
    paths: &[PathBuf],
    max_file_bytes: u64,
) -> Result<Vec<ConfigFile>, Vec<ConfigError>> {
    let mut found = Found {
        max_file_bytes,
        ..Found::default()
    };
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

/// What [`discover`] would find under `paths`, without reading any file: each rule file's
/// path with its metadata (size, times, inode), or the absence of a path. Equal
/// fingerprints mean the same files with the same metadata, so almost surely the same
/// rules; a write shows up in the times and the size, a swapped symlink in the inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(Vec<(PathBuf, Option<Stamp>)>);

/// A file's identity and last change, as its metadata tells them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    changed: (i64, i64),
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            changed: (meta.ctime(), meta.ctime_nsec()),
            #[cfg(unix)]
            inode: (meta.dev(), meta.ino()),
        }
    }
}

/// See [`Fingerprint`]. Follows the rules of [`discover`] (dot-entries skipped, symlinks
/// followed, a directory loop entered once); errors are part of the result, not reported.
pub fn fingerprint(paths: &[PathBuf]) -> Fingerprint {
    let mut found = Found::default();
    let mut out = Vec::new();
    for root in paths {
        match fs::metadata(root) {
            Ok(meta) if meta.is_dir() => {
                let mut rel = Vec::new();
                found.walk(root, Path::new(""), &mut rel, &mut Vec::new());
                rel.sort();
                for r in rel {
                    let path = root.join(r);
                    let stamp = fs::metadata(&path).ok().map(|m| Stamp::of(&m));
                    out.push((path, stamp));
                }
            }
            meta => out.push((root.clone(), meta.ok().map(|m| Stamp::of(&m)))),
        }
    }
    Fingerprint(out)
}

#[derive(Default)]
struct Found {
    max_file_bytes: u64,
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
        match read_rule_file(&path, self.max_file_bytes) {
            Ok(content) => self.files.push(ConfigFile {
                name,
                path,
                content,
            }),
            Err(e) => self.errors.push(e),
        }
    }
}

/// What a path that is not a regular file is, for the error message.
fn kind(meta: &fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        } else if t.is_char_device() {
            return "a character device";
        } else if t.is_block_device() {
            return "a block device";
        } else if t.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// Open for reading without waiting for anything (a FIFO's writer, a terminal).
#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<fs::File> {
    fs::File::open(path)
}

/// The content of one rule file, or the error saying why it cannot be read.
fn read_rule_file(path: &Path, max: u64) -> Result<String, ConfigError> {
    let shown = path.display();
    let at = |message| ConfigError::for_path(path, message);
    let not_regular = |meta: &fs::Metadata| {
        at(format!(
            "config file '{shown}' is {}, not a regular file: only regular files (or symlinks to them) are read",
            kind(meta)
        ))
    };
    let too_big = |size: Option<u64>| {
        let size = size.map(|n| format!("{n} bytes, ")).unwrap_or_default();
        at(format!(
            "config file '{shown}' is {size}over the limit of {max} bytes (--max-config-file-bytes)"
        ))
    };
    let cannot = |e: io::Error| at(format!("cannot read config file '{shown}': {e}"));
    // Decided before opening: opening a FIFO blocks, opening a device can act.
    let meta = fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    if meta.len() > max {
        return Err(too_big(Some(meta.len())));
    }
    // Checked again on the descriptor: the path may have been swapped for a FIFO or a
    // device in between.
    let file = open_nonblocking(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    // A file growing while it is read stops one byte past the cap.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > max {
        return Err(too_big(None));
    }
    String::from_utf8(bytes).map_err(|_| at(format!("config file '{shown}' is not valid UTF-8")))
}
