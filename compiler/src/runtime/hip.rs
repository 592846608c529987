//! The HIP runtime: AMD GPUs through `libamdhip64`, kernels compiled with hiprtc.
//!
//! Nothing is linked at build time: both libraries are opened with `libloading` on first use
//! and every symbol is resolved once into a table of function pointers ([`HipApi`] for the
//! runtime, [`Rtc`] for hiprtc) kept for the life of the process (never unloaded). A machine
//! without ROCm builds and runs everything else; asking for a HIP device there gives
//! [`Error::Unavailable`] with the names that were tried, and nothing is ever called in a
//! library that was not found or lacks a symbol.
//!
//! * Runtime library: `UOPKIT_HIP_LIB` (a path) if set, else `libamdhip64.so`,
//!   `libamdhip64.so.6`, `libamdhip64.so.5`, in that order.
//! * hiprtc: `UOPKIT_HIPRTC_LIB` (a path) if set; else the runtime library's names first
//!   (ROCm 5 exports the `hiprtc*` symbols from `libamdhip64`), then `libhiprtc.so`,
//!   `libhiprtc.so.6` (ROCm 6 moved them there). The first library that has every symbol wins.
//!
//! Units are compiled with `--offload-arch=<arch>` ([`hip_arch`], or the device's own
//! `gcnArchName` in [`Device::compile`]) and the exactness flags of [`HIPRTC_OPTIONS`]:
//!
//! * `-ffp-contract=off`: hiprtc's default contracts `a * b + c` into `v_fmac_f32` (one
//!   rounding instead of two); off, `+ − ×` are separate IEEE operations as in the oracle;
//! * `-fno-fast-math`: no reassociation, no finite-math or reciprocal assumptions;
//! * `-fhip-fp32-correctly-rounded-divide-sqrt`: clang's HIP default, stated so that a changed
//!   default cannot slip in. ROCm 5.2's hiprtc accepts it with an "argument unused" warning:
//!   float32 `/` is the correctly rounded `v_div_scale`/`v_div_fmas`/`v_div_fixup` sequence
//!   anyway, but float32 `sqrtf` stays a bare `v_sqrt_f32` (up to 1 ulp off; LLVM before 17
//!   lowers it so), while double `sqrt` is the refined `v_rsq_f64` + FMA sequence. An exact
//!   float32 square root on that ROCm has to go through double (`(float)sqrt((double)x)`);
//! * `-fno-gpu-flush-denormals-to-zero`: float32 denormals are kept (also the default).
//!
//! Devices: `HIP:n` is runtime ordinal n. HIP's current device is per thread, so every
//! operation takes the device's lock and calls `hipSetDevice` first; every operation
//! (copies, launches) has completed when it returns (`hipDeviceSynchronize` after a kernel or
//! a device-side copy). Buffers free their memory when dropped, programs unload their module.
//! Each failing call is an [`Error::Driver`] naming it, with HIP's code and message.
//!
//! Checked without a GPU (`tests/hip_runtime.rs`): library probing, hiprtc compiles of
//! rendered units (elementwise and shared-memory reductions) to a code object, a rejected unit
//! with its log and kept source, and `HIP:0` being unavailable with a stated reason. The
//! device paths (alloc, copies, peer copies, module load, launch, frees and unloads) are
//! driven against a stand-in `libamdhip64` built from C by the test, which checks what this
//! runtime passes (current device, kernelParams, grid and block); against a real device they
//! run, compared bit for bit with the CPU backend, only where one is present.

use std::any::Any;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use libloading::Library;

use super::{Buffer, Compiled, Device, Error, KernelSig, Lang, Result, Unit};

/// The exactness flags every unit is compiled with (after `--offload-arch=<arch>`); see the
/// module documentation for why each is there.
pub const HIPRTC_OPTIONS: &[&str] = &[
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fhip-fp32-correctly-rounded-divide-sqrt",
    "-fno-gpu-flush-denormals-to-zero",
];

/// The architecture used when neither `UOPKIT_HIP_ARCH` nor a device says otherwise.
pub const DEFAULT_ARCH: &str = "gfx90a";

const HIP_LIB_ENV: &str = "UOPKIT_HIP_LIB";
const HIPRTC_LIB_ENV: &str = "UOPKIT_HIPRTC_LIB";
const ARCH_ENV: &str = "UOPKIT_HIP_ARCH";
const HIP_LIB_NAMES: &[&str] = &["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"];
const HIPRTC_LIB_NAMES: &[&str] = &["libhiprtc.so", "libhiprtc.so.6"];

// ---------------------------------------------------------------------------------------
// C types and constants (hip_runtime_api.h, driver_types.h, hiprtc.h).

