//! Index arithmetic for views: movement ops mapped backwards from an output index to the
//! index they read, as int64 expressions over loop variables (`RANGE` nodes). Built in a
//! hash-consed [`Graph`] so equal expressions are shared and the symbolic rules can
//! simplify them.

use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};

use crate::rewrite::engine::{rewrite_traced, RewriteOpts, RuleSet};
use crate::rewrite::range::{with_cache, RangeCache};
use crate::rewrite::trace::RewriteTrace;

#[derive(Default)]
pub struct IndexGraph {
    pub graph: Graph,
    /// The ranges of `graph`'s nodes, kept between simplifications (it only grows).
    ranges: RangeCache,
}

const I64: DType = DType::Int64;

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

impl IndexGraph {
    fn add(&mut self, op: Op, dtype: DType, src: Vec<NodeId>, arg: Arg) -> NodeId {
        self.graph.add(Node {
            op,
            dtype,
            src,
            arg,
        })
    }

    pub fn konst(&mut self, dtype: DType, bits: u64) -> NodeId {
        self.add(Op::CONST, dtype, vec![], Arg::Const(bits))
    }

    fn int(&mut self, v: i64) -> NodeId {
        self.konst(I64, v as u64)
    }

    fn const_value(&self, n: NodeId) -> Option<i64> {
        match self.graph.node(n) {
            Node {
                op: Op::CONST,
                dtype: DType::Int64,
                arg: Arg::Const(b),
                ..
            } => Some(*b as i64),
            _ => None,
        }
    }

    /// A loop variable 0..end.
    pub fn range(&mut self, axis: u32, end: usize) -> NodeId {
        let e = self.int(end as i64);
        self.add(Op::RANGE, I64, vec![e], Arg::Index(axis as usize))
    }

    pub fn range_axis(&self, n: NodeId) -> Option<u32> {
        match self.graph.node(n) {
            Node {
                op: Op::RANGE,
                arg: Arg::Index(a),
                ..
            } => Some(*a as u32),
            _ => None,
        }
    }

    pub fn add_i(&mut self, a: NodeId, b: NodeId) -> NodeId {
        match (self.const_value(a), self.const_value(b)) {
            (Some(x), Some(y)) => self.int(x.wrapping_add(y)),
            (Some(0), _) => b,
            (_, Some(0)) => a,
            _ => self.add(Op::ADD, I64, vec![a, b], Arg::None),
        }
    }

    pub fn mul_i(&mut self, a: NodeId, b: i64) -> NodeId {
        match (self.const_value(a), b) {
            (Some(x), y) => self.int(x.wrapping_mul(y)),
            (_, 0) => self.int(0),
            (_, 1) => a,
            _ => {
                let c = self.int(b);
                self.add(Op::MUL, I64, vec![a, c], Arg::None)
            }
        }
    }

    /// a / b for a ≥ 0 (C division; the operands of index arithmetic are never negative).
    pub fn div_i(&mut self, a: NodeId, b: i64) -> NodeId {
        if b == 1 {
            return a;
        }
        if let Some(x) = self.const_value(a) {
            return self.int(x / b);
        }
        let c = self.int(b);
        self.add(Op::CDIV, I64, vec![a, c], Arg::None)
    }

    pub fn mod_i(&mut self, a: NodeId, b: i64) -> NodeId {
        if b == 1 {
            return self.int(0);
        }
        if let Some(x) = self.const_value(a) {
            return self.int(x % b);
        }
        let c = self.int(b);
        self.add(Op::CMOD, I64, vec![a, c], Arg::None)
    }

    fn lt(&mut self, a: NodeId, b: NodeId) -> NodeId {
        self.add(Op::CMPLT, DType::Bool, vec![a, b], Arg::None)
    }

    /// The conjunction of two optional conditions.
    pub fn and(&mut self, a: Option<NodeId>, b: Option<NodeId>) -> Option<NodeId> {
        match (a, b) {
            (Some(x), Some(y)) => Some(self.add(Op::AND, DType::Bool, vec![x, y], Arg::None)),
            (x, None) => x,
            (None, y) => y,
        }
    }

