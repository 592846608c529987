//! `uopkit diff` pins a deliberately wrong rewrite rule to its pass: with the test-only fault
//! `fault_mod_drop` switched on (this thread only), the lowered kernels still agree with the
//! oracle and the first stage that differs is the one after the `symbolic` pass; with
//! `fault_lanes_order_drop` (a wrong rule in the CPU kernel pass `cpu_split_lanes`), the one
//! after that pass.

use uopkit_compiler::rewrite::faults;
use uopkit_conformance::backends::cpu::Cpu;
use uopkit_conformance::stages::{DiffError, DiffReport};
use uopkit_conformance::{backend, harness, load};

/// `uopkit diff` with the CPU backend in this thread (where the fault is switched on).
fn diff(case: &uopkit_conformance::Case) -> Result<DiffReport, DiffError> {
    let allow = backend::cpu_allowances()?;
    harness::diff(case, "", Some((&Cpu, allow)))
}

mod common;
use common::{INT_SUM, PERMUTED_RESHAPE};

#[test]
fn every_stage_agrees_without_the_fault() {
    let case = load::parse_case(PERMUTED_RESHAPE).expect("the case parses");
    let report = diff(&case).expect("diff runs");
    assert!(report.agrees(), "{:?}", report.first);
    let names: Vec<&str> = report.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(
        names,
        [
            "kernels: lowered",
            "kernels: after pass 'symbolic'",
            "kernels: after pass 'cpu_tile'",
            "kernels: after pass 'cpu_interchange'",
            "kernels: after pass 'cpu_split_lanes'",
            "kernels: after pass 'cpu_threads'",
            "gpusim: lowered",
            "gpusim: after pass 'gpu_launch'",
            "gpusim: after pass 'gpu_local_reduce'",
            "gpusim: after pass 'gpu_threads'",
            "gpusim: after pass 'symbolic'",
            "rendered: cpu"
        ]
    );
}

#[test]
fn diff_names_the_pass_of_a_wrong_rule() {
    let case = load::parse_case(PERMUTED_RESHAPE).expect("the case parses");
    faults::set_active(&["fault_mod_drop"]);
    let report = diff(&case);
    faults::set_active(&[]);
    let report = report.expect("diff runs");
    assert!(
        report.stages[0].difference.is_none(),
        "the lowered kernels are right: {:?}",
        report.stages[0]
    );
    assert!(
        report.stages[1].difference.is_some(),
        "the pass with the wrong rule differs"
    );
    let first = report.first.expect("a difference is reported");
    assert!(first.contains("after pass 'symbolic'"), "{first}");
    assert!(
        first.contains("culprit rule: fault_mod_drop;"),
        "the report names the wrong rule: {first}"
    );
    assert!(
        first.contains("kernel k0") && first.contains("graph node 4"),
        "the report pins the kernel and node: {first}"
    );
    assert!(
        first.contains("`uopkit dot CASE --highlight 4`"),
        "the report says how to see the node: {first}"
    );
}

#[test]
fn diff_names_the_gpu_pass_and_rule_of_a_missing_barrier() {
    let case = load::parse_case(INT_SUM).expect("the case parses");
    let clean = diff(&case).expect("diff runs");
    assert!(clean.agrees(), "{:?}", clean.first);
    faults::set_active(&["fault_gpu_barrier_drop"]);
    let report = diff(&case);
    faults::set_active(&[]);
    let report = report.expect("diff runs");
    let first = report.first.expect("the missing barrier is found");
    assert!(
        first.starts_with(
            "first difference at stage 'gpusim: after pass 'gpu_local_reduce'', kernel pass 'gpu_local_reduce' (culprit rule: reduce_to_local_tree)"
        ),
        "{first}"
    );
    // The CPU-style stages are not touched by the fault.
    assert!(report
        .stages
        .iter()
        .filter(|s| s.stage.starts_with("kernels:"))
        .all(|s| s.difference.is_none()));
}

