//! The CPU backend's `cpu_threads` and `cpu_split_lanes` passes, end to end (schedule →
//! C → the CPU runtime): a threaded kernel gives the bits one thread gives and an
//! independent reference gives; a declared `split(k)` gives the order's bits (computed
//! here in plain Rust f32 arithmetic, not by the oracle) with n mod k ≠ 0 and NaN, −0 and
//! infinities among the inputs; a declared `chunks_of_split(c, k)` runs its chunks on threads
//! and gives the order's bits.

use std::sync::Arc;

use uopkit_compiler::runtime::CCompiler;
use uopkit_conformance::bench::exact::bits_of;
use uopkit_conformance::bench::runner::Runner;
use uopkit_conformance::bench::workloads::{self, Rng, Workload};
use uopkit_interp::ir::{DType, Device, Op, ReduceOrder};
use uopkit_interp::tensor::{Ctx, Tensor};

fn compiler() -> Arc<CCompiler> {
    CCompiler::global()
}

fn out_bits(r: &Runner) -> Vec<u64> {
    bits_of(&r.output().expect("output")).expect("bits")
}

#[test]
fn threaded_elementwise_equals_one_thread_and_the_reference() {
    let n = 1 << 22;
    let ctx = Ctx::new();
    let mut rng = Rng::new(7);
    let (b, c) = (rng.f32s(n, -1.0, 1.0), rng.f32s(n, -1.0, 1.0));
    let bt = workloads::buffer(&ctx, &[n], DType::Float32, &b).unwrap();
    let ct = workloads::buffer(&ctx, &[n], DType::Float32, &c).unwrap();
    let root = bt.add(ct.mul(3.0).unwrap()).unwrap();
    let w = Workload {
        name: "elementwise",
        size: String::new(),
        ctx,
        root,
        unit: "GB/s",
        work: 0.0,
        ceiling: uopkit_conformance::bench::probe::ProbeKind::Triad,
        check: workloads::Check::Oracle,
        peer: serde_json::Value::Null,
    };
    let r = Runner::new(&w, compiler()).expect("compile");
    // The pass fired: the kernel has an entry over part of its loop.
    assert!(r.source.contains("void par_k_"), "{}", r.source);
    assert!(
        r.threads_used(4).unwrap() > 1,
        "4M elements should use >1 thread"
    );
    assert_eq!(r.threads_used(1).unwrap(), 1);
    r.run_on(Some(1)).unwrap();
    let one = out_bits(&r);
    r.run_on(Some(4)).unwrap();
    let four = out_bits(&r);
    assert_eq!(one.len(), n);
    assert!(one == four, "4 threads differ from 1 thread");
    // b + c*3, one IEEE rounding per op (no NaN can arise from these inputs).
    for i in (0..n).step_by(4099) {
        let want = (b[i] + c[i] * 3.0f32).to_bits() as u64;
        assert_eq!(four[i], want, "element {i}");
    }
}

/// A split(k) sum of f32 bits by its definition: lane f mod k from +0, then
/// lane₀ + lane₁ + … left to right; a NaN result is the canonical quiet NaN.
fn split_sum(xs: &[u32], k: usize) -> u64 {
    let mut lanes = vec![0.0f32; k];
    for (f, &x) in xs.iter().enumerate() {
        lanes[f % k] += f32::from_bits(x);
    }
    let mut out = lanes[0];
    for &l in &lanes[1..] {
        out += l;
    }
    if out.is_nan() {
        0x7fc0_0000
    } else {
        out.to_bits() as u64
    }
}

fn sum_runner(xs: &[u32], k: usize) -> Runner {
    order_sum_runner(xs, ReduceOrder::Split(k))
}

fn order_sum_runner(xs: &[u32], order: ReduceOrder) -> Runner {
    let ctx = Ctx::new();
    let bits: Vec<u64> = xs.iter().map(|&x| x as u64).collect();
    let x = Tensor::from_data(&ctx, &[xs.len()], DType::Float32, Device::cpu(0), &bits).unwrap();
    let root = workloads::reduce(&x, Op::ADD, 1, order).unwrap();
    let w = Workload {
        name: "sum",
        size: String::new(),
        ctx,
        root,
        unit: "GB/s",
        work: 0.0,
        ceiling: uopkit_conformance::bench::probe::ProbeKind::Read,
        check: workloads::Check::Oracle,
        peer: serde_json::Value::Null,
    };
    Runner::new(&w, compiler()).expect("compile")
}

