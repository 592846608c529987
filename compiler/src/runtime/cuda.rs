//! The CUDA runtime: NVRTC compiles CUDA C units, the driver API (through `cudarc`, loaded
//! at run time) holds buffers and launches kernels on `CUDA:n` devices.
//!
//! Nothing is linked: `cudarc`'s `dynamic-loading` finds `libcuda` and `libnvrtc` on the
//! loader's path when first asked. Both are probed before any call ([`nvrtc_available`],
//! [`device_count`]), a missing library or device is an [`Error::Unavailable`] with the
//! reason, and every call into `cudarc` runs under `catch_unwind` (it panics on a missing
//! library or symbol): the project builds and its tests run on machines without CUDA.
//!
//! Exactness ([`NVRTC_OPTIONS`]): no contraction of `a*b+c` into FMA (`--fmad=false`),
//! IEEE round-to-nearest division and square root (`--prec-div=true --prec-sqrt=true`),
//! subnormals kept (`--ftz=false`), never `--use_fast_math`. With these, `+ − × ÷ √` and
//! `fma` are the IEEE operations the oracle rounds once, and the prelude's exact helpers
//! (float16/bfloat16/fp8, integer wrap, floor division) are the C backend's own text. The
//! transcendentals call the device's double `exp2`/`log2`/`sin`/`pow`, whose documented
//! error the CUDA allowance manifest declares (`manifests/allowances/cuda.json`).
//!
//! Units are compiled for a real architecture (`sm_90` unless [`ARCH_ENV`] or the device
//! says otherwise) to a CUBIN, so NVRTC runs the whole back end (ptxas) even on a machine
//! with no GPU, and a device never JIT-compiles PTX of a newer ISA than its driver knows.
//!
//! Every operation completes before it returns (copies are synchronous; a launch waits for
//! the kernel), under the device's lock, as [`super::Device`] documents. Copies between two
//! CUDA devices are peer copies (`cuMemcpyPeer`, which the driver stages itself where peer
//! access is not possible), and go through the host if the driver refuses.

use std::any::Any;
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::{result as cu, sys as cusys, CudaContext, DriverError};
use cudarc::nvrtc::{result as nv, sys as nvsys};

use super::{Buffer, Compiled, Device, Error, Lang, Result, Unit};

/// NVRTC's flags for exactness (see the module documentation); the architecture comes after.
pub const NVRTC_OPTIONS: [&str; 4] = [
    "--fmad=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--ftz=false",
];

/// The environment variable that names the architecture NVRTC compiles for (`sm_90`,
/// `sm_80`, or a virtual `compute_90` for PTX).
pub const ARCH_ENV: &str = "UOPKIT_CUDA_ARCH";

/// The architecture of compile checks without a device: Hopper (the H100/H200 generation).
pub const DEFAULT_ARCH: &str = "sm_90";

/// What the NVRTC library is called in messages.
const NVRTC: &str = "NVRTC";
const DRIVER: &str = "CUDA driver";

/// Runs `f`, turning a panic inside `cudarc` (a library or symbol it could not load) into
/// [`Error::Unavailable`].
fn guarded<T>(what: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic inside cudarc".into());
        Err(Error::Unavailable { what, reason: msg })
    })
}

/// The reason of an [`Error::Unavailable`] (it is wrapped again where it is cached), or the
/// error's text.
fn reason_of(e: Error) -> String {
    match e {
        Error::Unavailable { reason, .. } => reason,
        other => other.to_string(),
    }
}

fn driver_err(call: &'static str, e: DriverError) -> Error {
    let message = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{e:?}"));
    Error::Driver {
        runtime: "CUDA",
        call,
        code: e.0 as i64,
        message,
    }
}

/// Whether NVRTC can be used here (no GPU or driver needed): Ok, or why not. Probed once.
pub fn nvrtc_available() -> std::result::Result<(), String> {
    static PROBE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: only tries to open the library (no call into it).
            if !unsafe { nvsys::is_culib_present() } {
                return Err("libnvrtc was not found on the loader's path (install the PyPI package nvidia-cuda-nvrtc-cu12 and add its nvidia/cuda_nvrtc/lib directory to LD_LIBRARY_PATH)".into());
            }
            nvrtc_version().map(|_| ()).map_err(reason_of)
        })
        .clone()
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    guarded(NVRTC, || {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out-pointers.
        let r = unsafe { nvsys::nvrtcVersion(&mut major, &mut minor) };
        if r != nvsys::nvrtcResult::NVRTC_SUCCESS {
            return Err(Error::Unavailable {
                what: NVRTC,
                reason: format!("nvrtcVersion failed: {r:?}"),
            });
        }
        Ok((major, minor))
    })
}

