//! Checking rewrite rules, as a library feature (feature `testkit`; docs/rule-fuzzing.md).
//!
//! A rule is exact when the oracle's result before and after the rewrite is identical, bit
//! for bit, for every assignment of the loop variables (or undefined behaviour on both
//! sides). [`check_rules`] checks that on generated expressions:
//!
//! * [`RuleUnderTest`]: what is checked: a [`RuleSet`] of the engine (a named set such as
//!   `symbolic`, one named rule, or the user's own rules: pattern + rewrite function), or any
//!   graph-to-graph rewriter (a closure). A new kind of rewriter is one more variant and one
//!   more arm in [`RuleUnderTest::apply`].
//! * [`Generator`]: where the expressions come from (kernel-level ALU and index arithmetic
//!   over loop variables, `gen::expr`, with edge-value constants of every int width, bool and
//!   float32; a rule's targeted strategy, `gen::rules`). A new generator is one more variant
//!   and one more arm in [`Generator::strategy`].
//! * [`CheckConfig`]: cases, seed, a time budget, shrinking, and the folder of persisted
//!   counterexamples. Cases run in chunks of [`CHUNK`] from seeds derived from the seed, so a
//!   run is deterministic given (seed, cases) (a time budget may stop it early, between
//!   chunks).
//! * A failure is shrunk by proptest (its tape shrinks towards fewer, simpler nodes) and comes
//!   back as a [`Counterexample`]: input and rewritten expression, the rules that fired, the
//!   loop variables' values where the results differ, both results' bits, and whether the
//!   rewrite added or removed undefined behaviour ([`UbChange`]).
//! * Persistence: with [`CheckConfig::regressions`] set, a new counterexample is written
//!   (atomically, never overwriting: `fuzz::write_new`) as a case file `rule_<name>_<id>.json`
//!   tagged `regression`, `rule` and the rule's name, in the existing case format: each
//!   loop variable becomes an int64 input buffer (slot = axis) holding its value for every
//!   assignment in row-major order, the output `input` is the expression, its expected values
//!   are the oracle's (or `expect_error` with the undefined behaviour). The next check of the
//!   same name replays those cases first ([`replay_cases`]), before generating anything.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{TestCaseError, TestError};
use uopkit_compiler::rewrite::{rewrite, rule_sets, Order, RewriteOpts, RuleSet, StopReason};
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::Ub;

use super::export::{export, fill_expect_from_oracle};
use super::expr::{
    assignment, evaluate, loop_vars, show, with_buffers, Expr, ExprBuilder, ExprConfig, Outcome,
};
use super::rules::{general, only, seeded_runner, strategy_for_rule};
use crate::case::{Case, ErrorKind, ExpectError};

/// A graph-to-graph rewriter: given a graph and roots, the rewritten graph and the roots'
/// new ids (in the same order).
pub type Rewriter = Box<dyn Fn(&Graph, &[NodeId]) -> (Graph, Vec<NodeId>)>;

/// What [`check_rules`] checks.
pub enum RuleUnderTest {
    /// Rules of the engine, applied with `rewrite` to a fixed point (both orders).
    Rules { name: String, set: RuleSet },
    /// Any rewriter.
    Closure { name: String, rewrite: Rewriter },
}

/// A name that is neither a rule set nor a rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown rule or rule set '{name}'; known: {}", known.join(", "))]
pub struct UnknownName {
    pub name: String,
    pub known: Vec<String>,
}

impl RuleUnderTest {
    /// A rule set of the compiler (`symbolic`, …) or one rule of any of them, by name (the
    /// compiler's test-only faults switched on for this thread included).
    pub fn named(name: &str) -> Result<RuleUnderTest, UnknownName> {
        if let Some(set) = rule_sets().into_iter().find(|s| s.name == name) {
            return Ok(RuleUnderTest::Rules {
                name: name.to_string(),
                set,
            });
        }
        match only(name) {
            Some(set) => Ok(RuleUnderTest::Rules {
                name: name.to_string(),
                set,
            }),
            None => Err(UnknownName {
                name: name.to_string(),
                known: known_names(),
            }),
        }
    }

