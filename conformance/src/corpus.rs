//! Finding case files: every `*.json` under a directory, in sorted order (trial names and
//! reports must not depend on the file system's listing order).
//!
//! The walk never hangs and never counts a file twice through a loop:
//! * a symbolic link to a directory is not followed (a warning says so), so `ln -s . loop`
//!   adds nothing; directories are also tracked by (device, inode), so a bind mount or a
//!   hard-linked directory loop is walked once;
//! * a `*.json` entry that is not a regular file (a FIFO, socket or device, a dangling
//!   link, a link to a directory) is skipped with a warning, so reading never blocks;
//! * a symbolic link to a regular `*.json` file is listed (under the link's path).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What [`list`] found: the case files (sorted) and what it skipped and why (sorted), for
/// the caller to print.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// Every regular `*.json` file under `dir` (see the module's rules on links and special
/// files). An unreadable directory is an error.
pub fn list(dir: &Path) -> std::io::Result<Listing> {
    let mut out = Listing::default();
    let mut visited = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Some(key) = dir_key(&d)? {
            if !visited.insert(key) {
                out.warnings.push(format!(
                    "{}: skipped: a directory already walked (a file system loop)",
                    d.display()
                ));
                continue;
            }
        }
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let p = entry.path();
            // The entry's own type: a symbolic link is reported as one, not followed.
            let t = entry.file_type()?;
            let is_json = p.extension().is_some_and(|e| e == "json");
            if t.is_dir() {
                stack.push(p);
            } else if t.is_symlink() {
                match std::fs::metadata(&p) {
                    Ok(m) if m.is_dir() => out.warnings.push(format!(
                        "{}: skipped: a symbolic link to a directory (not followed)",
                        p.display()
                    )),
                    Ok(m) if m.is_file() && is_json => out.files.push(p),
                    Ok(m) if is_json => out.warnings.push(format!(
                        "{}: skipped: a symbolic link to {}",
                        p.display(),
                        crate::load::file_kind(&m.file_type())
                    )),
                    Err(e) if is_json => out.warnings.push(format!(
                        "{}: skipped: a dangling symbolic link ({e})",
                        p.display()
                    )),
                    _ => {}
                }
            } else if is_json {
                if t.is_file() {
                    out.files.push(p);
                } else {
                    out.warnings.push(format!(
                        "{}: skipped: {}, not a regular file",
                        p.display(),
                        crate::load::file_kind(&t)
                    ));
                }
            }
        }
    }
    out.files.sort();
    out.warnings.sort();
    Ok(out)
}

/// A directory's identity (device, inode) where the platform has one.
fn dir_key(d: &Path) -> std::io::Result<Option<(u64, u64)>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(d)?;
        Ok(Some((m.dev(), m.ino())))
    }
    #[cfg(not(unix))]
    {
        let _ = d;
        Ok(None)
    }
}

/// The case files of [`list`], without its warnings.
pub fn case_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    list(dir).map(|l| l.files)
}

/// A case's name: its path under the corpus directory without the extension
/// (`seeds/cross_device_assign`).
pub fn case_name(corpus: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(corpus).unwrap_or(file);
    rel.with_extension("").to_string_lossy().replace('\\', "/")
}
