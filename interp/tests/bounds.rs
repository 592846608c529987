//! Oracle-derived bounds: every legal deviation lands inside the bound (soundness, checked by
//! computing many legal results independently: native f32 arithmetic in other orders, the
//! oracle's scalar ops on perturbed inputs), strict tolerances give exact bounds, and declared
//! reduction orders replay bit for bit.

use std::collections::BTreeMap;

use uopkit_interp::bounds::{self, ulp, Bound, Iv, ReduceOrder, Tolerances, Why};
use uopkit_interp::eval::{self, BufferInit, Data, Elem, Value};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::{self, round};
use uopkit_interp::verify;

/// SplitMix64, as the case format's `prng` inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float32 in ±[2^-e, 2^e) with a random mantissa.
    fn f32(&mut self, e: i32) -> f32 {
        let r = self.next();
        let mant = 1.0 + (r >> 40) as f64 / (1u64 << 24) as f64;
        let exp = ((r >> 8) % (2 * e as u64 + 1)) as i32 - e;
        let v = mant * 2f64.powi(exp);
        (if r & 1 == 1 { -v } else { v }) as f32
    }
}

struct B {
    g: Graph,
    inputs: BTreeMap<NodeId, BufferInit>,
    slot: u32,
}

impl B {
    fn new() -> B {
        B {
            g: Graph::new(),
            inputs: BTreeMap::new(),
            slot: 0,
        }
    }

    fn node(&mut self, op: Op, dtype: DType, src: Vec<NodeId>, arg: Arg) -> NodeId {
        self.g.add(Node {
            op,
            dtype,
            src,
            arg,
        })
    }

    fn buffer(&mut self, dt: DType, bits: Vec<u64>) -> NodeId {
        self.slot += 1;
        let arg = Arg::Buffer {
            slot: self.slot,
            size: bits.len(),
            device: DeviceSpec::Single(Device::CPU),
        };
        let id = self.node(Op::BUFFER, dt, vec![], arg);
        self.inputs
            .insert(id, vec![bits.into_iter().map(Some).collect()]);
        id
    }

    fn multi_buffer(&mut self, dt: DType, comps: Vec<Vec<u64>>) -> NodeId {
        self.slot += 1;
        let devs: Vec<Device> = (0..comps.len() as u32).map(Device::cpu).collect();
        let arg = Arg::Buffer {
            slot: self.slot,
            size: comps[0].len(),
            device: DeviceSpec::Multi(devs),
        };
        let id = self.node(Op::BUFFER, dt, vec![], arg);
        self.inputs.insert(
            id,
            comps
                .into_iter()
                .map(|c| c.into_iter().map(Some).collect())
                .collect(),
        );
        id
    }

    fn reshape(&mut self, x: NodeId, dt: DType, shape: Vec<usize>) -> NodeId {
        self.node(Op::RESHAPE, dt, vec![x], Arg::Shape(shape))
    }

    fn reduce(&mut self, x: NodeId, dt: DType, op: Op, axes: usize) -> NodeId {
        self.node(
            Op::REDUCE,
            dt,
            vec![x],
            Arg::Reduce {
                op,
                axes,
                order: Default::default(),
            },
        )
    }

    fn alu(&mut self, op: Op, dt: DType, src: Vec<NodeId>) -> NodeId {
        self.node(op, dt, src, Arg::None)
    }

    fn konst(&mut self, dt: DType, x: f64) -> NodeId {
        self.node(Op::CONST, dt, vec![], Arg::Const(round::from_f64(dt, x)))
    }

    /// Evaluates `roots` and computes their bounds under `tol`.
    fn run(&self, roots: &[NodeId], tol: &Tolerances) -> (eval::Evaluation, bounds::Bounds) {
        let ver = verify::verify(&self.g).expect("verifies");
        let ev = eval::evaluate(&self.g, &ver, &self.inputs, roots).expect("evaluates");
        let b = bounds::analyze(&self.g, &ver, &ev, roots, tol).expect("bounds");
        (ev, b)
    }
}

fn bits_of(v: &Value) -> Vec<Vec<u64>> {
    v.data
        .components()
        .iter()
        .map(|c| {
            c.iter()
                .map(|e| match e {
                    Elem::Bits(b) => *b,
                    Elem::Uninit { .. } => panic!("uninit"),
                })
                .collect()
        })
        .collect()
}

fn reassoc() -> Tolerances {
    Tolerances {
        reassociate_reductions: true,
        reassociate_allreduce: true,
        ..Tolerances::strict()
    }
}

