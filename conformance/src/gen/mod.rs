//! Generators of random, well-typed graphs and values, for property tests and fuzzing.
//!
//! * [`tensor`]: proptest strategies for tensor-level programs (elementwise, movement,
//!   reduce, cast, copy, clone, assign; multi-device behind a flag), built with the tensor
//!   builder and exported as [`crate::case::Case`]s. The differential fuzzer
//!   ([`crate::fuzz`]) runs them through the compiler and the oracle.
//! * [`expr`]: proptest strategies for kernel-level ALU and index expressions over loop
//!   variables (`RANGE` leaves), and their meaning according to the oracle.
//! * [`rules`]: the property every rewrite rule must have (the oracle's result before and
//!   after the rewrite is identical), with a targeted strategy per named rule.
//! * [`rulecheck`]: the rule checker, a feature for users: a rule set, one rule or any
//!   rewriter, checked on generated expressions, with shrunk counterexamples persisted as
//!   cases and replayed first (docs/rule-fuzzing.md; `uopkit fuzz-rules`).
//! * [`scalar`]: generators of dtypes and scalar values (quickcheck `Arbitrary` impls and
//!   seeded proptest strategies from one source of words), and the algebraic laws of
//!   `uopkit_interp::scalar` (in its tests, seeded: failures reproduce).
//!
//! `rules`, `rulecheck`, `scalar` and the proptest strategies of `expr` and `tensor` exist
//! with the crate's `testkit` feature only (it brings proptest and quickcheck; the `uopkit`
//! binary enables it); the builders, the exporter and the oracle's meaning do not need it.
//! * [`export`]: a graph (with buffer contents and outputs) as a case.
//! * [`tinygrad_rules`]: tinygrad's own rule sets (`bridges/tinygrad/rules.py`) checked the same way (`testkit`).
//! * [`kernel`]: random valid kernels (loops, gated loads, reductions, local buffers and
//!   barriers) as kernel graphs, from a seed, for the kernel-level fuzzer ([`crate::kfuzz`]).
//!
//! Everything is deterministic given a seed ([`rules::seeded_runner`]). Inputs are generated
//! so that undefined behaviour is rare (small values, positive divisors, masked shift
//! counts); where it still happens, the oracle's UB report is the outcome (a fuzzer skips
//! such cases, the rule properties require UB on both sides).

pub mod export;
pub mod expr;
pub mod kernel;
#[cfg(feature = "testkit")]
pub mod rulecheck;
#[cfg(feature = "testkit")]
pub mod rulecheck_levels;
#[cfg(feature = "testkit")]
pub mod rules;
#[cfg(feature = "testkit")]
pub mod scalar;
pub mod tensor;
#[cfg(feature = "testkit")]
pub mod tinygrad_rules;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use uopkit_interp::ir::{table, NodeId, Op};

    use super::expr::{ExprBuilder, ExprConfig};
    use super::tensor::{build, Recipe, TensorConfig, STEP_WORDS};
    use crate::inputs::SplitMix64;

    /// Every ALU op of the op table appears in what the generators make (expressions and
    /// tensor programs together) on a few hundred seeded tapes.
    #[test]
    fn generators_produce_every_alu_op() {
        let mut seen = BTreeSet::new();
        let mut rng = SplitMix64(0x00b7_ab1e);
        for _ in 0..400 {
            let tape: Vec<u32> = (0..96).map(|_| rng.next_u64() as u32).collect();
            let mut b = ExprBuilder::new(&tape, ExprConfig::default());
            let dt = b.any_dtype();
            let root = b.expr(dt, 3);
            let e = b.finish(root);
            seen.extend((0..e.graph.len()).map(|i| e.graph.node(NodeId(i as u32)).op));
            let steps = (0..8)
                .map(|_| std::array::from_fn::<u32, STEP_WORDS, _>(|_| rng.next_u64() as u32))
                .collect();
            let g = build(&Recipe { steps }, &TensorConfig::default());
            seen.extend(g.case.graph.iter().map(|n| n.op));
        }
        let missing: Vec<Op> = table::alu_ops().filter(|o| !seen.contains(o)).collect();
        assert!(missing.is_empty(), "never generated: {missing:?}");
    }
}
