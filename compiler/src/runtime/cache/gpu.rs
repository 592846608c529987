//! The GPU compilers' cache: NVRTC's CUBIN/PTX and hiprtc's code objects, in the kernel
//! cache directory, with the C cache's entry format and checks ([`super::store`]).
//!
//! * **Key**: SHA-256 of (each length-prefixed) a format tag, the compiler's name, its
//!   *identity*, its options (the exactness flags and the target architecture), and the
//!   source. The identity is the library's reported version and, for each library file the
//!   compile runs (the compiler library, and the builtins and code-object libraries beside
//!   it), its canonical path, size, modification time (ns) and inode — what ccache calls
//!   `compiler_check=mtime`: a library replaced by another version changes the key. (One
//!   rewritten in place with the same size and time to the nanosecond would not; `uopkit
//!   cache --clean` empties the cache.)
//! * **Entry** `k_<key>.gpu`: the compiler's image (what a successful compile returns, byte
//!   for byte) and the C cache's 80-byte checksum trailer. A hit returns exactly the bytes
//!   the compiler returned when the entry was made, for the same inputs, checked whole before
//!   use: trailer, length, checksum, inputs digest (an entry copied from another key fails),
//!   and the image's format (ELF, offload bundle, or NUL-terminated PTX). A bad entry is
//!   removed, reported on stderr and in [`GpuCache::rebuilt`], and compiled again.
//! * **Failures are not cached**: a rejected unit runs the compiler again every time. A
//!   rejection is a bug to be fixed, not a steady state worth speeding up; its error must carry
//!   the compiler's own log and the kept source of this run, never a log from another time;
//!   and a failure that is not the source's fault (out of memory, a broken installation)
//!   must not outlive its cause.
//! * **Shared across processes**: entries appear atomically (temporary file, rename); two
//!   processes that miss at once both compile and write the same bytes.
//! * **In process**: each image is also kept in memory by its key, so a unit is read (or
//!   compiled) once per process, whatever the number of trials or devices that ask for it.
//! * A compiler whose identity cannot be established (its library file not found) is not
//!   cached on disk: its images are compiled, and kept only in memory.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::entry::{check_gpu_image, key_of, Kind};
use super::store::Store;
use crate::runtime::Result;

const KEY_TAG: &[u8] = b"uopkit-gpu-1";

/// What a GPU compile's result depends on, besides the source.
#[derive(Clone, Debug)]
pub struct GpuCompiler<'a> {
    /// `NVRTC`, `hiprtc`.
    pub name: &'a str,
    /// The library's version and files ([`library_identity`]); None: not cached on disk.
    pub identity: Option<&'a str>,
    /// Every option the compile is given, the target architecture among them.
    pub options: &'a [String],
}

/// A GPU image cache over one directory.
#[derive(Debug)]
pub struct GpuCache {
    store: Store,
    memo: Mutex<BTreeMap<[u8; 32], Arc<Vec<u8>>>>,
    compiles: AtomicU64,
    disk_hits: AtomicU64,
    /// Set once the directory failed: from then on images are kept in memory only.
    disk_failed: std::sync::atomic::AtomicBool,
}