/// Whether the float `bits` of `dt` is allowed by `b` (given the oracle's bits).
fn inside(dt: DType, b: &Bound, oracle: u64, bits: u64) -> bool {
    match b {
        Bound::Exact | Bound::Unbounded(_) => oracle == bits,
        Bound::Range(iv) => {
            let v = round::to_f64(dt, bits);
            !v.is_nan() && iv.contains(v)
        }
    }
}

fn range(b: &Bound) -> Iv {
    match b {
        Bound::Range(iv) => *iv,
        other => panic!("expected a range, got {other:?}"),
    }
}

// ---- declared orders ----

fn f32_value(shape: Vec<usize>, xs: &[f32]) -> Value {
    bounds::order::single(DType::Float32, shape, xs.iter().map(|x| x.to_bits() as u64))
}

#[test]
fn sequential_order_replays_the_oracle() {
    let mut rng = Rng(7);
    for (dt, op) in [
        (DType::Float32, Op::ADD),
        (DType::Float32, Op::MUL),
        (DType::Float16, Op::ADD),
        (DType::Float32, Op::MAX),
    ] {
        let xs: Vec<u64> = (0..96)
            .map(|_| round::from_f64(dt, rng.f32(3) as f64))
            .collect();
        let mut b = B::new();
        let buf = b.buffer(dt, xs.clone());
        let r = b.reshape(buf, dt, vec![32, 3]);
        let red = b.reduce(r, dt, op, 1);
        let (ev, _) = b.run(&[red], &Tolerances::strict());
        let x = Value {
            dtype: dt,
            shape: vec![32, 3],
            data: Data::Single(xs.iter().map(|&v| Elem::Bits(v)).collect()),
        };
        let replay = bounds::reduce_with_order(op, 1, &x, &ReduceOrder::Sequential).unwrap();
        assert_eq!(&replay, ev.value(red).unwrap(), "{dt} {op}");
    }
}

#[test]
fn declared_orders_match_native_float32() {
    let mut rng = Rng(11);
    let xs: Vec<f32> = (0..1000).map(|_| rng.f32(10)).collect();
    let x = f32_value(vec![1000], &xs);
    let fold = |s: &[f32]| s.iter().fold(0.0f32, |a, &b| a + b);
    let bits = |v: Value| bits_of(&v)[0][0] as u32;
    let run = |o: ReduceOrder| bits(bounds::reduce_with_order(Op::ADD, 1, &x, &o).unwrap());

    assert_eq!(run(ReduceOrder::Sequential), fold(&xs).to_bits());
    for k in [2usize, 3, 4, 7, 8, 16] {
        let mut accs = vec![0.0f32; k];
        for (r, v) in xs.iter().enumerate() {
            accs[r % k] += v;
        }
        let want = accs[1..].iter().fold(accs[0], |a, &b| a + b);
        assert_eq!(run(ReduceOrder::Split(k)), want.to_bits(), "split {k}");

        let c = xs.len().div_ceil(k);
        let parts: Vec<f32> = (0..k)
            .map(|j| fold(&xs[(j * c).min(1000)..((j + 1) * c).min(1000)]))
            .collect();
        let want = parts[1..].iter().fold(parts[0], |a, &b| a + b);
        assert_eq!(run(ReduceOrder::Chunks(k)), want.to_bits(), "chunks {k}");
    }
    fn tree(s: &[f32], leaf: usize) -> f32 {
        if s.len() <= leaf {
            return s.iter().fold(0.0f32, |a, &b| a + b);
        }
        let m = s.len() / 2;
        tree(&s[..m], leaf) + tree(&s[m..], leaf)
    }
    for leaf in [1usize, 2, 8, 100] {
        assert_eq!(
            run(ReduceOrder::Tree(leaf)),
            tree(&xs, leaf).to_bits(),
            "tree {leaf}"
        );
    }
    // chunks_of_split(c, k): c chunks of 1000/c, each a split(k) fold of its own elements
    // (accumulator = position within the chunk mod k), the chunk results summed from 0.
    for (c, k) in [(2usize, 4usize), (8, 3), (10, 16), (1000, 1), (1, 7)] {
        let s = 1000 / c;
        let mut want = 0.0f32;
        for j in 0..c {
            let mut accs = vec![0.0f32; k];
            for (q, v) in xs[j * s..(j + 1) * s].iter().enumerate() {
                accs[q % k] += v;
            }
            want += accs[1..].iter().fold(accs[0], |a, &b| a + b);
        }
        assert_eq!(
            run(ReduceOrder::ChunksOfSplit(c, k)),
            want.to_bits(),
            "chunks_of_split({c}, {k})"
        );
    }
    // The orders really differ from the canonical one on this data (the replay is not trivial).
    assert_ne!(run(ReduceOrder::Split(4)), run(ReduceOrder::Sequential));
    assert_ne!(
        run(ReduceOrder::ChunksOfSplit(2, 4)),
        run(ReduceOrder::Split(4))
    );
    assert_ne!(
        run(ReduceOrder::ChunksOfSplit(2, 4)),
        run(ReduceOrder::Chunks(2))
    );
}

