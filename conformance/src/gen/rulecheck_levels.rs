//! Checking rewrite rules on whole programs (feature `testkit`; docs/rule-fuzzing.md,
//! "Levels"): the same before ≡ after property as [`super::rulecheck`], on
//!
//! * **tensor-level graphs** ([`check_rules_on_tensors`]): random tensor programs
//!   (`gen::tensor`, the differential fuzzer's generator); the rewriter runs on the whole
//!   graph from its outputs ([`RuleUnderTest::apply_graph`]), the oracle evaluates every
//!   output before and after on the program's inputs, and the outputs must agree bit for bit
//!   (dtype and shape included); an oracle error on both sides counts as the same. A failure
//!   is shrunk by its recipe (`shrink::shrink_recipe`) and, with
//!   [`LevelConfig::regressions`] set, the shrunk input program is written as a case
//!   (`rule_<name>_<id>.json`, atomically, never overwriting: `fuzz::write_new`) tagged
//!   `regression`, `rule-tensor` and the rule's name, expected values the oracle's; such
//!   cases are replayed first by the next tensor-level check of that name;
//! * **kernel-level programs** ([`check_rules_on_kernels`]): random kernels (`gen::kernel`,
//!   the kernel fuzzer's generator) as kernel graphs; the rewriter runs on the whole kernel
//!   graph from its sink, then the finishing passes and the linearizer; the kernel
//!   interpreter runs the program before and after (under every seed of `GPU_SEEDS`) and the
//!   parameter buffers must agree bit for bit, errors by kind. A failure is shrunk like the
//!   kernel fuzzer's (`kfuzz::candidates`) and printed with both programs; with
//!   [`LevelConfig::regressions`] set, the shrunk input program is written as a kernel-level
//!   case (`rule_<name>_<id>.json`, as at the tensor level) tagged `regression`,
//!   `rule-kernel` and the rule's name, expected buffers the kernel interpreter's; such cases
//!   are replayed first by the next kernel-level check of that name (the case's program
//!   lifted back to a kernel graph, `kgraph::lift`, and checked like a generated one).
//!
//! Both orders (bottom-up, top-down) are checked for each program. Programs are drawn from
//! seeds derived from [`LevelConfig::seed`], so a run is deterministic given (seed, cases).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use uopkit_compiler::kgraph::{lift, KernelGraph};
use uopkit_compiler::optimize::finishing;
use uopkit_compiler::rewrite::Order;
use uopkit_interp::eval::{Data, Elem, Value};
use uopkit_interp::ir::{Arg, Op};

use super::export::{export, fill_expect_from_oracle};
use super::kernel::{self, KernelConfig, KernelRecipe};
use super::rulecheck::{RuleReport, RuleUnderTest};
use super::tensor::{build, Generated, Recipe, TensorConfig, STEP_WORDS};
use crate::case::{Case, ErrorKind, ExpectError};
use crate::inputs::SplitMix64;
use crate::kernel_case;
use crate::kfuzz::{self, Outcome as KOutcome};
use crate::run::{output_values, run_oracle, RunError};
use crate::shrink::{shrink_recipe, ShrinkOpts};
use crate::stages::GPU_SEEDS;

/// The level a check runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Tensor,
    Kernel,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Tensor => "tensor",
            Level::Kernel => "kernel",
        })
    }
}

/// How much to check.
#[derive(Clone, Debug)]
pub struct LevelConfig {
    /// Generated programs to check (each in both rewrite orders).
    pub cases: u32,
    pub seed: u64,
    /// No new program starts after this (None: no limit).
    pub time_budget: Option<Duration>,
    /// The most candidate programs one shrink tries.
    pub shrink_steps: usize,
    /// Tensor level: the generator's limits.
    pub tensor: TensorConfig,
    /// Kernel level: the generator's limits.
    pub kernel: KernelConfig,
    /// The folder of persisted counterexamples of either level (replayed first, and where a
    /// new one is written); None: nothing is read or written.
    pub regressions: Option<PathBuf>,
}

impl Default for LevelConfig {
    fn default() -> Self {
        LevelConfig {
            cases: 256,
            seed: 0x5eed_2026,
            time_budget: None,
            shrink_steps: 400,
            tensor: TensorConfig::default(),
            kernel: KernelConfig::default(),
            regressions: None,
        }
    }
}