#[test]
fn split_lanes_give_the_declared_orders_bits() {
    let mut rng = Rng::new(11);
    let base: Vec<u32> = rng
        .f32s(1000 + 13, -1e3, 1e3)
        .iter()
        .map(|f| f.to_bits())
        .collect();
    let neg_zero = 0x8000_0000u32;
    let (inf, ninf, nan, nnan) = (0x7f80_0000u32, 0xff80_0000u32, 0x7fc0_0001u32, 0xffc0_0000);
    let mut cases: Vec<(&str, Vec<u32>)> = vec![("random", base.clone())];
    cases.push(("all -0", vec![neg_zero; 1013]));
    let mut v = base.clone();
    v[3] = inf; // lane 3: +inf
    v[40] = ninf; // another lane: -inf; the combine gives inf + -inf = NaN
    cases.push(("inf and -inf in two lanes", v));
    let mut v = base.clone();
    v[5] = inf;
    cases.push(("+inf", v));
    let mut v = base.clone();
    v[1012] = nnan; // in the tail
    v[7] = nan;
    cases.push(("NaN payloads", v));
    let mut v = vec![neg_zero; 1013];
    v[1000] = 0x0000_0001; // a subnormal in the tail
    cases.push(("-0 and a subnormal", v));
    for k in [32usize, 7, 1024] {
        for (name, xs) in &cases {
            assert_ne!(xs.len() % k, 0);
            let r = sum_runner(xs, k);
            assert!(
                r.source.contains(&format!("[{k}];")),
                "split({k}) is not lowered as a {k}-lane array:\n{}",
                r.source
            );
            r.run().unwrap();
            let got = out_bits(&r);
            assert_eq!(got, vec![split_sum(xs, k)], "{name}, split({k})");
        }
    }
}

#[test]
fn chunks_of_split_runs_its_chunks_on_threads_with_the_orders_bits() {
    // 64 chunks of 4096, each a split(32) fold, the chunk sums folded from +0 (docs/ir.md),
    // computed here in plain f32 arithmetic. The scheduler makes the chunks an output axis
    // of their own kernel (schedule::chunked), which cpu_threads runs on threads.
    let (c, k, n) = (64usize, 32usize, 64 * 4096);
    let mut rng = Rng::new(23);
    let xs: Vec<u32> = rng.f32s(n, -1e3, 1e3).iter().map(|f| f.to_bits()).collect();
    let s = n / c;
    let mut want = 0.0f32;
    for chunk in xs.chunks(s) {
        let mut lanes = vec![0.0f32; k];
        for (q, &x) in chunk.iter().enumerate() {
            lanes[q % k] += f32::from_bits(x);
        }
        want += lanes[1..].iter().fold(lanes[0], |a, &b| a + b);
    }
    let r = order_sum_runner(&xs, ReduceOrder::ChunksOfSplit(c, k));
    assert!(
        r.source.contains("void par_k_"),
        "the chunks are not a parallel loop:\n{}",
        r.source
    );
    assert!(
        r.source.contains(&format!("[{k}];")),
        "no {k}-lane array:\n{}",
        r.source
    );
    assert!(
        r.threads_used(4).unwrap() > 1,
        "64 chunks of 4096 should use >1 thread"
    );
    r.run_on(Some(1)).unwrap();
    let one = out_bits(&r);
    r.run_on(Some(4)).unwrap();
    assert_eq!(out_bits(&r), one, "4 threads differ from 1 thread");
    assert_eq!(one, vec![want.to_bits() as u64]);
    // The order is observable on this data: a plain split(32) over all elements differs.
    assert_ne!(split_sum(&xs, k), want.to_bits() as u64);
}

/// Float32 values with specials mixed in, a few every `period` elements (NaN with payloads,
/// ±inf, −0, subnormals, huge values), the rest in ±[0.5, 2).
fn special_f32s(rng: &mut Rng, n: usize, period: usize) -> Vec<f32> {
    let base = rng.f32s(n, 0.5, 2.0);
    let signs = rng.f32s(n, -1.0, 1.0);
    base.iter()
        .zip(&signs)
        .enumerate()
        .map(|(i, (&b, &s))| match i % period {
            3 => f32::from_bits(0x7fc0_1234),  // a NaN with a payload
            11 => f32::from_bits(0xffa0_0001), // a negative signalling-pattern NaN
            5 => f32::INFINITY,
            17 => f32::NEG_INFINITY,
            7 | 23 => -0.0,
            13 => 1e-40,
            29 => 3e38,
            _ => b.copysign(s),
        })
        .collect()
}

fn workload(ctx: Ctx, root: Tensor, name: &'static str) -> Workload {
    Workload {
        name,
        size: String::new(),
        ctx,
        root,
        unit: "GFLOP/s",
        work: 0.0,
        ceiling: uopkit_conformance::bench::probe::ProbeKind::MulAdd,
        check: workloads::Check::Oracle,
        peer: serde_json::Value::Null,
    }
}

/// A float32 result's bits as the kernels store them: a NaN is the canonical quiet NaN.
fn canon(f: f32) -> u64 {
    if f.is_nan() {
        0x7fc0_0000
    } else {
        f.to_bits() as u64
    }
}

