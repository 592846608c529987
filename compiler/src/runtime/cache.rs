//! Compiling C at run time with the system C compiler, behind a checksummed, content-addressed
//! cache that a damaged or foreign file cannot hurt.
//!
//! * **Compiler**: `cc`, or the command in `UOPKIT_CC`, split like a shell does
//!   (`UOPKIT_CC="gcc -O3"` runs `gcc -O3 …`: the extra words come before uopkit's flags
//!   and are part of the cache key). uopkit's flags are
//!   `-O2 -march=native -ffp-contract=off -shared -fPIC -x c - -o <tmp> -lm`, the source on
//!   stdin (`-ffp-contract=off` keeps `a*b+c` unfused; uopkit never asks for `-ffast-math`;
//!   a library that changes the FP control state anyway is caught, see [`super::fpenv`]).
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
//!   `k_*.meta`, `k_*.c`, `.k_*.tmp`), [`clean_stale_temps`].
//!
//! Loaded libraries are not unloaded while a compiler or a compiled unit holds them
//! (kernels may run on other threads).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write as _};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use libloading::Library;
use sha2::{Digest, Sha256};

use super::fpenv::FpGuard;
use super::{Error, Result};

/// uopkit's flags, before `-x c - -o <out> -lm` (and after the compiler's own extra words).
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

const TRAILER_MAGIC: &[u8; 8] = b"UOPKSUM1";
/// magic ‖ object length ‖ inputs digest ‖ checksum.
const TRAILER_LEN: usize = 8 + 8 + 32 + 32;
const KEY_TAG: &[u8] = b"uopkit-c-2";
const ENTRY_TAG: &[u8] = b"uopkit-entry-1";

/// FNV-1a, 128 bits: a stable hash (unlike `DefaultHasher`, fixed across Rust releases).
#[derive(Clone, Debug)]
pub struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;

    pub fn new() -> Self {
        Fnv128(Self::OFFSET)
    }

    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u128;
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// A field followed by its length, so that field boundaries are part of the hash.
    pub fn field(&mut self, bytes: &[u8]) {
        self.write(bytes);
        self.write(&(bytes.len() as u64).to_le_bytes());
    }

    pub fn finish(&self) -> u128 {
        self.0
    }
}

impl Default for Fnv128 {
    fn default() -> Self {
        Self::new()
    }
}

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

/// Why running the compiler gave no output.
enum RunFail {
    Spawn(std::io::Error),
    Timeout,
}

