//! The register half of `cpu_threads`' proof: every register (`BUFFER Reg(n)`) a loop nest
//! holds is *private to one iteration* of the parallel loop r — each iteration writes every
//! register element it reads before it reads it, so no iteration can observe what another
//! left in a register, and a thread starting at iteration lo (with its own, uninitialized
//! registers: the C kernel declares them as locals of the function every thread calls) reads
//! what one thread running 0 … lo − 1 first would have read.
//!
//! What the linearizer guarantees (`crate::linearize`, which runs after every pass) and the
//! proof uses. Write ranges(X) for the open ranges of node X ([`Ranges`]) and S(X) for the
//! loops X is emitted inside. (i) A node is emitted only where all of ranges(X) are open,
//! and it is hoisted before any loop it does not depend on, so S(X) is ranges(X) and the
//! loops enclosing them — a chain fixed by ranges(X) alone when every RANGE is closed by
//! exactly one END (or REDUCE, which `expand_reduce` turns into that one END). (ii) Sources
//! are emitted before their users, an effect (STORE, END, GROUP) exactly once. (iii) Nothing
//! in a kernel is conditional but a gated STORE or LOAD.
//!
//! The proof, for each register `acc = BUFFER Reg(n)` reachable from the loop body:
//!
//! 1. Every RANGE of the body other than r is closed exactly once, and r not at all inside
//!    it, and no register is inside the operand of a REDUCE that `expand_reduce` lowers
//!    other than as one sequential loop (split, chunks, tree substitute new ranges into the
//!    operand or copy it per leaf), so (i) still applies after `expand_reduce`; the
//!    registers together are at most [`MAX_REG_BYTES`] (a bound on the stack frame besides
//!    `expand_reduce`'s later accumulators; the chunks' threads get a main thread's stack).
//! 2. `acc` is only used through `AFTER(acc, …)` chains, those only as INDEX buffers (or as
//!    AFTER dependencies), and those INDEXes only as the address of a LOAD or STORE; every
//!    such INDEX depends on r (so it is inside the parallel loop, by (i)).
//! 3. For every LOAD L of `acc[i]`: the value range of i is known and inside [0, n), and it
//!    is covered by the *initializers* reachable from L's address: effects E (a STORE, an
//!    END, a GROUP) with r ∈ ranges(E) ⊆ ranges(L). By (ii) E runs before L; by (i) S(E) ⊆
//!    S(L), and E is not inside any loop of its own chain but those of ranges(E), so in
//!    every instance of S(E) (one iteration of r among them) E runs once, unconditionally,
//!    before L. What E writes each time: a STORE's element; an END(b, r₁ … rₖ) over
//!    constant extents, what b writes for every value of r₁ … rₖ; a GROUP, the union. A
//!    STORE counts only when ungated, into `acc`, its index computed from constants and the
//!    ranges of the ENDs around it inside E (evaluated exactly, for every value), and when
//!    it depends on exactly ranges(E) and those ranges (so it is emitted inside those ENDs'
//!    loops, which only E opens, and nowhere else).
//!
//! Writes are not restricted: a register element written in iteration r and read in r + 1
//! is a LOAD that no initializer of its own iteration covers, and is refused.
//! Anything outside these shapes leaves the loop sequential.

use std::collections::{BTreeMap, BTreeSet};

use uopkit_interp::ir::{Arg, DType, Graph, KArg, NodeId, Op, ReduceOrder};

use crate::kgraph::{const_int, Ranges};
use crate::rewrite::Ranges as VRanges;

/// The most bytes of registers a threaded loop nest may hold when this pass runs (the
/// accumulators `expand_reduce` adds later come on top; the chunks' threads run on
/// `runtime::threads::CHUNK_STACK_BYTES` stacks, as large as a main thread's).
pub const MAX_REG_BYTES: usize = 256 << 10;

