//! The cache directory: which one, its ownership and mode, uopkit's own files in it, and
//! their inspection and removal.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::entry::{check_entry, Kind};
use super::SetupError;
use crate::runtime::{Error, Result};

/// The effective user id.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The cache directory and whether it was given by `UOPKIT_CACHE_DIR`, from `var`.
pub(super) fn cache_dir_from(var: impl Fn(&str) -> Option<OsString>) -> (PathBuf, bool) {
    let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = set("UOPKIT_CACHE_DIR") {
        return (d, true);
    }
    // XDG: a relative XDG_CACHE_HOME is to be ignored.
    if let Some(x) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return (x.join("uopkit"), false);
    }
    if let Some(h) = set("HOME").filter(|p| p.is_absolute()) {
        return (h.join(".cache").join("uopkit"), false);
    }
    (
        std::env::temp_dir().join(format!("uopkit-{}", euid())),
        false,
    )
}

/// The cache directory the environment names: `UOPKIT_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/uopkit`, else `~/.cache/uopkit`, else `<temp dir>/uopkit-<uid>`. A
/// default directory that exists and belongs to another user is an
/// [`Error::CacheNotOwned`]. Nothing is created.
pub fn cache_dir_from_env() -> Result<PathBuf> {
    env_dir().map(|(dir, _)| dir).map_err(|e| e.to_error())
}

/// [`cache_dir_from`] the process environment, with [`cache_dir_from_env`]'s owner check of
/// a default directory.
pub(super) fn env_dir() -> std::result::Result<(PathBuf, bool), SetupError> {
    let (dir, explicit) = cache_dir_from(|k| std::env::var_os(k));
    if !explicit {
        check_owner(&dir, false)?;
    }
    Ok((dir, explicit))
}

/// Errs if `dir` exists (or, with `must_exist`, even if not) and is not the current user's.
fn check_owner(dir: &Path, must_exist: bool) -> std::result::Result<(), SetupError> {
    match std::fs::metadata(dir) {
        Ok(md) if md.uid() != euid() => Err(SetupError::NotOwned {
            path: dir.to_path_buf(),
            owner: md.uid(),
            uid: euid(),
        }),
        Ok(_) => Ok(()),
        Err(_) if !must_exist => Ok(()),
        Err(_) => Err(SetupError::NotOwned {
            path: dir.to_path_buf(),
            owner: u32::MAX,
            uid: euid(),
        }),
    }
}

