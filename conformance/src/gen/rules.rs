//! Property tests for rewrite rules: on random expressions, the oracle's result before and
//! after a rewrite is identical, bit for bit (or undefined on both sides), for every
//! assignment of the loop variables.
//!
//! * [`rewrite_checked`] rewrites one expression and checks that property.
//! * [`check_property`] runs it on `cases` expressions drawn from a strategy with a fixed
//!   seed (deterministic), counting how often each rule fired; a failure comes back
//!   shrunk by proptest to a small counterexample.
//! * [`strategy_for_rule`] is the strategy each named rule is tested with: expressions
//!   shaped to meet that rule (so every rule fires) mixed with general random ones.
//!   [`TARGETED`] lists the rules that have one; a rule missing from it has no property test.
//!
//! The public rule checker built on these is `gen::rulecheck` (docs/rule-fuzzing.md); the
//! compiler's rules are tested with it in `conformance/tests/rule_properties.rs`.

use std::cell::RefCell;
use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use uopkit_compiler::rewrite::{
    rewrite, rule_sets, Order, RewriteOpts, RewriteResult, RuleSet, StopReason,
};
use uopkit_interp::ir::{DType, NodeId, Op};

use super::expr::{
    built_with, expr, index_expr, same_meaning, show, Expr, ExprBuilder, ExprConfig, INTS,
};

use DType::*;

/// A rule set holding only the rule `name` (from any of the compiler's rule sets; faults
/// switched on for this thread included).
pub fn only(name: &str) -> Option<RuleSet> {
    let rule = rule_sets()
        .into_iter()
        .flat_map(|s| s.rules().to_vec())
        .find(|r| r.name == name)?;
    Some(RuleSet::new("only", vec![rule]))
}

/// Rewrites `e` with `rules` (at most 64 passes) and checks that the result means what `e`
/// means. Ok with the rewrite's result (hit counts included).
pub fn rewrite_checked(e: &Expr, rules: &RuleSet, order: Order) -> Result<RewriteResult, String> {
    let mut g = e.graph.clone();
    let opts = RewriteOpts {
        order,
        ..RewriteOpts::default()
    }
    .max_iterations(64);
    let r = rewrite(&mut g, &[e.root], rules, opts);
    if r.total_hits() == 0 {
        return Ok(r);
    }
    let after = r.roots[0];
    let context = || {
        format!(
            "\n  before: {}\n  after:  {}\n  fired:  {:?} ({order:?})",
            show(&g, e.root),
            show(&g, after),
            r.hits
        )
    };
    if r.stop != StopReason::FixedPoint {
        return Err(format!("no fixed point: {:?}{}", r.stop, context()));
    }
    same_meaning(&g, e.root, after).map_err(|m| format!("{m}{}", context()))?;
    Ok(r)
}

/// How a property run went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PropertyStats {
    /// Expressions checked.
    pub cases: u32,
    /// Expressions on which some rule fired.
    pub fired_cases: u32,
    /// Firings per rule, over all cases and both rewrite orders.
    pub hits: BTreeMap<&'static str, usize>,
}

impl PropertyStats {
    pub fn hit(&self, rule: &str) -> usize {
        self.hits.get(rule).copied().unwrap_or(0)
    }
}

/// Cases and seed of a property run.
#[derive(Clone, Copy, Debug)]
pub struct PropertyConfig {
    pub cases: u32,
    pub seed: u64,
    /// Shrinking steps proptest may take on a failure.
    pub max_shrink_iters: u32,
}

impl Default for PropertyConfig {
    fn default() -> Self {
        PropertyConfig {
            cases: 256,
            seed: 0x5eed_2026,
            max_shrink_iters: 4096,
        }
    }
}

/// A proptest configuration with every field set here, none from the environment:
/// `Config::default()` reads `PROPTEST_CASES`, `PROPTEST_MAX_SHRINK_ITERS`,
/// `PROPTEST_MAX_SHRINK_TIME`, `PROPTEST_MAX_LOCAL_REJECTS`, `PROPTEST_MAX_GLOBAL_REJECTS`,
/// `PROPTEST_MAX_FLAT_MAP_REGENS`, `PROPTEST_MAX_DEFAULT_SIZE_RANGE`, `PROPTEST_VERBOSE`,
/// `PROPTEST_RNG_ALGORITHM` and `PROPTEST_RNG_SEED`, so a seeded run built on it would
/// change with them. No `PROPTEST_*` variable changes a run of this configuration. (The
/// workspace builds proptest without its `fork` and `timeout` features, so their fields
/// do not exist; enabling them makes this fail to compile until they are set here too.)
pub fn fixed_config(cases: u32, max_shrink_iters: u32) -> Config {
    Config {
        cases,
        max_local_rejects: 65_536,
        max_global_rejects: 1024,
        max_flat_map_regens: 1_000_000,
        failure_persistence: None,
        source_file: None,
        test_name: None,
        max_shrink_time: 0,
        max_shrink_iters,
        max_default_size_range: 100,
        result_cache: proptest::test_runner::noop_result_cache,
        verbose: 0,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: proptest::test_runner::RngSeed::Random,
        _non_exhaustive: (),
    }
}

