//! Finding case files: every `*.json` under a directory, in sorted order (trial names and
//! reports must not depend on the file system's listing order).

use std::path::{Path, PathBuf};

pub fn case_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A case's name: its path under the corpus directory without the extension
/// (`seeds/cross_device_assign`).
pub fn case_name(corpus: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(corpus).unwrap_or(file);
    rel.with_extension("").to_string_lossy().replace('\\', "/")
}