/// Creates `dir` (and missing parents) with mode 0700. With `require_owner`, the directory
/// must belong to the current user ([`Error::CacheNotOwned`]) and is tightened to 0700.
pub fn prepare_cache_dir(dir: &Path, require_owner: bool) -> Result<()> {
    let cache_err = |e: std::io::Error| Error::Cache {
        path: dir.to_path_buf(),
        message: e.to_string(),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(cache_err)?;
    let md = std::fs::metadata(dir).map_err(cache_err)?;
    if !md.is_dir() {
        return Err(Error::Cache {
            path: dir.to_path_buf(),
            message: "not a directory".into(),
        });
    }
    if require_owner {
        check_owner(dir, true).map_err(|e| e.to_error())?;
        if md.mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(cache_err)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Inspection.

/// What a file in a cache directory is to uopkit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Own {
    /// `k_*.so` (C) or `k_*.gpu` (GPU image), with the key its name gives (if it has the
    /// form `k_<32 hex>.<ext>`).
    Entry(Kind, Option<u128>),
    /// `k_*.meta`, `k_*.c`.
    Other,
    /// `.k_*.tmp`.
    Temp,
}

fn own_file(name: &str) -> Option<Own> {
    if name.starts_with(".k_") && name.ends_with(".tmp") && name.len() > 7 {
        return Some(Own::Temp);
    }
    let rest = name.strip_prefix("k_")?;
    for kind in Kind::ALL {
        if let Some(hex) = rest.strip_suffix(&format!(".{}", kind.ext())) {
            let key = (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u128::from_str_radix(hex, 16).ok())
                .flatten();
            return Some(Own::Entry(kind, key));
        }
    }
    (rest.ends_with(".meta") || rest.ends_with(".c")).then_some(Own::Other)
}

/// uopkit's own regular files in `dir` (none if it does not exist), sorted by name.
fn own_files(dir: &Path) -> std::io::Result<Vec<(PathBuf, Own, std::fs::Metadata)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e?;
        let Some(kind) = e.file_name().to_str().and_then(own_file) else {
            continue;
        };
        let md = match e.metadata() {
            Ok(md) => md,
            // Removed meanwhile (another process cleaning).
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        if md.is_file() {
            out.push((e.path(), kind, md));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What a cache directory holds (for `uopkit cache`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheStats {
    pub dir: PathBuf,
    /// Whether the directory exists (all counts are 0 if not).
    pub exists: bool,
    /// Entries, good or bad: `k_*.so` (compiled C) and `k_*.gpu` (GPU images).
    pub entries: usize,
    /// Of them, GPU images (`k_*.gpu`: NVRTC's and hiprtc's output).
    pub gpu_entries: usize,
    /// Bytes in all of uopkit's files (entries, kept sources, temporary files).
    pub bytes: u64,
    /// Entries that would not be loaded (truncated, corrupted, swapped, not uopkit's); each is
    /// rebuilt when its unit is next compiled.
    pub bad_entries: usize,
    /// Temporary files (`.k_*.tmp`): compiles or loads in progress, or left by a killed one.
    pub temp_files: usize,
    /// Sources kept by failed compiles (`k_*.c`) and other `k_*` files (`k_*.meta`).
    pub other_files: usize,
}

/// Counts `dir`'s files and checks every entry (trailer, checksum, name, ELF header or GPU
/// image format) without loading any.
pub fn stats(dir: &Path) -> std::io::Result<CacheStats> {
    let mut s = CacheStats {
        dir: dir.to_path_buf(),
        exists: dir.is_dir(),
        entries: 0,
        gpu_entries: 0,
        bytes: 0,
        bad_entries: 0,
        temp_files: 0,
        other_files: 0,
    };
    for (path, kind, md) in own_files(dir)? {
        s.bytes += md.len();
        match kind {
            Own::Temp => s.temp_files += 1,
            Own::Other => s.other_files += 1,
            Own::Entry(kind, key) => {
                let good = match (key, std::fs::read(&path)) {
                    (Some(k), Ok(bytes)) => check_entry(&bytes, None, k, kind).is_ok(),
                    (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                        s.bytes -= md.len();
                        continue;
                    }
                    _ => false,
                };
                s.entries += 1;
                if kind == Kind::GpuImage {
                    s.gpu_entries += 1;
                }
                if !good {
                    s.bad_entries += 1;
                }
            }
        }
    }
    Ok(s)
}

/// Removes uopkit's own files from `dir` (`k_*.so`, `k_*.gpu`, `k_*.meta`, `k_*.c`, `.k_*.tmp`; nothing
/// else, and never the directory); returns how many were removed. A missing directory has
/// nothing to remove.
pub fn clean(dir: &Path) -> std::io::Result<usize> {
    remove_all(own_files(dir)?.into_iter().map(|(p, _, _)| p))
}

/// Removes temporary files (`.k_*.tmp`) in `dir` last modified more than `older_than` ago;
/// returns how many were removed. Done whenever a compiler opens its directory.
pub fn clean_stale_temps(dir: &Path, older_than: Duration) -> std::io::Result<usize> {
    let now = SystemTime::now();
    let stale = own_files(dir)?.into_iter().filter(|(_, kind, md)| {
        *kind == Own::Temp
            && md
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > older_than)
    });
    remove_all(stale.map(|(p, _, _)| p))
}

fn remove_all(paths: impl Iterator<Item = PathBuf>) -> std::io::Result<usize> {
    let mut n = 0;
    for p in paths {
        match std::fs::remove_file(&p) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        const ALL: [(&str, &str); 3] = [
            ("UOPKIT_CACHE_DIR", "/u"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(cache_dir_from(env(&ALL)), (PathBuf::from("/u"), true));
        assert_eq!(
            cache_dir_from(env(&[
                ("UOPKIT_CACHE_DIR", ""),
                ("XDG_CACHE_HOME", "/x"),
                ("HOME", "/h")
            ])),
            (PathBuf::from("/x/uopkit"), false)
        );
        assert_eq!(
            cache_dir_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            (PathBuf::from("/h/.cache/uopkit"), false)
        );
        let (d, explicit) = cache_dir_from(env(&[]));
        assert!(!explicit);
        assert!(d.starts_with(std::env::temp_dir()), "{d:?}");
        assert!(d.to_string_lossy().ends_with(&format!("uopkit-{}", euid())));
    }

    #[test]
    fn own_files_are_recognized() {
        let k = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            own_file(&format!("k_{k}.so")),
            Some(Own::Entry(
                Kind::SharedObject,
                Some(0x0123456789abcdef0123456789abcdef)
            ))
        );
        assert_eq!(
            own_file(&format!("k_{k}.gpu")),
            Some(Own::Entry(
                Kind::GpuImage,
                Some(0x0123456789abcdef0123456789abcdef)
            ))
        );
        assert_eq!(
            own_file("k_zz.so"),
            Some(Own::Entry(Kind::SharedObject, None))
        );
        assert_eq!(own_file(&format!("k_{k}.c")), Some(Own::Other));
        assert_eq!(own_file(&format!("k_{k}.meta")), Some(Own::Other));
        assert_eq!(own_file(&format!(".k_{k}.abc.so.tmp")), Some(Own::Temp));
        for other in [
            "libfoo.so",
            "k_",
            ".k_.tmp",
            "notes.txt",
            "k_x.so.bak",
            ".kx.tmp",
        ] {
            assert_eq!(own_file(other), None, "{other}");
        }
    }
}