/// How a passing check went: [`RuleReport`] (one type for every level), `level` set to
/// `tensor` or `kernel`.
pub type LevelReport = RuleReport;

/// What went wrong: which side errs, if one does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LevelUb {
    /// Both sides ran (or both stopped).
    None,
    /// It ran before and stops after (with the error).
    Added(String),
    /// It stopped before (with the error) and runs after.
    Removed(String),
}

/// A rewrite that is not exact on a (shrunk) program.
#[derive(Clone, Debug)]
pub struct LevelCounterexample {
    pub name: String,
    pub level: Level,
    pub order: Order,
    pub fired: BTreeMap<String, usize>,
    /// The input program (the recipe's steps, or the kernel program before).
    pub input: String,
    /// The rewritten graph or program.
    pub rewritten: String,
    /// The inputs (buffers' contents).
    pub inputs: String,
    /// What differs (the output, both results' bits), or why the rewrite is unusable.
    pub detail: String,
    pub ub: LevelUb,
    /// The generated program that failed first (1 = the first); 0 = replayed.
    pub case_number: u32,
    pub nodes_before: usize,
    pub replayed_from: Option<PathBuf>,
    pub written_to: Option<PathBuf>,
    pub write_error: Option<String>,
}

impl fmt::Display for LevelCounterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: the rewrite is not exact on a {}-level program{}",
            self.name,
            self.level,
            match (&self.replayed_from, self.case_number) {
                (Some(p), _) => format!(", replayed from {}", p.display()),
                (None, n) => format!(", generated program #{n}, shrunk"),
            }
        )?;
        writeln!(f, "  fired:     {:?} ({:?})", self.fired, self.order)?;
        writeln!(f, "  input:\n{}", indent(&self.input))?;
        writeln!(f, "  rewritten:\n{}", indent(&self.rewritten))?;
        writeln!(f, "  inputs:\n{}", indent(&self.inputs))?;
        writeln!(f, "  differs:   {}", self.detail)?;
        match &self.ub {
            LevelUb::None => writeln!(f, "  undefined behaviour: not added or removed")?,
            LevelUb::Added(u) => writeln!(f, "  undefined behaviour: ADDED ({u})")?,
            LevelUb::Removed(u) => writeln!(f, "  undefined behaviour: REMOVED ({u})")?,
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

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a check did not pass.
#[derive(Debug, thiserror::Error)]
pub enum LevelError {
    #[error("{0}")]
    Counterexample(Box<LevelCounterexample>),
    #[error("cannot read persisted counterexamples: {0}")]
    Replay(String),
    #[error("the check stopped: {0}")]
    Aborted(String),
}

impl LevelError {
    pub fn counterexample(&self) -> Option<&LevelCounterexample> {
        match self {
            LevelError::Counterexample(c) => Some(c),
            LevelError::Replay(_) | LevelError::Aborted(_) => None,
        }
    }
}

/// One failing rewrite, before it is dressed as a counterexample.
struct Fail {
    order: Order,
    fired: BTreeMap<String, usize>,
    rewritten: String,
    detail: String,
    ub: LevelUb,
}

/// Firings and whether anything changed, over both orders.
type Passed = (BTreeMap<String, usize>, bool);

fn merge(hits: &mut BTreeMap<String, usize>, more: &BTreeMap<String, usize>) {
    for (k, v) in more {
        *hits.entry(k.clone()).or_insert(0) += v;
    }
}

// ------------------------------------------------------------------------------------------
// Tensor level

/// A value's dtype, shape and bits per device (None: never written).
type Bits = (String, Vec<usize>, Vec<Vec<Option<u64>>>);

fn bits(v: &Value) -> Bits {
    let col = |c: &Vec<Elem>| -> Vec<Option<u64>> {
        c.iter()
            .map(|e| match e {
                Elem::Bits(b) => Some(*b),
                Elem::Uninit { .. } => None,
            })
            .collect()
    };
    let data = match &v.data {
        Data::Single(c) => vec![col(c)],
        Data::Multi(cs) => cs.iter().map(col).collect(),
    };
    (v.dtype.to_string(), v.shape.clone(), data)
}

fn show_bits(b: &Bits) -> String {
    let comps: Vec<String> =
        b.2.iter()
            .map(|c| {
                let els: Vec<String> = c
                    .iter()
                    .take(24)
                    .map(|e| e.map_or("uninit".into(), |x| format!("{x:#x}")))
                    .collect();
                format!(
                    "[{}{}]",
                    els.join(" "),
                    if c.len() > 24 { " …" } else { "" }
                )
            })
            .collect();
    format!("{} {:?} bits {}", b.0, b.1, comps.join(" "))
}

/// The outputs' bits, or the oracle's error (a load error is not an outcome: Err(None)).
fn tensor_outcome(case: &Case) -> Result<Result<Vec<Bits>, String>, String> {
    match run_oracle(case) {
        Ok(run) => match output_values(case, &run) {
            Ok(vs) => Ok(Ok(vs.into_iter().map(bits).collect())),
            Err(e) => Ok(Err(e.to_string())),
        },
        Err(RunError::Oracle(e)) => Ok(Err(e.to_string())),
        Err(e) => Err(e.to_string()),
    }
}

/// The inputs of a case, one line per buffer.
fn case_inputs(case: &Case) -> String {
    if case.inputs.is_empty() {
        return "none".into();
    }
    case.inputs
        .iter()
        .map(|(id, init)| {
            let text = serde_json::to_string(init).unwrap_or_else(|e| e.to_string());
            format!("buffer {id}: {text}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks the rewrite of a tensor program (a case) in both orders. Err(None): the input
/// does not run (not a test of the rule).
fn check_tensor_case(rut: &RuleUnderTest, case: &Case) -> Result<Passed, Option<Box<Fail>>> {
    let before = tensor_outcome(case).map_err(|_| None)?;
    let (loaded, _) = crate::load::load(case).map_err(|_| None)?;
    let roots: Vec<_> = case
        .outputs
        .iter()
        .map(|o| loaded.arena(o.node))
        .collect::<Result<_, _>>()
        .map_err(|_| None)?;
    // Buffers' contents by slot, so a rewriter that renumbers nodes keeps them.
    let by_slot: BTreeMap<u32, _> = loaded
        .inputs
        .iter()
        .filter_map(|(id, init)| match loaded.graph.node(*id).arg {
            Arg::Buffer { slot, .. } => Some((slot, init.clone())),
            _ => None,
        })
        .collect();
    let mut hits = BTreeMap::new();
    let mut changed = false;
    for order in [Order::BottomUp, Order::TopDown] {
        let a = rut.apply_graph(&loaded.graph, &roots, order);
        let fail = |rewritten: String, detail: String, ub| {
            Some(Box::new(Fail {
                order,
                fired: a.fired.clone(),
                rewritten,
                detail,
                ub,
            }))
        };
        if let Some(m) = &a.stop {
            return Err(fail(
                String::new(),
                format!("no fixed point: {m}"),
                LevelUb::None,
            ));
        }
        merge(&mut hits, &a.fired);
        if !a.changed {
            continue;
        }
        changed = true;
        let inputs: BTreeMap<_, _> = a
            .graph
            .reachable(&a.roots)
            .into_iter()
            .filter(|id| a.graph.node(*id).op == Op::BUFFER)
            .filter_map(|id| match a.graph.node(id).arg {
                Arg::Buffer { slot, .. } => by_slot.get(&slot).map(|i| (id, i.clone())),
                _ => None,
            })
            .collect();
        let outputs: Vec<(String, _)> = case
            .outputs
            .iter()
            .zip(&a.roots)
            .map(|(o, r)| (o.name.clone(), *r))
            .collect();
        let after_case = match export(&a.graph, &inputs, &outputs, "rewritten", &[]) {
            Ok(c) => c,
            Err(m) => {
                return Err(fail(
                    String::new(),
                    format!("invalid rewrite: {m}"),
                    LevelUb::None,
                ))
            }
        };
        let shown = after_case.to_canonical_string();
        let after = match tensor_outcome(&after_case) {
            Ok(o) => o,
            Err(m) => return Err(fail(shown, format!("invalid rewrite: {m}"), LevelUb::None)),
        };
        match (&before, &after) {
            (Ok(b), Ok(x)) => {
                for ((o, p), q) in case.outputs.iter().zip(b).zip(x) {
                    if p != q {
                        let d = format!(
                            "output '{}': before {}, after {}",
                            o.name,
                            show_bits(p),
                            show_bits(q)
                        );
                        return Err(fail(shown, d, LevelUb::None));
                    }
                }
            }
            (Err(_), Err(_)) => {}
            (Ok(_), Err(e)) => {
                let d = format!("before: runs; after: {e}");
                return Err(fail(shown, d, LevelUb::Added(e.clone())));
            }
            (Err(e), Ok(_)) => {
                let d = format!("before: {e}; after: runs");
                return Err(fail(shown, d, LevelUb::Removed(e.clone())));
            }
        }
    }
    Ok((hits, changed))
}

/// The recipe of program `k` of a run with `seed` (1 to `max_steps` random steps).
fn tensor_recipe(seed: u64, k: u64, cfg: &TensorConfig) -> Recipe {
    let mut rng = SplitMix64(seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let n = 1 + (rng.next_u64() % cfg.max_steps.max(1) as u64) as usize;
    let steps = (0..n)
        .map(|_| {
            let mut s = [0u32; STEP_WORDS];
            for w in &mut s {
                *w = rng.next_u64() as u32;
            }
            s
        })
        .collect();
    Recipe { steps }
}

/// The counterexample's input as a case: tags `regression`, `rule-tensor` and the name,
/// expected values the oracle's (or `expect_error` when the input stops).
fn tensor_regression_case(
    c: &LevelCounterexample,
    g: &Generated,
    seed: u64,
) -> Result<Case, String> {
    let mut case = g.case.clone();
    case.description = format!(
        "expected values from the oracle at discovery time (rule regression): the rewrite '{}' ({:?}) is not exact on this tensor program: {}; found by the rule checker at the tensor level (gen::rulecheck_levels), seed {seed:#x}",
        c.name, c.order, c.detail
    );
    case.tags = vec!["regression".into(), "rule-tensor".into(), c.name.clone()];
    match run_oracle(&case) {
        Ok(_) => fill_expect_from_oracle(&mut case)?,
        Err(_) => {
            case.expect_error = Some(ExpectError {
                kind: ErrorKind::Ub,
                ub: None,
                node: None,
                element: None,
                contains: None,
                program: None,
                inst: None,
            })
        }
    }
    Ok(case)
}

/// The persisted counterexamples of `name` in `dir` tagged `level_tag` (`rule-tensor`,
/// `rule-kernel`), in file-name order; a file that cannot be read as a case is an error.
fn replays(dir: &Path, name: &str, level_tag: &str) -> Result<Vec<(PathBuf, Case)>, String> {
    Ok(super::rulecheck::persisted_cases(dir)?
        .into_iter()
        .filter(|(_, c)| c.tags.iter().any(|t| t == level_tag) && c.tags.iter().any(|t| t == name))
        .collect())
}

fn dress(
    rut: &RuleUnderTest,
    level: Level,
    f: Fail,
    input: String,
    inputs: String,
    case_number: u32,
    nodes_before: usize,
) -> LevelCounterexample {
    LevelCounterexample {
        name: rut.name().to_string(),
        level,
        order: f.order,
        fired: f.fired,
        input,
        rewritten: f.rewritten,
        inputs,
        detail: f.detail,
        ub: f.ub,
        case_number,
        nodes_before,
        replayed_from: None,
        written_to: None,
        write_error: None,
    }
}

/// [`check_rules_on_tensors_with`] without progress reports.
pub fn check_rules_on_tensors(
    rut: &RuleUnderTest,
    cfg: &LevelConfig,
) -> Result<LevelReport, LevelError> {
    check_rules_on_tensors_with(rut, cfg, &mut |_| {})
}

/// Checks that every rewrite `rut` makes on generated tensor programs is exact: first the
/// persisted tensor-level counterexamples of its name, then `cfg.cases` programs.
/// `progress` is called every 64 programs.
pub fn check_rules_on_tensors_with(
    rut: &RuleUnderTest,
    cfg: &LevelConfig,
    progress: &mut dyn FnMut(&LevelReport),
) -> Result<LevelReport, LevelError> {
    let start = Instant::now();
    let mut report = LevelReport {
        name: rut.name().to_string(),
        level: Level::Tensor.to_string(),
        seed: cfg.seed,
        ..LevelReport::default()
    };
    if let Some(dir) = &cfg.regressions {
        for (path, case) in replays(dir, rut.name(), "rule-tensor").map_err(LevelError::Replay)? {
            let outcome = check_tensor_case(rut, &case);
            if let Err(None) = outcome {
                // Its input does not load or run: it was not replayed, and must not pass.
                return Err(LevelError::Replay(format!(
                    "{}: not replayed, the case's program does not load or run in the oracle",
                    path.display()
                )));
            }
            if let Err(Some(f)) = outcome {
                let text = case.to_canonical_string();
                let mut c = dress(
                    rut,
                    Level::Tensor,
                    *f,
                    text,
                    case_inputs(&case),
                    0,
                    case.graph.len(),
                );
                c.replayed_from = Some(path);
                return Err(LevelError::Counterexample(Box::new(c)));
            }
            report.replayed += 1;
        }
    }
    for k in 0..cfg.cases as u64 {
        if cfg.time_budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        let recipe = tensor_recipe(cfg.seed, k, &cfg.tensor);
        let g = build(&recipe, &cfg.tensor);
        match check_tensor_case(rut, &g.case) {
            Ok((hits, changed)) => {
                report.cases += 1;
                report.fired_cases += changed as u32;
                merge(&mut report.hits, &hits);
            }
            Err(None) => report.skipped += 1,
            Err(Some(_)) => {
                let opts = ShrinkOpts {
                    max_checks: cfg.shrink_steps,
                    max_time: Duration::from_secs(30),
                };
                let (small, _) = shrink_recipe(&recipe, &cfg.tensor, opts, &mut |g| {
                    matches!(check_tensor_case(rut, &g.case), Err(Some(_)))
                });
                // The shrunk program fails (shrink_recipe keeps the input otherwise).
                let small = match check_tensor_case(rut, &small.case) {
                    Err(Some(_)) => small,
                    _ => g,
                };
                let Err(Some(f)) = check_tensor_case(rut, &small.case) else {
                    return Err(LevelError::Aborted(format!(
                        "the failing program no longer fails (a non-deterministic rewriter?):\n{}",
                        small.log.join("\n")
                    )));
                };
                let mut c = dress(
                    rut,
                    Level::Tensor,
                    *f,
                    small.log.join("\n"),
                    case_inputs(&small.case),
                    report.cases + report.skipped + 1,
                    small.case.graph.len(),
                );
                if let Some(dir) = &cfg.regressions {
                    match tensor_regression_case(&c, &small, cfg.seed).and_then(|case| {
                        crate::fuzz::write_new(dir, &super::rulecheck::file_stem(&c.name), &case)
                            .map_err(|e| e.to_string())
                    }) {
                        Ok(p) => c.written_to = Some(p),
                        Err(m) => c.write_error = Some(m),
                    }
                }
                return Err(LevelError::Counterexample(Box::new(c)));
            }
        }
        if (k + 1) % 64 == 0 {
            report.elapsed = start.elapsed();
            progress(&report);
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

// ------------------------------------------------------------------------------------------
// Kernel level

/// Checks the rewrite of a generated kernel in both orders. Err(None): the kernel or its
/// reference run is not valid (a generator limit, as in the kernel fuzzer).
fn check_kernel(rut: &RuleUnderTest, r: &KernelRecipe) -> Result<Passed, Option<Box<Fail>>> {
    let k = kernel::build(r, "rulecheck").map_err(|_| None)?;
    check_kernel_graph(rut, &k, &kernel::inputs(r))
}

/// Checks the rewrite of kernel graph `k` on the param buffers `init` in both orders.
fn check_kernel_graph(
    rut: &RuleUnderTest,
    k: &KernelGraph,
    init: &[Vec<Elem>],
) -> Result<Passed, Option<Box<Fail>>> {
    let p0 = kfuzz::lowered(k, &finishing()).map_err(|_| None)?;
    let want = kfuzz::interpret(&p0, init, GPU_SEEDS[0]);
    if matches!(want, KOutcome::Error(_)) || kfuzz::differs(&p0, init, &want).is_some() {
        return Err(None);
    }
    let mut hits = BTreeMap::new();
    let mut changed = false;
    for order in [Order::BottomUp, Order::TopDown] {
        let a = rut.apply_graph(&k.graph, &[k.sink], order);
        let fail = |rewritten: String, detail: String, ub| {
            Some(Box::new(Fail {
                order,
                fired: a.fired.clone(),
                rewritten,
                detail,
                ub,
            }))
        };
        if let Some(m) = &a.stop {
            return Err(fail(
                String::new(),
                format!("no fixed point: {m}"),
                LevelUb::None,
            ));
        }
        merge(&mut hits, &a.fired);
        if !a.changed {
            continue;
        }
        changed = true;
        let k2 = KernelGraph {
            graph: a.graph.clone(),
            sink: a.roots[0],
            ..k.clone()
        };
        let p = match kfuzz::lowered(&k2, &finishing()) {
            Ok(p) => p,
            Err(m) => {
                return Err(fail(
                    String::new(),
                    format!("invalid rewrite: {m}"),
                    LevelUb::None,
                ))
            }
        };
        if let Some(d) = kfuzz::differs(&p, init, &want) {
            // The reference runs (checked above), so an error here is added.
            let ub = GPU_SEEDS
                .iter()
                .find_map(|s| match kfuzz::interpret(&p, init, *s) {
                    KOutcome::Error(e) => Some(LevelUb::Added(e)),
                    KOutcome::Buffers(_) => None,
                })
                .unwrap_or(LevelUb::None);
            return Err(fail(p.to_string(), d, ub));
        }
    }
    Ok((hits, changed))
}

/// A persisted kernel-level counterexample as a kernel graph (its one kernel step's program,
/// lifted) and that step's buffers' initial contents.
fn replay_kernel(case: &Case) -> Result<(KernelGraph, Vec<Vec<Elem>>, String), String> {
    let body = case.kernel.as_ref().ok_or("not a kernel-level case")?;
    let kc = kernel_case::load(body).map_err(|e| e.to_string())?;
    let [kernel_case::Step::Kernel { program, args }] = kc.steps.as_slice() else {
        return Err("a rule counterexample has exactly one step, a kernel".into());
    };
    let p = kc.programs.get(*program).ok_or("no such program")?;
    let init = args
        .iter()
        .map(|a| kc.buffers.get(a).map(|b| b.init.clone()))
        .collect::<Option<Vec<_>>>()
        .ok_or("a step names a buffer the case does not declare")?;
    let k = lift(p).map_err(|e| format!("cannot lift its program: {e}"))?;
    Ok((k, init, p.to_string()))
}

/// The counterexample's input program as a kernel-level case: tags `regression`,
/// `rule-kernel` and the name, expected buffers the kernel interpreter's.
fn kernel_regression_case(
    c: &LevelCounterexample,
    r: &KernelRecipe,
    seed: u64,
) -> Result<Case, String> {
    let k = kernel::build(r, "rulecheck").map_err(|e| e.to_string())?;
    let p0 = kfuzz::lowered(&k, &finishing())?;
    let description = format!(
        "expected values from the kernel interpreter at discovery time (rule regression): the rewrite '{}' ({:?}) is not exact on this kernel: {}; found by the rule checker at the kernel level (gen::rulecheck_levels), seed {seed:#x}",
        c.name,
        c.order,
        c.detail.lines().next().unwrap_or("")
    );
    let tags = vec!["regression".into(), "rule-kernel".into(), c.name.clone()];
    kfuzz::program_case(&p0, r, description, tags)
        .ok_or_else(|| "the reference leaves an output element unwritten".to_string())
}

fn kernel_inputs(init: &[Vec<Elem>]) -> String {
    if init.is_empty() {
        return "none".into();
    }
    init.iter()
        .enumerate()
        .map(|(slot, b)| {
            let els: Vec<String> = b
                .iter()
                .map(|e| match e {
                    Elem::Bits(x) => format!("{x:#x}"),
                    Elem::Uninit { .. } => "uninit".into(),
                })
                .collect();
            format!("param slot {slot}: [{}]", els.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`check_rules_on_kernels_with`] without progress reports.
pub fn check_rules_on_kernels(
    rut: &RuleUnderTest,
    cfg: &LevelConfig,
) -> Result<LevelReport, LevelError> {
    check_rules_on_kernels_with(rut, cfg, &mut |_| {})
}

/// Checks that every rewrite `rut` makes on generated kernels is exact: first the persisted
/// kernel-level counterexamples of its name, then `cfg.cases` kernels, from seeds
/// `cfg.seed`, `cfg.seed + 1`, …. `progress` is called every 64.
pub fn check_rules_on_kernels_with(
    rut: &RuleUnderTest,
    cfg: &LevelConfig,
    progress: &mut dyn FnMut(&LevelReport),
) -> Result<LevelReport, LevelError> {
    let start = Instant::now();
    let mut report = LevelReport {
        name: rut.name().to_string(),
        level: Level::Kernel.to_string(),
        seed: cfg.seed,
        ..LevelReport::default()
    };
    if let Some(dir) = &cfg.regressions {
        for (path, case) in replays(dir, rut.name(), "rule-kernel").map_err(LevelError::Replay)? {
            let (k, init, text) = replay_kernel(&case)
                .map_err(|e| LevelError::Replay(format!("{}: {e}", path.display())))?;
            let outcome = check_kernel_graph(rut, &k, &init);
            if let Err(None) = outcome {
                // Its program does not lower or run: it was not replayed, and must not pass.
                return Err(LevelError::Replay(format!(
                    "{}: not replayed, the case's program does not lower or run in the kernel interpreter",
                    path.display()
                )));
            }
            if let Err(Some(f)) = outcome {
                let mut c = dress(
                    rut,
                    Level::Kernel,
                    *f,
                    text,
                    kernel_inputs(&init),
                    0,
                    k.nodes().len(),
                );
                c.replayed_from = Some(path);
                return Err(LevelError::Counterexample(Box::new(c)));
            }
            report.replayed += 1;
        }
    }
    for k in 0..cfg.cases as u64 {
        if cfg.time_budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        let r = kernel::recipe(cfg.seed.wrapping_add(k), &cfg.kernel);
        match check_kernel(rut, &r) {
            Ok((hits, changed)) => {
                report.cases += 1;
                report.fired_cases += changed as u32;
                merge(&mut report.hits, &hits);
            }
            Err(None) => report.skipped += 1,
            Err(Some(_)) => {
                let mut best = r;
                let mut tried = 0;
                'outer: loop {
                    for cand in kfuzz::candidates(&best) {
                        if tried >= cfg.shrink_steps {
                            break 'outer;
                        }
                        tried += 1;
                        if matches!(check_kernel(rut, &cand), Err(Some(_))) {
                            best = cand;
                            continue 'outer;
                        }
                    }
                    break;
                }
                let Err(Some(f)) = check_kernel(rut, &best) else {
                    return Err(LevelError::Aborted(format!(
                        "the failing kernel no longer fails (a non-deterministic rewriter?): {best:?}"
                    )));
                };
                let before = kernel::build(&best, "rulecheck")
                    .map_err(|e| e.to_string())
                    .and_then(|k| kfuzz::lowered(&k, &finishing()))
                    .map_or_else(|e| e, |p| p.to_string());
                let nodes = kernel::build(&best, "rulecheck").map_or(0, |k| k.nodes().len());
                let mut c = dress(
                    rut,
                    Level::Kernel,
                    *f,
                    before,
                    kernel_inputs(&kernel::inputs(&best)),
                    report.cases + report.skipped + 1,
                    nodes,
                );
                if let Some(dir) = &cfg.regressions {
                    match kernel_regression_case(&c, &best, cfg.seed).and_then(|case| {
                        crate::fuzz::write_new(dir, &super::rulecheck::file_stem(&c.name), &case)
                            .map_err(|e| e.to_string())
                    }) {
                        Ok(p) => c.written_to = Some(p),
                        Err(m) => c.write_error = Some(m),
                    }
                }
                return Err(LevelError::Counterexample(Box::new(c)));
            }
        }
        if (k + 1) % 64 == 0 {
            report.elapsed = start.elapsed();
            progress(&report);
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}