    /// The user's own rules (pattern + rewrite, `uopkit_compiler::rewrite::Rule`).
    pub fn rules(set: RuleSet) -> RuleUnderTest {
        RuleUnderTest::Rules {
            name: set.name.to_string(),
            set,
        }
    }

    /// Any rewriter, as a closure from graph and roots to graph and roots.
    pub fn closure(
        name: &str,
        f: impl Fn(&Graph, &[NodeId]) -> (Graph, Vec<NodeId>) + 'static,
    ) -> RuleUnderTest {
        RuleUnderTest::Closure {
            name: name.to_string(),
            rewrite: Box::new(f),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            RuleUnderTest::Rules { name, .. } | RuleUnderTest::Closure { name, .. } => name,
        }
    }

    /// The single rule this is (a set of one rule), for its targeted strategy.
    fn single_rule(&self) -> Option<&'static str> {
        match self {
            RuleUnderTest::Rules { set, .. } if set.rules().len() == 1 => Some(set.rules()[0].name),
            _ => None,
        }
    }

    /// Rewrites any graph (a tensor graph, a kernel graph) from `roots` (in `order`, where
    /// the rewriter has one): the tensor- and kernel-level checks (`gen::rulecheck_levels`).
    pub fn apply_graph(&self, g: &Graph, roots: &[NodeId], order: Order) -> GraphApplied {
        match self {
            RuleUnderTest::Rules { set, .. } => {
                let mut out = g.clone();
                let opts = RewriteOpts {
                    order,
                    ..RewriteOpts::default()
                }
                .max_iterations(64);
                let r = rewrite(&mut out, roots, set, opts);
                GraphApplied {
                    graph: out,
                    roots: r.roots.clone(),
                    fired: r.hits.iter().map(|(n, k)| (n.to_string(), *k)).collect(),
                    changed: r.total_hits() > 0,
                    stop: (r.stop != StopReason::FixedPoint).then(|| format!("{:?}", r.stop)),
                }
            }
            RuleUnderTest::Closure { rewrite, name } => {
                let (out, new_roots) = rewrite(g, roots);
                let valid = new_roots.len() == roots.len()
                    && new_roots.iter().all(|r| (r.0 as usize) < out.len());
                if !valid {
                    return GraphApplied {
                        graph: g.clone(),
                        roots: roots.to_vec(),
                        fired: BTreeMap::new(),
                        changed: true,
                        stop: Some(format!("{name} returned no valid roots")),
                    };
                }
                let changed = !same_graph(g, roots, &out, &new_roots);
                GraphApplied {
                    graph: out,
                    roots: new_roots,
                    fired: if changed {
                        BTreeMap::from([(name.clone(), 1)])
                    } else {
                        BTreeMap::new()
                    },
                    changed,
                    stop: None,
                }
            }
        }
    }

    /// Rewrites `e` (in `order`, where the rewriter has one).
    pub fn apply(&self, e: &Expr, order: Order) -> Applied {
        match self {
            RuleUnderTest::Rules { set, .. } => {
                let mut g = e.graph.clone();
                let opts = RewriteOpts {
                    order,
                    ..RewriteOpts::default()
                }
                .max_iterations(64);
                let r = rewrite(&mut g, &[e.root], set, opts);
                let fired = r.hits.iter().map(|(n, k)| (n.to_string(), *k)).collect();
                Applied {
                    expr: Expr {
                        graph: g,
                        root: r.roots[0],
                    },
                    fired,
                    changed: r.total_hits() > 0,
                    stop: (r.stop != StopReason::FixedPoint).then(|| format!("{:?}", r.stop)),
                }
            }
            RuleUnderTest::Closure { rewrite, name } => {
                let (g, roots) = rewrite(&e.graph, &[e.root]);
                let Some(&root) = roots.first().filter(|r| (r.0 as usize) < g.len()) else {
                    return Applied {
                        expr: e.clone(),
                        fired: BTreeMap::new(),
                        changed: true,
                        stop: Some(format!("{name} returned no valid root")),
                    };
                };
                let changed = show(&g, root) != show(&e.graph, e.root);
                let fired = if changed {
                    BTreeMap::from([(name.clone(), 1)])
                } else {
                    BTreeMap::new()
                };
                Applied {
                    expr: Expr { graph: g, root },
                    fired,
                    changed,
                    stop: None,
                }
            }
        }
    }
}

