//! `cpu_threads` (top-down, on the SINK): marks the outermost loop of a kernel as
//! *parallel* — its RANGE gets the axis [`PARALLEL_AXIS`] — when its iterations touch
//! disjoint elements of every kernel parameter the kernel stores into. The C renderer then
//! gives the kernel a second entry over `[lo, hi)` of that loop (see `render::par`) and the
//! CPU runtime runs chunks of it on several threads (`runtime::cpu`).
//!
//! Exact by construction: every iteration computes what it computes sequentially (the same
//! operations in the same order), and no iteration reads or writes an element of a written
//! parameter that another iteration touches, so the order of iterations cannot be observed.
//!
//! Registers (`BUFFER Reg(n)`: the accumulator rows of `cpu_interchange`, the lanes of
//! `cpu_split_lanes`, any pass's tiles) are allowed when each is *private to one
//! iteration*: every element an iteration reads from it was written earlier in that same
//! iteration (the proof, and the linearizer facts it rests on, are in `threads/regs.rs`).
//! Then what one iteration leaves in a register is never observed, and each thread's own
//! copy (a local of the C function every thread calls, see `render::par`) gives the bits
//! of the one copy a single thread uses. The REDUCEs still in the body are expanded after
//! this pass into registers of that shape (reset once per iteration of the loops around
//! them).
//!
//! The proof of disjointness. The kernel's only effect is `END(body, r)` with a constant
//! extent n ≥ 2, and it holds no shared buffer, launch index or barrier. For
//! every INDEX into a parameter that some STORE writes (loads included), the address is
//! written as `c·r + rest`, where `rest` does not depend on r (ADD, SUB and MUL by a constant
//! are looked through), with the value range of `rest` from the range analysis. All those
//! accesses must share one `c ≠ 0`, and the union `[lo, hi]` of their `rest` ranges must be
//! narrower than |c|, and every address c·r + rest (r < n) must lie in int64 (the kernel
//! computes addresses in wrapping int64, which agrees with the exact value exactly then): then
//! iteration r touches only `[c·r + lo, c·r + hi]`, and two iterations never touch the same
//! element. Anything else (a store that does not depend on
//! r, an address through a loaded value, a division) leaves the loop sequential.
//! Two parameter slots bound to the same memory are not covered by this proof: the runtime
//! runs such launches on one thread.
//!
//! Not covered: a reduction with no output axis (a whole-tensor sum) has no outer loop to
//! split. A sum declared `chunks_of_split(c, k)` gets one: the scheduler makes its c chunk
//! results an output axis of their own kernel (`schedule::chunked`), which this pass runs on
//! threads. A declared `chunks(k)` order (combined from p₀, not from the identity, and each
//! chunk sequential) is not split that way.

use std::collections::BTreeMap;

use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op};

use crate::kgraph::{add, const_int, substitute};
use crate::rewrite::{Captures, Pat, Ranges as VRanges, Rule, RuleSet, VRange};

mod regs;
pub use regs::{MAX_COVER_STEPS, MAX_REG_BYTES};

/// The axis of a RANGE the CPU runtime may split over threads (one per kernel, outermost).
pub const PARALLEL_AXIS: u32 = u32::MAX;

pub fn threads() -> RuleSet {
    RuleSet::new(
        "cpu_threads",
        vec![Rule::new(
            "outer_loop_parallel",
            Pat::node(Op::SINK),
            outer_loop_parallel,
        )],
    )
}

fn outer_loop_parallel(g: &mut Graph, _c: &Captures, id: NodeId) -> Option<NodeId> {
    let sink = g.node(id).clone();
    let [e] = sink.src[..] else { return None };
    let end = g.node(e).clone();
    if end.op != Op::END {
        return None;
    }
    let [body, range] = end.src[..] else {
        return None;
    };
    let rn = g.node(range).clone();
    if rn.op != Op::RANGE || rn.dtype != DType::Int64 {
        return None;
    }
    match rn.arg {
        Arg::Kernel(KArg::Axis(a), _) if a != PARALLEL_AXIS => {}
        _ => return None,
    }
    let extent = const_int(g, *rn.src.first()?)?;
    if extent < 2 || !disjoint(g, body, range, extent) {
        return None;
    }
    let tag = match rn.arg {
        Arg::Kernel(_, t) => t,
        _ => 0,
    };
    let par = add(
        g,
        Op::RANGE,
        DType::Int64,
        rn.src.clone(),
        KArg::Axis(PARALLEL_AXIS),
        tag,
    );
    let body = substitute(g, body, &BTreeMap::from([(range, par)]));
    let end = add(g, Op::END, DType::Void, vec![body, par], KArg::None, 0);
    Some(add(g, Op::SINK, DType::Void, vec![end], KArg::None, 0))
}

/// The storage an address points into (through AFTERs).
fn base_of(g: &Graph, mut id: NodeId) -> NodeId {
    while g.node(id).op == Op::AFTER {
        match g.node(id).src.first() {
            Some(&s) => id = s,
            None => break,
        }
    }
    id
}

