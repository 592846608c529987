//! Stage-by-stage validation: every form the compiler produces is run and compared with the
//! tensor-level oracle, so a disagreement is pinned to the stage, the rewrite pass and the
//! kernel where it first appears.
//!
//! Stages, in order:
//! 1. `kernels: lowered` — the scheduled kernels with no rewrite pass and no kernel pass
//!    (only the finishing `expand_reduce`), run by the kernel interpreter on the real buffers
//!    in schedule order;
//! 2. `kernels: after <pass>` — the same after each rewrite pass on the index arithmetic
//!    (cumulative), then after each of the CPU target's kernel passes
//!    (`optimize::passes(Target::Cpu)`: `cpu_tile`, `cpu_interchange`, `cpu_split_lanes`, `cpu_threads`;
//!    cumulative, the kernels the C backend renders after the last one);
//! 3. `gpusim: lowered`, `gpusim: after <pass>` — the GPU-style kernels after each of the GPU
//!    target's passes, under every seed of [`GPU_SEEDS`];
//! 4. `rendered: <backend>` — the rendered code compiled and run by the backend, judged like a
//!    trial (`harness::diff`).
//!
//! When the first difference is at a pass, the case is scheduled once more with a
//! [`RewriteTrace`] and [`DiffReport::trace`] holds that pass's steps in the pinned kernel
//! (all kernels for a GPU pass), marked against the diverging node ([`crate::pass_trace`]).
//! The kernel interpreter runs a loop `cpu_threads` marked parallel in order, so a race
//! between its threads shows only at the rendered stage.

use std::collections::BTreeMap;

use uopkit_compiler::pipeline;
use uopkit_compiler::rewrite;
use uopkit_compiler::rewrite::RuleSet;
use uopkit_compiler::schedule::{
    BufId, BufferKind, Schedule, ScheduleError, ScheduleOpts, Step, Target,
};
use uopkit_interp::eval::{BufferInit, Elem, Value};
use uopkit_interp::ir::NodeId;
use uopkit_interp::kernel::interp::{run as run_kernel, RunOpts};

/// The interleavings the GPU-style kernels run under (the kernel interpreter's seeds), in
/// the `gpusim` trials and in `uopkit diff`.
pub const GPU_SEEDS: [u64; 3] = [0, 0x9E37_79B9_7F4A_7C15, 0xD1B5_4A32_D192_ED03];

use crate::case::Case;
use crate::compare;
use crate::pass_trace::{PassTrace, TraceSection};
use crate::run::{self, OracleRun, RunError};
use uopkit_compiler::rewrite::{RewriteTrace, TraceGraph};

/// Why `uopkit diff` could not run the stages.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DiffError {
    /// The case expects an error: there are no stages to compare.
    #[error("the case expects an error: its graph is undefined, so it is oracle-only")]
    OracleOnly,
    /// The oracle itself failed on the case.
    #[error("the oracle failed: {0}")]
    Oracle(RunError),
    /// The oracle's values of the case's outputs could not be read.
    #[error("{0}")]
    Outputs(RunError),
    /// An output names a node the case does not have.
    #[error("{0}")]
    Case(String),
    /// The compiler refused to schedule the graph.
    #[error("scheduler: {0}")]
    Refused(#[from] ScheduleError),
    /// The compiler's settings from the environment cannot be used.
    #[error("{0}")]
    Settings(String),
    /// The backend's allowance manifest could not be read (the rendered stage).
    #[error(transparent)]
    Manifest(#[from] crate::backend::ManifestError),
}

/// Buffer contents after each step of an interpreted schedule.
pub struct Trace {
    pub outputs: Vec<Option<Value>>,
    /// For each step, the buffer it wrote and that buffer's contents just after it (kept only
    /// when asked for: [`Record::Writes`]).
    pub written: Vec<(BufId, Vec<Elem>)>,
}

/// What [`interpret_schedule`] keeps besides the outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Only the outputs.
    Outputs,
    /// Also a copy of each step's written buffer (to pin a difference to a step).
    Writes,
}

