//! Compiling C at run time with the system C compiler, behind a checksummed, content-addressed
//! cache that a damaged or foreign file cannot hurt.
//!
//! * **Compiler**: `cc`, or the command in `UOPKIT_CC`, split like a shell does
//!   (`UOPKIT_CC="gcc -O3"` runs `gcc -O3 …`: the extra words come before uopkit's flags
//!   and are part of the cache key). uopkit's flags are
//!   `-O2 -march=native -ffp-contract=off -shared -fPIC -x c - -o <tmp> -lm` (and
//!   `-mno-red-zone` on x86-64, see [`CFLAGS`]), the source on stdin (`-ffp-contract=off`
//!   keeps `a*b+c` unfused; uopkit never asks for `-ffast-math`; a library that changes the
//!   FP control state anyway is caught, see [`super::fpenv`]).
//! * **Timeout**: a compile (and `cc --version`) is killed, with its process group, after
//!   [`DEFAULT_TIMEOUT`] (120 s) or `UOPKIT_CC_TIMEOUT` seconds, giving
//!   [`Error::CompileTimeout`]. A compiler that exits 0 but leaves no ELF shared object is an
//!   [`Error::Compile`], never a cache entry.
//! * **Directory**: `UOPKIT_CACHE_DIR` if set, else `$XDG_CACHE_HOME/uopkit`, else
//!   `~/.cache/uopkit`, else `<temp dir>/uopkit-<uid>` ([`cache_dir_from_env`]). It is made
//!   with mode 0700; unless it came from `UOPKIT_CACHE_DIR` it must belong to the current
//!   user ([`Error::CacheNotOwned`] otherwise) and is tightened to 0700. Opening it removes
//!   temporary files (`.k_*.tmp`) older than [`STALE_TEMP_AGE`] left by killed processes.
//! * **Key**: the first 128 bits of the SHA-256 of the key's inputs (each length-prefixed):
//!   a format tag, the source, the compiler's extra words, uopkit's flags, the compiler's
//!   name, its `--version` output (asked once per compiler) and the CPU's feature flags
//!   (`-march=native`). The full 256-bit digest is the *inputs digest*.
//! * **Entry** `k_<key as 32 hex digits>.so`: the compiler's object followed by an 80-byte
//!   trailer, `"UOPKSUM1"` ‖ object length (u64 LE) ‖ inputs digest ‖
//!   SHA-256(`"uopkit-entry-1"` ‖ inputs digest ‖ object). The loader ignores bytes past the
//!   ELF image, and a trailer keeps an entry one file, so it appears atomically (written to a
//!   temporary file, then renamed over the name). Before anything is loaded the whole file is
//!   read and checked: trailer present, length, checksum, inputs digest equal to this unit's
//!   (an entry copied from another unit fails here), and a sane ELF shared object. A bad
//!   entry (truncated, empty, garbage, swapped) is never loaded: it is removed, rebuilt, and
//!   reported once, on stderr and in [`CCompiler::rebuilt`].
//! * **Loading**: the checked bytes are written to a fresh private file in the directory,
//!   loaded from there and unlinked, so that what is loaded is what was checked (no window
//!   for a swap, and `dlopen` never returns a stale handle for a reused path). Every
//!   `dlopen` runs inside an [`FpGuard`](super::fpenv::FpGuard).
//! * A failed compile keeps the source as `k_<key>.c` and reports its path with the
//!   compiler's stderr.
//! * Inspection for a CLI: [`stats`], [`clean`] (only uopkit's own files: `k_*.so`,
//!   `k_*.gpu`, `k_*.meta`, `k_*.c`, `.k_*.tmp`), [`clean_stale_temps`].
//! * The GPU compilers (NVRTC, hiprtc) keep their images in the same directory, as
//!   `k_<key>.gpu` entries with the same trailer and checks ([`gpu`], [`GpuCache`]); reads,
//!   checks and atomic writes of entries are one implementation for both (`store.rs`).
//!
//! Loaded libraries are not unloaded while a compiler or a compiled unit holds them
//! (kernels may run on other threads).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use libloading::Library;
use sha2::{Digest, Sha256};

use super::fpenv::FpGuard;
use super::{Error, Result};

mod compile;
mod dir;
mod entry;
pub mod gpu;
mod store;

pub use dir::{cache_dir_from_env, clean, clean_stale_temps, prepare_cache_dir, stats, CacheStats};
pub use gpu::GpuCache;

use compile::{cpu_features, parse_timeout, split_command, RunFail};
use entry::{check_elf, key_of, Kind};
use store::Store;

