//! The HIP runtime (`runtime::hip`): hiprtc compiles of rendered units, a rejected unit,
//! `HIP:n` without a device or library, the device paths against a stand-in `libamdhip64`
//! built from C, and device round trips compared with the CPU backend.
//!
//! hiprtc needs no GPU, so its tests run wherever the library is (Debian's `libamdhip64-5`
//! exports it); without it they print `skipped: <reason>` and pass, unless
//! `UOPKIT_REQUIRE_BACKENDS=hiprtc` (CI) makes its absence a failure. Device tests run only where
//! `hip::device_count()` finds a device and print `skipped: <reason>` otherwise.

use std::collections::BTreeMap;
use std::sync::Arc;

use uopkit_compiler::exec;
use uopkit_compiler::pipeline::schedule_opts;
use uopkit_compiler::render::{renderer, Lang, Unit};
use uopkit_compiler::runtime::{self, hip, Error};
use uopkit_compiler::schedule::{Schedule, ScheduleOpts};
use uopkit_interp::eval::BufferInit;
use uopkit_interp::ir::{Backend, DType, Device, NodeId};
use uopkit_interp::tensor::{Ctx, Tensor};
use uopkit_interp::verify::verify;

mod common;

const HIP0: Device = Device {
    backend: Backend::Hip,
    index: 0,
};

/// Whether hiprtc tests should run: true if it is there; false (after printing why) if it is
/// absent and not required; a failure if it is absent and `UOPKIT_REQUIRE_BACKENDS` names hiprtc.
fn hiprtc_here(test: &str) -> bool {
    match hip::hiprtc_available() {
        Ok(()) => true,
        Err(reason) => {
            assert!(
                !uopkit_compiler::runtime::required("hiprtc"),
                "hiprtc is required here (UOPKIT_REQUIRE_BACKENDS) but unavailable: {reason}"
            );
            eprintln!("{test}: skipped: hiprtc unavailable: {reason}");
            false
        }
    }
}

/// The number of HIP devices, or None (after printing why) when there is none.
fn devices_here(test: &str) -> Option<usize> {
    match hip::device_count() {
        Ok(n) if n > 0 => Some(n),
        Ok(_) => {
            eprintln!("{test}: skipped: the HIP runtime reports no device");
            None
        }
        Err(e) => {
            eprintln!("{test}: skipped: {e}");
            None
        }
    }
}

/// A small graph on `device`: `e = a * b + a` (int32 and float32 elementwise), `r` = the
/// row sums of `a` (int32, 4 × 16) and `f` = the row sums of a float32 matrix whose sums are
/// exact in any order; schedule, inputs and roots.
fn graph(device: Device) -> (Schedule, BTreeMap<NodeId, BufferInit>, Vec<NodeId>) {
    let ctx = Ctx::new();
    let ints: Vec<i64> = (0..64).map(|i| (i * 7919) % 201 - 100).collect();
    let a = Tensor::from_i64s(&ctx, &[4, 16], DType::Int32, device, &ints).expect("a");
    let rev: Vec<i64> = ints.iter().rev().copied().collect();
    let b = Tensor::from_i64s(&ctx, &[4, 16], DType::Int32, device, &rev)
        .expect("b")
        .add(3)
        .expect("b + 3");
    let e = a.mul(&b).expect("a * b").add(&a).expect("+ a");
    let r = a.sum(&[1]).expect("row sums");
    let floats: Vec<f64> = (0..64)
        .map(|i| (i as f64 - 31.0) / 8.0 + 1.0 / 3.0)
        .collect();
    let x = Tensor::from_f64s(&ctx, &[4, 16], DType::Float32, device, &floats).expect("x");
    let fe = x.mul(&x).expect("x * x").add(&x).expect("+ x");
    let fr = x.sum(&[1]).expect("float row sums");
    let roots = vec![e.id(), r.id(), fe.id(), fr.id()];
    let g = ctx.graph();
    let ver = verify(&g).unwrap_or_else(|err| panic!("graph does not verify: {err}"));
    let sched = schedule_opts(&g, &ver, &roots, &ScheduleOpts::default())
        .unwrap_or_else(|err| panic!("schedule: {err}"));
    (sched, ctx.inputs(), roots)
}

