//! `cpu_interchange` (compiler/src/optimize/interchange.rs): a matmul's output axis j moved
//! inside its reduce loop with a row of accumulators. The pass fires (a register row of
//! more than one element in the linearized kernel, none with the rule disabled), and the
//! compiled C output on `CPU:0` is bit for bit the oracle's, and an independent plain loop's,
//! on shapes that are not multiples of anything, a row long enough to be tiled, inputs full
//! of NaN / ±inf / −0 / subnormals / overflowing products, float32, float64 and int32 (which
//! wraps); `cpu_tile`'s rule, which runs first, is disabled throughout. The graph
//! verifier's `Limits::COMPILE` lets a 1024² matmul compile although the oracle refuses it.

use uopkit_compiler::exec;
use uopkit_compiler::pipeline;
use uopkit_compiler::schedule::{Schedule, ScheduleOpts};
use uopkit_interp::eval::{Elem, Value};
use uopkit_interp::ir::{DType, Device, Op, ReduceOrder};
use uopkit_interp::kernel::KArg;
use uopkit_interp::tensor::{Ctx, Tensor};
use uopkit_interp::verify::{self, Limits};

mod matmul_inputs;
use matmul_inputs::{matmul, Rng};

/// The schedule with the rules `disabled`, and always without `cpu_tile`'s rule, which runs
/// first and would take the shapes whose blocks divide (tests/cpu_tile.rs covers it): these
/// tests are about `cpu_interchange` alone.
fn schedule(ctx: &Ctx, root: &Tensor, disabled: &[&str]) -> Schedule {
    let g = ctx.graph();
    let ver = verify::verify_with(&g, &Limits::COMPILE).expect("verifies for compilation");
    let opts = ScheduleOpts {
        disabled_rules: disabled
            .iter()
            .chain(&["matmul_register_tile"])
            .map(|s| s.to_string())
            .collect(),
        ..ScheduleOpts::default()
    };
    pipeline::schedule_opts(&g, &ver, &[root.id()], &opts).expect("schedules")
}

