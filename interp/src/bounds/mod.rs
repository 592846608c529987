//! Oracle-derived error bounds: a second pass over an oracle evaluation that gives every element
//! of every node a [`Bound`] — the set of values a backend may legally produce there, given what
//! the backend is allowed to deviate in ([`Tolerances`]: reassociating reductions and allreduce,
//! flushing subnormals, contracting multiply-add, a ULP budget per op and dtype).
//!
//! * [`Bound::Exact`] — no allowance applies: the backend must give the oracle's bits.
//! * [`Bound::Range`] — an interval of reals ([`Iv`]); a non-NaN backend value inside passes
//!   (compared as numbers, so ±0 are equal).
//! * [`Bound::Unbounded`] — an allowance applies but no sound interval could be derived (a NaN
//!   may arise, a partial result may overflow, a comparison may flip, …): the comparison falls
//!   back to exact, and the report says why.
//!
//! **Soundness.** Each bound contains every value a legal execution can produce at that element,
//! assuming the sources' elements lie in their own bounds. The reasons, op by op, are in
//! `docs/comparison.md`; in short: rounding to nearest is monotone, so monotone ops map intervals
//! to intervals through their endpoints ([`interval`]); a reassociated sum of n terms is within
//! γ(n−1)·Σ|xᵢ| of the exact sum of its (actual) inputs for **any** summation tree (Higham,
//! *Accuracy and Stability of Numerical Algorithms*, §4.2; addition's standard model holds in the
//! subnormal range because subnormal sums are exact), with γ(k) = k·u/(1 − k·u); a reassociated
//! product is within γ(n−1)·|Π xᵢ| when no partial product can underflow or overflow; the bound
//! arithmetic itself is done in f64 rounded outward.

pub mod interval;
pub use crate::eval::order;
pub mod ulp;

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::eval::storage::{Version, Versions};
use crate::eval::{movement, reduce_identity, Data, Elem, Evaluation, Value};
use crate::ir::table::RangeRule;
use crate::ir::{Arg, DType, DeviceSpec, Graph, NodeId, Op};
use crate::scalar::round::to_f64;
use crate::verify::{movement_shape, storage_view, Verified};

pub use interval::{Iv, Why};
pub use order::{reduce_with_order, ReduceOrder};

/// What a backend may deviate in, as the bound pass needs it (the conformance kit builds this
/// from a backend's allowance manifest). The default is strict: no deviation at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tolerances {
    /// REDUCE ADD/MUL/MAX over floats may be evaluated in any order (any bracketing and
    /// permutation of the terms).
    pub reassociate_reductions: bool,
    /// ALLREDUCE may combine the devices' components in any order (per device).
    pub reassociate_allreduce: bool,
    /// Float dtypes whose subnormal operands and results may be flushed to ±0.
    pub flush_subnormals: BTreeSet<DType>,
    /// A float MUL whose result feeds an addition may be fused with it (one rounding).
    pub contract_mul_add: bool,
    /// ULP budget per (op, operand dtype): the result may be this many steps from the oracle's
    /// on the dtype's line (see [`ulp`]).
    pub ulp: BTreeMap<(Op, DType), u64>,
}

impl Tolerances {
    pub fn strict() -> Self {
        Self::default()
    }

    pub fn is_strict(&self) -> bool {
        !self.reassociate_reductions
            && !self.reassociate_allreduce
            && self.flush_subnormals.is_empty()
            && !self.contract_mul_add
            && self.ulp.values().all(|&n| n == 0)
    }

    pub fn ulp_budget(&self, op: Op, dt: DType) -> u64 {
        self.ulp.get(&(op, dt)).copied().unwrap_or(0)
    }

    pub fn flushes(&self, dt: DType) -> bool {
        self.flush_subnormals.contains(&dt)
    }
}

/// The legal values of one element.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Bound {
    /// Bit-identical to the oracle.
    Exact,
    /// Any non-NaN value in the interval (compared as numbers).
    Range(Iv),
    /// An allowance applies but no sound interval is known: compared exactly.
    Unbounded(Why),
}

impl Bound {
    pub fn is_exact(&self) -> bool {
        matches!(self, Bound::Exact)
    }
}

/// The bounds of one node's value: one list per device component (row-major, like the value),
/// and the allowances that widened them (here or upstream), in words.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeBounds {
    pub comps: Vec<Vec<Bound>>,
    pub notes: BTreeSet<String>,
}

