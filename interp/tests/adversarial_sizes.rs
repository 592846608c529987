//! Every shape-taking op fed adversarial dimensions (0, 1, 2^28, 2^32, 2^40, 2^63, u64::MAX,
//! products that wrap): the verifier either rejects the graph with a `Verify` error, or
//! accepts it and the evaluator computes a value of the verified shape. Never a panic (the
//! dev profile checks integer overflow, so a wrapping product panics here).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use uopkit_interp::eval::{self, BufferInit, Data};
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op, ReduceOrder};
use uopkit_interp::verify::{self, check_shape, checked_numel, MAX_DIMENSION, MAX_ELEMENTS};
use uopkit_interp::Error;

const P32: usize = 1 << 32;
const P40: usize = 1 << 40;
const P63: usize = 1 << 63;

/// Adversarial dimensions, offsets and sizes.
const DIMS: &[usize] = &[
    0,
    1,
    2,
    3,
    MAX_ELEMENTS,
    MAX_ELEMENTS + 1,
    P32,
    P40,
    P40 + 1,
    P63,
    usize::MAX,
];

/// A smaller set for the arguments that combine two adversarial values.
const FEW: &[usize] = &[0, 1, 3, MAX_ELEMENTS + 1, P40, usize::MAX];

/// How cheap an accepted graph must be for the test to evaluate it (all values together).
const EVAL_ELEMENTS: usize = 1 << 16;

fn add(g: &mut Graph, op: Op, dtype: DType, src: &[NodeId], arg: Arg) -> NodeId {
    g.add(Node {
        op,
        dtype,
        src: src.to_vec(),
        arg,
    })
}

fn cpu(i: u32) -> Device {
    Device::cpu(i)
}

/// A graph with one buffer of `size` elements, reshaped to `shape` (when given).
fn base(size: usize, shape: Option<&[usize]>, multi: bool) -> (Graph, NodeId) {
    let mut g = Graph::new();
    let device = if multi {
        DeviceSpec::Multi(vec![cpu(0), cpu(1)])
    } else {
        DeviceSpec::Single(cpu(0))
    };
    let b = add(
        &mut g,
        Op::BUFFER,
        DType::Int32,
        &[],
        Arg::Buffer {
            slot: 0,
            size,
            device,
        },
    );
    let top = match shape {
        Some(s) => add(
            &mut g,
            Op::RESHAPE,
            DType::Int32,
            &[b],
            Arg::Shape(s.to_vec()),
        ),
        None => b,
    };
    (g, top)
}

#[derive(Default, Debug)]
struct Tally {
    rejected: usize,
    evaluated: usize,
    accepted_not_evaluated: usize,
}

/// Verifies `g` (and evaluates it with zero-filled buffers when it is cheap); panics with
/// `what` if anything panics or an accepted graph evaluates to a value of the wrong size.
fn judge(g: &Graph, root: NodeId, what: &str, tally: &mut Tally) {
    let verified = match catch_unwind(AssertUnwindSafe(|| verify::verify(g))) {
        Err(_) => panic!("verifier panicked on {what}"),
        Ok(Err(Error::Verify { .. })) => {
            tally.rejected += 1;
            return;
        }
        Ok(Err(e)) => panic!("verifier returned a non-Verify error on {what}: {e}"),
        Ok(Ok(v)) => v,
    };
    // Every accepted value is within the limits, and its element count is exact.
    let mut total = 0usize;
    for id in g.ids() {
        let info = verified.info(id);
        let n = check_shape(&info.shape)
            .unwrap_or_else(|r| panic!("accepted {what} but node {id} is out of bounds: {r}"));
        assert_eq!(Some(n), checked_numel(&info.shape));
        assert_eq!(n, info.numel());
        let copies = info.device.as_ref().map_or(1, |d| d.devices().len());
        total += n * copies;
    }
    if total > EVAL_ELEMENTS {
        tally.accepted_not_evaluated += 1;
        return;
    }
    let mut inputs: BTreeMap<NodeId, BufferInit> = BTreeMap::new();
    for id in g.ids() {
        let n = g.node(id);
        if let Arg::Buffer { size, device, .. } = &n.arg {
            inputs.insert(id, vec![vec![Some(0); *size]; device.devices().len()]);
        }
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        eval::evaluate(g, &verified, &inputs, &[root])
    }));
    let evaluation = match result {
        Err(_) => panic!("evaluator panicked on accepted {what}"),
        Ok(Err(e)) => panic!("evaluator failed on accepted {what}: {e}"),
        Ok(Ok(ev)) => ev,
    };
    if verified.info(root).dtype != DType::Void {
        let v = evaluation
            .output(g, root)
            .unwrap_or_else(|e| panic!("no output for {what}: {e}"));
        let info = verified.info(root);
        assert_eq!(v.shape, info.shape, "{what}");
        let n = info.numel();
        match &v.data {
            Data::Single(d) => assert_eq!(d.len(), n, "{what}"),
            Data::Multi(cs) => assert!(cs.iter().all(|c| c.len() == n), "{what}"),
        }
    }
    tally.evaluated += 1;
}

