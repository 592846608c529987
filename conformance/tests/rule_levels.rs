//! The rule checker on whole programs (`uopkit_conformance::gen::rulecheck_levels`, feature
//! `testkit`): the real `symbolic` set is exact on generated tensor programs and kernels; a
//! deliberately wrong rewrite is caught at each level, shrunk, with both results' bits; a
//! tensor-level counterexample is written as a case and replayed first.

use uopkit_compiler::rewrite::faults;
use uopkit_conformance::gen::rulecheck::RuleUnderTest;
use uopkit_conformance::gen::rulecheck_levels::{
    check_rules_on_kernels, check_rules_on_tensors, LevelConfig, LevelCounterexample, LevelError,
    LevelReport, LevelUb,
};
use uopkit_interp::ir::{Graph, Node, NodeId, Op};

fn cfg(cases: u32) -> LevelConfig {
    LevelConfig {
        cases,
        seed: 0x5eed_2026,
        ..LevelConfig::default()
    }
}

fn named(name: &str) -> RuleUnderTest {
    RuleUnderTest::named(name).unwrap_or_else(|e| panic!("{e}"))
}

fn expect_counterexample(r: Result<LevelReport, LevelError>) -> LevelCounterexample {
    match r {
        Err(LevelError::Counterexample(c)) => *c,
        other => panic!("expected a counterexample, got {other:?}"),
    }
}

/// Runs `f` with `fault_mod_drop` on for this thread (off again even when `f` panics).
fn with_fault<T>(f: impl FnOnce() -> T) -> T {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            faults::set_active(&[]);
        }
    }
    faults::set_active(&["fault_mod_drop"]);
    let _off = Off;
    f()
}

/// A wrong rewriter: every integer ADD becomes a SUB (the same dtype and shape, so the graph
/// still verifies; the values differ wherever the second operand is not 0).
fn add_to_sub(g: &Graph, roots: &[NodeId]) -> (Graph, Vec<NodeId>) {
    let mut out = Graph::new();
    let mut map = std::collections::BTreeMap::new();
    for id in g.reachable(roots) {
        let n = g.node(id);
        let op = if n.op == Op::ADD && n.dtype.is_int() {
            Op::SUB
        } else {
            n.op
        };
        let new = out.add(Node {
            op,
            src: n.src.iter().map(|s| map[s]).collect(),
            ..n.clone()
        });
        map.insert(id, new);
    }
    let roots = roots.iter().map(|r| map[r]).collect();
    (out, roots)
}

#[test]
fn symbolic_is_exact_on_tensor_programs() {
    let r = check_rules_on_tensors(&named("symbolic"), &cfg(300)).unwrap_or_else(|e| panic!("{e}"));
    println!("{r}");
    assert_eq!(r.cases + r.skipped, 300, "{r}");
    assert!(r.cases >= 250, "most generated programs run: {r}");
    assert!(
        r.fired_cases > 0,
        "symbolic never fired on a tensor program: {r}"
    );
}

#[test]
fn symbolic_is_exact_on_kernels() {
    let r = check_rules_on_kernels(&named("symbolic"), &cfg(300)).unwrap_or_else(|e| panic!("{e}"));
    println!("{r}");
    assert_eq!(r.cases + r.skipped, 300, "{r}");
    assert!(r.cases >= 250, "most generated kernels run: {r}");
    assert!(r.fired_cases > 0, "symbolic never fired on a kernel: {r}");
}

/// The kernel generator's workgroup exchange reads `local[(l + shift) % lanes]`, which
/// `fault_mod_drop` (`x % c → x` for 0 ≤ x < 2c) rewrites wrongly once `l + shift ≥ lanes`.
#[test]
fn fault_mod_drop_is_caught_on_kernels() {
    let c = expect_counterexample(with_fault(|| {
        check_rules_on_kernels(&named("fault_mod_drop"), &cfg(300))
    }));
    let text = c.to_string();
    println!("{text}");
    assert!(c.fired.contains_key("fault_mod_drop"), "{text}");
    assert!(
        text.contains("kernel-level") && text.contains("rewritten:"),
        "{text}"
    );
    // Both programs are printed: the input reads through the modulo, the rewritten one not.
    assert!(c.input.contains("MOD"), "{text}");
    assert!(!c.rewritten.contains("MOD"), "{text}");
    assert!(
        c.detail.contains("reference") && c.detail.contains("variant"),
        "{text}"
    );
}

