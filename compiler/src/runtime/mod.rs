//! Runtimes: devices that hold buffers, compile rendered units and launch their kernels.
//!
//! The interface is object safe so that a harness can hold `Arc<dyn Device>` for `CPU:0`,
//! `CPU:1`, `CUDA:0`, … side by side. Handles are runtime-neutral structs that carry the
//! runtime's own state as `dyn Any` (a CPU allocation today; a `CudaSlice`/`hipDeviceptr_t`
//! and a module later), downcast by the runtime that made them:
//!
//! * [`Buffer`]: `bytes` of device memory owned by one device ([`Buffer::device`]);
//! * [`Unit`]: what a renderer produces, source text plus each kernel's symbol and params
//!   (defined by `render`, the stage before; re-exported here);
//! * [`Compiled`]: a unit compiled (and loaded) by one runtime, kernels looked up by name.
//!
//! Operations on one device are ordered as on a GPU stream: each call completes before the
//! next one on that device starts (the CPU runtime runs them synchronously under a
//! per-device lock, so [`Device::synchronize`] has nothing to wait for). Copies between two
//! devices of one runtime are [`Device::copy_to`]; across runtimes use [`copy_between`],
//! which stages through the host.
//!
//! Errors are values ([`Error`]); bad arguments (a buffer of another device, a buffer too
//! small for a kernel's parameter, a wrong count) are reported before any kernel runs.

pub mod cache;
pub mod cpu;
pub mod cuda;
pub mod fpenv;
pub mod hip;
pub mod threads;

use std::any::Any;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use crate::render::{KernelSig, Lang, Unit};
pub use cache::CCompiler;
pub use cpu::CpuDevice;