/// A proptest runner with a fixed seed: the same cases on every run and machine, whatever
/// the `PROPTEST_*` environment variables say ([`fixed_config`]); nothing is persisted.
pub fn seeded_runner(cases: u32, seed: u64, max_shrink_iters: u32) -> TestRunner {
    let config = fixed_config(cases, max_shrink_iters);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&(!seed).to_le_bytes());
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Checks that every rewrite `rules` make on expressions from `strategy` is exact, in both
/// orders. `Err` holds the shrunk counterexample and what differs.
pub fn check_property(
    rules: &RuleSet,
    strategy: impl Strategy<Value = Expr>,
    cfg: PropertyConfig,
) -> Result<PropertyStats, String> {
    let mut runner = seeded_runner(cfg.cases, cfg.seed, cfg.max_shrink_iters);
    let stats = RefCell::new(PropertyStats::default());
    let failing = RefCell::new(false);
    let result = runner.run(&strategy, |e| {
        let mut fired = false;
        for order in [Order::BottomUp, Order::TopDown] {
            let r = rewrite_checked(&e, rules, order).map_err(|m| {
                *failing.borrow_mut() = true;
                TestCaseError::fail(m)
            })?;
            if !*failing.borrow() {
                let mut s = stats.borrow_mut();
                for (name, n) in &r.hits {
                    *s.hits.entry(name).or_insert(0) += n;
                }
            }
            fired |= r.total_hits() > 0;
        }
        if !*failing.borrow() {
            let mut s = stats.borrow_mut();
            s.cases += 1;
            s.fired_cases += fired as u32;
        }
        Ok(())
    });
    match result {
        Ok(()) => Ok(stats.into_inner()),
        Err(TestError::Fail(why, e)) => Err(format!("{why}\n  minimal counterexample: {e:?}")),
        Err(TestError::Abort(why)) => Err(format!("aborted: {why}")),
    }
}

/// [`check_property`] for the rule `rule` alone, with [`strategy_for_rule`].
pub fn check_rule(rule: &str, cfg: PropertyConfig) -> Result<PropertyStats, String> {
    let set = only(rule).ok_or_else(|| format!("no rule named {rule}"))?;
    let strategy = strategy_for_rule(rule).ok_or_else(|| {
        format!("rule {rule} has no targeted strategy (add it to gen::rules::TARGETED)")
    })?;
    check_property(&set, strategy, cfg)
}

/// General random expressions: any dtype, or lowering-style index arithmetic.
pub fn general() -> BoxedStrategy<Expr> {
    prop_oneof![3 => expr(ExprConfig::default()), 1 => index_expr()].boxed()
}

/// The strategy rule `rule` is tested with: its targeted expressions (3 in 4) and general
/// ones. None for a rule without a targeted strategy.
pub fn strategy_for_rule(rule: &str) -> Option<BoxedStrategy<Expr>> {
    let (_, build) = TARGETED.iter().find(|(n, _)| *n == rule)?;
    let cfg = ExprConfig {
        tape_len: 48,
        depth: 2,
        ..ExprConfig::default()
    };
    Some(prop_oneof![3 => built_with(cfg, *build), 1 => general()].boxed())
}

type Build = fn(&mut ExprBuilder) -> NodeId;

/// A random sub-expression of `dt`, one level deep.
fn sub(b: &mut ExprBuilder, dt: DType) -> NodeId {
    b.expr(dt, 1)
}

/// An int or bool dtype (what the int identities match).
fn int_like(b: &mut ExprBuilder) -> DType {
    if b.c.chance(15) {
        Bool
    } else {
        b.int_dtype()
    }
}

