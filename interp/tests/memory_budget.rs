//! The oracle's memory budget: graphs over the limit are refused before anything large is
//! allocated, with the estimate and the limit in the message; multi-device UB names the device.

use std::collections::BTreeMap;
use std::time::Instant;

use uopkit_interp::eval::{self, budget, Column, Options};
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

#[test]
fn a_graph_over_the_limit_is_refused_before_allocating() {
    // 2^27 float32 elements: NEG of an (uninitialized) buffer, under a 1 GiB limit.
    let mut g = Graph::new();
    let n = 1usize << 27;
    let b = buffer(
        &mut g,
        0,
        n,
        DType::Float32,
        DeviceSpec::Single(Device::cpu(0)),
    );
    let neg = add(&mut g, Op::NEG, DType::Float32, &[b], Arg::None);
    let ver = verify(&g).expect("verifies");
    let start = Instant::now();
    let opts = Options {
        memory_limit: Some(1 << 30),
    };
    let err = eval::evaluate_with(&g, &ver, &BTreeMap::new(), &[neg], &opts)
        .err()
        .expect("refused");
    let elapsed = start.elapsed();
    match &err {
        Error::Memory {
            node,
            needed,
            limit,
            ..
        } => {
            assert_eq!(*limit, 1 << 30);
            assert!(*needed > 1 << 30, "needed {needed}");
            // The buffer alone (4 bytes of bits and 8 of poison per element) is over the limit.
            assert_eq!(*node, b);
        }
        other => panic!("expected a memory error, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains("memory limit of 1073741824 bytes"), "{text}");
    assert!(text.contains("UOPKIT_MEMORY_LIMIT"), "{text}");
    assert!(text.contains("would need an estimated"), "{text}");
    assert!(elapsed.as_millis() < 1000, "took {elapsed:?}");
}

#[test]
fn a_graph_under_the_limit_runs() {
    let mut g = Graph::new();
    let b = buffer(
        &mut g,
        0,
        4,
        DType::Float32,
        DeviceSpec::Single(Device::cpu(0)),
    );
    let neg = add(&mut g, Op::NEG, DType::Float32, &[b], Arg::None);
    let ver = verify(&g).expect("verifies");
    let inputs = BTreeMap::from([(b, vec![vec![Some(0x3f80_0000); 4]])]);
    let opts = Options {
        memory_limit: Some(1 << 20),
    };
    let ev = eval::evaluate_with(&g, &ver, &inputs, &[neg], &opts).expect("runs");
    let v = ev.output(&g, neg).expect("defined");
    assert_eq!(
        v.data.components()[0],
        vec![eval::Elem::Bits(0xbf80_0000); 4]
    );
    // The same through the compact inputs and outputs.
    let cols = BTreeMap::from([(b, vec![Column::from_u32(vec![0x3f80_0000; 4])])]);
    let ev = eval::evaluate_columns(&g, &ver, cols, &[neg], &opts).expect("runs");
    let c = ev.output_compact(&g, neg).expect("defined");
    assert_eq!(
        c.comps[0].to_elems(),
        vec![eval::Elem::Bits(0xbf80_0000); 4]
    );
    // A tiny limit refuses it.
    let opts = Options {
        memory_limit: Some(8),
    };
    assert!(matches!(
        eval::evaluate_with(&g, &ver, &inputs, &[neg], &opts),
        Err(Error::Memory { .. })
    ));
}

#[test]
fn limits_parse_with_suffixes_and_bad_values_name_the_variable() {
    assert_eq!(budget::parse_limit("1G"), Ok(1 << 30));
    assert_eq!(budget::parse_limit("64M"), Ok(64 << 20));
    assert_eq!(budget::parse_limit("8K"), Ok(8 << 10));
    assert!(budget::parse_limit("lots").is_err());
    assert!(budget::default_limit() > 0);
}

#[test]
fn multi_device_ub_names_the_device_and_the_per_device_element() {
    // Two devices, 3 elements each; device 1's element 2 is never written.
    let mut g = Graph::new();
    let devs = DeviceSpec::Multi(vec![Device::cpu(0), Device::cpu(1)]);
    let b = buffer(&mut g, 0, 3, DType::Int32, devs);
    let one = add(&mut g, Op::CONST, DType::Int32, &[], Arg::Const(1));
    let sum = add(&mut g, Op::ADD, DType::Int32, &[b, one], Arg::None);
    let ver = verify(&g).expect("verifies");
    let inputs = BTreeMap::from([(
        b,
        vec![
            vec![Some(1), Some(2), Some(3)],
            vec![Some(4), Some(5), None],
        ],
    )]);
    let ev = eval::evaluate(&g, &ver, &inputs, &[sum]).expect("runs");
    let err = ev.output(&g, sum).expect_err("uninitialized");
    match &err {
        Error::Ub {
            node,
            element,
            device,
            origin,
            ..
        } => {
            assert_eq!(*node, sum);
            assert_eq!(*element, 2, "the element within device 1's component");
            assert_eq!(device.as_ref().map(|d| d.0), Some(1));
            assert_eq!(*origin, Some((b, 2)));
        }
        other => panic!("expected UB, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains("device 1 (CPU:1)"), "{text}");

    // Integer division by zero on device 1, element 0.
    let mut g = Graph::new();
    let devs = DeviceSpec::Multi(vec![Device::cpu(0), Device::cpu(1)]);
    let b = buffer(&mut g, 0, 2, DType::Int32, devs);
    let seven = add(&mut g, Op::CONST, DType::Int32, &[], Arg::Const(7));
    let q = add(&mut g, Op::CDIV, DType::Int32, &[seven, b], Arg::None);
    let ver = verify(&g).expect("verifies");
    let inputs = BTreeMap::from([(b, vec![vec![Some(1), Some(2)], vec![Some(0), Some(1)]])]);
    match eval::evaluate(&g, &ver, &inputs, &[q]) {
        Err(Error::Ub {
            element, device, ..
        }) => {
            assert_eq!(element, 0);
            assert_eq!(device.map(|d| d.0), Some(1));
        }
        other => panic!("expected UB, got {:?}", other.map(|_| ())),
    }
}
