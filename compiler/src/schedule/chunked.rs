//! Declared `chunks_of_split(c, k)` orders become two REDUCEs before planning, so that the
//! chunks are an output axis (which `cpu_threads` runs on threads) and each chunk's `split(k)`
//! is a REDUCE of its own (which `cpu_split_lanes` makes vector lanes; an order-free integer
//! fold stays one accumulator, `optimize::reduce::order_free`).
//!
//! The order (docs/ir.md, `interp/src/eval/order.rs`): the n reduced elements form c
//! contiguous chunks of s = n/c (the verifier requires c to divide n); chunk j is the
//! `split(k)` fold of its own elements, and the chunk results fold sequentially from the
//! identity. For `REDUCE(x, axes, chunks_of_split(c, k))` with x of shape `red ++ out`
//! (n = ∏ red), that is, node for node:
//!
//! ```text
//! v  = RESHAPE(x, [c, s] ++ out)        element (j, q, o) is reduced element j·s + q of o
//! p  = PERMUTE(v, [1, 0, 2, …])         [s, c] ++ out
//! P  = REDUCE(p, 1, split(k))           [c] ++ out: chunk j's split(k) fold, q in order
//! Pc = CONTIGUOUS(P)                    the partials are realized (their own kernel)
//! r  = REDUCE(Pc, 1, sequential)        out: ((e ⊕ P₀) ⊕ P₁) ⊕ …
//! ```
//!
//! The same operations on the same values in the same order as the oracle's replay of the
//! declared order, so the same bits. The rewritten graph is verified again, within the
//! original limits except the total over all values (the views add elements, and the compiler
//! never holds every value: `pipeline::check_buffers` bounds what it allocates); if it does
//! not verify, the graph is scheduled as it is and `expand_reduce` lowers the order in one
//! kernel. Node ids of the schedule (buffers, kernel values, errors) are mapped back to the
//! caller's graph; nodes the rewrite made map to the REDUCE they came from, unless the caller's
//! graph has an equal node of its own. Ids inside error *texts* are the rewritten graph's.

use uopkit_interp::ir::{Arg, Graph, Node, NodeId, Op, ReduceOrder};
use uopkit_interp::verify::{verify_with, Limits, Verified};

use super::{BufferKind, Schedule, ScheduleError, Step};

/// A graph with its `chunks_of_split` REDUCEs split in two, and the way back.
pub struct Rewritten {
    pub graph: Graph,
    pub ver: Verified,
    pub roots: Vec<NodeId>,
    /// New node → the caller's node it stands for.
    back: Vec<NodeId>,
}

/// `None` when no node reachable from `roots` declares `chunks_of_split` (the common case:
/// nothing is copied), or when the rewritten graph does not verify within `ver`'s limits.
pub fn split_chunk_orders(g: &Graph, ver: &Verified, roots: &[NodeId]) -> Option<Rewritten> {
    let reach = g.reachable(roots);
    let declared = |id: NodeId| {
        matches!(
            g.node(id).arg,
            Arg::Reduce {
                order: ReduceOrder::ChunksOfSplit(..),
                ..
            }
        )
    };
    if !reach.iter().any(|&id| declared(id)) {
        return None;
    }
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    let mut back: Vec<NodeId> = vec![];
    // A node the rewrite made keeps the REDUCE it came from; a copy of the caller's node is
    // that node, also when it is equal to (interned as) a node the rewrite made before.
    let push = |out: &mut Graph, back: &mut Vec<NodeId>, node: Node, from: NodeId, copy: bool| {
        let id = out.add(node);
        if id.index() == back.len() {
            back.push(from);
        } else if copy {
            back[id.index()] = from;
        }
        id
    };
    for &id in &reach {
        let n = g.node(id);
        let src: Vec<NodeId> = n
            .src
            .iter()
            .map(|s| map[s.index()])
            .collect::<Option<_>>()?;
        let new = match n.arg {
            Arg::Reduce {
                op,
                axes,
                order: ReduceOrder::ChunksOfSplit(c, k),
            } => {
                let shape = &ver.info(n.src[0]).shape;
                let reduced: usize = shape.get(..axes)?.iter().product();
                if c == 0 || !reduced.is_multiple_of(c) {
                    return None;
                }
                let mut v_shape = vec![c, reduced / c];
                v_shape.extend_from_slice(&shape[axes..]);
                let mut perm = vec![1, 0];
                perm.extend(2..v_shape.len());
                let node = |op: Op, src: NodeId, arg: Arg| Node {
                    op,
                    dtype: n.dtype,
                    src: vec![src],
                    arg,
                };
                let v = push(
                    &mut out,
                    &mut back,
                    node(Op::RESHAPE, src[0], Arg::Shape(v_shape)),
                    id,
                    false,
                );
                let p = push(
                    &mut out,
                    &mut back,
                    node(Op::PERMUTE, v, Arg::Perm(perm)),
                    id,
                    false,
                );
                let partial = Arg::Reduce {
                    op,
                    axes: 1,
                    order: ReduceOrder::Split(k),
                };
                let parts = push(&mut out, &mut back, node(Op::REDUCE, p, partial), id, false);
                let pc = push(
                    &mut out,
                    &mut back,
                    node(Op::CONTIGUOUS, parts, Arg::None),
                    id,
                    false,
                );
                let fold = Arg::Reduce {
                    op,
                    axes: 1,
                    order: ReduceOrder::Sequential,
                };
                push(&mut out, &mut back, node(Op::REDUCE, pc, fold), id, false)
            }
            _ => push(
                &mut out,
                &mut back,
                Node {
                    op: n.op,
                    dtype: n.dtype,
                    src,
                    arg: n.arg.clone(),
                },
                id,
                true,
            ),
        };
        map[id.index()] = Some(new);
    }
    let roots = roots
        .iter()
        .map(|r| map[r.index()])
        .collect::<Option<Vec<_>>>()?;
    let limits = Limits {
        max_total_elements: usize::MAX,
        ..ver.limits()
    };
    let ver = verify_with(&out, &limits).ok()?;
    Some(Rewritten {
        graph: out,
        ver,
        roots,
        back,
    })
}

impl Rewritten {
    /// The caller's node for a node of the rewritten graph.
    pub fn original(&self, id: NodeId) -> NodeId {
        self.back.get(id.index()).copied().unwrap_or(id)
    }

    /// A schedule of the rewritten graph, with its node ids in the caller's graph.
    pub fn restore(&self, mut s: Schedule) -> Schedule {
        for b in &mut s.buffers {
            b.kind = match b.kind {
                BufferKind::Graph(n) => BufferKind::Graph(self.original(n)),
                BufferKind::GraphComponent(n, c) => BufferKind::GraphComponent(self.original(n), c),
                BufferKind::Intermediate => BufferKind::Intermediate,
            };
        }
        for st in &mut s.steps {
            if let Step::Kernel { value: Some(v), .. } = st {
                *v = self.original(*v);
            }
        }
        s
    }

    /// An error about a node of the rewritten graph, about the caller's node.
    pub fn restore_err(&self, e: ScheduleError) -> ScheduleError {
        ScheduleError {
            node: self.original(e.node),
            reason: e.reason,
        }
    }
}