/// `hipError_t` (`hipSuccess` = 0) and `hiprtcResult` (`HIPRTC_SUCCESS` = 0).
type Code = c_int;
/// `hipModule_t`, `hipFunction_t`, `hipStream_t`, `hiprtcProgram`: opaque pointers.
type Handle = *mut c_void;

const HIP_ERROR_NO_DEVICE: Code = 100;
/// `hipMemcpyKind`.
const MEMCPY_HOST_TO_DEVICE: c_int = 1;
const MEMCPY_DEVICE_TO_HOST: c_int = 2;
const MEMCPY_DEVICE_TO_DEVICE: c_int = 3;
/// `offsetof(hipDeviceProp_t, gcnArchName)` in the layout `hipGetDeviceProperties` fills
/// (ROCm 5; ROCm 6 keeps that layout for the unversioned symbol as `hipDeviceProp_tR0000`);
/// the struct is 792 bytes there, and [`PROPS_BYTES`] leaves room for a larger one.
const GCN_ARCH_NAME_OFFSET: usize = 396;
const GCN_ARCH_NAME_LEN: usize = 256;
const PROPS_BYTES: usize = 8192;

// ---------------------------------------------------------------------------------------
// Loading.

/// Opens the first library that `resolve` accepts: the path in `env` alone if it is set,
/// else each of `names`. The error lists every name tried and why it failed.
fn open_first<T>(
    env: &str,
    names: &[&str],
    resolve: impl Fn(Library, &str) -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    let from_env = std::env::var(env).ok().filter(|v| !v.is_empty());
    let candidates: Vec<String> = match &from_env {
        Some(path) => vec![path.clone()],
        None => names.iter().map(|n| n.to_string()).collect(),
    };
    let mut tried = Vec::new();
    for name in &candidates {
        // SAFETY: loading a ROCm library runs its initializers, which have no preconditions
        // on the caller; the library is only used through symbols resolved by `resolve`.
        match unsafe { Library::new(name.as_str()) } {
            Ok(lib) => match resolve(lib, name) {
                Ok(t) => return Ok(t),
                Err(e) => tried.push(e),
            },
            Err(e) => tried.push(format!("{name}: {}", with_sources(&e))),
        }
    }
    let source = match from_env {
        Some(_) => format!("{env} is set"),
        None => format!(
            "tried {} (set {env} to a path to choose another)",
            names.join(", ")
        ),
    };
    Err(format!("{source}: {}", tried.join("; ")))
}

/// An error and its sources (`dlopen failed: <dlerror>`).
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(&format!(": {s}"));
        cur = s.source();
    }
    out
}

/// The symbol `name` of `lib` as a `T`.
///
/// # Safety
/// `T` must be the C signature of `name` (as declared in the ROCm headers).
unsafe fn sym<T: Copy>(lib: &Library, path: &str, name: &str) -> std::result::Result<T, String> {
    // SAFETY: the caller guarantees that `T` is the symbol's type.
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| format!("{path}: no symbol {name} ({e})"))
}

/// A C string from a library (an error message), or a placeholder when it is null.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string that outlives the call.
unsafe fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return "(no message)".into();
    }
    // SAFETY: non-null and NUL-terminated per the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------
// The runtime library.

/// The HIP runtime's entry points (signatures from `hip_runtime_api.h`).
struct HipApi {
    path: String,
    init: unsafe extern "C" fn(c_uint) -> Code,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> Code,
    set_device: unsafe extern "C" fn(c_int) -> Code,
    get_device_properties: unsafe extern "C" fn(*mut c_void, c_int) -> Code,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> Code,
    free: unsafe extern "C" fn(*mut c_void) -> Code,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> Code,
    memcpy_peer: unsafe extern "C" fn(*mut c_void, c_int, *const c_void, c_int, usize) -> Code,
    module_load_data: unsafe extern "C" fn(*mut Handle, *const c_void) -> Code,
    module_get_function: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> Code,
    #[allow(clippy::type_complexity)]
    module_launch_kernel: unsafe extern "C" fn(
        Handle,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Handle,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> Code,
    device_synchronize: unsafe extern "C" fn() -> Code,
    module_unload: unsafe extern "C" fn(Handle) -> Code,
    get_error_string: unsafe extern "C" fn(Code) -> *const c_char,
    /// Keeps the symbols valid; never dropped (the table lives in a static).
    _lib: Library,
}

impl fmt::Debug for HipApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HipApi({})", self.path)
    }
}