impl GpuCache {
    /// A cache in `dir`, used as given (no ownership check).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        GpuCache::with_store(Store::new(dir))
    }

    fn with_store(store: Store) -> Self {
        GpuCache {
            store,
            memo: Mutex::new(BTreeMap::new()),
            compiles: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
            disk_failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The process-wide cache in the directory of [`super::cache_dir_from_env`] (the C
    /// compiler's); if that cannot be used, images are kept in memory only (said once on
    /// stderr).
    pub fn global() -> &'static GpuCache {
        static GLOBAL: OnceLock<GpuCache> = OnceLock::new();
        GLOBAL.get_or_init(|| GpuCache::with_store(Store::from_env()))
    }

    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    /// How many times this cache ran a compiler (neither memory nor disk had the image).
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    /// How many images came from a checked disk entry.
    pub fn disk_hits(&self) -> u64 {
        self.disk_hits.load(Ordering::Relaxed)
    }

    /// One message per bad entry found, removed and rebuilt (what was wrong and where).
    pub fn rebuilt(&self) -> Vec<String> {
        self.store.rebuilt()
    }

    /// The path of `source`'s entry for `compiler` (None if it is not cached on disk).
    pub fn entry_path(&self, compiler: &GpuCompiler, source: &str) -> Option<PathBuf> {
        compiler.identity?;
        Some(
            self.store
                .path(key_of(&inputs_digest(compiler, source)), Kind::GpuImage),
        )
    }

    /// The image of `source` for `compiler`: from memory, else from a checked disk entry,
    /// else from `compile` (then written to disk). An error of `compile` is returned as it
    /// is, and nothing is kept.
    pub fn image(
        &self,
        compiler: &GpuCompiler,
        source: &str,
        compile: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let inputs = inputs_digest(compiler, source);
        if let Some(image) = self
            .memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&inputs)
        {
            return Ok(image.as_ref().clone());
        }
        // The disk is a speed-up only: a directory that cannot be opened, read or written
        // (read-only, full, not ours) leaves the compile itself unaffected.
        let on_disk = compiler.identity.is_some() && !self.disk_failed.load(Ordering::Relaxed);
        let cached = if on_disk {
            match self
                .store
                // Duration::MAX: the GPU cache never removes temporary files; the C
                // compiler's cache does, with an age that spares its running compiles.
                .open(Duration::MAX)
                .and_then(|()| self.store.read(&inputs, Kind::GpuImage))
            {
                Ok(c) => c,
                Err(e) => {
                    self.disk_unusable(&e);
                    None
                }
            }
        } else {
            None
        };
        let image = match cached {
            Some(image) => {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                image
            }
            None => {
                self.compiles.fetch_add(1, Ordering::Relaxed);
                let image = compile()?;
                // An image the format check would refuse on reading is not written (it
                // would only be rebuilt each time); it is still what the compiler returned.
                if on_disk
                    && !self.disk_failed.load(Ordering::Relaxed)
                    && check_gpu_image(&image).is_ok()
                {
                    if let Err(e) = self.store.write(&inputs, Kind::GpuImage, &image) {
                        self.disk_unusable(&e);
                    }
                }
                image
            }
        };
        self.memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(inputs, Arc::new(image.clone()));
        Ok(image)
    }
}

impl GpuCache {
    fn disk_unusable(&self, e: &impl std::fmt::Display) {
        if !self.disk_failed.swap(true, Ordering::Relaxed) {
            eprintln!(
                "uopkit: the GPU compile cache in {} cannot be used ({e}); compiled images are kept in memory only",
                self.store.dir().display()
            );
        }
    }
}

/// SHA-256 of everything a GPU image depends on.
fn inputs_digest(compiler: &GpuCompiler, source: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut field = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    field(KEY_TAG);
    field(compiler.name.as_bytes());
    field(compiler.identity.unwrap_or("").as_bytes());
    field(&(compiler.options.len() as u64).to_le_bytes());
    for o in compiler.options {
        field(o.as_bytes());
    }
    field(source.as_bytes());
    h.finalize().into()
}

/// A compiler's identity: `version`, then one line per file — `library` and the files in
/// its directory whose names start with one of `siblings` (sorted) — with its canonical
/// path, size, modification time (ns) and inode. None if `library` cannot be read.
pub fn library_identity(version: &str, library: &Path, siblings: &[&str]) -> Option<String> {
    let library = std::fs::canonicalize(library).ok()?;
    let mut files = vec![library.clone()];
    if let Some(dir) = library.parent() {
        let mut more: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| siblings.iter().any(|s| n.starts_with(s)))
            })
            .filter_map(|e| std::fs::canonicalize(e.path()).ok())
            .collect();
        more.sort();
        files.extend(more);
    }
    files.dedup();
    let mut out = format!("{version}\n");
    for f in files {
        let md = std::fs::metadata(&f).ok()?;
        out.push_str(&format!(
            "{} {} {}.{:09} {}\n",
            f.display(),
            md.len(),
            md.mtime(),
            md.mtime_nsec(),
            md.ino()
        ));
    }
    Some(out)
}

/// The file this process has mapped whose name starts with `prefix` (the first in
/// `/proc/self/maps`), for a library loaded by name through another crate.
pub fn mapped_library(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.is_absolute()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .map(Path::to_path_buf)
}

/// The file the code at address `addr` was loaded from (`dladdr`; the address is only looked
/// up in the loader's tables, never dereferenced, so it is taken as a number).
pub fn library_of(addr: usize) -> Option<PathBuf> {
    let addr = addr as *const std::ffi::c_void;
    // SAFETY: Dl_info is a plain C struct of pointers, for which all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; `info` is a valid out-pointer.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a non-null dli_fname is a NUL-terminated path owned by the loader.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let p = PathBuf::from(name.to_str().ok()?);
    p.is_absolute().then_some(p)
}