/// Errors of the runtimes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The C compiler could not be started (missing binary, no permission, …).
    #[error(
        "C compiler '{cc}' could not be run: {message} (set UOPKIT_CC to a working C compiler)"
    )]
    CompilerUnavailable { cc: String, message: String },
    /// The C compiler ran and rejected the source.
    #[error("C compiler '{cc}' failed ({status}); the source is kept at {}\n{stderr}", source_path.display())]
    Compile {
        cc: String,
        status: String,
        stderr: String,
        source_path: PathBuf,
    },
    /// The C compiler ran longer than its timeout (`UOPKIT_CC_TIMEOUT`, default 120 s) and
    /// was killed with its process group.
    #[error("C compiler '{cc}' did not finish within {} s and was killed (UOPKIT_CC_TIMEOUT sets the limit in seconds)", timeout.as_secs_f64())]
    CompileTimeout { cc: String, timeout: Duration },
    /// A setting (an environment variable such as `UOPKIT_CC_TIMEOUT`, named by `name`) has a
    /// value that cannot be used.
    #[error("{name}={value:?}: {message}")]
    BadSetting {
        name: String,
        value: String,
        message: String,
    },
    /// The default kernel cache directory belongs to another user: kernels are never loaded
    /// from it.
    #[error("kernel cache {} belongs to uid {owner}, not to this user (uid {uid}); refusing to use it (set UOPKIT_CACHE_DIR to choose another directory)", path.display())]
    CacheNotOwned { path: PathBuf, owner: u32, uid: u32 },
    /// The kernel cache directory could not be used.
    #[error("kernel cache {}: {message}", path.display())]
    Cache { path: PathBuf, message: String },
    /// A compiled library could not be loaded, or lacks a kernel's symbol.
    #[error("loading {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("kernel '{0}' is not in this compiled unit")]
    UnknownKernel(String),
    #[error("kernel '{kernel}' takes {expected} buffers, {got} given")]
    ArgCount {
        kernel: String,
        expected: usize,
        got: usize,
    },
    #[error("kernel '{kernel}' argument {index}: the buffer has {got} bytes, the parameter needs {need}")]
    BufferTooSmall {
        kernel: String,
        index: usize,
        got: usize,
        need: usize,
    },
    #[error("a buffer of {buffer_device} was given to {device}")]
    WrongDevice {
        device: String,
        buffer_device: String,
    },
    #[error("{what}: {got} bytes where {expected} are expected")]
    SizeMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("cannot allocate {0} bytes")]
    OutOfMemory(usize),
    #[error("unknown device '{0}' (expected CPU, CPU:n, CUDA:n or HIP:n)")]
    UnknownDevice(String),
    #[error("{0}")]
    Unsupported(String),
    /// A GPU runtime or compiler library is absent or has no device: `what` names it
    /// (`CUDA driver`, `NVRTC`, `HIP runtime`, `hiprtc`), `reason` says what was looked for.
    #[error("{what} unavailable: {reason}")]
    Unavailable { what: &'static str, reason: String },
    /// A GPU runtime compiler (NVRTC, hiprtc) rejected a unit: its log, and where the source
    /// was kept.
    #[error("{compiler} failed to compile the unit ({options}); the source is kept at {}\n{log}", source_path.display())]
    GpuCompile {
        compiler: &'static str,
        options: String,
        log: String,
        source_path: PathBuf,
    },
    /// A GPU driver call failed: the call, and the driver's own code and message.
    #[error("{runtime} {call} failed: {message} (code {code})")]
    Driver {
        runtime: &'static str,
        call: &'static str,
        code: i64,
        message: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Memory owned by one device. Dropping it frees the memory.
pub struct Buffer {
    device: String,
    bytes: usize,
    raw: Box<dyn Any + Send + Sync>,
}

impl Buffer {
    /// For runtimes: wraps the runtime's own allocation `raw`.
    pub fn new(device: impl Into<String>, bytes: usize, raw: Box<dyn Any + Send + Sync>) -> Self {
        Buffer {
            device: device.into(),
            bytes,
            raw,
        }
    }

    /// The name of the device that owns the buffer (`"CPU:0"`).
    pub fn device(&self) -> &str {
        &self.device
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// For runtimes: the allocation, if it is a `T`.
    pub fn raw<T: Any>(&self) -> Option<&T> {
        self.raw.downcast_ref()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({}, {} bytes)", self.device, self.bytes)
    }
}

/// A compiled unit. Cheap to clone; keeps the loaded code alive.
#[derive(Clone)]
pub struct Compiled {
    runtime: &'static str,
    kernels: Vec<KernelSig>,
    raw: Arc<dyn Any + Send + Sync>,
}

impl Compiled {
    /// For runtimes: wraps the runtime's own compiled object `raw`.
    pub fn new(
        runtime: &'static str,
        kernels: Vec<KernelSig>,
        raw: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        Compiled {
            runtime,
            kernels,
            raw,
        }
    }

    /// The runtime that compiled it (`"CPU"`).
    pub fn runtime(&self) -> &'static str {
        self.runtime
    }

    pub fn kernels(&self) -> &[KernelSig] {
        &self.kernels
    }

    pub fn kernel(&self, name: &str) -> Option<&KernelSig> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// For runtimes: the compiled object, if it is a `T`.
    pub fn raw<T: Any>(&self) -> Option<&T> {
        self.raw.downcast_ref()
    }
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.kernels.iter().map(|k| k.name.as_str()).collect();
        write!(f, "Compiled({}, {names:?})", self.runtime)
    }
}

/// A device of some runtime.
pub trait Device: Send + Sync + fmt::Debug {
    /// `"CPU:0"`, `"CUDA:1"`, …
    fn name(&self) -> &str;
    /// The runtime's name: `"CPU"`, `"CUDA"`, `"HIP"`.
    fn runtime(&self) -> &'static str;
    /// The language [`Device::compile`] takes (`exec` renders with that language's
    /// renderer, `crate::render::renderer`).
    fn lang(&self) -> Lang;
    /// Allocates `bytes` bytes (zeroed on the CPU; contents unspecified elsewhere).
    fn alloc(&self, bytes: usize) -> Result<Buffer>;
    /// Host → device; `data.len()` must equal the buffer's size.
    fn copy_in(&self, dst: &Buffer, data: &[u8]) -> Result<()>;
    /// Device → host: the buffer's bytes.
    fn copy_out(&self, src: &Buffer) -> Result<Vec<u8>>;
    /// Compiles and loads a unit for this device.
    fn compile(&self, unit: &Unit) -> Result<Compiled>;
    /// Runs kernel `kernel` of `prog` with `args[i]` bound to parameter i; returns once the
    /// kernel has finished (or, on an asynchronous runtime, once it is queued: see
    /// [`Device::synchronize`]).
    fn launch(&self, prog: &Compiled, kernel: &str, args: &[&Buffer]) -> Result<()>;
    /// Copies `src` (on this device) into `dst` on `dst_device`, a device of the same runtime
    /// (or this one). Sizes must be equal. Other runtimes: [`copy_between`].
    fn copy_to(&self, src: &Buffer, dst_device: &dyn Device, dst: &Buffer) -> Result<()>;
    /// Waits for everything queued on this device.
    fn synchronize(&self) -> Result<()>;
    /// For downcasting in [`Device::copy_to`].
    fn as_any(&self) -> &dyn Any;
}

/// Copies between any two devices: directly within one runtime, through the host otherwise.
pub fn copy_between(
    src_dev: &dyn Device,
    src: &Buffer,
    dst_dev: &dyn Device,
    dst: &Buffer,
) -> Result<()> {
    if src_dev.runtime() == dst_dev.runtime() {
        return src_dev.copy_to(src, dst_dev, dst);
    }
    check_copy_sizes(src, dst)?;
    let host = src_dev.copy_out(src)?;
    dst_dev.copy_in(dst, &host)
}

/// The environment variable naming what must be available here (`nvrtc,hiprtc` in CI,
/// comma-separated): for those, an absent library or device is a failure of the tests and
/// trials that need it, not a skip.
pub const REQUIRE_ENV: &str = "UOPKIT_REQUIRE_BACKENDS";

/// Whether [`REQUIRE_ENV`] names `what` (a backend: `nvrtc`, `hiprtc`, `cuda`, …).
pub fn required(what: &str) -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v.split(',').any(|b| b.trim() == what))
}