/// The most STORE instances the proof evaluates for one initializer (larger ones do not
/// count as initializers).
pub const MAX_COVER_STEPS: u64 = 1 << 16;

/// Whether every register reachable from the parallel loop's body (`reach`, topological)
/// is private to one iteration of `r` (see the module docs).
pub(crate) fn private(g: &Graph, reach: &[NodeId], r: NodeId) -> bool {
    let regs: Vec<(NodeId, usize)> = reach
        .iter()
        .filter(|&&n| g.node(n).op == Op::BUFFER)
        .filter_map(|&n| match g.node(n).arg {
            Arg::Kernel(KArg::Reg(size), _) => Some((n, size)),
            _ => None,
        })
        .collect();
    let buffers = reach
        .iter()
        .filter(|&&n| g.node(n).op == Op::BUFFER)
        .count();
    if regs.len() != buffers {
        return false; // shared memory, or a BUFFER without a size
    }
    if regs.is_empty() {
        return true;
    }
    let bytes = regs.iter().try_fold(0usize, |a, &(n, size)| {
        a.checked_add(size.checked_mul(g.node(n).dtype.itemsize())?)
    });
    if bytes.is_none_or(|b| b > MAX_REG_BYTES) || regs.iter().any(|&(_, s)| s == 0) {
        return false;
    }
    if !closed_once(g, reach, r) || regs_in_reordered_reduce(g, reach) {
        return false;
    }
    let mut users: BTreeMap<NodeId, Vec<(NodeId, usize)>> = BTreeMap::new();
    for &n in reach {
        for (pos, &s) in g.node(n).src.iter().enumerate() {
            users.entry(s).or_default().push((n, pos));
        }
    }
    let mut p = Proof {
        g,
        r,
        ranges: Ranges::default(),
        vr: VRanges::new(g),
    };
    regs.iter()
        .all(|&(acc, size)| p.register(reach, &users, acc, size))
}

/// Every RANGE in `reach` but `r` is closed by exactly one END or REDUCE of `reach`, and `r`
/// by none.
fn closed_once(g: &Graph, reach: &[NodeId], r: NodeId) -> bool {
    let mut closers: BTreeMap<NodeId, usize> = BTreeMap::new();
    for &n in reach {
        let node = g.node(n);
        if matches!(node.op, Op::END | Op::REDUCE) {
            for &s in node.src.iter().skip(1) {
                *closers.entry(s).or_default() += 1;
            }
        }
    }
    reach
        .iter()
        .filter(|&&n| g.node(n).op == Op::RANGE)
        .all(|&n| closers.get(&n).copied().unwrap_or(0) == usize::from(n != r))
}

/// Whether a register is read or written inside the operand of a REDUCE that
/// `expand_reduce` will not lower as one sequential loop over its own ranges (split, chunks,
/// tree: those substitute new ranges into the operand, or copy it per leaf, so the one-END
/// premise would not hold after them).
fn regs_in_reordered_reduce(g: &Graph, reach: &[NodeId]) -> bool {
    reach.iter().any(|&n| {
        let node = g.node(n);
        let reordered = match &node.arg {
            Arg::Reduce { order, .. } => !matches!(
                order,
                ReduceOrder::Sequential | ReduceOrder::Split(0 | 1) | ReduceOrder::Chunks(0 | 1)
            ),
            _ => false,
        };
        node.op == Op::REDUCE
            && reordered
            && node.src.first().is_some_and(|&x| {
                g.reachable(&[x])
                    .iter()
                    .any(|&m| g.node(m).op == Op::BUFFER)
            })
    })
}

struct Proof<'g> {
    g: &'g Graph,
    r: NodeId,
    ranges: Ranges,
    vr: VRanges<'g>,
}