impl HipApi {
    fn resolve(lib: Library, path: &str) -> std::result::Result<HipApi, String> {
        // SAFETY (every `sym` below): each type is the header's signature for that name.
        unsafe {
            Ok(HipApi {
                path: path.to_string(),
                init: sym(&lib, path, "hipInit")?,
                get_device_count: sym(&lib, path, "hipGetDeviceCount")?,
                set_device: sym(&lib, path, "hipSetDevice")?,
                get_device_properties: sym(&lib, path, "hipGetDeviceProperties")?,
                malloc: sym(&lib, path, "hipMalloc")?,
                free: sym(&lib, path, "hipFree")?,
                memcpy: sym(&lib, path, "hipMemcpy")?,
                memcpy_peer: sym(&lib, path, "hipMemcpyPeer")?,
                module_load_data: sym(&lib, path, "hipModuleLoadData")?,
                module_get_function: sym(&lib, path, "hipModuleGetFunction")?,
                module_launch_kernel: sym(&lib, path, "hipModuleLaunchKernel")?,
                device_synchronize: sym(&lib, path, "hipDeviceSynchronize")?,
                module_unload: sym(&lib, path, "hipModuleUnload")?,
                get_error_string: sym(&lib, path, "hipGetErrorString")?,
                _lib: lib,
            })
        }
    }

    /// HIP's message for `code` (`hipErrorNoDevice`, …).
    fn message(&self, code: Code) -> String {
        // SAFETY: hipGetErrorString takes any code and returns a static string (or null).
        unsafe { c_str((self.get_error_string)(code)) }
    }

    /// `Ok` for `hipSuccess`, else the call's [`Error::Driver`].
    fn check(&self, call: &'static str, code: Code) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        Err(Error::Driver {
            runtime: "HIP",
            call,
            code: i64::from(code),
            message: self.message(code),
        })
    }

    fn set_device(&self, ordinal: c_int) -> Result<()> {
        // SAFETY: plain call with an integer argument.
        self.check("hipSetDevice", unsafe { (self.set_device)(ordinal) })
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments; waits for the current device.
        self.check("hipDeviceSynchronize", unsafe {
            (self.device_synchronize)()
        })
    }

    /// `gcnArchName` of device `ordinal` (`gfx90a:sramecc+:xnack-`), if the runtime says.
    fn arch_name(&self, ordinal: c_int) -> Option<String> {
        let mut props = vec![0u64; PROPS_BYTES / 8];
        // SAFETY: `props` is PROPS_BYTES zeroed, 8-aligned bytes, more than the library's
        // `hipDeviceProp_t` (792 bytes in ROCm 5).
        let code = unsafe { (self.get_device_properties)(props.as_mut_ptr().cast(), ordinal) };
        if code != 0 {
            return None;
        }
        // SAFETY: reinterpreting the initialized u64s as bytes (u8 has no invalid values).
        let bytes = unsafe { std::slice::from_raw_parts(props.as_ptr().cast::<u8>(), PROPS_BYTES) };
        let field = &bytes[GCN_ARCH_NAME_OFFSET..GCN_ARCH_NAME_OFFSET + GCN_ARCH_NAME_LEN];
        let name = CStr::from_bytes_until_nul(field).ok()?.to_str().ok()?;
        name.starts_with("gfx").then(|| name.to_string())
    }
}

/// The runtime library, loaded once.
fn api() -> Result<&'static HipApi> {
    static API: OnceLock<std::result::Result<HipApi, String>> = OnceLock::new();
    API.get_or_init(|| open_first(HIP_LIB_ENV, HIP_LIB_NAMES, HipApi::resolve))
        .as_ref()
        .map_err(|reason| Error::Unavailable {
            what: "HIP runtime",
            reason: reason.clone(),
        })
}

/// The runtime library after `hipInit(0)` (called once), with its device count (0 when the
/// runtime reports `hipErrorNoDevice`).
fn runtime() -> Result<(&'static HipApi, usize)> {
    static INIT: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    let api = api()?;
    let count = INIT.get_or_init(|| {
        // SAFETY: hipInit takes flags (0 is the only defined value).
        let init = unsafe { (api.init)(0) };
        let describe = |call: &str, code: Code| {
            let message = api.message(code);
            format!("{call} returned {message} (code {code}) in {}", api.path)
        };
        if init == HIP_ERROR_NO_DEVICE {
            return Ok(0);
        }
        if init != 0 {
            return Err(format!(
                "{} (no usable AMD GPU: is /dev/kfd there and accessible?)",
                describe("hipInit(0)", init)
            ));
        }
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-pointer.
        match unsafe { (api.get_device_count)(&mut n) } {
            0 => Ok(usize::try_from(n).unwrap_or(0)),
            HIP_ERROR_NO_DEVICE => Ok(0),
            code => Err(describe("hipGetDeviceCount", code)),
        }
    });
    match count {
        Ok(n) => Ok((api, *n)),
        Err(reason) => Err(Error::Unavailable {
            what: "HIP runtime",
            reason: reason.clone(),
        }),
    }
}

