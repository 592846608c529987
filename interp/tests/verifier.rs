//! The verifier rejects every malformed graph with the node and the reason.

use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op};
use uopkit_interp::verify::verify;
use uopkit_interp::Error;

fn add(g: &mut Graph, op: Op, dtype: DType, src: &[NodeId], arg: Arg) -> NodeId {
    g.add(Node {
        op,
        dtype,
        src: src.to_vec(),
        arg,
    })
}

fn buffer(g: &mut Graph, slot: u32, size: usize, dtype: DType, device: DeviceSpec) -> NodeId {
    add(
        g,
        Op::BUFFER,
        dtype,
        &[],
        Arg::Buffer { slot, size, device },
    )
}

fn cpu(i: u32) -> DeviceSpec {
    DeviceSpec::Single(Device::cpu(i))
}

/// Asserts that verification fails at `node` with a reason containing `text`.
fn rejected(g: &Graph, node: NodeId, text: &str) {
    match verify(g) {
        Err(Error::Verify {
            node: n, reason, ..
        }) => {
            assert_eq!(n, node, "wrong node for '{reason}'");
            assert!(
                reason.contains(text),
                "reason '{reason}' does not contain '{text}'"
            );
        }
        other => panic!("expected a verifier error containing '{text}', got {other:?}"),
    }
}

#[test]
fn wrong_arity() {
    let mut g = Graph::new();
    let b = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let bad = add(&mut g, Op::ADD, DType::Int32, &[b], Arg::None);
    rejected(&g, bad, "takes 2 source(s), got 1");
}

#[test]
fn bad_movement_args() {
    for (op, arg, text) in [
        (
            Op::RESHAPE,
            Arg::Shape(vec![3, 2]),
            "changes the number of elements",
        ),
        (
            Op::PAD,
            Arg::Window {
                offsets: vec![3],
                sizes: vec![5],
            },
            "does not fit",
        ),
        (
            Op::SHRINK,
            Arg::Window {
                offsets: vec![2],
                sizes: vec![3],
            },
            "outside size 4",
        ),
        (Op::PERMUTE, Arg::Perm(vec![1]), "not a permutation"),
        (Op::FLIP, Arg::Flip(vec![true, false]), "one flag per axis"),
        (Op::RESHAPE, Arg::Perm(vec![0]), "bad arg"),
    ] {
        let mut g = Graph::new();
        let b = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
        let bad = add(&mut g, op, DType::Int32, &[b], arg);
        rejected(&g, bad, text);
    }
}

#[test]
fn dtype_rules() {
    let mut g = Graph::new();
    let i = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let f = buffer(&mut g, 1, 4, DType::Float32, cpu(0));
    let sqrt_int = add(&mut g, Op::SQRT, DType::Int32, &[i], Arg::None);
    rejected(&g, sqrt_int, "needs a float dtype");

    let mut g = Graph::new();
    let f2 = buffer(&mut g, 1, 4, DType::Float32, cpu(0));
    let shl_float = add(&mut g, Op::SHL, DType::Float32, &[f2, f2], Arg::None);
    rejected(&g, shl_float, "needs an integer dtype");

    let mut g = Graph::new();
    let f3 = buffer(&mut g, 1, 4, DType::Float32, cpu(0));
    let cond = add(&mut g, Op::WHERE, DType::Float32, &[f3, f3, f3], Arg::None);
    rejected(&g, cond, "condition must be bool");

    let mut g = Graph::new();
    let f4 = buffer(&mut g, 1, 4, DType::Float32, cpu(0));
    let cmp = add(&mut g, Op::CMPLT, DType::Float32, &[f4, f4], Arg::None);
    rejected(&g, cmp, "result dtype must be bool");

    let mut g = Graph::new();
    let b8 = buffer(&mut g, 1, 4, DType::Int8, cpu(0));
    let bc = add(&mut g, Op::BITCAST, DType::Float32, &[b8], Arg::None);
    rejected(&g, bc, "widths must match");
    let _ = (i, f);
}

#[test]
fn devices_must_match_for_alu_but_not_for_store() {
    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let b = buffer(&mut g, 1, 4, DType::Int32, cpu(1));
    let st = add(&mut g, Op::STORE, DType::Void, &[b, a], Arg::None);
    add(&mut g, Op::AFTER, DType::Int32, &[b, st], Arg::None);
    verify(&g).expect("a STORE into a buffer on another device is a COPY, not an error");
    let bad = add(&mut g, Op::ADD, DType::Int32, &[a, b], Arg::None);
    rejected(&g, bad, "different devices");
}

#[test]
fn store_targets_must_be_storage() {
    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let sum = add(&mut g, Op::ADD, DType::Int32, &[a, a], Arg::None);
    let st = add(&mut g, Op::STORE, DType::Void, &[sum, a], Arg::None);
    rejected(&g, st, "not a view of storage");

    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let padded = add(
        &mut g,
        Op::PAD,
        DType::Int32,
        &[a],
        Arg::Window {
            offsets: vec![1],
            sizes: vec![5],
        },
    );
    let v = buffer(&mut g, 1, 5, DType::Int32, cpu(0));
    let st = add(&mut g, Op::STORE, DType::Void, &[padded, v], Arg::None);
    rejected(&g, st, "not a view of storage");
}