/// Why interpreting a schedule stopped: at which step (if a step), and the error.
#[derive(Clone, Debug)]
pub struct StepError {
    pub step: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for StepError {
    fn from(message: String) -> Self {
        StepError {
            step: None,
            message,
        }
    }
}

/// Runs every step of `s` in the kernel interpreter (COPY steps copy whole buffers).
pub fn interpret_schedule(
    s: &Schedule,
    inputs: &BTreeMap<NodeId, BufferInit>,
    opts: &RunOpts,
    record: Record,
) -> Result<Trace, StepError> {
    let at = |k: usize, message: String| StepError {
        step: Some(k),
        message,
    };
    // Every buffer is held as elements: budget them before allocating.
    let elems = s
        .buffers
        .iter()
        .try_fold(0u64, |n, b| n.checked_add(b.size as u64))
        .unwrap_or(u64::MAX);
    let needed = elems.saturating_mul(std::mem::size_of::<Elem>() as u64);
    let limit = uopkit_interp::eval::budget::limit_from_env()?;
    if needed > limit {
        return Err(StepError::from(format!(
            "the kernel interpreter would need {} for the schedule's {} buffer(s), over the memory limit of {} (set {} to change it)",
            uopkit_interp::eval::budget::human(needed),
            s.buffers.len(),
            uopkit_interp::eval::budget::human(limit),
            uopkit_interp::eval::budget::ENV
        )));
    }
    let mut bufs: Vec<Vec<Elem>> = s
        .buffers
        .iter()
        .enumerate()
        .map(|(b, d)| {
            let (node, c) = match d.kind {
                BufferKind::Graph(n) => (n, 0),
                BufferKind::GraphComponent(n, c) => (n, c),
                // Poison that names no graph node (ids from the top of the range).
                BufferKind::Intermediate => {
                    let buffer = NodeId(u32::MAX - b as u32);
                    return (0..d.size)
                        .map(|index| Elem::Uninit { buffer, index })
                        .collect();
                }
            };
            let init = inputs.get(&node).and_then(|i| i.get(c));
            (0..d.size)
                .map(
                    |index| match init.and_then(|i| i.get(index)).copied().flatten() {
                        Some(bits) => Elem::Bits(bits),
                        None => Elem::Uninit {
                            buffer: node,
                            index,
                        },
                    },
                )
                .collect()
        })
        .collect();
    let mut written = vec![];
    for (k, st) in s.steps.iter().enumerate() {
        match st {
            Step::Kernel { program, args, .. } => {
                let mut distinct = args.clone();
                distinct.sort();
                distinct.dedup();
                if distinct.len() != args.len() {
                    return Err(at(k, format!("step {k}: a buffer is passed twice")));
                }
                let mut kb: Vec<Vec<Elem>> = args
                    .iter()
                    .map(|a| std::mem::take(&mut bufs[a.0 as usize]))
                    .collect();
                let r = run_kernel(program, &mut kb, opts);
                for (a, b) in args.iter().zip(kb) {
                    bufs[a.0 as usize] = b;
                }
                r.map_err(|e| at(k, format!("step {k} (kernel {}): {e}", program.name)))?;
                let w = args
                    .iter()
                    .zip(&program.params)
                    .find(|(_, p)| p.written)
                    .map(|(b, _)| *b);
                if let (Some(w), Record::Writes) = (w, record) {
                    written.push((w, bufs[w.0 as usize].clone()));
                }
            }
            Step::Copy { dst, src } => {
                let v = bufs[src.0 as usize].clone();
                if v.len() != bufs[dst.0 as usize].len() {
                    return Err(at(
                        k,
                        format!("step {k}: COPY between buffers of different sizes"),
                    ));
                }
                if record == Record::Writes {
                    written.push((*dst, v.clone()));
                }
                bufs[dst.0 as usize] = v;
            }
        }
    }
    let outputs = s.output_values(|b| Ok::<_, StepError>(bufs[b.0 as usize].clone()))?;
    Ok(Trace { outputs, written })
}

/// Compares stage outputs with the oracle's; empty when they agree.
fn diff_outputs(case: &Case, oracle: &[&Value], got: &[Option<Value>]) -> String {
    let mut report = String::new();
    for ((out, want), got) in case.outputs.iter().zip(oracle).zip(got) {
        let Some(got) = got else {
            report += &format!("output '{}' has no value\n", out.name);
            continue;
        };
        match compare::compare_values(out, want, got) {
            Ok(d) if d.passed() => {}
            Ok(d) => report += &d.report(4),
            Err(e) => report += &format!("{e}\n"),
        }
    }
    report
}

/// One stage's verdict.
#[derive(Clone, Debug)]
pub struct StageResult {
    pub stage: String,
    /// None when the stage agrees with the oracle; otherwise what differs.
    pub difference: Option<String>,
}

/// What `uopkit diff` reports.
#[derive(Clone, Debug)]
pub struct DiffReport {
    pub stages: Vec<StageResult>,
    /// The first stage that differs, with the pass, kernel and node it is pinned to.
    pub first: Option<String>,
    /// For the first difference: the rewrite trace of its pass in its kernel, or why there
    /// is none (None when every stage agrees).
    pub trace: Option<TraceSection>,
    /// The case-file id of the graph node whose kernel the first difference is pinned to
    /// (None: not pinned to a kernel, e.g. only the GPU-style or rendered stage differs).
    pub node: Option<u64>,
}

impl DiffReport {
    pub fn agrees(&self) -> bool {
        self.first.is_none()
    }
}

/// One CPU-style stage: the first `index` rewrite passes (on the index arithmetic, during
/// lowering), then the first `kernel` of the CPU target's kernel passes.
#[derive(Clone, Copy, Debug)]
struct CpuStage {
    index: usize,
    kernel: usize,
}

/// Runs the interpreted stages in order and pins the first difference from the oracle (the
/// rendered stage on a backend is added by `harness::diff`).
pub fn diff(case: &Case) -> Result<DiffReport, DiffError> {
    if case.expect_error.is_some() {
        return Err(DiffError::OracleOnly);
    }
    let run = run::run_oracle(case).map_err(DiffError::Oracle)?;
    let want = run::output_values(case, &run).map_err(DiffError::Outputs)?;
    let passes = pipeline::default_passes();
    let cpu = uopkit_compiler::optimize::passes(Target::Cpu);
    let env = ScheduleOpts::from_env().map_err(|e| DiffError::Settings(e.to_string()))?;
    let opts = RunOpts::default();
    let mut stages = vec![];
    let mut first = None;
    let mut section = None;
    let mut node = None;
    let mut previous: Option<(String, Schedule, Trace)> = None;
    // The rewrite passes one by one with no kernel pass, then the CPU target's kernel passes
    // one by one after all of them (the order the pipeline runs them in).
    let cpu_stages = (0..=passes.len())
        .map(|index| CpuStage { index, kernel: 0 })
        .chain((1..=cpu.len()).map(|kernel| CpuStage {
            index: passes.len(),
            kernel,
        }));
    for st in cpu_stages {
        let rewrite_pass = st.index.checked_sub(1).and_then(|i| passes.get(i));
        let kernel_pass = st.kernel.checked_sub(1).and_then(|i| cpu.get(i));
        let stage = match (kernel_pass, rewrite_pass) {
            (Some(p), _) => format!("kernels: after pass '{}'", p.name()),
            (None, Some(p)) => format!("kernels: after pass '{}'", p.name),
            (None, None) => "kernels: lowered".to_string(),
        };
        let opts_k = ScheduleOpts {
            target: Target::Cpu,
            kernel_passes: Some(st.kernel),
            ..env.clone()
        };
        let index_passes = &passes[..st.index];
        let sched = schedule_case_opts(&run, case, index_passes, &opts_k)?;
        let (difference, trace, failed_step) =
            match interpret_schedule(&sched, &run.loaded.inputs, &opts, Record::Writes) {
                Err(e) => (Some(e.message), None, e.step),
                Ok(t) => {
                    let d = diff_outputs(case, &want, &t.outputs);
                    (if d.is_empty() { None } else { Some(d) }, Some(t), None)
                }
            };
        if let (Some(d), None) = (&difference, &first) {
            let prev = previous.as_ref().map(|(_, s, t)| (s, t));
            let step = failed_step.or_else(|| differing_step(&sched, trace.as_ref(), prev));
            node = step.and_then(|k| computed_node(&sched, k, &run));
            let pinned = match (failed_step, step) {
                (Some(k), _) => describe_kernel(
                    &sched,
                    k,
                    prev.map(|(s, _)| s),
                    &run,
                    "stops in the kernel interpreter",
                ),
                (None, Some(k)) => describe_kernel(
                    &sched,
                    k,
                    prev.map(|(s, _)| s),
                    &run,
                    "writes different values than before the pass",
                ),
                (None, None) => String::new(),
            };
            let kernels = match step.and_then(|i| sched.steps.get(i)) {
                Some(Step::Kernel { program, .. }) => vec![program.name.clone()],
                _ => kernel_names(&sched),
            };
            let (pass, rules, trace_section) = match (kernel_pass, rewrite_pass) {
                (Some(p), _) => {
                    let culprits = kernel_culprits(p, &opts_k, |o| {
                        schedule_case_opts(&run, case, index_passes, o)
                            .ok()
                            .and_then(|s| {
                                interpret_schedule(&s, &run.loaded.inputs, &opts, Record::Outputs)
                                    .ok()
                            })
                            .is_some_and(|t| diff_outputs(case, &want, &t.outputs).is_empty())
                    });
                    (
                        format!("kernel pass '{}'", p.name()),
                        culprit_note(&culprits),
                        pass_traces(
                            &run,
                            case,
                            index_passes,
                            &opts_k,
                            p.name(),
                            &kernels,
                            TraceGraph::Kernel,
                        )?,
                    )
                }
                (None, Some(p)) => (
                    format!("rewrite pass '{}'", p.name),
                    culprit_rules(case, &run, &want, index_passes, &opts_k, &opts),
                    pass_traces(
                        &run,
                        case,
                        index_passes,
                        &opts_k,
                        p.name,
                        &kernels,
                        TraceGraph::Index,
                    )?,
                ),
                (None, None) => (
                    "before any rewrite pass (scheduling or lowering)".to_string(),
                    String::new(),
                    TraceSection::NotARewritePass {
                        stage: stage.clone(),
                    },
                ),
            };
            section = Some(trace_section);
            first = Some(format!(
                "first difference at stage '{stage}', {pass}{rules}\n{pinned}{d}"
            ));
        }
        stages.push(StageResult {
            stage: stage.clone(),
            difference,
        });
        if let Some(t) = trace {
            previous = Some((stage, sched, t));
        }
    }
    // The GPU-style kernels, after each of the GPU target's passes, under every seed.
    let gpu = uopkit_compiler::optimize::passes(Target::Gpu);
    for k in 0..=gpu.len() {
        let (stage, pass) = if k == 0 {
            (
                "gpusim: lowered".to_string(),
                "before any GPU pass".to_string(),
            )
        } else {
            let name = gpu[k - 1].name();
            (
                format!("gpusim: after pass '{name}'"),
                format!("kernel pass '{name}'"),
            )
        };
        let opts_k = ScheduleOpts {
            target: Target::Gpu,
            kernel_passes: Some(k),
            ..env.clone()
        };
        let sched = schedule_case_opts(&run, case, &passes, &opts_k)?;
        let difference = gpu_difference(case, &run, &want, &sched, &opts);
        if let (Some(d), None) = (&difference, &first) {
            let rules = match k.checked_sub(1).and_then(|i| gpu.get(i)) {
                Some(p) => kernel_culprits(p, &opts_k, |o| {
                    schedule_case_opts(&run, case, &passes, o)
                        .ok()
                        .is_some_and(|s| gpu_difference(case, &run, &want, &s, &opts).is_none())
                }),
                None => vec![],
            };
            let rules = if rules.is_empty() {
                String::new()
            } else {
                format!(" (culprit rule: {})", rules.join(", "))
            };
            first = Some(format!(
                "first difference at stage '{stage}', {pass}{rules}\n{d}\nschedule:\n{}",
                sched.listing(&|n| format!("node {}", file_id(&run, n)))
            ));
            section = Some(match k.checked_sub(1).and_then(|i| gpu.get(i)) {
                None => TraceSection::NotARewritePass {
                    stage: stage.clone(),
                },
                Some(p) => pass_traces(
                    &run,
                    case,
                    &passes,
                    &opts_k,
                    p.name(),
                    &kernel_names(&sched),
                    TraceGraph::Kernel,
                )?,
            });
        }
        stages.push(StageResult { stage, difference });
    }
    Ok(DiffReport {
        stages,
        first,
        trace: section,
        node,
    })
}

/// The names of the schedule's kernels, in step order.
fn kernel_names(sched: &Schedule) -> Vec<String> {
    sched
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { program, .. } => Some(program.name.clone()),
            Step::Copy { .. } => None,
        })
        .collect()
}

