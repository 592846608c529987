//! The C renderer + CPU runtime against the oracle's scalar semantics, bit for bit.
//!
//! Every test builds kernel programs by hand, renders them as one C unit, compiles it once
//! (many kernels per unit, many elements per kernel), runs it on CPU buffers and compares
//! each output element with `uopkit_interp::scalar::{alu, cast, bitcast}` on the same
//! inputs. Inputs on which the oracle reports UB are left out (they never reach a backend).

use std::sync::Arc;
use std::time::Instant;

use uopkit_compiler::render::{c_unit, render_c};
use uopkit_compiler::runtime::{self, CCompiler, Compiled, CpuDevice, Device, Error, Unit};
use uopkit_interp::ir::{table, DType, Op};
use uopkit_interp::kernel::{InstId, KArg, ParamDecl, Program};
use uopkit_interp::scalar::alu::alu;
use uopkit_interp::scalar::cast::{bitcast, cast, mask};
use uopkit_interp::scalar::round::is_nan;

use DType::*;

// ---------------------------------------------------------------------------------------
// Helpers: random numbers, elementwise cases, running a unit.

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A finite f64 of random sign and significand with exponent in [lo, hi].
    fn f64_in(&mut self, lo: i32, hi: i32) -> f64 {
        let e = lo + (self.next() % (hi - lo + 1) as u64) as i32;
        let m = (self.next() >> 11) as f64 / (1u64 << 53) as f64 + 0.5;
        let v = m * 2f64.powi(e);
        if self.next() & 1 == 1 {
            -v
        } else {
            v
        }
    }
}

const INTS: [DType; 8] = [Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64];
const FLOATS: [DType; 6] = [Fp8E4M3, Fp8E5M2, Float16, BFloat16, Float32, Float64];

/// What an elementwise case computes.
#[derive(Copy, Clone, Debug)]
enum What {
    Alu(Op),
    Cast,
    Bitcast,
}

/// One elementwise kernel: `out[i] = what(in0[i], in1[i], …)` with oracle-computed expectations.
struct Case {
    name: String,
    what: What,
    in_dts: Vec<DType>,
    out_dt: DType,
    inputs: Vec<Vec<u64>>,
    expected: Vec<u64>,
}

impl Case {
    /// An ALU case over operand tuples (operands of `dt`; for WHERE the first is a bool).
    /// Tuples on which the oracle reports UB are dropped.
    fn alu(op: Op, dt: DType, tuples: impl IntoIterator<Item = Vec<u64>>) -> Case {
        let arity = if op.is_unary_alu() {
            1
        } else if op.is_binary_alu() {
            2
        } else {
            3
        };
        let mut in_dts = vec![dt; arity];
        if op == Op::WHERE {
            in_dts[0] = Bool;
        }
        let out_dt = if op.is_comparison() { Bool } else { dt };
        let mut inputs = vec![vec![]; arity];
        let mut expected = vec![];
        for t in tuples {
            let t: Vec<u64> = t.iter().zip(&in_dts).map(|(&x, &d)| x & mask(d)).collect();
            if let Ok(r) = alu(op, dt, &t) {
                for (k, x) in t.into_iter().enumerate() {
                    inputs[k].push(x);
                }
                expected.push(r);
            }
        }
        Case {
            name: format!("{}_{}", op.name().to_lowercase(), dt.name()),
            what: What::Alu(op),
            in_dts,
            out_dt,
            inputs,
            expected,
        }
    }

    fn cast(from: DType, to: DType, values: &[u64]) -> Case {
        let mut inputs = vec![];
        let mut expected = vec![];
        for &x in values {
            let x = x & mask(from);
            if let Ok(r) = cast(from, to, x) {
                inputs.push(x);
                expected.push(r);
            }
        }
        Case {
            name: format!("cast_{}_{}", from.name(), to.name()),
            what: What::Cast,
            in_dts: vec![from],
            out_dt: to,
            inputs: vec![inputs],
            expected,
        }
    }

    fn bitcast(from: DType, to: DType, values: &[u64]) -> Case {
        let inputs: Vec<u64> = values.iter().map(|&x| x & mask(from)).collect();
        let expected = inputs
            .iter()
            .map(|&x| bitcast(from, to, x).unwrap())
            .collect();
        Case {
            name: format!("bitcast_{}_{}", from.name(), to.name()),
            what: What::Bitcast,
            in_dts: vec![from],
            out_dt: to,
            inputs: vec![inputs],
            expected,
        }
    }

    fn len(&self) -> usize {
        self.expected.len()
    }

    fn program(&self) -> Program {
        let n = self.len();
        let mut params: Vec<ParamDecl> = self
            .in_dts
            .iter()
            .map(|&d| ParamDecl {
                dtype: d,
                size: n,
                written: false,
            })
            .collect();
        params.push(ParamDecl {
            dtype: self.out_dt,
            size: n,
            written: true,
        });
        let mut p = Program::new(self.name.clone(), params);
        let ins: Vec<InstId> = self
            .in_dts
            .iter()
            .enumerate()
            .map(|(k, &d)| p.push(Op::PARAM, d, vec![], KArg::Param(k as u32)))
            .collect();
        let out = p.push(
            Op::PARAM,
            self.out_dt,
            vec![],
            KArg::Param(ins.len() as u32),
        );
        let end = p.push(Op::CONST, Int64, vec![], KArg::Const(n as u64));
        let r = p.push(Op::RANGE, Int64, vec![end], KArg::Axis(0));
        let vals: Vec<InstId> = ins
            .iter()
            .zip(&self.in_dts)
            .map(|(&b, &d)| {
                let idx = p.push(Op::INDEX, d, vec![b, r], KArg::None);
                p.push(Op::LOAD, d, vec![idx], KArg::None)
            })
            .collect();
        let res = match self.what {
            What::Alu(op) => p.push(op, self.out_dt, vals, KArg::None),
            What::Cast => p.push(Op::CAST, self.out_dt, vals, KArg::None),
            What::Bitcast => p.push(Op::BITCAST, self.out_dt, vals, KArg::None),
        };
        let oi = p.push(Op::INDEX, self.out_dt, vec![out, r], KArg::None);
        p.push(Op::STORE, Void, vec![oi, res], KArg::None);
        p.push(Op::END, Void, vec![r], KArg::None);
        p
    }
}