impl Proof<'_> {
    fn ranges_of(&mut self, n: NodeId) -> BTreeSet<NodeId> {
        self.ranges.of(self.g, n).clone()
    }

    /// Steps 2 and 3 of the module docs for one register.
    fn register(
        &mut self,
        reach: &[NodeId],
        users: &BTreeMap<NodeId, Vec<(NodeId, usize)>>,
        acc: NodeId,
        size: usize,
    ) -> bool {
        let g = self.g;
        // The AFTER chains over acc (sources precede users: one pass in reach's order).
        let mut chain = BTreeSet::from([acc]);
        for &n in reach {
            let node = g.node(n);
            if node.op == Op::AFTER && node.src.first().is_some_and(|s| chain.contains(s)) {
                chain.insert(n);
            }
        }
        let mut index = BTreeSet::new();
        for &c in &chain {
            for &(u, pos) in users.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
                match (g.node(u).op, pos) {
                    (Op::AFTER, _) => {}
                    (Op::INDEX, 0) if g.node(u).src.len() == 2 => {
                        index.insert(u);
                    }
                    _ => return false,
                }
            }
        }
        let mut loads = vec![];
        for &i in &index {
            if !self.ranges_of(i).contains(&self.r) {
                return false;
            }
            for &(u, pos) in users.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
                match (g.node(u).op, pos) {
                    (Op::LOAD, 0) => loads.push(i),
                    (Op::STORE, 0) => {}
                    _ => return false,
                }
            }
        }
        let reg = Reg {
            index: &index,
            size,
        };
        loads.iter().all(|&i| self.covered(&reg, i))
    }

    /// Whether the elements a LOAD through INDEX `i` may read are all written before it in
    /// its own iteration of r (step 3).
    fn covered(&mut self, reg: &Reg, i: NodeId) -> bool {
        let g = self.g;
        let (Some(&addr), Some(&idx)) = (g.node(i).src.first(), g.node(i).src.get(1)) else {
            return false;
        };
        let Some(want) = self.vr.get(idx) else {
            return false;
        };
        let Ok(n) = i128::try_from(reg.size) else {
            return false;
        };
        if want.min < 0 || want.max >= n {
            return false;
        }
        let at_load = self.ranges_of(i);
        // Candidate initializers, cheapest first (so the common row reset is tried before
        // the fold that also writes every element).
        let mut cands: Vec<(u64, NodeId)> = vec![];
        for e in g.reachable(&[addr]) {
            if !matches!(g.node(e).op, Op::STORE | Op::END | Op::GROUP) {
                continue;
            }
            let re = self.ranges_of(e);
            if re.contains(&self.r) && re.is_subset(&at_load) {
                cands.push((trips(g, e).unwrap_or(u64::MAX), e));
            }
        }
        cands.sort();
        let mut written = BTreeSet::new();
        for (cost, e) in cands {
            if cost > MAX_COVER_STEPS {
                break;
            }
            let top = self.ranges_of(e);
            let mut env = BTreeMap::new();
            let mut steps = MAX_COVER_STEPS;
            let mut w = BTreeSet::new();
            if self.writes(reg, e, &top, &mut env, &mut steps, &mut w) {
                written.extend(w);
            }
            if (want.min..=want.max).all(|v| written.contains(&v)) {
                return true;
            }
        }
        false
    }

    /// Adds to `out` the register elements effect `e` writes every time it runs, with the
    /// ranges in `env` (closed by ENDs inside the initializer) at their values; `top` is
    /// the initializer's ranges. False when the step budget runs out.
    fn writes(
        &mut self,
        reg: &Reg,
        e: NodeId,
        top: &BTreeSet<NodeId>,
        env: &mut BTreeMap<NodeId, i128>,
        steps: &mut u64,
        out: &mut BTreeSet<i128>,
    ) -> bool {
        let g = self.g;
        let node = g.node(e);
        match node.op {
            Op::STORE => {
                if *steps == 0 {
                    return false;
                }
                *steps -= 1;
                let [at, _] = node.src[..] else {
                    return true; // gated: not every time
                };
                if !reg.index.contains(&at) {
                    return true; // another buffer
                }
                let mut exact: BTreeSet<NodeId> = top.clone();
                exact.extend(env.keys().copied());
                if self.ranges_of(e) != exact {
                    return true;
                }
                if let Some(v) = g.node(at).src.get(1).and_then(|&x| eval(g, x, env)) {
                    if (0..reg.size as i128).contains(&v) {
                        out.insert(v);
                    }
                }
                true
            }
            Op::GROUP => node
                .src
                .iter()
                .all(|&s| self.writes(reg, s, top, env, steps, out)),
            Op::END => {
                let Some((&body, rs)) = node.src.split_first() else {
                    return true;
                };
                let mut ends = vec![];
                for &rr in rs {
                    let rn = g.node(rr);
                    match (rn.op, rn.src.first().and_then(|&x| const_int(g, x))) {
                        (Op::RANGE, Some(e)) if !env.contains_key(&rr) => ends.push((rr, e)),
                        _ => return true,
                    }
                }
                self.each(reg, body, top, &ends, env, steps, out)
            }
            _ => true,
        }
    }

    /// `writes` of `body` for every value of the ranges `ends` (range, extent).
    #[allow(clippy::too_many_arguments)]
    fn each(
        &mut self,
        reg: &Reg,
        body: NodeId,
        top: &BTreeSet<NodeId>,
        ends: &[(NodeId, i128)],
        env: &mut BTreeMap<NodeId, i128>,
        steps: &mut u64,
        out: &mut BTreeSet<i128>,
    ) -> bool {
        let Some((&(rr, extent), rest)) = ends.split_first() else {
            return self.writes(reg, body, top, env, steps, out);
        };
        for v in 0..extent.max(0) {
            env.insert(rr, v);
            let ok = self.each(reg, body, top, rest, env, steps, out);
            env.remove(&rr);
            if !ok {
                return false;
            }
        }
        true
    }
}