/// The architecture to compile for: [`ARCH_ENV`], else [`DEFAULT_ARCH`].
pub fn cuda_arch() -> String {
    std::env::var(ARCH_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ARCH.to_string())
}

/// The full NVRTC option list for `arch`.
pub fn nvrtc_options(arch: &str) -> Vec<String> {
    let mut o: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    o.push(format!("--gpu-architecture={arch}"));
    o
}

/// How many times this process ran NVRTC (the rest were answered by the GPU compile cache,
/// in memory or on disk: [`super::cache::GpuCache`]).
pub fn nvrtc_compiles() -> u64 {
    NVRTC_COMPILES.load(Ordering::Relaxed)
}

static NVRTC_COMPILES: AtomicU64 = AtomicU64::new(0);

/// NVRTC's identity for the compile cache: its version and its library files (the
/// `libnvrtc` this process mapped, and the `libnvrtc-builtins` beside it). Found once; None
/// if the library file cannot be found (then nothing is cached on disk).
fn nvrtc_identity() -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| {
        let (major, minor) = nvrtc_version().ok()?;
        let lib = super::cache::gpu::mapped_library("libnvrtc.")?;
        super::cache::gpu::library_identity(
            &format!("NVRTC {major}.{minor}"),
            &lib,
            &["libnvrtc-builtins"],
        )
    })
    .as_deref()
}

/// Compiles a CUDA unit with NVRTC for `arch`, through the process-wide compile cache
/// ([`nvrtc_compile_in`] with [`super::cache::GpuCache::global`]).
pub fn nvrtc_compile(unit: &Unit, arch: &str) -> Result<Vec<u8>> {
    nvrtc_compile_in(unit, arch, super::cache::GpuCache::global())
}

/// Compiles a CUDA unit with NVRTC for `arch`, or finds its image in `cache` (in memory,
/// else checked on disk; rejected units are not kept): a CUBIN for a real architecture
/// (`sm_*`), a NUL-terminated PTX text for a virtual one (`compute_*`); either is a module
/// image the driver loads. A rejected unit is [`Error::GpuCompile`] with NVRTC's log.
pub fn nvrtc_compile_in(
    unit: &Unit,
    arch: &str,
    cache: &super::cache::GpuCache,
) -> Result<Vec<u8>> {
    if unit.lang != Lang::Cuda {
        return Err(Error::Unsupported(format!(
            "NVRTC compiles CUDA C, not {}",
            unit.lang
        )));
    }
    nvrtc_available().map_err(|reason| Error::Unavailable {
        what: NVRTC,
        reason,
    })?;
    let options = nvrtc_options(arch);
    let rejected = |log: String| Error::GpuCompile {
        compiler: NVRTC,
        options: options.join(" "),
        log,
        source_path: super::keep_rejected_source(&unit.source, "cu"),
    };
    // One compile per (source, options, NVRTC build): a schedule over CUDA:0..n compiles its
    // unit once, not once per device, and a unit compiled by an earlier process is read back.
    let compiler = super::cache::gpu::GpuCompiler {
        name: NVRTC,
        identity: nvrtc_identity(),
        options: &options,
    };
    cache.image(&compiler, &unit.source, || {
        let src = CString::new(unit.source.as_bytes())
            .map_err(|_| rejected("the source contains a NUL byte".into()))?;
        nvrtc_run(&src, &options, arch)?.map_err(rejected)
    })
}

/// One NVRTC compile of `src`: the image, or the log (the program is always destroyed); an
/// [`Error::Unavailable`] if NVRTC could not be called.
fn nvrtc_run(
    src: &CString,
    options: &[String],
    arch: &str,
) -> Result<std::result::Result<Vec<u8>, String>> {
    let name = c"uopkit.cu";
    guarded(NVRTC, || {
        let prog = nv::create_program(src, Some(name)).map_err(|e| Error::Unavailable {
            what: NVRTC,
            reason: format!("nvrtcCreateProgram failed: {e:?}"),
        })?;
        NVRTC_COMPILES.fetch_add(1, Ordering::Relaxed);
        let out = compile_program(prog, options, arch.starts_with("sm_"));
        // SAFETY: `prog` came from nvrtcCreateProgram and is destroyed once.
        let _ = unsafe { nv::destroy_program(prog) };
        Ok(out)
    })
}