/// The effective user id.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A C compiler with its kernel cache.
#[derive(Debug)]
pub struct CCompiler {
    cc: String,
    /// Words after the program name (from `UOPKIT_CC="gcc -O3"`), before uopkit's flags.
    args: Vec<String>,
    cache_dir: PathBuf,
    /// Whether the directory must belong to the current user (a default directory).
    check_owner: bool,
    timeout: Duration,
    setup: Option<SetupError>,
    /// `cc --version` output, or why it could not be had.
    version: OnceLock<std::result::Result<String, VersionFail>>,
    dir_ready: OnceLock<()>,
    spawns: AtomicU64,
    rebuilt: Mutex<Vec<String>>,
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
            cache_dir: cache_dir.into(),
            check_owner: false,
            timeout: DEFAULT_TIMEOUT,
            setup: None,
            version: OnceLock::new(),
            dir_ready: OnceLock::new(),
            spawns: AtomicU64::new(0),
            rebuilt: Mutex::new(Vec::new()),
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
        let (dir, explicit) = cache_dir_from(|k| std::env::var_os(k));
        if !explicit {
            check_owner(&dir, false)?;
        }
        let mut c = Self::new(cc, dir).with_args(args).with_timeout(timeout);
        c.check_owner = !explicit;
        Ok(c)
    }

    /// The process-wide compiler, made by [`CCompiler::from_env`] on first use. If the
    /// environment is unusable, it is still made, and each of its loads returns that error.
    pub fn global() -> Arc<CCompiler> {
        static GLOBAL: OnceLock<Arc<CCompiler>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                Arc::new(Self::from_env_inner().unwrap_or_else(|e| {
                    let (dir, _) = cache_dir_from(|k| std::env::var_os(k));
                    let cc = std::env::var("UOPKIT_CC").unwrap_or_else(|_| "cc".into());
                    let mut c = Self::new(cc, dir);
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
        &self.cache_dir
    }

    /// How many times this compiler ran the C compiler on a source (cache misses).
    pub fn spawns(&self) -> u64 {
        self.spawns.load(Ordering::Relaxed)
    }

    /// One message per bad cache entry this compiler found, removed and rebuilt (what was
    /// wrong and where), in the order found.
    pub fn rebuilt(&self) -> Vec<String> {
        self.rebuilt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
        Ok(entry_path(&self.cache_dir, self.key(source)?))
    }

    /// Compiles `source` (or finds it in the cache, checked) and loads it.
    pub fn load(&self, source: &str) -> Result<(Arc<Library>, PathBuf)> {
        if let Some(e) = &self.setup {
            return Err(e.to_error());
        }
        let inputs = self.inputs_digest(source)?;
        let key = key_of(&inputs);
        let path = entry_path(&self.cache_dir, key);
        if let Some(lib) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok((lib.clone(), path));
        }
        self.open_dir()?;
        let cached = match std::fs::read(&path) {
            Ok(mut bytes) => match check_entry(&bytes, Some(&inputs), key) {
                Ok(len) => {
                    bytes.truncate(len);
                    Some(bytes)
                }
                Err(reason) => {
                    self.report_bad(&path, &reason);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(Error::Cache {
                                path,
                                message: format!("cannot remove the bad entry: {e}"),
                            })
                        }
                    }
                    None
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::Cache {
                    path,
                    message: e.to_string(),
                })
            }
        };
        let object = match cached {
            Some(o) => o,
            None => self.compile_into(source, key, &inputs, &path)?,
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

    /// Creates (0700) and checks the directory, and removes stale temporary files; once.
    fn open_dir(&self) -> Result<()> {
        if self.dir_ready.get().is_some() {
            return Ok(());
        }
        prepare_cache_dir(&self.cache_dir, self.check_owner)?;
        // Best effort: a file another process removes first is not an error. (Never younger
        // than two of our timeouts, so that a long compile's output is not taken away.)
        let age = STALE_TEMP_AGE.max(self.timeout.saturating_mul(2));
        let _ = clean_stale_temps(&self.cache_dir, age);
        let _ = self.dir_ready.set(());
        Ok(())
    }

    fn temp_file(&self, key: u128, suffix: &str) -> Result<tempfile::NamedTempFile> {
        tempfile::Builder::new()
            .prefix(&format!(".k_{key:032x}."))
            .suffix(suffix)
            .rand_bytes(16)
            .tempfile_in(&self.cache_dir)
            .map_err(|e| Error::Cache {
                path: self.cache_dir.clone(),
                message: e.to_string(),
            })
    }

    /// Loads checked object bytes from a fresh private file (unlinked again once loaded).
    fn dlopen_checked(&self, key: u128, object: &[u8], path: &Path) -> Result<Library> {
        let mut tmp = self.temp_file(key, ".load.tmp")?;
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

    /// Runs the compiler (program, extra words, then `tail`) with `input` on stdin, killing
    /// it and its process group after the timeout.
    fn run_tool(
        &self,
        tail: &[OsString],
        input: Option<Vec<u8>>,
    ) -> std::result::Result<Output, RunFail> {
        let mut cmd = Command::new(&self.cc);
        cmd.args(&self.args)
            .args(tail)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let deadline = Instant::now() + self.timeout;
        let mut child = cmd.spawn().map_err(RunFail::Spawn)?;
        // Feed stdin and drain stdout/stderr from other threads, so that neither a compiler
        // that writes a lot before reading its input nor one that never reads it can block
        // us. The threads end when the pipes close (at the latest when the group is killed).
        if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            });
        }
        let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ];
        let mut expected = 0;
        for (i, pipe) in pipes.into_iter().enumerate() {
            if let Some(mut pipe) = pipe {
                expected += 1;
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let _ = pipe.read_to_end(&mut buf);
                    let _ = tx.send((i, buf));
                });
            }
        }
        drop(tx);
        let mut nap = Duration::from_millis(1);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(e) => {
                    kill_group(&mut child);
                    return Err(RunFail::Spawn(e));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                kill_group(&mut child);
                return Err(RunFail::Timeout);
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(20));
        };
        // The compiler has exited; something it started may still hold the pipes open.
        let mut out = [Vec::new(), Vec::new()];
        for _ in 0..expected {
            // (A moment's grace for a compile that finished just at the deadline.)
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(200));
            match rx.recv_timeout(left) {
                Ok((i, buf)) => out[i] = buf,
                Err(_) => return Err(RunFail::Timeout),
            }
        }
        let [stdout, stderr] = out;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }

    /// Compiles `source` into a new entry at `path`; returns the object's bytes.
    fn compile_into(
        &self,
        source: &str,
        key: u128,
        inputs: &[u8; 32],
        path: &Path,
    ) -> Result<Vec<u8>> {
        let tmp = self.temp_file(key, ".so.tmp")?.into_temp_path();
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
        let cache_err = |p: &Path, e: &dyn std::fmt::Display| Error::Cache {
            path: p.to_path_buf(),
            message: e.to_string(),
        };
        std::fs::OpenOptions::new()
            .append(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&trailer(inputs, &object)))
            .map_err(|e| cache_err(&tmp, &e))?;
        // Atomic replace: a racing process writes identical content.
        tmp.persist(path).map_err(|e| cache_err(path, &e.error))?;
        Ok(object)
    }

    fn compile_error(&self, source: &str, key: u128, status: String, mut stderr: String) -> Error {
        let source_path = self.cache_dir.join(format!("k_{key:032x}.c"));
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

/// Kills a child's process group (it leads one: `process_group(0)`) and reaps it.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: plain syscall. The child is not reaped yet, so its pid still names its
        // group (and nothing else).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn split_command(name: &str, line: &str) -> std::result::Result<(String, Vec<String>), SetupError> {
    let bad = |message: String| SetupError::BadSetting {
        name: name.into(),
        value: line.into(),
        message,
    };
    let mut words = shell_words::split(line)
        .map_err(|e| {
            bad(format!(
                "cannot be split into words like a shell would: {e}"
            ))
        })?
        .into_iter();
    match words.next() {
        None => Ok(("cc".into(), Vec::new())),
        Some(cc) if cc.is_empty() => Err(bad("the compiler's name is empty".into())),
        Some(cc) => Ok((cc, words.collect())),
    }
}

