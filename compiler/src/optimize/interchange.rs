//! `cpu_interchange`: a reduction's output axis moved inside its reduce loop (the CPU
//! target; the matmul `out[i,j] = Σ_k a[i,k]·b[k,j]` becomes i, k, j with a row of
//! accumulators, so the innermost loop reads `b` contiguously and gcc can vectorize it).
//! `cpu_tile` runs first and takes the matmuls whose blocks divide; this pass handles the
//! rest.
//!
//! The rule (`reduce_row_inside`, on an END) fires on
//!
//! ```text
//! END(STORE(at, v(R)), j)      R = REDUCE(x, r₀ … rₖ), the one REDUCE of v inside loop j
//! ```
//!
//! where j has a constant extent J ≥ 2, the r's have constant extents, and x has a LOAD
//! whose address moves by exactly 1 when j does (x is contiguous along j). It becomes
//!
//! ```text
//! acc  = BUFFER Reg(T)                                       T = J, or a tile of J
//! init = END(STORE(INDEX(AFTER(acc, outer…), j₁), identity), j₁)
//! upd  = STORE(cur, LOAD(cur) ⊕ x[j := j₂]),  cur = INDEX(AFTER(acc, init, r₀ … rₖ, j₂), j₂)
//! done = AFTER(acc, END(…END(END(upd, j₂), rₖ)…, r₀))
//! END(STORE(at, v(LOAD(INDEX(done, j₃))))[j := j₃], j₃)
//! ```
//!
//! (with j = jₒ·T + jᵢ and an outer loop over jₒ when J > [`MAX_ROW`]: T is the largest
//! power of two ≤ [`MAX_ROW`] dividing J, at least [`MIN_TILE`]; otherwise the rule does
//! not fire). Exactness: element j's accumulator starts at the identity and folds x over
//! r₀ … rₖ in row-major order, one ⊕ per element — the sequential order the REDUCE
//! declares, so the bits are those of `expand_reduce`'s single accumulator. Only where the
//! REDUCE is sequential (or split/chunks of one part), or its fold does not depend on the
//! order (integer ADD/MUL/MAX, which wrap: the op table says so).
//!
//! What makes moving the other j's reductions before the stores safe: x reads nothing the
//! kernel writes (no AFTER, no register buffer, no STORE, no nested REDUCE in x, and not
//! the stored buffer), so every fold reads the same values as in the original order.

use std::collections::BTreeMap;

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, Node, NodeId, Op, ReduceOrder};

use crate::kgraph::{add, alu, const_int, i64c, konst, substitute, Ranges};
use crate::optimize::reduce::{order_free, pass_id};
use crate::optimize::threads::param_slot;
use crate::rewrite::{Captures, Pat, Rule, RuleSet};

/// The largest accumulator row kept without tiling (4 KiB of float32).
pub const MAX_ROW: i128 = 1024;

/// The smallest tile a longer row is split into (a row no power of two from this up to
/// [`MAX_ROW`] divides is left alone).
pub const MIN_TILE: i128 = 16;

pub fn interchange() -> RuleSet {
    RuleSet::new(
        "cpu_interchange",
        vec![Rule::new(
            "reduce_row_inside",
            Pat::node(Op::END),
            row_inside,
        )],
    )
}

/// Whether folding each element's operand from the identity in row-major order of the
/// reduced ranges gives the bits the declared `order` does: the order is sequential (or
/// split/chunks of one part), or the fold does not depend on the order at all.
pub(crate) fn per_element_in_order(op: Op, order: &ReduceOrder, dt: DType) -> bool {
    let sequential = match *order {
        ReduceOrder::Sequential => true,
        ReduceOrder::Split(k) | ReduceOrder::Chunks(k) => k <= 1,
        ReduceOrder::Tree(_) | ReduceOrder::ChunksOfSplit(..) => false,
    };
    sequential || order_free(op, dt)
}

/// The storage an address points into (through AFTERs).
pub(crate) fn base_of(g: &Graph, mut id: NodeId) -> NodeId {
    while g.node(id).op == Op::AFTER {
        id = g.node(id).src[0];
    }
    id
}