/// `op(x, k)` or `op(k, x)` for a commutative op.
fn either(b: &mut ExprBuilder, op: Op, x: NodeId, k: NodeId) -> NodeId {
    if b.c.chance(50) {
        b.bin(op, k, x)
    } else {
        b.bin(op, x, k)
    }
}

fn with_const(op: Op, v: i128, commutative: bool) -> impl Fn(&mut ExprBuilder) -> NodeId {
    move |b| {
        let dt = if matches!(op, Op::CDIV | Op::CMOD | Op::FLOORDIV | Op::FLOORMOD) {
            b.int_dtype()
        } else {
            int_like(b)
        };
        let x = sub(b, dt);
        let k = b.int(dt, v);
        if commutative {
            either(b, op, x, k)
        } else {
            b.bin(op, x, k)
        }
    }
}

fn self_op(op: Op, dt_any: bool) -> impl Fn(&mut ExprBuilder) -> NodeId {
    move |b| {
        let dt = if dt_any { b.any_dtype() } else { int_like(b) };
        let x = sub(b, dt);
        b.bin(op, x, x)
    }
}

fn const_chain(op: Op) -> impl Fn(&mut ExprBuilder) -> NodeId {
    move |b| {
        let dt = int_like(b);
        let x = sub(b, dt);
        let (k1, k2) = (b.konst(dt), b.konst(dt));
        let inner = either(b, op, x, k1);
        either(b, op, inner, k2)
    }
}

/// A loop variable as `dt`, plus a small offset: values in a small known range.
fn small(b: &mut ExprBuilder, dt: DType) -> NodeId {
    let v = b.var();
    let x = if dt == Int64 { v } else { b.cast(dt, v) };
    if b.c.chance(30) {
        let kv = b.c.range(0, 3) as i128;
        let k = b.int(dt, kv);
        b.bin(Op::ADD, x, k)
    } else {
        x
    }
}

fn divmod_small(b: &mut ExprBuilder, ops: &[Op]) -> NodeId {
    let dt = b.int_dtype();
    let x = small(b, dt);
    let op = b.c.pick(ops);
    let kv = b.c.range(1, 12) as i128;
    let k = b.int(dt, kv);
    b.bin(op, x, k)
}

fn mul_cancel(b: &mut ExprBuilder, ops: &[Op]) -> NodeId {
    let dt = b.int_dtype();
    let a = if b.c.chance(70) {
        small(b, dt)
    } else {
        sub(b, dt)
    };
    let cv = b.c.pick(&[2i128, 3, 4, 5, 8, -2, 0]);
    let k = b.int(dt, cv);
    let m = either(b, Op::MUL, a, k);
    let op = b.c.pick(ops);
    b.bin(op, m, k)
}

fn affine(b: &mut ExprBuilder, ops: &[Op]) -> NodeId {
    let dt = b.int_dtype();
    let a = if b.c.chance(70) {
        small(b, dt)
    } else {
        sub(b, dt)
    };
    let bb = if b.c.chance(70) {
        small(b, dt)
    } else {
        sub(b, dt)
    };
    let cv = b.c.pick(&[2i128, 3, 4, 8, 16, 5]);
    let k = b.int(dt, cv);
    let m = either(b, Op::MUL, a, k);
    let s = either(b, Op::ADD, m, bb);
    let op = b.c.pick(ops);
    b.bin(op, s, k)
}

fn chain2(b: &mut ExprBuilder, ops: &[Op]) -> NodeId {
    let dt = b.int_dtype();
    let x = if b.c.chance(60) {
        small(b, dt)
    } else {
        sub(b, dt)
    };
    let c2 = b.c.pick(&[2i128, 3, 4, 2, 3, -2, -3]);
    let c1 = c2 * b.c.pick(&[1i128, 2, 3, 4, -1, -2]);
    let op = b.c.pick(ops);
    let (k1, k2) = (b.int(dt, c1), b.int(dt, c2));
    let inner = b.bin(op, x, k1);
    b.bin(op, inner, k2)
}

fn cmp_range(op: Op) -> impl Fn(&mut ExprBuilder) -> NodeId {
    move |b| {
        let dt = b.int_dtype();
        let x = small(b, dt);
        let cv = b.c.pick(&[-1i128, 0, 2, 7, 9, 20]);
        let k = b.int(dt, cv);
        if b.c.chance(50) {
            b.bin(op, k, x)
        } else {
            b.bin(op, x, k)
        }
    }
}