fn to_bytes(dt: DType, vals: &[u64]) -> Vec<u8> {
    let w = dt.itemsize();
    vals.iter()
        .flat_map(|v| v.to_le_bytes()[..w].to_vec())
        .collect()
}

fn from_bytes(dt: DType, bytes: &[u8]) -> Vec<u64> {
    let w = dt.itemsize();
    bytes
        .chunks(w)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..w].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

fn cpu() -> Arc<dyn Device> {
    runtime::open("CPU:0").expect("CPU:0")
}

fn compile(dev: &dyn Device, programs: &[Program]) -> Compiled {
    match dev.compile(&c_unit(programs)) {
        Ok(c) => c,
        Err(e) => panic!("compile failed: {e}"),
    }
}

/// Runs program `name` of `prog` on `args` (host data per param) and returns every param's
/// bytes afterwards.
fn run(dev: &dyn Device, prog: &Compiled, name: &str, args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let bufs: Vec<_> = args
        .iter()
        .map(|a| {
            let b = dev.alloc(a.len()).unwrap();
            dev.copy_in(&b, a).unwrap();
            b
        })
        .collect();
    let refs: Vec<_> = bufs.iter().collect();
    dev.launch(prog, name, &refs)
        .unwrap_or_else(|e| panic!("launch {name}: {e}"));
    bufs.iter().map(|b| dev.copy_out(b).unwrap()).collect()
}

/// Compiles all cases as one unit, runs each and compares with the oracle. Panics with a
/// report of the first mismatches. Returns the number of elements checked.
fn check_cases(cases: &[Case]) -> usize {
    check_cases_on(&*cpu(), cases)
}

/// [`check_cases`] on `dev`.
fn check_cases_on(dev: &dyn Device, cases: &[Case]) -> usize {
    let cases: Vec<&Case> = cases.iter().filter(|c| c.len() > 0).collect();
    let programs: Vec<Program> = cases.iter().map(|c| c.program()).collect();
    let prog = compile(dev, &programs);
    let mut report = String::new();
    let mut bad_cases = 0;
    let mut total = 0;
    for c in &cases {
        let mut args: Vec<Vec<u8>> = c
            .inputs
            .iter()
            .zip(&c.in_dts)
            .map(|(v, &d)| to_bytes(d, v))
            .collect();
        args.push(vec![0u8; c.len() * c.out_dt.itemsize()]);
        let outs = run(dev, &prog, &c.name, &args);
        let got = from_bytes(c.out_dt, outs.last().unwrap());
        total += c.len();
        let bad: Vec<usize> = (0..c.len()).filter(|&i| got[i] != c.expected[i]).collect();
        if !bad.is_empty() {
            bad_cases += 1;
            report.push_str(&format!(
                "{}: {} of {} differ\n",
                c.name,
                bad.len(),
                c.len()
            ));
            for &i in bad.iter().take(6) {
                let ins: Vec<String> = c.inputs.iter().map(|v| format!("{:#x}", v[i])).collect();
                report.push_str(&format!(
                    "   ({}) -> C {:#x}, oracle {:#x}\n",
                    ins.join(", "),
                    got[i],
                    c.expected[i]
                ));
            }
        }
    }
    assert!(
        bad_cases == 0,
        "{bad_cases} kernels differ from the oracle:\n{report}"
    );
    total
}

/// Integer edge values of `dt` (as bits) plus random ones.
fn int_values(dt: DType, rng: &mut Rng, random: usize) -> Vec<u64> {
    let (lo, hi) = dt.int_range().unwrap();
    let m = mask(dt);
    let mut v: Vec<u64> = [
        0i128,
        1,
        2,
        3,
        5,
        7,
        -1,
        -2,
        -3,
        -7,
        -8,
        lo,
        lo + 1,
        hi,
        hi - 1,
        hi / 2,
        lo / 2,
        0x55,
        100,
        -100,
    ]
    .iter()
    .map(|&x| (x as u64) & m)
    .collect();
    v.extend((0..random).map(|i| match i % 3 {
        0 => rng.next() & m,
        1 => (rng.next() % 64).wrapping_sub(32) & m,
        _ => (rng.next() >> (rng.next() % 64)) & m,
    }));
    v.sort_unstable();
    v.dedup();
    v
}

