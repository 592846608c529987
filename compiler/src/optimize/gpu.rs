//! The GPU-style lowering, as passes over kernel graphs. The kernel interpreter runs the
//! result with seeded interleavings of the work items between barriers (the `gpu::`
//! trials), so GPU semantics are checked on every machine; the CUDA and HIP renderers print
//! the same programs.
//!
//! * `gpu_launch` (top-down, on the SINK): while the kernel's only effect is a loop
//!   `END(body, RANGE(n))` with a constant extent that fits a grid dimension, the range
//!   becomes the launch index `gidx{d}` (d = 0, 1, 2, outermost first) and the loop goes.
//! * `gpu_local_reduce` (bottom-up): a REDUCE at the top level (it needs no loop, so every
//!   work item of the workgroup reaches its barriers) is split over the work items `lidx0`
//!   when that cannot change its bits. Item l folds the elements l, l+L, l+2L, … in order (a
//!   REDUCE over a new range whose trip count depends on l, expanded later) and stores its
//!   partial in local memory; after a barrier:
//!   - a fold whose result does not depend on the order — integer ADD, MUL, MAX, which wrap
//!     (the op table says so) — uses L = [`LOCAL`] items and a tree `a[l] = a[l] ⊕ a[l+s]`
//!     for s = L/2 … 1 (items l < s, a barrier after each level), leaving the result in a[0];
//!   - a declared `split(k)` (floats too; k ≤ [`MAX_SPLIT_ITEMS`]) uses L = k items, item l
//!     being the oracle's accumulator l, and combines a[0] ⊕ a[1] ⊕ … left to right, as the
//!     oracle does.
//!
//!   A sequential float fold is left alone (its bits depend on the order the oracle fixes).
//!   All lidx0 of a kernel have one extent (a second reduction with another L stays
//!   sequential).
//! * `gpu_store_once` (same pass): a store into a kernel parameter whose value depends on
//!   `lidx0` but whose address does not is done by `lidx0 == 0` only.
//! * `gpu_threads` (on the SINK, after the local reductions): a kernel with grid dimensions
//!   and no work items yet (`lidx*`) gets [`THREADS`] (or the largest power of two ≤ it that
//!   divides the extent) items per workgroup on its innermost grid dimension: `gidx{d}` of
//!   extent E becomes `gidx{d}·B + lidx0` with `gidx{d}` of extent E/B. The same work items
//!   compute the same elements (no bounds guard is needed: B divides E), so the bits cannot
//!   change; neighbouring items touch neighbouring elements (coalesced loads on a GPU).

use std::collections::BTreeMap;

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op, ReduceOrder};

use crate::kgraph::{add, alu, at_flat, const_int, i64c, konst, reduce, substitute, Ranges};
use crate::optimize::reduce::{order_free, pass_id};
use crate::rewrite::{Captures, Pat, Rule, RuleSet};

/// Work items per workgroup for a local reduction (a power of two).
pub const LOCAL: i128 = 8;

/// The largest extent of grid dimension d (CUDA's limits: 2³¹−1, 65535, 65535; the
/// renderers refuse a launch past them, `render::Launch::of`).
pub fn grid_limit(d: usize) -> i128 {
    if d == 0 {
        (1 << 31) - 1
    } else {
        65535
    }
}

pub fn launch() -> RuleSet {
    RuleSet::new(
        "gpu_launch",
        vec![Rule::new(
            "range_to_gidx",
            Pat::node(Op::SINK),
            range_to_gidx,
        )],
    )
}

pub fn local_reduce() -> RuleSet {
    RuleSet::new(
        "gpu_local_reduce",
        vec![
            Rule::new(
                "reduce_to_local_tree",
                Pat::node(Op::REDUCE),
                reduce_to_local,
            ),
            Rule::new("store_from_lidx0", Pat::node(Op::STORE), store_once),
        ],
    )
}

/// Work items per workgroup that `gpu_threads` gives an elementwise kernel (at most).
pub const THREADS: i128 = 256;

/// The most work items one workgroup may have, and along each axis (CUDA's limits: 1024 in
/// all, 1024 × 1024 × 64; kept to for HIP too; the renderers refuse a launch past them,
/// `render::Launch::of`).
pub const MAX_WORKGROUP_ITEMS: u64 = 1024;
pub const MAX_WORKGROUP_DIMS: [u32; 3] = [1024, 1024, 64];

pub fn threads() -> RuleSet {
    RuleSet::new(
        "gpu_threads",
        vec![Rule::new(
            "gidx_to_workgroups",
            Pat::node(Op::SINK),
            gidx_to_workgroups,
        )],
    )
}

