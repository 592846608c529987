//! An optional record of what the rewrite engine did (a light form of tinygrad's `VIZ=1`):
//! every rule application in order (rule, pass, kernel, the matched node and its
//! replacement, each with a one-line rendering), every [`rewrite`](super::rewrite) call's
//! roots before and after, and a snapshot of each graph the steps name, so a caller can tell
//! which steps built a given node.
//!
//! It is a value the caller passes down (`Some(&mut trace)`), never a global: with `None` the
//! engine does nothing more than compare an `Option` when a rule fires. The number of steps
//! (and calls) recorded is capped; [`RewriteTrace::more`] counts the ones left out.

use std::collections::BTreeMap;

use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op};

/// The cap [`RewriteTrace::default`] records up to.
pub const DEFAULT_MAX_STEPS: usize = 10_000;

/// The most characters of a node's one-line rendering (longer ones end in `…`).
pub const MAX_RENDER: usize = 160;

/// Which graph of a kernel the steps rewrote: the index arithmetic built while lowering
/// (`lower::index`), or the kernel graph itself (the `optimize` passes).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TraceGraph {
    Index,
    Kernel,
}

impl std::fmt::Display for TraceGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TraceGraph::Index => "index arithmetic",
            TraceGraph::Kernel => "kernel graph",
        })
    }
}

/// A node as the trace shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracedNode {
    pub id: NodeId,
    pub op: Op,
    pub dtype: DType,
    /// The subexpression under the node on one line, at most [`MAX_RENDER`] characters.
    pub text: String,
}

impl TracedNode {
    pub fn of(g: &Graph, id: NodeId) -> TracedNode {
        let n = g.node(id);
        TracedNode {
            id,
            op: n.op,
            dtype: n.dtype,
            text: render(g, id, MAX_RENDER),
        }
    }
}

impl std::fmt::Display for TracedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}.{} = {}", self.id, self.op, self.dtype, self.text)
    }
}

/// One rule application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// The kernel being compiled when the rule fired (`k<step>`).
    pub kernel: String,
    pub graph: TraceGraph,
    /// The rule set's name (the pass).
    pub pass: &'static str,
    pub rule: &'static str,
    pub matched: TracedNode,
    pub replacement: TracedNode,
}

/// One call of the engine: its roots before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceCall {
    pub kernel: String,
    pub graph: TraceGraph,
    pub pass: &'static str,
    pub before: Vec<NodeId>,
    pub after: Vec<NodeId>,
}

/// The record (see the module doc).
#[derive(Clone, Debug)]
pub struct RewriteTrace {
    max_steps: usize,
    kernel: String,
    graph: TraceGraph,
    steps: Vec<TraceStep>,
    calls: Vec<TraceCall>,
    more: usize,
    more_calls: usize,
    graphs: BTreeMap<(String, TraceGraph), Graph>,
}

impl Default for RewriteTrace {
    fn default() -> Self {
        RewriteTrace::new(DEFAULT_MAX_STEPS)
    }
}

impl RewriteTrace {
    /// A trace that keeps at most `max_steps` steps (and as many calls).
    pub fn new(max_steps: usize) -> RewriteTrace {
        RewriteTrace {
            max_steps,
            kernel: String::new(),
            graph: TraceGraph::Index,
            steps: vec![],
            calls: vec![],
            more: 0,
            more_calls: 0,
            graphs: BTreeMap::new(),
        }
    }

    /// Names the kernel and graph the next steps belong to.
    pub fn enter(&mut self, kernel: &str, graph: TraceGraph) {
        kernel.clone_into(&mut self.kernel);
        self.graph = graph;
    }

    /// Keeps a copy of `g` as the current kernel's graph of the current kind (the steps'
    /// node ids are ids in it; a hash-consed graph only grows, so the last copy holds them
    /// all).
    pub fn snapshot(&mut self, g: &Graph) {
        self.graphs
            .insert((self.kernel.clone(), self.graph), g.clone());
    }

    /// Records that `rule` of `pass` rewrote `matched` to `replacement` in `g`.
    pub fn record(
        &mut self,
        g: &Graph,
        pass: &'static str,
        rule: &'static str,
        matched: NodeId,
        replacement: NodeId,
    ) {
        if self.steps.len() >= self.max_steps {
            self.more += 1;
            return;
        }
        self.steps.push(TraceStep {
            kernel: self.kernel.clone(),
            graph: self.graph,
            pass,
            rule,
            matched: TracedNode::of(g, matched),
            replacement: TracedNode::of(g, replacement),
        });
    }

    /// Records one engine call's roots.
    pub fn record_call(&mut self, pass: &'static str, before: &[NodeId], after: &[NodeId]) {
        if self.calls.len() >= self.max_steps {
            self.more_calls += 1;
            return;
        }
        self.calls.push(TraceCall {
            kernel: self.kernel.clone(),
            graph: self.graph,
            pass,
            before: before.to_vec(),
            after: after.to_vec(),
        });
    }

    /// The recorded steps, in the order the rules fired.
    pub fn steps(&self) -> &[TraceStep] {
        &self.steps
    }

    /// The recorded engine calls, in order.
    pub fn calls(&self) -> &[TraceCall] {
        &self.calls
    }

