//! The entry store every compiler's cache uses (the C compiler's shared objects, the GPU
//! compilers' images): its directory, opened once (made 0700, ownership checked, stale
//! temporary files removed); checked reads, where a bad entry is removed and reported, never
//! returned; and atomic writes (a temporary file in the directory, its checksum trailer
//! appended, renamed over the entry's name).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::dir::{cache_dir_from, env_dir};
use super::entry::{check_entry, entry_path, trailer, Kind};
use super::{clean_stale_temps, prepare_cache_dir, SetupError, STALE_TEMP_AGE};
use crate::runtime::{Error, Result};

/// A cache directory and what one user of it found there.
#[derive(Debug)]
pub(super) struct Store {
    dir: PathBuf,
    /// Whether the directory must belong to the current user (a default directory).
    pub(super) check_owner: bool,
    /// Why the environment's directory cannot be used; returned by every read and write.
    pub(super) setup: Option<SetupError>,
    dir_ready: OnceLock<()>,
    rebuilt: Mutex<Vec<String>>,
}

impl Store {
    /// The directory `dir`, used as given (no ownership check).
    pub(super) fn new(dir: impl Into<PathBuf>) -> Self {
        Store {
            dir: dir.into(),
            check_owner: false,
            setup: None,
            dir_ready: OnceLock::new(),
            rebuilt: Mutex::new(Vec::new()),
        }
    }

    /// The environment's directory ([`super::cache_dir_from_env`]); if it cannot be used, a
    /// store that returns that error from every read and write.
    pub(super) fn from_env() -> Self {
        match env_dir() {
            Ok((dir, explicit)) => {
                let mut s = Store::new(dir);
                s.check_owner = !explicit;
                s
            }
            Err(e) => {
                let (dir, _) = cache_dir_from(|k| std::env::var_os(k));
                let mut s = Store::new(dir);
                s.setup = Some(e);
                s
            }
        }
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn setup_error(&self) -> Result<()> {
        match &self.setup {
            Some(e) => Err(e.to_error()),
            None => Ok(()),
        }
    }

    /// One message per bad entry found, removed and rebuilt, in the order found.
    pub(super) fn rebuilt(&self) -> Vec<String> {
        self.rebuilt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Creates (0700) and checks the directory, and removes temporary files older than
    /// `max(STALE_TEMP_AGE, 2 × timeout)` (never a running compile's); once.
    pub(super) fn open(&self, timeout: Duration) -> Result<()> {
        self.setup_error()?;
        if self.dir_ready.get().is_some() {
            return Ok(());
        }
        prepare_cache_dir(&self.dir, self.check_owner)?;
        // Best effort: a file another process removes first is not an error.
        let age = STALE_TEMP_AGE.max(timeout.saturating_mul(2));
        let _ = clean_stale_temps(&self.dir, age);
        let _ = self.dir_ready.set(());
        Ok(())
    }

    pub(super) fn path(&self, key: u128, kind: Kind) -> PathBuf {
        entry_path(&self.dir, key, kind)
    }

    /// A fresh private temporary file in the directory (`.k_<key>.<random><suffix>`).
    pub(super) fn temp_file(&self, key: u128, suffix: &str) -> Result<tempfile::NamedTempFile> {
        tempfile::Builder::new()
            .prefix(&format!(".k_{key:032x}."))
            .suffix(suffix)
            .rand_bytes(16)
            .tempfile_in(&self.dir)
            .map_err(|e| Error::Cache {
                path: self.dir.clone(),
                message: e.to_string(),
            })
    }

    /// The payload of the entry for `inputs`, checked whole (trailer, length, checksum,
    /// inputs digest, the kind's format), or None when there is none. A bad entry is
    /// removed, reported (stderr and [`Store::rebuilt`]) and is None: it is rebuilt.
    pub(super) fn read(&self, inputs: &[u8; 32], kind: Kind) -> Result<Option<Vec<u8>>> {
        let key = super::entry::key_of(inputs);
        let path = self.path(key, kind);
        match std::fs::read(&path) {
            Ok(mut bytes) => match check_entry(&bytes, Some(inputs), key, kind) {
                Ok(len) => {
                    bytes.truncate(len);
                    Ok(Some(bytes))
                }
                Err(reason) => {
                    self.report_bad(&path, &reason);
                    match std::fs::remove_file(&path) {
                        Ok(()) => Ok(None),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                        Err(e) => Err(Error::Cache {
                            path,
                            message: format!("cannot remove the bad entry: {e}"),
                        }),
                    }
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Cache {
                path,
                message: e.to_string(),
            }),
        }
    }

    fn report_bad(&self, path: &Path, reason: &str) {
        let msg = format!(
            "kernel cache entry {} {reason}; removed, and rebuilt from the source",
            path.display()
        );
        eprintln!("uopkit: {msg}");
        self.rebuilt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(msg);
    }

    /// Makes `tmp` (a temporary file of this directory holding exactly `payload`) the entry
    /// for `inputs`: appends the trailer and renames it over the entry's name (atomic: a
    /// reader sees the old entry, none, or this one; a racing writer writes the same bytes).
    pub(super) fn seal(
        &self,
        tmp: tempfile::TempPath,
        inputs: &[u8; 32],
        kind: Kind,
        payload: &[u8],
    ) -> Result<PathBuf> {
        let path = self.path(super::entry::key_of(inputs), kind);
        let cache_err = |p: &Path, e: &dyn std::fmt::Display| Error::Cache {
            path: p.to_path_buf(),
            message: e.to_string(),
        };
        std::fs::OpenOptions::new()
            .append(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&trailer(inputs, payload)))
            .map_err(|e| cache_err(&tmp, &e))?;
        tmp.persist(&path).map_err(|e| cache_err(&path, &e.error))?;
        Ok(path)
    }

    /// Writes `payload` as the entry for `inputs`, atomically ([`Store::seal`]).
    pub(super) fn write(&self, inputs: &[u8; 32], kind: Kind, payload: &[u8]) -> Result<PathBuf> {
        let key = super::entry::key_of(inputs);
        let mut tmp = self.temp_file(key, &format!(".{}.tmp", kind.ext()))?;
        tmp.write_all(payload)
            .and_then(|()| tmp.flush())
            .map_err(|e| Error::Cache {
                path: tmp.path().to_path_buf(),
                message: e.to_string(),
            })?;
        self.seal(tmp.into_temp_path(), inputs, kind, payload)
    }
}