/// The number of HIP devices: `Ok(0)` when the runtime reports none, [`Error::Unavailable`]
/// when the library is absent or `hipInit` fails.
pub fn device_count() -> Result<usize> {
    runtime().map(|(_, n)| n)
}

/// The offload architecture hiprtc compiles for: `UOPKIT_HIP_ARCH`, else the `gcnArchName`
/// of `HIP:0` when a device is present, else [`DEFAULT_ARCH`].
pub fn hip_arch() -> String {
    if let Some(a) = arch_from_env() {
        return a;
    }
    match runtime() {
        Ok((api, n)) if n > 0 => api.arch_name(0),
        _ => None,
    }
    .unwrap_or_else(|| DEFAULT_ARCH.to_string())
}

fn arch_from_env() -> Option<String> {
    std::env::var(ARCH_ENV)
        .ok()
        .filter(|a| !a.trim().is_empty())
}

// ---------------------------------------------------------------------------------------
// hiprtc.

/// hiprtc's entry points (signatures from `hiprtc.h`).
struct Rtc {
    create_program: unsafe extern "C" fn(
        *mut Handle,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Code,
    compile_program: unsafe extern "C" fn(Handle, c_int, *const *const c_char) -> Code,
    get_program_log_size: unsafe extern "C" fn(Handle, *mut usize) -> Code,
    get_program_log: unsafe extern "C" fn(Handle, *mut c_char) -> Code,
    get_code_size: unsafe extern "C" fn(Handle, *mut usize) -> Code,
    get_code: unsafe extern "C" fn(Handle, *mut c_char) -> Code,
    destroy_program: unsafe extern "C" fn(*mut Handle) -> Code,
    get_error_string: unsafe extern "C" fn(Code) -> *const c_char,
    /// `hiprtcVersion`, where the library has it (for the compile cache's key).
    version: Option<unsafe extern "C" fn(*mut c_int, *mut c_int) -> Code>,
    /// Held from hiprtcCreateProgram to hiprtcDestroyProgram: ROCm 5.2's hiprtc crashes
    /// (SIGSEGV) when two threads compile at once, so compiles are serialized.
    serial: Mutex<()>,
    /// The name or path it was loaded from.
    path: String,
    _lib: Library,
}

impl Rtc {
    fn resolve(lib: Library, path: &str) -> std::result::Result<Rtc, String> {
        // SAFETY (every `sym` below): each type is the header's signature for that name.
        unsafe {
            Ok(Rtc {
                create_program: sym(&lib, path, "hiprtcCreateProgram")?,
                compile_program: sym(&lib, path, "hiprtcCompileProgram")?,
                get_program_log_size: sym(&lib, path, "hiprtcGetProgramLogSize")?,
                get_program_log: sym(&lib, path, "hiprtcGetProgramLog")?,
                get_code_size: sym(&lib, path, "hiprtcGetCodeSize")?,
                get_code: sym(&lib, path, "hiprtcGetCode")?,
                destroy_program: sym(&lib, path, "hiprtcDestroyProgram")?,
                get_error_string: sym(&lib, path, "hiprtcGetErrorString")?,
                version: sym(&lib, path, "hiprtcVersion").ok(),
                serial: Mutex::new(()),
                path: path.to_string(),
                _lib: lib,
            })
        }
    }