/// The shapes the bases are reshaped to: every pair of adversarial dimensions, triples
/// with a 0 (from a smaller set), and shapes of 6 elements (others are rejected by RESHAPE already), plus a few plain ones.
fn base_shapes() -> Vec<(usize, Vec<usize>)> {
    let mut out = vec![
        (6, vec![6]),
        (6, vec![2, 3]),
        (6, vec![1, 2, 1, 3]),
        (0, vec![0]),
        (0, vec![]),
    ];
    for &a in DIMS {
        for &b in DIMS {
            out.push((0, vec![a, b]));
        }
    }
    for &a in FEW {
        for &b in FEW {
            for &c in FEW {
                if a == 0 || b == 0 || c == 0 {
                    out.push((0, vec![a, b, c]));
                }
            }
        }
    }
    for &a in DIMS {
        out.push((0, vec![a]));
        out.push((6, vec![a, 6]));
    }
    out
}

/// The movement, reduce and type-changing ops with adversarial arguments for a value of rank
/// `rank`.
fn ops_for(rank: usize) -> Vec<(Op, Arg)> {
    let mut out = vec![];
    for &d in DIMS {
        out.push((Op::RESHAPE, Arg::Shape(vec![d])));
        out.push((Op::RESHAPE, Arg::Shape(vec![d, 0])));
        out.push((Op::RESHAPE, Arg::Shape(vec![0, d, d])));
        out.push((Op::EXPAND, Arg::Shape(vec![d])));
        out.push((Op::EXPAND, Arg::Shape(vec![d, d])));
        out.push((Op::EXPAND, Arg::Shape(vec![d, 2, d])));
        for &e in FEW {
            // One adversarial axis, the others plain.
            for ax in 0..rank {
                let mut offsets = vec![0; rank];
                let mut sizes = vec![0; rank];
                offsets[ax] = d;
                sizes[ax] = e;
                out.push((
                    Op::PAD,
                    Arg::Window {
                        offsets: offsets.clone(),
                        sizes: sizes.clone(),
                    },
                ));
                out.push((Op::SHRINK, Arg::Window { offsets, sizes }));
            }
        }
        out.push((Op::PERMUTE, Arg::Perm(vec![d; rank])));
        for ord in [
            ReduceOrder::Sequential,
            ReduceOrder::Split(d),
            ReduceOrder::Chunks(d),
            ReduceOrder::Tree(d),
            ReduceOrder::ChunksOfSplit(d, d),
            ReduceOrder::ChunksOfSplit(1, d),
        ] {
            for axes in [1, rank, d] {
                out.push((
                    Op::REDUCE,
                    Arg::Reduce {
                        op: Op::ADD,
                        axes,
                        order: ord.clone(),
                    },
                ));
            }
        }
        out.push((Op::UNSHARD, Arg::Axis(d)));
        out.push((Op::MSELECT, Arg::Index(d)));
    }
    out.push((Op::PERMUTE, Arg::Perm((0..rank).rev().collect())));
    out.push((Op::FLIP, Arg::Flip(vec![true; rank])));
    out.push((
        Op::PAD,
        Arg::Window {
            offsets: vec![1; rank],
            sizes: vec![4; rank],
        },
    ));
    out
}

#[test]
fn buffers_of_every_size_are_bounded() {
    let mut tally = Tally::default();
    for &size in DIMS {
        for multi in [false, true] {
            for op in [Op::BUFFER, Op::PARAM] {
                let mut g = Graph::new();
                let device = if multi {
                    DeviceSpec::Multi(vec![cpu(0), cpu(1)])
                } else {
                    DeviceSpec::Single(cpu(0))
                };
                let b = add(
                    &mut g,
                    op,
                    DType::Float32,
                    &[],
                    Arg::Buffer {
                        slot: 0,
                        size,
                        device,
                    },
                );
                let what = format!("{op} of {size} elements (multi: {multi})");
                let ok = verify::verify(&g).is_ok();
                assert_eq!(
                    ok,
                    size <= MAX_ELEMENTS / 2 || !multi && size <= MAX_ELEMENTS,
                    "{what}"
                );
                if op == Op::BUFFER {
                    judge(&g, b, &what, &mut tally);
                }
            }
        }
    }
    assert!(tally.rejected > 0 && tally.evaluated > 0, "{tally:?}");
}