    /// Maps an index of a movement op's output back to the index of its input (`in_shape`),
    /// and the condition under which it is not padding.
    pub fn move_back(
        &mut self,
        op: Op,
        arg: &Arg,
        in_shape: &[usize],
        idx: &[NodeId],
    ) -> (Vec<NodeId>, Option<NodeId>) {
        match (op, arg) {
            (Op::RESHAPE, Arg::Shape(out_shape)) => {
                (self.reshape_back(in_shape, out_shape, idx), None)
            }
            (Op::EXPAND, Arg::Shape(lead)) => (idx[lead.len()..].to_vec(), None),
            (Op::PERMUTE, Arg::Perm(p)) => {
                let mut out = idx.to_vec();
                for (i, &pi) in p.iter().enumerate() {
                    out[pi] = idx[i];
                }
                (out, None)
            }
            (Op::SHRINK, Arg::Window { offsets, .. }) => {
                let out = idx.iter().zip(offsets).map(|(&i, &o)| {
                    let c = self.int(o as i64);
                    self.add_i(i, c)
                });
                (out.collect(), None)
            }
            (Op::FLIP, Arg::Flip(flags)) => {
                let mut out = vec![];
                for ((&i, &f), &d) in idx.iter().zip(flags).zip(in_shape) {
                    out.push(if f {
                        let neg = self.mul_i(i, -1);
                        let top = self.int(d as i64 - 1);
                        self.add_i(top, neg)
                    } else {
                        i
                    });
                }
                (out, None)
            }
            (Op::PAD, Arg::Window { offsets, sizes }) => {
                let mut out = vec![];
                let mut valid = None;
                for ax in 0..idx.len() {
                    let (o, d, s) = (offsets[ax] as i64, in_shape[ax] as i64, sizes[ax] as i64);
                    let minus = self.int(-o);
                    out.push(self.add_i(idx[ax], minus));
                    if o > 0 {
                        let lo = self.int(o - 1);
                        let c = self.lt(lo, idx[ax]);
                        valid = self.and(valid, Some(c));
                    }
                    if o + d < s {
                        let hi = self.int(o + d);
                        let c = self.lt(idx[ax], hi);
                        valid = self.and(valid, Some(c));
                    }
                }
                (out, valid)
            }
            _ => (idx.to_vec(), None),
        }
    }

    /// RESHAPE backwards: where only size-1 axes differ, map axes directly; otherwise go
    /// through the flat offset.
    fn reshape_back(
        &mut self,
        in_shape: &[usize],
        out_shape: &[usize],
        idx: &[NodeId],
    ) -> Vec<NodeId> {
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        if squeeze(in_shape) == squeeze(out_shape) {
            let mut kept = idx
                .iter()
                .zip(out_shape)
                .filter(|(_, &d)| d != 1)
                .map(|(&i, _)| i);
            let zero = self.int(0);
            return in_shape
                .iter()
                .map(|&d| {
                    if d == 1 {
                        zero
                    } else {
                        kept.next().unwrap_or(zero)
                    }
                })
                .collect();
        }
        let out_st = strides(out_shape);
        let mut flat = self.int(0);
        for (&i, &st) in idx.iter().zip(&out_st) {
            let term = self.mul_i(i, st as i64);
            flat = self.add_i(flat, term);
        }
        let in_st = strides(in_shape);
        in_shape
            .iter()
            .zip(&in_st)
            .enumerate()
            .map(|(ax, (&d, &st))| {
                let q = self.div_i(flat, st as i64);
                if ax == 0 {
                    q
                } else {
                    self.mod_i(q, d as i64)
                }
            })
            .collect()
    }

    /// Simplifies an expression with the given rewrite passes, in order.
    pub fn simplify(&mut self, n: NodeId, passes: &[RuleSet]) -> NodeId {
        self.simplify_traced(n, passes, None)
    }

    /// [`simplify`](Self::simplify), recording the rule applications in `trace` when given.
    pub fn simplify_traced(
        &mut self,
        n: NodeId,
        passes: &[RuleSet],
        mut trace: Option<&mut RewriteTrace>,
    ) -> NodeId {
        // `ranges` describes `graph` and lives with it in `self`; the rewrites only append
        // to `graph`.
        let at: *const Graph = &self.graph;
        passes.iter().fold(n, |n, rules| {
            let opts = RewriteOpts::bottom_up();
            with_cache(&mut self.ranges, at, || {
                rewrite_traced(&mut self.graph, &[n], rules, opts, trace.as_deref_mut()).roots[0]
            })
        })
    }
}
