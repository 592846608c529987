//! `cpu_tile` (compiler/src/optimize/tile.rs): a matmul tiled into blocks of rows × a
//! j-tile of register accumulators, with a packed panel of the operand that does not depend
//! on the row. The rule fires where the blocks divide (a panel register of K·T elements and
//! an accumulator register of B·T appear; without the rule they do not), and the compiled C
//! on `CPU:0` is bit for bit the oracle's, the same program's without the rule, and an
//! independent plain loop's (NaNs canonicalized), on inputs full of NaN payloads, ±inf,
//! −0, subnormals and overflowing products, for float32, float64 and int32 (which wraps);
//! shapes where the blocks do not divide, or the panel would be too large, are left to
//! `cpu_interchange` and stay exact.

use uopkit_compiler::exec;
use uopkit_compiler::pipeline;
use uopkit_compiler::schedule::{Schedule, ScheduleOpts};
use uopkit_interp::eval::{Elem, Value};
use uopkit_interp::ir::{DType, Op, ReduceOrder};
use uopkit_interp::kernel::KArg;
use uopkit_interp::tensor::{Ctx, Tensor};
use uopkit_interp::verify::{self, Limits};

mod matmul_inputs;
use matmul_inputs::{matmul, Rng};

fn schedule(ctx: &Ctx, root: &Tensor, disabled: &[&str]) -> Schedule {
    let g = ctx.graph();
    let ver = verify::verify_with(&g, &Limits::COMPILE).expect("verifies for compilation");
    let opts = ScheduleOpts {
        disabled_rules: disabled.iter().map(|s| s.to_string()).collect(),
        ..ScheduleOpts::default()
    };
    pipeline::schedule_opts(&g, &ver, &[root.id()], &opts).expect("schedules")
}