impl NodeBounds {
    /// Whether every element must match the oracle exactly.
    pub fn all_exact(&self) -> bool {
        self.comps.iter().flatten().all(Bound::is_exact)
    }
}

/// The bounds of every node the roots depend on.
#[derive(Clone, Debug, Default)]
pub struct Bounds {
    nodes: Vec<Option<NodeBounds>>,
}

impl Bounds {
    pub fn get(&self, id: NodeId) -> Option<&NodeBounds> {
        self.nodes.get(id.index()).and_then(|n| n.as_ref())
    }
}

/// Computes the bounds of every node `roots` depend on, from the oracle's evaluation of the same
/// graph (which must have evaluated at least these roots).
pub fn analyze(
    g: &Graph,
    ver: &Verified,
    ev: &Evaluation,
    roots: &[NodeId],
    tol: &Tolerances,
) -> Result<Bounds> {
    let mut p = Pass {
        g,
        ver,
        ev,
        tol,
        nodes: vec![None; g.len()],
        versions: Versions::default(),
        states: BTreeMap::new(),
        arena: vec![Bound::Exact],
        store_notes: BTreeMap::new(),
    };
    for id in g.reachable(roots) {
        p.node(id)?;
    }
    Ok(Bounds { nodes: p.nodes })
}

/// Which allowances widened a node's bounds (turned into notes once per node).
#[derive(Default)]
struct Contrib {
    reassoc: bool,
    ulp: bool,
    ftz: bool,
    contract: bool,
}

struct Pass<'a> {
    g: &'a Graph,
    ver: &'a Verified,
    ev: &'a Evaluation,
    tol: &'a Tolerances,
    nodes: Vec<Option<NodeBounds>>,
    versions: Versions,
    /// As in the evaluator: the version each storage root reads and its movement chain. Version
    /// elements are handles (`Elem::Bits(k)`) into `arena`.
    states: BTreeMap<NodeId, (Version, Vec<NodeId>)>,
    arena: Vec<Bound>,
    /// Notes of every value stored into a buffer.
    store_notes: BTreeMap<NodeId, BTreeSet<String>>,
}

type Comps = Vec<Vec<Bound>>;