/// One register: the INDEX nodes into it, and its size.
struct Reg<'a> {
    index: &'a BTreeSet<NodeId>,
    size: usize,
}

/// How many STORE instances the END chain `e` runs (1 for a STORE or GROUP; None when an
/// extent is not a constant or the product overflows).
fn trips(g: &Graph, e: NodeId) -> Option<u64> {
    let node = g.node(e);
    if node.op != Op::END {
        return Some(1);
    }
    let inner = trips(g, *node.src.first()?)?;
    node.src.iter().skip(1).try_fold(inner, |a, &rr| {
        let ext = const_int(g, *g.node(rr).src.first()?)?;
        a.checked_mul(u64::try_from(ext.max(0)).ok()?)
    })
}

/// The exact value of the int64 expression `x` (constants, the ranges in `env`, ADD, SUB,
/// MUL); None for anything else or a value outside int64 (the kernel would wrap).
fn eval(g: &Graph, x: NodeId, env: &BTreeMap<NodeId, i128>) -> Option<i128> {
    if let Some(&v) = env.get(&x) {
        return Some(v);
    }
    let n = g.node(x);
    if n.dtype != DType::Int64 {
        return None;
    }
    let v = match (n.op, &n.src[..]) {
        (Op::CONST, _) => const_int(g, x)?,
        (Op::ADD, &[a, b]) => eval(g, a, env)?.checked_add(eval(g, b, env)?)?,
        (Op::SUB, &[a, b]) => eval(g, a, env)?.checked_sub(eval(g, b, env)?)?,
        (Op::MUL, &[a, b]) => eval(g, a, env)?.checked_mul(eval(g, b, env)?)?,
        _ => return None,
    };
    (i128::from(i64::MIN)..=i128::from(i64::MAX))
        .contains(&v)
        .then_some(v)
}

#[cfg(test)]
mod tests {
    use super::super::disjoint;
    use super::*;
    use crate::kgraph::{add, alu, i64c, konst};