/// uopkit's flags, before `-x c - -o <out> -lm` (and after the compiler's own extra words).
///
/// `-mno-red-zone` (x86-64 only): gcc 12 with `-march=native` on an AVX-512 machine (Zen 5)
/// lays out a kernel's local register arrays in the red zone 8 bytes off the 16-byte
/// alignment its own aligned vector stores (`vmovdqa`) assume, and the kernel faults
/// (SIGSEGV; seen on `float v6[12]`, the accumulator row of a 4×6×12 matmul, in a leaf
/// function that also pushes rbp and rbx). Without the red zone the frame is made by
/// `sub rsp`, laid out correctly. It only changes where a leaf function's locals live.
#[cfg(target_arch = "x86_64")]
pub const CFLAGS: [&str; 6] = [
    "-O2",
    "-march=native",
    "-ffp-contract=off",
    "-mno-red-zone",
    "-shared",
    "-fPIC",
];
/// uopkit's flags, before `-x c - -o <out> -lm` (and after the compiler's own extra words).
#[cfg(not(target_arch = "x86_64"))]
pub const CFLAGS: [&str; 5] = [
    "-O2",
    "-march=native",
    "-ffp-contract=off",
    "-shared",
    "-fPIC",
];

/// How long a compile may take unless `UOPKIT_CC_TIMEOUT` (seconds) or
/// [`CCompiler::with_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Temporary files older than this (or than twice the compile timeout, if longer) are
/// removed when a cache directory is opened.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

const KEY_TAG: &[u8] = b"uopkit-c-2";

/// A problem found while reading the environment, kept by a compiler made anyway (see
/// [`CCompiler::global`]) and returned by each of its loads.
#[derive(Clone, Debug)]
enum SetupError {
    BadSetting {
        name: String,
        value: String,
        message: String,
    },
    NotOwned {
        path: PathBuf,
        owner: u32,
        uid: u32,
    },
}

impl SetupError {
    fn to_error(&self) -> Error {
        match self.clone() {
            SetupError::BadSetting {
                name,
                value,
                message,
            } => Error::BadSetting {
                name,
                value,
                message,
            },
            SetupError::NotOwned { path, owner, uid } => Error::CacheNotOwned { path, owner, uid },
        }
    }
}

/// A C compiler with its kernel cache.
#[derive(Debug)]
pub struct CCompiler {
    cc: String,
    /// Words after the program name (from `UOPKIT_CC="gcc -O3"`), before uopkit's flags.
    args: Vec<String>,
    store: Store,
    timeout: Duration,
    /// A problem with `UOPKIT_CC`/`UOPKIT_CC_TIMEOUT`, returned by every load.
    setup: Option<SetupError>,
    /// `cc --version` output, or why it could not be had.
    version: OnceLock<std::result::Result<String, VersionFail>>,
    spawns: AtomicU64,
    /// Libraries this compiler loaded, by cache key (only looked up, never iterated).
    loaded: Mutex<HashMap<u128, Arc<Library>>>,
}

#[derive(Clone, Debug)]
enum VersionFail {
    Unavailable(String),
    Timeout,
}

