//! The C backend's fast paths stay exact: `restrict` kernel params (and the runtime's
//! variant without them for aliasing launches), and `defer_nan` (NaNs canonicalized where
//! their bits are observed, not after every op). The property test runs random float chains
//! and reductions over inputs full of NaN payloads on `CPU:0` and compares every output bit
//! with the kernel interpreter (the oracle).

use std::sync::Arc;

use proptest::prelude::*;
use uopkit_compiler::render::nan;
use uopkit_compiler::render::{c_unit, render_c, CStyle};
use uopkit_compiler::runtime::{self, Device};
use uopkit_interp::eval::value::Elem;
use uopkit_interp::ir::{DType, Op};
use uopkit_interp::kernel::interp::{run as interp_run, RunOpts};
use uopkit_interp::kernel::{InstId, KArg, ParamDecl, Program};

const F32: DType = DType::Float32;

fn cpu() -> Arc<dyn Device> {
    runtime::open("CPU:0").expect("CPU:0")
}

fn decl(size: usize, written: bool) -> ParamDecl {
    ParamDecl {
        dtype: F32,
        size,
        written,
    }
}

fn f32c(p: &mut Program, x: u32) -> InstId {
    p.push(Op::CONST, F32, vec![], KArg::Const(x as u64))
}

fn i64c(p: &mut Program, x: i64) -> InstId {
    p.push(Op::CONST, DType::Int64, vec![], KArg::Const(x as u64))
}

fn load(p: &mut Program, buf: InstId, idx: InstId) -> InstId {
    let i = p.push(Op::INDEX, F32, vec![buf, idx], KArg::None);
    p.push(Op::LOAD, F32, vec![i], KArg::None)
}

fn store(p: &mut Program, buf: InstId, idx: InstId, val: InstId) {
    let i = p.push(Op::INDEX, F32, vec![buf, idx], KArg::None);
    p.push(Op::STORE, DType::Void, vec![i, val], KArg::None);
}

/// The kernel text after the prelude.
fn body(src: &str) -> &str {
    src.split("end of prelude").nth(1).unwrap_or("")
}

