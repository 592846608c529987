//! The CUDA runtime's device paths (`runtime::cuda`) against a stand-in `libcuda` built here
//! from C.
//!
//! No NVIDIA GPU or driver is at hand, so the runtime's own plumbing (binding the device's
//! context before each call, kernel parameters, grid and block, peer copies and their host
//! fallback, frees and unloads in the owning context) is checked against a fake driver
//! library: two "devices" of compute capability 9.0 whose memory is host memory tagged with
//! its device, one primary context per device, a current context per thread, and one
//! "kernel" (`k_fake_add`: p0[i] += p1[i] over grid.x × block.x items) that the fake's
//! cuLaunchKernel runs on the host; it refuses 48-byte peer copies, so that the host
//! fallback runs too. It says nothing about CUDA's semantics, only about what this runtime
//! passes to the driver API through `cudarc`. NVRTC is the real one (the image given to
//! cuModuleLoadData must be a CUBIN for the device's `sm_90`).
//!
//! `cudarc` opens `libcuda.so` (and its other names) through the dynamic loader, once per
//! process, so each check runs in a child process whose `LD_LIBRARY_PATH` starts with the
//! fake's directory. Without NVRTC the tests print `skipped: <reason>` and pass, unless
//! `UOPKIT_REQUIRE_BACKENDS=nvrtc` (CI) makes its absence a failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uopkit_compiler::exec;
use uopkit_compiler::pipeline::schedule_opts;
use uopkit_compiler::render::{KernelSig, Lang, Launch, Unit};
use uopkit_compiler::runtime::{self, cuda, Error};
use uopkit_compiler::schedule::ScheduleOpts;
use uopkit_interp::ir::{Backend, DType, Device};
use uopkit_interp::kernel::ParamDecl;
use uopkit_interp::tensor::{Ctx, Tensor};
use uopkit_interp::verify::verify;

mod common;

const CUDA0: Device = Device {
    backend: Backend::Cuda,
    index: 0,
};

/// Set in the child process to the fake library's path.
const FAKE_CHILD_ENV: &str = "UOPKIT_CUDA_TEST_FAKE_CHILD";

/// The stand-in driver. Every symbol `cudarc` resolves for the calls `runtime::cuda` makes
/// (including those of `CudaContext::new`, `bind_to_thread` and `compute_capability`), with
/// the C types of cudarc's `sys` bindings: CUresult an int, CUdevice an int, CUdeviceptr an
/// unsigned long long, contexts, modules and functions pointers. Only codes CUresult names are
/// returned (1 invalid value, 3 not initialized, 101 invalid device, 200 invalid image, 201
/// invalid context, 217 peer access unsupported, 500 not found, 2 out of memory for 1 TiB or
/// more). With `-DOMIT_LOAD` it lacks cuModuleLoadData.
const FAKE_CUDA: &str = r#"
#include <stdlib.h>
#include <string.h>
typedef unsigned long long dptr;
typedef struct { int dev; size_t n; } hdr;
typedef struct { int dev; int tag; } fctx;
typedef struct { int dev; } fmod;
static fctx ctxs[2] = {{0, 0xc0}, {1, 0xc1}};
static __thread fctx *cur = 0;
static int inited = 0;
static long counters[20];
enum { ALLOCS, FREES, LOADS, UNLOADS, LAUNCHES, PEERS, WRONG, SETS, GRID_X, BLOCK_X,
       RETAINS, RELEASES, SYNCS, PEND0, PEND1, EFLAGS, ZERO_ALLOCS, PTX };
