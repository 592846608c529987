//! The evaluator's compact values (splats, repeats from EXPAND, shared columns, poison lists)
//! give the same elements as moving plain element lists: random chains of movement ops, casts
//! and ALU ops on partly unwritten buffers, every node's value compared with a reference
//! computed with `movement::apply` on `Elem`s.

use std::collections::BTreeMap;

use uopkit_interp::eval::{self, movement, Elem};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op};
use uopkit_interp::scalar;
use uopkit_interp::verify::{movement_shape, verify};

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
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

fn random_move(r: &mut Rng, shape: &[usize]) -> (Op, Arg) {
    let rank = shape.len();
    match r.below(6) {
        0 => (Op::EXPAND, Arg::Shape(vec![r.below(3) + 1])),
        1 if rank > 0 => {
            let mut p: Vec<usize> = (0..rank).collect();
            for i in (1..rank).rev() {
                p.swap(i, r.below(i + 1));
            }
            (Op::PERMUTE, Arg::Perm(p))
        }
        2 if rank > 0 => {
            let offsets: Vec<usize> = shape.iter().map(|&s| r.below(s + 1).min(s)).collect();
            let sizes = shape
                .iter()
                .zip(&offsets)
                .map(|(&s, &o)| r.below(s - o + 1).max(usize::from(s > o)))
                .collect();
            (Op::SHRINK, Arg::Window { offsets, sizes })
        }
        3 if rank > 0 => (
            Op::FLIP,
            Arg::Flip((0..rank).map(|_| r.below(2) == 1).collect()),
        ),
        4 if rank > 0 => {
            let offsets: Vec<usize> = shape.iter().map(|_| r.below(2)).collect();
            let sizes = shape
                .iter()
                .zip(&offsets)
                .map(|(&s, &o)| s + o + r.below(2))
                .collect();
            (Op::PAD, Arg::Window { offsets, sizes })
        }
        _ => {
            let n: usize = shape.iter().product();
            // Split the flat size into two factors when possible.
            let d = (1..=n)
                .filter(|d| n.is_multiple_of(*d))
                .nth(r.below(3))
                .unwrap_or(1);
            (
                Op::RESHAPE,
                Arg::Shape(if n == 0 { vec![0] } else { vec![d, n / d] }),
            )
        }
    }
}

#[test]
fn compact_values_equal_moved_element_lists() {
    let mut r = Rng(11);
    for case in 0..300 {
        let mut g = Graph::new();
        let size = r.below(12) + 1;
        let dt = [DType::Float32, DType::Int32, DType::Float64, DType::Int8][case % 4];
        let b = add(
            &mut g,
            Op::BUFFER,
            dt,
            &[],
            Arg::Buffer {
                slot: 0,
                size,
                device: DeviceSpec::Single(Device::cpu(0)),
            },
        );
        let init: Vec<Option<u64>> = (0..size)
            .map(|i| (r.below(4) != 0).then_some((i as u64 * 3 + 1) & 0x7f))
            .collect();
        let mut reference: BTreeMap<NodeId, (Vec<usize>, Vec<Elem>)> = BTreeMap::new();
        let elems: Vec<Elem> = init
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.map_or(
                    Elem::Uninit {
                        buffer: b,
                        index: i,
                    },
                    Elem::Bits,
                )
            })
            .collect();
        reference.insert(b, (vec![size], elems));
        let mut cur = b;
        let mut nodes = vec![b];
        for _ in 0..6 {
            let (shape, data) = reference[&cur].clone();
            if r.below(5) == 0 {
                // An ALU op with a constant: NEG or ADD (poison in, poison out).
                let one = add(&mut g, Op::CONST, dt, &[], Arg::Const(1));
                let n = add(&mut g, Op::ADD, dt, &[cur, one], Arg::None);
                let out: Vec<Elem> = data
                    .iter()
                    .map(|e| match e {
                        Elem::Bits(x) => {
                            Elem::Bits(scalar::alu(Op::ADD, dt, &[*x, 1]).expect("defined"))
                        }
                        p => *p,
                    })
                    .collect();
                reference.insert(n, (shape, out));
                cur = n;
                nodes.push(n);
                continue;
            }
            let (op, arg) = random_move(&mut r, &shape);
            let Ok(out_shape) = movement_shape(op, &arg, &shape) else {
                continue;
            };
            if out_shape.iter().product::<usize>() > 4096 {
                continue;
            }
            let m = add(&mut g, op, dt, &[cur], arg.clone());
            let moved = movement::apply(op, &arg, &shape, &data, &Elem::Bits(0));
            reference.insert(m, (out_shape, moved));
            cur = m;
            nodes.push(m);
        }
        let ver = match verify(&g) {
            Ok(v) => v,
            Err(e) => panic!("case {case}: {e}"),
        };
        let inputs = BTreeMap::from([(b, vec![init.clone()])]);
        let ev = eval::evaluate(&g, &ver, &inputs, &[cur]).expect("evaluates");
        for &n in &nodes {
            let v = ev.value(n).expect("has a value");
            let (shape, want) = &reference[&n];
            assert_eq!(&v.shape, shape, "case {case} node {n}");
            assert_eq!(
                &v.data.components()[0],
                want,
                "case {case} node {n} ({})",
                g.node(n).op
            );
            let c = ev.compact(n).expect("has a value");
            assert_eq!(&c.comps[0].to_elems(), want, "case {case} node {n}");
        }
    }
}
