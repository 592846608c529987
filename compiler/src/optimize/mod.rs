//! Optimization: named passes over kernel graphs, each a rule set run by the rewrite engine
//! to a fixed point (so `uopkit diff` can bisect a difference to a pass, and the hit counts
//! name the rules that fired).
//!
//! * [`reduce`]: `expand_reduce`, a REDUCE node → a register accumulator and its loops
//!   (every target needs it; it runs last).
//! * [`tile`]: `cpu_tile` (the CPU target, before `cpu_interchange`), a matmul-shaped
//!   reduction tiled for registers and cache: row panels × column tiles, the operand that
//!   does not depend on the row packed into a contiguous register panel, and blocks of
//!   rows × vectors of accumulators that gcc keeps in vector registers (only where the
//!   blocks divide; each element's fold order unchanged).
//! * [`interchange`]: `cpu_interchange` (the CPU target), a reduction's output axis along
//!   which its operand is contiguous moved inside the reduce loop, with a row of
//!   accumulators (matmul i, j, k → i, k, j; each element's fold order unchanged).
//! * [`gpu`]: the GPU-style lowering: `gpu_launch` turns the outer loops of the kernel into
//!   launch indices (`gidx0..2`), `gpu_local_reduce` turns a top-level reduction whose result
//!   does not depend on the fold order (integer ADD/MUL/MAX, which wrap) into a
//!   local-memory tree reduction over `lidx0` with barriers and stores the result from
//!   `lidx0 == 0` only.
//! * [`threads`]: `cpu_threads` marks the outermost loop of a kernel parallel
//!   ([`threads::PARALLEL_AXIS`]) when its iterations touch disjoint elements of what the
//!   kernel writes and every register in it is reset in each iteration before it is read;
//!   the CPU runtime runs chunks of it on a thread pool.
//! * [`lanes`]: `cpu_split_lanes` lowers a declared `split(k)` reduce order as k lanes of a
//!   register array filled block by block (a loop the C compiler vectorizes), same bits.
//!
//! Which passes run is [`passes`] of the [`Target`] the schedule options name (the GPU
//! target also runs `symbolic` on the whole kernel graph after its own passes), then the
//! [`finishing`] ones.

pub mod gpu;
pub mod interchange;
pub mod lanes;
pub mod reduce;
pub mod threads;
pub mod tile;

use std::collections::BTreeMap;

use uopkit_interp::ir::NodeId;

use crate::kgraph::KernelGraph;
use crate::rewrite::engine::{rewrite_traced, Order, RewriteOpts, RuleSet, StopReason};
use crate::rewrite::trace::{RewriteTrace, TraceGraph};
pub use crate::schedule::Target;

/// One named pass: a rule set and the order the engine visits nodes in.
#[derive(Clone, Debug)]
pub struct Pass {
    pub rules: RuleSet,
    pub order: Order,
}

impl Pass {
    pub fn name(&self) -> &'static str {
        self.rules.name
    }
}

/// The optimization passes a target runs, in order (`uopkit diff` bisects over them); the
/// [`finishing`] passes always run after them.
pub fn passes(target: Target) -> Vec<Pass> {
    match target {
        // Loop structure first (tile, interchange, lanes: the tile takes the matmuls whose
        // blocks divide, interchange what is left), then the parallel loop, whose
        // disjoint-write and private-register proofs are made on the final loop nest (the
        // registers the first three make are reset once per iteration of the loops around
        // them, so their nests are threaded too).
        Target::Cpu => vec![
            bottom_up(with_faults(tile::tile())),
            bottom_up(with_faults(interchange::interchange())),
            bottom_up(with_faults(lanes::split_lanes())),
            Pass {
                rules: with_faults(threads::threads()),
                order: Order::TopDown,
            },
        ],
        Target::Gpu => vec![
            Pass {
                rules: gpu::launch(),
                order: Order::TopDown,
            },
            bottom_up(gpu::local_reduce()),
            Pass {
                rules: gpu::threads(),
                order: Order::TopDown,
            },
            // The index arithmetic the GPU passes wrote (f = q·L + l split into the
            // reduced axes), simplified by the exact rules.
            bottom_up(crate::rewrite::symbolic()),
        ],
    }
}

