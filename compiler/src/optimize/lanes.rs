//! `cpu_split_lanes` (bottom-up, on a REDUCE declaring `split(k)`): the k accumulators of
//! the declared order as k *lanes* of one register array, filled block by block, so that
//! the inner loop over the lanes is a fixed-length loop over a local C array that the C
//! compiler vectorizes. `expand_reduce` would fold the accumulators one after another
//! (k strided passes over the data).
//!
//! The order (docs/semantics.md): element f of the flat reduced index (n elements) goes to
//! accumulator f mod k, each accumulator folds its elements in increasing f starting from
//! the identity, and the k partials combine left to right, `acc₀ ⊕ acc₁ ⊕ … ⊕ acc_{k−1}`.
//! Lowered (m = ⌊n / k⌋, t = n mod k):
//!
//! ```text
//! lane = BUFFER Reg(k)
//! for l < k:            lane[l] = identity                    (once per outer iteration)
//! for b < m: for l < k: lane[l] = lane[l] ⊕ x(f = b·k + l)
//! for l < t:            lane[l] = lane[l] ⊕ x(f = m·k + l)    (the tail, when t > 0)
//! out = lane[0]; for l in 1..k: out = out ⊕ lane[l]
//! ```
//!
//! Lane l receives exactly the elements f ≡ l (mod k) in increasing order, from the
//! identity, and the combine is the oracle's: the same operations on the same values in the
//! same order, so the same bits (NaN, −0 and infinities included).

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op, ReduceOrder};

use crate::kgraph::{add, alu, at_flat, const_int, i64c, konst, Ranges};
use crate::optimize::reduce::{order_free, pass_id};
use crate::rewrite::{Captures, Pat, Rule, RuleSet};

/// The largest k lowered as lanes (a register array of k elements on the stack).
pub const MAX_LANES: usize = 1024;

pub fn split_lanes() -> RuleSet {
    RuleSet::new(
        "cpu_split_lanes",
        vec![Rule::new(
            "split_to_lanes",
            Pat::node(Op::REDUCE),
            split_to_lanes,
        )],
    )
}

/// `AFTER(buf, deps…)`, or `buf` itself without deps.
fn after(g: &mut Graph, buf: NodeId, deps: &[NodeId]) -> NodeId {
    if deps.is_empty() {
        return buf;
    }
    let dt = g.node(buf).dtype;
    let mut s = vec![buf];
    s.extend_from_slice(deps);
    alu(g, Op::AFTER, dt, s)
}

fn range(g: &mut Graph, extent: i128, axis: u32) -> NodeId {
    let e = i64c(g, extent);
    add(g, Op::RANGE, DType::Int64, vec![e], KArg::Axis(axis), 0)
}

