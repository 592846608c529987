//! The kernel interpreter on the real compiler's programs: every corpus case the scheduler
//! takes is scheduled, each kernel runs in `uopkit_interp::kernel::interp` (COPY steps copy
//! whole buffers), and the outputs are compared with the tensor oracle's, bit for bit under
//! the case's policy. A second test switches on a deliberately wrong compiler rewrite and
//! checks that this comparison catches it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use uopkit_compiler::schedule::realize::Move;
use uopkit_compiler::schedule::{self, BufId, BufferKind, Schedule, Step};
use uopkit_conformance::{compare, corpus, load, run as oracle, Case};
use uopkit_interp::eval::{movement, BufferInit, Data, Elem, Value};
use uopkit_interp::ir::{DType, NodeId};
use uopkit_interp::kernel::interp::{run, RunOpts, UbMode};

fn corpus_files() -> (PathBuf, Vec<PathBuf>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let files = corpus::case_files(&dir).expect("the corpus directory");
    (dir, files)
}

/// Runs every step of `s` in the kernel interpreter; returns one value per output.
fn interpret(s: &Schedule, inputs: &BTreeMap<NodeId, BufferInit>, seed: u64) -> Result<Vec<Option<Value>>, String> {
    let mut bufs: Vec<Vec<Elem>> = s
        .buffers
        .iter()
        .enumerate()
        .map(|(b, d)| {
            let (node, c) = match d.kind {
                BufferKind::Graph(n) => (n, 0),
                BufferKind::GraphComponent(n, c) => (n, c),
                // Poison that names no graph node (ids from the top of the range).
                BufferKind::Intermediate => {
                    let buffer = NodeId(u32::MAX - b as u32);
                    return (0..d.size).map(|index| Elem::Uninit { buffer, index }).collect();
                }
            };
            let init = inputs.get(&node).and_then(|i| i.get(c));
            (0..d.size)
                .map(|index| match init.and_then(|i| i.get(index)).copied().flatten() {
                    Some(bits) => Elem::Bits(bits),
                    None => Elem::Uninit { buffer: node, index },
                })
                .collect()
        })
        .collect();
    // Deferred UB: the lowering computes padded lanes (on the zeros gated loads give there)
    // and discards them with a WHERE, relying on total division and shifts there, as the C
    // renderer makes them; the oracle never computes those lanes.
    let opts = RunOpts { step_budget: 100_000_000, seed, ub: UbMode::Deferred };
    for (k, st) in s.steps.iter().enumerate() {
        match st {
            Step::Kernel { program, args, .. } => {
                let mut seen = args.clone();
                seen.sort();
                seen.dedup();
                if seen.len() != args.len() {
                    return Err(format!("step {k}: a buffer is passed twice"));
                }
                let mut kb: Vec<Vec<Elem>> = args.iter().map(|a| std::mem::take(&mut bufs[a.0 as usize])).collect();
                let r = run(program, &mut kb, &opts);
                for (a, b) in args.iter().zip(kb) {
                    bufs[a.0 as usize] = b;
                }
                r.map_err(|e| format!("step {k}: {e}\n{program}"))?;
            }
            Step::Copy { dst, src } => {
                let v = bufs[src.0 as usize].clone();
                if v.len() != bufs[dst.0 as usize].len() {
                    return Err(format!("step {k}: COPY between buffers of different sizes"));
                }
                bufs[dst.0 as usize] = v;
            }
        }
    }
    let read = |buffer: BufId, chain: &[Move]| -> Result<(DType, Vec<usize>, Vec<Elem>), String> {
        let b = &s.buffers[buffer.0 as usize];
        let mut data = bufs[buffer.0 as usize].clone();
        let mut shape = vec![b.size];
        for m in chain {
            data = movement::apply(m.op, &m.arg, &shape, &data, &Elem::Bits(0));
            shape = uopkit_interp::verify::movement_shape(m.op, &m.arg, &shape)?;
        }
        Ok((b.dtype, shape, data))
    };
    let mut out = vec![];
    for o in &s.outputs {
        let Some(o) = o else {
            out.push(None);
            continue;
        };
        out.push(Some(match &o.components {
            None => {
                let (dtype, shape, data) = read(o.buffer, &o.chain)?;
                Value { dtype, shape, data: Data::Single(data) }
            }
            Some(cs) => {
                let (mut dtype, mut shape, mut comps) = (DType::Void, vec![], vec![]);
                for (b, ch) in cs {
                    let (d, sh, data) = read(*b, ch)?;
                    (dtype, shape) = (d, sh);
                    comps.push(data);
                }
                Value { dtype, shape, data: Data::Multi(comps) }
            }
        }));
    }
    Ok(out)
}