long fake_counter(int i) { return counters[i]; }
static hdr *H(dptr p) { return (hdr *)((char *)(size_t)p - 16); }
static int mine(dptr p) { return cur && p && H(p)->dev == cur->dev; }
static int isctx(void *c) { return c == &ctxs[0] || c == &ctxs[1]; }
static void pend(void) { counters[PEND0 + cur->dev] = 1; }
static int wrong(void) { counters[WRONG]++; return 1; }
int cuInit(unsigned f) { if (f) return 1; inited = 1; return 0; }
int cuDeviceGetCount(int *n) { if (!inited) return 3; *n = 2; return 0; }
int cuDeviceGet(int *d, int o) { if (!inited) return 3; if (o < 0 || o > 1) return 101; *d = o; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) {
  if (d < 0 || d > 1) return 101;
  if (a == 75) *v = 9; else if (a == 76) *v = 0; else if (a == 115) *v = 0; else return 1;
  return 0;
}
int cuDevicePrimaryCtxRetain(void **c, int d) {
  if (!inited) return 3;
  if (d < 0 || d > 1) return 101;
  *c = &ctxs[d]; counters[RETAINS]++; return 0;
}
int cuDevicePrimaryCtxRelease_v2(int d) { if (d < 0 || d > 1) return 101; counters[RELEASES]++; return 0; }
int cuCtxGetCurrent(void **c) { *c = cur; return 0; }
int cuCtxSetCurrent(void *c) { if (c && !isctx(c)) return 201; cur = c; counters[SETS]++; return 0; }
int cuCtxSynchronize(void) { if (!cur) return 201; counters[SYNCS]++; counters[PEND0 + cur->dev] = 0; return 0; }
int cuMemAlloc_v2(dptr *p, size_t n) {
  if (!cur) return 201;
  if (n == 0) { counters[ZERO_ALLOCS]++; return 1; }
  if (n >= (1ull << 40)) return 2; /* out of memory */
  char *m = malloc(n + 16); ((hdr *)m)->dev = cur->dev; ((hdr *)m)->n = n;
  *p = (dptr)(size_t)(m + 16); counters[ALLOCS]++; return 0;
}
int cuMemFree_v2(dptr p) { if (!mine(p)) counters[WRONG]++; free(H(p)); counters[FREES]++; return 0; }
int cuMemcpyHtoD_v2(dptr d, const void *s, size_t n) {
  if (!mine(d) || n > H(d)->n) return wrong();
  memcpy((void *)(size_t)d, s, n); return 0;
}
int cuMemcpyDtoH_v2(void *d, dptr s, size_t n) {
  if (!mine(s) || n > H(s)->n) return wrong();
  memcpy(d, (void *)(size_t)s, n); return 0;
}
int cuMemcpyDtoD_v2(dptr d, dptr s, size_t n) {
  if (!mine(d) || !mine(s) || n > H(d)->n || n > H(s)->n) return wrong();
  memcpy((void *)(size_t)d, (void *)(size_t)s, n); pend(); return 0;
}
int cuMemcpyPeer(dptr d, void *dc, dptr s, void *sc, size_t n) {
  if (n == 48) return 217; /* refused, to exercise the runtime's host fallback */
  if (!cur || !isctx(dc) || !isctx(sc) || dc == sc) return wrong();
  if (H(d)->dev != ((fctx *)dc)->dev || H(s)->dev != ((fctx *)sc)->dev) return wrong();
  if (n > H(d)->n || n > H(s)->n) return wrong();
  memcpy((void *)(size_t)d, (void *)(size_t)s, n); counters[PEERS]++; pend(); return 0;
}
#ifndef OMIT_LOAD
int cuModuleLoadData(void **m, const void *image) {
  if (!cur) return 201;
  const unsigned char *b = image;
  if (!memcmp(b, "\x7f" "ELF", 4)) {
    if (b[18] + 256 * b[19] != 190) return 200; /* EM_CUDA */
    memcpy(&counters[EFLAGS], b + 48, 4); /* e_flags of an ELF64 header */
  } else if (strstr(image, ".version") && strstr(image, ".entry k_fake_add")) {
    counters[PTX] = !!strstr(image, ".target sm_90"); /* PTX text for compute_90 */
  } else return 200;
  fmod *f = malloc(sizeof *f); f->dev = cur->dev; *m = f; counters[LOADS]++; return 0;
}
#endif
int cuModuleGetFunction(void **f, void *m, const char *name) {
  if (!cur || ((fmod *)m)->dev != cur->dev) return wrong();
  if (strcmp(name, "k_fake_add")) return 500;
  *f = m; return 0;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shm, void *stream, void **params, void **extra) {
  if (!cur || ((fmod *)f)->dev != cur->dev) return wrong();
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || shm || stream || extra || !params) return wrong();
  dptr a = *(dptr *)params[0], b = *(dptr *)params[1];
  if (!mine(a) || !mine(b)) return wrong();
  int *p0 = (int *)(size_t)a, *p1 = (int *)(size_t)b;
  if ((size_t)gx * bx * 4 > H(a)->n || (size_t)gx * bx * 4 > H(b)->n) return wrong();
  for (unsigned i = 0; i < gx * bx; i++) p0[i] += p1[i];
  counters[GRID_X] = gx; counters[BLOCK_X] = bx; counters[LAUNCHES]++; pend(); return 0;
}
int cuModuleUnload(void *m) {
  if (!cur || ((fmod *)m)->dev != cur->dev) counters[WRONG]++;
  free(m); counters[UNLOADS]++; return 0;
}
int cuGetErrorString(int code, const char **s) { *s = code ? "fakeError" : "no error"; return 0; }
"#;