/// Schedules the case again with a [`RewriteTrace`] and picks out `pass`'s steps in each of
/// `kernels` (in `graph`).
fn pass_traces(
    run: &OracleRun,
    case: &Case,
    passes: &[RuleSet],
    opts: &ScheduleOpts,
    pass: &str,
    kernels: &[String],
    graph: TraceGraph,
) -> Result<TraceSection, DiffError> {
    let roots = output_roots(run, case)?;
    let mut trace = RewriteTrace::default();
    pipeline::schedule_traced(
        &run.loaded.graph,
        &run.verified,
        &roots,
        passes,
        opts,
        &mut trace,
    )
    .map_err(|e| {
        DiffError::Refused(ScheduleError {
            node: NodeId(file_id(run, e.node) as u32),
            reason: e.reason,
        })
    })?;
    Ok(TraceSection::Pass(
        kernels
            .iter()
            .map(|k| PassTrace::from_trace(&trace, pass, k, graph))
            .collect(),
    ))
}

/// How the GPU-style schedule's outputs differ from the oracle's under the first seed of
/// [`GPU_SEEDS`] that shows a difference (None: they agree under every seed).
fn gpu_difference(
    case: &Case,
    run: &OracleRun,
    want: &[&Value],
    sched: &Schedule,
    opts: &RunOpts,
) -> Option<String> {
    GPU_SEEDS.iter().find_map(|&seed| {
        let o = RunOpts {
            seed,
            ..opts.clone()
        };
        let d = match interpret_schedule(sched, &run.loaded.inputs, &o, Record::Outputs) {
            Err(e) => e.message,
            Ok(t) => diff_outputs(case, want, &t.outputs),
        };
        (!d.is_empty()).then(|| format!("under seed {seed:#x}:\n{d}"))
    })
}