    /// Steps that fired after the cap was reached (not recorded).
    pub fn more(&self) -> usize {
        self.more
    }

    /// Calls made after the cap was reached (not recorded).
    pub fn more_calls(&self) -> usize {
        self.more_calls
    }

    /// The last snapshot of `kernel`'s graph of kind `graph`.
    pub fn graph(&self, kernel: &str, graph: TraceGraph) -> Option<&Graph> {
        self.graphs.get(&(kernel.to_string(), graph))
    }
}

/// `id`'s subexpression on one line, cut to `max` characters (ending in `…` when cut):
/// `op.dtype(src, …)` (a kernel node's argument in brackets: `PARAM.int32[slot=0]()`),
/// integer constants as their value, loop variables of index arithmetic as `r<axis>`.
pub fn render(g: &Graph, id: NodeId, max: usize) -> String {
    let mut out = String::new();
    let cut = !render_into(g, id, max, &mut out);
    if cut {
        // Keep whole characters within the budget, then mark the cut.
        let keep: String = out.chars().take(max.saturating_sub(1)).collect();
        return keep + "…";
    }
    out
}

/// Appends `id`'s rendering to `out`; false once `out` passed `max` characters (the caller
/// stops there, so a shared subgraph cannot make the walk exponential).
fn render_into(g: &Graph, id: NodeId, max: usize, out: &mut String) -> bool {
    if out.chars().count() > max {
        return false;
    }
    let n = g.node(id);
    match (&n.op, &n.arg) {
        (Op::CONST, Arg::Const(b)) if n.dtype.is_float() => {
            out.push_str(&format!("{}:{b:#x}", n.dtype));
        }
        (Op::CONST, Arg::Const(b)) if n.dtype == DType::Bool => {
            out.push_str(if *b != 0 { "true" } else { "false" });
        }
        (Op::CONST, Arg::Const(b)) => {
            out.push_str(&format!("{}", signed(n.dtype, *b)));
        }
        (Op::RANGE, Arg::Index(a)) => out.push_str(&format!("r{a}")),
        _ => {
            let arg = match &n.arg {
                Arg::Kernel(KArg::Param(s), _) => format!("[slot={s}]"),
                Arg::Kernel(KArg::Reg(r), _) => format!("[reg={r}]"),
                Arg::Kernel(KArg::Const(b), _) => format!("[{}]", signed(n.dtype, *b)),
                Arg::Kernel(KArg::Axis(a), _) => format!("[axis={a}]"),
                Arg::Kernel(KArg::Special(name), _) => format!("[{name}]"),
                Arg::Kernel(KArg::Local(size), _) => format!("[local={size}]"),
                _ => String::new(),
            };
            out.push_str(&format!("{}.{}{arg}(", n.op, n.dtype));
            for (i, &s) in n.src.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if !render_into(g, s, max, out) {
                    return false;
                }
            }
            out.push(')');
        }
    }
    out.chars().count() <= max
}

/// A constant's bits as the integer they mean in `dt` (sign-extended for signed dtypes).
fn signed(dt: DType, bits: u64) -> i128 {
    let w = dt.bits().clamp(1, 64);
    if !dt.is_signed_int() {
        return bits as i128;
    }
    let shift = 64 - w;
    (((bits << shift) as i64) >> shift) as i128
}

#[cfg(test)]
mod tests {
    use super::*;
    use uopkit_interp::ir::Node;

    fn konst(g: &mut Graph, v: i64) -> NodeId {
        g.add(Node {
            op: Op::CONST,
            dtype: DType::Int64,
            src: vec![],
            arg: Arg::Const(v as u64),
        })
    }

    #[test]
    fn render_is_one_line_and_bounded() {
        let mut g = Graph::new();
        let end = konst(&mut g, 6);
        let r = g.add(Node {
            op: Op::RANGE,
            dtype: DType::Int64,
            src: vec![end],
            arg: Arg::Index(0),
        });
        let three = konst(&mut g, -3);
        let m = g.add(Node {
            op: Op::CMOD,
            dtype: DType::Int64,
            src: vec![r, three],
            arg: Arg::None,
        });
        assert_eq!(render(&g, m, 100), "CMOD.int64(r0, -3)");
        // A deep chain is cut to the bound, and ends in the cut mark.
        let mut x = m;
        for _ in 0..200 {
            x = g.add(Node {
                op: Op::ADD,
                dtype: DType::Int64,
                src: vec![x, x],
                arg: Arg::None,
            });
        }
        let s = render(&g, x, 40);
        assert_eq!(s.chars().count(), 40, "{s}");
        assert!(s.ends_with('…'), "{s}");
    }

    #[test]
    fn the_cap_counts_what_it_leaves_out() {
        let mut g = Graph::new();
        let a = konst(&mut g, 1);
        let b = konst(&mut g, 2);
        let mut t = RewriteTrace::new(2);
        t.enter("k0", TraceGraph::Index);
        for _ in 0..5 {
            t.record(&g, "p", "r", a, b);
        }
        assert_eq!(t.steps().len(), 2);
        assert_eq!(t.more(), 3);
        assert_eq!(t.steps()[0].kernel, "k0");
        assert_eq!(t.steps()[0].matched.text, "1");
    }
}