/// Checks a launch's buffers against the kernel's parameters (count, then each buffer's size
/// against its parameter's elements): what every runtime does before running a kernel.
/// Which device each buffer belongs to is the runtime's own check.
pub fn check_args(sig: &KernelSig, args: &[&Buffer]) -> Result<()> {
    if args.len() != sig.params.len() {
        return Err(Error::ArgCount {
            kernel: sig.name.clone(),
            expected: sig.params.len(),
            got: args.len(),
        });
    }
    for (i, (buf, p)) in args.iter().zip(&sig.params).enumerate() {
        let need = p.size.saturating_mul(p.dtype.itemsize());
        if buf.bytes() < need {
            return Err(Error::BufferTooSmall {
                kernel: sig.name.clone(),
                index: i,
                got: buf.bytes(),
                need,
            });
        }
    }
    Ok(())
}

/// `data` must fill `dst` exactly (every runtime's `copy_in`).
pub fn check_copy_in(dst: &Buffer, data: &[u8]) -> Result<()> {
    if data.len() != dst.bytes() {
        return Err(Error::SizeMismatch {
            what: "copy_in data",
            expected: dst.bytes(),
            got: data.len(),
        });
    }
    Ok(())
}

/// A copy's source and destination have one size (every runtime's `copy_to`).
pub fn check_copy_sizes(src: &Buffer, dst: &Buffer) -> Result<()> {
    if src.bytes() != dst.bytes() {
        return Err(Error::SizeMismatch {
            what: "copy destination",
            expected: src.bytes(),
            got: dst.bytes(),
        });
    }
    Ok(())
}

/// The runtime's own program `P` inside `prog` and the signature of `kernel`, for a launch on
/// `device`: [`Error::Unsupported`] when `prog` was compiled by another runtime or for
/// another device (`mine` says), [`Error::UnknownKernel`] when it has no such kernel.
pub fn program_for<'a, P: Any>(
    prog: &'a Compiled,
    kernel: &str,
    device: &str,
    mine: impl Fn(&P) -> bool,
) -> Result<(&'a P, &'a KernelSig)> {
    let p = prog.raw::<P>().filter(|p| mine(p)).ok_or_else(|| {
        Error::Unsupported(format!(
            "a program compiled by {} for another device cannot run on {device}",
            prog.runtime()
        ))
    })?;
    let sig = prog
        .kernel(kernel)
        .ok_or_else(|| Error::UnknownKernel(kernel.to_string()))?;
    Ok((p, sig))
}