enum Outcome {
    /// The case is not for this comparison (it expects an error, or the scheduler
    /// cannot take it yet).
    Skipped,
    Passed,
    Failed(String),
}

fn check_file(file: &Path, seed: u64) -> Outcome {
    match load::read_case(file) {
        Ok(c) => check_case(&c, seed),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

fn check_case(case: &Case, seed: u64) -> Outcome {
    if case.expect_error.is_some() {
        return Outcome::Skipped;
    }
    let run = match oracle::run_oracle(case) {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("the oracle failed: {e}")),
    };
    let values = match oracle::output_values(case, &run) {
        Ok(v) => v,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let roots: Vec<NodeId> = match case.outputs.iter().map(|o| run.loaded.arena(o.node)).collect() {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let sched = match schedule::schedule(&run.loaded.graph, &run.verified, &roots) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped (the scheduler cannot take it): {e}");
            return Outcome::Skipped;
        }
    };
    let got = match interpret(&sched, &run.loaded.inputs, seed) {
        Ok(v) => v,
        Err(e) => return Outcome::Failed(format!("the kernel interpreter: {e}")),
    };
    let mut report = String::new();
    for ((out, want), got) in case.outputs.iter().zip(values).zip(got) {
        let Some(got) = got else {
            report += &format!("output '{}' has no value\n", out.name);
            continue;
        };
        match compare::compare_values(out, want, &got) {
            Ok(d) if d.passed() => {}
            Ok(d) => report += &d.report(4),
            Err(e) => report += &format!("{e}\n"),
        }
    }
    if report.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(format!("{report}schedule:\n{sched}"))
    }
}

#[test]
fn corpus_kernels_interpreted_match_the_oracle() {
    let (dir, files) = corpus_files();
    let (mut passed, mut skipped, mut failures) = (0, 0, vec![]);
    for f in &files {
        match check_file(f, 0) {
            Outcome::Passed => passed += 1,
            Outcome::Skipped => skipped += 1,
            Outcome::Failed(why) => failures.push(format!("{}: {why}", corpus::case_name(&dir, f))),
        }
    }
    eprintln!("{passed} corpus cases interpreted and matched, {skipped} skipped, {} failed", failures.len());
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
    assert!(passed >= 100, "only {passed} corpus cases were interpreted");
}

/// A kernel whose index arithmetic has a modulo the symbolic rules see: the flat index k
/// of reshape(permute(reshape(x, [3, 2]), [1, 0]), [6]) reads x at (k % 3) * 2 + k // 3.
const PERMUTED_RESHAPE: &str = r#"{
  "format": "uopkit-case/1",
  "description": "x = arange(6) as [3,2], permuted to [2,3], flattened, doubled: [0,4,8,2,6,10]",
  "graph": [
    {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"device": "CPU:0", "size": 6, "slot": 0}},
    {"id": 1, "op": "RESHAPE", "dtype": "int32", "src": [0], "arg": [3, 2]},
    {"id": 2, "op": "PERMUTE", "dtype": "int32", "src": [1], "arg": [1, 0]},
    {"id": 3, "op": "RESHAPE", "dtype": "int32", "src": [2], "arg": [6]},
    {"id": 4, "op": "ADD", "dtype": "int32", "src": [3, 3]}
  ],
  "inputs": {"0": {"arange": {"start": 0, "step": 1}}},
  "outputs": [{"name": "y", "node": 4, "shape": [6], "expect": [0, 4, 8, 2, 6, 10], "compare": "exact", "nan": "canonical"}]
}"#;

/// A wrong rewrite rule (`x % c → x` where x only stays below 2c) makes wrong index
/// arithmetic; interpreting the programs must show it, as a wrong value or as an
/// out-of-bounds access.
#[test]
fn a_wrong_index_rewrite_is_caught_by_the_interpreter() {
    let case = load::parse_case(PERMUTED_RESHAPE).expect("the inline case parses");
    assert!(matches!(check_case(&case, 0), Outcome::Passed), "the inline case fails without the fault");
    // (The fault is switched on for this test's thread only.)
    uopkit_compiler::rewrite::faults::set_active(&["fault_mod_drop"]);
    let inline = check_case(&case, 0);
    uopkit_compiler::rewrite::faults::set_active(&[]);
    match inline {
        Outcome::Failed(why) => {
            eprintln!("the inline case: {why}");
            assert!(why.contains("out-of-bounds") || why.contains("differ"), "{why}");
        }
        _ => panic!("the injected fault went unnoticed"),
    }
}