/// The slot of a PARAM node (None for anything else).
pub(crate) fn param_slot(g: &Graph, id: NodeId) -> Option<u32> {
    match (g.node(id).op, &g.node(id).arg) {
        (Op::PARAM, Arg::Kernel(KArg::Param(s), _)) => Some(*s),
        _ => None,
    }
}

/// Whether the iterations of `r` (over `0..extent`) touch disjoint elements of every
/// parameter `body` stores into (see the module docs).
fn disjoint(g: &Graph, body: NodeId, r: NodeId, extent: i128) -> bool {
    let reach = g.reachable(&[body]);
    if reach.iter().any(|&n| {
        matches!(g.node(n).op, Op::SPECIAL | Op::BARRIER)
            || (g.node(n).op == Op::RANGE
                && matches!(g.node(n).arg, Arg::Kernel(KArg::Axis(PARALLEL_AXIS), _)))
    }) {
        return false;
    }
    // Registers: each must be private to one iteration (regs.rs).
    if !regs::private(g, &reach, r) {
        return false;
    }
    // Which nodes depend on r (reachable is in topological order: sources first).
    let mut dep: BTreeMap<NodeId, bool> = BTreeMap::new();
    for &n in &reach {
        let d = n == r || g.node(n).src.iter().any(|s| dep.get(s) == Some(&true));
        dep.insert(n, d);
    }
    let written: Vec<u32> = reach
        .iter()
        .filter(|&&n| g.node(n).op == Op::STORE)
        .filter_map(|&n| {
            let at = *g.node(n).src.first()?;
            param_slot(g, base_of(g, *g.node(at).src.first()?))
        })
        .collect();
    // A store whose address is not an INDEX into a param or register is not understood.
    let stores_ok = reach
        .iter()
        .filter(|&&n| g.node(n).op == Op::STORE)
        .all(|&n| {
            g.node(n)
                .src
                .first()
                .is_some_and(|&at| g.node(at).op == Op::INDEX)
        });
    if !stores_ok {
        return false;
    }
    let mut vr = VRanges::new(g);
    let mut window: Option<(i128, VRange)> = None;
    for &n in &reach {
        let node = g.node(n);
        if node.op != Op::INDEX {
            continue;
        }
        let (Some(&buf), Some(&idx)) = (node.src.first(), node.src.get(1)) else {
            return false;
        };
        let Some(slot) = param_slot(g, base_of(g, buf)) else {
            continue;
        };
        if !written.contains(&slot) {
            continue;
        }
        let Some((c, rest)) = affine(g, &mut vr, &dep, idx, r) else {
            return false;
        };
        // The proof is in exact arithmetic; the kernel computes addresses in wrapping int64.
        // ADD, SUB and MUL wrap consistently mod 2^64, so the int64 address equals the exact
        // one whenever the exact c·r + rest stays in int64 for every r < extent.
        if !fits_int64(c, rest, extent) {
            return false;
        }
        window = match window {
            None => Some((c, rest)),
            Some((c0, w)) if c0 == c => Some((c, w.union(rest))),
            Some(_) => return false,
        };
    }
    match window {
        // No access into a written param (so nothing is written): nothing worth threading.
        None => false,
        Some((c, w)) => c != 0 && w.max - w.min < c.abs(),
    }
}

/// Whether `c·r + rest` lies in int64 for every r in `0..extent` and every value of `rest`.
fn fits_int64(c: i128, rest: VRange, extent: i128) -> bool {
    let Some(last) = extent.checked_sub(1).and_then(|e| c.checked_mul(e)) else {
        return false;
    };
    let (lo, hi) = (last.min(0), last.max(0));
    match (lo.checked_add(rest.min), hi.checked_add(rest.max)) {
        (Some(lo), Some(hi)) => lo >= i128::from(i64::MIN) && hi <= i128::from(i64::MAX),
        _ => false,
    }
}