fn split_to_lanes(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let n = g.node(id).clone();
    let Arg::Reduce { op, ref order, .. } = n.arg else {
        return None;
    };
    let ReduceOrder::Split(k) = *order else {
        return None;
    };
    let dt = n.dtype;
    // An order-free fold (integers) is left to expand_reduce's one accumulator (same bits).
    if !(2..=MAX_LANES).contains(&k) || order_free(op, dt) {
        return None;
    }
    let (&x, rs) = n.src.split_first()?;
    let mut ends = vec![];
    for &r in rs {
        ends.push(const_int(g, *g.node(r).src.first()?)?);
    }
    let total: i128 = ends.iter().try_fold(1i128, |a, &e| a.checked_mul(e))?;
    if total < 0 || total > i128::from(i64::MAX) {
        return None;
    }
    let outer: Vec<NodeId> = Ranges::default().of(g, id).iter().copied().collect();
    let kk = k as i128;
    let (m, t) = (total / kk, total % kk);
    let i64t = DType::Int64;
    let identity = konst(g, dt, reduce_identity(op, dt));
    let lane = add(g, Op::BUFFER, dt, vec![], KArg::Reg(k), pass_id(id, 0));
    // lane[l] = identity for every l.
    let l0 = range(g, kk, pass_id(id, 1));
    let a0 = after(g, lane, &outer);
    let at0 = alu(g, Op::INDEX, dt, vec![a0, l0]);
    let init = add(
        g,
        Op::STORE,
        DType::Void,
        vec![at0, identity],
        KArg::None,
        0,
    );
    let mut done = add(g, Op::END, DType::Void, vec![init, l0], KArg::None, 0);
    let kc = i64c(g, kk);
    // Blocks: lane[l] ⊕= x(b·k + l).
    if m > 0 {
        let b = range(g, m, pass_id(id, 2));
        let l = range(g, kk, pass_id(id, 3));
        let bk = alu(g, Op::MUL, i64t, vec![b, kc]);
        let f = alu(g, Op::ADD, i64t, vec![bk, l]);
        let xf = at_flat(g, x, rs, &ends, f)?;
        let a1 = after(g, lane, &[done, b, l]);
        let cur = alu(g, Op::INDEX, dt, vec![a1, l]);
        let old = alu(g, Op::LOAD, dt, vec![cur]);
        let next = alu(g, op, dt, vec![old, xf]);
        let upd = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
        let e = add(g, Op::END, DType::Void, vec![upd, l], KArg::None, 0);
        done = add(g, Op::END, DType::Void, vec![e, b], KArg::None, 0);
    }
    // The tail: lane[l] ⊕= x(m·k + l) for l < t.
    if t > 0 {
        // Extent t < k: a different node from the init loop (same axis, extent k).
        let l = range(g, t, pass_id(id, 1));
        let base = i64c(g, m * kk);
        let f = alu(g, Op::ADD, i64t, vec![base, l]);
        let xf = at_flat(g, x, rs, &ends, f)?;
        let a1 = after(g, lane, &[done, l]);
        let cur = alu(g, Op::INDEX, dt, vec![a1, l]);
        let old = alu(g, Op::LOAD, dt, vec![cur]);
        let next = alu(g, op, dt, vec![old, xf]);
        let upd = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
        done = add(g, Op::END, DType::Void, vec![upd, l], KArg::None, 0);
    }
    // out = lane[0], then out ⊕ lane[j] for j = 1 … k−1, left to right.
    let filled = after(g, lane, &[done]);
    let zero = i64c(g, 0);
    let first_at = alu(g, Op::INDEX, dt, vec![filled, zero]);
    let first = alu(g, Op::LOAD, dt, vec![first_at]);
    let out = add(g, Op::BUFFER, dt, vec![], KArg::Reg(1), pass_id(id, 2));
    let o0 = after(g, out, &[done]);
    let oat0 = alu(g, Op::INDEX, dt, vec![o0, zero]);
    let oinit = add(g, Op::STORE, DType::Void, vec![oat0, first], KArg::None, 0);
    let j0 = range(g, kk - 1, pass_id(id, 0));
    let one = i64c(g, 1);
    let j = alu(g, Op::ADD, i64t, vec![j0, one]);
    let o1 = after(g, out, &[oinit, j0]);
    let cur = alu(g, Op::INDEX, dt, vec![o1, zero]);
    let old = alu(g, Op::LOAD, dt, vec![cur]);
    let lat = alu(g, Op::INDEX, dt, vec![filled, j]);
    let part = alu(g, Op::LOAD, dt, vec![lat]);
    let both = alu(g, op, dt, vec![old, part]);
    let upd = add(g, Op::STORE, DType::Void, vec![cur, both], KArg::None, 0);
    let comb = add(g, Op::END, DType::Void, vec![upd, j0], KArg::None, 0);
    let fin = after(g, out, &[comb]);
    let fat = alu(g, Op::INDEX, dt, vec![fin, zero]);
    Some(alu(g, Op::LOAD, dt, vec![fat]))
}