#[test]
fn reduce_order_json_spelling() {
    let orders: Vec<ReduceOrder> =
        serde_json::from_str(
            r#"["sequential", {"split": 4}, {"chunks": 2}, {"tree": 8}, {"chunks_of_split": [16, 32]}]"#,
        )
        .unwrap();
    assert_eq!(
        orders,
        vec![
            ReduceOrder::Sequential,
            ReduceOrder::Split(4),
            ReduceOrder::Chunks(2),
            ReduceOrder::Tree(8),
            ReduceOrder::ChunksOfSplit(16, 32)
        ]
    );
}

// ---- strict tolerances ----

#[test]
fn strict_tolerances_give_exact_bounds_everywhere() {
    let dt = DType::Float32;
    let mut rng = Rng(3);
    let xs: Vec<u64> = (0..64).map(|_| rng.f32(4).to_bits() as u64).collect();
    let mut b = B::new();
    let buf = b.buffer(dt, xs);
    let r = b.reshape(buf, dt, vec![16, 4]);
    let s = b.reduce(r, dt, Op::ADD, 1);
    let e = b.alu(Op::EXP2, dt, vec![s]);
    let k = b.konst(dt, 0.5);
    let m = b.alu(Op::MUL, dt, vec![e, k]);
    let c = b.node(Op::CAST, DType::Float16, vec![m], Arg::None);
    let (_, bs) = b.run(&[c, s], &Tolerances::strict());
    for id in [s, c] {
        let nb = bs.get(id).unwrap();
        assert!(nb.all_exact(), "{id}: {nb:?}");
        assert!(nb.notes.is_empty());
    }
}

// ---- soundness of the reassociation bound ----

/// Every order of a float32 sum (native f32 arithmetic, independent of the oracle) lands inside
/// the bound; the bound is not absurdly wide.
#[test]
fn reassociated_float32_sums_stay_inside_the_bound() {
    for (seed, n, e) in [
        (1u64, 10_000usize, 20i32),
        (2, 3000, 2),
        (3, 17, 30),
        (4, 2, 5),
        (5, 1, 5),
        (6, 500, 60),
    ] {
        let mut rng = Rng(seed);
        let xs: Vec<f32> = (0..n).map(|_| rng.f32(e)).collect();
        let mut b = B::new();
        let buf = b.buffer(
            DType::Float32,
            xs.iter().map(|x| x.to_bits() as u64).collect(),
        );
        let red = b.reduce(buf, DType::Float32, Op::ADD, 1);
        let (ev, bs) = b.run(&[red], &reassoc());
        let oracle = bits_of(ev.value(red).unwrap())[0][0];
        let bound = bs.get(red).unwrap().comps[0][0];
        assert!(bs
            .get(red)
            .unwrap()
            .notes
            .iter()
            .any(|s| s.starts_with("reassociate_reductions")));
        let mut results: Vec<(String, f32)> = vec![];
        results.push(("forward".into(), xs.iter().fold(0.0f32, |a, &b| a + b)));
        results.push((
            "reverse".into(),
            xs.iter().rev().fold(0.0f32, |a, &b| a + b),
        ));
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
        results.push((
            "ascending magnitude".into(),
            sorted.iter().fold(0.0f32, |a, &b| a + b),
        ));
        results.push((
            "descending magnitude".into(),
            sorted.iter().rev().fold(0.0f32, |a, &b| a + b),
        ));
        let x = f32_value(vec![n], &xs);
        for o in [
            ReduceOrder::Split(2),
            ReduceOrder::Split(8),
            ReduceOrder::Chunks(3),
            ReduceOrder::Tree(1),
            ReduceOrder::Tree(16),
        ] {
            let v = bounds::reduce_with_order(Op::ADD, 1, &x, &o).unwrap();
            results.push((format!("{o:?}"), f32::from_bits(bits_of(&v)[0][0] as u32)));
        }
        for p in 0..5 {
            let mut perm = xs.clone();
            for i in (1..perm.len()).rev() {
                perm.swap(i, (rng.next() % (i as u64 + 1)) as usize);
            }
            results.push((
                format!("permutation {p}"),
                perm.iter().fold(0.0f32, |a, &b| a + b),
            ));
        }
        for (name, r) in &results {
            assert!(
                inside(DType::Float32, &bound, oracle, r.to_bits() as u64),
                "seed {seed} n {n}: {name} gives {r:e}, outside {bound:?}"
            );
        }
        if n >= 2 {
            // γ(n−1)·Σ|x|: the bound is within a small factor of the classical one.
            let iv = range(&bound);
            let m: f64 = xs.iter().map(|x| x.abs() as f64).sum();
            let g = (n - 1) as f64 * 2f64.powi(-24);
            assert!(
                iv.hi - iv.lo <= 2.0 * g * m * 1.01 + 1e-30,
                "seed {seed}: width {} vs {}",
                iv.hi - iv.lo,
                2.0 * g * m
            );
        }
    }
}