/// The largest register buffer any kernel of `s` declares.
fn widest_register(s: &Schedule) -> usize {
    s.programs()
        .iter()
        .flat_map(|p| p.insts.iter())
        .filter(|i| i.op == Op::BUFFER)
        .filter_map(|i| match i.arg {
            KArg::Reg(n) => Some(n),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

fn bits(v: &Value) -> Vec<u64> {
    v.data.components()[0]
        .iter()
        .map(|e| match e {
            Elem::Bits(b) => *b,
            Elem::Uninit { .. } => panic!("an element was never written"),
        })
        .collect()
}

fn run_cpu(ctx: &Ctx, s: &Schedule) -> Vec<u64> {
    let out = exec::run(s, &ctx.inputs()).expect("runs on CPU:0");
    bits(out[0].as_ref().expect("an output value"))
}

/// An independent reference: the plain loop, k ascending from +0 (Rust never contracts
/// `acc + a * b`), int32 wrapping. NaNs are compared as "some NaN" only where the oracle's
/// canonical NaN and Rust's may differ: both sides are canonicalized to the dtype's
/// canonical quiet NaN.
fn reference(dt: DType, (m, k, n): (usize, usize, usize), a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = vec![];
    for i in 0..m {
        for j in 0..n {
            let (x, y) = (|kk: usize| a[i * k + kk], |kk: usize| b[kk * n + j]);
            out.push(match dt {
                DType::Float32 => {
                    let mut acc = 0.0f32;
                    for kk in 0..k {
                        acc += f32::from_bits(x(kk) as u32) * f32::from_bits(y(kk) as u32);
                    }
                    acc.to_bits() as u64
                }
                DType::Float64 => {
                    let mut acc = 0.0f64;
                    for kk in 0..k {
                        acc += f64::from_bits(x(kk)) * f64::from_bits(y(kk));
                    }
                    acc.to_bits()
                }
                _ => {
                    let mut acc = 0i32;
                    for kk in 0..k {
                        acc = acc.wrapping_add((x(kk) as i32).wrapping_mul(y(kk) as i32));
                    }
                    acc as u32 as u64
                }
            });
        }
    }
    out
}

/// NaN bits of either width as the canonical quiet NaN (what tinygrad's semantics and
/// the oracle produce for a NaN result; see docs/semantics.md), others unchanged.
fn canon(dt: DType, v: &[u64]) -> Vec<u64> {
    v.iter()
        .map(|&b| match dt {
            DType::Float32 if f32::from_bits(b as u32).is_nan() => 0x7fc0_0000,
            DType::Float64 if f64::from_bits(b).is_nan() => 0x7ff8_0000_0000_0000,
            _ => b,
        })
        .collect()
}

/// Compiles, checks that the pass fired (or did not), runs, and compares with the oracle
/// bit for bit and with the plain loop (NaNs canonicalized on both sides of that one).
fn check(dt: DType, shape: (usize, usize, usize), order: ReduceOrder, fires: bool, seed: u64) {
    let (m, k, n) = shape;
    let mut rng = Rng(seed);
    let a = rng.data(dt, m * k);
    let b = rng.data(dt, k * n);
    let ctx = Ctx::new();
    let root = matmul(&ctx, shape, dt, &a, &b, order.clone());
    let s = schedule(&ctx, &root, &[]);
    let wide = widest_register(&s);
    let what = format!("{dt:?} {m}x{k}x{n} {order:?}");
    let off = schedule(&ctx, &root, &["reduce_row_inside"]);
    let same = format!("{:?}", s.programs()) == format!("{:?}", off.programs());
    if fires {
        assert!(!same, "{what}: cpu_interchange did not fire");
        assert!(
            wide > 1,
            "{what}: no row of accumulators (widest register {wide})"
        );
    } else {
        assert!(same, "{what}: cpu_interchange fired where it must not");
    }
    let got = run_cpu(&ctx, &s);
    let want = bits(&ctx.evaluate(&[&root]).expect("the oracle evaluates")[0]);
    assert_eq!(got.len(), m * n, "{what}");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: element {i}: compiled {:#x}, oracle {:#x}",
            got[i], want[i]
        );
    }
    if order == ReduceOrder::Sequential || dt == DType::Int32 {
        assert_eq!(
            canon(dt, &got),
            canon(dt, &reference(dt, shape, &a, &b)),
            "{what}: against the plain loop"
        );
    }
}

#[test]
fn matmul_f32_odd_shapes_with_specials_are_exact() {
    for (i, &shape) in [(3, 5, 7), (5, 17, 33), (1, 9, 2), (7, 1, 19)]
        .iter()
        .enumerate()
    {
        check(
            DType::Float32,
            shape,
            ReduceOrder::Sequential,
            true,
            11 + i as u64,
        );
    }
}

#[test]
fn matmul_f64_and_int32_are_exact() {
    check(DType::Float64, (4, 13, 9), ReduceOrder::Sequential, true, 5);
    check(DType::Int32, (6, 11, 10), ReduceOrder::Sequential, true, 6);
    // An integer ADD fold gives the same bits in every order: a declared split(4) may be
    // interchanged too.
    check(DType::Int32, (3, 12, 5), ReduceOrder::Split(4), true, 7);
}

#[test]
fn a_long_row_is_tiled_and_exact() {
    // 1040 = 65·16: rows of 16 accumulators, an outer loop of 65 tiles.
    check(
        DType::Float32,
        (2, 3, 1040),
        ReduceOrder::Sequential,
        true,
        8,
    );
    // No power of two from 16 up divides 1100: left alone, still exact.
    check(
        DType::Float32,
        (2, 3, 1100),
        ReduceOrder::Sequential,
        false,
        9,
    );
}

#[test]
fn a_declared_float_split_order_is_not_interchanged() {
    check(DType::Float32, (3, 16, 5), ReduceOrder::Split(4), false, 10);
    check(DType::Float32, (3, 16, 5), ReduceOrder::Tree(4), false, 12);
}

/// The 1024² matmul's k×m×n product (2^30 elements) is over the oracle's cap: the oracle
/// refuses it with its size message, the compiler (verified with `Limits::COMPILE`)
/// schedules it with the pass, and a schedule that would allocate the product is refused.
#[test]
fn matmul_1024_compiles_though_the_oracle_refuses_it() {
    let s = 1024;
    let zeros = vec![0u64; s * s];
    let plain = Ctx::new();
    let a = Tensor::from_data(&plain, &[s, s], DType::Float32, Device::cpu(0), &zeros).unwrap();
    let bv = a.reshape(&[s, 1, s]).and_then(|t| t.expand(&[s, s, s]));
    let e = bv.expect_err("the oracle's limits refuse a 2^30-element value");
    assert!(
        e.to_string().contains("more than 268435456 elements"),
        "unexpected message: {e}"
    );

    let ctx = Ctx::with_limits(Limits::COMPILE);
    let root = matmul(
        &ctx,
        (s, s, s),
        DType::Float32,
        &zeros,
        &zeros,
        ReduceOrder::Sequential,
    );
    let e = ctx
        .evaluate(&[&root])
        .expect_err("the oracle refuses to evaluate it");
    assert!(
        e.to_string().contains("elements"),
        "unexpected message: {e}"
    );
    let sch = schedule(&ctx, &root, &[]);
    assert_eq!(widest_register(&sch), 1024);

    // The product itself as an output would be a 2^30-element buffer.
    let g = ctx.graph();
    let ver = verify::verify_with(&g, &Limits::COMPILE).unwrap();
    let prod = g.node(root.id()).src[0];
    let e = pipeline::schedule_opts(&g, &ver, &[prod], &ScheduleOpts::default())
        .expect_err("a 2^30-element buffer is refused");
    assert!(
        e.reason.contains("over the limit of 268435456"),
        "{}",
        e.reason
    );
}

/// A buffer of exactly the oracle's per-value limit (2^28 elements: the k×m×n product of a
/// 1024×256 by 256×1024 matmul as an output) is scheduled; only a larger one is refused.
#[test]
fn a_buffer_of_exactly_the_limit_is_scheduled() {
    let (m, k, n) = (1024, 256, 1024);
    let ctx = Ctx::with_limits(Limits::COMPILE);
    let root = matmul(
        &ctx,
        (m, k, n),
        DType::Float32,
        &vec![0u64; m * k],
        &vec![0u64; k * n],
        ReduceOrder::Sequential,
    );
    let g = ctx.graph();
    let ver = verify::verify_with(&g, &Limits::COMPILE).unwrap();
    let prod = g.node(root.id()).src[0];
    assert_eq!(k * m * n, verify::MAX_ELEMENTS);
    let s = pipeline::schedule_opts(&g, &ver, &[prod], &ScheduleOpts::default())
        .expect("a buffer of exactly the limit is allowed");
    assert!(s.buffers.iter().any(|b| b.size == verify::MAX_ELEMENTS));
}

/// Runs the 1024² matmul on CPU:0 and compares it with the plain loop (1 G multiply-adds
/// on each side: minutes in a debug build on CI's two cores).
#[test]
#[ignore = "slow: 2·10^9 float operations in the compiled kernel and again in the debug-built reference"]
fn matmul_1024_runs_and_matches_the_plain_loop() {
    let s = 1024;
    let mut rng = Rng(99);
    let a = rng.data(DType::Float32, s * s);
    let b = rng.data(DType::Float32, s * s);
    let ctx = Ctx::with_limits(Limits::COMPILE);
    let root = matmul(
        &ctx,
        (s, s, s),
        DType::Float32,
        &a,
        &b,
        ReduceOrder::Sequential,
    );
    let sch = schedule(&ctx, &root, &[]);
    let got = run_cpu(&ctx, &sch);
    assert_eq!(
        canon(DType::Float32, &got),
        canon(
            DType::Float32,
            &reference(DType::Float32, (s, s, s), &a, &b)
        )
    );
}

/// Prints the 512³ float32 matmul's time on CPU:0 with and without the pass (`exec::run`
/// end to end, the second of two runs so the C compile is cached; a rough figure — the
/// bench measures the kernel alone).
#[test]
#[ignore = "a timing, not a check: run with --ignored --nocapture"]
fn matmul_512_speed_with_and_without_the_pass() {
    let s = 512;
    let mut rng = Rng(3);
    let a = rng.data(DType::Float32, s * s);
    let b = rng.data(DType::Float32, s * s);
    let ctx = Ctx::with_limits(Limits::COMPILE);
    let root = matmul(
        &ctx,
        (s, s, s),
        DType::Float32,
        &a,
        &b,
        ReduceOrder::Sequential,
    );
    let mut outs = vec![];
    for disabled in [&["reduce_row_inside"][..], &[]] {
        let sch = schedule(&ctx, &root, disabled);
        run_cpu(&ctx, &sch);
        let t = std::time::Instant::now();
        outs.push(run_cpu(&ctx, &sch));
        let secs = t.elapsed().as_secs_f64();
        let gflops = 2.0 * (s * s * s) as f64 / secs / 1e9;
        println!("512³ matmul, disabled {disabled:?}: {secs:.3} s, {gflops:.2} GFLOP/s");
    }
    assert_eq!(outs[0], outs[1], "the pass changed bits");
}