    /// How the test kernel resets its register.
    #[derive(Clone, Copy)]
    enum Init {
        /// `for j1 < extent: acc[j1] = 0`, after r when `per_iter`.
        Loop { extent: i128, per_iter: bool },
        /// `acc[c] = 0` for each constant c (a GROUP of STOREs), after r.
        Consts(&'static [i128]),
        /// The loop of `Loop { extent: 4, per_iter: true }`, its STORE gated.
        Gated,
        /// No reset at all.
        Nothing,
    }

    fn reg_index(g: &mut Graph, acc: NodeId, deps: &[NodeId], at: NodeId) -> NodeId {
        let buf = if deps.is_empty() {
            acc
        } else {
            let mut s = vec![acc];
            s.extend_from_slice(deps);
            alu(g, Op::AFTER, DType::Float32, s)
        };
        alu(g, Op::INDEX, DType::Float32, vec![buf, at])
    }

    /// `out` and `x` (float32 params 0 and 1) and the loop r < 8 the tests split.
    fn out_x_and_r(g: &mut Graph) -> (NodeId, NodeId, NodeId) {
        let f32t = DType::Float32;
        let out = add(g, Op::PARAM, f32t, vec![], KArg::Param(0), 0);
        let x = add(g, Op::PARAM, f32t, vec![], KArg::Param(1), 0);
        (out, x, range(g, 8, 0))
    }

    /// An ungated STORE of `v` at `at`.
    fn store(g: &mut Graph, at: NodeId, v: NodeId) -> NodeId {
        add(g, Op::STORE, DType::Void, vec![at, v], KArg::None, 0)
    }

    fn range(g: &mut Graph, extent: i128, axis: u32) -> NodeId {
        let e = i64c(g, extent);
        add(g, Op::RANGE, DType::Int64, vec![e], KArg::Axis(axis), 0)
    }

    /// The interchanged-matmul shape: for r < 8 { reset acc (Reg(4)); for k < 3, j2 < 4:
    /// acc[j2] += x[3r + k]; for j3 < 4: out[4r + j3] = acc[j3] }. Returns (graph, body, r).
    fn row_kernel(init: Init) -> (Graph, NodeId, NodeId) {
        let mut g = Graph::default();
        let g = &mut g;
        let f32t = DType::Float32;
        let out = add(g, Op::PARAM, f32t, vec![], KArg::Param(0), 0);
        let x = add(g, Op::PARAM, f32t, vec![], KArg::Param(1), 0);
        let r = range(g, 8, 0);
        let acc = add(g, Op::BUFFER, f32t, vec![], KArg::Reg(4), 7);
        let zero = konst(g, f32t, 0);
        let reset = match init {
            Init::Loop { extent, per_iter } => {
                let j1 = range(g, extent, 1);
                let deps = if per_iter { vec![r] } else { vec![] };
                let at = reg_index(g, acc, &deps, j1);
                let st = add(g, Op::STORE, DType::Void, vec![at, zero], KArg::None, 0);
                Some(add(g, Op::END, DType::Void, vec![st, j1], KArg::None, 0))
            }
            Init::Gated => {
                let j1 = range(g, 4, 1);
                let at = reg_index(g, acc, &[r], j1);
                let t = konst(g, DType::Bool, 1);
                let st = add(g, Op::STORE, DType::Void, vec![at, zero, t], KArg::None, 0);
                Some(add(g, Op::END, DType::Void, vec![st, j1], KArg::None, 0))
            }
            Init::Consts(cs) => {
                let stores: Vec<NodeId> = cs
                    .iter()
                    .map(|&c| {
                        let ci = i64c(g, c);
                        let at = reg_index(g, acc, &[r], ci);
                        add(g, Op::STORE, DType::Void, vec![at, zero], KArg::None, 0)
                    })
                    .collect();
                Some(alu(g, Op::GROUP, DType::Void, stores))
            }
            Init::Nothing => None,
        };
        let k = range(g, 3, 2);
        let j2 = range(g, 4, 3);
        let mut deps: Vec<NodeId> = reset.into_iter().collect();
        deps.extend([r, k, j2]);
        let cur = reg_index(g, acc, &deps, j2);
        let old = alu(g, Op::LOAD, f32t, vec![cur]);
        let three = i64c(g, 3);
        let r3 = alu(g, Op::MUL, DType::Int64, vec![r, three]);
        let xi = alu(g, Op::ADD, DType::Int64, vec![r3, k]);
        let xat = alu(g, Op::INDEX, f32t, vec![x, xi]);
        let xv = alu(g, Op::LOAD, f32t, vec![xat]);
        let sum = alu(g, Op::ADD, f32t, vec![old, xv]);
        let upd = add(g, Op::STORE, DType::Void, vec![cur, sum], KArg::None, 0);
        let e = add(g, Op::END, DType::Void, vec![upd, j2], KArg::None, 0);
        let e = add(g, Op::END, DType::Void, vec![e, k], KArg::None, 0);
        let j3 = range(g, 4, 4);
        let done = reg_index(g, acc, &[e], j3);
        let v = alu(g, Op::LOAD, f32t, vec![done]);
        let four = i64c(g, 4);
        let r4 = alu(g, Op::MUL, DType::Int64, vec![r, four]);
        let oi = alu(g, Op::ADD, DType::Int64, vec![r4, j3]);
        let oat = alu(g, Op::INDEX, f32t, vec![out, oi]);
        let st = add(g, Op::STORE, DType::Void, vec![oat, v], KArg::None, 0);
        let body = add(g, Op::END, DType::Void, vec![st, j3], KArg::None, 0);
        (g.clone(), body, r)
    }