// The fake's counters (indices into its `counters`).
const ALLOCS: i32 = 0;
const FREES: i32 = 1;
const LOADS: i32 = 2;
const UNLOADS: i32 = 3;
const LAUNCHES: i32 = 4;
const PEERS: i32 = 5;
const WRONG: i32 = 6;
const GRID_X: i32 = 8;
const BLOCK_X: i32 = 9;
const RETAINS: i32 = 10;
const RELEASES: i32 = 11;
const SYNCS: i32 = 12;
const PEND0: i32 = 13;
const PEND1: i32 = 14;
const EFLAGS: i32 = 15;
const ZERO_ALLOCS: i32 = 16;
const PTX: i32 = 17;

/// Whether NVRTC tests should run: true if it is there; false (after printing why) if it is
/// absent and not required; a failure if it is absent and `UOPKIT_REQUIRE_BACKENDS` names nvrtc.
fn nvrtc_here(test: &str) -> bool {
    match cuda::nvrtc_available() {
        Ok(()) => true,
        Err(reason) => {
            assert!(
                !runtime::required("nvrtc"),
                "nvrtc is required here (UOPKIT_REQUIRE_BACKENDS) but unavailable: {reason}"
            );
            eprintln!("{test}: skipped: NVRTC unavailable: {reason}");
            false
        }
    }
}

/// Builds the fake as `dir/libcuda.so` with the C compiler's extra `flags`; None (after
/// printing why) when there is no C compiler.
fn build_fake(test: &str, dir: &Path, flags: &[&str]) -> Option<PathBuf> {
    let (src, so) = (dir.join("fake_cuda.c"), dir.join("libcuda.so"));
    std::fs::write(&src, FAKE_CUDA).expect("write the fake");
    let cc = std::env::var("UOPKIT_CC").unwrap_or_else(|_| "cc".into());
    let built = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so"])
        .args(flags)
        .arg("-o")
        .arg(&so)
        .arg(&src)
        .output();
    match built {
        Ok(o) if o.status.success() => Some(so),
        Ok(o) => panic!(
            "{cc} rejected the fake: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("{test}: skipped: no C compiler ({cc}: {e})");
            None
        }
    }
}

/// Runs test `name` again in a child process whose loader finds the fake `so` first as
/// `libcuda.so` (NVRTC still wherever the parent finds it), with [`cuda::ARCH_ENV`] set to
/// `arch` or unset, and checks that it passed.
fn run_child(name: &str, so: &Path, arch: Option<&str>) {
    let dir = so.parent().expect("the fake's directory");
    let mut path = dir.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"));
    child
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(FAKE_CHILD_ENV, so)
        .env("LD_LIBRARY_PATH", path)
        .env_remove(cuda::ARCH_ENV);
    if let Some(arch) = arch {
        child.env(cuda::ARCH_ENV, arch);
    }
    let out = child.output().expect("run the child");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("1 passed"), "{text}");
    eprintln!("{name}: child:\n{text}");
}