impl Pass<'_> {
    fn err(&self, id: NodeId, reason: impl Into<String>) -> Error {
        Error::Eval {
            node: id,
            op: self.g.node(id).op,
            reason: format!("bounds: {}", reason.into()),
        }
    }

    fn value(&self, id: NodeId) -> Result<&Value> {
        self.ev
            .value(id)
            .ok_or_else(|| self.err(id, "the oracle has no value for this node"))
    }

    fn bounds(&self, id: NodeId) -> Result<&NodeBounds> {
        self.nodes[id.index()]
            .as_ref()
            .ok_or_else(|| self.err(id, "bounds needed before they were computed"))
    }

    fn node(&mut self, id: NodeId) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let mut notes: BTreeSet<String> = BTreeSet::new();
        for &s in &n.src {
            if let Some(b) = self.nodes[s.index()].as_ref() {
                notes.extend(b.notes.iter().cloned());
            }
        }
        let mut c = Contrib::default();
        let comps: Option<Comps> = match n.op {
            Op::BUFFER => {
                let v = self.value(id)?;
                let comps: Vec<Vec<Elem>> = v
                    .data
                    .components()
                    .iter()
                    .map(|c| vec![Elem::Bits(0); c.len()])
                    .collect();
                let state = Version {
                    buffer: id,
                    made_by: None,
                    comps: Rc::new(comps),
                };
                let b = self.view_of(&state, &[]);
                self.states.insert(id, (state, vec![]));
                Some(b)
            }
            Op::CONST => Some(vec![vec![Bound::Exact]]),
            Op::STORE => {
                self.store(id, &mut notes)?;
                None
            }
            Op::AFTER => match storage_view(g, n.src[0]) {
                Some((root, chain)) => {
                    let (base, inner) = self
                        .states
                        .get(&root)
                        .cloned()
                        .ok_or_else(|| self.err(root, "storage not evaluated"))?;
                    let state = self.versions.after(g, id, base, &n.src[1..])?;
                    let chain: Vec<NodeId> = inner.into_iter().chain(chain).collect();
                    let b = self.view_of(&state, &chain);
                    if let Some(sn) = self.store_notes.get(&state.buffer) {
                        notes.extend(sn.iter().cloned());
                    }
                    self.states.insert(id, (state, chain));
                    Some(b)
                }
                None => Some(self.bounds(n.src[0])?.comps.clone()),
            },
            Op::SINK | Op::GROUP => None,
            Op::PARAM | Op::CALL => {
                return Err(self.err(id, "inline CALLs before computing bounds"))
            }
            Op::CONTIGUOUS | Op::DETACH => Some(self.bounds(n.src[0])?.comps.clone()),
            Op::COPY => {
                let x = self.bounds(n.src[0])?.comps.clone();
                let single = matches!(self.value(n.src[0])?.data, Data::Single(_));
                Some(match (&n.arg, single) {
                    (Arg::Device(DeviceSpec::Multi(ds)), true) => vec![x[0].clone(); ds.len()],
                    _ => x,
                })
            }
            Op::MSELECT => {
                let Arg::Index(i) = n.arg else {
                    return Err(self.err(id, "MSELECT without an index"));
                };
                Some(vec![self.bounds(n.src[0])?.comps[i].clone()])
            }
            Op::MSTACK => Some(
                n.src
                    .iter()
                    .map(|&s| Ok(self.bounds(s)?.comps[0].clone()))
                    .collect::<Result<Vec<_>>>()?,
            ),
            Op::UNSHARD => {
                let Arg::Axis(axis) = n.arg else {
                    return Err(self.err(id, "UNSHARD without an axis"));
                };
                let shape = &self.value(n.src[0])?.shape;
                Some(vec![crate::eval::concat(
                    shape,
                    axis,
                    &self.bounds(n.src[0])?.comps,
                )])
            }
            Op::ALLREDUCE => {
                let Arg::AllReduce { op, .. } = n.arg else {
                    return Err(self.err(id, "ALLREDUCE without an op"));
                };
                Some(self.allreduce(id, op, &mut c)?)
            }
            op if op.is_movement() => {
                let shape = self.value(n.src[0])?.shape.clone();
                let x = &self.bounds(n.src[0])?.comps;
                Some(
                    x.iter()
                        .map(|comp| movement::apply(n.op, &n.arg, &shape, comp, &Bound::Exact))
                        .collect(),
                )
            }
            Op::REDUCE => {
                let Arg::Reduce { op, axes, .. } = n.arg else {
                    return Err(self.err(id, "REDUCE without an op"));
                };
                Some(self.reduce(id, op, axes, &mut c)?)
            }
            Op::CAST | Op::BITCAST => Some(self.cast(id)?),
            op if op.is_alu() => Some(self.alu(id, &mut c)?),
            op => return Err(self.err(id, format!("{op} has no bounds in a tensor graph"))),
        };
        if let Some(comps) = &comps {
            self.check_shape(id, comps)?;
            self.add_notes(id, &c, comps, &mut notes);
        }
        self.nodes[id.index()] = comps.map(|comps| NodeBounds { comps, notes });
        Ok(())
    }

    /// The bounds must have exactly the oracle value's structure.
    fn check_shape(&self, id: NodeId, comps: &Comps) -> Result<()> {
        let v = self.value(id)?;
        let oc = v.data.components();
        if oc.len() != comps.len() || oc.iter().zip(comps).any(|(a, b)| a.len() != b.len()) {
            return Err(self.err(
                id,
                format!(
                    "bound structure {:?} differs from the oracle value's {:?}",
                    comps.iter().map(Vec::len).collect::<Vec<_>>(),
                    oc.iter().map(Vec::len).collect::<Vec<_>>()
                ),
            ));
        }
        Ok(())
    }

    fn add_notes(&self, id: NodeId, c: &Contrib, comps: &Comps, notes: &mut BTreeSet<String>) {
        if comps.iter().flatten().all(Bound::is_exact) && !c.reassoc {
            return;
        }
        let n = self.g.node(id);
        let info = self.ver.info(id);
        let operand_dt = n
            .src
            .last()
            .map(|&s| self.ver.info(s).dtype)
            .unwrap_or(info.dtype);
        if c.reassoc {
            match (n.op, &n.arg) {
                (Op::REDUCE, Arg::Reduce { op, axes, .. }) => {
                    let terms: usize = self
                        .ev
                        .value(n.src[0])
                        .map_or(0, |v| v.shape[..*axes].iter().product());
                    notes.insert(format!(
                        "reassociate_reductions: REDUCE {op} of {terms} {} terms",
                        info.dtype
                    ));
                }
                (Op::ALLREDUCE, Arg::AllReduce { op, devices }) => {
                    notes.insert(format!(
                        "reassociate_allreduce: ALLREDUCE {op} over {} devices ({})",
                        devices.len(),
                        info.dtype
                    ));
                }
                _ => {}
            }
        }
        if c.ulp {
            let budget = self.tol.ulp_budget(n.op, operand_dt);
            notes.insert(format!("ulp: {} {operand_dt} within {budget} ulp", n.op));
        }
        if c.ftz {
            notes.insert(format!("flush_subnormals: {operand_dt}"));
        }
        if c.contract {
            notes.insert(format!(
                "contract_mul_add: MUL {operand_dt} may be fused into an add"
            ));
        }
    }

    // ---- storage (mirrors the evaluator, with bound handles as elements) ----

    fn handle(&mut self, b: Bound) -> Elem {
        if b.is_exact() {
            return Elem::Bits(0);
        }
        self.arena.push(b);
        Elem::Bits((self.arena.len() - 1) as u64)
    }

    fn resolve(&self, e: &Elem) -> Bound {
        match e {
            Elem::Bits(h) => self.arena.get(*h as usize).copied().unwrap_or(Bound::Exact),
            Elem::Uninit { .. } => Bound::Exact,
        }
    }

    fn view_of(&self, state: &Version, chain: &[NodeId]) -> Comps {
        let buf = self.ver.info(state.buffer);
        let raw: &[Vec<Elem>] = match buf.device {
            Some(DeviceSpec::Multi(_)) => &state.comps[..],
            _ => &state.comps[..1],
        };
        let mut comps: Comps = raw
            .iter()
            .map(|c| c.iter().map(|e| self.resolve(e)).collect())
            .collect();
        let mut shape = vec![state.comps[0].len()];
        for &m in chain {
            let mn = self.g.node(m);
            comps = comps
                .iter()
                .map(|c| movement::apply(mn.op, &mn.arg, &shape, c, &Bound::Exact))
                .collect();
            shape = movement_shape(mn.op, &mn.arg, &shape).unwrap_or_default();
        }
        comps
    }

    fn store(&mut self, id: NodeId, notes: &mut BTreeSet<String>) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let (root, chain) =
            storage_view(g, n.src[0]).ok_or_else(|| self.err(id, "STORE target is not storage"))?;
        let (base, inner) = self
            .states
            .get(&root)
            .cloned()
            .ok_or_else(|| self.err(root, "storage not evaluated"))?;
        let chain: Vec<NodeId> = inner.into_iter().chain(chain).collect();
        let size = base.comps[0].len();
        let mut idx: Vec<Option<usize>> = (0..size).map(Some).collect();
        let mut shape = vec![size];
        for &m in &chain {
            let mn = g.node(m);
            idx = movement::apply(mn.op, &mn.arg, &shape, &idx, &None);
            shape = movement_shape(mn.op, &mn.arg, &shape).map_err(|r| self.err(m, r))?;
        }
        let vshape = self.value(n.src[1])?.shape.clone();
        let value = self.bounds(n.src[1])?.clone();
        let scalar_value = vshape.is_empty() && !shape.is_empty();
        let mut comps = (*base.comps).clone();
        let ncomp = comps.len();
        for (c, comp) in comps.iter_mut().enumerate() {
            let src = match value.comps.len() {
                1 => &value.comps[0],
                k if k == ncomp => &value.comps[c],
                _ => return Err(self.err(id, "STORE between values on different device tuples")),
            };
            for (i, target) in idx.iter().enumerate() {
                if let Some(t) = target {
                    let b = src[if scalar_value { 0 } else { i }];
                    comp[*t] = self.handle(b);
                }
            }
        }
        self.store_notes
            .entry(base.buffer)
            .or_default()
            .extend(value.notes.iter().cloned());
        notes.extend(value.notes.iter().cloned());
        self.versions.record_store(id, &base, comps);
        Ok(())
    }

    // ---- elementwise ----

    fn alu(&self, id: NodeId, c: &mut Contrib) -> Result<Comps> {
        let n = self.g.node(id);
        let info = self.ver.info(id);
        let srcs: Vec<(&Value, &NodeBounds)> = n
            .src
            .iter()
            .map(|&s| Ok((self.value(s)?, self.bounds(s)?)))
            .collect::<Result<_>>()?;
        let operand_dt = if n.op == Op::WHERE {
            srcs[1].0.dtype
        } else {
            srcs[0].0.dtype
        };
        let out = self.value(id)?;
        let numel: usize = info.shape.iter().product();
        let ncomp = out.data.components().len();
        let mut comps = Vec::with_capacity(ncomp);
        let mut ops = Vec::with_capacity(srcs.len());
        for cix in 0..ncomp {
            let res = &out.data.components()[cix];
            let mut bs = Vec::with_capacity(numel);
            for (i, &r) in res.iter().enumerate() {
                ops.clear();
                for (v, b) in &srcs {
                    let vc = v.data.components();
                    let k = if vc.len() == 1 { 0 } else { cix };
                    let j = if v.shape.is_empty() { 0 } else { i };
                    ops.push((b.comps[k][j], vc[k][j]));
                }
                bs.push(self.alu_elem(n.op, operand_dt, info.dtype, &ops, r, c));
            }
            comps.push(bs);
        }
        Ok(comps)
    }

    fn alu_elem(
        &self,
        op: Op,
        dt: DType,
        rdt: DType,
        ops: &[(Bound, Elem)],
        res: Elem,
        c: &mut Contrib,
    ) -> Bound {
        let Elem::Bits(r) = res else {
            return Bound::Exact;
        };
        let mut bits = [0u64; 3];
        for (k, (_, e)) in ops.iter().enumerate() {
            match e {
                Elem::Bits(b) => bits[k] = *b,
                Elem::Uninit { .. } => return Bound::Exact,
            }
        }
        if op == Op::WHERE {
            return match ops[0].0 {
                Bound::Exact => {
                    if bits[0] & 1 != 0 {
                        ops[1].0
                    } else {
                        ops[2].0
                    }
                }
                _ => Bound::Unbounded(Why::Source),
            };
        }
        let all_exact = ops.iter().all(|(b, _)| b.is_exact());
        if !dt.is_float() {
            return if all_exact {
                Bound::Exact
            } else {
                Bound::Unbounded(Why::Source)
            };
        }
        let float_result = rdt.is_float();
        let budget = if float_result {
            self.tol.ulp_budget(op, dt)
        } else {
            0
        };
        let ftz = self.tol.flushes(dt);
        let contract = self.tol.contract_mul_add && op == Op::MUL;
        if all_exact {
            let sub = ftz
                && (bits[..ops.len()].iter().any(|&b| ulp::is_subnormal(dt, b))
                    || (float_result && ulp::is_subnormal(rdt, r)));
            let fused_differs = contract && {
                let (x, y) = (to_f64(dt, bits[0]), to_f64(dt, bits[1]));
                !(x * y).is_nan()
                    && interval::mul_exact(Iv { lo: x, hi: x }, Iv { lo: y, hi: y })
                        != Iv::point(to_f64(rdt, r))
            };
            if budget == 0 && !sub && !fused_differs {
                return Bound::Exact;
            }
        }
        let mut ivs = [Iv { lo: 0.0, hi: 0.0 }; 3];
        let mut daz = false;
        for (k, (b, _)) in ops.iter().enumerate() {
            ivs[k] = match *b {
                Bound::Exact => match Iv::point(to_f64(dt, bits[k])) {
                    Ok(iv) => iv,
                    Err(w) => return Bound::Unbounded(w),
                },
                Bound::Range(iv) => iv,
                Bound::Unbounded(_) => return Bound::Unbounded(Why::Source),
            };
            if ftz && interval::flush(dt, &mut ivs[k]) {
                c.ftz = true;
                daz = true;
            }
        }
        let (a, b) = (ivs[0], ivs[1]);
        // With the oracle's own operands, the oracle's result is the starting point (a ULP budget
        // is relative to it); otherwise the op's interval over the operands' intervals.
        let from_oracle = all_exact && !daz;
        if from_oracle && !float_result {
            return Bound::Exact;
        }
        let result = if from_oracle {
            Iv::point(to_f64(rdt, r))
        } else {
            // The op table's range rule names the interval function.
            match op.info().map_or(RangeRule::Opaque, |i| i.range) {
                RangeRule::Add => interval::add(dt, a, b),
                RangeRule::Sub => interval::sub(dt, a, b),
                RangeRule::Mul => interval::mul(dt, a, b),
                RangeRule::FDiv => interval::div(dt, a, b),
                RangeRule::Reciprocal => interval::div(dt, Iv { lo: 1.0, hi: 1.0 }, a),
                RangeRule::Sqrt => interval::sqrt(dt, a),
                RangeRule::Exp2 => interval::exp2(dt, a),
                RangeRule::Log2 => interval::log2(dt, a),
                RangeRule::Sin => interval::sin(dt, a),
                RangeRule::Trunc => interval::trunc(dt, a),
                RangeRule::Neg => Ok(a.negated()),
                RangeRule::Max => Ok(interval::max(a, b)),
                RangeRule::MulAcc => interval::mulacc(dt, a, b, ivs[2]),
                RangeRule::CmpLt => return decide(a.hi < b.lo, a.lo >= b.hi),
                RangeRule::CmpEq | RangeRule::CmpNe => {
                    let same = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
                    let apart = a.hi < b.lo || b.hi < a.lo;
                    return decide(same, apart);
                }
                // Integer-only rules never see float operands; POW and the rest: no rule.
                RangeRule::TruncDiv
                | RangeRule::FloorDiv
                | RangeRule::TruncMod
                | RangeRule::FloorMod
                | RangeRule::Shl
                | RangeRule::Shr
                | RangeRule::And
                | RangeRule::Or
                | RangeRule::Xor
                | RangeRule::Where
                | RangeRule::Opaque => Err(Why::NotMonotone),
            }
        };
        let mut iv = match result {
            Ok(iv) => iv,
            Err(w) => return Bound::Unbounded(w),
        };
        if contract {
            match interval::mul_exact(a, b) {
                Ok(e) => {
                    let h = iv.hull(e);
                    if h != iv {
                        c.contract = true;
                    }
                    iv = h;
                }
                Err(w) => return Bound::Unbounded(w),
            }
        }
        if budget > 0 {
            iv = interval::widen_ulps(rdt, iv, budget);
            c.ulp = true;
        }
        if ftz && float_result && interval::flush(rdt, &mut iv) {
            c.ftz = true;
        }
        Bound::Range(iv)
    }

    fn cast(&self, id: NodeId) -> Result<Comps> {
        let n = self.g.node(id);
        let x = self.value(n.src[0])?;
        let xb = self.bounds(n.src[0])?;
        let out = self.value(id)?;
        let (from, to) = (x.dtype, out.dtype);
        let mut comps = vec![];
        for (cix, res) in out.data.components().iter().enumerate() {
            let src = &x.data.components()[cix];
            let sb = &xb.comps[cix];
            comps.push(
                res.iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let (Elem::Bits(s), Elem::Bits(r)) = (src[i], *r) else {
                            return Bound::Exact;
                        };
                        self.cast_elem(n.op, from, to, sb[i], s, r)
                    })
                    .collect(),
            );
        }
        Ok(comps)
    }

    fn cast_elem(&self, op: Op, from: DType, to: DType, b: Bound, s: u64, r: u64) -> Bound {
        let daz = from.is_float() && self.tol.flushes(from);
        let ftz = to.is_float() && self.tol.flushes(to);
        let iv = match b {
            Bound::Unbounded(_) => return Bound::Unbounded(Why::Source),
            Bound::Exact => {
                let sub = (daz && ulp::is_subnormal(from, s)) || (ftz && ulp::is_subnormal(to, r));
                if op == Op::BITCAST || !sub {
                    return Bound::Exact;
                }
                match Iv::point(to_f64(from, s)) {
                    Ok(iv) => iv,
                    Err(w) => return Bound::Unbounded(w),
                }
            }
            Bound::Range(iv) => iv,
        };
        if op == Op::BITCAST || !from.is_float() {
            return Bound::Unbounded(Why::Bitcast);
        }
        let mut iv = iv;
        if daz {
            interval::flush(from, &mut iv);
        }
        if to.is_float() {
            return match interval::cast(to, iv) {
                Ok(mut v) => {
                    if ftz {
                        interval::flush(to, &mut v);
                    }
                    Bound::Range(v)
                }
                Err(w) => Bound::Unbounded(w),
            };
        }
        if to.is_bool() {
            return decide(iv.lo > 0.0 || iv.hi < 0.0, iv.lo == 0.0 && iv.hi == 0.0);
        }
        if iv.is_finite() && iv.lo.trunc() == iv.hi.trunc() {
            Bound::Exact
        } else {
            Bound::Unbounded(Why::Discrete)
        }
    }

    // ---- reductions ----

    fn reduce(&self, id: NodeId, op: Op, axes: usize, c: &mut Contrib) -> Result<Comps> {
        let n = self.g.node(id);
        let x = self.value(n.src[0])?;
        let xb = self.bounds(n.src[0])?;
        let out = self.value(id)?;
        let dt = out.dtype;
        let out_n: usize = out.shape.iter().product();
        let red_n: usize = x.shape[..axes.min(x.shape.len())].iter().product();
        let mut comps = vec![];
        let mut xs = Vec::with_capacity(red_n);
        for (cix, res) in out.data.components().iter().enumerate() {
            let (src, sb) = (&x.data.components()[cix], &xb.comps[cix]);
            let mut bs = Vec::with_capacity(out_n);
            for (o, &r) in res.iter().enumerate() {
                xs.clear();
                xs.extend((0..red_n).map(|k| (sb[k * out_n + o], src[k * out_n + o])));
                bs.push(self.fold(op, dt, &xs, r, true, self.tol.reassociate_reductions, c));
            }
            comps.push(bs);
        }
        Ok(comps)
    }

    fn allreduce(&self, id: NodeId, op: Op, c: &mut Contrib) -> Result<Comps> {
        let n = self.g.node(id);
        let x = self.value(n.src[0])?;
        let xb = self.bounds(n.src[0])?;
        let out = self.value(id)?;
        let ncomp = x.data.components().len();
        let numel = x.data.components()[0].len();
        let res = &out.data.components()[0];
        let mut bs = Vec::with_capacity(numel);
        let mut xs = Vec::with_capacity(ncomp);
        for (i, &r) in res.iter().enumerate() {
            xs.clear();
            xs.extend((0..ncomp).map(|k| (xb.comps[k][i], x.data.components()[k][i])));
            bs.push(self.fold(
                op,
                out.dtype,
                &xs,
                r,
                false,
                self.tol.reassociate_allreduce,
                c,
            ));
        }
        Ok(vec![bs; out.data.components().len()])
    }

    /// The bound of one reduced element: the canonical sequential fold (from the identity for
    /// REDUCE, from the first component for ALLREDUCE), or any order when `reassoc`.
    #[allow(clippy::too_many_arguments)]
    fn fold(
        &self,
        op: Op,
        dt: DType,
        xs: &[(Bound, Elem)],
        res: Elem,
        from_identity: bool,
        reassoc: bool,
        c: &mut Contrib,
    ) -> Bound {
        if matches!(res, Elem::Uninit { .. })
            || xs.iter().any(|(_, e)| matches!(e, Elem::Uninit { .. }))
        {
            return Bound::Exact;
        }
        let bits = |e: &Elem| match e {
            Elem::Bits(b) => *b,
            Elem::Uninit { .. } => 0,
        };
        let all_exact = xs.iter().all(|(b, _)| b.is_exact());
        if !dt.is_float() {
            // Wrapping integer +, ×, bool ∨ ∧ and integer max are associative and commutative:
            // every order gives the same bits.
            return if all_exact {
                Bound::Exact
            } else {
                Bound::Unbounded(Why::Source)
            };
        }
        let ftz = self.tol.flushes(dt);
        let n = xs.len();
        let mut ivs = Vec::with_capacity(n);
        let mut widened = false;
        for (b, e) in xs {
            let mut iv = match *b {
                Bound::Exact => match Iv::point(to_f64(dt, bits(e))) {
                    Ok(iv) => iv,
                    Err(w) => {
                        // NaN in a sequential fold is exact when nothing else deviates.
                        if all_exact && !reassoc {
                            return Bound::Exact;
                        }
                        return Bound::Unbounded(w);
                    }
                },
                Bound::Range(iv) => iv,
                Bound::Unbounded(_) => return Bound::Unbounded(Why::Source),
            };
            if ftz && interval::flush(dt, &mut iv) {
                widened = true;
            }
            ivs.push(iv);
        }
        // A REDUCE of one term may skip the identity (x₀ instead of e ⊕ x₀: the sign of a zero
        // may differ); an ALLREDUCE needs two components to have an order at all.
        let min_terms = if from_identity { 1 } else { 2 };
        if reassoc && n >= min_terms {
            let r = match op {
                Op::ADD => reassoc_sum(dt, &ivs, ftz),
                Op::MUL => reassoc_prod(dt, &ivs),
                Op::MAX => {
                    if all_exact && !ftz && !xs.iter().any(|(_, e)| to_f64(dt, bits(e)) == 0.0) {
                        return Bound::Exact;
                    }
                    Ok(ivs.iter().fold(
                        Iv {
                            lo: f64::NEG_INFINITY,
                            hi: f64::NEG_INFINITY,
                        },
                        |a, &b| interval::max(a, b),
                    ))
                }
                _ => Err(Why::NotMonotone),
            };
            c.reassoc = true;
            if ftz {
                c.ftz = true;
            }
            return match r {
                Ok(iv) => Bound::Range(iv),
                Err(w) => Bound::Unbounded(w),
            };
        }
        if all_exact && !ftz {
            return Bound::Exact;
        }
        let (mut acc, rest) = if from_identity {
            (
                Iv::point(to_f64(dt, reduce_identity(op, dt))).unwrap_or(Iv { lo: 0.0, hi: 0.0 }),
                &ivs[..],
            )
        } else {
            match ivs.split_first() {
                Some((f, rest)) => (*f, rest),
                None => return Bound::Exact,
            }
        };
        for &x in rest {
            let r = match op {
                Op::ADD => interval::add(dt, acc, x),
                Op::MUL => interval::mul(dt, acc, x),
                Op::MAX => Ok(interval::max(acc, x)),
                _ => Err(Why::NotMonotone),
            };
            acc = match r {
                Ok(v) => v,
                Err(w) => return Bound::Unbounded(w),
            };
            if ftz && interval::flush(dt, &mut acc) {
                widened = true;
            }
        }
        if all_exact && !widened {
            return Bound::Exact;
        }
        if widened {
            c.ftz = true;
        }
        Bound::Range(acc)
    }
}

