//! Value-range analysis of integer (and bool) expressions: `vmin`/`vmax` as `i128`, as
//! tinygrad's `UOp.vmin`/`vmax`; and a conservative "cannot hit undefined behaviour" check.
//!
//! The range of a node holds every value the node can take *when its evaluation is defined*.
//! Each op's range is first computed in exact integer arithmetic; when that interval does
//! not fit the node's dtype, the op may wrap and the range is the dtype's full range. Loop
//! variables are `RANGE` nodes (`src: [end]`), ranging over `0..end` (an empty loop's
//! variable is never observed; its range is reported as `[0, 0]`).
//!
//! Floats have no range (`None`); unknown ops get their dtype's full range.

use std::collections::{HashMap, HashSet};

use uopkit_interp::ir::table::RangeRule;
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::cast::to_i128;
use uopkit_interp::scalar::Ub;

/// A closed interval `[min, max]` of integer values.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct VRange {
    pub min: i128,
    pub max: i128,
}

impl VRange {
    pub fn new(min: i128, max: i128) -> VRange {
        debug_assert!(min <= max, "empty range [{min}, {max}]");
        VRange { min, max }
    }

    pub fn point(v: i128) -> VRange {
        VRange { min: v, max: v }
    }

    /// The full range of an int or bool dtype (`None` for floats and void).
    pub fn full(dt: DType) -> Option<VRange> {
        dt.int_range().map(|(min, max)| VRange { min, max })
    }

    pub fn contains(self, v: i128) -> bool {
        self.min <= v && v <= self.max
    }

    /// `self` ⊆ `other`.
    pub fn within(self, other: VRange) -> bool {
        other.min <= self.min && self.max <= other.max
    }

    pub fn as_point(self) -> Option<i128> {
        (self.min == self.max).then_some(self.min)
    }

    pub fn union(self, o: VRange) -> VRange {
        VRange {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }

    fn from_corners(vals: impl IntoIterator<Item = Option<i128>>) -> Option<VRange> {
        let mut r: Option<VRange> = None;
        for v in vals {
            let v = v?;
            r = Some(match r {
                None => VRange::point(v),
                Some(r) => r.union(VRange::point(v)),
            });
        }
        r
    }
}

/// The range of `id` (`None` for floats and void).
pub fn vrange(g: &Graph, id: NodeId) -> Option<VRange> {
    Ranges::new(g).get(id)
}

pub fn vmin(g: &Graph, id: NodeId) -> Option<i128> {
    vrange(g, id).map(|r| r.min)
}

pub fn vmax(g: &Graph, id: NodeId) -> Option<i128> {
    vrange(g, id).map(|r| r.max)
}

/// True when evaluating `id` can never be undefined behaviour (see [`Ranges::ub_free`]).
pub fn ub_free(g: &Graph, id: NodeId) -> bool {
    Ranges::new(g).ub_free(id)
}

/// Range analysis over one graph, memoized (nodes never change, so a result stays valid for
/// as long as the graph lives; this borrows it immutably). Inside [`with_cache`] for the same
/// graph, it starts from (and on drop returns) the results of earlier analyses of that graph.
pub struct Ranges<'g> {
    g: &'g Graph,
    m: Memo,
}

/// A [`Ranges`]' results; those lent by the active [`RangeCache`] go back to it on drop (a
/// type apart from `Ranges`, so that its drop does not hold the graph's borrow).
struct Memo {
    memo: HashMap<NodeId, Option<VRange>>,
    ub_free: HashMap<NodeId, bool>,
    /// The address of the graph whose active cache lent them.
    lent_by: Option<usize>,
}

/// The ranges and UB-freedom of one graph's nodes, kept between the rule applications and
/// rewrites that analyse it (each rule makes a [`Ranges`]; without a shared memo each would
/// recompute the ranges of its whole operand expression, which made long index chains
/// quadratic). Valid because a [`Graph`] is append-only: a node id's node, and so its range,
/// never changes. Keep a cache with the graph it describes and drop them together.
#[derive(Default)]
pub struct RangeCache {
    memo: HashMap<NodeId, Option<VRange>>,
    ub_free: HashMap<NodeId, bool>,
}

