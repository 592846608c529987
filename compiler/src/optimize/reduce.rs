//! `expand_reduce`: a kernel-level REDUCE → register accumulators, in the order the REDUCE
//! declares (the oracle replays the same order, so the bits agree). For
//! `REDUCE(x, r₀ … rₖ)` inside the open ranges `outer`, sequentially:
//!
//! ```text
//! acc  = BUFFER Reg(1)
//! init = STORE(INDEX(AFTER(acc, outer…), 0), identity)       (once per outer iteration)
//! cur  = INDEX(AFTER(acc, init, r₀ … rₖ), 0)                  (re-read every iteration)
//! upd  = STORE(cur, LOAD(cur) ⊕ x)
//! REDUCE ↦ LOAD(INDEX(AFTER(acc, END(…END(upd, rₖ)…, r₀)), 0))
//! ```
//!
//! r₀ is the outermost loop, so the fold runs in row-major order of the reduced elements.
//! `split(k)` keeps k accumulators (element f of the flat reduced index goes to f mod k),
//! `chunks(k)` one per block of ⌈n/k⌉ (f / ⌈n/k⌉); both combine left to right. `tree(leaf)`
//! folds each leaf of the oracle's halving (`kgraph::tree_leaves`) in its own loop over
//! f = lo + v and combines the leaves in the tree's shape.

use std::collections::BTreeMap;

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op, ReduceOrder};

use crate::kgraph::{
    add, const_int, konst, substitute, tree_leaves, Ranges, MAX_TREE_LEAVES, PASS_TAG,
};
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

/// A tag or axis of the `n`th thing a pass makes for node `id` (unique per node).
pub fn pass_id(id: NodeId, n: u32) -> u32 {
    PASS_TAG | (id.0 << 2 | (n & 3))
}

fn reduce_to_acc(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let n = g.node(id).clone();
    let Arg::Reduce { op, ref order, .. } = n.arg else {
        return None;
    };
    let (&x, rs) = n.src.split_first()?;
    let outer: Vec<NodeId> = Ranges::default().of(g, id).iter().copied().collect();
    let r = Red {
        op,
        dt: n.dtype,
        x,
        rs,
        outer: &outer,
        id,
    };
    match *order {
        ReduceOrder::Sequential => Some(accumulate(g, op, n.dtype, x, rs, &outer, pass_id(id, 0))),
        ReduceOrder::Split(k) if k > 1 => r.slots(g, k, None),
        ReduceOrder::Chunks(k) if k > 1 => {
            let total = r.total(g)?;
            let c = ((total + k as i128 - 1) / k as i128).max(1);
            r.slots(g, k, Some(c))
        }
        ReduceOrder::Split(_) | ReduceOrder::Chunks(_) => {
            Some(accumulate(g, op, n.dtype, x, rs, &outer, pass_id(id, 0)))
        }
        ReduceOrder::Tree(leaf) => r.tree(g, leaf.max(1)),
    }
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
    let a0 = after(g, acc, outer);
    let identity = konst(g, dt, reduce_identity(op, dt));
    let i0 = add(g, Op::INDEX, dt, vec![a0, i64z], KArg::None, 0);
    let init = add(g, Op::STORE, DType::Void, vec![i0, identity], KArg::None, 0);
    let mut s = vec![init];
    s.extend_from_slice(rs);
    let a1 = after(g, acc, &s);
    let cur = add(g, Op::INDEX, dt, vec![a1, i64z], KArg::None, 0);
    let old = add(g, Op::LOAD, dt, vec![cur], KArg::None, 0);
    let next = add(g, op, dt, vec![old, x], KArg::None, 0);
    let upd = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
    let e = end_all(g, upd, rs);
    let done = after(g, acc, &[e]);
    let at = add(g, Op::INDEX, dt, vec![done, i64z], KArg::None, 0);
    add(g, Op::LOAD, dt, vec![at], KArg::None, 0)
}

/// `AFTER(buf, deps…)`, or `buf` itself without deps.
fn after(g: &mut Graph, buf: NodeId, deps: &[NodeId]) -> NodeId {
    if deps.is_empty() {
        return buf;
    }
    let dt = g.node(buf).dtype;
    let mut s = vec![buf];
    s.extend_from_slice(deps);
    add(g, Op::AFTER, dt, s, KArg::None, 0)
}

/// `body` once per iteration of `rs` (r₀ outermost).
fn end_all(g: &mut Graph, body: NodeId, rs: &[NodeId]) -> NodeId {
    let mut e = body;
    for &r in rs.iter().rev() {
        e = add(g, Op::END, DType::Void, vec![e, r], KArg::None, 0);
    }
    e
}