/// float16 sums replayed by the oracle's own scalar ops in several orders.
#[test]
fn reassociated_float16_sums_stay_inside_the_bound() {
    let dt = DType::Float16;
    let mut rng = Rng(99);
    let xs: Vec<u64> = (0..300)
        .map(|_| round::from_f64(dt, rng.f32(6) as f64))
        .collect();
    let mut b = B::new();
    let buf = b.buffer(dt, xs.clone());
    let r = b.reshape(buf, dt, vec![100, 3]);
    let red = b.reduce(r, dt, Op::ADD, 1);
    let (ev, bs) = b.run(&[red], &reassoc());
    let oracle = bits_of(ev.value(red).unwrap())[0].clone();
    let x = Value {
        dtype: dt,
        shape: vec![100, 3],
        data: Data::Single(xs.iter().map(|&v| Elem::Bits(v)).collect()),
    };
    let flipped = Value {
        dtype: dt,
        shape: vec![100, 3],
        data: Data::Single(
            (0..300)
                .map(|i| Elem::Bits(xs[(99 - i / 3) * 3 + i % 3]))
                .collect(),
        ),
    };
    for o in [
        ReduceOrder::Split(4),
        ReduceOrder::Chunks(5),
        ReduceOrder::Tree(1),
        ReduceOrder::Sequential,
    ] {
        for v in [&x, &flipped] {
            let got = bits_of(&bounds::reduce_with_order(Op::ADD, 1, v, &o).unwrap())[0].clone();
            for j in 0..3 {
                let bd = bs.get(red).unwrap().comps[0][j];
                assert!(
                    inside(dt, &bd, oracle[j], got[j]),
                    "{o:?} column {j}: {:#x} outside {bd:?}",
                    got[j]
                );
            }
        }
    }
}

#[test]
fn reassociated_products_and_max() {
    let dt = DType::Float32;
    let mut rng = Rng(5);
    let xs: Vec<f32> = (0..200)
        .map(|_| {
            (0.5 + (rng.next() % 1000) as f64 / 1000.0) as f32
                * if rng.next().is_multiple_of(7) {
                    -1.0
                } else {
                    1.0
                }
        })
        .collect();
    let mut b = B::new();
    let buf = b.buffer(dt, xs.iter().map(|x| x.to_bits() as u64).collect());
    let p = b.reduce(buf, dt, Op::MUL, 1);
    let m = b.reduce(buf, dt, Op::MAX, 1);
    let (ev, bs) = b.run(&[p, m], &reassoc());
    let po = bits_of(ev.value(p).unwrap())[0][0];
    let pb = bs.get(p).unwrap().comps[0][0];
    for r in [
        xs.iter().fold(1.0f32, |a, &b| a * b),
        xs.iter().rev().fold(1.0f32, |a, &b| a * b),
    ] {
        assert!(
            inside(dt, &pb, po, r.to_bits() as u64),
            "{r:e} outside {pb:?}"
        );
    }
    // MAX of nonzero numbers: every order gives the same bits.
    assert_eq!(bs.get(m).unwrap().comps[0][0], Bound::Exact);
}