    fn check(&self, call: &'static str, code: Code) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: hiprtcGetErrorString takes any code and returns a static string (or null).
        let message = unsafe { c_str((self.get_error_string)(code)) };
        Err(Error::Driver {
            runtime: "hiprtc",
            call,
            code: i64::from(code),
            message,
        })
    }
}

/// hiprtc, loaded once (see the module documentation for where it is looked for).
fn rtc() -> std::result::Result<&'static Rtc, &'static str> {
    static RTC: OnceLock<std::result::Result<Rtc, String>> = OnceLock::new();
    RTC.get_or_init(|| {
        if std::env::var(HIPRTC_LIB_ENV).is_ok_and(|v| !v.is_empty()) {
            return open_first(HIPRTC_LIB_ENV, &[], Rtc::resolve);
        }
        // ROCm 5: in the runtime library (honouring UOPKIT_HIP_LIB); ROCm 6: libhiprtc.
        let in_runtime = open_first(HIP_LIB_ENV, HIP_LIB_NAMES, Rtc::resolve);
        in_runtime.or_else(|e1| {
            open_first(HIPRTC_LIB_ENV, HIPRTC_LIB_NAMES, Rtc::resolve)
                .map_err(|e2| format!("hiprtc symbols not found: {e1}; then {e2}"))
        })
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Whether hiprtc can be used here: Ok, or why not (library absent, symbol missing).
pub fn hiprtc_available() -> std::result::Result<(), String> {
    rtc().map(|_| ()).map_err(str::to_string)
}

/// The library hiprtc was loaded from (a name as tried, or `UOPKIT_HIPRTC_LIB`'s path), or
/// why it could not be.
pub fn hiprtc_library() -> std::result::Result<String, String> {
    rtc().map(|r| r.path.clone()).map_err(str::to_string)
}

/// The options for `arch`: `--offload-arch=<arch>`, then [`HIPRTC_OPTIONS`].
pub fn hiprtc_options(arch: &str) -> Vec<String> {
    std::iter::once(format!("--offload-arch={arch}"))
        .chain(HIPRTC_OPTIONS.iter().map(|o| o.to_string()))
        .collect()
}

/// Compiles `unit` (a [`super::Lang::Hip`] unit) with hiprtc for the architecture
/// [`hip_arch`] names; returns the code object. Through the process-wide compile cache.
pub fn hiprtc_compile(unit: &Unit) -> Result<Vec<u8>> {
    hiprtc_compile_for(unit, &hip_arch(), super::cache::GpuCache::global())
}

/// [`hiprtc_compile`] for an explicit architecture, through `cache` (in memory, else
/// checked on disk; rejected units are not kept).
pub fn hiprtc_compile_in(
    unit: &Unit,
    arch: &str,
    cache: &super::cache::GpuCache,
) -> Result<Vec<u8>> {
    hiprtc_compile_for(unit, arch, cache)
}

/// The environment variables hiprtc (or the code-object manager under it) reads to change a
/// compile: part of the cache key.
const HIPRTC_ENV: &[&str] = &[
    "HIPRTC_COMPILE_OPTIONS_APPEND",
    "HIPRTC_LINK_OPTIONS_APPEND",
    "HIP_CLANG_PATH",
    "HIP_DEVICE_LIB_PATH",
    "ROCM_PATH",
    "HIP_PATH",
    "AMD_COMGR_SAVE_TEMPS",
    "AMD_COMGR_REDIRECT_LOGS",
    "AMD_COMGR_EMIT_VERBOSE_LOGS",
];

/// hiprtc's identity for the compile cache: its version, the environment it reads, and its
/// library files (the one its symbols came from, and the hiprtc builtins and code-object
/// manager libraries beside it). Found once; None if the library file cannot be found.
fn hiprtc_identity(rtc: &Rtc) -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| {
        let (mut major, mut minor) = (0, 0);
        let version = match rtc.version {
            // SAFETY: two valid out-pointers.
            Some(f) if unsafe { f(&mut major, &mut minor) } == 0 => {
                format!("hiprtc {major}.{minor}")
            }
            _ => "hiprtc (no version)".into(),
        };
        let mut head = version;
        for v in HIPRTC_ENV {
            if let Some(x) = std::env::var_os(v) {
                head.push_str(&format!("\n{v}={}", x.to_string_lossy()));
            }
        }
        let lib = super::cache::gpu::library_of(rtc.compile_program as usize)?;
        super::cache::gpu::library_identity(
            &head,
            &lib,
            &["libhiprtc", "libamd_comgr", "libamdhip64"],
        )
    })
    .as_deref()
}

/// A hiprtc program, destroyed when dropped.
struct RtcProgram<'a> {
    rtc: &'a Rtc,
    prog: Handle,
}

impl Drop for RtcProgram<'_> {
    fn drop(&mut self) {
        // SAFETY: `prog` came from hiprtcCreateProgram and is destroyed only here.
        unsafe { (self.rtc.destroy_program)(&mut self.prog) };
    }
}

impl RtcProgram<'_> {
    /// The program's log (empty if there is none).
    fn log(&self) -> String {
        let mut n = 0usize;
        // SAFETY: valid program and out-pointer.
        if unsafe { (self.rtc.get_program_log_size)(self.prog, &mut n) } != 0 || n == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; n + 1];
        // SAFETY: the log is at most `n` bytes (including its NUL); `buf` has n + 1.
        if unsafe { (self.rtc.get_program_log)(self.prog, buf.as_mut_ptr().cast()) } != 0 {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim_end().to_string()
    }

    fn code(&self) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: valid program and out-pointer.
        let code = unsafe { (self.rtc.get_code_size)(self.prog, &mut n) };
        self.rtc.check("hiprtcGetCodeSize", code)?;
        let mut buf = vec![0u8; n];
        // SAFETY: the code is exactly `n` bytes, the size of `buf`.
        let code = unsafe { (self.rtc.get_code)(self.prog, buf.as_mut_ptr().cast()) };
        self.rtc.check("hiprtcGetCode", code)?;
        Ok(buf)
    }
}