    fn threaded(init: Init) -> bool {
        let (g, body, r) = row_kernel(init);
        disjoint(&g, body, r, 8)
    }

    #[test]
    fn a_register_reset_in_every_iteration_is_private() {
        assert!(threaded(Init::Loop {
            extent: 4,
            per_iter: true
        }));
        assert!(
            threaded(Init::Consts(&[3, 0, 2, 1])),
            "four constant stores cover the row"
        );
    }

    #[test]
    fn a_register_an_iteration_does_not_fully_reset_is_refused() {
        assert!(
            !threaded(Init::Loop {
                extent: 4,
                per_iter: false
            }),
            "a reset that does not depend on r runs once, before the loop"
        );
        assert!(
            !threaded(Init::Loop {
                extent: 3,
                per_iter: true
            }),
            "acc[3] carries from one iteration to the next"
        );
        assert!(!threaded(Init::Consts(&[0, 1, 3])), "acc[2] is never reset");
        assert!(!threaded(Init::Gated), "a gated reset may not run");
        assert!(!threaded(Init::Nothing), "read before it is written");
    }

    /// Step 1: the proof's premise that every loop of the body but r is closed exactly once
    /// (so the linearizer places each node by its ranges alone) is checked, not assumed.
    #[test]
    fn a_loop_left_open_or_r_closed_inside_the_body_is_refused() {
        let (g, body, r) = row_kernel(Init::Loop {
            extent: 4,
            per_iter: true,
        });
        assert!(disjoint(&g, body, r, 8));
        let store = g.node(body).src[0];
        assert!(
            !disjoint(&g, store, r, 8),
            "the last loop (j3) has no END in the body"
        );
        let mut g2 = g.clone();
        let closed = add(&mut g2, Op::END, DType::Void, vec![body, r], KArg::None, 0);
        assert!(
            !disjoint(&g2, closed, r, 8),
            "r is closed inside its own body"
        );
    }