#[test]
fn multi_device_rules() {
    let devs = vec![Device::cpu(0), Device::cpu(1)];
    let mut g = Graph::new();
    let m = buffer(&mut g, 0, 4, DType::Int32, DeviceSpec::Multi(devs.clone()));
    let sel = add(&mut g, Op::MSELECT, DType::Int32, &[m], Arg::Index(2));
    rejected(&g, sel, "out of range");

    let mut g = Graph::new();
    let m = buffer(&mut g, 0, 4, DType::Int32, DeviceSpec::Multi(devs.clone()));
    let ar = add(
        &mut g,
        Op::ALLREDUCE,
        DType::Int32,
        &[m],
        Arg::AllReduce {
            op: Op::ADD,
            devices: vec![Device::cpu(0)],
        },
    );
    rejected(&g, ar, "its source lives on");

    let mut g = Graph::new();
    let m = buffer(&mut g, 0, 4, DType::Int32, DeviceSpec::Multi(devs.clone()));
    let to_one = add(&mut g, Op::COPY, DType::Int32, &[m], Arg::Device(cpu(0)));
    rejected(&g, to_one, "needs UNSHARD");

    let mut g = Graph::new();
    let m = buffer(&mut g, 0, 4, DType::Int32, DeviceSpec::Multi(devs.clone()));
    let u = add(&mut g, Op::UNSHARD, DType::Int32, &[m], Arg::Axis(0));
    let neg = add(&mut g, Op::NEG, DType::Int32, &[u], Arg::None);
    rejected(&g, neg, "UNSHARD");

    let mut g = Graph::new();
    let bad = buffer(
        &mut g,
        0,
        4,
        DType::Int32,
        DeviceSpec::Multi(vec![Device::cpu(0), Device::cpu(0)]),
    );
    rejected(&g, bad, "names a device twice");
}

#[test]
fn call_body_must_be_a_sink_and_after_deps_effects() {
    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let call = add(&mut g, Op::CALL, DType::Void, &[a, a], Arg::None);
    rejected(&g, call, "must be a SINK");

    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 4, DType::Int32, cpu(0));
    let after = add(&mut g, Op::AFTER, DType::Int32, &[a, a], Arg::None);
    rejected(&g, after, "expected STORE, CALL, GROUP, SINK or AFTER");
}

#[test]
fn sizes_are_checked_before_allocation() {
    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 1 << 20, DType::Int32, cpu(0));
    let huge = add(
        &mut g,
        Op::EXPAND,
        DType::Int32,
        &[a],
        Arg::Shape(vec![1 << 20]),
    );
    rejected(&g, huge, "more than");
}

#[test]
fn unordered_stores_to_one_buffer_are_an_error() {
    let mut g = Graph::new();
    let a = buffer(&mut g, 0, 2, DType::Int32, cpu(0));
    let one = add(&mut g, Op::CONST, DType::Int32, &[], Arg::Const(1));
    let two = add(&mut g, Op::CONST, DType::Int32, &[], Arg::Const(2));
    let one = add(
        &mut g,
        Op::EXPAND,
        DType::Int32,
        &[one],
        Arg::Shape(vec![2]),
    );
    let two = add(
        &mut g,
        Op::EXPAND,
        DType::Int32,
        &[two],
        Arg::Shape(vec![2]),
    );
    let s1 = add(&mut g, Op::STORE, DType::Void, &[a, one], Arg::None);
    let s2 = add(&mut g, Op::STORE, DType::Void, &[a, two], Arg::None);
    let after = add(&mut g, Op::AFTER, DType::Int32, &[a, s1, s2], Arg::None);
    let ver = verify(&g).expect("each store alone is well formed");
    let inputs = std::collections::BTreeMap::from([(a, vec![vec![Some(0), Some(0)]])]);
    match uopkit_interp::eval::evaluate(&g, &ver, &inputs, &[after]) {
        Err(e @ Error::Unordered { .. }) => {
            assert_eq!(e.node(), after);
            assert!(e.to_string().contains("not ordered"), "{e}");
        }
        other => panic!("expected an ordering error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn chunks_of_split_needs_chunks_that_divide_the_reduced_elements() {
    use uopkit_interp::ir::ReduceOrder;
    let reduce = |order: ReduceOrder| {
        let mut g = Graph::new();
        let b = buffer(&mut g, 0, 12, DType::Float32, cpu(0));
        let v = add(
            &mut g,
            Op::RESHAPE,
            DType::Float32,
            &[b],
            Arg::Shape(vec![6, 2]),
        );
        let r = add(
            &mut g,
            Op::REDUCE,
            DType::Float32,
            &[v],
            Arg::Reduce {
                op: Op::ADD,
                axes: 1,
                order,
            },
        );
        (g, r)
    };
    // 6 reduced elements per output: 3 chunks of 2 (or 6 of 1) are fine, 4 chunks are not.
    for ok in [(3, 2), (6, 1), (1, 8)] {
        let (g, _) = reduce(ReduceOrder::ChunksOfSplit(ok.0, ok.1));
        assert!(verify(&g).is_ok(), "chunks_of_split{ok:?} of 6 elements");
    }
    let (g, r) = reduce(ReduceOrder::ChunksOfSplit(4, 2));
    rejected(&g, r, "4 chunks do not divide the 6 reduced elements");
    let (g, r) = reduce(ReduceOrder::ChunksOfSplit(0, 2));
    rejected(&g, r, "chunks times lanes, each at least 1");
    let (g, r) = reduce(ReduceOrder::ChunksOfSplit(2, 0));
    rejected(&g, r, "chunks times lanes, each at least 1");
    // c·k is bounded by max(reduced, 1024) like the parts of the other orders (6 reduced
    // elements: at most 1024), so the oracle's fold stays linear.
    let (g, _) = reduce(ReduceOrder::ChunksOfSplit(2, 512));
    assert!(verify(&g).is_ok());
    let (g, r) = reduce(ReduceOrder::ChunksOfSplit(2, 513));
    rejected(&g, r, "needs 1..=1024 chunks times lanes");
}