fn schedule_case_opts(
    run: &OracleRun,
    case: &Case,
    passes: &[RuleSet],
    opts: &ScheduleOpts,
) -> Result<Schedule, DiffError> {
    let roots = output_roots(run, case)?;
    // A refusal names the case-file node, as every message does.
    pipeline::schedule_with_opts(&run.loaded.graph, &run.verified, &roots, passes, opts).map_err(
        |e| {
            DiffError::Refused(ScheduleError {
                node: NodeId(file_id(run, e.node) as u32),
                reason: e.reason,
            })
        },
    )
}

/// Which rules of the last rewrite pass the difference depends on: the pass is rerun without
/// each rule in turn (with the kernel passes of `sched`), and a rule whose removal makes the
/// stage agree with the oracle is named.
fn culprit_rules(
    case: &Case,
    run: &OracleRun,
    want: &[&Value],
    passes: &[RuleSet],
    sched: &ScheduleOpts,
    opts: &RunOpts,
) -> String {
    let Some((last, earlier)) = passes.split_last() else {
        return String::new();
    };
    let mut culprits = vec![];
    for r in last.rules() {
        let without: Vec<_> = last
            .rules()
            .iter()
            .filter(|x| x.name != r.name)
            .cloned()
            .collect();
        let mut trial: Vec<RuleSet> = earlier.to_vec();
        trial.push(RuleSet::new(last.name, without));
        let agrees = schedule_case_opts(run, case, &trial, sched)
            .ok()
            .and_then(|s| interpret_schedule(&s, &run.loaded.inputs, opts, Record::Outputs).ok())
            .is_some_and(|t| diff_outputs(case, want, &t.outputs).is_empty());
        if agrees {
            culprits.push(r.name);
        }
    }
    culprit_note(&culprits)
}