fn gidx_to_workgroups(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let reach = g.reachable(&[id]);
    // Not where work items exist already, nor beside a global index (`idxN` is one item
    // per workgroup: a block size would multiply its range).
    if reach
        .iter()
        .any(|&n| special_name(g, n).is_some_and(|s| s.starts_with("lidx") || s.starts_with("idx")))
    {
        return None;
    }
    // The innermost grid dimension: the highest d.
    let (sp, d) = reach
        .iter()
        .filter_map(|&n| {
            let d = special_name(g, n)?
                .strip_prefix("gidx")?
                .parse::<usize>()
                .ok()?;
            Some((n, d))
        })
        .max_by_key(|&(_, d)| d)?;
    let dt = g.node(sp).dtype;
    if dt != DType::Int64 {
        return None;
    }
    let extent = const_int(g, *g.node(sp).src.first()?)?;
    let b = (1..=THREADS.trailing_zeros())
        .rev()
        .map(|k| 1i128 << k)
        .find(|b| extent % b == 0)?;
    let groups = i64c(g, extent / b);
    let gsp = add(
        g,
        Op::SPECIAL,
        dt,
        vec![groups],
        KArg::Special(format!("gidx{d}")),
        0,
    );
    let bc = i64c(g, b);
    let lsp = add(
        g,
        Op::SPECIAL,
        dt,
        vec![bc],
        KArg::Special("lidx0".into()),
        0,
    );
    let base = alu(g, Op::MUL, dt, vec![gsp, bc]);
    let idx = alu(g, Op::ADD, dt, vec![base, lsp]);
    let map = BTreeMap::from([(sp, idx)]);
    let srcs: Vec<NodeId> = g.node(id).src.clone();
    let srcs = srcs.into_iter().map(|s| substitute(g, s, &map)).collect();
    Some(add(g, Op::SINK, DType::Void, srcs, KArg::None, 0))
}

fn special_name(g: &Graph, id: NodeId) -> Option<&str> {
    match &g.node(id).arg {
        Arg::Kernel(KArg::Special(s), _) if g.node(id).op == Op::SPECIAL => Some(s),
        _ => None,
    }
}

fn range_to_gidx(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let sink = g.node(id).clone();
    let [e] = sink.src[..] else { return None };
    let end = g.node(e).clone();
    if end.op != Op::END {
        return None;
    }
    let [body, range] = end.src[..] else {
        return None;
    };
    let extent_node = *g.node(range).src.first()?;
    let extent = const_int(g, extent_node)?;
    let dims = g
        .reachable(&[id])
        .into_iter()
        .filter(|&n| special_name(g, n).is_some_and(|s| s.starts_with("gidx")))
        .count();
    if dims >= 3 || extent < 1 || extent > grid_limit(dims) {
        return None;
    }
    let dt = g.node(range).dtype;
    let sp = add(
        g,
        Op::SPECIAL,
        dt,
        vec![extent_node],
        KArg::Special(format!("gidx{dims}")),
        0,
    );
    let body = substitute(g, body, &BTreeMap::from([(range, sp)]));
    // A loop whose body ignores its variable is not a launch dimension (and a dimension
    // nothing reaches could not be counted).
    if !g.reachable(&[body]).contains(&sp) {
        return None;
    }
    Some(add(g, Op::SINK, DType::Void, vec![body], KArg::None, 0))
}

/// The largest `split(k)` spread over k work items (its combine is straight-line code).
pub const MAX_SPLIT_ITEMS: usize = 256;

