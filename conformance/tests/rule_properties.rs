//! Property tests of the compiler's rewrite rules, through the public rule checker
//! (`uopkit_conformance::gen::rulecheck`, feature `testkit`): for every named rule, on random
//! expressions over loop variables, the oracle's result before and after the rewrite is
//! identical, bit for bit (or undefined behaviour on both sides), for every assignment.
//!
//! * One test per rule (`rule_tests!` below), with expressions targeted at the rule plus
//!   general ones, from a fixed seed: deterministic, and each rule must fire.
//! * `registry_*`: fails when a rule of `all_rules()` has no test here (or no targeted
//!   strategy), when a test names a rule that no longer exists, or when a rule never fires;
//!   prints the hit counts.
//! * The whole `symbolic` set on general expressions, and a correct rule on 10,000 cases.
//! * The deliberately wrong rule `fault_mod_drop` (the compiler's `fault-injection` feature,
//!   a dev-dependency of this crate) is found, alone and inside the set, with a shrunk
//!   counterexample; written as a case, it is replayed first on the next run.

use std::collections::BTreeSet;

use uopkit_compiler::rewrite::{all_rules, faults};
use uopkit_conformance::gen::rulecheck::{
    check_rules, CheckConfig, CheckError, Counterexample, Defect, Generator, RuleUnderTest,
    UbChange,
};
use uopkit_conformance::gen::rules::TARGETED;

/// Cases per rule and the seed: enough for every rule to fire (the registry test checks).
fn cfg() -> CheckConfig {
    CheckConfig {
        cases: 192,
        seed: 0x5eed_2026,
        ..CheckConfig::default()
    }
}

fn check(
    name: &str,
    cfg: &CheckConfig,
) -> Result<uopkit_conformance::gen::rulecheck::CheckReport, CheckError> {
    let rut = RuleUnderTest::named(name).unwrap_or_else(|e| panic!("{e}"));
    check_rules(&rut, cfg)
}

macro_rules! rule_tests {
    ($($name:ident),* $(,)?) => {
        /// The rules that have a property test in this file.
        const TESTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                let rule = stringify!($name);
                let report = check(rule, &cfg()).unwrap_or_else(|e| panic!("rule {rule} is not exact: {e}"));
                assert!(report.hit(rule) > 0, "rule {rule} never fired on {} expressions", report.cases);
            }
        )*
    };
}

rule_tests!(
    fold_const_unary,
    fold_const_binary,
    fold_const_ternary,
    fold_cast_const,
    fold_bitcast_const,
    add_zero,
    sub_zero,
    sub_self,
    mul_one,
    mul_zero_int,
    neg_neg,
    div_one,
    mod_one,
    and_self,
    or_self,
    xor_self,
    and_zero,
    and_all_ones,
    or_zero,
    or_all_ones,
    xor_zero,
    max_self,
    add_const_chain,
    mul_const_chain,
    div_of_small,
    mod_of_small,
    div_mul_cancel,
    mod_mul_zero,
    div_affine,
    mod_affine,
    div_div,
    mod_mod,
    cmplt_self,
    cmpne_self,
    cmpeq_self,
    cmplt_range,
    cmpne_range,
    cmpeq_range,
    where_const_cond,
    where_same,
    where_true_false,
    max_range,
    cast_noop,
    cast_widen_chain,
);

#[test]
fn registry_every_rule_has_a_property_test_that_fires() {
    let all: BTreeSet<&str> = all_rules().iter().map(|(_, r)| *r).collect();
    let tested: BTreeSet<&str> = TESTED.iter().copied().collect();
    let targeted: BTreeSet<&str> = TARGETED.iter().map(|(n, _)| *n).collect();
    let untested: Vec<_> = all.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "rules without a property test (add them to rule_tests! in conformance/tests/rule_properties.rs): {untested:?}"
    );
    let untargeted: Vec<_> = all.difference(&targeted).collect();
    assert!(
        untargeted.is_empty(),
        "rules without a targeted strategy (add them to TARGETED in conformance/src/gen/rules.rs): {untargeted:?}"
    );
    let stale: Vec<_> = tested.difference(&all).collect();
    assert!(
        stale.is_empty(),
        "property tests for rules that do not exist: {stale:?}"
    );
    // Hit counts with the tests' seed and config: every rule fires.
    let mut table = String::new();
    let mut never = vec![];
    for rule in &all {
        let r = check(rule, &cfg()).unwrap_or_else(|e| panic!("rule {rule}: {e}"));
        table += &format!(
            "  {rule:<20} fired on {:>3} of {} expressions, {:>4} hits\n",
            r.fired_cases,
            r.cases,
            r.hit(rule)
        );
        if r.hit(rule) == 0 {
            never.push(*rule);
        }
    }
    println!(
        "rule hit counts (seed {:#x}, {} cases per rule, both rewrite orders):\n{table}",
        cfg().seed,
        cfg().cases
    );
    assert!(
        never.is_empty(),
        "rules the generators never make fire: {never:?}\n{table}"
    );
}

#[test]
fn the_whole_symbolic_set_is_exact_on_general_expressions() {
    let c = CheckConfig {
        cases: 512,
        generator: Generator::General,
        ..cfg()
    };
    let r = check("symbolic", &c).unwrap_or_else(|e| panic!("{e}"));
    println!("{r}");
    assert_eq!(r.cases, 512);
    assert!(
        r.fired_cases > 100,
        "{} of {} expressions simplified",
        r.fired_cases,
        r.cases
    );
    assert!(r.hits.len() >= 20, "{:?}", r.hits);
}