/// Which rules of the kernel pass `pass` the difference depends on: the schedule `sched`
/// (whose last kernel pass is `pass`) is made again without each rule in turn, and a rule
/// whose removal makes `agrees` true is named.
fn kernel_culprits(
    pass: &uopkit_compiler::optimize::Pass,
    sched: &ScheduleOpts,
    agrees: impl Fn(&ScheduleOpts) -> bool,
) -> Vec<&'static str> {
    pass.rules
        .rules()
        .iter()
        .filter(|r| {
            agrees(&ScheduleOpts {
                disabled_rules: vec![r.name.to_string()],
                ..sched.clone()
            })
        })
        .map(|r| r.name)
        .collect()
}

/// The note after the pass's name: its culprit rules, or that none alone is to blame (and
/// whether fault injection is on).
fn culprit_note(culprits: &[&str]) -> String {
    let faults = if rewrite::faults::any_active() {
        "; fault injection is on"
    } else {
        ""
    };
    if culprits.is_empty() {
        format!(" (no single rule of the pass is to blame: they interact{faults})")
    } else {
        format!(" (culprit rule: {}{faults})", culprits.join(", "))
    }
}

/// The step of the first kernel whose written buffer differs from the previous stage's
/// (same schedule, other index arithmetic).
/// The case-file id of the graph node step `k` computes, when it is a kernel that computes one.
fn computed_node(sched: &Schedule, k: usize, run: &OracleRun) -> Option<u64> {
    match sched.steps.get(k) {
        Some(Step::Kernel { value: Some(v), .. }) => Some(file_id(run, *v)),
        _ => None,
    }
}