/// A comparison (or a cast to bool) on intervals: Exact when the outcome cannot change.
fn decide(always_true: bool, always_false: bool) -> Bound {
    if always_true || always_false {
        Bound::Exact
    } else {
        Bound::Unbounded(Why::Discrete)
    }
}

/// Any order of a float sum of n terms whose actual values lie in `ivs`:
/// |ŝ − Σxᵢ| ≤ γ(n−1)·Σ|xᵢ| (+ n·min_normal per possibly flushed addition).
fn reassoc_sum(dt: DType, ivs: &[Iv], ftz: bool) -> interval::R<Iv> {
    use interval::{mul_up, sum_down, sum_up};
    if ivs.iter().any(|iv| !iv.is_finite()) {
        return Err(Why::Overflow);
    }
    let n = ivs.len();
    let (mut slo, mut shi, mut m) = (0.0f64, 0.0f64, 0.0f64);
    for iv in ivs {
        slo = sum_down(slo, iv.lo);
        shi = sum_up(shi, iv.hi);
        m = sum_up(m, iv.mag());
    }
    let g = interval::gamma(n - 1, ulp::unit_roundoff(dt)).ok_or(Why::TooManyTerms)?;
    let mut e = mul_up(g, m);
    if ftz {
        e = sum_up(e, mul_up(2.0 * n as f64, ulp::min_normal(dt)));
    }
    if sum_up(m, e) > ulp::max_finite(dt) {
        return Err(Why::Overflow);
    }
    Iv::new(sum_down(slo, -e), sum_up(shi, e))
}

