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
//! written as `c·r + Σ aₘ·xₘ + k` (ADD, SUB and MUL by a constant are looked through; the
//! atoms xₘ do not depend on r, and their value ranges come from the range analysis). The
//! terms with |aₘ| < |c| and k are the access's `low` part, the others its `high` part, and
//! H is the gcd of the high coefficients of all accesses. All accesses must share one
//! `c ≠ 0`; the union W of their low ranges must be narrower than |c|; where there are high
//! terms, |c|·(n − 1) + width(W) < H; and every address (r < n) must lie in int64 (the
//! kernel computes addresses in wrapping int64, which agrees with the exact value exactly
//! then). Then v = c·r + low lies in a window narrower than H, so two addresses
//! H·u + v = H·u' + v' have u = u' and v = v', hence c·(r − r') = low' − low with
//! |low' − low| < |c|: r = r'. Without high terms this is the row rule (iteration r touches
//! only `[c·r + min W, c·r + max W]`); with them it also covers an outer loop over column
//! tiles, `out[1024·row + 16·r + l]` with l < 16 and r < 64 (`cpu_tile`'s columns-outer
//! nest). Anything else (a store that does not depend on r, an address through a loaded
//! value, a division) leaves the loop sequential.
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
    let mut accesses: Vec<Lin> = vec![];
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
        let mut budget = MAX_LINEAR_STEPS;
        let Some(lin) = linear(g, &dep, idx, r, 0, &mut budget) else {
            return false;
        };
        accesses.push(lin);
    }
    windows_disjoint(&mut vr, &accesses, extent)
}

/// An address as `c·r + Σ aₘ·xₘ + k`: r's coefficient c, the other terms (atoms xₘ, nodes
/// that do not depend on r, with coefficients aₘ ≠ 0) and the constant k.
#[derive(Clone, Debug, Default)]
struct Lin {
    c: i128,
    terms: BTreeMap<NodeId, i128>,
    k: i128,
}

impl Lin {
    fn atom(x: NodeId) -> Lin {
        Lin {
            terms: BTreeMap::from([(x, 1)]),
            ..Lin::default()
        }
    }

    fn plus(mut self, o: &Lin, sign: i128) -> Option<Lin> {
        self.c = self.c.checked_add(o.c.checked_mul(sign)?)?;
        self.k = self.k.checked_add(o.k.checked_mul(sign)?)?;
        for (&x, &a) in &o.terms {
            let e = self.terms.entry(x).or_insert(0);
            *e = e.checked_add(a.checked_mul(sign)?)?;
            if *e == 0 {
                self.terms.remove(&x);
            }
        }
        Some(self)
    }

    fn times(mut self, m: i128) -> Option<Lin> {
        if m == 0 {
            return Some(Lin::default());
        }
        self.c = self.c.checked_mul(m)?;
        self.k = self.k.checked_mul(m)?;
        for a in self.terms.values_mut() {
            *a = a.checked_mul(m)?;
        }
        Some(self)
    }
}

/// How deep [`linear`] looks through ADD, SUB and MUL by a constant in the part of an
/// address that does not depend on r (deeper, a node is an atom: its value range is used).
const MAX_LINEAR_DEPTH: usize = 64;

/// How many nodes [`linear`] visits for one address (it does not memoize, so a DAG of
/// shared subexpressions could otherwise cost exponential time); past it, a node that does
/// not depend on r is an atom and one that does fails the proof.
const MAX_LINEAR_STEPS: usize = 4096;

/// `idx` as a [`Lin`] (None when r appears other than through ADD, SUB and MUL by a
/// constant).
fn linear(
    g: &Graph,
    dep: &BTreeMap<NodeId, bool>,
    idx: NodeId,
    r: NodeId,
    depth: usize,
    budget: &mut usize,
) -> Option<Lin> {
    *budget = budget.saturating_sub(1);
    if idx == r {
        return Some(Lin {
            c: 1,
            ..Lin::default()
        });
    }
    let n = g.node(idx);
    let depends = dep.get(&idx) == Some(&true);
    if !depends {
        if let Some(k) = const_int(g, idx) {
            return Some(Lin {
                k,
                ..Lin::default()
            });
        }
        if depth >= MAX_LINEAR_DEPTH || *budget == 0 || n.dtype != DType::Int64 {
            return Some(Lin::atom(idx));
        }
    }
    if n.dtype != DType::Int64 || *budget == 0 {
        return None;
    }
    let mut sub = |x: NodeId| linear(g, dep, x, r, depth + 1, budget);
    let lin = match (n.op, &n.src[..]) {
        (Op::ADD, &[a, b]) => sub(a).and_then(|la| la.plus(&sub(b)?, 1)),
        (Op::SUB, &[a, b]) => sub(a).and_then(|la| la.plus(&sub(b)?, -1)),
        (Op::MUL, &[a, b]) => match (const_int(g, a), const_int(g, b)) {
            (_, Some(k)) => sub(a).and_then(|l| l.times(k)),
            (Some(k), None) => sub(b).and_then(|l| l.times(k)),
            (None, None) => None,
        },
        _ => None,
    };
    match lin {
        Some(l) => Some(l),
        None if !depends => Some(Lin::atom(idx)),
        None => None,
    }
}