fn differing_step(
    sched: &Schedule,
    trace: Option<&Trace>,
    previous: Option<(&Schedule, &Trace)>,
) -> Option<usize> {
    let (trace, (_, prev)) = (trace?, previous?);
    // The i-th write is made by the i-th step (every step writes exactly one buffer).
    trace
        .written
        .iter()
        .zip(&prev.written)
        .position(|((b, now), (pb, before))| b != pb || now != before)
        .map(|i| i.min(sched.steps.len().saturating_sub(1)))
}

/// Names step `k` (its kernel, the graph node it computes) and shows its program before and
/// after the pass.
fn describe_kernel(
    sched: &Schedule,
    k: usize,
    prev_sched: Option<&Schedule>,
    run: &OracleRun,
    what: &str,
) -> String {
    match sched.steps.get(k) {
        Some(Step::Kernel { program, value, .. }) => {
            let node = value
                .map(|v| format!(", computing graph node {}", file_id(run, v)))
                .unwrap_or_default();
            let picture = value
                .map(|v| {
                    format!(
                        "(to see it: `uopkit dot CASE --highlight {}`)\n",
                        file_id(run, v)
                    )
                })
                .unwrap_or_default();
            let old = match prev_sched.and_then(|p| p.steps.get(k)) {
                Some(Step::Kernel { program, .. }) => format!("before the pass:\n{program}"),
                _ => String::new(),
            };
            format!(
                "kernel {} (step {k}{node}) {what}\n{picture}{old}after the pass:\n{program}",
                program.name
            )
        }
        Some(Step::Copy { dst, src }) => format!("step {k} (copy {dst} <- {src}) {what}\n"),
        None => String::new(),
    }
}

/// The arena ids of the case's outputs.
fn output_roots(run: &OracleRun, case: &Case) -> Result<Vec<NodeId>, DiffError> {
    case.outputs
        .iter()
        .map(|o| run.loaded.arena(o.node))
        .collect::<Result<_, _>>()
        .map_err(|e| DiffError::Case(e.to_string()))
}

fn file_id(run: &OracleRun, n: NodeId) -> u64 {
    run.loaded.file_id_of(n)
}