/// How much the int64 expression `e` moves when range `j` grows by one, if `e` is affine
/// in `j` (ADD, SUB, MUL by an expression free of j); None otherwise.
pub(crate) fn slope(g: &Graph, e: NodeId, j: NodeId) -> Option<i128> {
    if e == j {
        return Some(1);
    }
    if !g.reachable(&[e]).contains(&j) {
        return Some(0);
    }
    let n = g.node(e);
    match (n.op, &n.src[..]) {
        (Op::ADD, &[a, b]) => slope(g, a, j)?.checked_add(slope(g, b, j)?),
        (Op::SUB, &[a, b]) => slope(g, a, j)?.checked_sub(slope(g, b, j)?),
        (Op::MUL, &[a, b]) => {
            let (sa, sb) = (slope(g, a, j)?, slope(g, b, j)?);
            match (sa, sb) {
                (0, s) => const_int(g, a)?.checked_mul(s),
                (s, 0) => const_int(g, b)?.checked_mul(s),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether some LOAD in `x` reads an address that moves by one element along `j`.
fn contiguous_along(g: &Graph, reach: &[NodeId], j: NodeId) -> bool {
    reach.iter().any(|&n| {
        let nn = g.node(n);
        if nn.op != Op::LOAD {
            return false;
        }
        let Some(&at) = nn.src.first() else {
            return false;
        };
        let an = g.node(at);
        an.op == Op::INDEX && an.src.get(1).is_some_and(|&i| slope(g, i, j) == Some(1))
    })
}

/// Whether the operand whose nodes are `reach_x` reads nothing the kernel writes: no
/// AFTER, register buffer, STORE, nested REDUCE or other effect, and not the stored
/// `body` as a STORE of a value into an INDEX of a kernel PARAM (through AFTERs): the STORE
/// and that PARAM (None for anything else).
pub(crate) fn store_into_param(g: &Graph, body: NodeId) -> Option<(Node, NodeId)> {
    let st = g.node(body).clone();
    if st.op != Op::STORE || st.src.len() < 2 {
        return None;
    }
    let base = base_of(g, *g.node(st.src[0]).src.first()?);
    (g.node(base).op == Op::PARAM).then_some((st, base))
}

/// parameter `base` (by slot, not node id: two PARAM nodes of one slot are one buffer).
pub(crate) fn reads_only_inputs(g: &Graph, reach_x: &[NodeId], base: NodeId) -> bool {
    let impure = reach_x.iter().any(|&n| {
        matches!(
            g.node(n).op,
            Op::AFTER
                | Op::BUFFER
                | Op::REDUCE
                | Op::STORE
                | Op::END
                | Op::GROUP
                | Op::BARRIER
                | Op::SPECIAL
        )
    });
    let out_slot = param_slot(g, base);
    let reads_out = reach_x
        .iter()
        .any(|&n| n == base || (out_slot.is_some() && param_slot(g, n) == out_slot));
    !impure && !reads_out
}

pub(crate) fn after(g: &mut Graph, buf: NodeId, deps: &[NodeId]) -> NodeId {
    if deps.is_empty() {
        return buf;
    }
    let dt = g.node(buf).dtype;
    let mut s = vec![buf];
    s.extend_from_slice(deps);
    add(g, Op::AFTER, dt, s, KArg::None, 0)
}

fn range(g: &mut Graph, extent: i128, axis: u32) -> NodeId {
    let e = i64c(g, extent);
    add(g, Op::RANGE, DType::Int64, vec![e], KArg::Axis(axis), 0)
}

fn row_inside(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let end = g.node(id).clone();
    let [body, j] = end.src[..] else {
        return None;
    };
    let jr = g.node(j);
    if jr.op != Op::RANGE || jr.dtype != DType::Int64 {
        return None;
    }
    let extent = const_int(g, *jr.src.first()?)?;
    if extent < 2 {
        return None;
    }
    let (st, base) = store_into_param(g, body)?;
    // The one REDUCE of the stored value that runs inside loop j.
    let mut ranges = Ranges::default();
    let reds: Vec<NodeId> = g
        .reachable(&[st.src[1]])
        .into_iter()
        .filter(|&n| g.node(n).op == Op::REDUCE && ranges.of(g, n).contains(&j))
        .collect();
    let [red] = reds[..] else {
        return None;
    };
    let rn = g.node(red).clone();
    let Arg::Reduce { op, ref order, .. } = rn.arg else {
        return None;
    };
    let dt = rn.dtype;
    if !per_element_in_order(op, order, dt) {
        return None;
    }
    let (&x, rs) = rn.src.split_first()?;
    if rs.is_empty() {
        return None;
    }
    for &r in rs {
        let n = g.node(r);
        if n.op != Op::RANGE || const_int(g, *n.src.first()?).is_none() {
            return None;
        }
    }
    let reach_x = g.reachable(&[x]);
    if !reads_only_inputs(g, &reach_x, base) || !contiguous_along(g, &reach_x, j) {
        return None;
    }
    let outer: Vec<NodeId> = ranges.of(g, id).iter().copied().collect();
    let tile = if extent <= MAX_ROW {
        None
    } else {
        let t = (MIN_TILE.trailing_zeros()..=MAX_ROW.trailing_zeros())
            .rev()
            .map(|k| 1i128 << k)
            .find(|t| extent % t == 0)?;
        Some(t)
    };
    let row = tile.unwrap_or(extent);
    let jo = tile.map(|t| range(g, extent / t, pass_id(id, 3)));
    // The output position of row slot `ji`: jₒ·T + jᵢ, or jᵢ.
    let at_row = |g: &mut Graph, ji: NodeId| -> NodeId {
        match jo {
            None => ji,
            Some(o) => {
                let tc = i64c(g, row);
                let base = alu(g, Op::MUL, DType::Int64, vec![o, tc]);
                alu(g, Op::ADD, DType::Int64, vec![base, ji])
            }
        }
    };
    let mut outer_all = outer.clone();
    outer_all.extend(jo);

    let acc = add(
        g,
        Op::BUFFER,
        dt,
        vec![],
        KArg::Reg(usize::try_from(row).ok()?),
        pass_id(id, 0),
    );
    let identity = konst(g, dt, reduce_identity(op, dt));
    // for j₁: acc[j₁] = identity
    let j1 = range(g, row, pass_id(id, 0));
    let a0 = after(g, acc, &outer_all);
    let i0 = alu(g, Op::INDEX, dt, vec![a0, j1]);
    let init = add(g, Op::STORE, DType::Void, vec![i0, identity], KArg::None, 0);
    let init = add(g, Op::END, DType::Void, vec![init, j1], KArg::None, 0);
    // for r₀ … rₖ: for j₂: acc[j₂] = acc[j₂] ⊕ x[j := j₂]
    let j2 = range(g, row, pass_id(id, 1));
    let pos2 = at_row(g, j2);
    let x2 = substitute(g, x, &BTreeMap::from([(j, pos2)]));
    let mut deps = vec![init];
    deps.extend_from_slice(rs);
    deps.push(j2);
    let a1 = after(g, acc, &deps);
    let cur = alu(g, Op::INDEX, dt, vec![a1, j2]);
    let old = alu(g, Op::LOAD, dt, vec![cur]);
    let next = alu(g, op, dt, vec![old, x2]);
    let mut e = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
    e = add(g, Op::END, DType::Void, vec![e, j2], KArg::None, 0);
    for &r in rs.iter().rev() {
        e = add(g, Op::END, DType::Void, vec![e, r], KArg::None, 0);
    }
    // for j₃: STORE(at, v(acc[j₃]))[j := j₃]
    let j3 = range(g, row, pass_id(id, 2));
    let done = after(g, acc, &[e]);
    let at = alu(g, Op::INDEX, dt, vec![done, j3]);
    let val = alu(g, Op::LOAD, dt, vec![at]);
    let stored = substitute(g, body, &BTreeMap::from([(red, val)]));
    let pos3 = at_row(g, j3);
    let stored = substitute(g, stored, &BTreeMap::from([(j, pos3)]));
    let out = add(g, Op::END, DType::Void, vec![stored, j3], KArg::None, 0);
    Some(match jo {
        None => out,
        Some(o) => add(g, Op::END, DType::Void, vec![out, o], KArg::None, 0),
    })
}