/// `UOPKIT_CC_TIMEOUT`: a positive number of seconds.
fn parse_timeout(v: &str) -> std::result::Result<Duration, String> {
    let bad = || "expected a positive number of seconds, such as 120 or 2.5".to_string();
    let secs: f64 = v.trim().parse().map_err(|_| bad())?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(bad());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

fn key_of(inputs: &[u8; 32]) -> u128 {
    let mut k = [0u8; 16];
    k.copy_from_slice(&inputs[..16]);
    u128::from_be_bytes(k)
}

fn entry_path(dir: &Path, key: u128) -> PathBuf {
    dir.join(format!("k_{key:032x}.so"))
}

fn checksum(inputs: &[u8; 32], object: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(ENTRY_TAG);
    h.update(inputs);
    h.update(object);
    h.finalize().into()
}

fn trailer(inputs: &[u8; 32], object: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER_LEN);
    t.extend_from_slice(TRAILER_MAGIC);
    t.extend_from_slice(&(object.len() as u64).to_le_bytes());
    t.extend_from_slice(inputs);
    t.extend_from_slice(&checksum(inputs, object));
    t
}

/// Checks a whole entry file; returns the object's length, or what is wrong. `inputs`, when
/// known, must equal the trailer's digest; the file's key must be the digest's prefix.
fn check_entry(
    bytes: &[u8],
    inputs: Option<&[u8; 32]>,
    key: u128,
) -> std::result::Result<usize, String> {
    if bytes.is_empty() {
        return Err("is empty".into());
    }
    let Some(obj_len) = bytes.len().checked_sub(TRAILER_LEN) else {
        return Err(format!(
            "is too short ({} bytes) to hold a checksum trailer",
            bytes.len()
        ));
    };
    let (object, t) = bytes.split_at(obj_len);
    if &t[..8] != TRAILER_MAGIC {
        return Err("has no checksum trailer (truncated, or not written by this uopkit)".into());
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&t[8..16]);
    if u64::from_le_bytes(len) != obj_len as u64 {
        return Err("has the wrong length for its trailer (truncated or extended)".into());
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&t[16..48]);
    if t[48..] != checksum(&digest, object) {
        return Err("fails its checksum (corrupted)".into());
    }
    if key_of(&digest) != key || inputs.is_some_and(|i| *i != digest) {
        return Err("holds the kernel of another unit (swapped or copied)".into());
    }
    check_elf(object).map_err(|why| format!("is not a usable shared object ({why})"))?;
    Ok(obj_len)
}

