//! The CPU runtime: host memory per device, C kernels compiled by [`CCompiler`] and called
//! in-process.
//!
//! Every `CPU:n` device has its own allocations (a copy between two of them is a real copy)
//! and a lock that orders all operations on it, as a stream would on a GPU: kernels run
//! synchronously on the calling thread while the lock is held.
//!
//! Kernel params are `restrict` in the C the renderer writes (`UK_RESTRICT`). A launch
//! whose arguments alias (the same buffer in two param slots) runs the unit compiled once
//! more with `#define UK_RESTRICT` empty instead, made on first need: `restrict` is only
//! ever in effect for buffers that do not share memory.
//!
//! A kernel with a parallel loop (the `cpu_threads` pass) runs in chunks on several threads
//! when it is big enough (see [`super::threads`]; `UOPKIT_CPU_THREADS` sets how many),
//! except for launches whose buffers alias, which run on the calling thread.
//!
//! Every kernel launch (like every `dlopen` in [`CCompiler`]) runs inside an
//! [`FpGuard`]: a kernel that changes the thread's FP control state (flush-to-zero,
//! rounding) has it restored, and the change is recorded for
//! [`fpenv::take_tampering`](super::fpenv::take_tampering).

use std::any::Any;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use libloading::Library;

use super::fpenv::FpGuard;
use super::threads::{self, ParFn};
use super::{Buffer, CCompiler, Compiled, Device, Error, Lang, Result, Unit};

/// Allocation alignment (a cache line; enough for any element type and for vector loads).
const ALIGN: usize = 64;

/// The C signature every kernel has: `void k_name(void **args)`.
type KernelFn = unsafe extern "C" fn(*mut *mut c_void);

/// Host memory owned by one CPU device (identified by its instance id).
struct CpuMem {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
    owner: u64,
}

// SAFETY: the memory is only read or written while the owning device's lock is held (all
// accesses go through `CpuDevice` methods, which check `owner` and take the lock).
unsafe impl Send for CpuMem {}
unsafe impl Sync for CpuMem {}