/// In the parent: builds the fake with the C compiler's `flags` and runs `name` in a child
/// against it (with `arch` as [`cuda::ARCH_ENV`]). In the child: the fake's path. None in the
/// parent (its work is done) or when the test is skipped.
fn parent_or_child(name: &str, flags: &[&str], arch: Option<&str>) -> Option<PathBuf> {
    if let Ok(so) = std::env::var(FAKE_CHILD_ENV) {
        if let Err(reason) = cuda::nvrtc_available() {
            panic!("NVRTC unavailable in the child: {reason}");
        }
        return Some(PathBuf::from(so));
    }
    if !nvrtc_here(name) {
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let so = build_fake(name, dir.path(), flags)?;
    run_child(name, &so, arch);
    None
}

/// The fake's counter `i`.
fn fake_counter(lib: &libloading::Library, i: i32) -> i64 {
    // SAFETY: `fake_counter` has this signature in FAKE_CUDA.
    let f = unsafe { lib.get::<unsafe extern "C" fn(i32) -> i64>("fake_counter") }
        .expect("fake_counter");
    // SAFETY: reads a static array within its bounds.
    unsafe { f(i) }
}

fn words(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `k_fake_add` as CUDA C, launched on grid [2,1,1] × block [4,1,1] as kernel `add`.
fn add_unit() -> Unit {
    let decl = |written| ParamDecl {
        dtype: DType::Int32,
        size: 8,
        written,
    };
    Unit {
        lang: Lang::Cuda,
        source: "extern \"C\" __global__ void k_fake_add(int *p0, int *p1) {\n  \
                 int i = blockIdx.x * blockDim.x + threadIdx.x;\n  p0[i] += p1[i];\n}\n"
            .into(),
        kernels: vec![KernelSig {
            name: "add".into(),
            symbol: "k_fake_add".into(),
            params: vec![decl(true), decl(false)],
            launch: Launch {
                grid: [2, 1, 1],
                block: [4, 1, 1],
            },
        }],
    }
}

#[test]
fn the_device_paths_drive_a_stand_in_driver_correctly() {
    const NAME: &str = "the_device_paths_drive_a_stand_in_driver_correctly";
    let Some(lib_path) = parent_or_child(NAME, &[], None) else {
        return;
    };
    // In the child: libcuda.so is the fake, NVRTC the real one.
    assert_eq!(cuda::device_count().expect("count"), 2);
    // SAFETY: the fake has no initializers; it is the library cudarc opened (same file).
    let fake = unsafe { libloading::Library::new(&lib_path) }.expect("the fake");
    let d0 = cuda::CudaDevice::get(0).expect("CUDA:0");
    let d1 = cuda::CudaDevice::get(1).expect("CUDA:1");
    match cuda::CudaDevice::get(2) {
        Err(Error::Unavailable { what, reason }) => {
            assert_eq!(what, "CUDA driver");
            assert!(reason.contains("2 CUDA device(s)"), "{reason}");
        }
        other => panic!("CUDA:2: {other:?}"),
    }
    // Process-wide devices: the same one each time, by either path.
    let (o1, o2) = (
        runtime::open("CUDA:0").expect("open CUDA:0"),
        runtime::open("CUDA:0").expect("open CUDA:0 again"),
    );
    assert!(std::ptr::addr_eq(Arc::as_ptr(&o1), Arc::as_ptr(&o2)));
    assert!(std::ptr::addr_eq(Arc::as_ptr(&o1), Arc::as_ptr(&d0)));
    drop((o1, o2));
    assert_eq!(
        (d0.name(), d0.runtime(), d0.lang()),
        ("CUDA:0", "CUDA", Lang::Cuda)
    );
    // Compute capability 9.0 from attributes 75/76: sm_90.
    assert!(format!("{d1:?}").contains("sm_90"), "{d1:?}");
    assert_eq!(
        fake_counter(&fake, RETAINS),
        2,
        "one primary context per device"
    );
    {
        let data: Vec<u8> = (0..64u8).collect();
        let x = d0.alloc(64).expect("alloc");
        d0.copy_in(&x, &data).expect("copy_in");
        assert_eq!(d0.copy_out(&x).expect("copy_out"), data);
        let y = d0.alloc(64).expect("alloc");
        d0.copy_to(&x, d0.as_ref(), &y).expect("same-device copy");
        assert_eq!(fake_counter(&fake, PEND0), 0, "cuMemcpyDtoD waited for");
        assert_eq!(d0.copy_out(&y).expect("copy_out"), data);
        let z = d1.alloc(64).expect("alloc on CUDA:1");
        d0.copy_to(&x, d1.as_ref(), &z).expect("peer copy");
        assert_eq!(fake_counter(&fake, PEERS), 1, "one cuMemcpyPeer");
        assert_eq!(
            (fake_counter(&fake, PEND0), fake_counter(&fake, PEND1)),
            (0, 0),
            "cuMemcpyPeer waited for"
        );
        assert_eq!(d1.copy_out(&z).expect("copy_out"), data);
        // The other way round, too.
        let w = d0.alloc(64).expect("alloc");
        d1.copy_to(&z, d0.as_ref(), &w).expect("peer copy back");
        assert_eq!(fake_counter(&fake, PEERS), 2, "two cuMemcpyPeer");
        assert_eq!(d0.copy_out(&w).expect("copy_out"), data);
        // A peer copy the fake refuses goes through the host.
        let (p, q) = (d0.alloc(48).expect("p"), d1.alloc(48).expect("q"));
        d0.copy_in(&p, &data[..48]).expect("copy_in");
        d0.copy_to(&p, d1.as_ref(), &q).expect("fallback copy");
        assert_eq!(d1.copy_out(&q).expect("copy_out"), &data[..48]);
        assert_eq!(fake_counter(&fake, PEERS), 2, "no further peer copy");
        assert!(matches!(
            d0.copy_to(&x, d1.as_ref(), &q),
            Err(Error::SizeMismatch { .. })
        ));
        assert!(matches!(d1.copy_out(&x), Err(Error::WrongDevice { .. })));
        assert!(matches!(
            d1.copy_in(&x, &data),
            Err(Error::WrongDevice { .. })
        ));
        assert!(matches!(
            d0.copy_in(&x, &data[..8]),
            Err(Error::SizeMismatch { .. })
        ));
        match d1.alloc(1 << 40) {
            Err(Error::OutOfMemory(n)) => assert_eq!(n, 1 << 40),
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        let empty = d1.alloc(0).expect("alloc 0");
        d1.copy_in(&empty, &[]).expect("copy_in 0");
        assert_eq!(d1.copy_out(&empty).expect("copy_out 0"), Vec::<u8>::new());
        assert_eq!(
            fake_counter(&fake, ZERO_ALLOCS),
            0,
            "no zero-byte cuMemAlloc"
        );
        let cpu = runtime::CpuDevice::get(0);
        let c = cpu.alloc(64).expect("cpu alloc");
        assert!(matches!(d0.copy_out(&c), Err(Error::WrongDevice { .. })));
        assert!(matches!(
            d0.copy_to(&x, cpu.as_ref(), &c),
            Err(Error::Unsupported(_))
        ));
        runtime::copy_between(d0.as_ref(), &x, cpu.as_ref(), &c).expect("CUDA -> CPU");
        assert_eq!(cpu.copy_out(&c).expect("cpu copy_out"), data);

        // A kernel: p0[i] += p1[i] on 2 × 4 items, compiled by NVRTC, run by the fake.
        let unit = add_unit();
        let (a, b) = (d1.alloc(32).expect("a"), d1.alloc(32).expect("b"));
        d1.copy_in(&a, &words(&[1, 2, 3, 4, 5, 6, 7, 8]))
            .expect("a");
        d1.copy_in(&b, &words(&[10, 20, 30, 40, 50, 60, 70, 80]))
            .expect("b");
        let prog = d1.compile(&unit).expect("compile on CUDA:1");
        let eflags = fake_counter(&fake, EFLAGS);
        eprintln!("CUBIN e_flags: {eflags:#x}");
        assert!(
            eflags & 0xff == 90 || (eflags >> 8) & 0xff == 90,
            "a CUBIN for sm_90: e_flags {eflags:#x}"
        );
        let syncs = fake_counter(&fake, SYNCS);
        d1.launch(&prog, "add", &[&a, &b]).expect("launch");
        assert_eq!(fake_counter(&fake, SYNCS), syncs + 1, "a launch waits");
        assert_eq!(fake_counter(&fake, PEND1), 0, "on its own context");
        assert_eq!(
            d1.copy_out(&a).expect("result"),
            words(&[11, 22, 33, 44, 55, 66, 77, 88])
        );
        assert_eq!(fake_counter(&fake, LAUNCHES), 1, "one launch");
        assert_eq!(
            (fake_counter(&fake, GRID_X), fake_counter(&fake, BLOCK_X)),
            (2, 4),
            "grid, block"
        );
        // Interleaved with work on the other device, the launch binds its own context.
        d0.copy_in(&x, &data).expect("copy_in on CUDA:0");
        d1.launch(&prog, "add", &[&a, &b]).expect("second launch");
        assert_eq!(
            d1.copy_out(&a).expect("result"),
            words(&[21, 42, 63, 84, 105, 126, 147, 168])
        );
        common::launch_refusals(d0.as_ref(), d1.as_ref(), &prog, &a, &b);
        assert_eq!(
            fake_counter(&fake, LAUNCHES),
            2,
            "no launch for a refused call"
        );
        let bad = Unit {
            kernels: vec![KernelSig {
                symbol: "k_missing".into(),
                ..unit.kernels[0].clone()
            }],
            ..unit.clone()
        };
        match d1.compile(&bad) {
            Err(Error::Driver {
                runtime,
                call,
                code,
                message,
            }) => {
                assert_eq!(runtime, "CUDA");
                assert_eq!(call, "cuModuleGetFunction");
                assert_eq!(code, 500, "CUDA_ERROR_NOT_FOUND");
                assert_eq!(message, "fakeError");
            }
            other => panic!("expected a Driver error, got {other:?}"),
        }
        assert_eq!(
            (fake_counter(&fake, LOADS), fake_counter(&fake, UNLOADS)),
            (2, 1),
            "the module of a failed compile is unloaded"
        );
        // A program dropped while another device's context is current is unloaded in its own.
        d0.synchronize().expect("synchronize CUDA:0");
        drop(prog);
        assert_eq!(fake_counter(&fake, UNLOADS), 2);
        d1.synchronize().expect("synchronize CUDA:1");

        // exec across runtimes: CPU:1 → CUDA:0 and back are COPY steps staged through the
        // host (runtime::copy_between), with the values an all-CPU run gives.
        let copies = |gpu: Device| {
            let ctx = Ctx::new();
            let vals: Vec<i64> = (0..8).map(|i| i * 3 - 7).collect();
            let t = Tensor::from_i64s(&ctx, &[8], DType::Int32, Device::cpu(1), &vals).expect("t");
            let there = t.copy_to(gpu).expect("to the GPU");
            let back = there.copy_to(Device::cpu(1)).expect("back");
            let roots = vec![there.id(), back.id()];
            let g = ctx.graph();
            let ver = verify(&g).expect("verifies");
            let sched =
                schedule_opts(&g, &ver, &roots, &ScheduleOpts::default()).expect("schedule");
            assert_eq!(sched.copies(), 2, "{sched}");
            exec::run(&sched, &ctx.inputs()).unwrap_or_else(|e| panic!("exec on {gpu}: {e}"))
        };
        let allocs = fake_counter(&fake, ALLOCS);
        let on_cuda = copies(CUDA0);
        assert!(
            fake_counter(&fake, ALLOCS) > allocs,
            "exec allocated on CUDA:0"
        );
        assert_eq!(on_cuda, copies(Device::cpu(0)));
        assert_eq!(fake_counter(&fake, LAUNCHES), 2, "copies only, no kernel");
    }
    // Everything dropped: every allocation freed and every module unloaded, each in its own
    // context; nothing passed for the wrong device; the process-wide devices keep their
    // primary contexts.
    assert_eq!(
        fake_counter(&fake, ALLOCS),
        fake_counter(&fake, FREES),
        "allocs = frees"
    );
    assert_eq!(fake_counter(&fake, LOADS), 2, "modules loaded");
    assert_eq!(fake_counter(&fake, UNLOADS), 2, "modules unloaded");
    assert_eq!(fake_counter(&fake, WRONG), 0, "calls in the wrong context");
    assert_eq!(fake_counter(&fake, ZERO_ALLOCS), 0, "zero-byte cuMemAlloc");
    assert_eq!(
        fake_counter(&fake, RELEASES),
        0,
        "primary contexts released"
    );
}

/// A driver that lacks a symbol the runtime needs (`cudarc` panics when it resolves it):
/// the call is [`Error::Unavailable`] naming the symbol, not a panic, and the device stays
/// usable for everything else.
#[test]
fn a_missing_driver_symbol_is_unavailable_not_a_panic() {
    const NAME: &str = "a_missing_driver_symbol_is_unavailable_not_a_panic";
    let Some(_) = parent_or_child(NAME, &["-DOMIT_LOAD"], None) else {
        return;
    };
    let d = runtime::open("CUDA:1").expect("CUDA:1");
    match d.compile(&add_unit()) {
        Err(Error::Unavailable { what, reason }) => {
            assert_eq!(what, "CUDA driver");
            assert!(reason.contains("cuModuleLoadData"), "{reason}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let x = d.alloc(8).expect("alloc");
    d.copy_in(&x, &words(&[5, 6])).expect("copy_in");
    assert_eq!(d.copy_out(&x).expect("copy_out"), words(&[5, 6]));
}

/// With [`cuda::ARCH_ENV`] naming a virtual architecture, NVRTC's PTX text (NUL-terminated)
/// is the module image, and the kernel runs as with a CUBIN.
#[test]
fn a_virtual_architecture_loads_ptx_text() {
    const NAME: &str = "a_virtual_architecture_loads_ptx_text";
    let Some(lib_path) = parent_or_child(NAME, &[], Some("compute_90")) else {
        return;
    };
    // SAFETY: the fake has no initializers.
    let fake = unsafe { libloading::Library::new(&lib_path) }.expect("the fake");
    let d = runtime::open("CUDA:0").expect("CUDA:0");
    assert!(format!("{d:?}").contains("compute_90"), "{d:?}");
    {
        let prog = d.compile(&add_unit()).expect("compile to PTX");
        assert_eq!(
            fake_counter(&fake, PTX),
            1,
            "PTX text for compute_90 loaded"
        );
        assert_eq!(fake_counter(&fake, EFLAGS), 0, "no CUBIN");
        let (a, b) = (d.alloc(32).expect("a"), d.alloc(32).expect("b"));
        d.copy_in(&a, &words(&[0, 1, 2, 3, 4, 5, 6, 7])).expect("a");
        d.copy_in(&b, &words(&[7; 8])).expect("b");
        d.launch(&prog, "add", &[&a, &b]).expect("launch");
        assert_eq!(
            d.copy_out(&a).expect("result"),
            words(&[7, 8, 9, 10, 11, 12, 13, 14])
        );
    }
    assert_eq!(fake_counter(&fake, ALLOCS), fake_counter(&fake, FREES));
    assert_eq!(fake_counter(&fake, UNLOADS), 1);
    assert_eq!(fake_counter(&fake, WRONG), 0);
}