    /// for r < 8 { out[r] = acc[0]; acc[0] = x[r] }: iteration r + 1 reads what r wrote.
    #[test]
    fn a_register_written_in_one_iteration_and_read_in_the_next_is_refused() {
        let mut g = Graph::default();
        let f32t = DType::Float32;
        let (out, x, r) = out_x_and_r(&mut g);
        let acc = add(&mut g, Op::BUFFER, f32t, vec![], KArg::Reg(1), 7);
        let z = i64c(&mut g, 0);
        let rd_at = reg_index(&mut g, acc, &[r], z);
        let rd = alu(&mut g, Op::LOAD, f32t, vec![rd_at]);
        let oat = alu(&mut g, Op::INDEX, f32t, vec![out, r]);
        let st_out = store(&mut g, oat, rd);
        let xat = alu(&mut g, Op::INDEX, f32t, vec![x, r]);
        let xv = alu(&mut g, Op::LOAD, f32t, vec![xat]);
        let wr_at = reg_index(&mut g, acc, &[st_out], z);
        let st_acc = store(&mut g, wr_at, xv);
        let body = alu(&mut g, Op::GROUP, DType::Void, vec![st_out, st_acc]);
        assert!(!disjoint(&g, body, r, 8));
        // The same with the write first (acc[0] = x[r]; out[r] = acc[0]) is private.
        assert!(write_then_read(1));
    }

    /// for r < 8 { if r < 1 { acc[0] = 1 }; for m < `extent` { acc[0] = x[r] }; out[r] = acc[0] }.
    fn write_in_a_loop_then_read_after_it(extent: i128) -> bool {
        let mut g = Graph::default();
        let f32t = DType::Float32;
        let (out, x, r) = out_x_and_r(&mut g);
        let acc = add(&mut g, Op::BUFFER, f32t, vec![], KArg::Reg(1), 7);
        let z = i64c(&mut g, 0);
        let one = konst(&mut g, f32t, 1f32.to_bits() as u64);
        let first = {
            let one_i = i64c(&mut g, 1);
            let lt = alu(&mut g, Op::CMPLT, DType::Bool, vec![r, one_i]);
            let at = reg_index(&mut g, acc, &[r], z);
            add(
                &mut g,
                Op::STORE,
                DType::Void,
                vec![at, one, lt],
                KArg::None,
                0,
            )
        };
        let m = range(&mut g, extent, 1);
        let xat = alu(&mut g, Op::INDEX, f32t, vec![x, r]);
        let xv = alu(&mut g, Op::LOAD, f32t, vec![xat]);
        let wr_at = reg_index(&mut g, acc, &[first, r, m], z);
        let st = store(&mut g, wr_at, xv);
        let looped = add(&mut g, Op::END, DType::Void, vec![st, m], KArg::None, 0);
        let rd_at = reg_index(&mut g, acc, &[looped], z);
        let rd = alu(&mut g, Op::LOAD, f32t, vec![rd_at]);
        let oat = alu(&mut g, Op::INDEX, f32t, vec![out, r]);
        let body = store(&mut g, oat, rd);
        disjoint(&g, body, r, 8)
    }

    /// A store inside a loop the read is not in writes the register only if that loop runs:
    /// with no trips, iterations 1 … 7 read the 1 iteration 0's gated store left.
    #[test]
    fn a_write_inside_a_loop_of_no_trips_does_not_initialize() {
        assert!(write_in_a_loop_then_read_after_it(3));
        assert!(
            !write_in_a_loop_then_read_after_it(0),
            "the loop around the only ungated write runs zero times"
        );
    }

