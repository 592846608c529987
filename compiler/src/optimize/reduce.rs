//! `expand_reduce`: a kernel-level REDUCE → a register accumulator. For
//! `REDUCE(x, r₀ … rₖ)` inside the open ranges `outer`:
//!
//! ```text
//! acc  = BUFFER Reg(1)
//! init = STORE(INDEX(AFTER(acc, outer…), 0), identity)       (once per outer iteration)
//! cur  = INDEX(AFTER(acc, init, r₀ … rₖ), 0)                  (re-read every iteration)
//! upd  = STORE(cur, LOAD(cur) ⊕ x)
//! REDUCE ↦ LOAD(INDEX(AFTER(acc, END(…END(upd, rₖ)…, r₀)), 0))
//! ```
//!
//! r₀ is the outermost loop, so the fold runs in row-major order of the reduced elements:
//! the oracle's sequential order, bit for bit.

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op};

use crate::kgraph::{add, konst, Ranges, PASS_TAG};
use crate::rewrite::{Captures, Pat, Rule, RuleSet};

pub fn expand_reduce() -> RuleSet {
    RuleSet::new(
        "expand_reduce",
        vec![Rule::new(
            "reduce_to_acc",
            Pat::node(Op::REDUCE),
            reduce_to_acc,
        )],
    )
}

fn reduce_to_acc(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let n = g.node(id).clone();
    let Arg::Reduce { op, .. } = n.arg else {
        return None;
    };
    let (&x, rs) = n.src.split_first()?;
    let outer: Vec<NodeId> = Ranges::default().of(g, id).iter().copied().collect();
    Some(accumulate(g, op, n.dtype, x, rs, &outer, PASS_TAG | id.0))
}

/// The accumulator loop of a sequential fold of `x` over `rs` (see the module docs).
pub fn accumulate(
    g: &mut Graph,
    op: Op,
    dt: DType,
    x: NodeId,
    rs: &[NodeId],
    outer: &[NodeId],
    tag: u32,
) -> NodeId {
    let i64z = konst(g, DType::Int64, 0);
    let acc = add(g, Op::BUFFER, dt, vec![], KArg::Reg(1), tag);
    let a0 = if outer.is_empty() {
        acc
    } else {
        let mut s = vec![acc];
        s.extend_from_slice(outer);
        add(g, Op::AFTER, dt, s, KArg::None, 0)
    };
    let identity = konst(g, dt, reduce_identity(op, dt));
    let i0 = add(g, Op::INDEX, dt, vec![a0, i64z], KArg::None, 0);
    let init = add(g, Op::STORE, DType::Void, vec![i0, identity], KArg::None, 0);
    let mut s = vec![acc, init];
    s.extend_from_slice(rs);
    let a1 = add(g, Op::AFTER, dt, s, KArg::None, 0);
    let cur = add(g, Op::INDEX, dt, vec![a1, i64z], KArg::None, 0);
    let old = add(g, Op::LOAD, dt, vec![cur], KArg::None, 0);
    let next = add(g, op, dt, vec![old, x], KArg::None, 0);
    let mut e = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
    for &r in rs.iter().rev() {
        e = add(g, Op::END, DType::Void, vec![e, r], KArg::None, 0);
    }
    let done = add(g, Op::AFTER, dt, vec![acc, e], KArg::None, 0);
    let at = add(g, Op::INDEX, dt, vec![done, i64z], KArg::None, 0);
    add(g, Op::LOAD, dt, vec![at], KArg::None, 0)
}