/// Compiles `prog` and returns its image (CUBIN or PTX), or the log.
fn compile_program(
    prog: nvsys::nvrtcProgram,
    options: &[String],
    cubin: bool,
) -> std::result::Result<Vec<u8>, String> {
    // SAFETY: `prog` is a live program; the options are valid strings.
    let compiled = unsafe { nv::compile_program(prog, options) };
    // SAFETY: as above; the log exists after any compile attempt.
    let log = unsafe { nv::get_program_log(prog) }
        .map(|l| {
            let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    if let Err(e) = compiled {
        return Err(format!("{e:?}\n{log}"));
    }
    if !cubin {
        // SAFETY: a compiled program has PTX.
        let ptx = unsafe { nv::get_ptx(prog) }.map_err(|e| format!("nvrtcGetPTX: {e:?}"))?;
        return Ok(ptx.into_iter().map(|c| c as u8).collect());
    }
    let mut size = 0usize;
    // SAFETY: a compiled program for a real architecture has a CUBIN; `size` is an out-pointer.
    let r = unsafe { nvsys::nvrtcGetCUBINSize(prog, &mut size) };
    if r != nvsys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("nvrtcGetCUBINSize: {r:?}"));
    }
    let mut image = vec![0u8; size];
    // SAFETY: `image` has the `size` bytes NVRTC asked for.
    let r = unsafe { nvsys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast()) };
    if r != nvsys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("nvrtcGetCUBIN: {r:?}"));
    }
    Ok(image)
}

/// How many CUDA devices this machine has, or why none can be used (no driver library,
/// `cuInit` failed). Probed once.
pub fn device_count() -> Result<usize> {
    static PROBE: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            // SAFETY: only tries to open the library.
            if !unsafe { cusys::is_culib_present() } {
                return Err("libcuda (the NVIDIA driver library) was not found".into());
            }
            guarded(DRIVER, || {
                cu::init().map_err(|e| driver_err("cuInit", e))?;
                let n = cu::device::get_count().map_err(|e| driver_err("cuDeviceGetCount", e))?;
                Ok(usize::try_from(n).unwrap_or(0))
            })
            .map_err(reason_of)
        })
        .clone()
        .map_err(|reason| Error::Unavailable {
            what: DRIVER,
            reason,
        })
}

/// Device memory of one CUDA device.
struct CudaMem {
    ptr: cusys::CUdeviceptr,
    owner: u64,
    ctx: Arc<CudaContext>,
}

impl Drop for CudaMem {
    fn drop(&mut self) {
        let ctx = &self.ctx;
        let ptr = self.ptr;
        // A failure to free leaks device memory; nothing else can be done in a destructor.
        let _ = guarded(DRIVER, || {
            ctx.bind_to_thread()
                .map_err(|e| driver_err("cuCtxSetCurrent", e))?;
            // SAFETY: allocated by `cuMemAlloc` in this context, freed once.
            unsafe { cu::free_sync(ptr) }.map_err(|e| driver_err("cuMemFree", e))
        });
    }
}

/// A module loaded into one device's context.
struct CudaProgram {
    module: cusys::CUmodule,
    functions: BTreeMap<String, cusys::CUfunction>,
    owner: u64,
    ctx: Arc<CudaContext>,
}

// SAFETY: the handles are used under the owning device's lock with its context bound, except
// in `Drop`, which binds the context itself (the driver API is thread-safe).
unsafe impl Send for CudaMem {}
unsafe impl Sync for CudaMem {}
unsafe impl Send for CudaProgram {}
unsafe impl Sync for CudaProgram {}

impl Drop for CudaProgram {
    fn drop(&mut self) {
        let (ctx, module) = (&self.ctx, self.module);
        let _ = guarded(DRIVER, || {
            ctx.bind_to_thread()
                .map_err(|e| driver_err("cuCtxSetCurrent", e))?;
            // SAFETY: loaded by `cuModuleLoadData` in this context, unloaded once.
            unsafe { cu::module::unload(module) }.map_err(|e| driver_err("cuModuleUnload", e))
        });
    }
}