/// A sanity check of an ELF shared object: header, type, and that the program headers,
/// loadable segments and section headers lie inside the file.
fn check_elf(b: &[u8]) -> std::result::Result<(), String> {
    if b.len() < 16 || &b[..4] != b"\x7fELF" {
        return Err("no ELF header".into());
    }
    let is64 = match b[4] {
        1 => false,
        2 => true,
        c => return Err(format!("unknown ELF class {c}")),
    };
    let le = match b[5] {
        1 => true,
        2 => false,
        d => return Err(format!("unknown ELF data encoding {d}")),
    };
    let rd = |off: u64, n: usize| -> Option<u64> {
        let off = usize::try_from(off).ok()?;
        let s = b.get(off..off.checked_add(n)?)?;
        Some(s.iter().enumerate().fold(0u64, |v, (i, &x)| {
            let shift = if le { 8 * i } else { 8 * (n - 1 - i) };
            v | (x as u64) << shift
        }))
    };
    let truncated = || "truncated ELF header".to_string();
    let (w, ehsize, phdr_min) = if is64 { (8, 64, 56) } else { (4, 52, 32) };
    if b.len() < ehsize {
        return Err(truncated());
    }
    // Offsets of e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum.
    let [o_ph, o_sh, o_phe, o_phn, o_she, o_shn] = if is64 {
        [32, 40, 54, 56, 58, 60]
    } else {
        [28, 32, 42, 44, 46, 48]
    };
    let field = |off: u64, n| rd(off, n).ok_or_else(truncated);
    let e_type = field(16, 2)?;
    let (phoff, shoff) = (field(o_ph, w)?, field(o_sh, w)?);
    let (phentsize, phnum) = (field(o_phe, 2)?, field(o_phn, 2)?);
    let (shentsize, shnum) = (field(o_she, 2)?, field(o_shn, 2)?);
    if e_type != 3 {
        return Err(format!("ELF type {e_type}, not a shared object"));
    }
    let len = b.len() as u64;
    let fits = |off: u64, size: u64| off.checked_add(size).is_some_and(|end| end <= len);
    if phnum == 0 || phentsize < phdr_min {
        return Err("no program headers".into());
    }
    if !fits(phoff, phentsize * phnum) {
        return Err("program headers past the end of the file (truncated)".into());
    }
    for i in 0..phnum {
        let p = phoff + i * phentsize;
        let bad = || "a program header cannot be read".to_string();
        let p_type = rd(p, 4).ok_or_else(bad)?;
        let (off, filesz) = if is64 {
            (rd(p + 8, 8), rd(p + 32, 8))
        } else {
            (rd(p + 4, 4), rd(p + 16, 4))
        };
        let (off, filesz) = (off.ok_or_else(bad)?, filesz.ok_or_else(bad)?);
        if p_type == 1 && !fits(off, filesz) {
            return Err("a loadable segment extends past the end of the file (truncated)".into());
        }
    }
    if shoff != 0 && !fits(shoff, shentsize * shnum) {
        return Err("section headers past the end of the file (truncated)".into());
    }
    Ok(())
}

/// The CPU feature flags (part of the key because of `-march=native`); empty if unknown.
fn cpu_features() -> &'static str {
    static FEATURES: OnceLock<String> = OnceLock::new();
    FEATURES.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let pick = |key: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        format!(
            "{}|{}|{}",
            std::env::consts::ARCH,
            pick("model name"),
            pick("flags")
        )
    })
}

// ---------------------------------------------------------------------------------------
// The directory.

