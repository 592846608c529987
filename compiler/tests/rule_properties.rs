//! Property tests of the rewrite rules: for every named rule, on random expressions over loop
//! variables, the oracle's result before and after the rewrite is identical, bit for bit
//! (or undefined behaviour on both sides), for every assignment of the variables.
//!
//! * One test per rule (`rule_tests!` below), with expressions targeted at the rule plus
//!   general ones, from a fixed seed: deterministic, and each rule must fire.
//! * `registry_*`: fails when a rule of `all_rules()` has no test here (or no targeted
//!   strategy), when a test names a rule that no longer exists, or when a rule never fires;
//!   prints the hit counts.
//! * The whole `symbolic` set on general expressions.
//! * With the `fault-injection` feature (on in workspace test runs): the deliberately wrong
//!   rule `fault_mod_drop` must make the property FAIL, alone and inside the set.
//!
//! The generators and the property live in `uopkit-conformance` (`src/gen/expr.rs`,
//! `src/gen/rules.rs`); they name no `crate::` path, so they are included here as modules
//! (the conformance crate depends on this one, so it cannot be a dependency of its tests).

#[allow(dead_code)]
#[path = "../../conformance/src/gen/expr.rs"]
mod expr;
#[allow(dead_code)]
#[path = "../../conformance/src/gen/rules.rs"]
mod rules;

use std::collections::BTreeSet;

use rules::{check_property, check_rule, general, PropertyConfig, TARGETED};
use uopkit_compiler::rewrite::{all_rules, symbolic};

/// Cases per rule and the seed: enough for every rule to fire (the registry test checks).
const CFG: PropertyConfig = PropertyConfig {
    cases: 192,
    seed: 0x5eed_2026,
    max_shrink_iters: 4096,
};

macro_rules! rule_tests {
    ($($name:ident),* $(,)?) => {
        /// The rules that have a property test in this file.
        const TESTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                let rule = stringify!($name);
                let stats = check_rule(rule, CFG).unwrap_or_else(|e| panic!("rule {rule} is not exact: {e}"));
                assert!(stats.hit(rule) > 0, "rule {rule} never fired on {} expressions", stats.cases);
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
        "rules without a property test (add them to rule_tests! in compiler/tests/rule_properties.rs): {untested:?}"
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
        let stats = check_rule(rule, CFG).unwrap_or_else(|e| panic!("rule {rule}: {e}"));
        table += &format!(
            "  {rule:<20} fired on {:>3} of {} expressions, {:>4} hits\n",
            stats.fired_cases,
            stats.cases,
            stats.hit(rule)
        );
        if stats.hit(rule) == 0 {
            never.push(*rule);
        }
    }
    println!(
        "rule hit counts (seed {:#x}, {} cases per rule, both rewrite orders):\n{table}",
        CFG.seed, CFG.cases
    );
    assert!(
        never.is_empty(),
        "rules the generators never make fire: {never:?}\n{table}"
    );
}

#[test]
fn the_whole_symbolic_set_is_exact_on_general_expressions() {
    let cfg = PropertyConfig { cases: 512, ..CFG };
    let stats = check_property(&symbolic(), general(), cfg).unwrap_or_else(|e| panic!("{e}"));
    println!("symbolic on general expressions: {stats:?}");
    assert!(
        stats.fired_cases > 100,
        "{} of {} expressions simplified",
        stats.fired_cases,
        stats.cases
    );
    assert!(stats.hits.len() >= 20, "{:?}", stats.hits);
}

/// The property machinery finds the deliberately wrong rule `x % c → x` (for 0 ≤ x < 2c).
#[cfg(feature = "fault-injection")]
#[test]
fn the_property_catches_the_wrong_rule_fault_mod_drop() {
    use uopkit_compiler::rewrite::faults;
    faults::set_active(&["fault_mod_drop"]);
    // Alone, with its targeted strategy (x % c over small ranges, index arithmetic).
    let alone = check_rule("fault_mod_drop", CFG);
    // First in the whole set (as a compile with the fault would use it), general expressions.
    let in_set = check_property(&symbolic(), general(), CFG);
    faults::set_active(&[]);
    let alone = alone.expect_err("the property must FAIL for fault_mod_drop");
    let in_set = in_set.expect_err("the property must FAIL for the set holding fault_mod_drop");
    println!("fault_mod_drop alone:\n{alone}\n\nin the symbolic set:\n{in_set}");
    assert!(alone.contains("not the same at"), "{alone}");
    assert!(in_set.contains("fault_mod_drop"), "{in_set}");
    // With the fault off again, this thread's rule set is the right one.
    assert!(!symbolic().names().contains(&"fault_mod_drop"));
}