/// Every name [`RuleUnderTest::named`] takes: the rule sets, then their rules.
pub fn known_names() -> Vec<String> {
    let sets = rule_sets();
    let mut out: Vec<String> = sets.iter().map(|s| s.name.to_string()).collect();
    for s in &sets {
        out.extend(s.names().iter().map(|n| n.to_string()));
    }
    out
}

/// What a rewrite made of an expression.
pub struct Applied {
    pub expr: Expr,
    /// Firings per rule.
    pub fired: BTreeMap<String, usize>,
    /// Whether the expression changed.
    pub changed: bool,
    /// Why the rewriter did not reach a fixed point (None: it did).
    pub stop: Option<String>,
}

/// What a rewrite made of a whole graph ([`RuleUnderTest::apply_graph`]).
pub struct GraphApplied {
    pub graph: Graph,
    /// The roots' new ids, in the same order.
    pub roots: Vec<NodeId>,
    /// Firings per rule.
    pub fired: BTreeMap<String, usize>,
    /// Whether anything the roots reach changed.
    pub changed: bool,
    /// Why the rewriter did not reach a fixed point (None: it did).
    pub stop: Option<String>,
}

/// Whether what `ra` reaches in `a` is what `rb` reaches in `b` (node for node, in
/// topological order, ids aside).
fn same_graph(a: &Graph, ra: &[NodeId], b: &Graph, rb: &[NodeId]) -> bool {
    let (na, nb) = (a.reachable(ra), b.reachable(rb));
    if na.len() != nb.len() {
        return false;
    }
    let pos = |ns: &[NodeId]| -> BTreeMap<NodeId, usize> {
        ns.iter().enumerate().map(|(i, n)| (*n, i)).collect()
    };
    let (pa, pb) = (pos(&na), pos(&nb));
    let same_roots = ra.iter().zip(rb).all(|(x, y)| pa.get(x) == pb.get(y));
    same_roots
        && na.iter().zip(&nb).all(|(x, y)| {
            let (m, n) = (a.node(*x), b.node(*y));
            m.op == n.op
                && m.dtype == n.dtype
                && m.arg == n.arg
                && m.src.len() == n.src.len()
                && m.src
                    .iter()
                    .zip(&n.src)
                    .all(|(s, t)| pa.get(s) == pb.get(t))
        })
}

/// Where the expressions come from.
#[derive(Clone, Debug, Default)]
pub enum Generator {
    /// A single named rule's targeted strategy (`gen::rules::TARGETED`) mixed with general
    /// expressions; [`Generator::General`] for anything else.
    #[default]
    ForRule,
    /// Any well-typed expression, or index arithmetic (`gen::rules::general`).
    General,
    /// Index arithmetic as the lowering of views makes it (`gen::expr::index_expr`).
    Index,
    /// The caller's own strategy.
    Strategy(BoxedStrategy<Expr>),
}

impl Generator {
    /// Expressions built by `f` with an [`ExprBuilder`] from a random tape (a targeted
    /// generator of the caller's own; `gen::rules` has the project's).
    pub fn built(cfg: ExprConfig, f: fn(&mut ExprBuilder) -> NodeId) -> Generator {
        Generator::Strategy(super::expr::built_with(cfg, f).boxed())
    }

    /// The strategy for `rut`.
    pub fn strategy(&self, rut: &RuleUnderTest) -> BoxedStrategy<Expr> {
        match self {
            Generator::ForRule => rut
                .single_rule()
                .and_then(strategy_for_rule)
                .unwrap_or_else(general),
            Generator::General => general(),
            Generator::Index => super::expr::index_expr().boxed(),
            Generator::Strategy(s) => s.clone(),
        }
    }
}

/// Cases run from one derived seed.
pub const CHUNK: u32 = 512;

