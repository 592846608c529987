//! The evaluator's fast paths (float32 `+ − × ÷ √`, reciprocal, comparisons, MAX, NEG, WHERE,
//! 32-bit integer ops, sequential reductions) agree bit for bit with the exact scalar
//! semantics (`scalar::alu`) on random and edge inputs: subnormals, NaN payloads of both
//! signs, ±0, ±inf, the extremes, and operands whose exact results are rounding ties.
//! At least 100k samples per op, through `eval::evaluate` (so the path the oracle takes).

use std::collections::BTreeMap;

use uopkit_interp::eval::{self, Elem};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op, ReduceOrder};
use uopkit_interp::scalar;
use uopkit_interp::verify::verify;

const N: usize = 120_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const EDGES: [u32; 24] = [
    0x0000_0000,
    0x8000_0000, // ±0
    0x7f80_0000,
    0xff80_0000, // ±inf
    0x7fc0_0000,
    0xffc0_0000,
    0x7fc0_0001,
    0xffff_ffff, // quiet NaNs, payloads, sign
    0x7f80_0001,
    0xff80_0001,
    0x7fa0_0000, // signalling NaNs
    0x0000_0001,
    0x8000_0001,
    0x007f_ffff,
    0x807f_ffff,
    0x0040_0000, // subnormals
    0x0080_0000,
    0x8080_0000, // smallest normals
    0x7f7f_ffff,
    0xff7f_ffff, // largest finite
    0x3f80_0000,
    0xbf80_0000,
    0x3f80_0001,
    0x3380_0000, // 1, -1, 1+ulp, 2^-24
];

/// One float32 operand: random bits, an edge value, a small-exponent value, or a
/// subnormal.
fn f32_operand(r: &mut Rng) -> u32 {
    match r.below(8) {
        0 => EDGES[r.below(EDGES.len() as u64) as usize],
        1 => (r.next() as u32) & 0x807f_ffff, // subnormal or zero
        2 => ((r.next() as u32) & 0x83ff_ffff) | 0x3c00_0000, // near 1
        _ => r.next() as u32,
    }
}

/// A pair whose exact sum, product or quotient tends to sit on or next to a rounding tie.
fn f32_pair(r: &mut Rng) -> (u32, u32) {
    let a = f32_operand(r);
    match r.below(6) {
        // b a power of two times 2^-24 of a: a + b is a tie or near one.
        0 => {
            let e = ((a >> 23) & 0xff) as i32 - 24 - r.below(3) as i32;
            let b = if (1..255).contains(&e) {
                ((e as u32) << 23) | (r.below(2) as u32 * (r.next() as u32 & 0x7f_ffff))
            } else {
                r.next() as u32
            };
            (a, b | ((r.below(2) as u32) << 31))
        }
        // Short significands: products of 12-bit significands are exact in 24 bits or ties.
        1 => {
            let m = |r: &mut Rng| {
                ((r.next() as u32) & 0x7f_f000) | 0x3f00_0000 | (r.below(4) as u32) << 23
            };
            (m(r), m(r) ^ ((r.below(2) as u32) << 31))
        }
        // Same magnitude, opposite signs (cancellation, x - x).
        2 => (a, a ^ 0x8000_0000),
        3 => (a, a),
        _ => (a, f32_operand(r)),
    }
}

fn add(g: &mut Graph, op: Op, dtype: DType, src: &[NodeId], arg: Arg) -> NodeId {
    g.add(Node {
        op,
        dtype,
        src: src.to_vec(),
        arg,
    })
}

fn buffer(g: &mut Graph, slot: u32, size: usize, dtype: DType) -> NodeId {
    add(
        g,
        Op::BUFFER,
        dtype,
        &[],
        Arg::Buffer {
            slot,
            size,
            device: DeviceSpec::Single(Device::cpu(0)),
        },
    )
}

fn bits(v: &eval::Value) -> Vec<u64> {
    v.data.components()[0]
        .iter()
        .map(|e| match e {
            Elem::Bits(b) => *b,
            Elem::Uninit { .. } => panic!("uninit"),
        })
        .collect()
}

/// Evaluates `op` elementwise on the operand columns (a CONST operand when `cols[k]` has
/// one element) and compares with `scalar::alu` element by element.
fn check(op: Op, dt: DType, out_dt: DType, cols: &[Vec<u64>]) {
    let mut g = Graph::new();
    let mut inputs = BTreeMap::new();
    let n = cols.iter().map(Vec::len).max().unwrap_or(0);
    let srcs: Vec<NodeId> = cols
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let odt = if op == Op::WHERE && k == 0 {
                DType::Bool
            } else {
                dt
            };
            if c.len() == 1 {
                add(&mut g, Op::CONST, odt, &[], Arg::Const(c[0]))
            } else {
                let b = buffer(&mut g, k as u32, c.len(), odt);
                inputs.insert(b, vec![c.iter().map(|&x| Some(x)).collect()]);
                b
            }
        })
        .collect();
    let r = add(&mut g, op, out_dt, &srcs, Arg::None);
    let ver = verify(&g).expect("verifies");
    let ev = eval::evaluate(&g, &ver, &inputs, &[r]).expect("evaluates");
    let got = bits(ev.output(&g, r).expect("defined"));
    assert_eq!(got.len(), n);
    for i in 0..n {
        let ops: Vec<u64> = cols
            .iter()
            .map(|c| c[if c.len() == 1 { 0 } else { i }])
            .collect();
        let want = scalar::alu(op, dt, &ops).expect("defined");
        assert_eq!(
            got[i], want,
            "{op} {dt} on {:x?}: fast path {:#x}, exact {:#x}",
            ops, got[i], want
        );
    }
}