/// The cache directory and whether it was given by `UOPKIT_CACHE_DIR`, from `var`.
fn cache_dir_from(var: impl Fn(&str) -> Option<OsString>) -> (PathBuf, bool) {
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
    let (dir, explicit) = cache_dir_from(|k| std::env::var_os(k));
    if !explicit {
        check_owner(&dir, false).map_err(|e| e.to_error())?;
    }
    Ok(dir)
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
    /// `k_*.so`, with the key its name gives (if it has the form `k_<32 hex>.so`).
    Entry(Option<u128>),
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
    if let Some(hex) = rest.strip_suffix(".so") {
        let key = (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u128::from_str_radix(hex, 16).ok())
            .flatten();
        return Some(Own::Entry(key));
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
    /// `k_*.so` files, good or bad.
    pub entries: usize,
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

/// Counts `dir`'s files and checks every entry (trailer, checksum, name, ELF header) without
/// loading any.
pub fn stats(dir: &Path) -> std::io::Result<CacheStats> {
    let mut s = CacheStats {
        dir: dir.to_path_buf(),
        exists: dir.is_dir(),
        entries: 0,
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
            Own::Entry(key) => {
                s.entries += 1;
                let good = match (key, std::fs::read(&path)) {
                    (Some(k), Ok(bytes)) => check_entry(&bytes, None, k).is_ok(),
                    (_, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                        s.entries -= 1;
                        s.bytes -= md.len();
                        continue;
                    }
                    _ => false,
                };
                if !good {
                    s.bad_entries += 1;
                }
            }
        }
    }
    Ok(s)
}

/// Removes uopkit's own files from `dir` (`k_*.so`, `k_*.meta`, `k_*.c`, `.k_*.tmp`; nothing
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
    fn fnv1a_128_known_vectors() {
        // Reference values of FNV-1a 128 for "" and "a".
        assert_eq!(Fnv128::new().finish(), 0x6c62272e07bb014262b821756295c58d);
        let mut h = Fnv128::new();
        h.write(b"a");
        assert_eq!(h.finish(), 0xd228cb696f1a8caf78912b704e4a8964);
    }

    #[test]
    fn fields_are_delimited() {
        let mut a = Fnv128::new();
        a.field(b"ab");
        a.field(b"c");
        let mut b = Fnv128::new();
        b.field(b"a");
        b.field(b"bc");
        assert_ne!(a.finish(), b.finish());
    }

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
    fn timeouts_and_command_lines_parse() {
        assert_eq!(parse_timeout("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_timeout(" 0.5 "), Ok(Duration::from_millis(500)));
        for bad in ["", "0", "-1", "abc", "NaN", "inf", "1e400"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
        let (cc, args) = split_command("UOPKIT_CC", "gcc -O3 '-DX=a b'").unwrap();
        assert_eq!(
            (cc.as_str(), args),
            ("gcc", vec!["-O3".to_string(), "-DX=a b".into()])
        );
        assert_eq!(split_command("UOPKIT_CC", "  ").unwrap().0, "cc");
        let e = split_command("UOPKIT_CC", "gcc 'oops")
            .unwrap_err()
            .to_error();
        assert!(
            matches!(&e, Error::BadSetting { name, .. } if name == "UOPKIT_CC"),
            "{e}"
        );
    }

    #[test]
    fn own_files_are_recognized() {
        let k = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            own_file(&format!("k_{k}.so")),
            Some(Own::Entry(Some(0x0123456789abcdef0123456789abcdef)))
        );
        assert_eq!(own_file("k_zz.so"), Some(Own::Entry(None)));
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

    #[test]
    fn elf_check_rejects_junk() {
        assert!(check_elf(b"").is_err());
        assert!(check_elf(b"hello world, not an elf").is_err());
        let mut hdr = vec![0u8; 64];
        hdr[..4].copy_from_slice(b"\x7fELF");
        hdr[4] = 2;
        hdr[5] = 1;
        hdr[16] = 3;
        assert!(check_elf(&hdr).unwrap_err().contains("program headers"));
        // Program headers past the end.
        hdr[32] = 64; // e_phoff
        hdr[54] = 56; // e_phentsize
        hdr[56] = 1; // e_phnum
        assert!(check_elf(&hdr).unwrap_err().contains("truncated"));
    }
}