/// `out[i] = in[0] + in[i]` for i in 0..4.
fn first_plus(name: &str) -> Program {
    let mut p = Program::new(name, vec![decl(4, true), decl(4, false)]);
    let o = p.push(Op::PARAM, F32, vec![], KArg::Param(0));
    let a = p.push(Op::PARAM, F32, vec![], KArg::Param(1));
    let z = i64c(&mut p, 0);
    let n = i64c(&mut p, 4);
    let r = p.push(Op::RANGE, DType::Int64, vec![n], KArg::Axis(0));
    let a0 = load(&mut p, a, z);
    let ai = load(&mut p, a, r);
    let s = p.push(Op::ADD, F32, vec![a0, ai], KArg::None);
    store(&mut p, o, r, s);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    p
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn params_are_restrict_and_aliasing_launches_run_without_it() {
    let p = first_plus("first_plus");
    let src = render_c(std::slice::from_ref(&p));
    assert!(
        body(&src).contains(
            "static void body_k_first_plus(float *UK_RESTRICT p0, float *UK_RESTRICT p1)"
        ),
        "{}",
        body(&src)
    );
    assert!(src.contains("#define UK_RESTRICT restrict"));
    let dev = cpu();
    let prog = dev.compile(&c_unit(&[p])).unwrap();
    // Distinct buffers: out[i] = 1 + 1.
    let (o, x) = (dev.alloc(16).unwrap(), dev.alloc(16).unwrap());
    dev.copy_in(&x, &bytes(&[1.0; 4])).unwrap();
    dev.launch(&prog, "first_plus", &[&o, &x]).unwrap();
    assert_eq!(floats(&dev.copy_out(&o).unwrap()), vec![2.0; 4]);
    // The same buffer in both slots: in program order, x[0] becomes 2 first, so every
    // later element reads it: [1+1, 2+1, 2+1, 2+1]. (With `restrict` in effect the load of
    // x[0] could be hoisted and give [2, 2, 2, 2].)
    dev.launch(&prog, "first_plus", &[&x, &x]).unwrap();
    assert_eq!(floats(&dev.copy_out(&x).unwrap()), vec![2.0, 3.0, 3.0, 3.0]);
}

#[test]
fn a_chain_and_a_sum_canonicalize_once_at_the_store() {
    // out[i] = (a[i] * 2 + 1) * a[i]; out[4] = sum of a.
    let mut p = Program::new("chain_sum", vec![decl(5, true), decl(4, false)]);
    let o = p.push(Op::PARAM, F32, vec![], KArg::Param(0));
    let a = p.push(Op::PARAM, F32, vec![], KArg::Param(1));
    let z = i64c(&mut p, 0);
    let four = i64c(&mut p, 4);
    let two = f32c(&mut p, 2.0f32.to_bits());
    let one = f32c(&mut p, 1.0f32.to_bits());
    let zero = f32c(&mut p, 0);
    let acc = p.push(Op::BUFFER, F32, vec![], KArg::Reg(1));
    store(&mut p, acc, z, zero);
    let r = p.push(Op::RANGE, DType::Int64, vec![four], KArg::Axis(0));
    let x = load(&mut p, a, r);
    let m = p.push(Op::MUL, F32, vec![x, two], KArg::None);
    let s = p.push(Op::ADD, F32, vec![m, one], KArg::None);
    let y = p.push(Op::MUL, F32, vec![s, x], KArg::None);
    store(&mut p, o, r, y);
    let old = load(&mut p, acc, z);
    let next = p.push(Op::ADD, F32, vec![old, x], KArg::None);
    store(&mut p, acc, z, next);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    let total = load(&mut p, acc, z);
    store(&mut p, o, four, total);
    let plan = nan::plan(&p);
    assert_eq!(plan.canon_uses(), 2, "{plan:?}");
    let src = render_c(std::slice::from_ref(&p));
    let b = body(&src);
    assert_eq!(b.matches("uk_canon_f32(").count(), 2, "{b}");
    // The accumulator update inside the loop is a plain add.
    assert!(b.contains("float v20 = (v19 + v12);"), "{b}");
    let eager = CStyle::C_EAGER_NAN.source(std::slice::from_ref(&p));
    assert_eq!(body(&eager).matches("uk_canon_f32(").count(), 4);
    // The bits: a NaN with a payload and the sign set in, the canonical NaN out.
    let dev = cpu();
    let prog = dev.compile(&c_unit(&[p])).unwrap();
    let (out, inp) = (dev.alloc(20).unwrap(), dev.alloc(16).unwrap());
    let nan_in = f32::from_bits(0xffc1_2345);
    dev.copy_in(&inp, &bytes(&[1.0, nan_in, -0.5, 3.0]))
        .unwrap();
    dev.launch(&prog, "chain_sum", &[&out, &inp]).unwrap();
    let got: Vec<u32> = floats(&dev.copy_out(&out).unwrap())
        .iter()
        .map(|x| x.to_bits())
        .collect();
    // (1*2+1)*1 = 3, NaN, (-1+1)*-0.5 = -0, (6+1)*3 = 21; the sum is NaN.
    assert_eq!(
        got,
        vec![
            3.0f32.to_bits(),
            0x7fc0_0000,
            0x8000_0000,
            21.0f32.to_bits(),
            0x7fc0_0000
        ]
    );
}

#[test]
fn max_with_a_loaded_nan_keeps_its_bits() {
    // out[i] = MAX(a[i], a[i] * 1): MAX moves an operand's bits (`a < b ? b : a`), so the
    // loaded NaN's payload and sign reach the output; the product is canonicalized where
    // MAX reads it, and MAX's result is stored as it is.
    let mut p = Program::new("max_nan", vec![decl(2, true), decl(2, false)]);
    let o = p.push(Op::PARAM, F32, vec![], KArg::Param(0));
    let a = p.push(Op::PARAM, F32, vec![], KArg::Param(1));
    let two = i64c(&mut p, 2);
    let one = f32c(&mut p, 1.0f32.to_bits());
    let r = p.push(Op::RANGE, DType::Int64, vec![two], KArg::Axis(0));
    let x = load(&mut p, a, r);
    let m = p.push(Op::MUL, F32, vec![x, one], KArg::None);
    let y = p.push(Op::MAX, F32, vec![x, m], KArg::None);
    store(&mut p, o, r, y);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    assert_eq!(nan::plan(&p).canon_uses(), 1);
    let dev = cpu();
    let prog = dev.compile(&c_unit(&[p])).unwrap();
    let (out, inp) = (dev.alloc(8).unwrap(), dev.alloc(8).unwrap());
    let input = [0xffa0_0001u32, 3.0f32.to_bits()];
    let b: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    dev.copy_in(&inp, &b).unwrap();
    dev.launch(&prog, "max_nan", &[&out, &inp]).unwrap();
    let got: Vec<u32> = floats(&dev.copy_out(&out).unwrap())
        .iter()
        .map(|x| x.to_bits())
        .collect();
    // NaN < NaN is false: the loaded NaN, bits untouched; 3 < 3 is false: 3.
    assert_eq!(got, vec![0xffa0_0001, 3.0f32.to_bits()]);
}

// ---- the property test: random chains against the kernel interpreter ----

/// One step of a random chain on the value stack.
#[derive(Clone, Debug)]
enum Step {
    Bin(Op),
    Un(Op),
    MulAcc,
    Select,
    /// Through float64 and back (two casts, float64 arithmetic between).
    ViaF64,
    Load(u8),
    Const(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        prop::sample::select(vec![Op::ADD, Op::SUB, Op::MUL, Op::FDIV, Op::MAX, Op::POW])
            .prop_map(Step::Bin),
        prop::sample::select(vec![Op::NEG, Op::SQRT, Op::RECIPROCAL, Op::TRUNC, Op::EXP2])
            .prop_map(Step::Un),
        Just(Step::MulAcc),
        Just(Step::Select),
        Just(Step::ViaF64),
        (0u8..3).prop_map(Step::Load),
        special_bits().prop_map(Step::Const),
    ]
}

fn special_bits() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0x7fc0_0000u32,
            0xffc0_0000,
            0x7f80_0001,
            0xff81_2345,
            0x7fa5_5555,
            0x7f80_0000,
            0xff80_0000,
            0,
            0x8000_0000,
            1.0f32.to_bits(),
            (-2.5f32).to_bits(),
            0.0f32.to_bits(),
        ]),
        any::<u32>(),
    ]
}