fn i64c(g: &mut Graph, v: i128) -> NodeId {
    konst(g, DType::Int64, v as i64 as u64)
}

fn alu(g: &mut Graph, op: Op, dt: DType, src: Vec<NodeId>) -> NodeId {
    add(g, op, dt, src, KArg::None, 0)
}

/// One REDUCE being expanded.
struct Red<'a> {
    op: Op,
    dt: DType,
    x: NodeId,
    rs: &'a [NodeId],
    outer: &'a [NodeId],
    id: NodeId,
}

impl Red<'_> {
    fn ends(&self, g: &Graph) -> Option<Vec<i128>> {
        self.rs
            .iter()
            .map(|&r| const_int(g, *g.node(r).src.first()?))
            .collect()
    }

    fn total(&self, g: &Graph) -> Option<i128> {
        self.ends(g)?
            .iter()
            .try_fold(1i128, |a, &e| a.checked_mul(e))
    }

    /// The flat row-major index of the reduced elements, from the ranges.
    fn flat(&self, g: &mut Graph) -> Option<NodeId> {
        let ends = self.ends(g)?;
        let mut flat = i64c(g, 0);
        let mut stride: i128 = 1;
        for (&r, &e) in self.rs.iter().zip(&ends).rev() {
            let term = if stride == 1 {
                r
            } else {
                let s = i64c(g, stride);
                alu(g, Op::MUL, DType::Int64, vec![r, s])
            };
            flat = alu(g, Op::ADD, DType::Int64, vec![flat, term]);
            stride = stride.checked_mul(e)?;
        }
        Some(flat)
    }

    /// k accumulators; element f goes to f mod k (`chunk` None) or f / chunk; combined left
    /// to right into one more register.
    fn slots(&self, g: &mut Graph, k: usize, chunk: Option<i128>) -> Option<NodeId> {
        let (op, dt) = (self.op, self.dt);
        let identity = konst(g, dt, reduce_identity(op, dt));
        let zero = i64c(g, 0);
        let acc = add(g, Op::BUFFER, dt, vec![], KArg::Reg(k), pass_id(self.id, 0));
        // acc[j] = identity for every j.
        let kn = i64c(g, k as i128);
        let j = add(
            g,
            Op::RANGE,
            DType::Int64,
            vec![kn],
            KArg::Axis(pass_id(self.id, 0)),
            0,
        );
        let mut pin = self.outer.to_vec();
        pin.push(j);
        let a0 = after(g, acc, &pin);
        let at = alu(g, Op::INDEX, dt, vec![a0, j]);
        let st = add(g, Op::STORE, DType::Void, vec![at, identity], KArg::None, 0);
        let init = end_all(g, st, &[j]);
        // The fold.
        let flat = self.flat(g)?;
        let slot = match chunk {
            None => {
                let kc = i64c(g, k as i128);
                alu(g, Op::CMOD, DType::Int64, vec![flat, kc])
            }
            Some(c) => {
                let cc = i64c(g, c);
                alu(g, Op::CDIV, DType::Int64, vec![flat, cc])
            }
        };
        let mut s = vec![init];
        s.extend_from_slice(self.rs);
        let a1 = after(g, acc, &s);
        let cur = alu(g, Op::INDEX, dt, vec![a1, slot]);
        let old = alu(g, Op::LOAD, dt, vec![cur]);
        let next = alu(g, op, dt, vec![old, self.x]);
        let upd = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
        let folded = end_all(g, upd, self.rs);
        // out = acc[0]; out = out ⊕ acc[j + 1] for j < k − 1.
        let out = add(g, Op::BUFFER, dt, vec![], KArg::Reg(1), pass_id(self.id, 1));
        let o0 = after(g, out, self.outer);
        let done = after(g, acc, &[folded]);
        let first_at = alu(g, Op::INDEX, dt, vec![done, zero]);
        let first = alu(g, Op::LOAD, dt, vec![first_at]);
        let out_at = alu(g, Op::INDEX, dt, vec![o0, zero]);
        let st0 = add(
            g,
            Op::STORE,
            DType::Void,
            vec![out_at, first],
            KArg::None,
            0,
        );
        let rest = i64c(g, k as i128 - 1);
        let j2 = add(
            g,
            Op::RANGE,
            DType::Int64,
            vec![rest],
            KArg::Axis(pass_id(self.id, 1)),
            0,
        );
        let one = i64c(g, 1);
        let jn = alu(g, Op::ADD, DType::Int64, vec![j2, one]);
        let done2 = after(g, acc, &[folded, j2]);
        let part_at = alu(g, Op::INDEX, dt, vec![done2, jn]);
        let part = alu(g, Op::LOAD, dt, vec![part_at]);
        let o1 = after(g, out, &[st0, j2]);
        let cur2 = alu(g, Op::INDEX, dt, vec![o1, zero]);
        let old2 = alu(g, Op::LOAD, dt, vec![cur2]);
        let next2 = alu(g, op, dt, vec![old2, part]);
        let upd2 = add(g, Op::STORE, DType::Void, vec![cur2, next2], KArg::None, 0);
        let combined = end_all(g, upd2, &[j2]);
        let fin = after(g, out, &[combined]);
        let fin_at = alu(g, Op::INDEX, dt, vec![fin, zero]);
        Some(alu(g, Op::LOAD, dt, vec![fin_at]))
    }

    /// The oracle's pairwise tree: leaf j folds f = lo + v for v < hi − lo into acc[j];
    /// the leaves combine as T(lo, hi) = T(lo, mid) ⊕ T(mid, hi).
    fn tree(&self, g: &mut Graph, leaf: usize) -> Option<NodeId> {
        let (op, dt) = (self.op, self.dt);
        let ends = self.ends(g)?;
        let total = usize::try_from(self.total(g)?).ok()?;
        let leaves = tree_leaves(total, leaf, MAX_TREE_LEAVES)?;
        let identity = konst(g, dt, reduce_identity(op, dt));
        let acc = add(
            g,
            Op::BUFFER,
            dt,
            vec![],
            KArg::Reg(leaves.len()),
            pass_id(self.id, 0),
        );
        let a0 = after(g, acc, self.outer);
        let mut partial = vec![];
        for (j, &(lo, hi)) in leaves.iter().enumerate() {
            let slot = i64c(g, j as i128);
            let at0 = alu(g, Op::INDEX, dt, vec![a0, slot]);
            let init = add(
                g,
                Op::STORE,
                DType::Void,
                vec![at0, identity],
                KArg::None,
                0,
            );
            let len = i64c(g, (hi - lo) as i128);
            let v = add(
                g,
                Op::RANGE,
                DType::Int64,
                vec![len],
                KArg::Axis(pass_id(self.id, 2)),
                0,
            );
            let start = i64c(g, lo as i128);
            let f = alu(g, Op::ADD, DType::Int64, vec![start, v]);
            // r_d = (f / stride_d) mod end_d, r₀ without the mod.
            let mut map = BTreeMap::new();
            let mut stride: i128 = 1;
            for (d, (&r, &e)) in self.rs.iter().zip(&ends).enumerate().rev() {
                let mut q = if stride == 1 {
                    f
                } else {
                    let sc = i64c(g, stride);
                    alu(g, Op::CDIV, DType::Int64, vec![f, sc])
                };
                if d > 0 {
                    let ec = i64c(g, e);
                    q = alu(g, Op::CMOD, DType::Int64, vec![q, ec]);
                }
                map.insert(r, q);
                stride = stride.checked_mul(e)?;
            }
            let xj = substitute(g, self.x, &map);
            let a1 = after(g, acc, &[init, v]);
            let cur = alu(g, Op::INDEX, dt, vec![a1, slot]);
            let old = alu(g, Op::LOAD, dt, vec![cur]);
            let next = alu(g, op, dt, vec![old, xj]);
            let upd = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
            let e = end_all(g, upd, &[v]);
            let done = after(g, acc, &[e]);
            let at = alu(g, Op::INDEX, dt, vec![done, slot]);
            partial.push(alu(g, Op::LOAD, dt, vec![at]));
        }
        fn combine(
            g: &mut Graph,
            (op, dt): (Op, DType),
            (lo, hi): (usize, usize),
            leaf: usize,
            parts: &[NodeId],
            next: &mut usize,
        ) -> NodeId {
            if hi - lo <= leaf {
                let p = parts[*next];
                *next += 1;
                return p;
            }
            let mid = lo + (hi - lo) / 2;
            let a = combine(g, (op, dt), (lo, mid), leaf, parts, next);
            let b = combine(g, (op, dt), (mid, hi), leaf, parts, next);
            alu(g, op, dt, vec![a, b])
        }
        let mut next = 0;
        Some(combine(g, (op, dt), (0, total), leaf, &partial, &mut next))
    }
}
