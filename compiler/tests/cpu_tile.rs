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
use matmul_inputs::{conv, matmul, Rng};

/// `f` with tiles sized for 32-byte vectors (the shapes the tests below name), whatever this
/// machine's width; `sixty_four_byte_vectors_*` checks the AVX-512 width.
fn at32<R>(f: impl FnOnce() -> R) -> R {
    uopkit_compiler::optimize::tile::with_vector_bytes(32, f)
}

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
    Tile {
        rows: usize,
        cols: usize,
    },
    /// k-blocked: panels of kb×cols, a block's accumulators rows×cols, the row panel's
    /// panel_rows×cols.
    Blocked {
        rows: usize,
        cols: usize,
        kb: usize,
        panel_rows: usize,
    },
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
    check_data(dt, shape, order, expect, &a, &b);
}

/// [`check`] on given inputs.
fn check_data(
    dt: DType,
    shape: (usize, usize, usize),
    order: ReduceOrder,
    expect: Expect,
    a: &[u64],
    b: &[u64],
) {
    let (m, k, n) = shape;
    let (a, b) = (a.to_vec(), b.to_vec());
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
        Expect::Blocked {
            rows,
            cols,
            kb,
            panel_rows,
        } => {
            assert!(
                regs.contains(&(kb * cols))
                    && regs.contains(&(rows * cols))
                    && regs.contains(&(panel_rows * cols))
                    && !regs.contains(&(k * cols)),
                "{what}: no panel of {kb}x{cols}, accumulators {rows}x{cols} and \
                 {panel_rows}x{cols}: registers {regs:?}"
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
    at32(|| {
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
    });
}

#[test]
fn float64_and_int32_are_exact() {
    at32(|| {
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
    });
}

#[test]
fn shapes_the_blocks_do_not_divide_are_left_alone_and_exact() {
    at32(|| {
        // 5 rows (no block of 4, 3 or 2 divides), 12 columns (no vector of 8), 7 rows and 7
        // columns: not tiled, cpu_interchange's row instead; still exact.
        check(DType::Float32, (5, 6, 16), SEQ, Expect::NotFired, 20);
        check(DType::Float32, (4, 6, 12), SEQ, Expect::NotFired, 21);
        check(DType::Float32, (7, 3, 7), SEQ, Expect::NotFired, 22);
        // A panel of 4099·16 or 4099·8 float32 is over 128 KiB, and the prime 4099 has no
        // k block.
        check(DType::Float32, (2, 4099, 16), SEQ, Expect::NotFired, 23);
    });
}

/// Dyadic inputs (long sums that round) with a few specials: A's row 1 has a NaN with a
/// payload at k = 5, B's column 2 has +inf at k = K−1 and column 3 −inf at k = 0, and A's
/// row 0 is −0 up to k = 7.
fn dyadic_with_specials(
    dt: DType,
    (m, k, n): (usize, usize, usize),
    seed: u64,
) -> (Vec<u64>, Vec<u64>) {
    let mut rng = Rng(seed);
    let (mut a, mut b) = (rng.dyadic(dt, m * k), rng.dyadic(dt, k * n));
    let (nan, inf, ninf, nzero) = match dt {
        DType::Float32 => (0x7fa0_1234, 0x7f80_0000, 0xff80_0000, 0x8000_0000),
        _ => (
            0x7ff4_0000_0000_1234,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x8000_0000_0000_0000,
        ),
    };
    a[k + 5] = nan;
    b[(k - 1) * n + 2] = inf;
    b[3] = ninf;
    for x in a.iter_mut().take(8) {
        *x = nzero;
    }
    (a, b)
}

/// K·T panels over 128 KiB are cut in k blocks (a divisor of K): exact against the oracle,
/// the program without the rule and the plain loop.
#[test]
fn long_reductions_are_tiled_in_k_blocks_and_exact() {
    at32(|| {
        let cases = [
            // 4096·16 float32 = 256 KiB: blocks of 2048; 32 rows = 8 blocks of 4, row panels of
            // 2 blocks (MIN_ROW_PANELS = 4 row panels for threads).
            (DType::Float32, (32, 4096, 16), (4, 16, 2048, 8)),
            // 2049 = 3·683: three blocks of 683; 12 rows = 3 blocks of 4, too few for 4 row
            // panels: panels of one block; two column tiles.
            (DType::Float32, (12, 2049, 32), (4, 16, 683, 4)),
            // float64, T = 8: 2112·8·8 bytes; blocks of 1056; 6 rows = 2 blocks of 3.
            (DType::Float64, (6, 2112, 8), (3, 8, 1056, 3)),
        ];
        for (s, (dt, shape, (rows, cols, kb, panel_rows))) in cases.into_iter().enumerate() {
            let (a, b) = dyadic_with_specials(dt, shape, 300 + s as u64);
            let e = Expect::Blocked {
                rows,
                cols,
                kb,
                panel_rows,
            };
            check_data(dt, shape, SEQ, e, &a, &b);
        }
        // int32 (wrapping), 4 rows, blocks of 2048.
        let mut rng = Rng(310);
        let (a, b) = (
            rng.data(DType::Int32, 4 * 4096),
            rng.data(DType::Int32, 4096 * 16),
        );
        let e = Expect::Blocked {
            rows: 4,
            cols: 16,
            kb: 2048,
            panel_rows: 4,
        };
        check_data(DType::Int32, (4, 4096, 16), SEQ, e, &a, &b);
    });
}

/// A convolution: two reduced ranges (channel, tap) and a panel operand strided by the tap
/// count along the output column. It is tiled (a panel of K·T = ch·kw·16 and 4×16
/// accumulators; 8 output channels are small, so the column tiles are the outer loop and
/// run on threads) and gives the oracle's bits, the untiled program's and a plain loop's,
/// (c, k) row-major from +0, on inputs with NaN payloads, ±inf, −0 and subnormals.
#[test]
fn a_convolution_with_two_reduced_ranges_and_strided_windows_is_tiled_and_exact() {
    at32(|| {
        for (s, (ch, o, kw, l)) in [(3, 8, 4, 256), (5, 12, 2, 128)].into_iter().enumerate() {
            let dt = DType::Float32;
            let p = l / kw;
            let mut rng = Rng(500 + s as u64);
            let (x, w) = (rng.data(dt, ch * l), rng.data(dt, o * ch * kw));
            let ctx = Ctx::new();
            let root = conv(&ctx, (ch, o, kw, l), dt, &x, &w, SEQ);
            let what = format!("conv ch {ch}, o {o}, kw {kw}, l {l}");
            let on = schedule(&ctx, &root, &[]);
            let off = schedule(&ctx, &root, &["matmul_register_tile"]);
            let regs = registers(&on);
            let rows = if o % 4 == 0 { 4 } else { 3 };
            assert!(
                regs.contains(&(ch * kw * 16)) && regs.contains(&(rows * 16)),
                "{what}: no panel of {}x16 and accumulators {rows}x16: registers {regs:?}",
                ch * kw
            );
            assert!(
            on.programs()
                .iter()
                .flat_map(|p| p.insts.iter())
                .any(|i| i.op == Op::RANGE
                    && matches!(i.arg, KArg::Axis(a) if a == uopkit_compiler::optimize::threads::PARALLEL_AXIS)),
            "{what}: the column tiles are not a parallel loop"
        );
            let got = run_cpu(&ctx, &on);
            let without = run_cpu(&ctx, &off);
            let want = bits(&ctx.evaluate(&[&root]).expect("the oracle evaluates")[0]);
            let mut plain = vec![];
            for oo in 0..o {
                for pp in 0..p {
                    let mut acc = 0.0f32;
                    for c in 0..ch {
                        for k in 0..kw {
                            let a = f32::from_bits(x[c * l + pp * kw + k] as u32);
                            let b = f32::from_bits(w[(oo * ch + c) * kw + k] as u32);
                            acc += a * b;
                        }
                    }
                    plain.push(acc.to_bits() as u64);
                }
            }
            assert_eq!(got.len(), o * p, "{what}");
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
            assert_eq!(
                canon(dt, &got),
                canon(dt, &plain),
                "{what}: against the plain loop"
            );
        }
    });
}

/// With 64-byte vectors (AVX-512: `UOPKIT_CPU_VECTOR_BYTES=64`, or a machine with
/// AVX-512F) a float32 tile is T = 2·16 columns (or 16), a float64 one 2·8 (or 8): wider
/// panels and accumulators, the same bits as the oracle, the untiled program and the plain
/// loop. (These kernels run on any x86-64 machine: gcc splits a 16-lane loop for AVX2.)
#[test]
fn sixty_four_byte_vectors_tile_wider_and_stay_exact() {
    uopkit_compiler::optimize::tile::with_vector_bytes(64, || {
        let cases = [
            (
                DType::Float32,
                (12, 7, 64),
                Expect::Tile { rows: 4, cols: 32 },
            ),
            (
                DType::Float32,
                (6, 3, 16),
                Expect::Tile { rows: 3, cols: 16 },
            ),
            (
                DType::Float32,
                (8, 5, 48),
                Expect::Tile { rows: 4, cols: 16 },
            ),
            (
                DType::Float64,
                (4, 9, 16),
                Expect::Tile { rows: 4, cols: 16 },
            ),
            (
                DType::Int32,
                (8, 11, 32),
                Expect::Tile { rows: 4, cols: 32 },
            ),
            (DType::Float32, (4, 6, 8), Expect::NotFired),
        ];
        for (s, (dt, shape, e)) in cases.into_iter().enumerate() {
            check(dt, shape, SEQ, e, 600 + s as u64);
        }
        // k blocks: 4096·32 float32 = 512 KiB: blocks of 1024.
        let (a, b) = dyadic_with_specials(DType::Float32, (16, 4096, 32), 650);
        let e = Expect::Blocked {
            rows: 4,
            cols: 32,
            kb: 1024,
            panel_rows: 4,
        };
        check_data(DType::Float32, (16, 4096, 32), SEQ, e, &a, &b);
    });
}

#[test]
fn a_declared_float_order_other_than_sequential_is_not_tiled() {
    at32(|| {
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
    });
}

/// Special values placed where they decide the result: a NaN payload in b meets +inf·0,
/// −0 sums, and an infinity of each sign in one column.
#[test]
fn specials_in_the_panel_and_the_rows_give_the_oracles_bits() {
    at32(|| {
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
    });
}

/// The C declares the panel and the accumulators as local arrays, and the inner loop has
/// one statement per row and vector (four rows × two vectors of 8: eight accumulator
/// updates), which gcc turns into vector registers.
#[test]
fn the_c_has_a_panel_accumulators_and_one_update_per_row_and_vector() {
    at32(|| {
        let (m, k, n) = (8, 5, 32);
        let ctx = Ctx::new();
        let (a, b) = (vec![0u64; m * k], vec![0u64; k * n]);
        let root = matmul(&ctx, (m, k, n), DType::Float32, &a, &b, SEQ);
        let sch = schedule(&ctx, &root, &[]);
        let src = uopkit_compiler::render::CStyle::C.source(&sch.programs());
        let decl = |len: usize| {
            src.lines().any(|l| {
                l.trim().starts_with("float v") && l.trim().ends_with(&format!("[{len}];"))
            })
        };
        assert!(decl(k * 16), "no panel of {}:\n{src}", k * 16);
        assert!(decl(4 * 16), "no accumulators of 64:\n{src}");
        let adds = src
            .lines()
            .filter(|l| l.contains(" = (v") && l.contains(" + v"))
            .count();
        assert_eq!(adds, 8, "accumulator updates:\n{src}");
    });
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

/// The 4096² float32 matmul (a 2^36-element product, far over the oracle's cap) compiles
/// and runs on CPU:0 (6.9·10^10 float operations in the kernel); 256
/// of its 2^24 outputs (the four corners and a seeded spread) are bit for bit the plain
/// sequential loop's, computed independently here. Inputs are dyadic numbers in ±[0, 64)
/// with 10 fraction bits: products and sums round in float32 (the plain loop rounds them the same
/// way, -ffp-contract=off on the C side), and an order other
/// than k ascending from +0 shows.
#[test]
fn matmul_4096_compiles_runs_and_matches_the_plain_loop_where_sampled() {
    let s = 4096;
    let mut rng = Rng(4096);
    let (a, b) = (
        rng.dyadic(DType::Float32, s * s),
        rng.dyadic(DType::Float32, s * s),
    );
    let ctx = Ctx::with_limits(Limits::COMPILE);
    let root = matmul(&ctx, (s, s, s), DType::Float32, &a, &b, SEQ);
    let sch = schedule(&ctx, &root, &[]);
    let got = run_cpu(&ctx, &sch);
    assert_eq!(got.len(), s * s);
    let mut pick = Rng(7);
    let mut cells = vec![(0, 0), (0, s - 1), (s - 1, 0), (s - 1, s - 1)];
    while cells.len() < 256 {
        cells.push((pick.next() as usize % s, pick.next() as usize % s));
    }
    let mut rounded = 0;
    for &(i, j) in &cells {
        let mut acc = 0.0f32;
        let mut exact = 0.0f64;
        for kk in 0..s {
            let p = f32::from_bits(a[i * s + kk] as u32) * f32::from_bits(b[kk * s + j] as u32);
            acc += p;
            exact += p as f64;
        }
        if acc as f64 != exact {
            rounded += 1;
        }
        assert_eq!(
            got[i * s + j],
            acc.to_bits() as u64,
            "C[{i},{j}]: compiled {} ≠ plain loop {acc}",
            f32::from_bits(got[i * s + j] as u32)
        );
    }
    // The check can tell orders apart only where the sums round.
    assert!(rounded > 200, "only {rounded} of 256 sampled sums round");
}