/// `idx` as `c·r + rest`: the coefficient c and the value range of `rest` (None when `idx`
/// is not of that form or a range is unknown).
fn affine(
    g: &Graph,
    vr: &mut VRanges,
    dep: &BTreeMap<NodeId, bool>,
    idx: NodeId,
    r: NodeId,
) -> Option<(i128, VRange)> {
    if idx == r {
        return Some((1, VRange::point(0)));
    }
    if dep.get(&idx) != Some(&true) {
        return Some((0, vr.get(idx)?));
    }
    let n = g.node(idx);
    if n.dtype != DType::Int64 {
        return None;
    }
    match (n.op, &n.src[..]) {
        (Op::ADD, &[a, b]) => {
            let (ca, ra) = affine(g, vr, dep, a, r)?;
            let (cb, rb) = affine(g, vr, dep, b, r)?;
            Some((
                ca.checked_add(cb)?,
                VRange::new(ra.min.checked_add(rb.min)?, ra.max.checked_add(rb.max)?),
            ))
        }
        (Op::SUB, &[a, b]) => {
            let (ca, ra) = affine(g, vr, dep, a, r)?;
            let (cb, rb) = affine(g, vr, dep, b, r)?;
            Some((
                ca.checked_sub(cb)?,
                VRange::new(ra.min.checked_sub(rb.max)?, ra.max.checked_sub(rb.min)?),
            ))
        }
        (Op::MUL, &[a, b]) => {
            let (x, k) = match (const_int(g, a), const_int(g, b)) {
                (_, Some(k)) => (a, k),
                (Some(k), None) => (b, k),
                (None, None) => return None,
            };
            let (cx, rx) = affine(g, vr, dep, x, r)?;
            let (p, q) = (rx.min.checked_mul(k)?, rx.max.checked_mul(k)?);
            Some((cx.checked_mul(k)?, VRange::new(p.min(q), p.max(q))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kgraph::{alu, i64c, konst};

    /// The address a test kernel reads `out` at, from r.
    type ReadAt = dyn Fn(&mut Graph, NodeId) -> NodeId;

    /// `out[idx(r, j)] = 1` for r < 8, j < inner (or, with `read`, `out[read(r)]` stored).
    fn kernel(
        inner: i128,
        idx: impl Fn(&mut Graph, NodeId, NodeId) -> NodeId,
        read: Option<&ReadAt>,
    ) -> (Graph, NodeId, NodeId) {
        let mut g = Graph::default();
        let out = add(&mut g, Op::PARAM, DType::Float32, vec![], KArg::Param(0), 0);
        let e8 = i64c(&mut g, 8);
        let r = add(&mut g, Op::RANGE, DType::Int64, vec![e8], KArg::Axis(0), 0);
        let ei = i64c(&mut g, inner);
        let j = add(&mut g, Op::RANGE, DType::Int64, vec![ei], KArg::Axis(1), 0);
        let i = idx(&mut g, r, j);
        let at = alu(&mut g, Op::INDEX, DType::Float32, vec![out, i]);
        let v = match read {
            None => konst(&mut g, DType::Float32, 1f32.to_bits() as u64),
            Some(f) => {
                let ri = f(&mut g, r);
                let rat = alu(&mut g, Op::INDEX, DType::Float32, vec![out, ri]);
                alu(&mut g, Op::LOAD, DType::Float32, vec![rat])
            }
        };
        let st = add(&mut g, Op::STORE, DType::Void, vec![at, v], KArg::None, 0);
        let e = add(&mut g, Op::END, DType::Void, vec![st, j], KArg::None, 0);
        (g, e, r)
    }

    fn row(g: &mut Graph, r: NodeId, j: NodeId, c: i128) -> NodeId {
        let cc = i64c(g, c);
        let rc = alu(g, Op::MUL, DType::Int64, vec![r, cc]);
        alu(g, Op::ADD, DType::Int64, vec![rc, j])
    }

    #[test]
    fn rows_of_an_output_are_disjoint_and_overlaps_are_not() {
        let (g, body, r) = kernel(4, |g, r, j| row(g, r, j, 4), None);
        assert!(disjoint(&g, body, r, 8), "out[4r + j], j < 4");
        let (g, body, r) = kernel(5, |g, r, j| row(g, r, j, 4), None);
        assert!(
            !disjoint(&g, body, r, 8),
            "out[4r + j], j < 5 overlaps the next row"
        );
        let (g, body, r) = kernel(
            1,
            |g, r, _| {
                let two = i64c(g, 2);
                alu(g, Op::CDIV, DType::Int64, vec![r, two])
            },
            None,
        );
        assert!(
            !disjoint(&g, body, r, 8),
            "out[r / 2]: two iterations, one element"
        );
        let (g, body, r) = kernel(1, |_, _, j| j, None);
        assert!(
            !disjoint(&g, body, r, 8),
            "a store that does not depend on r"
        );
        let next = |g: &mut Graph, r: NodeId| {
            let one = i64c(g, 1);
            alu(g, Op::ADD, DType::Int64, vec![r, one])
        };
        let (g, body, r) = kernel(1, |_, r, _| r, Some(&next));
        assert!(
            !disjoint(&g, body, r, 8),
            "out[r] = out[r + 1] reads the next iteration's"
        );
        let same = |_: &mut Graph, r: NodeId| r;
        let (g, body, r) = kernel(1, |_, r, _| r, Some(&same));
        assert!(disjoint(&g, body, r, 8), "out[r] = out[r] in place");
        // out[r · 2^62]: exactly disjoint, but in int64 r = 0 and r = 4 both address 0.
        let (g, body, r) = kernel(1, |g, r, j| row(g, r, j, 1 << 62), None);
        assert!(
            !disjoint(&g, body, r, 8),
            "addresses that wrap in int64 are not proven disjoint"
        );
        let (g, body, r) = kernel(1, |g, r, j| row(g, r, j, 1 << 59), None);
        assert!(
            disjoint(&g, body, r, 8),
            "7 · 2^59 + 0 fits in int64: no wrap, disjoint"
        );
    }
}
