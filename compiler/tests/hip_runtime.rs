//! The HIP runtime (`runtime::hip`): hiprtc compiles of rendered units, a rejected unit,
//! `HIP:n` without a device, and device round trips compared with the CPU backend.
//!
//! hiprtc needs no GPU, so its tests run wherever the library is (Debian's `libamdhip64-5`
//! exports it); without it they print `skipped: <reason>` and pass, unless
//! `UOPKIT_REQUIRE_HIPRTC=1` (CI) makes its absence a failure. Device tests run only where
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

const HIP0: Device = Device {
    backend: Backend::Hip,
    index: 0,
};

/// Whether hiprtc tests should run: true if it is there; false (after printing why) if it is
/// absent and not required; a failure if it is absent and `UOPKIT_REQUIRE_HIPRTC=1`.
fn hiprtc_here(test: &str) -> bool {
    match hip::hiprtc_available() {
        Ok(()) => true,
        Err(reason) => {
            assert!(
                std::env::var("UOPKIT_REQUIRE_HIPRTC").as_deref() != Ok("1"),
                "UOPKIT_REQUIRE_HIPRTC=1 but hiprtc is unavailable: {reason}"
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
