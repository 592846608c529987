//! The compile pipeline: composes the stages in their one direction. The scheduler plans
//! (`schedule::plan`: steps with kernel specs), each kernel spec is lowered
//! (`lower::lower`: a kernel graph, index arithmetic simplified by the rewrite passes),
//! optimized for the options' target (`optimize`: named passes) and linearized
//! (`linearize`), and the result is a [`Schedule`] of steps with kernel-level programs, which `render` and `runtime`/`exec` take
//! from there. Nothing earlier in the pipeline imports this module.

use uopkit_interp::ir::{Graph, NodeId};
use uopkit_interp::verify::Verified;

use crate::rewrite::trace::RewriteTrace;
use crate::rewrite::RuleSet;
use crate::schedule::{Plan, PlanStep, Schedule, ScheduleError, ScheduleOpts, Step};

/// The rewrite passes a normal compile applies to index arithmetic, in order.
pub fn default_passes() -> Vec<RuleSet> {
    vec![crate::rewrite::symbolic()]
}

/// Schedules everything `roots` need with the default passes (see [`schedule_with`]).
pub fn schedule(g: &Graph, ver: &Verified, roots: &[NodeId]) -> Result<Schedule, ScheduleError> {
    schedule_with(g, ver, roots, &default_passes())
}

/// Schedules with explicit options (the environment is not read) and the default passes.
pub fn schedule_opts(
    g: &Graph,
    ver: &Verified,
    roots: &[NodeId],
    opts: &ScheduleOpts,
) -> Result<Schedule, ScheduleError> {
    schedule_with_opts(g, ver, roots, &default_passes(), opts)
}

/// Schedules everything `roots` need with options from the environment (see
/// [`ScheduleOpts::from_env`] and [`schedule_with_opts`]).
pub fn schedule_with(
    g: &Graph,
    ver: &Verified,
    roots: &[NodeId],
    passes: &[RuleSet],
) -> Result<Schedule, ScheduleError> {
    let opts = ScheduleOpts::from_env().map_err(|e| ScheduleError {
        node: roots.first().copied().unwrap_or(NodeId(0)),
        reason: e.to_string(),
    })?;
    schedule_with_opts(g, ver, roots, passes, &opts)
}

/// Schedules everything `roots` need: plans realizations, orders the steps, snapshots
/// outputs that a later step overwrites, plans memory ([`crate::schedule::plan`]) and lowers
/// each kernel, simplifying index arithmetic with `passes` ([`lower_plan`]).
pub fn schedule_with_opts(
    g: &Graph,
    ver: &Verified,
    roots: &[NodeId],
    passes: &[RuleSet],
    opts: &ScheduleOpts,
) -> Result<Schedule, ScheduleError> {
    with_chunk_orders_split(g, ver, roots, |g, ver, roots| {
        let plan = crate::schedule::plan(g, ver, roots, opts)?;
        check_buffers(&plan, roots)?;
        lower_plan(plan, g, ver, passes, opts)
    })
}

/// Runs `schedule` on the graph with its declared `chunks_of_split` REDUCEs split in two
/// (`schedule::chunked`), and maps the schedule's node ids back to `g`'s; on `g` itself
/// when it has none.
fn with_chunk_orders_split(
    g: &Graph,
    ver: &Verified,
    roots: &[NodeId],
    schedule: impl FnOnce(&Graph, &Verified, &[NodeId]) -> Result<Schedule, ScheduleError>,
) -> Result<Schedule, ScheduleError> {
    match crate::schedule::chunked::split_chunk_orders(g, ver, roots) {
        None => schedule(g, ver, roots),
        Some(rw) => schedule(&rw.graph, &rw.ver, &rw.roots)
            .map(|s| rw.restore(s))
            .map_err(|e| rw.restore_err(e)),
    }
}