/// A program over 3 inputs of 6 elements: out[i] = chain(i) for i < 6, and out[6] the ADD or
/// MAX reduction of the chain's values (`red_max`).
fn chain_program(name: &str, steps: &[Step], red_max: bool) -> Program {
    const N: i64 = 6;
    let mut p = Program::new(
        name,
        vec![
            decl(N as usize + 1, true),
            decl(6, false),
            decl(6, false),
            decl(6, false),
        ],
    );
    let o = p.push(Op::PARAM, F32, vec![], KArg::Param(0));
    let ins: Vec<InstId> = (1..4)
        .map(|s| p.push(Op::PARAM, F32, vec![], KArg::Param(s)))
        .collect();
    let z = i64c(&mut p, 0);
    let n = i64c(&mut p, N);
    let init = f32c(&mut p, if red_max { 0xff80_0000 } else { 0 });
    let acc = p.push(Op::BUFFER, F32, vec![], KArg::Reg(1));
    store(&mut p, acc, z, init);
    let r = p.push(Op::RANGE, DType::Int64, vec![n], KArg::Axis(0));
    let mut stack = vec![load(&mut p, ins[0], r)];
    for s in steps {
        let top = *stack.last().unwrap();
        let second = if stack.len() > 1 {
            stack[stack.len() - 2]
        } else {
            top
        };
        let v = match s {
            Step::Bin(op) => p.push(*op, F32, vec![second, top], KArg::None),
            Step::Un(op) => p.push(*op, F32, vec![top], KArg::None),
            Step::MulAcc => {
                let third = if stack.len() > 2 {
                    stack[stack.len() - 3]
                } else {
                    top
                };
                p.push(Op::MULACC, F32, vec![top, second, third], KArg::None)
            }
            Step::Select => {
                let c = p.push(Op::CMPLT, DType::Bool, vec![second, top], KArg::None);
                p.push(Op::WHERE, F32, vec![c, top, second], KArg::None)
            }
            Step::ViaF64 => {
                let a = p.push(Op::CAST, DType::Float64, vec![top], KArg::None);
                let b = p.push(Op::CAST, DType::Float64, vec![second], KArg::None);
                let m = p.push(Op::MUL, DType::Float64, vec![a, b], KArg::None);
                let s = p.push(Op::ADD, DType::Float64, vec![m, a], KArg::None);
                p.push(Op::CAST, F32, vec![s], KArg::None)
            }
            Step::Load(k) => load(&mut p, ins[*k as usize], r),
            Step::Const(bits) => f32c(&mut p, *bits),
        };
        stack.push(v);
    }
    let top = *stack.last().unwrap();
    store(&mut p, o, r, top);
    let old = load(&mut p, acc, z);
    let next = p.push(
        if red_max { Op::MAX } else { Op::ADD },
        F32,
        vec![old, top],
        KArg::None,
    );
    store(&mut p, acc, z, next);
    p.push(Op::END, DType::Void, vec![r], KArg::None);
    let total = load(&mut p, acc, z);
    store(&mut p, o, n, total);
    p
}