/// Float edge bit patterns of `dt`: zeros, ones, infinities, NaNs (with payloads and both
/// signs), subnormals, extremes, plus random bit patterns and random values in range.
fn float_values(dt: DType, rng: &mut Rng, random: usize) -> Vec<u64> {
    let ff = dt.float_format().unwrap();
    let (e, m) = (ff.exp_bits, ff.man_bits);
    let sign = 1u64 << (e + m);
    let exp_all = ((1u64 << e) - 1) << m;
    let man_all = (1u64 << m) - 1;
    let one = ((1u64 << (e - 1)) - 1) << m;
    let mut v = vec![
        0,
        1,
        2,
        3,
        man_all,                  // largest subnormal
        1 << m,                   // smallest normal
        one,                      // 1.0
        one | 1,                  // 1 + ulp
        one | (1 << (m - 1)),     // 1.5
        one + (1 << m),           // 2.0
        exp_all - 1,              // max finite (IEEE formats)
        exp_all,                  // inf (or 256 for e4m3)
        exp_all | 1,              // NaN with payload (signaling for IEEE)
        exp_all | (1 << (m - 1)), // quiet NaN
        exp_all | man_all,        // NaN (e4m3's only NaN)
        exp_all | man_all & !1,   // e4m3 max finite
    ];
    let pos = v.clone();
    v.extend(pos.iter().map(|x| x | sign));
    let float_of = |x: f64| uopkit_interp::scalar::round::from_f64(dt, x);
    for _ in 0..random {
        match rng.next() % 3 {
            0 => v.push(rng.next() & mask(dt)),
            1 => v.push(float_of(rng.f64_in(-4, 4))),
            _ => v.push(float_of(
                rng.f64_in(-(1 << (e - 1)) - m as i32, 1 << (e - 1)),
            )),
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// All pairs from `xs` × `ys`.
fn pairs(xs: &[u64], ys: &[u64]) -> Vec<Vec<u64>> {
    xs.iter()
        .flat_map(|&a| ys.iter().map(move |&b| vec![a, b]))
        .collect()
}

// ---------------------------------------------------------------------------------------
// ALU ops.

/// The binary ALU ops on integers: every op-table entry of arity 2 that takes ints (so a new
/// op's compiled C is checked against the oracle here without touching this file).
fn int_binary() -> Vec<Op> {
    table::ops_where(|i| i.arity == 2 && i.classes.int)
}

#[test]
fn int_ops_match_oracle() {
    let mut rng = Rng(1);
    let mut cases = vec![];
    for dt in INTS {
        let vals = int_values(dt, &mut rng, 60);
        let all_pairs = pairs(&vals, &vals);
        let counts: Vec<u64> = (0..dt.bits() as u64).collect();
        for op in int_binary() {
            let mut tuples = all_pairs.clone();
            if matches!(op, Op::SHL | Op::SHR) {
                tuples.extend(pairs(&vals, &counts)); // in-range counts (the rest is UB)
            }
            cases.push(Case::alu(op, dt, tuples));
        }
        for op in table::ops_where(|i| i.arity == 1 && i.classes.int) {
            cases.push(Case::alu(op, dt, vals.iter().map(|&a| vec![a])));
        }
        let triples: Vec<Vec<u64>> = (0..3000)
            .map(|_| {
                (0..3)
                    .map(|_| vals[rng.next() as usize % vals.len()])
                    .collect()
            })
            .collect();
        cases.push(Case::alu(Op::MULACC, dt, triples.clone()));
        cases.push(Case::alu(
            Op::WHERE,
            dt,
            triples.into_iter().map(|mut t| {
                t[0] &= 1;
                t
            }),
        ));
    }
    // Every case kept a useful number of inputs.
    for c in &cases {
        assert!(
            c.len() >= 60,
            "{} has only {} defined inputs",
            c.name,
            c.len()
        );
    }
    let n = check_cases(&cases);
    assert!(n > 100_000, "{n}");
}

#[test]
fn bool_ops_match_oracle() {
    let bits = [0u64, 1];
    let two = pairs(&bits, &bits);
    let three: Vec<Vec<u64>> = two
        .iter()
        .flat_map(|p| bits.iter().map(move |&c| vec![p[0], p[1], c]))
        .collect();
    let mut cases = vec![];
    for op in [
        Op::ADD,
        Op::SUB,
        Op::MUL,
        Op::MAX,
        Op::AND,
        Op::OR,
        Op::XOR,
        Op::CMPLT,
        Op::CMPNE,
        Op::CMPEQ,
    ] {
        cases.push(Case::alu(op, Bool, two.clone()));
    }
    cases.push(Case::alu(Op::NEG, Bool, [vec![0], vec![1]]));
    cases.push(Case::alu(Op::MULACC, Bool, three.clone()));
    cases.push(Case::alu(Op::WHERE, Bool, three));
    check_cases(&cases);
}

const FLOAT_BINARY: [Op; 9] = [
    Op::ADD,
    Op::SUB,
    Op::MUL,
    Op::FDIV,
    Op::MAX,
    Op::CMPLT,
    Op::CMPNE,
    Op::CMPEQ,
    Op::POW,
];
const FLOAT_UNARY: [Op; 7] = [
    Op::NEG,
    Op::SQRT,
    Op::RECIPROCAL,
    Op::TRUNC,
    Op::EXP2,
    Op::LOG2,
    Op::SIN,
];

/// float32 and float64: every float op on edge values and random ones, NaN payloads included.
#[test]
fn float32_float64_ops_match_oracle() {
    let mut rng = Rng(2);
    let mut cases = vec![];
    for dt in [Float32, Float64] {
        let vals = float_values(dt, &mut rng, 150);
        let all_pairs = pairs(&vals, &vals);
        for op in FLOAT_BINARY {
            cases.push(Case::alu(op, dt, all_pairs.clone()));
        }
        let mut unary = vals.clone();
        unary.extend((0..3000).map(|_| rng.next() & mask(dt)));
        for op in FLOAT_UNARY {
            cases.push(Case::alu(op, dt, unary.iter().map(|&a| vec![a])));
        }
        let triples: Vec<Vec<u64>> = (0..20_000)
            .map(|_| {
                (0..3)
                    .map(|_| vals[rng.next() as usize % vals.len()])
                    .collect()
            })
            .collect();
        cases.push(Case::alu(Op::MULACC, dt, triples.clone()));
        cases.push(Case::alu(
            Op::WHERE,
            dt,
            triples.into_iter().map(|mut t| {
                t[0] &= 1;
                t
            }),
        ));
    }
    check_cases(&cases);
}

/// Transcendentals in float32 on dense ranges of ordinary arguments (glibc's double
/// functions, rounded to float32, as the oracle computes them).
#[test]
fn float32_exp2_log2_sin_pow_dense() {
    let mut rng = Rng(3);
    let args: Vec<u64> = (0..40_000)
        .map(|i| {
            let x = match i % 4 {
                0 => rng.f64_in(-10, 8) as f32,
                1 => (rng.next() % 300_000) as f32 / 1000.0 - 150.0,
                2 => rng.f64_in(-30, 30) as f32,
                _ => f32::from_bits(rng.next() as u32),
            };
            x.to_bits() as u64
        })
        .collect();
    let mut cases = vec![];
    for op in [Op::EXP2, Op::LOG2, Op::SIN, Op::SQRT] {
        cases.push(Case::alu(op, Float32, args.iter().map(|&a| vec![a])));
    }
    cases.push(Case::alu(
        Op::POW,
        Float32,
        args.chunks(2).map(|c| c.to_vec()),
    ));
    // The same functions in the narrow formats (rounded from double once).
    for dt in [Float16, BFloat16, Fp8E4M3, Fp8E5M2] {
        let all: Vec<u64> = (0..=mask(dt)).collect();
        for op in [Op::EXP2, Op::LOG2, Op::SIN] {
            cases.push(Case::alu(op, dt, all.iter().map(|&a| vec![a])));
        }
    }
    check_cases(&cases);
}

/// EXP2/POW whose double result overflows from finite operands: inf in float64 (and in
/// every format with infinities), saturation to 448 in fp8e4m3.
#[test]
fn libm_overflow_and_saturation() {
    let big = [
        2000f64,
        1024.0,
        1023.9,
        -1100.0,
        1e300,
        f64::INFINITY,
        f64::NAN,
    ];
    let mut cases = vec![Case::alu(
        Op::EXP2,
        Float64,
        big.iter().map(|x| vec![x.to_bits()]),
    )];
    assert_eq!(cases[0].expected[0], f64::INFINITY.to_bits());
    cases.push(Case::alu(
        Op::POW,
        Float64,
        [
            vec![10f64.to_bits(), 400f64.to_bits()],
            vec![(-10f64).to_bits(), 401f64.to_bits()],
        ],
    ));
    assert_eq!(
        cases[1].expected,
        vec![f64::INFINITY.to_bits(), f64::NEG_INFINITY.to_bits()]
    );
    for dt in [Fp8E4M3, Fp8E5M2, Float16, BFloat16, Float32] {
        let vals: Vec<u64> = big
            .iter()
            .map(|&x| uopkit_interp::scalar::round::from_f64(dt, x))
            .collect();
        cases.push(Case::alu(Op::EXP2, dt, vals.iter().map(|&a| vec![a])));
        cases.push(Case::alu(Op::POW, dt, pairs(&vals, &vals)));
    }
    check_cases(&cases);
}

/// float16 and bfloat16: add/sub/mul/div/mulacc on ~100k random bit patterns (NaNs and
/// everything else included), the unary ops exhaustively.
#[test]
fn float16_bfloat16_ops_random_bits() {
    let mut rng = Rng(5);
    let mut cases = vec![];
    for dt in [Float16, BFloat16] {
        let rnd: Vec<Vec<u64>> = (0..100_000)
            .map(|_| vec![rng.next() & 0xffff, rng.next() & 0xffff])
            .collect();
        for op in [Op::ADD, Op::MUL] {
            cases.push(Case::alu(op, dt, rnd.clone()));
        }
        let fewer = &rnd[..30_000];
        for op in [
            Op::SUB,
            Op::FDIV,
            Op::MAX,
            Op::CMPLT,
            Op::CMPNE,
            Op::CMPEQ,
            Op::POW,
        ] {
            cases.push(Case::alu(op, dt, fewer.to_vec()));
        }
        // Pairs of edge values too (overflow, subnormal ties, NaN payloads).
        let edges = float_values(dt, &mut rng, 100);
        cases.push(Case::alu(Op::ADD, dt, pairs(&edges, &edges)).renamed("edges_add"));
        cases.push(Case::alu(Op::MUL, dt, pairs(&edges, &edges)).renamed("edges_mul"));
        cases.push(Case::alu(Op::FDIV, dt, pairs(&edges, &edges)).renamed("edges_fdiv"));
        let triples: Vec<Vec<u64>> = (0..30_000)
            .map(|_| (0..3).map(|_| rng.next() & 0xffff).collect())
            .collect();
        cases.push(Case::alu(Op::MULACC, dt, triples));
        // MULACC near cancellation: c ≈ -a·b.
        let near: Vec<Vec<u64>> = (0..20_000)
            .map(|_| {
                let (a, b) = (rng.next() & 0xffff, rng.next() & 0xffff);
                let ab = alu(Op::MUL, dt, &[a, b]).unwrap();
                vec![
                    a,
                    b,
                    (ab ^ 0x8000).wrapping_add(rng.next() % 3).wrapping_sub(1) & 0xffff,
                ]
            })
            .collect();
        cases.push(Case::alu(Op::MULACC, dt, near).renamed("near_cancel_mulacc"));
        let all: Vec<u64> = (0..=0xffff).collect();
        for op in [Op::NEG, Op::SQRT, Op::RECIPROCAL, Op::TRUNC] {
            cases.push(Case::alu(op, dt, all.iter().map(|&a| vec![a])));
        }
    }
    let n = check_cases(&cases);
    assert!(n > 500_000, "{n}");
}

/// The float16 ops the renderer calls directly (`uk_h_*`, render::c's F16_DIRECT) go through
/// float32 where the target has F16C and through the exact generic path elsewhere: both give
/// the oracle's bits. The F16C branch is what [`float16_bfloat16_ops_random_bits`] compiles on
/// an x86-64 with F16C; this compiles the same kind of cases with `-mno-f16c`, which leaves
/// `__F16C__` undefined however `-march=native` is placed.
#[cfg(target_arch = "x86_64")]
#[test]
fn float16_direct_ops_without_f16c_take_the_exact_path() {
    let mut rng = Rng(15);
    let dir = tempfile::tempdir().unwrap();
    let compiler = CCompiler::new(cc(), dir.path()).with_args(["-mno-f16c"]);
    let dev = CpuDevice::new(0, Arc::new(compiler));
    let rnd: Vec<Vec<u64>> = (0..20_000)
        .map(|_| vec![rng.next() & 0xffff, rng.next() & 0xffff])
        .collect();
    let edges = float_values(Float16, &mut rng, 100);
    let mut cases = vec![];
    for op in [Op::ADD, Op::SUB, Op::MUL, Op::FDIV] {
        cases.push(Case::alu(op, Float16, rnd.clone()));
        cases.push(Case::alu(op, Float16, pairs(&edges, &edges)).renamed("edges"));
    }
    let all: Vec<u64> = (0..=0xffff).collect();
    for op in [Op::SQRT, Op::RECIPROCAL] {
        cases.push(Case::alu(op, Float16, all.iter().map(|&a| vec![a])));
    }
    let n = check_cases_on(&dev, &cases);
    assert!(n > 200_000, "{n}");
}

/// fp8 (both formats): every binary op on all 65536 operand pairs, unary ops on all 256.
#[test]
fn fp8_ops_exhaustive() {
    let mut rng = Rng(6);
    let all: Vec<u64> = (0..256).collect();
    let every_pair = pairs(&all, &all);
    let mut cases = vec![];
    for dt in [Fp8E4M3, Fp8E5M2] {
        for op in [
            Op::ADD,
            Op::SUB,
            Op::MUL,
            Op::FDIV,
            Op::MAX,
            Op::CMPLT,
            Op::CMPEQ,
            Op::POW,
        ] {
            cases.push(Case::alu(op, dt, every_pair.clone()));
        }
        for op in [Op::NEG, Op::SQRT, Op::RECIPROCAL, Op::TRUNC] {
            cases.push(Case::alu(op, dt, all.iter().map(|&a| vec![a])));
        }
        let triples: Vec<Vec<u64>> = (0..30_000)
            .map(|_| (0..3).map(|_| rng.next() & 0xff).collect())
            .collect();
        cases.push(Case::alu(Op::MULACC, dt, triples.clone()));
        cases.push(Case::alu(
            Op::WHERE,
            dt,
            triples.into_iter().map(|mut t| {
                t[0] &= 1;
                t
            }),
        ));
    }
    check_cases(&cases);
}

impl Case {
    fn renamed(mut self, prefix: &str) -> Case {
        self.name = format!("{prefix}_{}", self.name);
        self
    }
}

// ---------------------------------------------------------------------------------------
// CAST and BITCAST.

/// Source values for casts from `from`: edge values, values near every int range boundary
/// and halfway points, and random ones.
fn cast_sources(from: DType, rng: &mut Rng) -> Vec<u64> {
    if from == Bool {
        return vec![0, 1];
    }
    if from.is_int() {
        let mut v = int_values(from, rng, 300);
        // Around float rounding boundaries: 2^24 ± k, 2^53 ± k, 2^63 ± k, midpoints with tails.
        for base in [1u64 << 11, 1 << 24, 1 << 53, 1 << 62, 1 << 63] {
            for k in 0..5u64 {
                v.push(base.wrapping_add(k) & mask(from));
                v.push(base.wrapping_sub(k) & mask(from));
                v.push(base.wrapping_neg().wrapping_add(k) & mask(from));
            }
        }
        v.push(((1u64 << 63) + (1u64 << 39) + 1) & mask(from));
        v.push(65519 & mask(from));
        v.push(65520 & mask(from));
        v.push(448 & mask(from));
        v.push(464 & mask(from));
        return v;
    }
    let mut v = float_values(from, rng, 300);
    let round = |x: f64| uopkit_interp::scalar::round::from_f64(from, x);
    for b in [8, 16, 32, 64] {
        for base in [2f64.powi(b - 1), 2f64.powi(b)] {
            for d in [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0] {
                v.push(round(base + d));
                v.push(round(-base + d));
            }
        }
    }
    for x in [
        0.5, -0.5, 0.999, -0.999, 127.5, -128.5, 255.5, 1e10, -1e10, 1e30, 65504.0, 65520.0, 448.0,
        464.0,
    ] {
        v.push(round(x));
    }
    for _ in 0..300 {
        v.push(round((rng.next() % 1_000_000) as f64 / 64.0 - 7000.0));
    }
    v
}

/// Every dtype pair (225 kernels), on edge values; inputs that are UB for a pair (float→int
/// out of range, NaN, inf) are left out.
#[test]
fn casts_all_dtype_pairs() {
    let mut rng = Rng(7);
    let mut cases = vec![];
    for from in DType::ALL {
        let src = cast_sources(from, &mut rng);
        for to in DType::ALL {
            cases.push(Case::cast(from, to, &src));
        }
    }
    for c in &cases {
        assert!(c.len() >= 2, "{} has {} inputs", c.name, c.len());
    }
    check_cases(&cases);
}

/// int64/uint64 → every float on many random magnitudes (one rounding from the exact
/// integer; no double rounding through double).
#[test]
fn int_to_float_random_magnitudes() {
    let mut rng = Rng(8);
    let vals: Vec<u64> = (0..20_000)
        .map(|_| rng.next() >> (rng.next() % 64))
        .collect();
    let neg: Vec<u64> = vals.iter().map(|v| v.wrapping_neg()).collect();
    let mut cases = vec![];
    for to in FLOATS {
        cases.push(Case::cast(UInt64, to, &vals));
        cases.push(Case::cast(Int64, to, &[vals.clone(), neg.clone()].concat()));
        cases.push(Case::cast(Int32, to, &neg));
    }
    check_cases(&cases);
}

#[test]
fn bitcasts_between_equal_widths() {
    let mut rng = Rng(9);
    let groups: [&[DType]; 4] = [
        &[Int8, UInt8, Fp8E4M3, Fp8E5M2],
        &[Int16, UInt16, Float16, BFloat16],
        &[Int32, UInt32, Float32],
        &[Int64, UInt64, Float64],
    ];
    let mut cases = vec![];
    for g in groups {
        for &from in g {
            let mut vals: Vec<u64> = (0..2000).map(|_| rng.next()).collect();
            if from.is_float() {
                vals.extend(float_values(from, &mut rng, 0));
            }
            for &to in g {
                if to != from {
                    cases.push(Case::bitcast(from, to, &vals));
                }
            }
        }
    }
    check_cases(&cases);
}

// ---------------------------------------------------------------------------------------
// Loops, register accumulators, gates.

/// `out[0] = fold(ADD, in[0..n])` in order through a one-element register accumulator.
fn sum_program(name: &str, dt: DType, n: usize) -> Program {
    let mut p = Program::new(
        name,
        vec![
            ParamDecl {
                dtype: dt,
                size: n,
                written: false,
            },
            ParamDecl {
                dtype: dt,
                size: 1,
                written: true,
            },
        ],
    );
    let input = p.push(Op::PARAM, dt, vec![], KArg::Param(0));
    let out = p.push(Op::PARAM, dt, vec![], KArg::Param(1));
    let acc = p.push(Op::BUFFER, dt, vec![], KArg::Reg(1));
    let zero_i = p.push(Op::CONST, Int64, vec![], KArg::Const(0));
    let acc0 = p.push(Op::INDEX, dt, vec![acc, zero_i], KArg::None);
    let zero = p.push(Op::CONST, dt, vec![], KArg::Const(0));
    p.push(Op::STORE, Void, vec![acc0, zero], KArg::None);
    let end = p.push(Op::CONST, Int64, vec![], KArg::Const(n as u64));
    let r = p.push(Op::RANGE, Int64, vec![end], KArg::Axis(0));
    let ii = p.push(Op::INDEX, dt, vec![input, r], KArg::None);
    let x = p.push(Op::LOAD, dt, vec![ii], KArg::None);
    let cur = p.push(Op::LOAD, dt, vec![acc0], KArg::None);
    let s = p.push(Op::ADD, dt, vec![cur, x], KArg::None);
    p.push(Op::STORE, Void, vec![acc0, s], KArg::None);
    p.push(Op::END, Void, vec![r], KArg::None);
    let fin = p.push(Op::LOAD, dt, vec![acc0], KArg::None);
    let oi = p.push(Op::INDEX, dt, vec![out, zero_i], KArg::None);
    p.push(Op::STORE, Void, vec![oi, fin], KArg::None);
    p
}

#[test]
fn register_accumulator_sums_in_order() {
    let mut rng = Rng(10);
    let n = 1000;
    let progs = [
        sum_program("sum_f32", Float32, n),
        sum_program("sum_f16", Float16, n),
        sum_program("sum_i32", Int32, n),
    ];
    let dev = cpu();
    let prog = compile(&*dev, &progs);
    let inputs: [(DType, Vec<u64>); 3] = [
        (
            Float32,
            (0..n)
                .map(|_| (rng.f64_in(-20, 20) as f32).to_bits() as u64)
                .collect(),
        ),
        (
            Float16,
            (0..n)
                .map(|_| uopkit_interp::scalar::round::from_f64(Float16, rng.f64_in(-8, 6)))
                .collect(),
        ),
        (Int32, (0..n).map(|_| rng.next() & 0xffff_ffff).collect()),
    ];
    for (p, (dt, xs)) in progs.iter().zip(&inputs) {
        let want = xs
            .iter()
            .fold(0u64, |acc, &x| alu(Op::ADD, *dt, &[acc, x]).unwrap());
        let outs = run(
            &*dev,
            &prog,
            &p.name,
            &[to_bytes(*dt, xs), vec![0; dt.itemsize()]],
        );
        assert_eq!(from_bytes(*dt, &outs[1])[0], want, "{}", p.name);
    }
    // The float32 sum is the sequential one, not a reassociated one.
    let xs: Vec<f32> = inputs[0]
        .1
        .iter()
        .map(|&b| f32::from_bits(b as u32))
        .collect();
    let seq = xs.iter().fold(0f32, |a, &x| a + x);
    let outs = run(
        &*dev,
        &prog,
        "sum_f32",
        &[to_bytes(Float32, &inputs[0].1), vec![0; 4]],
    );
    assert_eq!(from_bytes(Float32, &outs[1])[0], seq.to_bits() as u64);
}

/// `out[i] = i < k ? in[i] : alt` with a gated LOAD, and `if (i % 2 == 0) out2[i] = in[i]`
/// with a gated STORE (out2 keeps its other elements).
#[test]
fn gated_load_and_store() {
    let n = 16usize;
    let dt = Int32;
    let d = |written| ParamDecl {
        dtype: dt,
        size: n,
        written,
    };
    let mut p = Program::new("gates", vec![d(false), d(true), d(true)]);
    let input = p.push(Op::PARAM, dt, vec![], KArg::Param(0));
    let out = p.push(Op::PARAM, dt, vec![], KArg::Param(1));
    let out2 = p.push(Op::PARAM, dt, vec![], KArg::Param(2));
    let end = p.push(Op::CONST, Int64, vec![], KArg::Const(n as u64));
    let k = p.push(Op::CONST, Int64, vec![], KArg::Const(5));
    let two = p.push(Op::CONST, Int64, vec![], KArg::Const(2));
    let zero = p.push(Op::CONST, Int64, vec![], KArg::Const(0));
    let alt = p.push(Op::CONST, dt, vec![], KArg::Const((-7i32) as u32 as u64));
    let r = p.push(Op::RANGE, Int64, vec![end], KArg::Axis(0));
    let lt = p.push(Op::CMPLT, Bool, vec![r, k], KArg::None);
    let ii = p.push(Op::INDEX, dt, vec![input, r], KArg::None);
    let x = p.push(Op::LOAD, dt, vec![ii, alt, lt], KArg::None);
    let oi = p.push(Op::INDEX, dt, vec![out, r], KArg::None);
    p.push(Op::STORE, Void, vec![oi, x], KArg::None);
    let m = p.push(Op::CMOD, Int64, vec![r, two], KArg::None);
    let even = p.push(Op::CMPEQ, Bool, vec![m, zero], KArg::None);
    let y = p.push(Op::LOAD, dt, vec![ii], KArg::None);
    let oi2 = p.push(Op::INDEX, dt, vec![out2, r], KArg::None);
    p.push(Op::STORE, Void, vec![oi2, y, even], KArg::None);
    p.push(Op::END, Void, vec![r], KArg::None);
    let dev = cpu();
    let prog = compile(&*dev, &[p]);
    let xs: Vec<u64> = (0..n as u64).map(|i| i * 10 + 1).collect();
    let keep: Vec<u64> = vec![99; n];
    let outs = run(
        &*dev,
        &prog,
        "gates",
        &[to_bytes(dt, &xs), vec![0; 4 * n], to_bytes(dt, &keep)],
    );
    let got = from_bytes(dt, &outs[1]);
    let got2 = from_bytes(dt, &outs[2]);
    for i in 0..n {
        assert_eq!(
            got[i],
            if i < 5 { xs[i] } else { (-7i32) as u32 as u64 },
            "gated load {i}"
        );
        assert_eq!(
            got2[i],
            if i % 2 == 0 { xs[i] } else { 99 },
            "gated store {i}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Runtime: devices, copies, launch checks, cache, compiler errors.

fn tiny_program(name: &str, add: u64) -> Program {
    Case::alu(Op::ADD, Int32, (0..4).map(|i| vec![i, add]))
        .renamed(name)
        .program()
}

#[test]
fn two_cpu_devices_have_separate_memory() {
    let (d0, d1) = (
        runtime::open("CPU:0").unwrap(),
        runtime::open("CPU:1").unwrap(),
    );
    let prog = compile(&*d0, &[tiny_program("sep", 1)]);
    let kernel = prog.kernels()[0].name.clone();
    let mk = |d: &dyn Device, vals: &[u64]| {
        let b = d.alloc(16).unwrap();
        d.copy_in(&b, &to_bytes(Int32, vals)).unwrap();
        b
    };
    let (a, b, o) = (
        mk(&*d0, &[1, 2, 3, 4]),
        mk(&*d0, &[10, 20, 30, 40]),
        d0.alloc(16).unwrap(),
    );
    d0.launch(&prog, &kernel, &[&a, &b, &o]).unwrap();
    // Copy the result to CPU:1 and use it there, with the same compiled unit.
    let (a1, b1, o1) = (
        d1.alloc(16).unwrap(),
        mk(&*d1, &[100, 100, 100, 100]),
        d1.alloc(16).unwrap(),
    );
    runtime::copy_between(&*d0, &o, &*d1, &a1).unwrap();
    d0.copy_in(&o, &to_bytes(Int32, &[0; 4])).unwrap(); // CPU:1's copy is unaffected
    d1.launch(&prog, &kernel, &[&a1, &b1, &o1]).unwrap();
    assert_eq!(
        from_bytes(Int32, &d1.copy_out(&o1).unwrap()),
        vec![111, 122, 133, 144]
    );
    assert_eq!(from_bytes(Int32, &d0.copy_out(&o).unwrap()), vec![0; 4]);
    // A CPU:0 buffer cannot be used on CPU:1.
    let e = d1.launch(&prog, &kernel, &[&a, &b1, &o1]).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
    d0.synchronize().unwrap();
}

#[test]
fn launch_arguments_are_checked() {
    let dev = cpu();
    let prog = compile(&*dev, &[tiny_program("chk", 1)]);
    let kernel = prog.kernels()[0].name.clone();
    let (a, b, o, small) = (
        dev.alloc(16).unwrap(),
        dev.alloc(16).unwrap(),
        dev.alloc(16).unwrap(),
        dev.alloc(15).unwrap(),
    );
    assert!(matches!(
        dev.launch(&prog, &kernel, &[&a, &b]),
        Err(Error::ArgCount {
            expected: 3,
            got: 2,
            ..
        })
    ));
    let e = dev.launch(&prog, &kernel, &[&a, &b, &small]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::BufferTooSmall {
                index: 2,
                got: 15,
                need: 16,
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        dev.launch(&prog, "nope", &[&a, &b, &o]),
        Err(Error::UnknownKernel(_))
    ));
    dev.launch(&prog, &kernel, &[&a, &b, &o]).unwrap();
}

/// The C compiler the process-wide runtime uses (`UOPKIT_CC` or `cc`).
fn cc() -> String {
    CCompiler::global().cc().to_string()
}

/// A unit whose text is unique to this test run, so that the first compile is a miss.
fn unique_unit(tag: &str) -> Unit {
    let mut u = c_unit(&[tiny_program(tag, 3)]);
    let nonce = format!("/* {tag} {:?} {} */\n", Instant::now(), std::process::id());
    u.source.insert_str(0, &nonce);
    u
}

#[test]
fn compile_cache_hits_do_not_run_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let c1 = Arc::new(CCompiler::new(cc(), dir.path()));
    let dev = CpuDevice::new(0, c1.clone());
    let unit = unique_unit("cache");
    let t = Instant::now();
    dev.compile(&unit).unwrap();
    let cold = t.elapsed();
    assert_eq!(c1.spawns(), 1);
    dev.compile(&unit).unwrap();
    assert_eq!(c1.spawns(), 1, "in-process hit");
    // A fresh compiler (as in a new process) finds the object on disk.
    let c2 = Arc::new(CCompiler::new(cc(), dir.path()));
    let dev2 = CpuDevice::new(0, c2.clone());
    let t = Instant::now();
    let prog = dev2.compile(&unit).unwrap();
    let warm = t.elapsed();
    assert_eq!(c2.spawns(), 0, "disk hit");
    // The counters are the check; the times are only reported (timing asserts are flaky).
    eprintln!("compile: cold {cold:?}, cached {warm:?}");
    // The cached object works.
    let name = &unit.kernels[0].name;
    let outs = run(
        &dev2,
        &prog,
        name,
        &[
            to_bytes(Int32, &[1, 2, 3, 4]),
            to_bytes(Int32, &[3; 4]),
            vec![0; 16],
        ],
    );
    assert_eq!(from_bytes(Int32, &outs[2]), vec![4, 5, 6, 7]);
    // Exactly one object, named by the key, and no temporary files left behind.
    let files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with("k_") && files[0].ends_with(".so"),
        "{files:?}"
    );
    assert_eq!(
        dir.path().join(&files[0]),
        c2.object_path(&unit.source).unwrap()
    );
}

#[test]
fn parallel_compiles_of_one_unit_are_safe() {
    let dir = tempfile::tempdir().unwrap();
    let unit = unique_unit("parallel");
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let (unit, path) = (unit.clone(), dir.path().to_path_buf());
            std::thread::spawn(move || {
                let dev = CpuDevice::new(0, Arc::new(CCompiler::new(cc(), path)));
                let prog = dev.compile(&unit).unwrap();
                let outs = run(
                    &dev,
                    &prog,
                    &unit.kernels[0].name,
                    &[
                        to_bytes(Int32, &[5; 4]),
                        to_bytes(Int32, &[3; 4]),
                        vec![0; 16],
                    ],
                );
                from_bytes(Int32, &outs[2])
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), vec![8; 4]);
    }
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
}

#[test]
fn compile_error_shows_compiler_message_and_kept_source() {
    let dir = tempfile::tempdir().unwrap();
    let dev = CpuDevice::new(0, Arc::new(CCompiler::new(cc(), dir.path())));
    let mut p = Program::new("broken", vec![]);
    p.push(Op::BARRIER, Void, vec![], KArg::None);
    let e = dev.compile(&c_unit(&[p])).unwrap_err();
    let Error::Compile {
        stderr,
        source_path,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert!(
        stderr.contains("uopkit C renderer: v0: op BARRIER"),
        "{stderr}"
    );
    let kept = std::fs::read_to_string(source_path).unwrap();
    assert!(kept.contains("void k_broken(void **args)"));
    let msg = e.to_string();
    assert!(
        msg.contains(&source_path.display().to_string()) && msg.contains("op BARRIER"),
        "{msg}"
    );
    // Plain syntax errors from a hand-made unit as well.
    let mut u = unique_unit("syntax");
    u.source.push_str("\nint oops(void) { return 1 +; }\n");
    let e = dev.compile(&u).unwrap_err();
    assert!(
        matches!(&e, Error::Compile { stderr, .. } if stderr.contains("error")),
        "{e}"
    );
}

/// `UOPKIT_CC=/nonexistent` (read once by the process-wide compiler) gives a clean error.
/// Runs in a child process so that this test's environment does not leak into the others.
#[test]
fn missing_compiler_from_env_is_a_clean_error() {
    if std::env::var_os("UOPKIT_TEST_CHILD").is_some() {
        let dev = runtime::open("CPU:0").unwrap();
        let e = dev
            .compile(&c_unit(&[tiny_program("nocc", 1)]))
            .unwrap_err();
        assert!(matches!(e, Error::CompilerUnavailable { .. }), "{e}");
        let dir = std::env::var_os("UOPKIT_CACHE_DIR").unwrap();
        assert_eq!(CCompiler::global().cache_dir(), std::path::Path::new(&dir));
        println!("CHILD-ERROR: {e}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "missing_compiler_from_env_is_a_clean_error",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("UOPKIT_TEST_CHILD", "1")
        .env("UOPKIT_CC", "/nonexistent")
        .env(
            "UOPKIT_CACHE_DIR",
            std::env::temp_dir().join("uopkit-test-env-cache"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("CHILD-ERROR: C compiler '/nonexistent' could not be run"),
        "{text}"
    );
}

#[test]
fn rendering_is_deterministic() {
    let mut rng = Rng(11);
    let vals = float_values(Float16, &mut rng, 10);
    let progs: Vec<Program> = [Op::ADD, Op::MULACC, Op::MAX]
        .iter()
        .map(|&op| {
            Case::alu(
                op,
                Float16,
                vals.chunks(3).map(|c| c.to_vec()).filter(|c| c.len() == 3),
            )
            .program()
        })
        .collect();
    assert_eq!(render_c(&progs), render_c(&progs));
}

/// A kernel whose values are NaN-producing float32 ops shows the canonicalization: x86's
/// default NaN is negative, the oracle's is 0x7fc00000.
#[test]
fn float32_nan_results_are_canonical() {
    let inf = f32::INFINITY.to_bits() as u64;
    let c = Case::alu(
        Op::ADD,
        Float32,
        [
            vec![inf, inf | 0x8000_0000],
            vec![0xffc0_0001, 0],
            vec![0x7f80_0001, 0],
        ],
    );
    assert_eq!(c.expected, vec![0x7fc0_0000; 3]);
    let nan_neg = Case::alu(Op::NEG, Float32, [vec![0xffc0_0001]]);
    assert_eq!(nan_neg.expected, vec![0x7fc0_0001]);
    assert!(is_nan(Float32, 0x7fc0_0001));
    check_cases(&[c, nan_neg]);
}
