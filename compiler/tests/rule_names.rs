//! The rewrite trace (`uopkit diff`) names each step by its rule: every rule of every pass has
//! a non-empty name without spaces (`RuleSet::new` checks that names are unique in a set).

use uopkit_compiler::optimize::{finishing, passes, Target};
use uopkit_compiler::rewrite::{rule_sets, RuleSet};

#[test]
fn every_rule_has_a_name() {
    let mut sets: Vec<RuleSet> = rule_sets();
    for t in [Target::Cpu, Target::Gpu] {
        sets.extend(passes(t).into_iter().map(|p| p.rules));
    }
    sets.extend(finishing().into_iter().map(|p| p.rules));
    assert!(sets.len() > 3, "the pass lists are empty");
    for s in &sets {
        assert!(!s.name.is_empty());
        for r in s.rules() {
            assert!(
                !r.name.trim().is_empty() && !r.name.contains(char::is_whitespace),
                "set {}: rule {:?}",
                s.name,
                r.name
            );
        }
    }
}