/// The passes every kernel needs before it can be linearized: `expand_reduce`.
pub fn finishing() -> Vec<Pass> {
    vec![bottom_up(reduce::expand_reduce())]
}

/// `rules` with the deliberately wrong rules that join its pass put first (test builds with
/// a fault switched on only: `rewrite::faults`; otherwise `rules` unchanged).
fn with_faults(rules: RuleSet) -> RuleSet {
    let mut all = crate::rewrite::faults::active_rules_for(rules.name);
    if all.is_empty() {
        return rules;
    }
    all.extend(rules.rules().iter().cloned());
    RuleSet::new(rules.name, all)
}

fn bottom_up(rules: RuleSet) -> Pass {
    Pass {
        rules,
        order: Order::BottomUp,
    }
}

/// A pass that did not reach a fixed point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel {kernel}: pass {pass} stopped without a fixed point ({stop:?})")]
pub struct OptimizeError {
    pub kernel: String,
    pub pass: &'static str,
    pub stop: StopReason,
}

/// What one pass did to one kernel: the rules that fired, with counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub pass: &'static str,
    pub hits: BTreeMap<&'static str, usize>,
}

/// Runs one pass on `k` to a fixed point.
pub fn apply(k: &mut KernelGraph, pass: &Pass) -> Result<Applied, OptimizeError> {
    apply_traced(k, pass, None)
}

/// [`apply`], recording the rule applications in `trace` when given (the caller names the
/// kernel with [`RewriteTrace::enter`]).
pub fn apply_traced(
    k: &mut KernelGraph,
    pass: &Pass,
    trace: Option<&mut RewriteTrace>,
) -> Result<Applied, OptimizeError> {
    let opts = match pass.order {
        Order::BottomUp => RewriteOpts::bottom_up(),
        Order::TopDown => RewriteOpts::top_down(),
    };
    // One range memo for the pass (the graph is only appended to while it runs).
    let mut ranges = crate::rewrite::range::RangeCache::default();
    let at: *const uopkit_interp::ir::Graph = &k.graph;
    let res = crate::rewrite::range::with_cache(&mut ranges, at, || {
        rewrite_traced(&mut k.graph, &[k.sink], &pass.rules, opts, trace)
    });
    if res.stop != StopReason::FixedPoint {
        return Err(OptimizeError {
            kernel: k.name.clone(),
            pass: pass.name(),
            stop: res.stop,
        });
    }
    k.sink = res.roots.first().copied().unwrap_or(NodeId(0));
    Ok(Applied {
        pass: pass.name(),
        hits: res.hits,
    })
}

/// Runs `passes` in order.
pub fn optimize(k: &mut KernelGraph, passes: &[Pass]) -> Result<Vec<Applied>, OptimizeError> {
    passes.iter().map(|p| apply(k, p)).collect()
}

/// Runs the first `limit` (all when None) of `target`'s passes without the rules named in
/// `disabled`, then the [`finishing`] ones.
pub fn optimize_for(
    k: &mut KernelGraph,
    target: Target,
    limit: Option<usize>,
    disabled: &[String],
) -> Result<Vec<Applied>, OptimizeError> {
    optimize_for_traced(k, target, limit, disabled, None)
}

/// [`optimize_for`], recording every pass's rule applications in `trace` (as kernel
/// `k.name`, [`TraceGraph::Kernel`]) when given.
pub fn optimize_for_traced(
    k: &mut KernelGraph,
    target: Target,
    limit: Option<usize>,
    disabled: &[String],
    trace: Option<&mut RewriteTrace>,
) -> Result<Vec<Applied>, OptimizeError> {
    let mut list = passes(target);
    if let Some(n) = limit {
        list.truncate(n);
    }
    if !disabled.is_empty() {
        for p in &mut list {
            let kept: Vec<_> = p
                .rules
                .rules()
                .iter()
                .filter(|r| !disabled.iter().any(|d| d == r.name))
                .cloned()
                .collect();
            p.rules = RuleSet::new(p.rules.name, kept);
        }
    }
    list.extend(finishing());
    let Some(t) = trace else {
        return optimize(k, &list);
    };
    t.enter(&k.name, TraceGraph::Kernel);
    let applied: Result<Vec<Applied>, OptimizeError> =
        list.iter().map(|p| apply_traced(k, p, Some(t))).collect();
    t.snapshot(&k.graph);
    applied
}