thread_local! {
    /// The cache [`with_cache`] lent for the graph at this address, while `f` runs.
    static ACTIVE: std::cell::RefCell<Option<(usize, RangeCache)>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `cache` lent to every [`Ranges`] made on the graph at address `graph` on
/// this thread; `cache` gets back everything they computed, also when `f` unwinds. `graph`
/// must be the graph `cache` describes, alive and in place while `f` runs (it may grow:
/// nodes are only appended). Only the address is kept (never dereferenced), so `f` may hold
/// the graph mutably.
pub fn with_cache<R>(cache: &mut RangeCache, graph: *const Graph, f: impl FnOnce() -> R) -> R {
    struct Restore<'c> {
        cache: &'c mut RangeCache,
        prev: Option<(usize, RangeCache)>,
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let lent = ACTIVE.with(|a| a.replace(self.prev.take()));
            if let Some((_, c)) = lent {
                *self.cache = c;
            }
        }
    }
    let addr = graph as usize;
    let prev = ACTIVE.with(|a| a.replace(Some((addr, std::mem::take(cache)))));
    let _restore = Restore { cache, prev };
    f()
}

impl Drop for Memo {
    /// Lent results go back to the active cache (merged, if another `Ranges` of the same
    /// graph returned its own meanwhile).
    fn drop(&mut self) {
        let Some(addr) = self.lent_by else { return };
        let (memo, ub_free) = (
            std::mem::take(&mut self.memo),
            std::mem::take(&mut self.ub_free),
        );
        ACTIVE.with(|a| {
            if let Some((at, c)) = &mut *a.borrow_mut() {
                if *at == addr {
                    if c.memo.is_empty() && c.ub_free.is_empty() {
                        c.memo = memo;
                        c.ub_free = ub_free;
                    } else {
                        c.memo.extend(memo);
                        c.ub_free.extend(ub_free);
                    }
                }
            }
        });
    }
}

/// The sources an op's range depends on (others are not visited).
fn range_deps(n: &Node) -> &[NodeId] {
    if matches!(n.op, Op::RANGE | Op::SPECIAL | Op::CAST) || n.op.is_alu() {
        &n.src
    } else {
        &[]
    }
}

fn int_like(dt: DType) -> bool {
    dt.is_int() || dt.is_bool()
}

