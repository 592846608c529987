//! Term rewriting over the hash-consed UOp graph (tinygrad's `PatternMatcher` +
//! `graph_rewrite`), with rules as data.
//!
//! * [`pattern`]: [`Pat`], patterns over nodes with named captures ([`Captures`]).
//! * [`engine`]: [`Rule`] (name, pattern, rewrite function), [`RuleSet`] (rules in priority
//!   order) and [`rewrite`], a bounded fixpoint with an explicit [`StopReason`].
//! * [`range`]: value ranges (`vmin`/`vmax`) of integer expressions and a UB-freedom check.
//! * [`symbolic`]: constant folding and exact integer/index simplification.
//! * [`trace`]: an optional record of every rule application ([`rewrite_traced`]), for
//!   `uopkit diff`'s rewrite trace.
//!
//! [`all_rules`] lists every rule of every rule set, for fuzzing and coverage.

pub mod engine;
pub mod faults;
pub mod pattern;
pub mod range;
pub mod symbolic;
pub mod trace;

pub use engine::{
    rewrite, rewrite_traced, Order, RewriteFn, RewriteOpts, RewriteResult, Rule, RuleSet,
    StopReason,
};
pub use pattern::{Captures, Pat};
pub use range::{ub_free, vmax, vmin, vrange, Ranges, VRange};
pub use symbolic::{simplify, symbolic};
pub use trace::{RewriteTrace, TraceGraph};

/// Every rule set this module defines.
pub fn rule_sets() -> Vec<RuleSet> {
    vec![symbolic()]
}

/// Every rule of every rule set, as `(set name, rule name)`, sets in [`rule_sets`] order and
/// rules in priority order.
pub fn all_rules() -> Vec<(&'static str, &'static str)> {
    rule_sets()
        .iter()
        .flat_map(|s| {
            s.rules()
                .iter()
                .map(|r| (s.name, r.name))
                .collect::<Vec<_>>()
        })
        .collect()
}