#[test]
fn possible_overflow_or_nan_is_unbounded() {
    let dt = DType::Float32;
    let big = f32::MAX.to_bits() as u64;
    let mut b = B::new();
    let buf = b.buffer(dt, vec![big, big, (-f32::MAX).to_bits() as u64]);
    let s = b.reduce(buf, dt, Op::ADD, 1);
    let buf2 = b.buffer(dt, vec![1f32.to_bits() as u64, round::canonical_nan(dt)]);
    let s2 = b.reduce(buf2, dt, Op::ADD, 1);
    let buf3 = b.buffer(
        dt,
        vec![1e-30f32.to_bits() as u64, 1e-20f32.to_bits() as u64],
    );
    let s3 = b.reduce(buf3, dt, Op::MUL, 1);
    let (_, bs) = b.run(&[s, s2, s3], &reassoc());
    assert_eq!(
        bs.get(s).unwrap().comps[0][0],
        Bound::Unbounded(Why::Overflow)
    );
    assert_eq!(bs.get(s2).unwrap().comps[0][0], Bound::Unbounded(Why::Nan));
    assert_eq!(
        bs.get(s3).unwrap().comps[0][0],
        Bound::Unbounded(Why::Underflow)
    );
}

// ---- propagation through elementwise ops ----

/// s = Σx (bounded), then y = NEG(CAST<f16>((s + c)·d)) and z = s·s − s: perturbing s to every
/// float32 value inside its bound and recomputing with the oracle's scalar ops stays inside y's
/// and z's bounds.
#[test]
fn bounds_propagate_through_add_mul_cast_neg() {
    let dt = DType::Float32;
    let mut rng = Rng(21);
    let xs: Vec<f32> = (0..4000).map(|_| rng.f32(3)).collect();
    let mut b = B::new();
    let buf = b.buffer(dt, xs.iter().map(|x| x.to_bits() as u64).collect());
    let s = b.reduce(buf, dt, Op::ADD, 1);
    let c = b.konst(dt, 3.25);
    let d = b.konst(dt, -0.3);
    let a = b.alu(Op::ADD, dt, vec![s, c]);
    let m = b.alu(Op::MUL, dt, vec![a, d]);
    let h = b.node(Op::CAST, DType::Float16, vec![m], Arg::None);
    let y = b.alu(Op::NEG, DType::Float16, vec![h]);
    let sq = b.alu(Op::MUL, dt, vec![s, s]);
    let z = b.alu(Op::SUB, dt, vec![sq, s]);
    let lt = b.alu(Op::CMPLT, DType::Bool, vec![s, c]);
    let (ev, bs) = b.run(&[y, z, lt], &reassoc());
    let sb = range(&bs.get(s).unwrap().comps[0][0]);
    let yb = bs.get(y).unwrap().comps[0][0];
    let zb = bs.get(z).unwrap().comps[0][0];
    let (yo, zo) = (
        bits_of(ev.value(y).unwrap())[0][0],
        bits_of(ev.value(z).unwrap())[0][0],
    );
    let f = |op: Op, dt: DType, xs: &[u64]| scalar::alu(op, dt, xs).unwrap();
    let cb = round::from_f64(dt, 3.25);
    let db = round::from_f64(dt, -0.3);
    // every float32 in the bound (they are few: the bound is a handful of ulps wide)
    let mut v = ulp::round_up(dt, sb.lo);
    let mut count = 0;
    while v <= sb.hi {
        let sv = round::from_f64(dt, v);
        let yv = f(
            Op::NEG,
            DType::Float16,
            &[scalar::cast(
                dt,
                DType::Float16,
                f(Op::MUL, dt, &[f(Op::ADD, dt, &[sv, cb]), db]),
            )
            .unwrap()],
        );
        let zv = f(Op::SUB, dt, &[f(Op::MUL, dt, &[sv, sv]), sv]);
        assert!(
            inside(DType::Float16, &yb, yo, yv),
            "s = {v:e}: y {yv:#x} outside {yb:?}"
        );
        assert!(
            inside(dt, &zb, zo, zv),
            "s = {v:e}: z {zv:#x} outside {zb:?}"
        );
        v = round::to_f64(dt, ulp::step(dt, sv, 1));
        count += 1;
    }
    assert!(
        count >= 2,
        "the bound should hold several float32 values, holds {count}"
    );
    // s < 3.25 is decided when the whole bound is on one side
    let lb = bs.get(lt).unwrap().comps[0][0];
    assert!(lb == Bound::Exact || matches!(lb, Bound::Unbounded(Why::Discrete)));
}