/// [`hiprtc_compile`] for an explicit architecture, through `cache`.
fn hiprtc_compile_for(unit: &Unit, arch: &str, cache: &super::cache::GpuCache) -> Result<Vec<u8>> {
    if unit.lang != Lang::Hip {
        return Err(Error::Unsupported(format!(
            "hiprtc compiles HIP units, not {}",
            unit.lang
        )));
    }
    let rtc = rtc().map_err(|reason| Error::Unavailable {
        what: "hiprtc",
        reason: reason.to_string(),
    })?;
    let options = hiprtc_options(arch);
    let rejected = |log: String| Error::GpuCompile {
        compiler: "hiprtc",
        options: options.join(" "),
        log,
        source_path: super::keep_rejected_source(&unit.source, "hip"),
    };
    let compiler = super::cache::gpu::GpuCompiler {
        name: "hiprtc",
        identity: hiprtc_identity(rtc),
        options: &options,
    };
    cache.image(&compiler, &unit.source, || {
        hiprtc_run(rtc, &unit.source, &options, rejected)
    })
}

/// How many times this process ran hiprtc (the rest were answered by the compile cache).
pub fn hiprtc_compiles() -> u64 {
    HIPRTC_COMPILES.load(Ordering::Relaxed)
}

static HIPRTC_COMPILES: AtomicU64 = AtomicU64::new(0);

/// One hiprtc compile (serialized: see [`Rtc::serial`]): the code object, or `rejected` of
/// the log.
fn hiprtc_run(
    rtc: &Rtc,
    source: &str,
    options: &[String],
    rejected: impl Fn(String) -> Error,
) -> Result<Vec<u8>> {
    let source = CString::new(source)
        .map_err(|e| rejected(format!("the source has a NUL byte at {}", e.nul_position())))?;
    let c_options: Vec<CString> = options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| rejected(format!("{ARCH_ENV} has a NUL byte")))?;
    let option_ptrs: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
    // Declared before `prog`, so released after the program is destroyed.
    let _serial = lock(&rtc.serial);
    HIPRTC_COMPILES.fetch_add(1, Ordering::Relaxed);
    let mut prog: Handle = std::ptr::null_mut();
    // SAFETY: NUL-terminated source and name; no headers (count 0, null arrays).
    let code = unsafe {
        (rtc.create_program)(
            &mut prog,
            source.as_ptr(),
            c"uopkit.hip".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    rtc.check("hiprtcCreateProgram", code)?;
    let prog = RtcProgram { rtc, prog };
    let n_options = c_int::try_from(option_ptrs.len())
        .map_err(|_| rejected(format!("{} options", option_ptrs.len())))?;
    // SAFETY: `option_ptrs` holds `n_options` NUL-terminated strings alive for the call.
    let code = unsafe { (rtc.compile_program)(prog.prog, n_options, option_ptrs.as_ptr()) };
    if code != 0 {
        let mut log = prog.log();
        if let Err(e) = rtc.check("hiprtcCompileProgram", code) {
            log = format!("{e}\n{log}");
        }
        return Err(rejected(log));
    }
    prog.code()
}

// ---------------------------------------------------------------------------------------
// Devices.

/// Device memory owned by one HIP device (identified by its instance id).
struct HipMem {
    ptr: *mut c_void,
    owner: u64,
    ordinal: c_int,
    lock: Arc<Mutex<()>>,
    api: &'static HipApi,
}

// SAFETY: the pointer is device memory, only passed to HIP calls made under the owning
// device's lock (every access goes through `HipDevice` methods, which check `owner`).
unsafe impl Send for HipMem {}
unsafe impl Sync for HipMem {}

impl Drop for HipMem {
    fn drop(&mut self) {
        let _g = lock(&self.lock);
        if self.api.set_device(self.ordinal).is_ok() {
            // SAFETY: allocated by hipMalloc on this device, freed only here.
            unsafe { (self.api.free)(self.ptr) };
        }
    }
}

/// A code object loaded on one device, with its kernels looked up.
struct HipProgram {
    module: Handle,
    functions: BTreeMap<String, Handle>,
    owner: u64,
    ordinal: c_int,
    lock: Arc<Mutex<()>>,
    api: &'static HipApi,
}

// SAFETY: the module and function handles are only used in HIP calls made under the owning
// device's lock.
unsafe impl Send for HipProgram {}
unsafe impl Sync for HipProgram {}

impl Drop for HipProgram {
    fn drop(&mut self) {
        let _g = lock(&self.lock);
        if self.api.set_device(self.ordinal).is_ok() {
            // SAFETY: loaded by hipModuleLoadData on this device, unloaded only here.
            unsafe { (self.api.module_unload)(self.module) };
        }
    }
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One HIP device.
pub struct HipDevice {
    name: String,
    ordinal: c_int,
    id: u64,
    arch: String,
    lock: Arc<Mutex<()>>,
    api: &'static HipApi,
}

impl fmt::Debug for HipDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HipDevice({}, {}, {})",
            self.name, self.arch, self.api.path
        )
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl HipDevice {
    /// The process-wide `HIP:ordinal`, or [`Error::Unavailable`] saying why there is none
    /// (library not found, `hipInit` failed, no device, ordinal out of range).
    pub fn get(ordinal: usize) -> Result<Arc<dyn Device>> {
        static DEVICES: OnceLock<Mutex<BTreeMap<usize, Arc<HipDevice>>>> = OnceLock::new();
        let (api, count) = runtime()?;
        let unavailable = |reason: String| Error::Unavailable {
            what: "HIP runtime",
            reason,
        };
        if count == 0 {
            return Err(unavailable(format!("{} reports no HIP device", api.path)));
        }
        let ord = c_int::try_from(ordinal)
            .ok()
            .filter(|_| ordinal < count)
            .ok_or_else(|| {
                unavailable(format!(
                    "HIP:{ordinal} does not exist ({count} device(s): HIP:0..HIP:{})",
                    count - 1
                ))
            })?;
        let map = DEVICES.get_or_init(|| Mutex::new(BTreeMap::new()));
        let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
        let dev = map.entry(ordinal).or_insert_with(|| {
            Arc::new(HipDevice {
                name: format!("HIP:{ordinal}"),
                ordinal: ord,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                arch: arch_from_env()
                    .or_else(|| api.arch_name(ord))
                    .unwrap_or_else(|| DEFAULT_ARCH.to_string()),
                lock: Arc::new(Mutex::new(())),
                api,
            })
        });
        Ok(dev.clone())
    }

    /// The architecture this device's units are compiled for.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Takes the device's lock and makes it the thread's current device.
    fn enter(&self) -> Result<MutexGuard<'_, ()>> {
        let g = lock(&self.lock);
        self.api.set_device(self.ordinal)?;
        Ok(g)
    }

    /// This device's memory of `buf`, or an error if `buf` belongs elsewhere.
    fn mem<'a>(&self, buf: &'a Buffer) -> Result<&'a HipMem> {
        match buf.raw::<HipMem>() {
            Some(m) if m.owner == self.id => Ok(m),
            _ => Err(Error::WrongDevice {
                device: self.name.clone(),
                buffer_device: buf.device().to_string(),
            }),
        }
    }

    /// Kernel `k`'s function in `module` (a module loaded on this device; lock held).
    fn function(&self, module: Handle, k: &KernelSig) -> Result<Handle> {
        let symbol = CString::new(k.symbol.as_str())
            .map_err(|_| Error::UnknownKernel(format!("{} (its symbol has a NUL byte)", k.name)))?;
        let mut f: Handle = std::ptr::null_mut();
        // SAFETY: a loaded module, a NUL-terminated name and a valid out-pointer.
        let rc = unsafe { (self.api.module_get_function)(&mut f, module, symbol.as_ptr()) };
        self.api.check("hipModuleGetFunction", rc)?;
        Ok(f)
    }

    /// hipMemcpy of `bytes` bytes under the lock already held, then a synchronize for
    /// device-to-device copies (which may otherwise return before they finish).
    fn memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
        kind: c_int,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the callers pass `bytes`-sized host or device ranges matching `kind`.
        let code = unsafe { (self.api.memcpy)(dst, src, bytes, kind) };
        self.api.check("hipMemcpy", code)?;
        if kind == MEMCPY_DEVICE_TO_DEVICE {
            self.api.synchronize()?;
        }
        Ok(())
    }
}