/// Every buffer the schedule allocates has at most the oracle's per-value limit of
/// elements (`verify::MAX_ELEMENTS`): a graph verified with `Limits::COMPILE` may have
/// larger values, which is fine only for values fused into kernels and never allocated.
pub fn check_buffers(plan: &Plan, roots: &[NodeId]) -> Result<(), ScheduleError> {
    let max = uopkit_interp::verify::MAX_ELEMENTS;
    match plan.buffers.iter().find(|b| b.size > max) {
        None => Ok(()),
        Some(b) => Err(ScheduleError {
            node: match b.kind {
                crate::spec::BufferKind::Graph(n)
                | crate::spec::BufferKind::GraphComponent(n, _) => n,
                crate::spec::BufferKind::Intermediate => {
                    roots.first().copied().unwrap_or(NodeId(0))
                }
            },
            reason: format!(
                "the schedule would allocate a buffer of {} elements, over the limit of {max}",
                b.size
            ),
        }),
    }
}

/// [`schedule_with_opts`], recording every rewrite rule application (lowering's index
/// arithmetic and the kernel passes, kernel by kernel) in `trace`: what `uopkit diff` shows
/// for the pass that differs.
pub fn schedule_traced(
    g: &Graph,
    ver: &Verified,
    roots: &[NodeId],
    passes: &[RuleSet],
    opts: &ScheduleOpts,
    trace: &mut RewriteTrace,
) -> Result<Schedule, ScheduleError> {
    with_chunk_orders_split(g, ver, roots, |g, ver, roots| {
        let plan = crate::schedule::plan(g, ver, roots, opts)?;
        check_buffers(&plan, roots)?;
        lower_plan_traced(plan, g, ver, passes, opts, Some(trace))
    })
}

/// Lowers, optimizes for each kernel's target (`ScheduleOpts::target_for` its device) and linearizes every kernel of `plan` (step `k` is
/// named `k<k>`), keeping buffers, order and outputs. A kernel that cannot be lowered is a [`ScheduleError`] naming its node.
pub fn lower_plan(
    plan: Plan,
    g: &Graph,
    ver: &Verified,
    passes: &[RuleSet],
    opts: &ScheduleOpts,
) -> Result<Schedule, ScheduleError> {
    lower_plan_traced(plan, g, ver, passes, opts, None)
}

/// [`lower_plan`], recording the rule applications in `trace` when given.
pub fn lower_plan_traced(
    plan: Plan,
    g: &Graph,
    ver: &Verified,
    passes: &[RuleSet],
    opts: &ScheduleOpts,
    mut trace: Option<&mut RewriteTrace>,
) -> Result<Schedule, ScheduleError> {
    let mut steps = Vec::with_capacity(plan.steps.len());
    for (k, s) in plan.steps.iter().enumerate() {
        steps.push(match s {
            PlanStep::Copy { dst, src } => Step::Copy {
                dst: *dst,
                src: *src,
            },
            PlanStep::Kernel(spec) => {
                let (mut kg, args) = crate::lower::lower_traced(
                    &format!("k{k}"),
                    spec,
                    &plan.buffers,
                    g,
                    ver,
                    passes,
                    trace.as_deref_mut(),
                )
                .map_err(|e| ScheduleError {
                    node: e.node,
                    reason: e.reason,
                })?;
                let fail = |reason: String| ScheduleError {
                    node: spec.value,
                    reason,
                };
                crate::optimize::optimize_for_traced(
                    &mut kg,
                    opts.target_for(spec.device),
                    opts.kernel_passes,
                    &opts.disabled_rules,
                    trace.as_deref_mut(),
                )
                .map_err(|e| fail(e.to_string()))?;
                let program = crate::linearize::linearize(&kg).map_err(|e| fail(e.to_string()))?;
                Step::Kernel {
                    device: spec.device,
                    program,
                    args,
                    value: spec.expr.is_none().then_some(spec.value),
                }
            }
        });
    }
    Ok(Schedule {
        buffers: plan.buffers,
        steps,
        outputs: plan.outputs,
    })
}