fn reduce_to_local(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let n = g.node(id).clone();
    let Arg::Reduce { op, ref order, .. } = n.arg else {
        return None;
    };
    let dt = n.dtype;
    // Order-free folds use a tree over LOCAL items; a declared split(k) uses k items, item l
    // being accumulator l, combined left to right exactly as the oracle does.
    let (l, tree) = if order_free(op, dt) {
        (LOCAL, true)
    } else {
        match *order {
            ReduceOrder::Split(k) if (2..=MAX_SPLIT_ITEMS).contains(&k) => (k as i128, false),
            _ => return None,
        }
    };
    if !Ranges::default().of(g, id).is_empty() {
        return None;
    }
    let (&x, rs) = n.src.split_first()?;
    // A value that depends on lidx0 is already one item's share (the partial fold below).
    if reaches_lidx(g, x).is_some() {
        return None;
    }
    // Every lidx0 of the kernel has one extent.
    let other_extent = g.ids().any(|m| {
        special_name(g, m) == Some("lidx0")
            && g.node(m).src.first().and_then(|&e| const_int(g, e)) != Some(l)
    });
    if other_extent {
        return None;
    }
    let mut ends = vec![];
    for &r in rs {
        ends.push(const_int(g, *g.node(r).src.first()?)?);
    }
    let total: i128 = ends.iter().try_fold(1i128, |a, &e| a.checked_mul(e))?;
    if total > i128::from(i64::MAX) - l || (tree && total < 2) {
        return None;
    }
    let i64t = DType::Int64;
    let lsize = i64c(g, l);
    let lidx = add(
        g,
        Op::SPECIAL,
        i64t,
        vec![lsize],
        KArg::Special("lidx0".into()),
        0,
    );
    // Item l folds the flat elements f = q·L + l < total: ⌊(total + L − 1 − l) / L⌋ of them.
    let top = i64c(g, total + l - 1);
    let rem = alu(g, Op::SUB, i64t, vec![top, lidx]);
    let lc = i64c(g, l);
    let count = alu(g, Op::CDIV, i64t, vec![rem, lc]);
    let q = add(
        g,
        Op::RANGE,
        i64t,
        vec![count],
        KArg::Axis(pass_id(id, 3)),
        0,
    );
    let ql = alu(g, Op::MUL, i64t, vec![q, lc]);
    let f = alu(g, Op::ADD, i64t, vec![ql, lidx]);
    let xq = at_flat(g, x, rs, &ends, f)?;
    let identity = konst(g, dt, reduce_identity(op, dt));
    let partial = reduce(g, op, dt, xq, &[q], ReduceOrder::Sequential);
    let lb = add(
        g,
        Op::BUFFER,
        dt,
        vec![],
        KArg::Local(l as usize),
        pass_id(id, 0),
    );
    let at = alu(g, Op::INDEX, dt, vec![lb, lidx]);
    let st = add(g, Op::STORE, DType::Void, vec![at, partial], KArg::None, 0);
    let mut bar = if crate::rewrite::faults::is_active("fault_gpu_barrier_drop") {
        st // WRONG on purpose (test-only fault): no barrier before the partials are read.
    } else {
        add(g, Op::BARRIER, DType::Void, vec![st], KArg::None, 0)
    };
    let zero = i64c(g, 0);
    if !tree {
        // a[0] ⊕ a[1] ⊕ … ⊕ a[L−1], left to right, by every item (reads only).
        let a = alu(g, Op::AFTER, dt, vec![lb, bar]);
        let i0 = alu(g, Op::INDEX, dt, vec![a, zero]);
        let mut v = alu(g, Op::LOAD, dt, vec![i0]);
        for j in 1..l {
            let jc = i64c(g, j);
            let ij = alu(g, Op::INDEX, dt, vec![a, jc]);
            let part = alu(g, Op::LOAD, dt, vec![ij]);
            v = alu(g, op, dt, vec![v, part]);
        }
        return Some(v);
    }
    let mut s = l / 2;
    while s >= 1 {
        let a = alu(g, Op::AFTER, dt, vec![lb, bar]);
        let i0 = alu(g, Op::INDEX, dt, vec![a, lidx]);
        let sc = i64c(g, s);
        let other = if s > 1 && crate::rewrite::faults::is_active("fault_local_misindex") {
            // WRONG on purpose (test-only fault): reads a[l + s − 1], not a[l + s].
            let sm1 = i64c(g, s - 1);
            alu(g, Op::ADD, i64t, vec![lidx, sm1])
        } else {
            alu(g, Op::ADD, i64t, vec![lidx, sc])
        };
        let i1 = alu(g, Op::INDEX, dt, vec![a, other]);
        let gate = alu(g, Op::CMPLT, DType::Bool, vec![lidx, sc]);
        let mine = alu(g, Op::LOAD, dt, vec![i0]);
        let theirs = alu(g, Op::LOAD, dt, vec![i1, identity, gate]);
        let v = alu(g, op, dt, vec![mine, theirs]);
        let st = add(g, Op::STORE, DType::Void, vec![i0, v, gate], KArg::None, 0);
        bar = add(g, Op::BARRIER, DType::Void, vec![st], KArg::None, 0);
        s /= 2;
    }
    let a = alu(g, Op::AFTER, dt, vec![lb, bar]);
    let i = alu(g, Op::INDEX, dt, vec![a, zero]);
    Some(alu(g, Op::LOAD, dt, vec![i]))
}

fn reaches_lidx(g: &Graph, id: NodeId) -> Option<NodeId> {
    g.reachable(&[id])
        .into_iter()
        .find(|&n| special_name(g, n) == Some("lidx0"))
}

/// The storage an address points into (through AFTERs).
fn base_of(g: &Graph, mut id: NodeId) -> NodeId {
    while g.node(id).op == Op::AFTER {
        id = g.node(id).src[0];
    }
    id
}

fn store_once(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let n = g.node(id).clone();
    let [at, v] = n.src[..] else { return None };
    let buf = base_of(g, *g.node(at).src.first()?);
    if g.node(buf).op != Op::PARAM {
        return None;
    }
    let lidx = reaches_lidx(g, v)?;
    // The address itself (not the effects its buffer waits for) must be the same for every
    // work item.
    let idx = *g.node(at).src.get(1)?;
    if reaches_lidx(g, idx).is_some() {
        return None;
    }
    let zero = i64c(g, 0);
    let first = alu(g, Op::CMPEQ, DType::Bool, vec![lidx, zero]);
    Some(add(
        g,
        Op::STORE,
        DType::Void,
        vec![at, v, first],
        KArg::None,
        0,
    ))
}