/// One CUDA device (its primary context).
pub struct CudaDevice {
    name: String,
    id: u64,
    arch: String,
    ctx: Arc<CudaContext>,
    lock: Mutex<()>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({}, {})", self.name, self.arch)
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl CudaDevice {
    /// The process-wide `CUDA:ordinal`, or why it cannot be used.
    pub fn get(ordinal: usize) -> Result<Arc<dyn Device>> {
        type Slot = std::result::Result<Arc<CudaDevice>, String>;
        static DEVICES: OnceLock<Mutex<BTreeMap<usize, Slot>>> = OnceLock::new();
        let map = DEVICES.get_or_init(|| Mutex::new(BTreeMap::new()));
        let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
        let slot = map
            .entry(ordinal)
            .or_insert_with(|| Self::open(ordinal).map(Arc::new).map_err(reason_of));
        match slot {
            Ok(d) => Ok(d.clone() as Arc<dyn Device>),
            Err(reason) => Err(Error::Unavailable {
                what: DRIVER,
                reason: reason.clone(),
            }),
        }
    }

    fn open(ordinal: usize) -> Result<CudaDevice> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(Error::Unavailable {
                what: DRIVER,
                reason: format!(
                    "CUDA:{ordinal} was asked for; this machine has {n} CUDA device(s)"
                ),
            });
        }
        guarded(DRIVER, || {
            let ctx =
                CudaContext::new(ordinal).map_err(|e| driver_err("cuDevicePrimaryCtxRetain", e))?;
            let arch = match std::env::var(ARCH_ENV) {
                Ok(a) if !a.trim().is_empty() => a,
                _ => {
                    let (major, minor) = ctx
                        .compute_capability()
                        .map_err(|e| driver_err("cuDeviceGetAttribute", e))?;
                    format!("sm_{major}{minor}")
                }
            };
            Ok(CudaDevice {
                name: format!("CUDA:{ordinal}"),
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                arch,
                ctx,
                lock: Mutex::new(()),
            })
        })
    }

    /// The architecture this device's units are compiled for (`sm_90`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Takes the device's lock and binds its context to this thread.
    fn enter(&self) -> Result<MutexGuard<'_, ()>> {
        let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        guarded(DRIVER, || {
            self.ctx
                .bind_to_thread()
                .map_err(|e| driver_err("cuCtxSetCurrent", e))
        })?;
        Ok(g)
    }

    fn mem<'a>(&self, buf: &'a Buffer) -> Result<&'a CudaMem> {
        match buf.raw::<CudaMem>() {
            Some(m) if m.owner == self.id => Ok(m),
            _ => Err(Error::WrongDevice {
                device: self.name.clone(),
                buffer_device: buf.device().to_string(),
            }),
        }
    }

    /// Waits for the context's work and reports a failure of it (an illegal address, a
    /// launch that could not start).
    fn sync(&self, what: &'static str) -> Result<()> {
        guarded(DRIVER, || {
            cu::ctx::synchronize().map_err(|e| driver_err(what, e))
        })
    }
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn runtime(&self) -> &'static str {
        "CUDA"
    }

    fn lang(&self) -> Lang {
        Lang::Cuda
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let _g = self.enter()?;
        let ptr = guarded(DRIVER, || {
            // SAFETY: the context is bound; a nonzero size.
            unsafe { cu::malloc_sync(bytes.max(1)) }.map_err(|e| match e.0 {
                cusys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory(bytes),
                _ => driver_err("cuMemAlloc", e),
            })
        })?;
        Ok(Buffer::new(
            self.name.clone(),
            bytes,
            Box::new(CudaMem {
                ptr,
                owner: self.id,
                ctx: self.ctx.clone(),
            }),
        ))
    }

    fn copy_in(&self, dst: &Buffer, data: &[u8]) -> Result<()> {
        let m = self.mem(dst)?;
        super::check_copy_in(dst, data)?;
        if data.is_empty() {
            return Ok(());
        }
        let _g = self.enter()?;
        guarded(DRIVER, || {
            // SAFETY: `m.ptr` holds at least `data.len()` bytes of this context.
            unsafe { cu::memcpy_htod_sync(m.ptr, data) }.map_err(|e| driver_err("cuMemcpyHtoD", e))
        })
    }

    fn copy_out(&self, src: &Buffer) -> Result<Vec<u8>> {
        let m = self.mem(src)?;
        let mut out = vec![0u8; src.bytes()];
        if out.is_empty() {
            return Ok(out);
        }
        let _g = self.enter()?;
        guarded(DRIVER, || {
            // SAFETY: `m.ptr` holds `out.len()` bytes of this context.
            unsafe { cu::memcpy_dtoh_sync(&mut out, m.ptr) }
                .map_err(|e| driver_err("cuMemcpyDtoH", e))
        })?;
        Ok(out)
    }

    fn compile(&self, unit: &Unit) -> Result<Compiled> {
        let image = nvrtc_compile(unit, &self.arch)?;
        let _g = self.enter()?;
        let (module, functions) = guarded(DRIVER, || {
            // SAFETY: `image` is a CUBIN or NUL-terminated PTX from NVRTC.
            let module = unsafe { cu::module::load_data(image.as_ptr().cast()) }
                .map_err(|e| driver_err("cuModuleLoadData", e))?;
            let mut functions = BTreeMap::new();
            for k in &unit.kernels {
                let sym = CString::new(k.symbol.as_bytes())
                    .map_err(|_| Error::UnknownKernel(k.name.clone()))?;
                // SAFETY: a live module of this context.
                match unsafe { cu::module::get_function(module, sym) } {
                    Ok(f) => {
                        functions.insert(k.name.clone(), f);
                    }
                    Err(e) => {
                        // SAFETY: unloaded once, before the error returns.
                        let _ = unsafe { cu::module::unload(module) };
                        return Err(driver_err("cuModuleGetFunction", e));
                    }
                }
            }
            Ok((module, functions))
        })?;
        let prog = CudaProgram {
            module,
            functions,
            owner: self.id,
            ctx: self.ctx.clone(),
        };
        Ok(Compiled::new("CUDA", unit.kernels.clone(), Arc::new(prog)))
    }

    fn launch(&self, prog: &Compiled, kernel: &str, args: &[&Buffer]) -> Result<()> {
        let (cuda, sig) =
            super::program_for::<CudaProgram>(prog, kernel, &self.name, |p| p.owner == self.id)?;
        let f = *cuda
            .functions
            .get(kernel)
            .ok_or_else(|| Error::UnknownKernel(kernel.to_string()))?;
        super::check_args(sig, args)?;
        let mut ptrs: Vec<cusys::CUdeviceptr> = Vec::with_capacity(args.len());
        for b in args {
            ptrs.push(self.mem(b)?.ptr);
        }
        let mut params: Vec<*mut c_void> = ptrs
            .iter_mut()
            .map(|p| p as *mut cusys::CUdeviceptr as *mut c_void)
            .collect();
        let (g, b) = (sig.launch.grid, sig.launch.block);
        let _g = self.enter()?;
        guarded(DRIVER, || {
            // SAFETY: `f` belongs to a module of this context; `params` holds one pointer to a
            // device pointer per kernel parameter, each buffer at least as large as its
            // parameter (checked above); the launch is the one the kernel's SPECIALs assume.
            unsafe {
                cu::launch_kernel(
                    f,
                    (g[0], g[1], g[2]),
                    (b[0], b[1], b[2]),
                    0,
                    std::ptr::null_mut(),
                    &mut params,
                )
            }
            .map_err(|e| driver_err("cuLaunchKernel", e))
        })?;
        self.sync("cuCtxSynchronize after a launch")
    }

    fn copy_to(&self, src: &Buffer, dst_device: &dyn Device, dst: &Buffer) -> Result<()> {
        let Some(other) = dst_device.as_any().downcast_ref::<CudaDevice>() else {
            return Err(Error::Unsupported(format!(
                "{} cannot copy directly to {} (use runtime::copy_between)",
                self.name,
                dst_device.name()
            )));
        };
        let (s, d) = (self.mem(src)?, other.mem(dst)?);
        super::check_copy_sizes(src, dst)?;
        if src.bytes() == 0 || s.ptr == d.ptr && self.id == other.id {
            return Ok(());
        }
        let n = src.bytes();
        if self.id == other.id {
            let _g = self.enter()?;
            // cuMemcpyDtoD returns before a device-to-device copy is done: wait for it.
            guarded(DRIVER, || {
                // SAFETY: two allocations of this context of `n` bytes.
                unsafe { cu::memcpy_dtod_sync(d.ptr, s.ptr, n) }
                    .map_err(|e| driver_err("cuMemcpyDtoD", e))
            })?;
            return self.sync("cuCtxSynchronize after cuMemcpyDtoD");
        }
        // Two devices: lock both in id order, then a peer copy.
        let (_g1, _g2) = if self.id < other.id {
            let a = self.enter()?;
            (a, other.enter()?)
        } else {
            let a = other.enter()?;
            (a, self.enter()?)
        };
        let peer = guarded(DRIVER, || {
            // SAFETY: `s.ptr` and `d.ptr` are live allocations of `n` bytes in the two
            // contexts given.
            unsafe {
                cusys::cuMemcpyPeer(d.ptr, other.ctx.cu_ctx(), s.ptr, self.ctx.cu_ctx(), n).result()
            }
            .map_err(|e| driver_err("cuMemcpyPeer", e))?;
            // Like cuMemcpyDtoD, a peer copy may still run when the call returns.
            cu::ctx::synchronize().map_err(|e| driver_err("cuCtxSynchronize after cuMemcpyPeer", e))
        });
        drop((_g1, _g2));
        match peer {
            Ok(()) => Ok(()),
            // The driver refused: stage through the host.
            Err(_) => {
                let host = self.copy_out(src)?;
                other.copy_in(dst, &host)
            }
        }
    }

    fn synchronize(&self) -> Result<()> {
        let _g = self.enter()?;
        self.sync("cuCtxSynchronize")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_the_exact_ones() {
        let o = nvrtc_options("sm_90");
        for f in [
            "--fmad=false",
            "--prec-div=true",
            "--prec-sqrt=true",
            "--ftz=false",
        ] {
            assert!(o.iter().any(|x| x == f), "{f} missing from {o:?}");
        }
        assert!(!o.iter().any(|x| x.contains("fast")));
        assert_eq!(
            o.last().map(String::as_str),
            Some("--gpu-architecture=sm_90")
        );
    }

    fn unit(source: &str) -> Unit {
        Unit {
            lang: Lang::Cuda,
            source: source.into(),
            kernels: vec![],
        }
    }

    /// NVRTC present (CI: `UOPKIT_REQUIRE_BACKENDS=nvrtc` makes absence a failure), else a
    /// stated skip.
    fn nvrtc_or_skip() -> bool {
        match nvrtc_available() {
            Ok(()) => true,
            Err(why) if super::super::required("nvrtc") => {
                panic!(
                    "nvrtc is required here ({}) but unavailable: {why}",
                    super::super::REQUIRE_ENV
                )
            }
            Err(why) => {
                eprintln!("skipped: {why}");
                false
            }
        }
    }

    #[test]
    fn nvrtc_compiles_to_cubin_and_ptx_and_reports_errors() {
        if !nvrtc_or_skip() {
            return;
        }
        let ok = unit("extern \"C\" __global__ void k_a(float *p0, float *p1) { p0[threadIdx.x] = p0[threadIdx.x] * p1[threadIdx.x] + 1.0f; }");
        let cubin = nvrtc_compile(&ok, "sm_90").unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF", "a CUBIN is an ELF image");
        // The same unit and architecture again: the image, without NVRTC.
        let runs = nvrtc_compiles();
        assert_eq!(nvrtc_compile(&ok, "sm_90").unwrap(), cubin);
        assert_eq!(nvrtc_compiles(), runs);
        let ptx = nvrtc_compile(&ok, "compute_90").unwrap();
        let text = String::from_utf8_lossy(&ptx);
        assert!(text.contains(".entry k_a"), "{text}");
        // --fmad=false: the multiply and the add stay two instructions.
        assert!(
            text.contains("mul.rn.f32") && text.contains("add.rn.f32"),
            "{text}"
        );
        assert!(!text.contains("fma.rn.f32"), "{text}");
        let bad = unit("extern \"C\" __global__ void k_b(float *p0) { p0[0] = undefined_name; }");
        match nvrtc_compile(&bad, "sm_90") {
            Err(Error::GpuCompile {
                log,
                source_path,
                options,
                ..
            }) => {
                assert!(log.contains("undefined_name"), "{log}");
                assert!(options.contains("--fmad=false"), "{options}");
                assert!(source_path.exists(), "{}", source_path.display());
            }
            other => panic!("expected a compile error, got {other:?}"),
        }
    }

    #[test]
    fn absent_runtime_is_an_error_not_a_panic() {
        // On a machine without the driver this is Unavailable; with one, a device or a
        // typed error. Twice: the probe is cached, the verdict the same.
        let a = CudaDevice::get(0).map(|_| ()).map_err(|e| e.to_string());
        let b = CudaDevice::get(0).map(|_| ()).map_err(|e| e.to_string());
        assert_eq!(a, b);
        assert!(CudaDevice::get(usize::MAX).is_err());
    }
}
