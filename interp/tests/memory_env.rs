//! `UOPKIT_MEMORY_LIMIT` (one test in its own binary: it sets the process environment).

use std::collections::BTreeMap;

use uopkit_interp::eval;
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, Op};
use uopkit_interp::verify::verify;
use uopkit_interp::Error;

#[test]
fn the_variable_sets_the_limit_and_a_bad_value_names_it() {
    let mut g = Graph::new();
    let b = g.add(Node {
        op: Op::BUFFER,
        dtype: DType::Float32,
        src: vec![],
        arg: Arg::Buffer {
            slot: 0,
            size: 1 << 20,
            device: DeviceSpec::Single(Device::cpu(0)),
        },
    });
    let ver = verify(&g).expect("verifies");
    let run = || eval::evaluate(&g, &ver, &BTreeMap::new(), &[b]).map(|_| ());

    std::env::set_var("UOPKIT_MEMORY_LIMIT", "12X");
    match run() {
        Err(e @ Error::Config { .. }) => {
            let text = e.to_string();
            assert!(text.contains("UOPKIT_MEMORY_LIMIT"), "{text}");
            assert!(text.contains("12X"), "{text}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    std::env::set_var("UOPKIT_MEMORY_LIMIT", "1M");
    match run() {
        Err(Error::Memory { limit, .. }) => assert_eq!(limit, 1 << 20),
        other => panic!("expected a memory error, got {other:?}"),
    }
    std::env::set_var("UOPKIT_MEMORY_LIMIT", "1G");
    assert_eq!(run(), Ok(()));
    std::env::remove_var("UOPKIT_MEMORY_LIMIT");
    assert_eq!(run(), Ok(()));
}