/// Keeps the source of a unit that a GPU compiler rejected, for its error message: written
/// atomically as `rejected-<sha256 prefix>.<ext>` in the kernel cache directory (created if
/// needed), or in the temp directory when that cannot be used.
pub fn keep_rejected_source(source: &str, ext: &str) -> PathBuf {
    use sha2::Digest as _;
    use std::io::Write as _;
    let digest = sha2::Sha256::digest(source.as_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let dir = cache::cache_dir_from_env()
        .ok()
        .filter(|d| cache::prepare_cache_dir(d, false).is_ok())
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("rejected-{name}.{ext}"));
    let written = tempfile::NamedTempFile::new_in(&dir).and_then(|mut f| {
        f.write_all(source.as_bytes())?;
        f.persist(&path).map_err(|e| e.error)?;
        Ok(())
    });
    match written {
        Ok(()) => path,
        Err(_) => PathBuf::from(format!("<not kept: {} is not writable>", dir.display())),
    }
}

/// Parses a device name (`"CPU"` = `"CPU:0"`, `"CPU:3"`, `"CUDA:0"`, …) into runtime and
/// ordinal. Only the name's form is checked.
pub fn parse_device(name: &str) -> Result<(&str, usize)> {
    let (rt, ord) = match name.split_once(':') {
        Some((rt, n)) => (
            rt,
            n.parse::<usize>()
                .map_err(|_| Error::UnknownDevice(name.to_string()))?,
        ),
        None => (name, 0),
    };
    match rt {
        "CPU" | "CUDA" | "HIP" => Ok((rt, ord)),
        _ => Err(Error::UnknownDevice(name.to_string())),
    }
}

/// The process-wide device for `name`: `"CPU:n"` gives the same [`CpuDevice`] on every call
/// (with the default compiler, see [`CCompiler::global`]); `"CUDA:n"` and `"HIP:n"` the
/// process's device of that ordinal, or [`Error::Unavailable`] when the runtime's library or
/// the device is absent (probed first: nothing is called in a library that is not there).
pub fn open(name: &str) -> Result<Arc<dyn Device>> {
    match parse_device(name)? {
        ("CPU", n) => Ok(CpuDevice::get(n)),
        ("CUDA", n) => cuda::CudaDevice::get(n),
        ("HIP", n) => hip::HipDevice::get(n),
        (rt, _) => Err(Error::Unsupported(format!(
            "the {rt} runtime is not available in this build"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names() {
        assert_eq!(parse_device("CPU").unwrap(), ("CPU", 0));
        assert_eq!(parse_device("CPU:2").unwrap(), ("CPU", 2));
        assert_eq!(parse_device("CUDA:1").unwrap(), ("CUDA", 1));
        assert!(matches!(
            parse_device("TPU:0"),
            Err(Error::UnknownDevice(_))
        ));
        assert!(matches!(
            parse_device("CPU:x"),
            Err(Error::UnknownDevice(_))
        ));
        // No CUDA on the test machine, or a device: never a panic.
        if let Err(e) = open("CUDA:0") {
            assert!(matches!(e, Error::Unavailable { .. }), "{e}");
        }
        let a = open("CPU:1").unwrap();
        let b = open("CPU:1").unwrap();
        assert_eq!(a.name(), "CPU:1");
        assert!(std::ptr::addr_eq(Arc::as_ptr(&a), Arc::as_ptr(&b)));
    }

    /// A program of another runtime is refused with the runtime that compiled it named.
    #[test]
    fn a_program_of_another_runtime_is_refused_by_name() {
        let prog = Compiled::new("HIP", vec![], Arc::new(0u8));
        assert_eq!(prog.runtime(), "HIP");
        match program_for::<String>(&prog, "k", "CPU:0", |_| true) {
            Err(Error::Unsupported(msg)) => assert_eq!(
                msg,
                "a program compiled by HIP for another device cannot run on CPU:0"
            ),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}