fn floor_div(a: i128, b: i128) -> i128 {
    let (q, r) = (a / b, a % b);
    if r != 0 && ((r < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

impl<'g> Ranges<'g> {
    pub fn new(g: &'g Graph) -> Self {
        let addr = g as *const Graph as usize;
        let lent = ACTIVE.with(|a| match &mut *a.borrow_mut() {
            Some((at, c)) if *at == addr => Some(std::mem::take(c)),
            _ => None,
        });
        let m = match lent {
            Some(c) => Memo {
                memo: c.memo,
                ub_free: c.ub_free,
                lent_by: Some(addr),
            },
            None => Memo {
                memo: HashMap::new(),
                ub_free: HashMap::new(),
                lent_by: None,
            },
        };
        Ranges { g, m }
    }

    /// The range of `id` (`None` for floats and void).
    pub fn get(&mut self, id: NodeId) -> Option<VRange> {
        if let Some(&r) = self.m.memo.get(&id) {
            return r;
        }
        // Iterative post-order, so deep expressions do not overflow the stack.
        let mut stack = vec![(id, false)];
        while let Some((n, expanded)) = stack.pop() {
            if self.m.memo.contains_key(&n) {
                continue;
            }
            if expanded {
                let r = self.compute(self.g.node(n));
                self.m.memo.insert(n, r);
            } else {
                stack.push((n, true));
                for &s in range_deps(self.g.node(n)) {
                    if !self.m.memo.contains_key(&s) {
                        stack.push((s, false));
                    }
                }
            }
        }
        self.m.memo[&id]
    }

    /// All sources' ranges are memoized.
    fn compute(&self, n: &Node) -> Option<VRange> {
        let full = VRange::full(n.dtype)?;
        let exact = if n.dtype.is_bool() {
            self.compute_bool(n)
        } else {
            self.compute_int(n)
        };
        Some(match exact {
            Some(r) if r.within(full) => r,
            _ => full,
        })
    }

    fn src(&self, n: &Node, i: usize) -> Option<VRange> {
        n.src
            .get(i)
            .and_then(|s| self.m.memo.get(s).copied().flatten())
    }

    fn compute_bool(&self, n: &Node) -> Option<VRange> {
        let bool_range = |lo: bool, hi: bool| VRange::new(lo as i128, hi as i128);
        match n.op {
            Op::CONST => self.const_value(n).map(VRange::point),
            Op::CAST => {
                let from = self.g.node(*n.src.first()?).dtype;
                if !int_like(from) {
                    return None;
                }
                let a = self.src(n, 0)?;
                Some(if a == VRange::point(0) {
                    bool_range(false, false)
                } else if !a.contains(0) {
                    bool_range(true, true)
                } else {
                    bool_range(false, true)
                })
            }
            op => match op.info()?.range {
                rule @ (RangeRule::CmpLt | RangeRule::CmpNe | RangeRule::CmpEq) => {
                    let (a, b) = (self.src(n, 0)?, self.src(n, 1)?);
                    let disjoint = a.max < b.min || b.max < a.min;
                    let same_point = a.as_point().is_some() && a == b;
                    Some(match rule {
                        RangeRule::CmpLt if a.max < b.min => bool_range(true, true),
                        RangeRule::CmpLt if a.min >= b.max => bool_range(false, false),
                        RangeRule::CmpNe if disjoint => bool_range(true, true),
                        RangeRule::CmpNe if same_point => bool_range(false, false),
                        RangeRule::CmpEq if disjoint => bool_range(false, false),
                        RangeRule::CmpEq if same_point => bool_range(true, true),
                        _ => bool_range(false, true),
                    })
                }
                RangeRule::Where => self.where_range(n),
                _ => None,
            },
        }
    }

    fn where_range(&self, n: &Node) -> Option<VRange> {
        let c = self.src(n, 0)?;
        match c.as_point() {
            Some(1) => self.src(n, 1),
            Some(0) => self.src(n, 2),
            _ => Some(self.src(n, 1)?.union(self.src(n, 2)?)),
        }
    }

    fn const_value(&self, n: &Node) -> Option<i128> {
        match n.arg {
            Arg::Const(b) => Some(to_i128(n.dtype, b)),
            _ => None,
        }
    }

    /// The exact (unwrapped) range of an int node, or `None` when unknown.
    fn compute_int(&self, n: &Node) -> Option<VRange> {
        let a = || self.src(n, 0);
        match n.op {
            Op::CONST => self.const_value(n).map(VRange::point),
            // A loop variable or a launch index: 0..end.
            Op::RANGE | Op::SPECIAL => {
                let end = a()?;
                Some(VRange::new(0, (end.max - 1).max(0)))
            }
            Op::CAST => {
                let from = self.g.node(*n.src.first()?).dtype;
                // An int/bool value converts unchanged when it fits (checked by the caller).
                if int_like(from) {
                    a()
                } else {
                    None
                }
            }
            op => self.alu_int(n, op.info()?.range),
        }
    }

    /// The exact range of an int ALU node under its op's range rule (`ir::table`).
    fn alu_int(&self, n: &Node, rule: RangeRule) -> Option<VRange> {
        let a = || self.src(n, 0);
        let b = || self.src(n, 1);
        let bits = n.dtype.bits() as i128;
        match rule {
            RangeRule::Add => {
                let (a, b) = (a()?, b()?);
                Some(VRange::new(a.min + b.min, a.max + b.max))
            }
            RangeRule::Sub => {
                let (a, b) = (a()?, b()?);
                Some(VRange::new(a.min - b.max, a.max - b.min))
            }
            RangeRule::Mul => mul_range(a()?, b()?),
            RangeRule::MulAcc => {
                let (p, c) = (mul_range(a()?, b()?)?, self.src(n, 2)?);
                Some(VRange::new(p.min + c.min, p.max + c.max))
            }
            RangeRule::Neg => {
                let a = a()?;
                Some(VRange::new(-a.max, -a.min))
            }
            RangeRule::Trunc => a(),
            RangeRule::Max => {
                let (a, b) = (a()?, b()?);
                Some(VRange::new(a.min.max(b.min), a.max.max(b.max)))
            }
            RangeRule::TruncDiv | RangeRule::FloorDiv => {
                let (a, b) = (a()?, b()?);
                if b.contains(0) {
                    return None;
                }
                // Truncating and floor division are monotone in each operand on either side
                // of zero, so the extremes are at the corners.
                let div = |x: i128, y: i128| {
                    Some(if rule == RangeRule::TruncDiv {
                        x / y
                    } else {
                        floor_div(x, y)
                    })
                };
                VRange::from_corners([
                    div(a.min, b.min),
                    div(a.min, b.max),
                    div(a.max, b.min),
                    div(a.max, b.max),
                ])
            }
            RangeRule::TruncMod => {
                let (a, b) = (a()?, b()?);
                if b.contains(0) {
                    return None;
                }
                let bmin_abs = b.min.abs().min(b.max.abs());
                if a.min >= 0 && a.max < bmin_abs {
                    return Some(a);
                }
                let m = b.min.abs().max(b.max.abs()) - 1;
                // The remainder has the dividend's sign and |r| <= min(|a|, |b| - 1).
                Some(VRange::new(
                    if a.min >= 0 { 0 } else { a.min.max(-m) },
                    if a.max <= 0 { 0 } else { a.max.min(m) },
                ))
            }
            RangeRule::FloorMod => {
                let (a, b) = (a()?, b()?);
                if b.min > 0 {
                    if a.min >= 0 && a.max < b.min {
                        return Some(a);
                    }
                    Some(VRange::new(
                        0,
                        if a.min >= 0 {
                            a.max.min(b.max - 1)
                        } else {
                            b.max - 1
                        },
                    ))
                } else if b.max < 0 {
                    if a.max <= 0 && a.min > b.max {
                        return Some(a);
                    }
                    Some(VRange::new(
                        if a.max <= 0 {
                            a.min.max(b.min + 1)
                        } else {
                            b.min + 1
                        },
                        0,
                    ))
                } else {
                    None
                }
            }
            RangeRule::Shl | RangeRule::Shr => {
                let (a, k) = (a()?, b()?);
                if k.min < 0 || k.max >= bits {
                    return None; // undefined for some counts
                }
                // x·2^k and floor(x / 2^k) are monotone in x and in k: corners again.
                let f = |x: i128, s: i128| {
                    if rule == RangeRule::Shl {
                        x.checked_mul(1i128 << s)
                    } else {
                        Some(x >> s)
                    }
                };
                VRange::from_corners([
                    f(a.min, k.min),
                    f(a.min, k.max),
                    f(a.max, k.min),
                    f(a.max, k.max),
                ])
            }
            RangeRule::And => {
                let (a, b) = (a()?, b()?);
                // A non-negative operand clears the sign and bounds the result from above.
                match (a.min >= 0, b.min >= 0) {
                    (true, true) => Some(VRange::new(0, a.max.min(b.max))),
                    (true, false) => Some(VRange::new(0, a.max)),
                    (false, true) => Some(VRange::new(0, b.max)),
                    (false, false) => None,
                }
            }
            RangeRule::Or | RangeRule::Xor => {
                let (a, b) = (a()?, b()?);
                if a.min < 0 || b.min < 0 {
                    return None;
                }
                let hi = a.max.max(b.max);
                let ones = if hi == 0 {
                    0
                } else {
                    (1i128 << (128 - hi.leading_zeros())) - 1
                };
                let lo = if rule == RangeRule::Or {
                    a.min.max(b.min)
                } else {
                    0
                };
                Some(VRange::new(lo, ones))
            }
            RangeRule::Where => self.where_range(n),
            // Comparisons give bool (compute_bool); float-only rules never see ints.
            _ => None,
        }
    }

    /// True when evaluating `id` can never be undefined behaviour: its expression contains
    /// only CONST, RANGE, SPECIAL, ALU ops, CAST and BITCAST, every division's divisor range excludes 0
    /// (and, signed, never divides INT_MIN by -1), every shift count is in range, and no
    /// float is cast to an int. Anything else (LOAD, INDEX, …) counts as possibly UB.
    ///
    /// Rules that *drop* a sub-expression require this of it, so a rewrite never removes (or
    /// adds) UB: the oracle evaluates every operand, so UB anywhere is UB of the whole.
    pub fn ub_free(&mut self, id: NodeId) -> bool {
        let mut seen = HashSet::new();
        let mut stack = vec![id];
        let mut ok = true;
        while let Some(n) = stack.pop() {
            if let Some(&known) = self.m.ub_free.get(&n) {
                if !known {
                    ok = false;
                    break;
                }
                continue;
            }
            if !seen.insert(n) {
                continue;
            }
            if !self.locally_defined(n) {
                ok = false;
                break;
            }
            stack.extend(self.g.node(n).src.iter().copied());
        }
        if ok {
            for n in seen {
                self.m.ub_free.insert(n, true);
            }
        }
        self.m.ub_free.insert(id, ok);
        ok
    }

    /// The node's own op can never be UB given its operands' ranges.
    fn locally_defined(&mut self, id: NodeId) -> bool {
        let g = self.g;
        let n = g.node(id);
        let dt = n.dtype;
        match n.op {
            // A launch index is defined like a loop variable (its extent, a CONST, is checked
            // as a source).
            Op::CONST | Op::RANGE | Op::SPECIAL | Op::BITCAST => true,
            Op::CAST => {
                let from = n.src.first().map(|&s| g.node(s).dtype);
                !(from.is_some_and(DType::is_float) && !dt.is_float() && !dt.is_bool())
            }
            // An ALU op is defined unless its table entry names UB that the operands' ranges
            // do not exclude (integer UB only: float ALU ops are total).
            op => {
                let Some(info) = op.info() else { return false };
                if !int_like(dt) {
                    return true;
                }
                if info.can_raise(Ub::DivByZero) {
                    let (Some(&x), Some(&y)) = (n.src.first(), n.src.get(1)) else {
                        return false;
                    };
                    let Some(b) = self.get(y) else { return false };
                    if b.contains(0) {
                        return false;
                    }
                    if info.can_raise(Ub::DivOverflow) && dt.is_signed_int() && b.contains(-1) {
                        let int_min = -(1i128 << (dt.bits() - 1));
                        if self.get(x).is_none_or(|a| a.min <= int_min) {
                            return false;
                        }
                    }
                }
                if info.can_raise(Ub::ShiftOutOfRange) {
                    let Some(&y) = n.src.get(1) else { return false };
                    if !self
                        .get(y)
                        .is_some_and(|k| k.min >= 0 && k.max < dt.bits() as i128)
                    {
                        return false;
                    }
                }
                // Any other UB kind an op could raise has no range rule here: not provably free.
                info.ub
                    .iter()
                    .all(|u| matches!(u, Ub::DivByZero | Ub::DivOverflow | Ub::ShiftOutOfRange))
            }
        }
    }
}

fn mul_range(a: VRange, b: VRange) -> Option<VRange> {
    VRange::from_corners([
        a.min.checked_mul(b.min),
        a.min.checked_mul(b.max),
        a.max.checked_mul(b.min),
        a.max.checked_mul(b.max),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use uopkit_interp::scalar::cast::wrap_i128;

    fn c(g: &mut Graph, dt: DType, v: i128) -> NodeId {
        g.add(Node {
            op: Op::CONST,
            dtype: dt,
            src: vec![],
            arg: Arg::Const(wrap_i128(dt, v)),
        })
    }
    fn range(g: &mut Graph, axis: usize, end: i128) -> NodeId {
        let e = c(g, DType::Int64, end);
        g.add(Node {
            op: Op::RANGE,
            dtype: DType::Int64,
            src: vec![e],
            arg: Arg::Index(axis),
        })
    }
    fn bin(g: &mut Graph, op: Op, a: NodeId, b: NodeId) -> NodeId {
        let dt = if op.is_comparison() {
            DType::Bool
        } else {
            g.node(a).dtype
        };
        g.add(Node {
            op,
            dtype: dt,
            src: vec![a, b],
            arg: Arg::None,
        })
    }
    fn cast(g: &mut Graph, dt: DType, a: NodeId) -> NodeId {
        g.add(Node {
            op: Op::CAST,
            dtype: dt,
            src: vec![a],
            arg: Arg::None,
        })
    }
    fn r(min: i128, max: i128) -> Option<VRange> {
        Some(VRange::new(min, max))
    }

    #[test]
    fn basic_ranges() {
        let mut g = Graph::new();
        let i = range(&mut g, 0, 10);
        let j = range(&mut g, 1, 4);
        let k4 = c(&mut g, DType::Int64, 4);
        let m3 = c(&mut g, DType::Int64, -3);
        assert_eq!(vrange(&g, i), r(0, 9));
        let e = bin(&mut g, Op::MUL, i, k4);
        assert_eq!(vrange(&g, e), r(0, 36));
        let e = bin(&mut g, Op::ADD, e, j);
        assert_eq!(vrange(&g, e), r(0, 39));
        let d = bin(&mut g, Op::FLOORDIV, e, k4);
        assert_eq!(vrange(&g, d), r(0, 9));
        let m = bin(&mut g, Op::FLOORMOD, e, k4);
        assert_eq!(vrange(&g, m), r(0, 3));
        let s = bin(&mut g, Op::SUB, j, k4);
        assert_eq!(vrange(&g, s), r(-4, -1));
        let cm = bin(&mut g, Op::CMOD, s, k4);
        assert_eq!(vrange(&g, cm), r(-3, 0));
        let fd = bin(&mut g, Op::FLOORDIV, s, m3);
        assert_eq!(vrange(&g, fd), r(0, 1));
        let lt = bin(&mut g, Op::CMPLT, i, k4);
        assert_eq!(vrange(&g, lt), r(0, 1));
        let lt = bin(&mut g, Op::CMPLT, s, k4);
        assert_eq!(vrange(&g, lt), r(1, 1));
        let ne = bin(&mut g, Op::CMPNE, s, j);
        assert_eq!(vrange(&g, ne), r(1, 1));
        let w = g.add(Node {
            op: Op::WHERE,
            dtype: DType::Int64,
            src: vec![lt, i, s],
            arg: Arg::None,
        });
        assert_eq!(vrange(&g, w), r(0, 9));
        let two = c(&mut g, DType::Int64, 2);
        let sh = bin(&mut g, Op::SHL, i, two);
        assert_eq!(vrange(&g, sh), r(0, 36));
        let sh = bin(&mut g, Op::SHR, s, two);
        assert_eq!(vrange(&g, sh), r(-1, -1));
        let and = bin(&mut g, Op::AND, s, k4);
        assert_eq!(vrange(&g, and), r(0, 4));
        let neg = g.add(Node {
            op: Op::NEG,
            dtype: DType::Int64,
            src: vec![s],
            arg: Arg::None,
        });
        assert_eq!(vrange(&g, neg), r(1, 4));
    }

    #[test]
    fn wrapping_gives_the_full_range() {
        let mut g = Graph::new();
        let i = range(&mut g, 0, 200);
        let x = cast(&mut g, DType::Int8, i); // 128..199 wrap
        assert_eq!(vrange(&g, x), r(-128, 127));
        let i = range(&mut g, 1, 100);
        let x = cast(&mut g, DType::Int8, i);
        assert_eq!(vrange(&g, x), r(0, 99));
        let k = c(&mut g, DType::Int8, 2);
        let y = bin(&mut g, Op::MUL, x, k);
        assert_eq!(vrange(&g, y), r(-128, 127));
        let u = cast(&mut g, DType::UInt8, x);
        assert_eq!(vrange(&g, u), r(0, 99));
        let one = c(&mut g, DType::UInt8, 1);
        let v = bin(&mut g, Op::SUB, u, one); // 0 - 1 wraps
        assert_eq!(vrange(&g, v), r(0, 255));
        let f = g.add(Node {
            op: Op::CONST,
            dtype: DType::Float32,
            src: vec![],
            arg: Arg::Const(0),
        });
        assert_eq!(vrange(&g, f), None);
        let b = cast(&mut g, DType::Bool, u);
        assert_eq!(vrange(&g, b), r(0, 1));
        let big = g.add(Node {
            op: Op::MUL,
            dtype: DType::UInt64,
            src: vec![],
            arg: Arg::None,
        });
        assert_eq!(vrange(&g, big), r(0, u64::MAX as i128));
    }

    #[test]
    fn ub_freedom() {
        let mut g = Graph::new();
        let i = range(&mut g, 0, 10);
        let k = c(&mut g, DType::Int64, 3);
        let zero = c(&mut g, DType::Int64, 0);
        let d = bin(&mut g, Op::CDIV, i, k);
        assert!(ub_free(&g, d));
        let d0 = bin(&mut g, Op::CDIV, k, i); // i may be 0
        assert!(!ub_free(&g, d0));
        let e = bin(&mut g, Op::ADD, d, d0);
        assert!(!ub_free(&g, e));
        let z = bin(&mut g, Op::CMOD, i, zero);
        assert!(!ub_free(&g, z));
        let m1 = c(&mut g, DType::Int64, -1);
        let x = bin(&mut g, Op::SUB, i, k);
        let ovf = bin(&mut g, Op::CDIV, x, m1); // x is never INT_MIN
        assert!(ub_free(&g, ovf));
        // INT_MIN / -1 overflows: a dividend that can be INT_MIN makes it possibly UB (one
        // above INT_MIN does not), in each signed width.
        for dt in [DType::Int8, DType::Int32, DType::Int64] {
            let min = -(1i128 << (dt.bits() - 1));
            let m1 = c(&mut g, dt, -1);
            let at_min = c(&mut g, dt, min);
            let above = c(&mut g, dt, min + 1);
            let q = bin(&mut g, Op::CDIV, at_min, m1);
            assert!(!ub_free(&g, q), "{dt:?}: INT_MIN / -1");
            let q = bin(&mut g, Op::CDIV, above, m1);
            assert!(ub_free(&g, q), "{dt:?}: (INT_MIN + 1) / -1");
        }
        let s = bin(&mut g, Op::SHL, i, i); // count 0..9 < 64
        assert!(ub_free(&g, s));
        let big = c(&mut g, DType::Int64, 64);
        let s = bin(&mut g, Op::SHL, i, big);
        assert!(!ub_free(&g, s));
        let f = g.add(Node {
            op: Op::CONST,
            dtype: DType::Float32,
            src: vec![],
            arg: Arg::Const(0),
        });
        let fi = cast(&mut g, DType::Int32, f);
        assert!(!ub_free(&g, fi));
        let fb = cast(&mut g, DType::Bool, f);
        assert!(ub_free(&g, fb));
        let load = g.add(Node {
            op: Op::LOAD,
            dtype: DType::Int64,
            src: vec![],
            arg: Arg::None,
        });
        assert!(!ub_free(&g, load));
    }
}