/// The interchanged matmul (a row of register accumulators per output row) runs on several
/// threads since `cpu_threads` proves its registers private to one row: 1 thread and 4
/// give the same bits, and those of a plain k-ascending loop, with specials in A and B.
#[test]
fn threaded_interchanged_matmul_equals_one_thread_and_the_reference() {
    // The second shape's row (2048 > MAX_ROW) is tiled: its accumulators are reset once per
    // tile, inside a loop over the tiles, and still private to one output row. Both have a
    // prime number of rows, so `cpu_tile` (blocks of 2, 3 or 4 rows) leaves them to
    // `cpu_interchange`.
    for (m, k, n) in [(67, 45, 96), (7, 5, 2048)] {
        let row = n.min(1024);
        threaded_matmul(m, k, n, &format!("[{row}];"), "a row of accumulators");
    }
}

/// The register-tiled matmul (`cpu_tile`: a packed K×T panel of B and blocks of rows × T
/// accumulators, T = 16 float32 with 32-byte vectors, 32 with AVX-512's, over panels of
/// rows) runs on several threads too: its panel and
/// accumulators are refilled and reset inside each panel of rows.
#[test]
fn threaded_register_tiled_matmul_equals_one_thread_and_the_reference() {
    // The panel holds T = 2V columns: 16 float32 with 32-byte vectors, 32 with AVX-512's.
    let (m, k, n) = (128, 9, 64);
    let t = 2 * uopkit_compiler::optimize::tile::vector_bytes() as usize / 4;
    threaded_matmul(m, k, n, &format!("[{}];", k * t), "a packed panel");
}

fn threaded_matmul(m: usize, k: usize, n: usize, register: &str, what: &str) {
    let mut rng = Rng::new(29 + n as u64);
    let a = special_f32s(&mut rng, m * k, 401);
    let b = special_f32s(&mut rng, k * n, 397);
    let ctx = Ctx::new();
    let root = workloads::matmul_graph(&ctx, m, k, n, &a, &b).unwrap();
    let r = Runner::new(&workload(ctx, root, "matmul"), compiler()).expect("compile");
    assert!(
        r.source.contains(register),
        "no register {register} ({what}):\n{}",
        r.source
    );
    assert!(r.source.contains("void par_k_"), "{}", r.source);
    assert!(r.threads_used(4).unwrap() > 1, "{}", r.source);
    r.run_on(Some(1)).unwrap();
    let one = out_bits(&r);
    r.run_on(Some(4)).unwrap();
    let four = out_bits(&r);
    assert!(one == four, "4 threads differ from 1 thread");
    let want: Vec<u64> = reference_matmul(m, k, n, &a, &b)
        .into_iter()
        .map(canon)
        .collect();
    assert_eq!(four.len(), want.len());
    for (i, (g, w)) in four.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "element {i}");
    }
    assert!(
        want.contains(&0x7fc0_0000) && want.iter().any(|&w| w != 0x7fc0_0000),
        "the inputs should give NaN and non-NaN results"
    );
}

fn reference_matmul(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    uopkit_conformance::bench::reference::matmul(m, k, n, a, b)
}

/// Row sums in a declared split(k) order (a lane array per row, `cpu_split_lanes`) run on
/// several threads: the same bits as one thread and as the order's definition, per row.
#[test]
fn threaded_split_lanes_rows_equal_one_thread_and_the_order() {
    let (rows, cols, k) = (300, 1001, 8);
    let mut rng = Rng::new(31);
    let xs: Vec<u32> = special_f32s(&mut rng, rows * cols, 2003)
        .iter()
        .map(|f| f.to_bits())
        .collect();
    let ctx = Ctx::new();
    let bits: Vec<u64> = xs.iter().map(|&x| x as u64).collect();
    let x = Tensor::from_data(&ctx, &[rows, cols], DType::Float32, Device::cpu(0), &bits).unwrap();
    let xt = x.permute(&[1, 0]).unwrap();
    let root = workloads::reduce(&xt, Op::ADD, 1, ReduceOrder::Split(k)).unwrap();
    let r = Runner::new(&workload(ctx, root, "sum"), compiler()).expect("compile");
    assert!(
        r.source.contains(&format!("[{k}];")),
        "split({k}) is not lowered as lanes:\n{}",
        r.source
    );
    assert!(r.threads_used(4).unwrap() > 1, "{}", r.source);
    r.run_on(Some(1)).unwrap();
    let one = out_bits(&r);
    r.run_on(Some(4)).unwrap();
    let four = out_bits(&r);
    assert!(one == four, "4 threads differ from 1 thread");
    let want: Vec<u64> = xs.chunks(cols).map(|row| split_sum(row, k)).collect();
    assert_eq!(four, want);
    assert!(
        want.contains(&0x7fc0_0000) && want.iter().any(|&w| w != 0x7fc0_0000),
        "the inputs should give NaN and non-NaN rows"
    );
}