/// Whether iterations r ≠ r' (r, r' < extent) of the accesses `acc` never reach one
/// address. Each access is `c·r + low + high`: `low` the terms with |aₘ| < |c| and the
/// constant, in a range from the value-range analysis; `high` the terms with |aₘ| ≥ |c|,
/// all multiples of H, the gcd of their coefficients over every access. It holds when
/// every access has the same c ≠ 0, the union W of the low ranges is narrower than |c|,
/// and, where there are high terms, |c|·(extent − 1) + width(W) < H:
///
/// then v = c·r + low lies in a window narrower than H, so from H·u + v = H·u' + v' follow
/// u = u' and v = v', so c·(r − r') = low' − low, and |low' − low| ≤ width(W) < |c| gives
/// r = r'. (Without high terms this is the row rule `c·r + rest`, |rest| window < |c|.) The
/// high atoms may take any values; their ranges only bound the address, which must lie in
/// int64 (the kernel computes addresses in wrapping int64, which agrees with the exact
/// value exactly then).
fn windows_disjoint(vr: &mut VRanges, acc: &[Lin], extent: i128) -> bool {
    let Some(c) = acc.first().map(|l| l.c) else {
        // No access into a written param (so nothing is written): nothing worth threading.
        return false;
    };
    let Some(c_abs) = c.checked_abs() else {
        return false;
    };
    if c == 0 || acc.iter().any(|l| l.c != c) {
        return false;
    }
    let mut h: i128 = 0;
    // The union of the low windows, and of the whole `rest` (low + high) windows.
    let mut window: Option<VRange> = None;
    let mut whole: Option<VRange> = None;
    let add = |part: &mut VRange, t: VRange| -> Option<()> {
        *part = VRange::new(part.min.checked_add(t.min)?, part.max.checked_add(t.max)?);
        Some(())
    };
    for l in acc {
        let mut low = VRange::point(l.k);
        let mut high = VRange::point(0);
        for (&x, &a) in &l.terms {
            let (Some(xr), Some(a_abs)) = (vr.get(x), a.checked_abs()) else {
                return false;
            };
            let Some(t) = scaled(xr, a) else { return false };
            // An atom of one value is a constant, whatever its coefficient.
            let part = if a_abs < c_abs || xr.min == xr.max {
                &mut low
            } else {
                h = gcd(h, a_abs);
                &mut high
            };
            if add(part, t).is_none() {
                return false;
            }
        }
        let mut rest = low;
        if add(&mut rest, high).is_none() || !fits_int64(c, rest, extent) {
            return false;
        }
        window = Some(window.map_or(low, |w| w.union(low)));
        whole = Some(whole.map_or(rest, |w| w.union(rest)));
    }
    let (Some(w), Some(all)) = (window, whole) else {
        return false;
    };
    // The row rule on the whole rest (no high part needed), else the mixed-radix rule.
    if all.max - all.min < c_abs {
        return true;
    }
    let width = w.max - w.min;
    width < c_abs
        && h > 0
        && c_abs
            .checked_mul(extent - 1)
            .and_then(|s| s.checked_add(width))
            .is_some_and(|span| span < h)
}