/// Any order of a float product of n nonzero factors in `ivs`, when no partial product can
/// leave the normal range: p̂ = Π xᵢ · (1 + θ), |θ| ≤ γ(n−1).
fn reassoc_prod(dt: DType, ivs: &[Iv]) -> interval::R<Iv> {
    use interval::{mul_down, mul_up};
    if ivs.iter().any(|iv| !iv.is_finite()) {
        return Err(Why::Overflow);
    }
    if ivs.iter().any(|iv| iv.mig() == 0.0) {
        return Err(Why::Zero);
    }
    let n = ivs.len();
    let g = interval::gamma(n - 1, ulp::unit_roundoff(dt)).ok_or(Why::TooManyTerms)?;
    let (mut pmin, mut pmax, mut small, mut large) = (1.0f64, 1.0f64, 1.0f64, 1.0f64);
    let mut negative = false;
    for iv in ivs {
        negative ^= iv.hi < 0.0;
        pmin = mul_down(pmin, iv.mig());
        pmax = mul_up(pmax, iv.mag());
        if iv.mig() < 1.0 {
            small = mul_down(small, iv.mig());
        }
        if iv.mag() > 1.0 {
            large = mul_up(large, iv.mag());
        }
    }
    // every partial product's magnitude lies in [small·(1−γ), large·(1+γ)]
    if mul_down(small, interval::down(1.0 - g)) < ulp::min_normal(dt) {
        return Err(Why::Underflow);
    }
    if mul_up(large, interval::up(1.0 + g)) > ulp::max_finite(dt) {
        return Err(Why::Overflow);
    }
    let lo = mul_down(pmin, interval::down(1.0 - g));
    let hi = mul_up(pmax, interval::up(1.0 + g));
    if negative {
        Iv::new(-hi, -lo)
    } else {
        Iv::new(lo, hi)
    }
}
