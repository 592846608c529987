//! The corpus walk and `read_case` against hostile file systems: symbolic link loops,
//! FIFOs and other special files named `*.json`, dangling links, oversized files.

use std::path::Path;
use std::time::{Duration, Instant};

use uopkit_conformance::corpus::{case_files, list};
use uopkit_conformance::load::{read_case, MAX_CASE_BYTES};

const CASE: &str = r#"{"format":"uopkit-case/1","description":"x","graph":[{"id":0,"op":"CONST","dtype":"int32","arg":1}],"outputs":[{"name":"o","node":0,"shape":[],"expect":[1]}]}"#;

fn write(p: &Path) {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, CASE).unwrap();
}

#[cfg(unix)]
fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "mkfifo {} failed", p.display());
}

#[cfg(unix)]
#[test]
fn symlink_loops_fifos_and_dangling_links() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("a.json"));
    write(&root.join("sub/b.json"));
    write(&root.join("sub/deeper/c.json"));
    std::fs::write(root.join("notes.txt"), "not a case").unwrap();
    // Two loops: each used to multiply the listing; together they made `check` hang.
    symlink(".", root.join("loop")).unwrap();
    symlink("..", root.join("sub/up")).unwrap();
    // A link to a directory elsewhere is not followed either.
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("x.json"));
    symlink(outside.path(), root.join("elsewhere")).unwrap();
    // A FIFO named like a case would block a reader forever.
    mkfifo(&root.join("fifo.json"));
    symlink("fifo.json", root.join("link_to_fifo.json")).unwrap();
    symlink("does-not-exist.json", root.join("dangling.json")).unwrap();
    // A link to a regular case file is a case.
    symlink("a.json", root.join("alias.json")).unwrap();
    // A directory named *.json is walked, not read.
    write(&root.join("dir.json/d.json"));

    let start = Instant::now();
    let l = list(root).unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    let rel: Vec<String> = l
        .files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        rel,
        [
            "a.json",
            "alias.json",
            "dir.json/d.json",
            "sub/b.json",
            "sub/deeper/c.json"
        ]
    );
    let w = l.warnings.join("\n");
    assert_eq!(l.warnings.len(), 6, "{w}");
    for text in [
        "loop: skipped: a symbolic link to a directory",
        "up: skipped: a symbolic link to a directory",
        "elsewhere: skipped: a symbolic link to a directory (not followed)",
        "fifo.json: skipped: a FIFO",
        "link_to_fifo.json: skipped: a symbolic link to a FIFO",
        "dangling.json: skipped: a dangling symbolic link",
    ] {
        assert!(w.contains(text), "missing '{text}' in:\n{w}");
    }
    // The wrapper lists the same files.
    assert_eq!(case_files(root).unwrap(), l.files);
    // Sorted, and the same every time.
    assert_eq!(list(root).unwrap(), l);

    // read_case refuses the FIFO (and a link to it) at once instead of blocking.
    for name in ["fifo.json", "link_to_fifo.json"] {
        let start = Instant::now();
        let e = read_case(&root.join(name)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(e.to_string().contains("not a regular file (a FIFO)"), "{e}");
        assert!(e.file.is_some());
    }
    let e = read_case(&root.join("dir.json")).unwrap_err();
    assert!(
        e.to_string().contains("not a regular file (a directory)"),
        "{e}"
    );
    read_case(&root.join("alias.json")).expect("a link to a case reads");
}

#[test]
fn oversized_case_files_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("huge.json");
    // A sparse file: nothing is written, its length is one byte over the limit.
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(MAX_CASE_BYTES + 1).unwrap();
    let e = read_case(&p).unwrap_err();
    assert!(
        e.to_string().contains("over the limit of 268435456 bytes"),
        "{e}"
    );
    // At the limit is fine as far as size goes (it fails to parse: it is all zero bytes).
    f.set_len(16).unwrap();
    let e = read_case(&p).unwrap_err();
    assert!(!e.to_string().contains("over the limit"), "{e}");
}

#[test]
fn walking_a_missing_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(list(&dir.path().join("missing")).is_err());
}
