//! Compiling C at run time with the system C compiler, behind a content-addressed cache.
//!
//! * Compiler: `cc`, or the program named by `UOPKIT_CC`; flags
//!   `-O2 -march=native -ffp-contract=off -shared -fPIC -x c - -o <tmp> -lm` with the source on
//!   stdin (`-ffp-contract=off` keeps `a*b+c` unfused; `-ffast-math` is never used).
//! * Cache: directory `UOPKIT_CACHE_DIR`, default `<temp dir>/uopkit-kernel-cache`; file
//!   `k_<key>.so` where key is the 128-bit FNV-1a hash of source ‖ flags ‖ compiler path ‖
//!   `cc --version` (asked once per compiler) ‖ the CPU's feature flags (`-march=native`).
//!   The object is compiled into a temporary file in that directory and renamed into place
//!   without clobbering, so parallel compiles of one unit are safe; an existing file is
//!   loaded without running the compiler.
//! * A failed compile keeps the source as `k_<key>.c` and reports its path with the
//!   compiler's stderr.
//!
//! Loaded libraries are never unloaded (kernels may run on other threads).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use libloading::Library;

use super::{Error, Result};

/// The flags before `-x c - -o <out> -lm`.
pub const CFLAGS: [&str; 5] = [
    "-O2",
    "-march=native",
    "-ffp-contract=off",
    "-shared",
    "-fPIC",
];

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

/// A C compiler with its kernel cache.
#[derive(Debug)]
pub struct CCompiler {
    cc: String,
    cache_dir: PathBuf,
    /// `cc --version` output, or why it could not be run.
    version: OnceLock<std::result::Result<String, String>>,
    spawns: AtomicU64,
    /// Libraries this compiler loaded, by cache key (only looked up, never iterated).
    loaded: Mutex<HashMap<u128, Arc<Library>>>,
}

impl CCompiler {
    /// A compiler running `cc` with its cache in `cache_dir`.
    pub fn new(cc: impl Into<String>, cache_dir: impl Into<PathBuf>) -> Self {
        CCompiler {
            cc: cc.into(),
            cache_dir: cache_dir.into(),
            version: OnceLock::new(),
            spawns: AtomicU64::new(0),
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// `UOPKIT_CC` (default `cc`) and `UOPKIT_CACHE_DIR` (default
    /// `<temp dir>/uopkit-kernel-cache`).
    pub fn from_env() -> Self {
        let cc = std::env::var("UOPKIT_CC")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "cc".into());
        let dir = std::env::var_os("UOPKIT_CACHE_DIR")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("uopkit-kernel-cache"));
        Self::new(cc, dir)
    }

    /// The process-wide compiler, made by [`CCompiler::from_env`] on first use.
    pub fn global() -> Arc<CCompiler> {
        static GLOBAL: OnceLock<Arc<CCompiler>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Self::from_env())).clone()
    }

    pub fn cc(&self) -> &str {
        &self.cc
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// How many times this compiler ran the C compiler on a source (cache misses).
    pub fn spawns(&self) -> u64 {
        self.spawns.load(Ordering::Relaxed)
    }

    fn version(&self) -> Result<&str> {
        let v = self.version.get_or_init(|| {
            let out = Command::new(&self.cc)
                .arg("--version")
                .stdin(Stdio::null())
                .output();
            match out {
                Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
                Ok(o) => Err(format!(
                    "'{} --version' failed ({}): {}",
                    self.cc,
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => Err(e.to_string()),
            }
        });
        v.as_deref().map_err(|m| Error::CompilerUnavailable {
            cc: self.cc.clone(),
            message: m.clone(),
        })
    }

    /// The cache key of `source` for this compiler.
    pub fn key(&self, source: &str) -> Result<u128> {
        let mut h = Fnv128::new();
        h.field(b"uopkit-c-1");
        h.field(source.as_bytes());
        for f in CFLAGS {
            h.field(f.as_bytes());
        }
        h.field(self.cc.as_bytes());
        h.field(self.version()?.as_bytes());
        h.field(cpu_features().as_bytes());
        Ok(h.finish())
    }

    /// The path the compiled `source` has (or will have) in the cache.
    pub fn object_path(&self, source: &str) -> Result<PathBuf> {
        Ok(self
            .cache_dir
            .join(format!("k_{:032x}.so", self.key(source)?)))
    }

    /// Compiles `source` (or finds it in the cache) and loads it.
    pub fn load(&self, source: &str) -> Result<(Arc<Library>, PathBuf)> {
        let key = self.key(source)?;
        let path = self.cache_dir.join(format!("k_{key:032x}.so"));
        if let Some(lib) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok((lib.clone(), path));
        }
        if !path.exists() {
            self.compile_into(source, key, &path)?;
        }
        // SAFETY: the library is our own compiled kernel code; its initialisers only set up
        // the prelude's function pointers.
        let lib = unsafe { Library::new(&path) }.map_err(|e| Error::Load {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let lib = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert(Arc::new(lib))
            .clone();
        Ok((lib, path))
    }

    fn compile_into(&self, source: &str, key: u128, path: &Path) -> Result<()> {
        let dir = &self.cache_dir;
        let cache_err = |e: std::io::Error| Error::Cache {
            path: dir.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(cache_err)?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".k_{key:032x}."))
            .suffix(".so.tmp")
            .tempfile_in(dir)
            .map_err(cache_err)?
            .into_temp_path();
        self.spawns.fetch_add(1, Ordering::Relaxed);
        let mut child = Command::new(&self.cc)
            .args(CFLAGS)
            .args(["-x", "c", "-", "-o"])
            .arg(&*tmp)
            .arg("-lm")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::CompilerUnavailable {
                cc: self.cc.clone(),
                message: e.to_string(),
            })?;
        // Feed stdin from another thread so a compiler that writes a lot of diagnostics
        // before reading all of its input cannot deadlock us.
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let src = source.to_owned();
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(src.as_bytes());
        });
        let out = child
            .wait_with_output()
            .map_err(|e| Error::CompilerUnavailable {
                cc: self.cc.clone(),
                message: e.to_string(),
            })?;
        let _ = feeder.join();
        if !out.status.success() {
            let source_path = dir.join(format!("k_{key:032x}.c"));
            let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if let Err(e) = std::fs::write(&source_path, source) {
                stderr.push_str(&format!("\n(could not keep the source: {e})"));
            }
            return Err(Error::Compile {
                cc: self.cc.clone(),
                status: out.status.to_string(),
                stderr,
                source_path,
            });
        }
        match tmp.persist_noclobber(path) {
            Ok(()) => Ok(()),
            // Another thread or process finished the same unit first: same content, use it.
            Err(e) if path.exists() => {
                drop(e);
                Ok(())
            }
            Err(e) => Err(Error::Cache {
                path: path.to_path_buf(),
                message: e.error.to_string(),
            }),
        }
    }
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
}
