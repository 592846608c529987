//! Deep graphs load, verify and evaluate on a test thread's default stack, in time linear in
//! their length: a 10^5-node ADD chain, 25,000 STORE/AFTER assigns into one buffer (each
//! AFTER names the buffer itself, as tinygrad writes it, so "is this version older" spans the
//! whole chain of versions) and 10^4 CALLs of one body. Before the fixes these were quadratic
//! (the assign chain: every AFTER walked the versions back to the initial contents; the CALLs:
//! every CALL scanned the whole graph); the figures are in docs/oracle-memory.md
//! (`scripts/gen_big_cases.py`, `conformance/examples/case_bench.rs`). No timing is asserted:
//! the expected values are checked exactly, and a quadratic regression shows as a test that
//! takes minutes.

use serde_json::{json, Value};
use uopkit_conformance::case::Case;
use uopkit_conformance::run::check_oracle;

fn case(nodes: Vec<Value>, out: u64, expect: Vec<Value>) -> Case {
    let v = json!({
        "format": "uopkit-case/1",
        "description": "deep graph",
        "graph": nodes,
        "inputs": {"0": {"arange": {"start": 0, "step": 1}}},
        "outputs": [{"name": "o", "node": out, "shape": [16], "expect": expect}],
    });
    serde_json::from_value(v).expect("a well-formed case")
}

fn buffer() -> Value {
    json!({"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"device": "CPU", "size": 16, "slot": 0}})
}

fn check(c: &Case) {
    if let Err(report) = check_oracle(c) {
        panic!("{report}");
    }
}

#[test]
fn add_chain_of_100k_nodes() {
    let n: u64 = 100_000;
    let mut nodes = vec![buffer()];
    for k in 0..7u64 {
        nodes.push(json!({"id": 1 + k, "op": "CONST", "dtype": "float32", "arg": k}));
    }
    let mut x = 0;
    for i in 0..n {
        nodes.push(json!({"id": 8 + i, "op": "ADD", "dtype": "float32", "src": [x, 1 + i % 7]}));
        x = 8 + i;
    }
    // Integers below 2^24: every partial sum is exact in float32.
    let total: u64 = (0..n).map(|i| i % 7).sum();
    check(&case(nodes, x, (0..16).map(|j| json!(j + total)).collect()));
}

#[test]
fn store_after_chain_of_25k_assigns() {
    let n: u64 = 25_000;
    let mut nodes = vec![buffer()];
    let (mut cur, mut id) = (0, 1);
    for i in 0..n {
        nodes.push(json!({"id": id, "op": "CONST", "dtype": "float32", "arg": i % 1000}));
        nodes.push(
            json!({"id": id + 1, "op": "EXPAND", "dtype": "float32", "src": [id], "arg": [16]}),
        );
        nodes.push(json!({"id": id + 2, "op": "STORE", "dtype": "void", "src": [cur, id + 1]}));
        nodes.push(json!({"id": id + 3, "op": "AFTER", "dtype": "float32", "src": [0, id + 2]}));
        cur = id + 3;
        id += 4;
    }
    check(&case(nodes, cur, vec![json!((n - 1) % 1000); 16]));
}

#[test]
fn chain_of_10k_calls() {
    let n: u64 = 10_000;
    let mut nodes = vec![
        buffer(),
        json!({"id": 1, "op": "PARAM", "dtype": "float32", "arg": {"device": "CPU:0", "size": 16, "slot": 0}}),
        json!({"id": 2, "op": "CONST", "dtype": "float32", "arg": 1}),
        json!({"id": 3, "op": "ADD", "dtype": "float32", "src": [1, 2]}),
        json!({"id": 4, "op": "STORE", "dtype": "void", "src": [1, 3]}),
        json!({"id": 5, "op": "SINK", "dtype": "void", "src": [4]}),
    ];
    let (mut cur, mut id) = (0, 6);
    for _ in 0..n {
        nodes.push(json!({"id": id, "op": "CALL", "dtype": "void", "src": [5, cur], "arg": {"name": "inc"}}));
        nodes.push(json!({"id": id + 1, "op": "AFTER", "dtype": "float32", "src": [cur, id]}));
        cur = id + 1;
        id += 2;
    }
    check(&case(nodes, cur, (0..16).map(|j| json!(j + n)).collect()));
}