/// The sizes of the register buffers the kernels of `s` declare.
fn registers(s: &Schedule) -> Vec<usize> {
    let mut v: Vec<usize> = s
        .programs()
        .iter()
        .flat_map(|p| p.insts.iter())
        .filter(|i| i.op == Op::BUFFER)
        .filter_map(|i| match i.arg {
            KArg::Reg(n) => Some(n),
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v
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

/// What the tile should look like where the rule fires: (B rows, T columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Tile { rows: usize, cols: usize },
    NotFired,
}

/// Compiles with and without the rule, checks the registers say whether it fired, runs
/// both, and compares them with each other and with the oracle bit for bit, and with the
/// plain loop (NaNs canonicalized) where the declared order is sequential or the dtype an
/// integer.
fn check(dt: DType, shape: (usize, usize, usize), order: ReduceOrder, expect: Expect, seed: u64) {
    let (m, k, n) = shape;
    let mut rng = Rng(seed);
    let a = rng.data(dt, m * k);
    let b = rng.data(dt, k * n);
    let ctx = Ctx::new();
    let root = matmul(&ctx, shape, dt, &a, &b, order.clone());
    let what = format!("{dt:?} {m}x{k}x{n} {order:?}");
    let on = schedule(&ctx, &root, &[]);
    let off = schedule(&ctx, &root, &["matmul_register_tile"]);
    let regs = registers(&on);
    match expect {
        Expect::Tile { rows, cols } => {
            assert!(
                regs.contains(&(k * cols)) && regs.contains(&(rows * cols)),
                "{what}: no panel of {k}x{cols} and accumulators {rows}x{cols}: registers {regs:?}"
            );
            assert_ne!(
                format!("{:?}", on.programs()),
                format!("{:?}", off.programs()),
                "{what}: disabling the rule changed nothing"
            );
        }
        Expect::NotFired => assert_eq!(
            format!("{:?}", on.programs()),
            format!("{:?}", off.programs()),
            "{what}: cpu_tile fired where it must not (registers {regs:?})"
        ),
    }
    let got = run_cpu(&ctx, &on);
    let without = run_cpu(&ctx, &off);
    let want = bits(&ctx.evaluate(&[&root]).expect("the oracle evaluates")[0]);
    assert_eq!(got.len(), m * n, "{what}");
    for (name, other) in [
        ("the oracle", &want),
        ("the program without the rule", &without),
    ] {
        if let Some(i) = (0..got.len()).find(|&i| got[i] != other[i]) {
            panic!(
                "{what}: element {i}: compiled {:#x}, {name} {:#x}",
                got[i], other[i]
            );
        }
    }
    if order == ReduceOrder::Sequential || dt == DType::Int32 {
        assert_eq!(
            canon(dt, &got),
            canon(dt, &reference(dt, shape, &a, &b)),
            "{what}: against the plain loop"
        );
    }
}

const SEQ: ReduceOrder = ReduceOrder::Sequential;

#[test]
fn float32_tiles_of_every_row_block_are_exact() {
    let cases = [
        // B = 4 rows, T = 16 (two vectors), 2 blocks per panel.
        ((8, 5, 32), Expect::Tile { rows: 4, cols: 16 }),
        // B = 4, 3 blocks per panel, 3 column tiles.
        ((12, 7, 48), Expect::Tile { rows: 4, cols: 16 }),
        // 6 rows: B = 3; 8 columns: T = 8 (one vector).
        ((6, 3, 8), Expect::Tile { rows: 3, cols: 8 }),
        // 2 rows, K = 1, 24 columns: T = 8.
        ((2, 1, 24), Expect::Tile { rows: 2, cols: 8 }),
        // 128 rows: 32 blocks, 16 of them per panel, two row panels.
        ((128, 3, 16), Expect::Tile { rows: 4, cols: 16 }),
        // 68 = 4·17 rows: 17 blocks, one panel of all of them.
        ((68, 2, 16), Expect::Tile { rows: 4, cols: 16 }),
    ];
    for (s, (shape, e)) in cases.into_iter().enumerate() {
        check(DType::Float32, shape, SEQ, e, 100 + s as u64);
    }
}

#[test]
fn float64_and_int32_are_exact() {
    // float64: V = 4, T = 8.
    check(
        DType::Float64,
        (4, 9, 8),
        SEQ,
        Expect::Tile { rows: 4, cols: 8 },
        1,
    );
    check(
        DType::Float64,
        (9, 4, 4),
        SEQ,
        Expect::Tile { rows: 3, cols: 4 },
        2,
    );
    check(
        DType::Int32,
        (8, 11, 24),
        SEQ,
        Expect::Tile { rows: 4, cols: 8 },
        3,
    );
    // An integer ADD fold gives the same bits in every order: a declared split(4) is tiled.
    check(
        DType::Int32,
        (4, 12, 16),
        ReduceOrder::Split(4),
        Expect::Tile { rows: 4, cols: 16 },
        4,
    );
}

#[test]
fn shapes_the_blocks_do_not_divide_are_left_alone_and_exact() {
    // 5 rows (no block of 4, 3 or 2 divides), 12 columns (no vector of 8), 7 rows and 7
    // columns: not tiled, cpu_interchange's row instead; still exact.
    check(DType::Float32, (5, 6, 16), SEQ, Expect::NotFired, 20);
    check(DType::Float32, (4, 6, 12), SEQ, Expect::NotFired, 21);
    check(DType::Float32, (7, 3, 7), SEQ, Expect::NotFired, 22);
    // A panel of 2049·16 float32 is over 128 KiB.
    check(DType::Float32, (2, 2049, 16), SEQ, Expect::NotFired, 23);
}

#[test]
fn a_declared_float_order_other_than_sequential_is_not_tiled() {
    check(
        DType::Float32,
        (4, 16, 16),
        ReduceOrder::Split(4),
        Expect::NotFired,
        30,
    );
    check(
        DType::Float32,
        (4, 16, 16),
        ReduceOrder::Tree(4),
        Expect::NotFired,
        31,
    );
}

/// Special values placed where they decide the result: a NaN payload in b meets +inf·0,
/// −0 sums, and an infinity of each sign in one column.
#[test]
fn specials_in_the_panel_and_the_rows_give_the_oracles_bits() {
    let (m, k, n) = (4usize, 3usize, 16usize);
    let f = |v: f32| v.to_bits() as u64;
    let mut a = vec![f(1.0); m * k];
    let mut b = vec![f(-0.0); k * n];
    a[0] = f(f32::INFINITY); // row 0, k 0
    b[1] = f(0.0); // k 0, column 1: inf·0 = NaN
    b[2] = 0x7fa0_1234; // a signalling NaN with a payload
    b[n + 3] = f(f32::INFINITY); // k 1, column 3
    b[2 * n + 3] = f(f32::NEG_INFINITY); // k 2, column 3: inf + −inf = NaN
    a[k + 1] = f(-0.0); // row 1, k 1
    let ctx = Ctx::new();
    let root = matmul(&ctx, (m, k, n), DType::Float32, &a, &b, SEQ);
    let s = schedule(&ctx, &root, &[]);
    assert!(registers(&s).contains(&(k * 16)), "{:?}", registers(&s));
    let got = run_cpu(&ctx, &s);
    let want = bits(&ctx.evaluate(&[&root]).expect("evaluates")[0]);
    assert_eq!(got, want);
    // By hand: row 2, column 0 is (1·−0 + 1·−0) + 1·−0 from +0: +0 + −0 = +0.
    assert_eq!(got[2 * n], f(0.0));
    // Row 0, column 1: inf·0 is NaN: the canonical quiet NaN.
    assert_eq!(got[1], 0x7fc0_0000);
    // Row 1, column 3: 1·−0 + (−0)·inf (NaN) …: NaN; row 2, column 3: inf + −inf: NaN.
    assert_eq!(got[n + 3], 0x7fc0_0000);
    assert_eq!(got[2 * n + 3], 0x7fc0_0000);
}

/// The C declares the panel and the accumulators as local arrays, and the inner loop has
/// one statement per row and vector (four rows × two vectors of 8: eight accumulator
/// updates), which gcc turns into vector registers.
#[test]
fn the_c_has_a_panel_accumulators_and_one_update_per_row_and_vector() {
    let (m, k, n) = (8, 5, 32);
    let ctx = Ctx::new();
    let (a, b) = (vec![0u64; m * k], vec![0u64; k * n]);
    let root = matmul(&ctx, (m, k, n), DType::Float32, &a, &b, SEQ);
    let sch = schedule(&ctx, &root, &[]);
    let src = uopkit_compiler::render::CStyle::C.source(&sch.programs());
    let decl = |len: usize| {
        src.lines()
            .any(|l| l.trim().starts_with("float v") && l.trim().ends_with(&format!("[{len}];")))
    };
    assert!(decl(k * 16), "no panel of {}:\n{src}", k * 16);
    assert!(decl(4 * 16), "no accumulators of 64:\n{src}");
    let adds = src
        .lines()
        .filter(|l| l.contains(" = (v") && l.contains(" + v"))
        .count();
    assert_eq!(adds, 8, "accumulator updates:\n{src}");
}

/// Prints the C of the 1024² float32 matmul (to read it, and to compile and disassemble).
#[test]
#[ignore = "prints C: run with --ignored --nocapture"]
fn print_the_c_of_the_1024_matmul() {
    let s = 1024;
    let zeros = vec![0u64; s * s];
    let ctx = Ctx::with_limits(Limits::COMPILE);
    let root = matmul(&ctx, (s, s, s), DType::Float32, &zeros, &zeros, SEQ);
    let sch = schedule(&ctx, &root, &[]);
    println!(
        "{}",
        uopkit_compiler::render::CStyle::C.source(&sch.programs())
    );
}