#[test]
fn transcendental_budget_is_steps_on_the_line() {
    for dt in [DType::Float32, DType::Float64, DType::Float16] {
        let xs = [0.3f64, -7.25, 10.0, 2000.0, 0.0];
        let mut b = B::new();
        let buf = b.buffer(dt, xs.iter().map(|&x| round::from_f64(dt, x)).collect());
        let e = b.alu(Op::EXP2, dt, vec![buf]);
        let tol = Tolerances {
            ulp: [((Op::EXP2, dt), 2)].into_iter().collect(),
            ..Tolerances::strict()
        };
        let (ev, bs) = b.run(&[e], &tol);
        let o = bits_of(ev.value(e).unwrap())[0].clone();
        let nb = bs.get(e).unwrap();
        assert!(
            nb.notes.contains(&format!("ulp: EXP2 {dt} within 2 ulp")),
            "{:?}",
            nb.notes
        );
        for (i, &ob) in o.iter().enumerate() {
            let iv = range(&nb.comps[0][i]);
            assert_eq!(
                iv.lo,
                round::to_f64(dt, ulp::step(dt, ob, -2)),
                "{dt} element {i}"
            );
            assert_eq!(
                iv.hi,
                round::to_f64(dt, ulp::step(dt, ob, 2)),
                "{dt} element {i}"
            );
        }
        // Other ops and dtypes are untouched by an EXP2 budget.
        let s = b.alu(Op::SQRT, dt, vec![buf]);
        let (_, bs) = b.run(&[s], &tol);
        assert!(bs.get(s).unwrap().comps[0][..4]
            .iter()
            .all(|b| *b == Bound::Exact));
    }
}

#[test]
fn transcendental_of_a_bounded_value() {
    let dt = DType::Float32;
    let mut rng = Rng(8);
    let xs: Vec<f32> = (0..1000).map(|_| rng.f32(0) / 100.0).collect();
    let mut b = B::new();
    let buf = b.buffer(dt, xs.iter().map(|x| x.to_bits() as u64).collect());
    let s = b.reduce(buf, dt, Op::ADD, 1);
    let e = b.alu(Op::EXP2, dt, vec![s]);
    let sn = b.alu(Op::SIN, dt, vec![s]);
    let (ev, bs) = b.run(&[e, sn], &reassoc());
    let sb = range(&bs.get(s).unwrap().comps[0][0]);
    for (node, op) in [(e, Op::EXP2), (sn, Op::SIN)] {
        let nb = bs.get(node).unwrap().comps[0][0];
        let o = bits_of(ev.value(node).unwrap())[0][0];
        for x in [ulp::round_up(dt, sb.lo), ulp::round_down(dt, sb.hi)] {
            let r = scalar::alu(op, dt, &[round::from_f64(dt, x)]).unwrap();
            assert!(inside(dt, &nb, o, r), "{op}({x:e}) = {r:#x} outside {nb:?}");
        }
    }
}

#[test]
fn flushing_subnormals_admits_zero() {
    let dt = DType::Float32;
    let tiny = f32::from_bits(3);
    let mut b = B::new();
    let buf = b.buffer(dt, vec![tiny.to_bits() as u64, 1.0f32.to_bits() as u64]);
    let k = b.konst(dt, 2.0);
    let m = b.alu(Op::MUL, dt, vec![buf, k]);
    let flush = Tolerances {
        flush_subnormals: [dt].into_iter().collect(),
        ..Tolerances::strict()
    };
    let (_, strict) = b.run(&[m], &Tolerances::strict());
    assert!(strict.get(m).unwrap().all_exact());
    let (_, bs) = b.run(&[m], &flush);
    let nb = bs.get(m).unwrap();
    let iv = range(&nb.comps[0][0]);
    assert!(
        iv.contains(0.0) && iv.contains(f32::from_bits(6) as f64),
        "{iv:?}"
    );
    assert_eq!(nb.comps[0][1], Bound::Exact, "normal values are untouched");
    assert!(nb.notes.contains("flush_subnormals: float32"));
}