fn hip_unit() -> Unit {
    let (sched, _, _) = graph(HIP0);
    renderer(Lang::Hip)
        .render(&sched.programs())
        .unwrap_or_else(|e| panic!("render: {e}"))
}

fn is_code_object(code: &[u8]) -> bool {
    code.starts_with(b"\x7fELF") || code.starts_with(b"__CLANG_OFFLOAD_BUNDLE__")
}

#[test]
fn hiprtc_compiles_rendered_elementwise_and_reduction_kernels() {
    if !hiprtc_here("hiprtc_compiles_rendered_elementwise_and_reduction_kernels") {
        return;
    }
    let unit = hip_unit();
    assert!(unit.kernels.len() >= 2, "{:?}", unit.kernels);
    // A GPU-target reduction: shared memory and barriers.
    assert!(unit.source.contains("__shared__"), "{}", unit.source);
    assert!(unit.source.contains("__syncthreads();"), "{}", unit.source);
    assert!(unit.source.contains("blockIdx.x"), "{}", unit.source);
    let code = hip::hiprtc_compile(&unit).unwrap_or_else(|e| panic!("hiprtc: {e}"));
    assert!(is_code_object(&code), "{:?}", &code[..code.len().min(32)]);
    eprintln!(
        "hiprtc: {} kernels for {} -> code object of {} bytes",
        unit.kernels.len(),
        hip::hip_arch(),
        code.len()
    );
    // Every kernel's symbol is in the code object.
    for k in &unit.kernels {
        let sym = k.symbol.as_bytes();
        assert!(
            code.windows(sym.len()).any(|w| w == sym),
            "{} missing from the code object",
            k.symbol
        );
    }
}

#[test]
fn hiprtc_options_carry_the_exactness_flags() {
    let opts = hip::hiprtc_options("gfx1100");
    assert_eq!(opts[0], "--offload-arch=gfx1100");
    for flag in [
        "-ffp-contract=off",
        "-fno-fast-math",
        "-fhip-fp32-correctly-rounded-divide-sqrt",
        "-fno-gpu-flush-denormals-to-zero",
    ] {
        assert!(opts.iter().any(|o| o == flag), "{flag} missing: {opts:?}");
    }
    assert!(!opts
        .iter()
        .any(|o| o.contains("fast-math") && o != "-fno-fast-math"));
}

#[test]
fn hiprtc_compiles_a_hand_written_kernel() {
    if !hiprtc_here("hiprtc_compiles_a_hand_written_kernel") {
        return;
    }
    let unit = Unit {
        lang: Lang::Hip,
        source: "extern \"C\" __global__ void k_add(float *p0, float *p1) {\n  \
                 p0[threadIdx.x] = p0[threadIdx.x] * p1[threadIdx.x] + p1[threadIdx.x];\n}\n"
            .into(),
        kernels: vec![],
    };
    let code = hip::hiprtc_compile(&unit).unwrap_or_else(|e| panic!("hiprtc: {e}"));
    assert!(is_code_object(&code));
    eprintln!("hiprtc: one small kernel -> {} bytes", code.len());
}

#[test]
fn a_rejected_unit_gives_the_log_and_keeps_the_source() {
    if !hiprtc_here("a_rejected_unit_gives_the_log_and_keeps_the_source") {
        return;
    }
    let unit = Unit {
        lang: Lang::Hip,
        source: "extern \"C\" __global__ void k_bad(float *p0) {\n  p0[0] = ;\n}\n".into(),
        kernels: vec![],
    };
    match hip::hiprtc_compile(&unit) {
        Err(Error::GpuCompile {
            compiler,
            options,
            log,
            source_path,
        }) => {
            assert_eq!(compiler, "hiprtc");
            assert!(options.contains("-ffp-contract=off"), "{options}");
            assert!(log.contains("error"), "{log}");
            assert!(log.contains("expected expression"), "{log}");
            assert!(source_path.exists(), "{}", source_path.display());
            let kept = std::fs::read_to_string(&source_path).expect("kept source");
            assert_eq!(kept, unit.source);
        }
        other => panic!("expected GpuCompile, got {other:?}"),
    }
    // A unit of another language is refused before hiprtc.
    let c = Unit {
        lang: Lang::C,
        ..unit
    };
    assert!(matches!(
        hip::hiprtc_compile(&c),
        Err(Error::Unsupported(_))
    ));
}