#[test]
fn every_shape_taking_op_with_adversarial_dimensions() {
    let mut tally = Tally::default();
    let mut graphs = 0usize;
    for (size, shape) in base_shapes() {
        for multi in [false, true] {
            let (g0, top) = base(size, Some(&shape), multi);
            let what0 = format!("RESHAPE of {size} elements to {shape:?} (multi: {multi})");
            judge(&g0, top, &what0, &mut tally);
            graphs += 1;
            let Ok(v0) = verify::verify(&g0) else {
                continue;
            };
            let rank = v0.info(top).shape.len();
            for (op, arg) in ops_for(rank) {
                let mut g = g0.clone();
                let n = add(&mut g, op, DType::Int32, &[top], arg.clone());
                let what = format!("{op} {arg:?} of {what0}");
                judge(&g, n, &what, &mut tally);
                graphs += 1;
                // A consumer of the result: an elementwise op and a full reduction.
                if verify::verify(&g).is_ok() {
                    let c = add(&mut g, Op::ADD, DType::Int32, &[n, n], Arg::None);
                    judge(&g, c, &format!("ADD of {what}"), &mut tally);
                    let r = verify::verify(&g)
                        .map(|v| v.info(c).shape.len())
                        .unwrap_or(0);
                    let red = add(
                        &mut g,
                        Op::REDUCE,
                        DType::Int32,
                        &[c],
                        Arg::Reduce {
                            op: Op::MAX,
                            axes: r,
                            order: ReduceOrder::Sequential,
                        },
                    );
                    judge(
                        &g,
                        red,
                        &format!("full REDUCE of ADD of {what}"),
                        &mut tally,
                    );
                    graphs += 2;
                }
            }
        }
    }
    println!("{graphs} graphs: {tally:?}");
    assert!(tally.rejected > 1000, "{tally:?}");
    assert!(tally.evaluated > 1000, "{tally:?}");
}

/// The hostile user's first finding: RESHAPE [0, 2^32, 2^32] then REDUCE of axis 0 (an
/// output of 2^64 elements, which wrapped to 0) was accepted and crashed the evaluator.
#[test]
fn reduce_whose_output_wraps_is_rejected() {
    let (mut g, r) = base(0, Some(&[0, P32, P32]), false);
    assert!(
        matches!(verify::verify(&g), Err(Error::Verify { node, .. }) if node == r),
        "the RESHAPE itself has strides that overflow"
    );
    let red = add(
        &mut g,
        Op::REDUCE,
        DType::Int32,
        &[r],
        Arg::Reduce {
            op: Op::ADD,
            axes: 1,
            order: ReduceOrder::Sequential,
        },
    );
    assert!(
        matches!(verify::verify(&g), Err(Error::Verify { node, .. }) if node == r),
        "rejected at the RESHAPE, before the REDUCE ({red}) is looked at"
    );
}

/// The second finding: a REDUCE of 2^40 elements per output into an empty output aborted
/// the process allocating 16 TiB; the reduced-away part is bounded like a value.
#[test]
fn reduce_of_a_huge_empty_axis_is_rejected() {
    let (mut g, r) = base(0, Some(&[P40, 0]), false);
    assert!(
        verify::verify(&g).is_ok(),
        "an empty [2^40, 0] value is fine"
    );
    let red = add(
        &mut g,
        Op::REDUCE,
        DType::Int32,
        &[r],
        Arg::Reduce {
            op: Op::ADD,
            axes: 1,
            order: ReduceOrder::Sequential,
        },
    );
    match verify::verify(&g) {
        Err(Error::Verify { node, reason, .. }) => {
            assert_eq!(node, red);
            assert!(reason.contains("reduces more than"), "{reason}");
        }
        other => panic!("expected a verifier error, got {other:?}"),
    }
    // With the 0-sized axis first the value is fine too (its strides, 2^40, are exact), but
    // reducing the empty axis leaves an output of 2^40 elements.
    let (mut g, r) = base(0, Some(&[0, P40]), false);
    assert!(verify::verify(&g).is_ok());
    let red = add(
        &mut g,
        Op::REDUCE,
        DType::Int32,
        &[r],
        Arg::Reduce {
            op: Op::ADD,
            axes: 1,
            order: ReduceOrder::Sequential,
        },
    );
    assert!(
        matches!(verify::verify(&g), Err(Error::Verify { node, .. }) if node == red),
        "an output of 2^40 elements"
    );
}