/// How much to check.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Generated expressions to check (each in both rewrite orders).
    pub cases: u32,
    pub seed: u64,
    /// A wall-clock budget: no new chunk of cases starts after it (None: no limit).
    pub time_budget: Option<Duration>,
    /// Shrinking steps proptest may take on a failure.
    pub max_shrink_iters: u32,
    pub generator: Generator,
    /// The folder of persisted counterexamples: replayed first, and where a new one is
    /// written (None: nothing is read or written).
    pub regressions: Option<PathBuf>,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            cases: 1024,
            seed: 0x5eed_2026,
            time_budget: None,
            max_shrink_iters: 4096,
            generator: Generator::ForRule,
            regressions: None,
        }
    }
}

/// How a passing check went, at any level: expressions ([`check_rules`]), or whole tensor
/// programs and kernels (`rulecheck_levels`, where it is also called `LevelReport`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleReport {
    pub name: String,
    /// `expr` (the default, empty reads the same), `tensor` or `kernel`.
    pub level: String,
    pub seed: u64,
    /// Generated expressions or programs checked.
    pub cases: u32,
    /// Cases the rewrite changed (in either order).
    pub fired_cases: u32,
    /// Programs not checked: the input itself does not run (a generator limit; tensor and
    /// kernel levels only).
    pub skipped: u32,
    /// Firings per rule, over all cases and both orders.
    pub hits: BTreeMap<String, usize>,
    /// Persisted counterexamples replayed (all passed).
    pub replayed: usize,
    pub elapsed: Duration,
}

/// The expression-level name of [`RuleReport`].
pub type CheckReport = RuleReport;

impl RuleReport {
    pub fn hit(&self, rule: &str) -> usize {
        self.hits.get(rule).copied().unwrap_or(0)
    }
}

impl fmt::Display for RuleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, skipped) = match self.level.as_str() {
            "" | "expr" => ("expressions".to_string(), String::new()),
            level => (
                format!("{level}-level programs"),
                format!(", {} skipped", self.skipped),
            ),
        };
        write!(
            f,
            "{}: {} {what} (seed {:#x}), rewritten {} times{skipped}, {} persisted counterexamples replayed, {}, {:.1}s",
            self.name,
            self.cases,
            self.seed,
            self.fired_cases,
            self.replayed,
            if self.cases == 0 { "none checked" } else { "all exact" },
            self.elapsed.as_secs_f64()
        )?;
        if !self.hits.is_empty() {
            let hits: Vec<String> = self.hits.iter().map(|(n, k)| format!("{n} {k}")).collect();
            write!(f, "\n  hits: {}", hits.join(", "))?;
        }
        Ok(())
    }
}

/// What is wrong with a rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Defect {
    /// The results differ for this assignment of the loop variables (axis → value).
    Differs {
        at: BTreeMap<usize, i64>,
        before: Outcome,
        after: Outcome,
    },
    DtypeChanged {
        before: DType,
        after: DType,
    },
    /// The rewriter did not reach a fixed point, or returned something unusable.
    NoFixedPoint(String),
    /// The oracle cannot evaluate the rewritten expression (a malformed graph).
    Invalid(String),
}

/// Whether a rewrite changed undefined behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UbChange {
    None,
    /// Defined before, undefined after.
    Added(Ub),
    /// Undefined before, defined after.
    Removed(Ub),
}

/// A rewrite that is not exact, on a small expression.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// The rule or rule set checked.
    pub name: String,
    pub defect: Defect,
    pub input: Expr,
    pub rewritten: Expr,
    pub order: Order,
    /// Firings per rule in that rewrite.
    pub fired: BTreeMap<String, usize>,
    /// The loop variables (axis → end: each runs over 0..end).
    pub vars: BTreeMap<usize, i64>,
    /// The persisted case it was replayed from (None: generated in this run).
    pub replayed_from: Option<PathBuf>,
    /// Where it was written (None: not persisted, or replayed).
    pub written_to: Option<PathBuf>,
    /// Why it could not be written, if it could not.
    pub write_error: Option<String>,
    /// The generated case that failed first (1 = the first), before shrinking; 0 = replayed.
    pub case_number: u32,
}