/// The budget: a correct rule passes at least 10,000 generated cases (in chunks of
/// derived seeds), and fires on many of them.
#[test]
fn a_correct_rule_passes_ten_thousand_cases() {
    let c = CheckConfig {
        cases: 10_000,
        ..cfg()
    };
    let r = check("mod_of_small", &c).unwrap_or_else(|e| panic!("{e}"));
    println!("{r}");
    assert_eq!(r.cases, 10_000);
    assert!(r.hit("mod_of_small") > 1000, "{r}");
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

fn expect_counterexample(
    r: Result<uopkit_conformance::gen::rulecheck::CheckReport, CheckError>,
) -> Counterexample {
    match r {
        Err(CheckError::Counterexample(c)) => *c,
        other => panic!("expected a counterexample, got {other:?}"),
    }
}

/// `x % c → x` for 0 ≤ x < 2c is wrong for c ≤ x: the checker finds it, shrunk to `r % c`
/// (4 nodes: the loop variable, its end, c, the modulo), with both results' bits where they
/// differ.
fn assert_mod_drop(c: &Counterexample) {
    let text = c.to_string();
    println!("{text}");
    assert!(c.size() <= 6, "not shrunk: {} nodes\n{text}", c.size());
    assert!(c.fired.contains_key("fault_mod_drop"), "{text}");
    let Defect::Differs { at, before, after } = &c.defect else {
        panic!("{text}");
    };
    // Where they differ, the rewritten value is the loop variable itself and the right one is
    // smaller (x % c < x for x ≥ c > 0).
    let (Ok(b), Ok(a)) = (before, after) else {
        panic!("{text}")
    };
    assert!(b < a, "{text}");
    assert!(at.values().any(|&v| v as u64 == *a), "{text}");
    assert_eq!(c.ub_change(), UbChange::None);
    assert!(text.contains("input:") && text.contains("rewritten:") && text.contains("before:"));
    assert!(text.contains("MOD"), "{text}");
}

#[test]
fn the_checker_finds_and_shrinks_the_wrong_rule_fault_mod_drop() {
    let (alone, in_set) = with_fault(|| {
        let alone = check("fault_mod_drop", &cfg());
        let general = CheckConfig {
            generator: Generator::General,
            ..cfg()
        };
        let set = RuleUnderTest::named("symbolic").expect("the symbolic set");
        (alone, check_rules(&set, &general))
    });
    assert_mod_drop(&expect_counterexample(alone));
    let in_set = expect_counterexample(in_set);
    println!("in the symbolic set:\n{in_set}");
    assert!(in_set.fired.contains_key("fault_mod_drop"), "{in_set}");
    // With the fault off again, this thread's rule set is the right one.
    let RuleUnderTest::Rules { set, .. } = RuleUnderTest::named("symbolic").unwrap() else {
        unreachable!()
    };
    assert!(!set.names().contains(&"fault_mod_drop"));
}

/// A counterexample is written as a case (tagged `rule` and the rule's name, loadable, its
/// expected values the right ones: `x % c`), and the next run replays it before generating
/// anything: with `cases: 0` it fails from the file alone; with the fault off it passes.
#[test]
fn counterexamples_persist_and_are_replayed_first() {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = CheckConfig {
        regressions: Some(dir.path().to_path_buf()),
        ..cfg()
    };
    let first = expect_counterexample(with_fault(|| check("fault_mod_drop", &with_dir)));
    let path = first
        .written_to
        .clone()
        .unwrap_or_else(|| panic!("not written: {first}"));
    assert!(first.replayed_from.is_none());
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("rule_") && name.ends_with(".json"),
        "{name}"
    );
    let case = uopkit_conformance::load::read_case(&path).unwrap();
    assert!(
        case.tags.contains(&"rule".to_string())
            && case.tags.contains(&"fault_mod_drop".to_string())
    );
    // The oracle trial of the written case passes (its values are x % c, what the input means).
    uopkit_conformance::run::run_oracle(&case).unwrap();
    // Replayed first: no generated case at all, and it still fails, from the file.
    let replay_only = CheckConfig {
        cases: 0,
        ..with_dir.clone()
    };
    let again = expect_counterexample(with_fault(|| check("fault_mod_drop", &replay_only)));
    assert_eq!(again.replayed_from.as_deref(), Some(path.as_path()));
    assert_eq!(format!("{:?}", again.input), format!("{:?}", first.input));
    assert_eq!(again.defect, first.defect);
    // Nothing new was written by the replay.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // The fix (the right rules, checked under the persisted counterexample's name) passes it.
    let fixed = RuleUnderTest::Rules {
        name: "fault_mod_drop".into(),
        set: uopkit_compiler::rewrite::symbolic(),
    };
    let ok = check_rules(&fixed, &replay_only).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((ok.replayed, ok.cases), (1, 0));
}

#[test]
fn an_unknown_name_lists_the_known_ones() {
    let e = RuleUnderTest::named("no_such_rule").err().expect("unknown");
    let text = e.to_string();
    assert!(
        text.contains("no_such_rule") && text.contains("symbolic") && text.contains("mod_affine"),
        "{text}"
    );
}