#[test]
fn contraction_admits_the_fused_result() {
    let dt = DType::Float32;
    // a·b = 1 − 2^-46 exactly; fl(a·b) = 1; fma(a, b, −1) = −2^-46, a·b rounded then −1 = 0.
    let a = 1.0f32 + f32::EPSILON;
    let bb = 1.0f32 - f32::EPSILON;
    let mut b = B::new();
    let buf = b.buffer(dt, vec![a.to_bits() as u64]);
    let buf2 = b.buffer(dt, vec![bb.to_bits() as u64]);
    let m = b.alu(Op::MUL, dt, vec![buf, buf2]);
    let c = b.konst(dt, -1.0);
    let s = b.alu(Op::ADD, dt, vec![m, c]);
    let fused = a.mul_add(bb, -1.0);
    assert_ne!(fused, a * bb - 1.0);
    let (ev, strict) = b.run(&[s], &Tolerances::strict());
    let o = bits_of(ev.value(s).unwrap())[0][0];
    assert!(!inside(
        dt,
        &strict.get(s).unwrap().comps[0][0],
        o,
        fused.to_bits() as u64
    ));
    let tol = Tolerances {
        contract_mul_add: true,
        ..Tolerances::strict()
    };
    let (_, bs) = b.run(&[s], &tol);
    let sb = bs.get(s).unwrap().comps[0][0];
    assert!(inside(dt, &sb, o, fused.to_bits() as u64), "{sb:?}");
    assert!(inside(dt, &sb, o, (a * bb - 1.0).to_bits() as u64));
    assert!(!inside(dt, &sb, o, 1e-10f32.to_bits() as u64));
}

#[test]
fn bounds_survive_storage() {
    let dt = DType::Float32;
    let mut rng = Rng(4);
    let xs: Vec<f32> = (0..500).map(|_| rng.f32(8)).collect();
    let mut b = B::new();
    let buf = b.buffer(dt, xs.iter().map(|x| x.to_bits() as u64).collect());
    let s = b.reduce(buf, dt, Op::ADD, 1);
    let dst = b.buffer(dt, vec![0]);
    let target = b.reshape(dst, dt, vec![]);
    let st = b.node(Op::STORE, DType::Void, vec![target, s], Arg::None);
    let after = b.node(Op::AFTER, dt, vec![dst, st], Arg::None);
    let (_, bs) = b.run(&[after], &reassoc());
    let nb = bs.get(after).unwrap();
    assert_eq!(nb.comps[0][0], bs.get(s).unwrap().comps[0][0]);
    assert!(nb
        .notes
        .iter()
        .any(|n| n.starts_with("reassociate_reductions")));
}

#[test]
fn allreduce_orders_stay_inside_the_bound() {
    let dt = DType::Float32;
    let mut rng = Rng(12);
    let comps: Vec<Vec<f32>> = (0..5)
        .map(|_| (0..8).map(|_| rng.f32(12)).collect())
        .collect();
    let mut b = B::new();
    let buf = b.multi_buffer(
        dt,
        comps
            .iter()
            .map(|c| c.iter().map(|x| x.to_bits() as u64).collect())
            .collect(),
    );
    let devs: Vec<Device> = (0..5).map(Device::cpu).collect();
    let ar = b.node(
        Op::ALLREDUCE,
        dt,
        vec![buf],
        Arg::AllReduce {
            op: Op::ADD,
            devices: devs,
        },
    );
    let (ev, strict) = b.run(&[ar], &Tolerances::strict());
    assert!(strict.get(ar).unwrap().all_exact());
    let (_, bs) = b.run(&[ar], &reassoc());
    let o = bits_of(ev.value(ar).unwrap());
    let nb = bs.get(ar).unwrap();
    assert_eq!(nb.comps.len(), 5);
    for i in 0..8 {
        // a ring allreduce: device d sums starting from component d+1
        for d in 0..5 {
            let r = (1..=5)
                .map(|k| comps[(d + k) % 5][i])
                .fold(None, |a: Option<f32>, b| Some(a.map_or(b, |a| a + b)))
                .unwrap();
            assert!(
                inside(dt, &nb.comps[d][i], o[d][i], r.to_bits() as u64),
                "element {i} device {d}"
            );
        }
    }
}

#[test]
fn integer_reductions_are_exact_under_reassociation() {
    let dt = DType::Int32;
    let mut b = B::new();
    let buf = b.buffer(
        dt,
        (0..100u64)
            .map(|i| (i * 0x9E37_79B9) & 0xffff_ffff)
            .collect(),
    );
    let s = b.reduce(buf, dt, Op::ADD, 1);
    let (_, bs) = b.run(&[s], &reassoc());
    assert!(bs.get(s).unwrap().all_exact());
}