impl Counterexample {
    /// Nodes the input expression reaches.
    pub fn size(&self) -> usize {
        self.input.size()
    }

    pub fn ub_change(&self) -> UbChange {
        match &self.defect {
            Defect::Differs {
                before: Ok(_),
                after: Err(u),
                ..
            } => UbChange::Added(*u),
            Defect::Differs {
                before: Err(u),
                after: Ok(_),
                ..
            } => UbChange::Removed(*u),
            _ => UbChange::None,
        }
    }
}

fn show_outcome(dt: DType, o: &Outcome) -> String {
    match o {
        Ok(bits) => format!(
            "{} (bits {bits:#x})",
            uopkit_interp::scalar::literal::display(dt, *bits)
        ),
        Err(ub) => format!("undefined behaviour: {ub}"),
    }
}

fn show_vars(vars: &BTreeMap<usize, i64>) -> String {
    let v: Vec<String> = vars
        .iter()
        .map(|(a, e)| format!("r{a} in 0..{e}"))
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt = self.input.graph.node(self.input.root).dtype;
        writeln!(
            f,
            "{}: the rewrite is not exact ({} nodes){}",
            self.name,
            self.size(),
            match (&self.replayed_from, self.case_number) {
                (Some(p), _) => format!(", replayed from {}", p.display()),
                (None, n) => format!(", generated case #{n}, shrunk"),
            }
        )?;
        writeln!(f, "  input:     {:?}", self.input)?;
        writeln!(f, "  rewritten: {:?}", self.rewritten)?;
        writeln!(f, "  fired:     {:?} ({:?})", self.fired, self.order)?;
        writeln!(f, "  loop vars: {}", show_vars(&self.vars))?;
        match &self.defect {
            Defect::Differs { at, before, after } => {
                let at: Vec<String> = at.iter().map(|(a, v)| format!("r{a} = {v}")).collect();
                let at = if at.is_empty() {
                    "none (constants only)".to_string()
                } else {
                    at.join(", ")
                };
                writeln!(f, "  inputs:    {at}")?;
                writeln!(f, "  before:    {}", show_outcome(dt, before))?;
                writeln!(f, "  after:     {}", show_outcome(dt, after))?;
            }
            Defect::DtypeChanged { before, after } => {
                writeln!(f, "  the dtype changed from {before} to {after}")?
            }
            Defect::NoFixedPoint(m) => writeln!(f, "  no fixed point: {m}")?,
            Defect::Invalid(m) => writeln!(f, "  invalid rewrite: {m}")?,
        }
        match self.ub_change() {
            UbChange::None => writeln!(f, "  undefined behaviour: not added or removed")?,
            UbChange::Added(u) => writeln!(f, "  undefined behaviour: ADDED ({u})")?,
            UbChange::Removed(u) => writeln!(f, "  undefined behaviour: REMOVED ({u})")?,
        }
        if let Some(p) = &self.written_to {
            writeln!(f, "  written to {}", p.display())?;
        }
        if let Some(e) = &self.write_error {
            writeln!(f, "  could not be written: {e}")?;
        }
        Ok(())
    }
}

/// Why a check did not pass.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Counterexample(Box<Counterexample>),
    #[error("cannot read persisted counterexamples: {0}")]
    Replay(String),
    #[error("the check stopped: {0}")]
    Aborted(String),
}

impl CheckError {
    pub fn counterexample(&self) -> Option<&Counterexample> {
        match self {
            CheckError::Counterexample(c) => Some(c),
            _ => None,
        }
    }
}

/// A defect of one rewrite, with what the rewrite made.
struct Failure {
    defect: Defect,
    applied: Applied,
    order: Order,
    vars: BTreeMap<usize, i64>,
}

fn merged_vars(a: &Expr, b: &Expr) -> Result<BTreeMap<usize, i64>, String> {
    let mut vars = loop_vars(&a.graph, &[a.root])?;
    for (axis, end) in loop_vars(&b.graph, &[b.root])? {
        if let Some(old) = vars.insert(axis, end) {
            if old != end {
                return Err(format!("axis {axis} has ends {old} before and {end} after"));
            }
        }
    }
    Ok(vars)
}