impl Drop for CpuMem {
    fn drop(&mut self) {
        // SAFETY: allocated in `CpuDevice::alloc` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A compiled unit loaded into the process.
struct CpuProgram {
    /// `Some` until dropped.
    lib: Option<Arc<Library>>,
    kernels: BTreeMap<String, KernelFn>,
    /// The kernels with a parallel loop: their `par_` entry, extent and work per iteration.
    par: BTreeMap<String, (ParFn, i64, u64)>,
    /// The unit, for the variant without `restrict`.
    unit: Unit,
    /// The variant without `restrict` (for launches whose buffers alias), once made.
    aliasing: Mutex<Option<Box<CpuProgram>>>,
}

/// The preamble that compiles a unit without `restrict` on kernel params, whose streaming
/// loops store each element directly (render/stream.rs).
pub const NO_RESTRICT: &str = "#define UK_RESTRICT /* aliasing buffers: no restrict */\n#define UK_STREAMING 0 /* and stores in iteration order */\n";

impl Drop for CpuProgram {
    /// The last reference unloads the library, running its destructors: guarded too.
    fn drop(&mut self) {
        let alias = self.aliasing.get_mut().map(|a| a.take()).unwrap_or(None);
        drop(alias);
        let fp = FpGuard::new();
        drop(self.lib.take());
        fp.restore_and_record(|| "the unloading of a kernel library".into());
    }
}

/// Loads `source` with `compiler` and looks up every kernel of `unit`.
fn load_program(compiler: &CCompiler, unit: &Unit, source: &str) -> Result<CpuProgram> {
    let (lib, path) = compiler.load(source)?;
    let mut kernels = BTreeMap::new();
    let mut par = BTreeMap::new();
    for k in &unit.kernels {
        // SAFETY: every kernel the C renderer emits has the `KernelFn` signature.
        let f = unsafe { lib.get::<KernelFn>(k.symbol.as_bytes()) }.map_err(|e| Error::Load {
            path: path.clone(),
            message: format!("kernel '{}': {e}", k.name),
        })?;
        kernels.insert(k.name.clone(), *f);
        // SAFETY: `par_<symbol>` has the `ParFn` signature and `parinfo_<symbol>` is an
        // `int64_t[2]` wherever the C renderer emits them (`render::par`).
        let entry = unsafe { lib.get::<ParFn>(format!("par_{}", k.symbol).as_bytes()) };
        let info =
            unsafe { lib.get::<*const [i64; 2]>(format!("parinfo_{}", k.symbol).as_bytes()) };
        if let (Ok(entry), Ok(info)) = (entry, info) {
            // SAFETY: as above; the array lives as long as the library.
            let [extent, work] = unsafe { **info };
            kernels_par(&mut par, &k.name, *entry, extent, work);
        }
    }
    Ok(CpuProgram {
        lib: Some(lib),
        kernels,
        par,
        unit: unit.clone(),
        aliasing: Mutex::new(None),
    })
}

fn kernels_par(
    par: &mut BTreeMap<String, (ParFn, i64, u64)>,
    name: &str,
    entry: ParFn,
    extent: i64,
    work: i64,
) {
    if extent > 0 && work > 0 {
        par.insert(name.to_string(), (entry, extent, work as u64));
    }
}

/// Whether two of `ptrs` are the same memory (CPU allocations never overlap otherwise).
pub fn any_alias(ptrs: &[*mut c_void]) -> bool {
    let mut seen: Vec<usize> = ptrs.iter().map(|p| *p as usize).collect();
    seen.sort_unstable();
    seen.windows(2).any(|w| w[0] == w[1])
}

/// One CPU device.
#[derive(Debug)]
pub struct CpuDevice {
    name: String,
    id: u64,
    lock: Mutex<()>,
    compiler: Arc<CCompiler>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl CpuDevice {
    /// A new device `CPU:ordinal` with its own memory, compiling with `compiler`. Two
    /// devices made this way never share buffers, even with equal ordinals.
    pub fn new(ordinal: usize, compiler: Arc<CCompiler>) -> Self {
        CpuDevice {
            name: format!("CPU:{ordinal}"),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            lock: Mutex::new(()),
            compiler,
        }
    }

    /// The process-wide `CPU:ordinal` (made on first use with [`CCompiler::global`]).
    pub fn get(ordinal: usize) -> Arc<dyn Device> {
        static DEVICES: OnceLock<Mutex<BTreeMap<usize, Arc<CpuDevice>>>> = OnceLock::new();
        let map = DEVICES.get_or_init(|| Mutex::new(BTreeMap::new()));
        let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(ordinal)
            .or_insert_with(|| Arc::new(CpuDevice::new(ordinal, CCompiler::global())))
            .clone()
    }

    pub fn compiler(&self) -> &Arc<CCompiler> {
        &self.compiler
    }

    fn guard(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This device's memory of `buf`, or an error if `buf` belongs elsewhere.
    fn mem<'a>(&self, buf: &'a Buffer) -> Result<&'a CpuMem> {
        match buf.raw::<CpuMem>() {
            Some(m) if m.owner == self.id => Ok(m),
            _ => Err(Error::WrongDevice {
                device: self.name.clone(),
                buffer_device: buf.device().to_string(),
            }),
        }
    }

    /// [`Device::launch`] with at most `threads` threads for a kernel's parallel loop (one
    /// thread runs every other kernel, and every launch whose buffers alias).
    pub fn launch_threads(
        &self,
        prog: &Compiled,
        kernel: &str,
        args: &[&Buffer],
        threads: usize,
    ) -> Result<()> {
        let (cpu, sig) = super::program_for::<CpuProgram>(prog, kernel, &self.name, |_| true)?;
        super::check_args(sig, args)?;
        let mut ptrs = Vec::with_capacity(args.len());
        for buf in args {
            ptrs.push(self.mem(buf)?.ptr.as_ptr() as *mut c_void);
        }
        let aliased = any_alias(&ptrs);
        let f = if aliased {
            let mut slot = cpu.aliasing.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                let source = format!("{NO_RESTRICT}{}", cpu.unit.source);
                *slot = Some(Box::new(load_program(&self.compiler, &cpu.unit, &source)?));
            }
            slot.as_ref().and_then(|p| p.kernels.get(kernel).copied())
        } else {
            cpu.kernels.get(kernel).copied()
        }
        .ok_or_else(|| Error::UnknownKernel(kernel.to_string()))?;
        let par = match cpu.par.get(kernel) {
            Some(&(entry, extent, work)) if !aliased => {
                Some((entry, extent, threads::launch_chunks(extent, work, threads)))
            }
            _ => None,
        };
        let _g = self.guard();
        let what = || format!("launch of kernel '{kernel}' on {}", self.name);
        match par {
            Some((entry, extent, n)) if n > 1 => {
                // SAFETY: as below, for each chunk; the chunks touch disjoint elements (the
                // `cpu_threads` pass's proof) of buffers that do not alias (checked above).
                unsafe { threads::run_chunks(entry, ptrs.as_mut_ptr(), extent, n, &what) };
            }
            _ => {
                let fp = FpGuard::new();
                // SAFETY: the kernel accesses param i within its declared size (the
                // renderer's contract with lowering), which fits in buffer i as checked
                // above; the device lock keeps every other access to these buffers out
                // while it runs.
                unsafe { f(ptrs.as_mut_ptr()) };
                fp.restore_and_record(what);
            }
        }
        Ok(())
    }

    /// How many threads a launch of `kernel` runs on with at most `threads` (1 for a kernel
    /// without a parallel loop or too small to split).
    pub fn threads_for(&self, prog: &Compiled, kernel: &str, threads: usize) -> Result<usize> {
        let (cpu, _) = super::program_for::<CpuProgram>(prog, kernel, &self.name, |_| true)?;
        Ok(cpu.par.get(kernel).map_or(1, |&(_, extent, work)| {
            threads::launch_chunks(extent, work, threads)
        }))
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn runtime(&self) -> &'static str {
        "CPU"
    }

    fn lang(&self) -> Lang {
        Lang::C
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|_| Error::OutOfMemory(bytes))?;
        // SAFETY: the layout has a nonzero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or(Error::OutOfMemory(bytes))?;
        Ok(Buffer::new(
            self.name.clone(),
            bytes,
            Box::new(CpuMem {
                ptr,
                layout,
                owner: self.id,
            }),
        ))
    }