#[test]
fn empty_values_keep_large_dimensions_but_not_past_the_dimension_limit() {
    // Empty EXPANDs of a 0-element value are evaluated at once (tests/cli.rs relies on it).
    let (mut g, b) = base(0, None, false);
    let e = add(
        &mut g,
        Op::EXPAND,
        DType::Int32,
        &[b],
        Arg::Shape(vec![P40, 1 << 23]),
    );
    let v = verify::verify(&g).expect("empty expand");
    assert_eq!(v.info(e).shape, vec![P40, 1 << 23, 0]);
    let mut t = Tally::default();
    judge(&g, e, "empty expand", &mut t);
    assert_eq!(t.evaluated, 1);
    for lead in [vec![MAX_DIMENSION + 1], vec![P40, P40], vec![usize::MAX]] {
        let (mut g, b) = base(0, None, false);
        let e = add(
            &mut g,
            Op::EXPAND,
            DType::Int32,
            &[b],
            Arg::Shape(lead.clone()),
        );
        assert!(
            matches!(verify::verify(&g), Err(Error::Verify { node, .. }) if node == e),
            "{lead:?}"
        );
    }
}

#[test]
fn unshard_outer_positions_are_bounded() {
    // [2^39, 0] per component, gathered along axis 1: 2^39 outer positions to walk.
    let (mut g, r) = base(0, Some(&[P40 / 2, 0]), true);
    let u = add(&mut g, Op::UNSHARD, DType::Int32, &[r], Arg::Axis(1));
    match verify::verify(&g) {
        Err(Error::Verify { node, reason, .. }) => {
            assert_eq!(node, u);
            assert!(reason.contains("outer positions"), "{reason}");
        }
        other => panic!("expected a verifier error, got {other:?}"),
    }
    // Along axis 0 it is an empty gather.
    let (mut g, r) = base(0, Some(&[P40 / 2, 0]), true);
    let u = add(&mut g, Op::UNSHARD, DType::Int32, &[r], Arg::Axis(0));
    let v = verify::verify(&g).expect("gather along axis 0");
    assert_eq!(v.info(u).shape, vec![P40, 0]);
    // Past the dimension limit when gathered from [2^40, 0].
    let (mut g, r) = base(0, Some(&[P40, 0]), true);
    let u = add(&mut g, Op::UNSHARD, DType::Int32, &[r], Arg::Axis(0));
    assert!(matches!(verify::verify(&g), Err(Error::Verify { node, .. }) if node == u));
}

#[test]
fn check_shape_limits() {
    assert_eq!(check_shape(&[]), Ok(1));
    assert_eq!(check_shape(&[2, 3]), Ok(6));
    assert_eq!(check_shape(&[P40, 0, 1 << 23]), Ok(0));
    assert!(check_shape(&[MAX_ELEMENTS + 1]).is_err());
    assert!(check_shape(&[0, P32, P32]).is_err());
    assert!(check_shape(&[0, usize::MAX]).is_err());
    assert!(check_shape(&[P40 + 1, 0]).is_err());
    assert_eq!(checked_numel(&[P32, P32]), None);
    assert_eq!(checked_numel(&[0, P32, P32]), Some(0));
}

/// A graph verified within the compiler's looser limits (`Limits::COMPILE`) is not evaluated
/// by the oracle on that verification: `eval::evaluate` verifies it again within the oracle's
/// limits, and refuses the value over `MAX_ELEMENTS` with the verifier's message.
#[test]
fn a_graph_verified_for_compilation_is_reverified_before_evaluation() {
    let (mut g, b) = base(1, Some(&[1, 1]), false);
    let big = add(
        &mut g,
        Op::EXPAND,
        DType::Int32,
        &[b],
        Arg::Shape(vec![1 << 15, 1 << 15]),
    );
    assert!(
        verify::verify(&g).is_err(),
        "2^30 elements: over the oracle's cap"
    );
    let ver = verify::verify_with(&g, &verify::Limits::COMPILE).expect("within COMPILE");
    assert_eq!(ver.limits(), verify::Limits::COMPILE);
    let inputs = BTreeMap::new();
    match eval::evaluate(&g, &ver, &inputs, &[big]) {
        Err(Error::Verify { node, .. }) => assert_eq!(node, big),
        Err(e) => panic!("expected the verifier's refusal at the EXPAND, got {e}"),
        Ok(_) => panic!("the oracle evaluated a 2^30-element value"),
    }
}