    /// for r < 8 { acc[0] = x[r]; out[r] = acc[0] } with acc a Reg(`size`).
    fn write_then_read(size: usize) -> bool {
        let mut g = Graph::default();
        let f32t = DType::Float32;
        let (out, x, r) = out_x_and_r(&mut g);
        let acc = add(&mut g, Op::BUFFER, f32t, vec![], KArg::Reg(size), 7);
        let z = i64c(&mut g, 0);
        let xat = alu(&mut g, Op::INDEX, f32t, vec![x, r]);
        let xv = alu(&mut g, Op::LOAD, f32t, vec![xat]);
        let wr_at = reg_index(&mut g, acc, &[r], z);
        let st_acc = store(&mut g, wr_at, xv);
        let rd_at = reg_index(&mut g, acc, &[st_acc], z);
        let rd = alu(&mut g, Op::LOAD, f32t, vec![rd_at]);
        let oat = alu(&mut g, Op::INDEX, f32t, vec![out, r]);
        let body = store(&mut g, oat, rd);
        disjoint(&g, body, r, 8)
    }

    /// for r < 8: out[r] = REDUCE over q < 4 of { acc[0] = x[4r + q]; acc[0] } in `order`.
    fn reg_in_reduce(order: ReduceOrder) -> bool {
        let mut g = Graph::default();
        let f32t = DType::Float32;
        let (out, x, r) = out_x_and_r(&mut g);
        let q = range(&mut g, 4, 1);
        let acc = add(&mut g, Op::BUFFER, f32t, vec![], KArg::Reg(1), 7);
        let z = i64c(&mut g, 0);
        let four = i64c(&mut g, 4);
        let r4 = alu(&mut g, Op::MUL, DType::Int64, vec![r, four]);
        let xi = alu(&mut g, Op::ADD, DType::Int64, vec![r4, q]);
        let xat = alu(&mut g, Op::INDEX, f32t, vec![x, xi]);
        let xv = alu(&mut g, Op::LOAD, f32t, vec![xat]);
        let wr_at = reg_index(&mut g, acc, &[r, q], z);
        let st = store(&mut g, wr_at, xv);
        let rd_at = reg_index(&mut g, acc, &[st], z);
        let rd = alu(&mut g, Op::LOAD, f32t, vec![rd_at]);
        let red = crate::kgraph::reduce(&mut g, Op::ADD, f32t, rd, &[q], order);
        let oat = alu(&mut g, Op::INDEX, f32t, vec![out, r]);
        let body = store(&mut g, oat, red);
        disjoint(&g, body, r, 8)
    }

    #[test]
    fn registers_inside_a_reordered_reduction_are_refused() {
        assert!(reg_in_reduce(ReduceOrder::Sequential));
        assert!(
            !reg_in_reduce(ReduceOrder::Tree(2)),
            "expand_reduce copies a tree's operand per leaf"
        );
        assert!(!reg_in_reduce(ReduceOrder::Split(2)));
    }

    #[test]
    fn register_budget_and_index_bounds() {
        // A read whose index may leave the register is refused.
        let mut g = Graph::default();
        let f32t = DType::Float32;
        let out = add(&mut g, Op::PARAM, f32t, vec![], KArg::Param(0), 0);
        let r = range(&mut g, 8, 0);
        let acc = add(&mut g, Op::BUFFER, f32t, vec![], KArg::Reg(1), 7);
        let z = i64c(&mut g, 0);
        let one = konst(&mut g, f32t, 1f32.to_bits() as u64);
        let wr_at = reg_index(&mut g, acc, &[r], z);
        let st_acc = store(&mut g, wr_at, one);
        let two = i64c(&mut g, 2);
        let far = alu(&mut g, Op::CMOD, DType::Int64, vec![r, two]);
        let rd_at = reg_index(&mut g, acc, &[st_acc], far);
        let rd = alu(&mut g, Op::LOAD, f32t, vec![rd_at]);
        let oat = alu(&mut g, Op::INDEX, f32t, vec![out, r]);
        let body = store(&mut g, oat, rd);
        assert!(!disjoint(&g, body, r, 8), "acc[r mod 2] of a Reg(1)");
        // Registers beyond the stack budget of a spawned thread stay on one thread.
        assert!(write_then_read(MAX_REG_BYTES / 4));
        assert!(!write_then_read(MAX_REG_BYTES / 4 + 1));
    }
}