    fn copy_in(&self, dst: &Buffer, data: &[u8]) -> Result<()> {
        let m = self.mem(dst)?;
        super::check_copy_in(dst, data)?;
        let _g = self.guard();
        // SAFETY: `m` holds `dst.bytes()` bytes; the device lock excludes other accesses.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), m.ptr.as_ptr(), data.len()) };
        Ok(())
    }

    fn copy_out(&self, src: &Buffer) -> Result<Vec<u8>> {
        let m = self.mem(src)?;
        let _g = self.guard();
        // SAFETY: as in copy_in.
        Ok(unsafe { std::slice::from_raw_parts(m.ptr.as_ptr(), src.bytes()) }.to_vec())
    }

    fn compile(&self, unit: &Unit) -> Result<Compiled> {
        if unit.lang != Lang::C {
            return Err(Error::Unsupported(format!(
                "the CPU runtime compiles C, not {:?}",
                unit.lang
            )));
        }
        let prog = load_program(&self.compiler, unit, &unit.source)?;
        Ok(Compiled::new("CPU", unit.kernels.clone(), Arc::new(prog)))
    }

    fn launch(&self, prog: &Compiled, kernel: &str, args: &[&Buffer]) -> Result<()> {
        self.launch_threads(prog, kernel, args, threads::cpu_threads()?)
    }

    fn copy_to(&self, src: &Buffer, dst_device: &dyn Device, dst: &Buffer) -> Result<()> {
        let Some(other) = dst_device.as_any().downcast_ref::<CpuDevice>() else {
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
        // Lock both devices in id order (once if they are the same device).
        let (_g1, _g2) = if self.id == other.id {
            (self.guard(), None)
        } else if self.id < other.id {
            let g = self.guard();
            (g, Some(other.guard()))
        } else {
            let g = other.guard();
            (g, Some(self.guard()))
        };
        // SAFETY: two distinct allocations of `src.bytes()` bytes, both devices locked.
        unsafe { std::ptr::copy_nonoverlapping(s.ptr.as_ptr(), d.ptr.as_ptr(), src.bytes()) };
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        // Every operation completes before it returns.
        drop(self.guard());
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(n: usize) -> CpuDevice {
        CpuDevice::new(n, CCompiler::global())
    }

    #[test]
    fn buffers_copy_in_out_and_between_devices() {
        let (a, b) = (dev(0), dev(1));
        let x = a.alloc(5).unwrap();
        assert_eq!(a.copy_out(&x).unwrap(), vec![0; 5]);
        a.copy_in(&x, &[1, 2, 3, 4, 5]).unwrap();
        let y = b.alloc(5).unwrap();
        a.copy_to(&x, &b, &y).unwrap();
        a.copy_in(&x, &[9; 5]).unwrap();
        assert_eq!(b.copy_out(&y).unwrap(), vec![1, 2, 3, 4, 5]);
        b.copy_to(&y, &a, &x).unwrap();
        assert_eq!(a.copy_out(&x).unwrap(), vec![1, 2, 3, 4, 5]);
        // Same-device copy.
        let z = a.alloc(5).unwrap();
        a.copy_to(&x, &a, &z).unwrap();
        assert_eq!(a.copy_out(&z).unwrap(), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn misuse_is_reported() {
        let (a, b) = (dev(0), dev(0));
        let x = a.alloc(4).unwrap();
        assert!(matches!(b.copy_out(&x), Err(Error::WrongDevice { .. })));
        assert!(matches!(
            a.copy_in(&x, &[1, 2]),
            Err(Error::SizeMismatch { .. })
        ));
        let y = b.alloc(3).unwrap();
        assert!(matches!(
            a.copy_to(&x, &b, &y),
            Err(Error::SizeMismatch { .. })
        ));
        let empty = a.alloc(0).unwrap();
        assert_eq!(a.copy_out(&empty).unwrap(), Vec::<u8>::new());
    }
}
