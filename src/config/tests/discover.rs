//! `discover`: recursion, dot entries, symlinks, ConfigMap layouts, errors.

use std::fs;
use std::path::{Path, PathBuf};

use crate::config::{DEFAULT_MAX_FILE_BYTES as MAX, LoadOptions, RateLimitConfig, discover};

fn write(path: &Path, content: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
    }
    fs::write(path, content).unwrap_or_else(|e| panic!("{path:?}: {e}"));
}

fn domain(name: &str) -> String {
    format!(
        "domain: {name}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
    )
}

fn names(paths: &[PathBuf]) -> Vec<String> {
    match discover(paths, MAX) {
        Ok(files) => files.into_iter().map(|f| f.name).collect(),
        Err(e) => panic!("{e:?}"),
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

#[test]
fn recursive_sorted_and_filtered() {
    let dir = tempdir();
    let root = dir.path();
    write(&root.join("b.yaml"), &domain("b"));
    write(&root.join("a.yml"), &domain("a"));
    write(&root.join("C.YAML"), &domain("c"));
    write(&root.join("sub/x.yaml"), &domain("x"));
    write(&root.join("sub/deeper/y.yaml"), &domain("y"));
    write(&root.join("notes.txt"), "not yaml");
    write(&root.join(".hidden.yaml"), &domain("hidden"));
    write(&root.join(".git/config.yaml"), &domain("git"));
    write(&root.join("sub/.tmp/z.yaml"), &domain("z"));
    assert_eq!(
        names(&[root.to_path_buf()]),
        [
            "C.YAML",
            "a.yml",
            "b.yaml",
            "sub/deeper/y.yaml",
            "sub/x.yaml"
        ]
    );
    // A file given directly is named by its file name, whatever its extension.
    assert_eq!(
        names(&[root.join("sub/x.yaml"), root.join("notes.txt")]),
        ["x.yaml", "notes.txt"]
    );
    let files = discover(&[root.to_path_buf()], MAX).unwrap_or_default();
    assert_eq!(files[4].path, root.join("sub/x.yaml"));
    assert_eq!(files[4].content, domain("x"));
}

#[cfg(unix)]
#[test]
fn configmap_layout_loads_each_file_once() {
    use std::os::unix::fs::symlink;
    let dir = tempdir();
    let root = dir.path();
    write(
        &root.join("..2024_01_01_00_00_00.123/basic.yaml"),
        &domain("basic"),
    );
    write(
        &root.join("..2024_01_01_00_00_00.123/another.yaml"),
        &domain("another"),
    );
    symlink("..2024_01_01_00_00_00.123", root.join("..data")).unwrap_or_else(|e| panic!("{e}"));
    symlink("..data/basic.yaml", root.join("basic.yaml")).unwrap_or_else(|e| panic!("{e}"));
    symlink("..data/another.yaml", root.join("another.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&[root.to_path_buf()]), ["another.yaml", "basic.yaml"]);
    let loaded = RateLimitConfig::load(&[root.to_path_buf()], &LoadOptions::default());
    assert!(loaded.is_ok_and(|c| c.domain_count() == 2));
}

#[cfg(unix)]
#[test]
fn symlinks_are_followed_without_looping_or_reading_twice() {
    use std::os::unix::fs::symlink;
    let dir = tempdir();
    let root = dir.path();
    write(&root.join("real/a.yaml"), &domain("a"));
    symlink("real", root.join("linked")).unwrap_or_else(|e| panic!("{e}"));
    symlink("..", root.join("real/up")).unwrap_or_else(|e| panic!("{e}"));
    // One real file reached as real/a.yaml and linked/a.yaml: read once.
    assert_eq!(names(&[root.to_path_buf()]), ["linked/a.yaml"]);
    // The same file given twice is read once too.
    assert_eq!(
        names(&[root.join("real/a.yaml"), root.join("real/a.yaml")]),
        ["a.yaml"]
    );
    // A dangling link named like a rule file is an error naming it.
    symlink("missing.yaml", root.join("dangling.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let errors = discover(&[root.to_path_buf()], MAX)
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.contains("dangling.yaml"), "{}", errors[0]);
}

#[test]
fn missing_and_unreadable_paths() {
    let dir = tempdir();
    let missing = dir.path().join("nope");
    let errors = discover(std::slice::from_ref(&missing), MAX)
        .err()
        .unwrap_or_default();
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].to_string(),
        format!("config path '{}' does not exist", missing.display())
    );
    assert_eq!(errors[0].path.as_deref(), Some(missing.as_path()));
    // Non-UTF-8 content is reported, not loaded.
    let bad = dir.path().join("bad.yaml");
    fs::write(&bad, [0xff, 0xfe, b'a']).unwrap_or_else(|e| panic!("{e}"));
    let errors = discover(std::slice::from_ref(&bad), MAX)
        .err()
        .unwrap_or_default();
    assert_eq!(
        errors[0].to_string(),
        format!("config file '{}' is not valid UTF-8", bad.display())
    );
    // An empty directory is an empty config.
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap_or_else(|e| panic!("{e}"));
    assert!(names(&[empty]).is_empty());
}

/// Runs `discover` on a thread: a read that blocks fails the test instead of hanging it.
fn discover_within(paths: Vec<PathBuf>, max: u64) -> Result<Vec<String>, Vec<String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = discover(&paths, max)
            .map(|files| files.into_iter().map(|f| f.name).collect())
            .map_err(|es| es.into_iter().map(|e| e.message).collect());
        let _ = tx.send(r);
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("discover blocked"))
}

#[test]
fn only_regular_files_are_read() {
    let dir = tempdir();
    let root = dir.path();
    write(&root.join("good.yaml"), &domain("good"));
    let fifo = root.join("x.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    symlink_or_panic("/dev/zero", &root.join("z.yaml"));
    let _socket = std::os::unix::net::UnixListener::bind(root.join("s.yaml"))
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let errors = discover_within(vec![root.to_path_buf()], MAX).expect_err("special files");
    let want = [
        ("s.yaml", "is a socket, not a regular file"),
        ("x.yaml", "is a FIFO, not a regular file"),
        ("z.yaml", "is a character device, not a regular file"),
    ];
    assert_eq!(errors.len(), want.len(), "{errors:?}");
    for (e, (name, what)) in errors.iter().zip(want) {
        assert!(e.contains(name) && e.contains(what), "{e}");
    }
    // Given directly, too (`sluice check x.yaml`).
    let errors = discover_within(vec![fifo], MAX).expect_err("fifo");
    assert!(errors[0].contains("is a FIFO"), "{errors:?}");
}

#[test]
fn files_over_the_cap_are_errors() {
    let dir = tempdir();
    let root = dir.path();
    let content = domain("a");
    write(&root.join("a.yaml"), &content);
    let n = content.len() as u64;
    assert_eq!(
        discover_within(vec![root.to_path_buf()], n),
        Ok(vec!["a.yaml".into()])
    );
    let errors = discover_within(vec![root.to_path_buf()], n - 1).expect_err("over the cap");
    assert_eq!(
        errors,
        [format!(
            "config file '{}' is {n} bytes, over the limit of {} bytes (--max-config-file-bytes)",
            root.join("a.yaml").display(),
            n - 1
        )]
    );
}

fn symlink_or_panic(target: &str, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap_or_else(|e| panic!("symlink: {e}"));
}

#[test]
fn the_fingerprint_changes_with_the_rule_files_only() {
    use crate::config::fingerprint;
    let dir = tempdir();
    let root = dir.path();
    write(&root.join("a.yaml"), &domain("a"));
    let paths = [root.to_path_buf()];
    let before = fingerprint(&paths);
    assert_eq!(fingerprint(&paths), before, "nothing changed");
    // What discovery skips does not count.
    write(&root.join("notes.txt"), "x");
    write(&root.join(".hidden/h.yaml"), &domain("h"));
    fs::create_dir_all(root.join("empty")).unwrap();
    assert_eq!(fingerprint(&paths), before);
    // A rule file in a new directory does.
    write(&root.join("new/b.yaml"), &domain("b"));
    let with_b = fingerprint(&paths);
    assert_ne!(with_b, before);
    // So does an edit (the size here; the times on any write), and a deletion.
    write(&root.join("a.yaml"), &domain("a-longer"));
    assert_ne!(fingerprint(&paths), with_b);
    fs::remove_file(root.join("new/b.yaml")).unwrap();
    fs::remove_file(root.join("a.yaml")).unwrap();
    let gone = fingerprint(&paths);
    assert_ne!(gone, before);
    // A missing path is a state of its own, and its appearance a change.
    let file = [root.join("later.yaml")];
    let missing = fingerprint(&file);
    assert_eq!(fingerprint(&file), missing);
    write(&root.join("later.yaml"), &domain("l"));
    assert_ne!(fingerprint(&file), missing);
}