impl CCompiler {
    /// A compiler running the program `cc` (not split: a path with spaces is one path) with
    /// its cache in `cache_dir`, used as given (no ownership check), and the default timeout.
    pub fn new(cc: impl Into<String>, cache_dir: impl Into<PathBuf>) -> Self {
        CCompiler {
            cc: cc.into(),
            args: Vec::new(),
            store: Store::new(cache_dir),
            timeout: DEFAULT_TIMEOUT,
            setup: None,
            version: OnceLock::new(),
            spawns: AtomicU64::new(0),
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// A compiler from a command line as `UOPKIT_CC` holds it (`"gcc -O3"`, `"'my cc' -g"`),
    /// split like a shell does: the first word is the program, the others come before
    /// uopkit's flags. An empty line means `cc`.
    pub fn with_command_line(line: &str, cache_dir: impl Into<PathBuf>) -> Result<Self> {
        let (cc, args) =
            split_command("compiler command line", line).map_err(|e| SetupError::to_error(&e))?;
        Ok(Self::new(cc, cache_dir).with_args(args))
    }

    /// Extra words for the compiler, before uopkit's flags (part of the cache key).
    pub fn with_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// How long one run of the compiler may take before it is killed.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `UOPKIT_CC` (default `cc`, split like a shell does), `UOPKIT_CC_TIMEOUT` (seconds,
    /// default 120) and the directory of [`cache_dir_from_env`]. A value that cannot be
    /// used is an [`Error::BadSetting`] naming the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_env_inner().map_err(|e| e.to_error())
    }

    fn from_env_inner() -> std::result::Result<Self, SetupError> {
        let line = std::env::var("UOPKIT_CC").unwrap_or_default();
        let (cc, args) = split_command("UOPKIT_CC", &line)?;
        let timeout = match std::env::var("UOPKIT_CC_TIMEOUT") {
            Ok(v) => parse_timeout(&v).map_err(|message| SetupError::BadSetting {
                name: "UOPKIT_CC_TIMEOUT".into(),
                value: v.clone(),
                message,
            })?,
            Err(std::env::VarError::NotPresent) => DEFAULT_TIMEOUT,
            Err(std::env::VarError::NotUnicode(v)) => {
                return Err(SetupError::BadSetting {
                    name: "UOPKIT_CC_TIMEOUT".into(),
                    value: v.to_string_lossy().into_owned(),
                    message: "not valid UTF-8".into(),
                })
            }
        };
        let store = Store::from_env();
        if let Some(e) = store.setup.clone() {
            return Err(e);
        }
        let mut c = Self::new(cc, store.dir())
            .with_args(args)
            .with_timeout(timeout);
        c.store = store;
        Ok(c)
    }

    /// The process-wide compiler, made by [`CCompiler::from_env`] on first use. If the
    /// environment is unusable, it is still made, and each of its loads returns that error.
    pub fn global() -> Arc<CCompiler> {
        static GLOBAL: OnceLock<Arc<CCompiler>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                Arc::new(Self::from_env_inner().unwrap_or_else(|e| {
                    let store = Store::from_env();
                    let cc = std::env::var("UOPKIT_CC").unwrap_or_else(|_| "cc".into());
                    let mut c = Self::new(cc, store.dir());
                    c.store = store;
                    c.setup = Some(e);
                    c
                }))
            })
            .clone()
    }

    /// The compiler program (the first word of `UOPKIT_CC`).
    pub fn cc(&self) -> &str {
        &self.cc
    }

    /// The compiler's extra words, before uopkit's flags.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn cache_dir(&self) -> &Path {
        self.store.dir()
    }

    /// How many times this compiler ran the C compiler on a source (cache misses).
    pub fn spawns(&self) -> u64 {
        self.spawns.load(Ordering::Relaxed)
    }

    /// One message per bad cache entry this compiler found, removed and rebuilt (what was
    /// wrong and where), in the order found.
    pub fn rebuilt(&self) -> Vec<String> {
        self.store.rebuilt()
    }

    /// The command as one shell-quoted line (for messages).
    fn command(&self) -> String {
        let mut words = vec![self.cc.as_str()];
        words.extend(self.args.iter().map(String::as_str));
        if self.args.is_empty() {
            self.cc.clone()
        } else {
            shell_words::join(words)
        }
    }

    fn version(&self) -> Result<&str> {
        let v = self.version.get_or_init(|| {
            match self.run_tool(&[OsString::from("--version")], None) {
                Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
                Ok(o) => Err(VersionFail::Unavailable(format!(
                    "'{} --version' failed ({}): {}",
                    self.command(),
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ))),
                Err(RunFail::Spawn(e)) => Err(VersionFail::Unavailable(e.to_string())),
                Err(RunFail::Timeout) => Err(VersionFail::Timeout),
            }
        });
        match v {
            Ok(s) => Ok(s),
            Err(VersionFail::Unavailable(m)) => Err(Error::CompilerUnavailable {
                cc: self.command(),
                message: m.clone(),
            }),
            Err(VersionFail::Timeout) => Err(Error::CompileTimeout {
                cc: format!("{} --version", self.command()),
                timeout: self.timeout,
            }),
        }
    }

    /// SHA-256 of everything the compiled object depends on.
    fn inputs_digest(&self, source: &str) -> Result<[u8; 32]> {
        let mut h = Sha256::new();
        let mut field = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        field(KEY_TAG);
        field(source.as_bytes());
        field(&(self.args.len() as u64).to_le_bytes());
        for a in &self.args {
            field(a.as_bytes());
        }
        for f in CFLAGS {
            field(f.as_bytes());
        }
        field(self.cc.as_bytes());
        field(self.version()?.as_bytes());
        field(cpu_features().as_bytes());
        Ok(h.finalize().into())
    }

    /// The cache key of `source` for this compiler.
    pub fn key(&self, source: &str) -> Result<u128> {
        Ok(key_of(&self.inputs_digest(source)?))
    }

    /// The path the compiled `source` has (or will have) in the cache.
    pub fn object_path(&self, source: &str) -> Result<PathBuf> {
        Ok(self.store.path(self.key(source)?, Kind::SharedObject))
    }

    /// Compiles `source` (or finds it in the cache, checked) and loads it.
    pub fn load(&self, source: &str) -> Result<(Arc<Library>, PathBuf)> {
        if let Some(e) = &self.setup {
            return Err(e.to_error());
        }
        let inputs = self.inputs_digest(source)?;
        let key = key_of(&inputs);
        let path = self.store.path(key, Kind::SharedObject);
        if let Some(lib) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok((lib.clone(), path));
        }
        self.store.open(self.timeout)?;
        let cached = self.store.read(&inputs, Kind::SharedObject)?;
        let object = match cached {
            Some(o) => o,
            None => self.compile_into(source, key, &inputs)?,
        };
        let lib = self.dlopen_checked(key, &object, &path)?;
        let lib = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert(Arc::new(lib))
            .clone();
        Ok((lib, path))
    }

    /// Loads checked object bytes from a fresh private file (unlinked again once loaded).
    fn dlopen_checked(&self, key: u128, object: &[u8], path: &Path) -> Result<Library> {
        let mut tmp = self.store.temp_file(key, ".load.tmp")?;
        tmp.write_all(object)
            .and_then(|()| tmp.flush())
            .map_err(|e| Error::Cache {
                path: tmp.path().to_path_buf(),
                message: e.to_string(),
            })?;
        let tmp = tmp.into_temp_path();
        let guard = FpGuard::new();
        // SAFETY: the object is a kernel library compiled by this compiler from uopkit's C
        // (checked against its checksum just now); its initialisers only set up the
        // prelude's function pointers, and any change they make to the FP control state is
        // undone by the guard.
        let lib = unsafe { Library::new(&*tmp) };
        guard.restore_and_record(|| format!("dlopen of {}", path.display()));
        drop(tmp);
        lib.map_err(|e| Error::Load {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Compiles `source` into a new entry at `path`; returns the object's bytes.
    fn compile_into(&self, source: &str, key: u128, inputs: &[u8; 32]) -> Result<Vec<u8>> {
        let tmp = self.store.temp_file(key, ".so.tmp")?.into_temp_path();
        self.spawns.fetch_add(1, Ordering::Relaxed);
        let mut tail: Vec<OsString> = CFLAGS.iter().map(OsString::from).collect();
        tail.extend(["-x", "c", "-", "-o"].map(OsString::from));
        tail.push(tmp.as_os_str().to_owned());
        tail.push("-lm".into());
        let out = match self.run_tool(&tail, Some(source.as_bytes().to_vec())) {
            Ok(o) => o,
            Err(RunFail::Spawn(e)) => {
                return Err(Error::CompilerUnavailable {
                    cc: self.command(),
                    message: e.to_string(),
                })
            }
            Err(RunFail::Timeout) => {
                return Err(Error::CompileTimeout {
                    cc: self.command(),
                    timeout: self.timeout,
                })
            }
        };
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(self.compile_error(source, key, out.status.to_string(), stderr));
        }
        let object = match std::fs::read(&tmp) {
            Ok(b) if b.is_empty() => Err("it wrote an empty file".to_string()),
            Ok(b) => match check_elf(&b) {
                Ok(()) => Ok(b),
                Err(why) => Err(format!("its output is not a usable shared object ({why})")),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err("it wrote no object file".to_string())
            }
            Err(e) => Err(format!("its output cannot be read ({e})")),
        };
        let object = match object {
            Ok(o) => o,
            Err(problem) => {
                let status = format!("{}, but {problem}", out.status);
                return Err(self.compile_error(source, key, status, stderr));
            }
        };
        // Atomic replace: a racing process writes identical content.
        self.store.seal(tmp, inputs, Kind::SharedObject, &object)?;
        Ok(object)
    }

    fn compile_error(&self, source: &str, key: u128, status: String, mut stderr: String) -> Error {
        let source_path = self.store.dir().join(format!("k_{key:032x}.c"));
        if let Err(e) = std::fs::write(&source_path, source) {
            stderr.push_str(&format!("\n(could not keep the source: {e})"));
        }
        Error::Compile {
            cc: self.command(),
            status,
            stderr,
            source_path,
        }
    }
}

impl Drop for CCompiler {
    /// Unloading a library runs its destructors: inside the FP guard as well.
    fn drop(&mut self) {
        let fp = FpGuard::new();
        self.loaded
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        fp.restore_and_record(|| "the unloading of kernel libraries".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_compiler_is_an_error_value() {
        let c = CCompiler::new(
            "/nonexistent/uopkit-cc",
            std::env::temp_dir().join("uopkit-test-nocc"),
        );
        let e = c.load("int x;").unwrap_err();
        assert!(matches!(e, Error::CompilerUnavailable { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/uopkit-cc"), "{e}");
        assert_eq!(c.spawns(), 0);
    }
}