#[test]
fn float32_binary_ops_match_the_exact_path() {
    for (seed, op) in [
        Op::ADD,
        Op::SUB,
        Op::MUL,
        Op::FDIV,
        Op::MAX,
        Op::CMPLT,
        Op::CMPNE,
        Op::CMPEQ,
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = Rng(seed as u64 + 1);
        let (a, b): (Vec<u64>, Vec<u64>) = (0..N)
            .map(|_| {
                let (x, y) = f32_pair(&mut r);
                if r.below(2) == 0 {
                    (u64::from(x), u64::from(y))
                } else {
                    (u64::from(y), u64::from(x))
                }
            })
            .unzip();
        let out = if op.is_comparison() {
            DType::Bool
        } else {
            DType::Float32
        };
        check(op, DType::Float32, out, &[a.clone(), b.clone()]);
        // Broadcast operands (the stride-0 paths).
        for &e in &EDGES[..6] {
            check(
                op,
                DType::Float32,
                out,
                &[a[..2000].to_vec(), vec![u64::from(e)]],
            );
            check(
                op,
                DType::Float32,
                out,
                &[vec![u64::from(e)], b[..2000].to_vec()],
            );
        }
    }
}

#[test]
fn float32_unary_ops_match_the_exact_path() {
    for (seed, op) in [Op::NEG, Op::SQRT, Op::RECIPROCAL].into_iter().enumerate() {
        let mut r = Rng(100 + seed as u64);
        let mut a: Vec<u64> = (0..N).map(|_| u64::from(f32_operand(&mut r))).collect();
        a.extend(EDGES.iter().map(|&e| u64::from(e)));
        // Exact squares and their neighbours (sqrt ties cannot happen, near-ties can).
        a.extend((0..20_000u32).map(|k| {
            let x = f32::from_bits(0x3f80_0000 + k * 97);
            u64::from((x * x).to_bits().wrapping_add(k % 3).wrapping_sub(1))
        }));
        check(op, DType::Float32, DType::Float32, &[a]);
    }
}

#[test]
fn int32_ops_and_where_match_the_exact_path() {
    let ops = [
        Op::ADD,
        Op::SUB,
        Op::MUL,
        Op::AND,
        Op::OR,
        Op::XOR,
        Op::CMPNE,
        Op::CMPEQ,
        Op::CMPLT,
        Op::MAX,
    ];
    for dt in [DType::Int32, DType::UInt32] {
        for (seed, op) in ops.into_iter().enumerate() {
            let mut r = Rng(200 + seed as u64);
            let edge = [0u32, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0x8000_0001];
            let v = |r: &mut Rng| {
                u64::from(if r.below(4) == 0 {
                    edge[r.below(6) as usize]
                } else {
                    r.next() as u32
                })
            };
            let a: Vec<u64> = (0..N).map(|_| v(&mut r)).collect();
            let b: Vec<u64> = (0..N).map(|_| v(&mut r)).collect();
            let out = if op.is_comparison() { DType::Bool } else { dt };
            check(op, dt, out, &[a, b]);
        }
    }
    let mut r = Rng(300);
    let c: Vec<u64> = (0..N).map(|_| r.below(2)).collect();
    let a: Vec<u64> = (0..N).map(|_| u64::from(f32_operand(&mut r))).collect();
    let b: Vec<u64> = (0..N).map(|_| u64::from(f32_operand(&mut r))).collect();
    check(
        Op::WHERE,
        DType::Float32,
        DType::Float32,
        &[c.clone(), a.clone(), b],
    );
    check(
        Op::WHERE,
        DType::Float32,
        DType::Float32,
        &[c, a, vec![0x7fc0_0001]],
    );
}

#[test]
fn float32_sequential_reductions_match_the_exact_fold() {
    for (seed, op) in [Op::ADD, Op::MUL, Op::MAX].into_iter().enumerate() {
        for (red, out) in [(N, 1), (300, 400)] {
            let mut r = Rng(400 + seed as u64);
            let xs: Vec<u64> = (0..red * out)
                .map(|_| {
                    let x = f32_operand(&mut r);
                    // Keep products away from flushing everything to 0/inf: exponents near 1.
                    if op == Op::MUL && r.below(8) != 0 {
                        u64::from((x & 0x807f_ffff) | 0x3f80_0000)
                    } else {
                        u64::from(x)
                    }
                })
                .collect();
            let mut g = Graph::new();
            let b = buffer(&mut g, 0, red * out, DType::Float32);
            let v = add(
                &mut g,
                Op::RESHAPE,
                DType::Float32,
                &[b],
                Arg::Shape(vec![red, out]),
            );
            let s = add(
                &mut g,
                Op::REDUCE,
                DType::Float32,
                &[v],
                Arg::Reduce {
                    op,
                    axes: 1,
                    order: ReduceOrder::Sequential,
                },
            );
            let ver = verify(&g).expect("verifies");
            let inputs = BTreeMap::from([(b, vec![xs.iter().map(|&x| Some(x)).collect()])]);
            let ev = eval::evaluate(&g, &ver, &inputs, &[s]).expect("evaluates");
            let got = bits(ev.output(&g, s).expect("defined"));
            for o in 0..out {
                let mut acc = eval::reduce_identity(op, DType::Float32);
                for k in 0..red {
                    acc =
                        scalar::alu(op, DType::Float32, &[acc, xs[k * out + o]]).expect("defined");
                }
                assert_eq!(got[o], acc, "{op} output {o}");
            }
        }
    }
}
