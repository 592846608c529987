//! The GPU-style lowering, as passes over kernel graphs. The kernel interpreter runs the
//! result with seeded interleavings of the work items between barriers (the `gpu::`
//! trials), so GPU semantics are checked on every machine; the CUDA and HIP renderers print
//! the same programs.
//!
//! * `gpu_launch` (top-down, on the SINK): while the kernel's only effect is a loop
//!   `END(body, RANGE(n))` with a constant extent that fits a grid dimension, the range
//!   becomes the launch index `gidx{d}` (d = 0, 1, 2, outermost first) and the loop goes.
//! * `gpu_local_reduce` (bottom-up): a REDUCE at the top level (it needs no loop, so every
//!   work item of the workgroup reaches its barriers) whose result does not depend on the
//!   fold order — integer ADD, MUL, MAX, which wrap — is split over the [`LOCAL`] work
//!   items `lidx0` of the workgroup: item l folds the elements l, l+L, l+2L, … (a REDUCE
//!   over a new range, expanded later), stores its partial in local memory, and a tree
//!   `a[l] = a[l] ⊕ a[l+s]` for s = L/2 … 1 (items l < s, a barrier after each level)
//!   leaves the result in `a[0]`. Floats are left alone: their sum depends on the order and
//!   the oracle's order is sequential.
//! * `gpu_store_once` (same pass): a store into a kernel parameter whose value depends on
//!   `lidx0` but whose address does not is done by `lidx0 == 0` only.

use std::collections::BTreeMap;

use uopkit_interp::ir::table::reduce_identity;
use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op};

use crate::kgraph::{add, const_int, konst, substitute, Ranges, PASS_TAG};
use crate::rewrite::{Captures, Pat, Rule, RuleSet};

/// Work items per workgroup for a local reduction (a power of two).
pub const LOCAL: i128 = 8;

/// The largest extent of grid dimension d (CUDA's limits: 2³¹−1, 65535, 65535).
fn grid_limit(d: usize) -> i128 {
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

/// Whether folding with `op` on `dt` gives the same bits in every order: a reduce op that
/// the op table says is commutative and associative bit for bit on `dt` (integers wrap;
/// no float op qualifies).
fn order_free(op: Op, dt: DType) -> bool {
    op.info().is_some_and(|i| {
        i.reduce.is_some() && i.commutative.holds_for(dt) && i.associative.holds_for(dt)
    })
}

fn i64c(g: &mut Graph, v: i128) -> NodeId {
    konst(g, DType::Int64, v as i64 as u64)
}

fn alu(g: &mut Graph, op: Op, dt: DType, src: Vec<NodeId>) -> NodeId {
    add(g, op, dt, src, KArg::None, 0)
}

fn reduce_to_local(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let n = g.node(id).clone();
    let Arg::Reduce { op, .. } = n.arg else {
        return None;
    };
    let dt = n.dtype;
    if !order_free(op, dt) || !Ranges::default().of(g, id).is_empty() {
        return None;
    }
    let (&x, rs) = n.src.split_first()?;
    // A value that depends on lidx0 is already one item's share (the partial fold below).
    if reaches_lidx(g, x).is_some() {
        return None;
    }
    let mut ends = vec![];
    for &r in rs {
        ends.push(const_int(g, *g.node(r).src.first()?)?);
    }
    let total: i128 = ends.iter().try_fold(1i128, |a, &e| a.checked_mul(e))?;
    if total < 2 || total > i128::from(i64::MAX) {
        return None;
    }
    let l = LOCAL;
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
    // Item l folds the flat elements f = q·L + l, q < ⌈total/L⌉, those with f < total.
    let qn = i64c(g, (total + l - 1) / l);
    let q = add(g, Op::RANGE, i64t, vec![qn], KArg::Axis(PASS_TAG | id.0), 0);
    let lc = i64c(g, l);
    let ql = alu(g, Op::MUL, i64t, vec![q, lc]);
    let f = alu(g, Op::ADD, i64t, vec![ql, lidx]);
    let tot = i64c(g, total);
    let valid = alu(g, Op::CMPLT, DType::Bool, vec![f, tot]);
    let zero = i64c(g, 0);
    let fc = alu(g, Op::WHERE, i64t, vec![valid, f, zero]);
    // r_k = (f / stride_k) mod end_k, r₀ the most significant.
    let mut map = BTreeMap::new();
    let mut stride: i128 = 1;
    for (k, (&r, &e)) in rs.iter().zip(&ends).enumerate().rev() {
        let sc = i64c(g, stride);
        let mut v = if stride == 1 {
            fc
        } else {
            alu(g, Op::CDIV, i64t, vec![fc, sc])
        };
        if k > 0 {
            let ec = i64c(g, e);
            v = alu(g, Op::CMOD, i64t, vec![v, ec]);
        }
        map.insert(r, v);
        stride *= e;
    }
    let xq = substitute(g, x, &map);
    let identity = konst(g, dt, reduce_identity(op, dt));
    let xv = alu(g, Op::WHERE, dt, vec![valid, xq, identity]);
    let partial = g.add(uopkit_interp::ir::Node {
        op: Op::REDUCE,
        dtype: dt,
        src: vec![xv, q],
        arg: Arg::Reduce {
            op,
            axes: 1,
            order: uopkit_interp::ir::ReduceOrder::Sequential,
        },
    });
    let lb = add(
        g,
        Op::BUFFER,
        dt,
        vec![],
        KArg::Local(l as usize),
        PASS_TAG | id.0,
    );
    let at = alu(g, Op::INDEX, dt, vec![lb, lidx]);
    let st = add(g, Op::STORE, DType::Void, vec![at, partial], KArg::None, 0);
    let mut bar = if crate::rewrite::faults::is_active("fault_gpu_barrier_drop") {
        st // WRONG on purpose (test-only fault): no barrier before the tree reads.
    } else {
        add(g, Op::BARRIER, DType::Void, vec![st], KArg::None, 0)
    };
    let mut s = l / 2;
    while s >= 1 {
        let a = alu(g, Op::AFTER, dt, vec![lb, bar]);
        let i0 = alu(g, Op::INDEX, dt, vec![a, lidx]);
        let sc = i64c(g, s);
        let other = alu(g, Op::ADD, i64t, vec![lidx, sc]);
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