/// `a·x` for x in `xr`.
fn scaled(xr: VRange, a: i128) -> Option<VRange> {
    let (p, q) = (xr.min.checked_mul(a)?, xr.max.checked_mul(a)?);
    Some(VRange::new(p.min(q), p.max(q)))
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
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

    #[test]
    fn a_subtraction_in_an_address_subtracts() {
        // out[(a·r + j) - b·r], j < 4.
        let sub = |a: i128, b: i128| {
            kernel(
                4,
                |g, r, j| {
                    let arj = row(g, r, j, a);
                    let bc = i64c(g, b);
                    let br = alu(g, Op::MUL, DType::Int64, vec![r, bc]);
                    alu(g, Op::SUB, DType::Int64, vec![arj, br])
                },
                None,
            )
        };
        // out[r + j]: rows overlap (an ADD would make it 9r + j).
        let (g, body, r) = sub(5, 4);
        assert!(!disjoint(&g, body, r, 8), "out[r + j], j < 4 overlaps");
        // out[4r + j]: disjoint rows, proved through the SUB.
        let (g, body, r) = sub(9, 5);
        assert!(disjoint(&g, body, r, 8), "out[4r + j], j < 4");
    }

    /// `out[h·q + 16·r + l]` for r < 8, l < 16, q < 4 (a row q above column tiles r of 16).
    fn tiles(h: i128, l_extent: i128) -> (Graph, NodeId, NodeId) {
        tiles_at(h, l_extent, 0)
    }

    /// `out[h·q + 16r + l + off]` for q < 4, l < l_extent.
    fn tiles_at(h: i128, l_extent: i128, off: i128) -> (Graph, NodeId, NodeId) {
        let mut g = Graph::default();
        let out = add(&mut g, Op::PARAM, DType::Float32, vec![], KArg::Param(0), 0);
        let e8 = i64c(&mut g, 8);
        let r = add(&mut g, Op::RANGE, DType::Int64, vec![e8], KArg::Axis(0), 0);
        let e4 = i64c(&mut g, 4);
        let q = add(&mut g, Op::RANGE, DType::Int64, vec![e4], KArg::Axis(1), 0);
        let el = i64c(&mut g, l_extent);
        let l = add(&mut g, Op::RANGE, DType::Int64, vec![el], KArg::Axis(2), 0);
        let hq = row(&mut g, q, l, h);
        let c16 = i64c(&mut g, 16);
        let r16 = alu(&mut g, Op::MUL, DType::Int64, vec![r, c16]);
        let idx = alu(&mut g, Op::ADD, DType::Int64, vec![hq, r16]);
        let idx = if off == 0 {
            idx
        } else {
            let o = i64c(&mut g, off);
            alu(&mut g, Op::ADD, DType::Int64, vec![idx, o])
        };
        let at = alu(&mut g, Op::INDEX, DType::Float32, vec![out, idx]);
        let one = konst(&mut g, DType::Float32, 1f32.to_bits() as u64);
        let st = add(&mut g, Op::STORE, DType::Void, vec![at, one], KArg::None, 0);
        let e = add(&mut g, Op::END, DType::Void, vec![st, l], KArg::None, 0);
        let e = add(&mut g, Op::END, DType::Void, vec![e, q], KArg::None, 0);
        (g, e, r)
    }

    #[test]
    fn column_tiles_under_a_row_term_are_disjoint_exactly_when_they_fit_below_it() {
        // 16·7 + 15 = 127 < 128: rows of 128 hold the 8 tiles of 16 side by side.
        let (g, body, r) = tiles(128, 16);
        assert!(disjoint(&g, body, r, 8), "out[128q + 16r + l], l < 16");
        // Rows of 127: tile 7 of row q reaches 16·7 + 15 = 127, row q + 1's first element.
        let (g, body, r) = tiles(127, 16);
        assert!(!disjoint(&g, body, r, 8), "out[127q + 16r + l] overlaps");
        // Any row term above the window: disjoint.
        let (g, body, r) = tiles(256, 16);
        assert!(disjoint(&g, body, r, 8), "out[256q + 16r + l]");
        // l < 17 overlaps the next tile, whatever the row term.
        let (g, body, r) = tiles(1024, 17);
        assert!(!disjoint(&g, body, r, 8), "out[1024q + 16r + l], l < 17");
        // A row term of exactly c = 16 is no row term: out[16q + 16r + l] overlaps.
        let (g, body, r) = tiles(16, 16);
        assert!(!disjoint(&g, body, r, 8), "out[16q + 16r + l]");
        // The window's width, not its ends, decides: shifted to [-8, 7] it still fits rows of
        // 128 and still overlaps in rows of 127.
        let (g, body, r) = tiles_at(128, 16, -8);
        assert!(disjoint(&g, body, r, 8), "out[128q + 16r + l - 8]");
        let (g, body, r) = tiles_at(127, 16, -8);
        assert!(
            !disjoint(&g, body, r, 8),
            "out[127q + 16r + l - 8] overlaps"
        );
    }

    #[test]
    fn one_valued_terms_count_as_constants_and_shared_subexpressions_stay_cheap() {
        // out[4r + 1024·(j / 4) + j % 4], j < 4: j / 4 is always 0, so the old row rule
        // (rest in [0, 3], narrower than 4) holds although 4·7 + 3 ≥ 1024 is not needed.
        let (g, body, r) = kernel(
            4,
            |g, r, j| {
                let four = i64c(g, 4);
                let q = alu(g, Op::CDIV, DType::Int64, vec![j, four]);
                let m = alu(g, Op::CMOD, DType::Int64, vec![j, four]);
                let big = i64c(g, 1024);
                let hq = alu(g, Op::MUL, DType::Int64, vec![q, big]);
                let rm = row(g, r, m, 4);
                alu(g, Op::ADD, DType::Int64, vec![rm, hq])
            },
            None,
        );
        assert!(disjoint(&g, body, r, 8), "out[4r + 1024·(j/4) + j%4]");
        // out[r + d], d = j + j doubled 80 times: a DAG of 2^80 paths. The proof gives up on
        // it (d's terms are cut into atoms) quickly instead of walking every path.
        let (g, body, r) = kernel(
            1,
            |g, r, j| {
                let zero = i64c(g, 0);
                let mut d = alu(g, Op::MUL, DType::Int64, vec![j, zero]);
                for _ in 0..80 {
                    d = alu(g, Op::ADD, DType::Int64, vec![d, d]);
                }
                alu(g, Op::ADD, DType::Int64, vec![r, d])
            },
            None,
        );
        assert!(disjoint(&g, body, r, 8), "out[r + 0·j·2^80]");
    }
}