fn fold_unary(b: &mut ExprBuilder) -> NodeId {
    if b.c.chance(50) {
        let op = b.c.pick(&[
            Op::SQRT,
            Op::NEG,
            Op::TRUNC,
            Op::RECIPROCAL,
            Op::EXP2,
            Op::LOG2,
            Op::SIN,
        ]);
        let a = b.konst(Float32);
        b.un(op, a)
    } else {
        let dt = b.int_dtype();
        let a = b.konst(dt);
        b.un(Op::NEG, a)
    }
}

fn fold_binary(b: &mut ExprBuilder) -> NodeId {
    let dt = b.any_dtype();
    let ops: Vec<Op> = match dt {
        Bool => vec![
            Op::AND,
            Op::OR,
            Op::XOR,
            Op::ADD,
            Op::MUL,
            Op::MAX,
            Op::CMPLT,
            Op::CMPNE,
            Op::CMPEQ,
        ],
        Float32 => vec![
            Op::ADD,
            Op::SUB,
            Op::MUL,
            Op::FDIV,
            Op::MAX,
            Op::POW,
            Op::CMPLT,
            Op::CMPNE,
            Op::CMPEQ,
        ],
        _ => vec![
            Op::ADD,
            Op::SUB,
            Op::MUL,
            Op::MAX,
            Op::AND,
            Op::OR,
            Op::XOR,
            Op::CDIV,
            Op::CMOD,
            Op::FLOORDIV,
            Op::FLOORMOD,
            Op::SHL,
            Op::SHR,
            Op::CMPLT,
            Op::CMPNE,
            Op::CMPEQ,
        ],
    };
    let op = b.c.pick(&ops);
    let (x, y) = (b.konst(dt), b.konst(dt));
    b.bin(op, x, y)
}

fn fold_ternary(b: &mut ExprBuilder) -> NodeId {
    let dt = b.any_dtype();
    if dt != Bool && b.c.chance(50) {
        let (x, y, z) = (b.konst(dt), b.konst(dt), b.konst(dt));
        return b.mulacc(x, y, z);
    }
    let cv = b.c.below(2) as i128;
    let cond = b.int(Bool, cv);
    let (x, y) = (b.konst(dt), b.konst(dt));
    b.wher(cond, x, y)
}

fn fold_cast(b: &mut ExprBuilder) -> NodeId {
    let from = b.any_dtype();
    let to = b.any_dtype();
    let a = b.konst(from);
    b.cast(to, a)
}

fn fold_bitcast(b: &mut ExprBuilder) -> NodeId {
    let (from, to) = b.c.pick(&[
        (Float32, Int32),
        (Float32, UInt32),
        (Int32, Float32),
        (UInt32, Int32),
        (Int64, UInt64),
        (Int16, UInt16),
    ]);
    let a = b.konst(from);
    b.bitcast(to, a)
}

fn neg_neg(b: &mut ExprBuilder) -> NodeId {
    let dt = if b.c.chance(40) {
        Float32
    } else {
        b.int_dtype()
    };
    let x = sub(b, dt);
    let n = b.un(Op::NEG, x);
    b.un(Op::NEG, n)
}

fn where_const_cond(b: &mut ExprBuilder) -> NodeId {
    let dt = b.any_dtype();
    let cv = b.c.below(2) as i128;
    let cond = b.int(Bool, cv);
    let (x, y) = (sub(b, dt), sub(b, dt));
    b.wher(cond, x, y)
}

fn where_same(b: &mut ExprBuilder) -> NodeId {
    let dt = b.any_dtype();
    let cond = sub(b, Bool);
    let x = sub(b, dt);
    b.wher(cond, x, x)
}

fn where_true_false(b: &mut ExprBuilder) -> NodeId {
    let cond = sub(b, Bool);
    let (t, f) = (b.int(Bool, 1), b.int(Bool, 0));
    b.wher(cond, t, f)
}

fn max_range(b: &mut ExprBuilder) -> NodeId {
    let dt = b.int_dtype();
    let x = small(b, dt);
    let cv = b.c.pick(&[-1i128, 0, 9, 20, 3]);
    let k = b.int(dt, cv);
    either(b, Op::MAX, x, k)
}

fn cast_noop(b: &mut ExprBuilder) -> NodeId {
    let dt = b.any_dtype();
    let x = sub(b, dt);
    b.cast(dt, x)
}