/// At the tensor level `x % c` is an elementwise op on whole tensors; the generator masks
/// some dividends to a small range (`(t & m) % c`, as an index is), which is where
/// `fault_mod_drop` (`x % c → x` for 0 ≤ x < 2c) matches: it is caught, shrunk to a small
/// program, written as a case and replayed first.
#[test]
fn fault_mod_drop_is_caught_on_tensor_programs_shrunk_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = LevelConfig {
        regressions: Some(dir.path().to_path_buf()),
        ..cfg(2000)
    };
    // The fault's name is known only while it is on.
    let c = expect_counterexample(with_fault(|| {
        check_rules_on_tensors(&named("fault_mod_drop"), &with_dir)
    }));
    let text = c.to_string();
    println!("{text}");
    assert!(c.fired.contains_key("fault_mod_drop"), "{text}");
    assert!(text.contains("tensor-level"), "{text}");
    assert!(c.input.contains("mod("), "{text}");
    assert!(c.detail.contains("bits"), "{text}");
    assert_eq!(c.ub, LevelUb::None, "{text}");
    assert!(
        c.nodes_before <= 12,
        "not shrunk: {} nodes\n{text}",
        c.nodes_before
    );
    let path = c
        .written_to
        .clone()
        .unwrap_or_else(|| panic!("not written: {text}"));
    let case = uopkit_conformance::load::read_case(&path).unwrap();
    assert!(case.tags.contains(&"fault_mod_drop".to_string()));
    uopkit_conformance::run::check_oracle(&case).unwrap();
    let replay_only = LevelConfig {
        cases: 0,
        ..with_dir.clone()
    };
    let again = expect_counterexample(with_fault(|| {
        check_rules_on_tensors(&named("fault_mod_drop"), &replay_only)
    }));
    assert_eq!(again.replayed_from.as_deref(), Some(path.as_path()));
}

/// The real `symbolic` passes the same 2000 tensor programs, and its own range-dependent
/// modulo rule (`mod_of_small`: `x % c → x` for 0 ≤ x < c) fires on them.
#[test]
fn symbolic_passes_the_tensor_budget_that_catches_fault_mod_drop() {
    let r =
        check_rules_on_tensors(&named("symbolic"), &cfg(2000)).unwrap_or_else(|e| panic!("{e}"));
    println!("{r}");
    assert_eq!(r.cases + r.skipped, 2000, "{r}");
    assert!(r.hit("mod_of_small") > 0, "{r}");
}

#[test]
fn a_wrong_rewriter_is_caught_on_kernels() {
    let rut = RuleUnderTest::closure("add_to_sub", add_to_sub);
    let c = expect_counterexample(check_rules_on_kernels(&rut, &cfg(300)));
    let text = c.to_string();
    println!("{text}");
    assert!(c.input.contains("ADD"), "{text}");
    assert!(c.rewritten.contains("SUB"), "{text}");
}

/// At the tensor level the wrong rewriter is caught and shrunk to a small program, and the
/// counterexample is written as a case (`rule_<id>.json`, tagged `rule-tensor` and the name,
/// its expected values the oracle's for the input) and replayed first by the next check.
#[test]
fn a_wrong_rewriter_is_caught_on_tensor_programs_persisted_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = LevelConfig {
        regressions: Some(dir.path().to_path_buf()),
        ..cfg(300)
    };
    let rut = RuleUnderTest::closure("add_to_sub", add_to_sub);
    let c = expect_counterexample(check_rules_on_tensors(&rut, &with_dir));
    let text = c.to_string();
    println!("{text}");
    assert!(
        c.detail.contains("before") && c.detail.contains("after"),
        "{text}"
    );
    if c.ub == LevelUb::None {
        assert!(c.detail.contains("bits"), "{text}");
    }
    assert!(
        c.nodes_before <= 12,
        "not shrunk: {} nodes\n{text}",
        c.nodes_before
    );
    let path = c
        .written_to
        .clone()
        .unwrap_or_else(|| panic!("not written: {text}"));
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("rule_") && name.ends_with(".json"),
        "{name}"
    );
    let case = uopkit_conformance::load::read_case(&path).unwrap();
    assert!(case.tags.contains(&"rule-tensor".to_string()));
    assert!(case.tags.contains(&"add_to_sub".to_string()));
    uopkit_conformance::run::run_oracle(&case).unwrap();
    // Replayed first, from the file alone.
    let replay_only = LevelConfig {
        cases: 0,
        ..with_dir.clone()
    };
    let again = expect_counterexample(check_rules_on_tensors(&rut, &replay_only));
    assert_eq!(again.replayed_from.as_deref(), Some(path.as_path()));
    assert_eq!(again.detail, c.detail);
    // A right rewriter under that name passes the replay.
    let fine = RuleUnderTest::closure("add_to_sub", |g: &Graph, r: &[NodeId]| {
        (g.clone(), r.to_vec())
    });
    let ok = check_rules_on_tensors(&fine, &replay_only).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ok.replayed, ok.cases), (1, 0));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A file in the regressions folder that cannot be read as a case is not skipped: the check
