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
//! f = lo + v and combines the leaves in the tree's shape. `chunks_of_split(c, k)` becomes a
//! sequential REDUCE over the c chunks of a `split(k)` REDUCE over each chunk's elements.

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op, ReduceOrder};

use crate::kgraph::{
    add, alu, at_flat, const_int, i64c, konst, reduce, tree_leaves, Ranges, MAX_TREE_LEAVES,
    PASS_TAG,
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

/// Whether folding with `op` on `dt` gives the same bits in every order: a reduce op that
/// the op table says is commutative and associative bit for bit on `dt` (integers wrap;
/// no float op qualifies).
pub fn order_free(op: Op, dt: DType) -> bool {
    op.info().is_some_and(|i| {
        i.reduce.is_some() && i.commutative.holds_for(dt) && i.associative.holds_for(dt)
    })
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
    // A fold whose bits do not depend on the order (integer ADD, MUL, MAX…, which wrap) is
    // one sequential accumulator whatever order it declares: the same bits, and no register
    // array of partial folds combined after the loop — the shape gcc 12.2 -O2 miscompiles
    // for int32 with two lanes (it returned p1 + p3 + p2 + p6 for the sum of p0 … p7;
    // corpus compiler/int32_sum_declared_split2).
    if order_free(op, n.dtype) {
        return Some(accumulate(g, op, n.dtype, x, rs, &outer, pass_id(id, 0)));
    }
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
        ReduceOrder::ChunksOfSplit(c, k) => r.chunks_of_split(g, c, k),
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
pub(crate) fn end_all(g: &mut Graph, body: NodeId, rs: &[NodeId]) -> NodeId {
    let mut e = body;
    for &r in rs.iter().rev() {
        e = add(g, Op::END, DType::Void, vec![e, r], KArg::None, 0);
    }
    e
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

    /// The fold that makes the `j`-th accumulator: its loop `q` (whose extent is how many
    /// elements it has) and the flat index f of its q-th element. split(k): f = q·k + j,
    /// ⌊(n + k − 1 − j) / k⌋ of them; chunks of c: f = j·c + q, max(0, min(c, n − j·c)).
    fn part(
        &self,
        g: &mut Graph,
        j: NodeId,
        k: usize,
        chunk: Option<i128>,
        total: i128,
    ) -> (NodeId, NodeId) {
        let i64t = DType::Int64;
        let count = match chunk {
            None => {
                let top = i64c(g, total + k as i128 - 1);
                let rem = alu(g, Op::SUB, i64t, vec![top, j]);
                let kc = i64c(g, k as i128);
                alu(g, Op::CDIV, i64t, vec![rem, kc])
            }
            Some(c) => {
                let cc = i64c(g, c);
                let start = alu(g, Op::MUL, i64t, vec![j, cc]);
                let tot = i64c(g, total);
                let left = alu(g, Op::SUB, i64t, vec![tot, start]);
                let short = alu(g, Op::CMPLT, DType::Bool, vec![left, cc]);
                let m = alu(g, Op::WHERE, i64t, vec![short, left, cc]);
                let zero = i64c(g, 0);
                let neg = alu(g, Op::CMPLT, DType::Bool, vec![m, zero]);
                alu(g, Op::WHERE, i64t, vec![neg, zero, m])
            }
        };
        let q = add(
            g,
            Op::RANGE,
            i64t,
            vec![count],
            KArg::Axis(pass_id(self.id, 2)),
            0,
        );
        let f = match chunk {
            None => {
                let kc = i64c(g, k as i128);
                let qk = alu(g, Op::MUL, i64t, vec![q, kc]);
                alu(g, Op::ADD, i64t, vec![qk, j])
            }
            Some(c) => {
                let cc = i64c(g, c);
                let start = alu(g, Op::MUL, i64t, vec![j, cc]);
                alu(g, Op::ADD, i64t, vec![start, q])
            }
        };
        (q, f)
    }

    /// x with the reduced ranges replaced by the unflattened flat index `f`.
    fn at_flat(&self, g: &mut Graph, f: NodeId) -> Option<NodeId> {
        let ends = self.ends(g)?;
        at_flat(g, self.x, self.rs, &ends, f)
    }

    /// k accumulators (split or chunks), one at a time: for j < k, acc_j is folded from the
    /// identity over its elements in order (a sequential REDUCE, expanded next) and combined
    /// at once, out = acc_0 for j = 0 and out ⊕ acc_j after: the oracle's left-to-right
    /// combine, in two registers whatever k is.
    fn slots(&self, g: &mut Graph, k: usize, chunk: Option<i128>) -> Option<NodeId> {
        let (op, dt) = (self.op, self.dt);
        let total = self.total(g)?;
        let i64t = DType::Int64;
        let identity = konst(g, dt, reduce_identity(op, dt));
        let zero = i64c(g, 0);
        let kn = i64c(g, k as i128);
        let j = add(
            g,
            Op::RANGE,
            i64t,
            vec![kn],
            KArg::Axis(pass_id(self.id, 0)),
            0,
        );
        let (q, f) = self.part(g, j, k, chunk, total);
        let xf = self.at_flat(g, f)?;
        let acc_j = reduce(g, op, dt, xf, &[q], ReduceOrder::Sequential);
        let out = add(g, Op::BUFFER, dt, vec![], KArg::Reg(1), pass_id(self.id, 1));
        let o0 = after(g, out, self.outer);
        let at0 = alu(g, Op::INDEX, dt, vec![o0, zero]);
        let init = add(
            g,
            Op::STORE,
            DType::Void,
            vec![at0, identity],
            KArg::None,
            0,
        );
        let o1 = after(g, out, &[init, j]);
        let cur = alu(g, Op::INDEX, dt, vec![o1, zero]);
        let old = alu(g, Op::LOAD, dt, vec![cur]);
        let both = alu(g, op, dt, vec![old, acc_j]);
        let first = alu(g, Op::CMPEQ, DType::Bool, vec![j, zero]);
        let next = alu(g, Op::WHERE, dt, vec![first, acc_j, both]);
        let upd = add(g, Op::STORE, DType::Void, vec![cur, next], KArg::None, 0);
        let combined = end_all(g, upd, &[j]);
        let fin = after(g, out, &[combined]);
        let fin_at = alu(g, Op::INDEX, dt, vec![fin, zero]);
        Some(alu(g, Op::LOAD, dt, vec![fin_at]))
    }

    /// `chunks_of_split(c, k)` in one kernel (the scheduler usually splits it into two REDUCEs
    /// first, `schedule::chunked`): chunk j < c folds f = j·s + q for q < s = n/c in a REDUCE
    /// declaring `split(k)`, and a sequential REDUCE over j folds the chunk results from the
    /// identity. Both are expanded next. Not lowered when c does not divide n (the verifier
    /// rejects such a graph).
    fn chunks_of_split(&self, g: &mut Graph, c: usize, k: usize) -> Option<NodeId> {
        let (op, dt) = (self.op, self.dt);
        let total = self.total(g)?;
        let c = i128::try_from(c)
            .ok()
            .filter(|&c| c > 0 && total % c == 0)?;
        let s = total / c;
        let i64t = DType::Int64;
        let cn = i64c(g, c);
        let j = add(
            g,
            Op::RANGE,
            i64t,
            vec![cn],
            KArg::Axis(pass_id(self.id, 0)),
            0,
        );
        let sn = i64c(g, s);
        let q = add(
            g,
            Op::RANGE,
            i64t,
            vec![sn],
            KArg::Axis(pass_id(self.id, 2)),
            0,
        );
        let start = alu(g, Op::MUL, i64t, vec![j, sn]);
        let f = alu(g, Op::ADD, i64t, vec![start, q]);
        let xf = self.at_flat(g, f)?;
        let part = reduce(g, op, dt, xf, &[q], ReduceOrder::Split(k));
        Some(reduce(g, op, dt, part, &[j], ReduceOrder::Sequential))
    }

    /// The oracle's pairwise tree: leaf j folds f = lo + v for v < hi − lo into acc[j];
    /// the leaves combine as T(lo, hi) = T(lo, mid) ⊕ T(mid, hi).
    fn tree(&self, g: &mut Graph, leaf: usize) -> Option<NodeId> {
        let (op, dt) = (self.op, self.dt);
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
            let xj = self.at_flat(g, f)?;
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