/// The diff report names graph nodes by the case file's ids, even when they differ from the
/// oracle's arena indices.
#[test]
fn diff_names_nodes_by_case_file_id() {
    let renumbered = PERMUTED_RESHAPE
        .replace("\"id\": 0,", "\"id\": 10,")
        .replace("\"id\": 1,", "\"id\": 11,")
        .replace("\"id\": 2,", "\"id\": 12,")
        .replace("\"id\": 3,", "\"id\": 13,")
        .replace("\"id\": 4,", "\"id\": 14,")
        .replace("\"src\": [0]", "\"src\": [10]")
        .replace("\"src\": [1]", "\"src\": [11]")
        .replace("\"src\": [2]", "\"src\": [12]")
        .replace("\"src\": [3, 3]", "\"src\": [13, 13]")
        .replace("\"node\": 4", "\"node\": 14")
        .replace("{\"0\": {\"arange\"", "{\"10\": {\"arange\"");
    let case = load::parse_case(&renumbered).expect("the renumbered case parses");
    faults::set_active(&["fault_mod_drop"]);
    let report = diff(&case);
    faults::set_active(&[]);
    let first = report.expect("diff runs").first.expect("a difference");
    assert!(first.contains("graph node 14"), "{first}");
    assert!(first.contains("--highlight 14"), "{first}");
    assert!(!first.contains("graph %"), "arena ids leak: {first}");
}

/// A wrong rule in a CPU kernel pass: `fault_lanes_order_drop` makes `cpu_split_lanes` fold a
/// REDUCE declared `split(2)` sequentially. On [1e8, 1, −1e8, 1] (float32) the declared order
/// gives 2.0 and the sequential one 1.0 (the case file derives both by hand), so the stages
/// before the pass agree and the one after it differs, pinned to the kernel computing
/// node 1 and to the wrong rule.
#[test]
fn diff_names_the_cpu_pass_of_a_wrong_rule() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus/reduce/add_float32_declared_split.json"),
    )
    .expect("the corpus case");
    let case = load::parse_case(&text).expect("the case parses");
    let clean = diff(&case).expect("diff runs");
    assert!(clean.agrees(), "{:?}", clean.first);
    faults::set_active(&["fault_lanes_order_drop"]);
    let report = diff(&case);
    faults::set_active(&[]);
    let report = report.expect("diff runs");
    let verdicts: Vec<(&str, bool)> = report
        .stages
        .iter()
        .take(6)
        .map(|s| (s.stage.as_str(), s.difference.is_some()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("kernels: lowered", false),
            ("kernels: after pass 'symbolic'", false),
            ("kernels: after pass 'cpu_tile'", false),
            ("kernels: after pass 'cpu_interchange'", false),
            ("kernels: after pass 'cpu_split_lanes'", true),
            ("kernels: after pass 'cpu_threads'", true),
        ]
    );
    let first = report.first.expect("a difference is reported");
    assert!(
        first.starts_with(
            "first difference at stage 'kernels: after pass 'cpu_split_lanes'', kernel pass 'cpu_split_lanes' (culprit rule: fault_lanes_order_drop; fault injection is on)"
        ),
        "{first}"
    );
    assert!(first.contains("graph node 1"), "pinned to node 1: {first}");
    assert!(
        first.contains("writes different values than before the pass"),
        "{first}"
    );
    assert!(first.contains("output 'split2'"), "{first}");
    assert_eq!(report.node, Some(1));
    let Some(uopkit_conformance::pass_trace::TraceSection::Pass(traces)) = &report.trace else {
        panic!("a pass trace: {:?}", report.trace)
    };
    assert_eq!(traces.len(), 1, "the pinned kernel's");
    assert_eq!(traces[0].pass, "cpu_split_lanes");
    assert!(
        traces[0]
            .steps
            .iter()
            .any(|s| s.step.rule == "fault_lanes_order_drop"),
        "{:#?}",
        traces[0]
    );
}