/// stops with a replay error naming it, at the tensor level and at the expression level.
#[test]
fn an_unreadable_regression_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("rule_add_to_sub_0001.json");
    std::fs::write(&bad, "{ not a case").unwrap();
    let rut = RuleUnderTest::closure("add_to_sub", add_to_sub);
    let with_dir = LevelConfig {
        regressions: Some(dir.path().to_path_buf()),
        ..cfg(0)
    };
    match check_rules_on_tensors(&rut, &with_dir) {
        Err(LevelError::Replay(m)) => {
            assert!(
                m.contains("rule_add_to_sub_0001.json") && m.contains("not replayed"),
                "{m}"
            )
        }
        other => panic!("expected a replay error, got {other:?}"),
    }
    let expr_cfg = uopkit_conformance::gen::rulecheck::CheckConfig {
        cases: 0,
        regressions: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    match uopkit_conformance::gen::rulecheck::check_rules(&named("symbolic"), &expr_cfg) {
        Err(uopkit_conformance::gen::rulecheck::CheckError::Replay(m)) => {
            assert!(m.contains("rule_add_to_sub_0001.json"), "{m}")
        }
        other => panic!("expected a replay error, got {other:?}"),
    }
}

/// At the kernel level the counterexample is written as a kernel-level case
/// (`rule_<name>_<id>.json`, tagged `rule-kernel` and the name, its expected buffers the
/// kernel interpreter's for the input program, which the oracle's trial passes) and replayed
/// first by the next check of that name, from the file alone.
#[test]
fn fault_mod_drop_on_kernels_is_persisted_as_a_kernel_case_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = LevelConfig {
        regressions: Some(dir.path().to_path_buf()),
        ..cfg(300)
    };
    let c = expect_counterexample(with_fault(|| {
        check_rules_on_kernels(&named("fault_mod_drop"), &with_dir)
    }));
    let text = c.to_string();
    println!("{text}");
    let path = c
        .written_to
        .clone()
        .unwrap_or_else(|| panic!("not written: {text}"));
    assert!(text.contains("written to"), "{text}");
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("rule_fault_mod_drop_") && name.ends_with(".json"),
        "{name}"
    );
    let case = uopkit_conformance::load::read_case(&path).unwrap();
    for tag in ["regression", "rule-kernel", "fault_mod_drop"] {
        assert!(case.tags.iter().any(|t| t == tag), "{tag}: {:?}", case.tags);
    }
    let body = case.kernel.as_ref().expect("a kernel-level case");
    uopkit_conformance::kernel_case::judge(&case, body)
        .expect("the oracle's trial of the input program passes");
    // Replayed first, from the file alone (no generated kernels).
    let replay_only = LevelConfig {
        cases: 0,
        ..with_dir.clone()
    };
    let again = expect_counterexample(with_fault(|| {
        check_rules_on_kernels(&named("fault_mod_drop"), &replay_only)
    }));
    assert_eq!(
        again.replayed_from.as_deref(),
        Some(path.as_path()),
        "{again}"
    );
    assert!(again.fired.contains_key("fault_mod_drop"), "{again}");
    assert_eq!(again.detail, c.detail, "{again}");
    // A right rewriter under that name passes the replay.
    let fine = RuleUnderTest::closure("fault_mod_drop", |g: &Graph, r: &[NodeId]| {
        (g.clone(), r.to_vec())
    });
    let ok = check_rules_on_kernels(&fine, &replay_only).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ok.replayed, ok.cases), (1, 0), "{ok}");
    // The tensor level does not replay kernel-level cases.
    let t = check_rules_on_tensors(&fine, &replay_only).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.replayed, 0, "{t}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