impl Device for HipDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn runtime(&self) -> &'static str {
        "HIP"
    }

    fn lang(&self) -> Lang {
        Lang::Hip
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let _g = self.enter()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; a zero-byte request allocates one byte (hipMalloc gives
        // null for 0, which would not be a distinct buffer).
        let code = unsafe { (self.api.malloc)(&mut ptr, bytes.max(1)) };
        self.api.check("hipMalloc", code)?;
        if ptr.is_null() {
            return Err(Error::OutOfMemory(bytes));
        }
        let mem = HipMem {
            ptr,
            owner: self.id,
            ordinal: self.ordinal,
            lock: self.lock.clone(),
            api: self.api,
        };
        Ok(Buffer::new(self.name.clone(), bytes, Box::new(mem)))
    }

    fn copy_in(&self, dst: &Buffer, data: &[u8]) -> Result<()> {
        let m = self.mem(dst)?;
        super::check_copy_in(dst, data)?;
        let _g = self.enter()?;
        self.memcpy(
            m.ptr,
            data.as_ptr().cast(),
            data.len(),
            MEMCPY_HOST_TO_DEVICE,
        )
    }

    fn copy_out(&self, src: &Buffer) -> Result<Vec<u8>> {
        let m = self.mem(src)?;
        let mut out = vec![0u8; src.bytes()];
        let _g = self.enter()?;
        self.memcpy(
            out.as_mut_ptr().cast(),
            m.ptr,
            out.len(),
            MEMCPY_DEVICE_TO_HOST,
        )?;
        Ok(out)
    }

    fn compile(&self, unit: &Unit) -> Result<Compiled> {
        let code = hiprtc_compile_for(unit, &self.arch, super::cache::GpuCache::global())?;
        let g = self.enter()?;
        let mut module: Handle = std::ptr::null_mut();
        // SAFETY: `code` is a complete code object that outlives the call (the runtime copies
        // what it keeps).
        let rc = unsafe { (self.api.module_load_data)(&mut module, code.as_ptr().cast()) };
        self.api.check("hipModuleLoadData", rc)?;
        let functions = unit
            .kernels
            .iter()
            .map(|k| Ok((k.name.clone(), self.function(module, k)?)))
            .collect::<Result<BTreeMap<_, _>>>();
        let functions = match functions {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: loaded above on this device (still current, lock held), not used
                // after this.
                unsafe { (self.api.module_unload)(module) };
                return Err(e);
            }
        };
        drop(g);
        let prog = HipProgram {
            module,
            functions,
            owner: self.id,
            ordinal: self.ordinal,
            lock: self.lock.clone(),
            api: self.api,
        };
        Ok(Compiled::new("HIP", unit.kernels.clone(), Arc::new(prog)))
    }

    fn launch(&self, prog: &Compiled, kernel: &str, args: &[&Buffer]) -> Result<()> {
        let (hip, sig) =
            super::program_for::<HipProgram>(prog, kernel, &self.name, |p| p.owner == self.id)?;
        let f = *hip
            .functions
            .get(kernel)
            .ok_or_else(|| Error::UnknownKernel(kernel.to_string()))?;
        super::check_args(sig, args)?;
        let mut ptrs = Vec::with_capacity(args.len());
        for buf in args {
            ptrs.push(self.mem(buf)?.ptr);
        }
        // kernelParams: one pointer to each argument (each argument is a device pointer).
        let mut params: Vec<*mut c_void> = ptrs
            .iter_mut()
            .map(|p| (p as *mut *mut c_void).cast::<c_void>())
            .collect();
        let (g, b) = (sig.launch.grid, sig.launch.block);
        let _g = self.enter()?;
        // SAFETY: `f` belongs to a module loaded on this device; `params` points to one
        // device pointer per kernel parameter (count and sizes checked above), alive for the
        // call; null stream and extra. The kernel's accesses stay within each parameter's
        // declared size (the renderer's contract with lowering).
        let rc = unsafe {
            (self.api.module_launch_kernel)(
                f,
                g[0],
                g[1],
                g[2],
                b[0],
                b[1],
                b[2],
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.api.check("hipModuleLaunchKernel", rc)?;
        self.api.synchronize()
    }

    fn copy_to(&self, src: &Buffer, dst_device: &dyn Device, dst: &Buffer) -> Result<()> {
        let Some(other) = dst_device.as_any().downcast_ref::<HipDevice>() else {
            return Err(Error::Unsupported(format!(
                "{} cannot copy directly to {} (use runtime::copy_between)",
                self.name,
                dst_device.name()
            )));
        };
        let (s, d) = (self.mem(src)?, other.mem(dst)?);
        super::check_copy_sizes(src, dst)?;
        if std::ptr::eq(s, d) {
            return Ok(());
        }
        if self.id == other.id {
            let _g = self.enter()?;
            return self.memcpy(d.ptr, s.ptr, src.bytes(), MEMCPY_DEVICE_TO_DEVICE);
        }
        let peer = {
            // Both devices locked in id order; the source device current.
            let (first, second) = if self.id < other.id {
                (self, other)
            } else {
                (other, self)
            };
            let _g1 = lock(&first.lock);
            let _g2 = lock(&second.lock);
            self.api.set_device(self.ordinal).and_then(|()| {
                // SAFETY: two distinct allocations of `src.bytes()` bytes on their devices,
                // both devices locked.
                let rc = unsafe {
                    (self.api.memcpy_peer)(d.ptr, other.ordinal, s.ptr, self.ordinal, src.bytes())
                };
                self.api.check("hipMemcpyPeer", rc)?;
                self.api.synchronize()
            })
        };
        match peer {
            Ok(()) => Ok(()),
            // No peer path between the two: stage through the host.
            Err(_) => {
                let host = self.copy_out(src)?;
                other.copy_in(dst, &host)
            }
        }
    }

    fn synchronize(&self) -> Result<()> {
        let _g = self.enter()?;
        self.api.synchronize()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
