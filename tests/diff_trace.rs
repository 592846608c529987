//! `uopkit diff`'s rewrite trace: with the deliberately wrong rule `fault_mod_drop` on (this
//! thread only: the library `harness::diff`), the first difference is the `symbolic` pass and
//! its trace holds the step by `fault_mod_drop`, marked as touching the diverging node. With
//! no fault, the CLI prints no trace; `--trace` takes touching, all or none.

mod common;
use common::{INT_SUM, PERMUTED_RESHAPE};

use uopkit_compiler::rewrite::faults;
use uopkit_conformance::pass_trace::{TraceMode, TraceSection};
use uopkit_conformance::stages::DiffReport;
use uopkit_conformance::{harness, load};

fn diff_with_fault() -> DiffReport {
    let case = load::parse_case(PERMUTED_RESHAPE).expect("the case parses");
    faults::set_active(&["fault_mod_drop"]);
    let report = harness::diff(&case, "", None);
    faults::set_active(&[]);
    report.expect("diff runs")
}

#[test]
fn the_trace_of_the_wrong_pass_marks_the_wrong_rule() {
    let report = diff_with_fault();
    let first = report.first.as_deref().expect("a difference is reported");
    assert!(first.contains("after pass 'symbolic'"), "{first}");
    let Some(TraceSection::Pass(traces)) = &report.trace else {
        panic!("a pass trace is reported: {:?}", report.trace)
    };
    assert_eq!(traces.len(), 1, "one kernel: the pinned one");
    let t = &traces[0];
    assert_eq!((t.pass.as_str(), t.kernel.as_str()), ("symbolic", "k0"));
    let d = t.diverging.as_ref().expect("the diverging node is pinned");
    let wrong: Vec<_> = t
        .steps
        .iter()
        .filter(|s| s.step.rule == "fault_mod_drop")
        .collect();
    assert!(!wrong.is_empty(), "the wrong rule fired: {t:#?}");
    assert!(
        wrong.iter().any(|s| s.touches),
        "a fault_mod_drop step touches the diverging node {d}: {t:#?}"
    );
    // Every step is of the pass and the kernel, numbered in firing order.
    assert!(t
        .steps
        .iter()
        .enumerate()
        .all(|(i, s)| s.number == i + 1 && s.step.pass == "symbolic" && s.step.kernel == "k0"));

    let shown = report
        .trace
        .as_ref()
        .expect("a trace")
        .render(TraceMode::Touching);
    println!("{first}\n\n{shown}");
    assert!(
        shown.starts_with("rewrite trace of pass 'symbolic' in kernel k0"),
        "{shown}"
    );
    assert!(shown.contains(&format!("diverging node: {d}")), "{shown}");
    let marked: Vec<&str> = shown.lines().filter(|l| l.starts_with(">> #")).collect();
    assert!(
        marked.iter().any(|l| l.contains(" fault_mod_drop: ")),
        "the wrong rule's step is marked >>:\n{shown}"
    );
    assert_eq!(marked.len(), t.touching().count(), "{shown}");
    // By default only the touching steps are listed; `all` lists every one.
    let all = report
        .trace
        .as_ref()
        .expect("a trace")
        .render(TraceMode::All);
    let listed = all.lines().filter(|l| l.contains(" #")).count();
    assert_eq!(listed, t.steps.len(), "{all}");
    let hidden = t.steps.len() - t.touching().count();
    if hidden > 0 {
        assert!(
            shown.contains(&format!("({hidden} other step(s)")),
            "{shown}"
        );
    }
    assert_eq!(
        report
            .trace
            .as_ref()
            .expect("a trace")
            .render(TraceMode::None),
        ""
    );
}

#[test]
fn the_trace_is_the_same_every_time() {
    let a = diff_with_fault()
        .trace
        .expect("a trace")
        .render(TraceMode::All);
    let b = diff_with_fault()
        .trace
        .expect("a trace")
        .render(TraceMode::All);
    assert_eq!(a, b);
}