#[test]
fn hip_devices_without_a_gpu_are_unavailable_with_a_reason() {
    let first = hip::HipDevice::get(0);
    let second = hip::HipDevice::get(0);
    let opened = runtime::open("HIP:0");
    match hip::device_count() {
        Ok(n) if n > 0 => {
            let (a, b) = (first.expect("HIP:0"), second.expect("HIP:0"));
            assert!(std::ptr::addr_eq(Arc::as_ptr(&a), Arc::as_ptr(&b)));
            assert_eq!(a.name(), "HIP:0");
            assert_eq!(a.runtime(), "HIP");
            assert_eq!(a.lang(), Lang::Hip);
            match hip::HipDevice::get(n) {
                Err(Error::Unavailable { reason, .. }) => {
                    assert!(reason.contains("does not exist"), "{reason}")
                }
                other => panic!("HIP:{n} of {n}: {other:?}"),
            }
        }
        _ => {
            let reason = |r: runtime::Result<Arc<dyn uopkit_compiler::runtime::Device>>| match r {
                Err(Error::Unavailable { what, reason }) => {
                    assert_eq!(what, "HIP runtime");
                    assert!(!reason.is_empty());
                    reason
                }
                other => panic!("expected Unavailable, got {other:?}"),
            };
            let r1 = reason(first);
            eprintln!("HIP:0 unavailable: {r1}");
            assert_eq!(r1, reason(second));
            assert_eq!(r1, reason(opened));
            reason(hip::HipDevice::get(usize::MAX));
        }
    }
    // Never a panic, whatever the machine.
    assert!(!hip::hip_arch().is_empty());
}

#[test]
fn device_buffers_round_trip() {
    let Some(_) = devices_here("device_buffers_round_trip") else {
        return;
    };
    let d = hip::HipDevice::get(0).expect("HIP:0");
    let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let x = d.alloc(data.len()).expect("alloc");
    d.copy_in(&x, &data).expect("copy_in");
    assert_eq!(d.copy_out(&x).expect("copy_out"), data);
    let y = d.alloc(data.len()).expect("alloc");
    d.copy_to(&x, d.as_ref(), &y).expect("copy_to");
    assert_eq!(d.copy_out(&y).expect("copy_out"), data);
    let empty = d.alloc(0).expect("alloc 0");
    d.copy_in(&empty, &[]).expect("copy_in 0");
    assert_eq!(d.copy_out(&empty).expect("copy_out 0"), Vec::<u8>::new());
    assert!(matches!(
        d.copy_in(&x, &[1, 2]),
        Err(Error::SizeMismatch { .. })
    ));
    let cpu = runtime::CpuDevice::get(0);
    let c = cpu.alloc(4).expect("cpu alloc");
    assert!(matches!(d.copy_out(&c), Err(Error::WrongDevice { .. })));
    // Across runtimes, through the host.
    let c = cpu.alloc(data.len()).expect("cpu alloc");
    runtime::copy_between(d.as_ref(), &x, cpu.as_ref(), &c).expect("HIP -> CPU");
    assert_eq!(cpu.copy_out(&c).expect("cpu copy_out"), data);
    d.synchronize().expect("synchronize");
}

#[test]
fn kernels_on_the_device_match_the_cpu_backend_bit_for_bit() {
    let Some(_) = devices_here("kernels_on_the_device_match_the_cpu_backend_bit_for_bit") else {
        return;
    };
    let (hip_sched, hip_inputs, _) = graph(HIP0);
    let (cpu_sched, cpu_inputs, _) = graph(Device::CPU);
    let got = exec::run(&hip_sched, &hip_inputs).unwrap_or_else(|e| panic!("HIP: {e}"));
    let want = exec::run(&cpu_sched, &cpu_inputs).unwrap_or_else(|e| panic!("CPU: {e}"));
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "output {i}");
    }
}