/// Checks the rewrite of `e` in one order: Ok with what it made when exact.
fn check_one(rut: &RuleUnderTest, e: &Expr, order: Order) -> Result<Applied, Box<Failure>> {
    let applied = rut.apply(e, order);
    let fail = |defect, applied, vars| {
        Box::new(Failure {
            defect,
            applied,
            order,
            vars,
        })
    };
    if let Some(m) = applied.stop.clone() {
        return Err(fail(Defect::NoFixedPoint(m), applied, BTreeMap::new()));
    }
    if !applied.changed {
        return Ok(applied);
    }
    let (db, da) = (
        e.graph.node(e.root).dtype,
        applied.expr.graph.node(applied.expr.root).dtype,
    );
    if db != da {
        let d = Defect::DtypeChanged {
            before: db,
            after: da,
        };
        return Err(fail(d, applied, BTreeMap::new()));
    }
    let vars = match merged_vars(e, &applied.expr) {
        Ok(v) => v,
        Err(m) => return Err(fail(Defect::Invalid(m), applied, BTreeMap::new())),
    };
    let before = match evaluate(&e.graph, e.root, &vars) {
        Ok(v) => v,
        // The input itself is not evaluable: not a test of the rule.
        Err(_) => return Ok(applied),
    };
    let after = match evaluate(&applied.expr.graph, applied.expr.root, &vars) {
        Ok(v) => v,
        Err(m) => return Err(fail(Defect::Invalid(m), applied, vars)),
    };
    for (i, (x, y)) in before.iter().zip(&after).enumerate() {
        let same = match (x, y) {
            (Ok(p), Ok(q)) => p == q,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            let d = Defect::Differs {
                at: assignment(&vars, i),
                before: *x,
                after: *y,
            };
            return Err(fail(d, applied, vars));
        }
    }
    Ok(applied)
}

/// Checks `e` in both orders; Ok with the firings and whether anything changed.
fn check_both(
    rut: &RuleUnderTest,
    e: &Expr,
) -> Result<(BTreeMap<String, usize>, bool), Box<Failure>> {
    let mut hits = BTreeMap::new();
    let mut changed = false;
    for order in [Order::BottomUp, Order::TopDown] {
        let a = check_one(rut, e, order)?;
        for (n, k) in a.fired {
            *hits.entry(n).or_insert(0) += k;
        }
        changed |= a.changed;
    }
    Ok((hits, changed))
}

fn counterexample(name: &str, input: Expr, f: Failure, case_number: u32) -> Counterexample {
    Counterexample {
        name: name.to_string(),
        defect: f.defect,
        input,
        rewritten: f.applied.expr,
        order: f.order,
        fired: f.applied.fired,
        vars: f.vars,
        replayed_from: None,
        written_to: None,
        write_error: None,
        case_number,
    }
}

/// [`check_rules_with`] without progress reports.
pub fn check_rules(rut: &RuleUnderTest, cfg: &CheckConfig) -> Result<CheckReport, CheckError> {
    check_rules_with(rut, cfg, &mut |_| {})
}