/// The interval transfer functions are sound: for random operand intervals (of dtype values) in
/// every float dtype, the oracle's own scalar result at random points inside lands in the
/// interval the transfer function gives.
#[test]
fn interval_transfer_functions_contain_every_pointwise_result() {
    use bounds::interval;
    let mut rng = Rng(2024);
    let dts = [
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
        DType::Fp8E5M2,
        DType::Fp8E4M3,
    ];
    let mut checked = 0usize;
    for &dt in &dts {
        for _ in 0..300 {
            // an interval around a random value, a few to many ulps wide, sometimes crossing 0
            let pick = |rng: &mut Rng| {
                let c = round::from_f64(dt, rng.f32(6) as f64);
                let w = 1 + (rng.next() % 40) as i128;
                let lo = round::to_f64(dt, ulp::step(dt, c, -w));
                let hi = round::to_f64(dt, ulp::step(dt, c, (rng.next() % 40) as i128));
                Iv {
                    lo: lo.min(hi),
                    hi: hi.max(lo),
                }
            };
            let a = pick(&mut rng);
            let b = pick(&mut rng);
            let c = pick(&mut rng);
            let sample = |rng: &mut Rng, iv: Iv| -> u64 {
                let (l, h) = (round::from_f64(dt, iv.lo), round::from_f64(dt, iv.hi));
                let (kl, kh) = (ulp::ordinal(dt, l).unwrap(), ulp::ordinal(dt, h).unwrap());
                let k = kl + (rng.next() % ((kh - kl + 1) as u64)) as i128;
                ulp::from_ordinal(dt, k)
            };
            type Binary = fn(DType, Iv, Iv) -> Result<Iv, Why>;
            let binaries: [(Op, Binary); 4] = [
                (Op::ADD, interval::add),
                (Op::SUB, interval::sub),
                (Op::MUL, interval::mul),
                (Op::FDIV, interval::div),
            ];
            for (op, f) in binaries {
                let Ok(iv) = f(dt, a, b) else { continue };
                for _ in 0..20 {
                    let (x, y) = (sample(&mut rng, a), sample(&mut rng, b));
                    let r = round::to_f64(dt, scalar::alu(op, dt, &[x, y]).unwrap());
                    assert!(
                        iv.contains(r),
                        "{dt} {op}: {:e} {op} {:e} = {r:e} outside {iv:?} (a {a:?}, b {b:?})",
                        round::to_f64(dt, x),
                        round::to_f64(dt, y)
                    );
                    checked += 1;
                }
            }
            if let Ok(iv) = interval::mulacc(dt, a, b, c) {
                for _ in 0..20 {
                    let (x, y, z) = (
                        sample(&mut rng, a),
                        sample(&mut rng, b),
                        sample(&mut rng, c),
                    );
                    let r = round::to_f64(dt, scalar::alu(Op::MULACC, dt, &[x, y, z]).unwrap());
                    assert!(iv.contains(r), "{dt} MULACC: {r:e} outside {iv:?}");
                    checked += 1;
                }
            }
            type Unary = fn(DType, Iv) -> Result<Iv, Why>;
            let unaries: [(Op, Unary); 5] = [
                (Op::SQRT, interval::sqrt),
                (Op::EXP2, interval::exp2),
                (Op::LOG2, interval::log2),
                (Op::SIN, interval::sin),
                (Op::TRUNC, interval::trunc),
            ];
            for (op, f) in unaries {
                let Ok(iv) = f(dt, a) else { continue };
                for _ in 0..20 {
                    let x = sample(&mut rng, a);
                    let r = round::to_f64(dt, scalar::alu(op, dt, &[x]).unwrap());
                    assert!(
                        iv.contains(r),
                        "{dt} {op}({:e}) = {r:e} outside {iv:?} (a {a:?})",
                        round::to_f64(dt, x)
                    );
                    checked += 1;
                }
            }
            if let Ok(iv) = interval::div(dt, Iv { lo: 1.0, hi: 1.0 }, a) {
                let x = sample(&mut rng, a);
                let r = round::to_f64(dt, scalar::alu(Op::RECIPROCAL, dt, &[x]).unwrap());
                assert!(iv.contains(r), "{dt} RECIPROCAL: {r:e} outside {iv:?}");
            }
            for to in dts {
                if let Ok(iv) = interval::cast(to, a) {
                    let x = sample(&mut rng, a);
                    let r = round::to_f64(to, scalar::cast(dt, to, x).unwrap());
                    assert!(iv.contains(r), "{dt}→{to}: {r:e} outside {iv:?}");
                }
            }
        }
    }
    assert!(checked > 50_000, "only {checked} points checked");
}