#[test]
fn two_devices_copy_peer_to_peer() {
    let Some(n) = devices_here("two_devices_copy_peer_to_peer") else {
        return;
    };
    if n < 2 {
        eprintln!("two_devices_copy_peer_to_peer: skipped: one HIP device only");
        return;
    }
    let (a, b) = (
        hip::HipDevice::get(0).expect("HIP:0"),
        hip::HipDevice::get(1).expect("HIP:1"),
    );
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    let (x, y) = (
        a.alloc(data.len()).expect("a"),
        b.alloc(data.len()).expect("b"),
    );
    a.copy_in(&x, &data).expect("copy_in");
    a.copy_to(&x, b.as_ref(), &y).expect("peer copy");
    assert_eq!(b.copy_out(&y).expect("copy_out"), data);
    assert!(matches!(b.copy_out(&x), Err(Error::WrongDevice { .. })));
}

/// Set in the child process of `absent_libraries_are_unavailable_with_the_paths_tried`.
const CHILD_ENV: &str = "UOPKIT_HIP_TEST_ABSENT_CHILD";

#[test]
fn absent_libraries_are_unavailable_with_the_paths_tried() {
    const LIB: &str = "/nonexistent/uopkit/libamdhip64.so";
    const RTC: &str = "/nonexistent/uopkit/libhiprtc.so";
    if std::env::var(CHILD_ENV).is_err() {
        // The libraries are found once per process: check in a fresh one with the overrides.
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "absent_libraries_are_unavailable_with_the_paths_tried",
                "--nocapture",
            ])
            .env(CHILD_ENV, "1")
            .env("UOPKIT_HIP_LIB", LIB)
            .env("UOPKIT_HIPRTC_LIB", RTC)
            .env_remove("UOPKIT_HIP_ARCH")
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed:\n{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    for r in [hip::HipDevice::get(0), runtime::open("HIP:1")] {
        match r {
            Err(Error::Unavailable { what, reason }) => {
                assert_eq!(what, "HIP runtime");
                assert!(reason.contains(LIB), "{reason}");
                assert!(reason.contains("UOPKIT_HIP_LIB"), "{reason}");
                eprintln!("unavailable: {reason}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
    assert!(matches!(
        hip::device_count(),
        Err(Error::Unavailable { .. })
    ));
    let reason = hip::hiprtc_available().expect_err("hiprtc from a path that does not exist");
    assert!(reason.contains(RTC), "{reason}");
    let unit = Unit {
        lang: Lang::Hip,
        source: "extern \"C\" __global__ void k_x(float *p0) { p0[0] = 1.0f; }\n".into(),
        kernels: vec![],
    };
    match hip::hiprtc_compile(&unit) {
        Err(Error::Unavailable { what, reason }) => {
            assert_eq!(what, "hiprtc");
            assert!(reason.contains(RTC), "{reason}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(hip::hip_arch(), "gfx90a");
}

// ---------------------------------------------------------------------------------------
// The device paths against a stand-in runtime.
//
// No AMD GPU is at hand, so the runtime's own plumbing (hipSetDevice before each call,
// kernelParams, grid and block, peer copies, frees and unloads) is checked against a fake
// `libamdhip64` built here from C: two "devices" whose memory is host memory tagged with its
// device, and one "kernel" (`k_fake_add`: p0[i] += p1[i] over grid.x × block.x items) that
// the fake's hipModuleLaunchKernel runs on the host; it refuses 48-byte peer copies, so that
// the host fallback runs too. It says nothing about HIP's semantics, only about what this
// runtime passes to it. hiprtc is the real one (the code object given to hipModuleLoadData
// must be an ELF or an offload bundle).

const FAKE_CHILD_ENV: &str = "UOPKIT_HIP_TEST_FAKE_CHILD";

const FAKE_HIP: &str = r#"
#include <stdlib.h>
#include <string.h>
typedef struct { int dev; size_t n; } hdr;
static int cur = -1;
static long counters[10];
enum { ALLOCS, FREES, LOADS, UNLOADS, LAUNCHES, PEERS, WRONG, SETS, GRID_X, BLOCK_X };
long fake_counter(int i) { return counters[i]; }
static hdr *H(const void *p) { return (hdr *)((char *)p - 16); }
static int mine(const void *p) { return H(p)->dev == cur; }
int hipInit(unsigned f) { return f == 0 ? 0 : 1; }
int hipGetDeviceCount(int *n) { *n = 2; return 0; }
int hipSetDevice(int d) { if (d < 0 || d > 1) return 101; cur = d; counters[SETS]++; return 0; }
int hipGetDeviceProperties(char *p, int d) {
  memset(p, 0, 792); strcpy(p, "fake"); strcpy(p + 396, d ? "gfx1030" : "gfx90a:xnack-"); return 0;
}
int hipMalloc(void **p, size_t n) {
  if (cur < 0) return 101;
  if (n == 0) { counters[WRONG]++; *p = 0; return 0; }
  char *m = malloc(n + 16); ((hdr *)m)->dev = cur; ((hdr *)m)->n = n;
  *p = m + 16; counters[ALLOCS]++; return 0;
}
int hipFree(void *p) { if (!mine(p)) counters[WRONG]++; free(H(p)); counters[FREES]++; return 0; }
int hipMemcpy(void *d, const void *s, size_t n, int kind) {
  const void *dev = kind == 1 ? d : s;
  if (kind < 1 || kind > 3 || !mine(dev) || (kind == 3 && !mine(d))) { counters[WRONG]++; return 1; }
  if (n > H(dev)->n) { counters[WRONG]++; return 1; }
  memcpy(d, s, n); return 0;
}
int hipMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n) {
  if (n == 48) return 217; /* refused, to exercise the runtime's host fallback */
  if (H(d)->dev != dd || H(s)->dev != sd || sd != cur) { counters[WRONG]++; return 1; }
  memcpy(d, s, n); counters[PEERS]++; return 0;
}
int hipModuleLoadData(void **m, const void *image) {
  if (memcmp(image, "\x7f" "ELF", 4) && memcmp(image, "__CLANG_OFFLOAD_BUNDLE__", 24)) return 200;
  *m = malloc(1); *(char *)*m = (char)cur; counters[LOADS]++; return 0;
}
int hipModuleGetFunction(void **f, void *m, const char *name) {
  if (strcmp(name, "k_fake_add")) return 500;
  *f = m; return 0;
}
int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shm, void *stream, void **params,
                          void **extra) {
  if (*(char *)f != cur || gy != 1 || gz != 1 || by != 1 || bz != 1 || shm || stream || extra)
    { counters[WRONG]++; return 1; }
  int *p0 = *(int **)params[0], *p1 = *(int **)params[1];
  if (!mine(p0) || !mine(p1)) { counters[WRONG]++; return 1; }
  for (unsigned i = 0; i < gx * bx; i++) p0[i] += p1[i];
  counters[GRID_X] = gx; counters[BLOCK_X] = bx; counters[LAUNCHES]++; return 0;
}
int hipDeviceSynchronize(void) { return cur < 0 ? 101 : 0; }
int hipModuleUnload(void *m) { if (*(char *)m != cur) counters[WRONG]++; free(m); counters[UNLOADS]++; return 0; }
const char *hipGetErrorString(int code) { return code ? "fakeError" : "hipSuccess"; }
"#;

/// The fake's counters, by index (see `FAKE_HIP`).
fn fake_counter(lib: &libloading::Library, i: i32) -> i64 {
    // SAFETY: `fake_counter` has this signature in FAKE_HIP.
    let f = unsafe { lib.get::<unsafe extern "C" fn(i32) -> i64>("fake_counter") }
        .expect("fake_counter");
    // SAFETY: reads a static array within its bounds.
    unsafe { f(i) }
}

#[test]
fn the_device_paths_drive_a_stand_in_runtime_correctly() {
    const NAME: &str = "the_device_paths_drive_a_stand_in_runtime_correctly";
    let Ok(lib_path) = std::env::var(FAKE_CHILD_ENV) else {
        if !hiprtc_here(NAME) {
            return;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let (src, so) = (
            dir.path().join("fake_hip.c"),
            dir.path().join("libfakehip.so"),
        );
        std::fs::write(&src, FAKE_HIP).expect("write the fake");
        let cc = std::env::var("UOPKIT_CC").unwrap_or_else(|_| "cc".into());
        let built = std::process::Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&so)
            .arg(&src)
            .output();
        match built {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "{cc} rejected the fake: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => {
                eprintln!("{NAME}: skipped: no C compiler ({cc}: {e})");
                return;
            }
        }
        // hiprtc from wherever it is found here, the runtime from the fake.
        let rtc = hip::hiprtc_library().expect("hiprtc is available");
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", NAME, "--nocapture"])
            .env(FAKE_CHILD_ENV, &so)
            .env("UOPKIT_HIP_LIB", &so)
            .env("UOPKIT_HIPRTC_LIB", rtc)
            .env_remove("UOPKIT_HIP_ARCH")
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed:\n{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    };
    // In the child: UOPKIT_HIP_LIB is the fake, UOPKIT_HIPRTC_LIB the real hiprtc.
    if let Err(reason) = hip::hiprtc_available() {
        panic!("hiprtc unavailable in the child: {reason}");
    }
    // SAFETY: the fake has no initializers.
    let fake = unsafe { libloading::Library::new(&lib_path) }.expect("the fake");
    assert_eq!(hip::device_count().expect("count"), 2);
    let d0 = hip::HipDevice::get(0).expect("HIP:0");
    let d1 = hip::HipDevice::get(1).expect("HIP:1");
    match hip::HipDevice::get(2) {
        Err(Error::Unavailable { reason, .. }) => assert!(reason.contains("does not exist")),
        other => panic!("HIP:2: {other:?}"),
    }
    assert_eq!(hip::hip_arch(), "gfx90a:xnack-");
    assert!(format!("{d1:?}").contains("gfx1030"), "{d1:?}");
    {
        let data: Vec<u8> = (0..64u8).collect();
        let x = d0.alloc(64).expect("alloc");
        d0.copy_in(&x, &data).expect("copy_in");
        assert_eq!(d0.copy_out(&x).expect("copy_out"), data);
        let y = d0.alloc(64).expect("alloc");
        d0.copy_to(&x, d0.as_ref(), &y).expect("same-device copy");
        assert_eq!(d0.copy_out(&y).expect("copy_out"), data);
        let z = d1.alloc(64).expect("alloc on HIP:1");
        d0.copy_to(&x, d1.as_ref(), &z).expect("peer copy");
        assert_eq!(d1.copy_out(&z).expect("copy_out"), data);
        assert_eq!(fake_counter(&fake, 5), 1, "one hipMemcpyPeer");
        // A peer copy the fake refuses goes through the host.
        let (p, q) = (d0.alloc(48).expect("p"), d1.alloc(48).expect("q"));
        d0.copy_in(&p, &data[..48]).expect("copy_in");
        d0.copy_to(&p, d1.as_ref(), &q).expect("fallback copy");
        assert_eq!(d1.copy_out(&q).expect("copy_out"), &data[..48]);
        assert_eq!(fake_counter(&fake, 5), 1, "no second peer copy");
        assert!(matches!(d1.copy_out(&x), Err(Error::WrongDevice { .. })));
        let empty = d1.alloc(0).expect("alloc 0");
        assert_eq!(d1.copy_out(&empty).expect("copy_out 0"), Vec::<u8>::new());
        // A kernel: p0[i] += p1[i] on 2 × 4 items.
        let decl = |written| uopkit_interp::kernel::ParamDecl {
            dtype: DType::Int32,
            size: 8,
            written,
        };
        let unit = Unit {
            lang: Lang::Hip,
            source: "extern \"C\" __global__ void k_fake_add(int *p0, int *p1) {\n  \
                     int i = blockIdx.x * blockDim.x + threadIdx.x;\n  p0[i] += p1[i];\n}\n"
                .into(),
            kernels: vec![uopkit_compiler::render::KernelSig {
                name: "add".into(),
                symbol: "k_fake_add".into(),
                params: vec![decl(true), decl(false)],
                launch: uopkit_compiler::render::Launch {
                    grid: [2, 1, 1],
                    block: [4, 1, 1],
                },
            }],
        };
        let words = |v: &[i32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let (a, b) = (d1.alloc(32).expect("a"), d1.alloc(32).expect("b"));
        d1.copy_in(&a, &words(&[1, 2, 3, 4, 5, 6, 7, 8]))
            .expect("a");
        d1.copy_in(&b, &words(&[10, 20, 30, 40, 50, 60, 70, 80]))
            .expect("b");
        let prog = d1.compile(&unit).expect("compile on HIP:1");
        d1.launch(&prog, "add", &[&a, &b]).expect("launch");
        assert_eq!(
            d1.copy_out(&a).expect("result"),
            words(&[11, 22, 33, 44, 55, 66, 77, 88])
        );
        common::launch_refusals(d0.as_ref(), d1.as_ref(), &prog, &a, &b);
        let bad = Unit {
            kernels: vec![uopkit_compiler::render::KernelSig {
                symbol: "k_missing".into(),
                ..unit.kernels[0].clone()
            }],
            ..unit.clone()
        };
        match d1.compile(&bad) {
            Err(Error::Driver { call, message, .. }) => {
                assert_eq!(call, "hipModuleGetFunction");
                assert_eq!(message, "fakeError");
            }
            other => panic!("expected a Driver error, got {other:?}"),
        }
        assert_eq!(fake_counter(&fake, 4), 1, "one launch");
        assert_eq!(
            (fake_counter(&fake, 8), fake_counter(&fake, 9)),
            (2, 4),
            "grid, block"
        );
        d0.synchronize().expect("synchronize");
        // exec across runtimes: CPU:1 → HIP:0 and back are COPY steps staged through the
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
        assert_eq!(copies(HIP0), copies(Device::cpu(0)));
    }
    // Everything dropped: every allocation freed and every module unloaded, each on its
    // own device; nothing passed to the wrong device; no zero-byte hipMalloc.
    assert_eq!(
        fake_counter(&fake, 0),
        fake_counter(&fake, 1),
        "allocs = frees"
    );
    assert_eq!(fake_counter(&fake, 2), 2, "modules loaded");
    assert_eq!(fake_counter(&fake, 3), 2, "modules unloaded");
    assert_eq!(fake_counter(&fake, 6), 0, "calls for the wrong device");
}

/// hiprtc (ROCm 5.2) compiles `sqrtf` to the bare `v_sqrt_f32`, which is not correctly
/// rounded; the HIP prelude routes it through the double root. Checked in the code object
/// where an LLVM disassembler is at hand (Debian's llvm-15 comes with hipcc).
#[test]
fn hip_float32_sqrt_is_the_rounded_double_root() {
    let prelude = renderer(Lang::Hip).render(&[]).expect("renders").source;
    assert!(
        prelude.contains("#define sqrtf(x) uk_sqrt_f32(x)"),
        "{prelude}"
    );
    if !hiprtc_here("hip_float32_sqrt_is_the_rounded_double_root") {
        return;
    }
    let unit = Unit {
        lang: Lang::Hip,
        source: prelude
            + "extern \"C\" __global__ void k_s(float *p0) { p0[threadIdx.x] = sqrtf(p0[threadIdx.x]); }\n",
        kernels: vec![],
    };
    let code = hip::hiprtc_compile(&unit).unwrap_or_else(|e| panic!("hiprtc: {e}"));
    let objdump = [
        "llvm-objdump",
        "llvm-objdump-15",
        "/usr/lib/llvm-15/bin/llvm-objdump",
    ]
    .into_iter()
    .find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok()
    });
    let Some(objdump) = objdump else {
        eprintln!(
            "hip_float32_sqrt_is_the_rounded_double_root: disassembly skipped: no llvm-objdump"
        );
        return;
    };
    let disassemble = |code: &[u8]| {
        let dir = tempfile::tempdir().expect("temp dir");
        let co = dir.path().join("k.co");
        std::fs::write(&co, code).expect("write the code object");
        let out = std::process::Command::new(objdump)
            .args(["-d", &format!("--mcpu={}", hip::hip_arch())])
            .arg(&co)
            .output()
            .expect("llvm-objdump runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = disassemble(&code);
    assert!(text.contains("v_rsq_f64"), "{text}");
    assert!(!text.contains("v_sqrt_f32"), "{text}");
    // What the prelude avoids: the plain sqrtf is the hardware instruction.
    let bare = Unit {
        source: "extern \"C\" __global__ void k_s(float *p0) { p0[threadIdx.x] = sqrtf(p0[threadIdx.x]); }\n".into(),
        ..unit
    };
    let text = disassemble(&hip::hiprtc_compile(&bare).unwrap_or_else(|e| panic!("hiprtc: {e}")));
    assert!(text.contains("v_sqrt_f32"), "{text}");
}