type Chain = (Vec<Step>, bool, Vec<u32>);

fn chain() -> impl Strategy<Value = Chain> {
    (
        prop::collection::vec(step(), 1..10),
        any::<bool>(),
        prop::collection::vec(special_bits(), 18),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Every output bit of the C kernel (with `defer_nan` and `restrict`) equals the kernel
    /// interpreter's, for random chains with NaN payloads in the inputs and the constants.
    #[test]
    fn deferred_nans_match_the_oracle(chains in prop::collection::vec(chain(), 6)) {
        let programs: Vec<Program> = chains
            .iter()
            .enumerate()
            .map(|(i, (steps, red_max, _))| chain_program(&format!("c{i}"), steps, *red_max))
            .collect();
        let dev = cpu();
        let prog = dev.compile(&c_unit(&programs)).unwrap();
        for (p, (_, _, data)) in programs.iter().zip(&chains) {
            let mut oracle: Vec<Vec<Elem>> = vec![vec![Elem::Bits(0); 7]];
            for k in 0..3 {
                oracle.push(data[k * 6..k * 6 + 6].iter().map(|&b| Elem::Bits(u64::from(b))).collect());
            }
            interp_run(p, &mut oracle, &RunOpts::default()).unwrap();
            let want: Vec<u64> = oracle[0]
                .iter()
                .map(|e| match e {
                    Elem::Bits(b) => *b,
                    Elem::Uninit { .. } => u64::MAX,
                })
                .collect();
            let bufs: Vec<_> = (0..4).map(|k| dev.alloc(if k == 0 { 28 } else { 24 }).unwrap()).collect();
            for k in 0..3 {
                let b: Vec<u8> = data[k * 6..k * 6 + 6].iter().flat_map(|x| x.to_le_bytes()).collect();
                dev.copy_in(&bufs[k + 1], &b).unwrap();
            }
            let refs: Vec<_> = bufs.iter().collect();
            dev.launch(&prog, &p.name, &refs).unwrap();
            let got: Vec<u64> = dev
                .copy_out(&bufs[0])
                .unwrap()
                .chunks(4)
                .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            let src = render_c(std::slice::from_ref(p));
            prop_assert_eq!(&got, &want, "{}", body(&src));
        }
    }
}