/// Checks that every rewrite `rut` makes on generated expressions is exact: first the
/// persisted counterexamples of its name (replayed in file-name order), then `cfg.cases`
/// generated expressions. `progress` is called after each chunk of cases.
pub fn check_rules_with(
    rut: &RuleUnderTest,
    cfg: &CheckConfig,
    progress: &mut dyn FnMut(&CheckReport),
) -> Result<CheckReport, CheckError> {
    let start = Instant::now();
    let name = rut.name().to_string();
    let mut report = CheckReport {
        name: name.clone(),
        seed: cfg.seed,
        ..CheckReport::default()
    };
    if let Some(dir) = &cfg.regressions {
        for (path, e) in replay_cases(dir, &name).map_err(CheckError::Replay)? {
            if let Err(f) = check_both(rut, &e) {
                let mut c = counterexample(&name, e, *f, 0);
                c.replayed_from = Some(path);
                return Err(CheckError::Counterexample(Box::new(c)));
            }
            report.replayed += 1;
        }
    }
    let strategy = cfg.generator.strategy(rut);
    let mut chunk = 0u64;
    while report.cases < cfg.cases {
        if cfg.time_budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        let n = CHUNK.min(cfg.cases - report.cases);
        let seed = cfg
            .seed
            .wrapping_add(chunk.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        chunk += 1;
        let mut runner = seeded_runner(n, seed, cfg.max_shrink_iters);
        let stats = RefCell::new((0u32, 0u32, BTreeMap::<String, usize>::new()));
        let first_fail = RefCell::new(None::<u32>);
        let result = runner.run(&strategy, |e| {
            if first_fail.borrow().is_some() {
                // Shrinking: only whether it fails matters.
                return check_both(rut, &e)
                    .map(|_| ())
                    .map_err(|_| TestCaseError::fail("not exact"));
            }
            match check_both(rut, &e) {
                Ok((hits, changed)) => {
                    let mut s = stats.borrow_mut();
                    s.0 += 1;
                    s.1 += changed as u32;
                    for (k, v) in hits {
                        *s.2.entry(k).or_insert(0) += v;
                    }
                    Ok(())
                }
                Err(_) => {
                    *first_fail.borrow_mut() = Some(report.cases + stats.borrow().0 + 1);
                    Err(TestCaseError::fail("not exact"))
                }
            }
        });
        let (cases, fired, hits) = stats.into_inner();
        report.cases += cases;
        report.fired_cases += fired;
        for (k, v) in hits {
            *report.hits.entry(k).or_insert(0) += v;
        }
        report.elapsed = start.elapsed();
        match result {
            Ok(()) => progress(&report),
            Err(TestError::Fail(_, e)) => {
                let number = first_fail.into_inner().unwrap_or(0);
                let Err(f) = check_both(rut, &e) else {
                    return Err(CheckError::Aborted(format!(
                        "the shrunk expression {e:?} no longer fails (a non-deterministic rewriter?)"
                    )));
                };
                let mut c = counterexample(&name, e, *f, number);
                if let Some(dir) = &cfg.regressions {
                    match persist(&c, cfg.seed, dir) {
                        Ok(p) => c.written_to = Some(p),
                        Err(m) => c.write_error = Some(m),
                    }
                }
                return Err(CheckError::Counterexample(Box::new(c)));
            }
            Err(TestError::Abort(why)) => return Err(CheckError::Aborted(why.to_string())),
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

/// The counterexample's input as a case (see the module docs): loop variables as int64
/// buffers over every assignment, the output `input`, expected values from the oracle.
pub fn counterexample_case(c: &Counterexample, seed: u64) -> Result<Case, String> {
    let e = &c.input;
    let vars = loop_vars(&e.graph, &[e.root])?;
    let all: Vec<usize> = (0..super::expr::assignments(&vars)).collect();
    let (t, roots, inputs) = with_buffers(&e.graph, &[e.root], &vars, &all)?;
    let found = match &c.defect {
        Defect::Differs { at, before, after } => {
            let dt = e.graph.node(e.root).dtype;
            format!(
                "at {at:?}: {} before, {} after",
                show_outcome(dt, before),
                show_outcome(dt, after)
            )
        }
        d => format!("{d:?}"),
    };
    let description = format!(
        "expected values from the oracle at discovery time (rule regression): the rewrite '{}' ({:?}) is not exact on {:?}, rewritten to {:?}, {found}; found by the rule checker (gen::rulecheck), seed {seed:#x}. Loop variable rA ({}) is the int64 buffer of slot A, one element per assignment in row-major order",
        c.name,
        c.order,
        c.input,
        c.rewritten,
        show_vars(&vars),
    );
    let mut case = export(
        &t,
        &inputs,
        &[("input".to_string(), roots[0])],
        &description,
        &["regression", "rule", &c.name],
    )?;
    let before = evaluate(&e.graph, e.root, &vars)?;
    if let Some((i, Err(ub))) = before.iter().enumerate().find(|(_, o)| o.is_err()) {
        let _ = i;
        case.expect_error = Some(ExpectError {
            kind: ErrorKind::Ub,
            ub: Some(*ub),
            node: None,
            element: None,
            contains: None,
            program: None,
            inst: None,
        });
    } else {
        fill_expect_from_oracle(&mut case)?;
    }
    Ok(case)
}

fn persist(c: &Counterexample, seed: u64, dir: &Path) -> Result<PathBuf, String> {
    let case = counterexample_case(c, seed)?;
    crate::fuzz::write_new(dir, &file_stem(&c.name), &case).map_err(|e| e.to_string())
}

/// `rule_<name>`: the file stem of a counterexample of rule (set) `name`, so two names that
/// shrink to the same input each keep a file their own replay finds (`write_new` keeps one
/// file per content and stem). Characters other than letters, digits, `-` and `_` become `_`.
pub(crate) fn file_stem(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '-' || ch == '_' {
                ch
            } else {
                '_'
            }
        })
        .collect();
    format!("rule_{safe}")
}

/// The persisted counterexamples of `name` in `dir` (cases tagged `rule` and `name`, file
/// names in order), as expressions again: each int64 buffer of slot A becomes the loop
/// variable rA, running over 0..(its largest value + 1). A missing folder holds none.
pub fn replay_cases(dir: &Path, name: &str) -> Result<Vec<(PathBuf, Expr)>, String> {
    let mut out = vec![];
    for (path, case) in persisted_cases(dir)? {
        if !(case.tags.iter().any(|t| t == "rule") && case.tags.iter().any(|t| t == name)) {
            continue;
        }
        let e = case_expr(&case).map_err(|m| format!("{}: {m}", path.display()))?;
        out.push((path, e));
    }
    Ok(out)
}

/// The cases of `dir` (its `.json` files, in file-name order), for replaying persisted
/// counterexamples (at every level). A missing folder holds none; a folder entry or file
/// that cannot be read, or a `.json` file that is not a case, is an error naming the file
/// and why: a regression file that does not replay must not pass silently.
pub fn persisted_cases(dir: &Path) -> Result<Vec<(PathBuf, Case)>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut paths = vec![];
    for entry in entries {
        let path = entry
            .map_err(|e| format!("{}: an entry cannot be read: {e}", dir.display()))?
            .path();
        if path.extension().is_some_and(|x| x == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| match crate::load::read_case(&path) {
            Ok(case) => Ok((path, case)),
            Err(e) => Err(format!(
                "{}: not replayed, it cannot be read as a case: {e}",
                path.display()
            )),
        })
        .collect()
}

/// A rule-regression case's `input` output as an expression over loop variables.
pub fn case_expr(case: &Case) -> Result<Expr, String> {
    let (loaded, _) = crate::load::load(case).map_err(|e| e.to_string())?;
    let out = case
        .outputs
        .first()
        .ok_or_else(|| "the case has no output".to_string())?;
    let root = loaded.arena(out.node).map_err(|e| e.to_string())?;
    let g = &loaded.graph;
    let mut t = Graph::new();
    let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    for id in g.reachable(&[root]) {
        let n = g.node(id);
        let new = if n.op == Op::BUFFER {
            let Arg::Buffer { slot, .. } = n.arg else {
                return Err(format!("buffer {id} without a slot"));
            };
            let values = loaded.inputs.get(&id).and_then(|i| i.first());
            let end = values
                .and_then(|v| v.iter().flatten().max().copied())
                .ok_or_else(|| format!("buffer {id} (slot {slot}) holds no values"))?;
            let end = t.add(Node {
                op: Op::CONST,
                dtype: DType::Int64,
                src: vec![],
                arg: Arg::Const(end + 1),
            });
            t.add(Node {
                op: Op::RANGE,
                dtype: DType::Int64,
                src: vec![end],
                arg: Arg::Index(slot as usize),
            })
        } else {
            t.add(Node {
                src: n.src.iter().map(|s| map[s]).collect(),
                ..n.clone()
            })
        };
        map.insert(id, new);
    }
    Ok(Expr {
        graph: t,
        root: map[&root],
    })
}