fn cast_widen_chain(b: &mut ExprBuilder) -> NodeId {
    let from = if b.c.chance(15) { Bool } else { b.c.pick(INTS) };
    let x = if b.c.chance(50) {
        small(b, from)
    } else {
        sub(b, from)
    };
    let mid =
        b.c.pick(&[Int64, Int32, Int16, UInt32, UInt64, UInt8, Int8, UInt16]);
    let to = b.c.pick(&[from, Int64, Int32, Int8, UInt8, Bool, Float32]);
    let m = b.cast(mid, x);
    b.cast(to, m)
}

/// x % c for x in [0, 2c): where the deliberately wrong `fault_mod_drop` fires (and
/// `mod_of_small` when x < c).
fn mod_of_small_or_twice(b: &mut ExprBuilder) -> NodeId {
    if b.c.chance(50) {
        return b.index();
    }
    divmod_small(b, &[Op::CMOD, Op::FLOORMOD])
}

macro_rules! targeted {
    ($($name:literal => $build:expr),* $(,)?) => {
        /// Every rule that has a property test, with the expressions targeted at it.
        pub const TARGETED: &[(&str, Build)] = &[$(($name, $build)),*];
    };
}

targeted! {
    "fold_const_unary" => fold_unary,
    "fold_const_binary" => fold_binary,
    "fold_const_ternary" => fold_ternary,
    "fold_cast_const" => fold_cast,
    "fold_bitcast_const" => fold_bitcast,
    "add_zero" => |b| with_const(Op::ADD, 0, true)(b),
    "sub_zero" => |b| with_const(Op::SUB, 0, false)(b),
    "sub_self" => |b| self_op(Op::SUB, false)(b),
    "mul_one" => |b| with_const(Op::MUL, 1, true)(b),
    "mul_zero_int" => |b| with_const(Op::MUL, 0, true)(b),
    "neg_neg" => neg_neg,
    "div_one" => |b| { let op = b.c.pick(&[Op::CDIV, Op::FLOORDIV]); with_const(op, 1, false)(b) },
    "mod_one" => |b| { let op = b.c.pick(&[Op::CMOD, Op::FLOORMOD]); with_const(op, 1, false)(b) },
    "and_self" => |b| self_op(Op::AND, false)(b),
    "or_self" => |b| self_op(Op::OR, false)(b),
    "xor_self" => |b| self_op(Op::XOR, false)(b),
    "and_zero" => |b| with_const(Op::AND, 0, true)(b),
    "and_all_ones" => |b| with_const(Op::AND, -1, true)(b),
    "or_zero" => |b| with_const(Op::OR, 0, true)(b),
    "or_all_ones" => |b| with_const(Op::OR, -1, true)(b),
    "xor_zero" => |b| with_const(Op::XOR, 0, true)(b),
    "max_self" => |b| self_op(Op::MAX, true)(b),
    "add_const_chain" => |b| const_chain(Op::ADD)(b),
    "mul_const_chain" => |b| const_chain(Op::MUL)(b),
    "div_of_small" => |b| divmod_small(b, &[Op::CDIV, Op::FLOORDIV]),
    "mod_of_small" => |b| divmod_small(b, &[Op::CMOD, Op::FLOORMOD]),
    "div_mul_cancel" => |b| mul_cancel(b, &[Op::CDIV, Op::FLOORDIV]),
    "mod_mul_zero" => |b| mul_cancel(b, &[Op::CMOD, Op::FLOORMOD]),
    "div_affine" => |b| affine(b, &[Op::CDIV, Op::FLOORDIV]),
    "mod_affine" => |b| affine(b, &[Op::CMOD, Op::FLOORMOD]),
    "div_div" => |b| chain2(b, &[Op::CDIV, Op::FLOORDIV]),
    "mod_mod" => |b| chain2(b, &[Op::CMOD, Op::FLOORMOD]),
    "cmplt_self" => |b| self_op(Op::CMPLT, true)(b),
    "cmpne_self" => |b| self_op(Op::CMPNE, false)(b),
    "cmpeq_self" => |b| self_op(Op::CMPEQ, false)(b),
    "cmplt_range" => |b| cmp_range(Op::CMPLT)(b),
    "cmpne_range" => |b| cmp_range(Op::CMPNE)(b),
    "cmpeq_range" => |b| cmp_range(Op::CMPEQ)(b),
    "where_const_cond" => where_const_cond,
    "where_same" => where_same,
    "where_true_false" => where_true_false,
    "max_range" => max_range,
    "cast_noop" => cast_noop,
    "cast_widen_chain" => cast_widen_chain,
    // Test-only (feature fault-injection): deliberately wrong; its property must FAIL.
    "fault_mod_drop" => mod_of_small_or_twice,
}