/// A kernel pass (on the kernel graph, not the index arithmetic): the missing barrier is
/// `gpu_local_reduce`'s, and its trace shows the rule that built the local reduction.
#[test]
fn a_gpu_pass_difference_shows_that_passs_trace() {
    let case = load::parse_case(INT_SUM).expect("the case parses");
    faults::set_active(&["fault_gpu_barrier_drop"]);
    let report = harness::diff(&case, "", None);
    faults::set_active(&[]);
    let report = report.expect("diff runs");
    let Some(section) = &report.trace else {
        panic!("a trace section: {:?}", report.first)
    };
    let TraceSection::Pass(traces) = section else {
        panic!("a pass trace: {section:?}")
    };
    assert!(!traces.is_empty());
    let shown = section.render(TraceMode::Touching);
    println!("{shown}");
    assert!(
        shown.starts_with("rewrite trace of pass 'gpu_local_reduce' in kernel k0 (kernel graph)"),
        "{shown}"
    );
    assert!(
        traces
            .iter()
            .flat_map(|t| t.touching())
            .any(|s| s.step.rule == "reduce_to_local_tree"),
        "{shown}"
    );
    assert!(shown.contains(">> #"), "{shown}");
}

#[test]
fn no_trace_without_a_difference() {
    let case = load::parse_case(PERMUTED_RESHAPE).expect("the case parses");
    let report = harness::diff(&case, "", None).expect("diff runs");
    assert!(report.agrees(), "{:?}", report.first);
    assert!(report.trace.is_none(), "{:?}", report.trace);
}

fn uopkit(args: &[&str]) -> (i32, String) {
    let out = common::uopkit(args);
    (out.code, out.all())
}

#[test]
fn the_cli_prints_no_trace_for_a_passing_case() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("permuted_reshape.json");
    std::fs::write(&file, PERMUTED_RESHAPE).expect("write the case");
    let file = file.to_str().expect("utf-8 path");
    for mode in ["touching", "all", "none"] {
        let (code, text) = uopkit(&["diff", file, "--backend", "none", "--trace", mode]);
        assert_eq!(code, 0, "{text}");
        assert!(
            text.contains("every stage agrees with the oracle"),
            "{text}"
        );
        assert!(!text.contains("rewrite trace"), "{text}");
    }
    let (code, text) = uopkit(&["diff", file, "--trace", "some"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("expected touching (the default), all or none"),
        "{text}"
    );
}

/// A wrong rule in a CPU kernel pass, through the CLI (`UOPKIT_TEST_FAULTS`, which only a
/// test build reads): `uopkit diff` lists a stage per CPU pass, names `cpu_split_lanes` and
/// its wrong rule, and prints that pass's trace in the kernel graph, with the rule's step
/// marked.
#[test]
fn the_cli_names_the_cpu_pass_of_a_wrong_rule() {
    let case = "corpus/reduce/add_float32_declared_split.json";
    let out = common::uopkit_with(
        &["diff", case, "--backend", "none"],
        &[("UOPKIT_TEST_FAULTS", "fault_lanes_order_drop")],
        &[],
    );
    let text = out.all();
    assert_eq!(out.code, 1, "{text}");
    for (stage, verdict) in [
        (
            "kernels: after pass 'cpu_interchange'",
            "agrees with the oracle",
        ),
        ("kernels: after pass 'cpu_split_lanes'", "DIFFERS"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(stage) && l.ends_with(verdict)),
            "{stage}: {verdict}\n{text}"
        );
    }
    assert!(
        text.contains(
            "first difference at stage 'kernels: after pass 'cpu_split_lanes'', kernel pass 'cpu_split_lanes' (culprit rule: fault_lanes_order_drop"
        ),
        "{text}"
    );
    assert!(
        text.contains("rewrite trace of pass 'cpu_split_lanes' in kernel"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(">> #") && l.contains(" fault_lanes_order_drop: ")),
        "{text}"
    );
    // Without the fault every stage agrees.
    let clean = common::uopkit_with(
        &["diff", case, "--backend", "none"],
        &[],
        &["UOPKIT_TEST_FAULTS"],
    );
    assert_eq!(clean.code, 0, "{}", clean.all());
}
