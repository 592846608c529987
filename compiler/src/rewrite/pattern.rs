//! Patterns over graph nodes, as data (tinygrad's `UPat`).
//!
//! A [`Pat`] matches a node by op (one op, a set of ops, or any), dtype, arg and sources;
//! named sub-patterns capture the node they matched into [`Captures`]. A name used twice must
//! bind the same node, and because the graph is hash-consed that means *structurally equal*
//! sub-expressions (`x + x` matches `a + a`, never `a + b`).
//!
//! ```
//! use uopkit_compiler::rewrite::Pat;
//! use uopkit_interp::ir::Op;
//! // (x + c1) + c2, either operand order at both levels, x any node, c1/c2 CONSTs.
//! let p = Pat::comm(Op::ADD, [Pat::comm(Op::ADD, [Pat::var("x"), Pat::cvar("c1")]), Pat::cvar("c2")]);
//! assert_eq!(p.root_ops(), Some(&[Op::ADD][..]));
//! ```
//!
//! Matching is a backtracking search that yields *every* way the pattern matches, in a fixed
//! order (sources left to right; for a commutative node the written order first, then the
//! swapped one), so the engine can try the rule's rewrite on each until one accepts.

use std::fmt;
use std::ops::Index;

use uopkit_interp::ir::table::Exactness;
use uopkit_interp::ir::{Arg, DType, Graph, NodeId, Op};

/// A predicate on a node's dtype.
pub type DTypePred = fn(DType) -> bool;
/// A predicate on a node's arg.
pub type ArgPred = fn(&Arg) -> bool;
/// A predicate on a CONST: its dtype and its bits (low bits of the u64, as in `Arg::Const`).
pub type ConstPred = fn(DType, u64) -> bool;
/// A predicate over the captures made so far (this pattern's subtree included).
pub type Guard = fn(&Graph, &Captures) -> bool;

#[derive(Clone, Copy, Debug)]
enum DTypeCheck {
    Is(DType),
    Where(DTypePred),
}

/// A pattern. Build it with the constructors ([`Pat::any`], [`Pat::var`], [`Pat::cvar`],
/// [`Pat::op`], [`Pat::comm`], …) and refine it with the builder methods ([`Pat::named`],
/// [`Pat::dtype`], [`Pat::dtype_where`], [`Pat::arg_where`], [`Pat::guard`]).
#[derive(Clone, Debug)]
pub struct Pat {
    /// `None`: any op.
    ops: Option<Vec<Op>>,
    dtype: Option<DTypeCheck>,
    arg: Option<ArgPred>,
    /// Only on CONST patterns: a predicate on the CONST's dtype and bits.
    konst: Option<ConstPred>,
    /// `None`: any sources (any number). `Some(pats)`: exactly these, in order.
    src: Option<Vec<Pat>>,
    /// The two sources may match in either order.
    commutative: bool,
    name: Option<&'static str>,
    guard: Option<Guard>,
}

/// True when `op`'s two operands may be matched in either order (see [`Pat::comm`]): a binary
/// op that the op table (`ir::table`) marks commutative, at least on ints.
pub fn is_commutative(op: Op) -> bool {
    op.info()
        .is_some_and(|i| i.arity == 2 && i.commutative != Exactness::Never)
}

impl Pat {
    fn blank() -> Pat {
        Pat {
            ops: None,
            dtype: None,
            arg: None,
            konst: None,
            src: None,
            commutative: false,
            name: None,
            guard: None,
        }
    }

    /// Any node; captures nothing.
    pub fn any() -> Pat {
        Pat::blank()
    }

    /// Any node, captured as `name`.
    pub fn var(name: &'static str) -> Pat {
        Pat::blank().named(name)
    }

    /// Any CONST; captures nothing.
    pub fn cnst() -> Pat {
        Pat {
            ops: Some(vec![Op::CONST]),
            ..Pat::blank()
        }
    }

    /// Any CONST, captured as `name` (read its value with [`Captures::const_bits`]).
    pub fn cvar(name: &'static str) -> Pat {
        Pat::cnst().named(name)
    }

    /// A CONST whose `(dtype, bits)` satisfy `pred`, captured as `name`.
    pub fn const_where(name: &'static str, pred: ConstPred) -> Pat {
        Pat {
            konst: Some(pred),
            ..Pat::cvar(name)
        }
    }

    /// A node with op `op` and exactly the sources `src`, in order.
    pub fn op(op: Op, src: impl Into<Vec<Pat>>) -> Pat {
        Pat {
            ops: Some(vec![op]),
            src: Some(src.into()),
            ..Pat::blank()
        }
    }

    /// A node whose op is one of `ops`, with exactly the sources `src`, in order.
    pub fn ops(ops: &[Op], src: impl Into<Vec<Pat>>) -> Pat {
        Pat {
            ops: Some(ops.to_vec()),
            src: Some(src.into()),
            ..Pat::blank()
        }
    }

    /// A node with op `op` and any sources.
    pub fn node(op: Op) -> Pat {
        Pat {
            ops: Some(vec![op]),
            ..Pat::blank()
        }
    }

    /// A binary node with op `op` whose two sources match `src` in either order.
    ///
    /// Panics (a programming error in a rule table) unless [`is_commutative`]`(op)`.
    /// Note that float MAX is not *bit*-commutative (`max(+0, -0)` returns its first operand's
    /// bits): a rule that matches float MAX commutatively must be exact for both orders.
    pub fn comm(op: Op, src: [Pat; 2]) -> Pat {
        Pat::comm_ops(&[op], src)
    }

    /// Like [`Pat::comm`] with a set of ops.
    pub fn comm_ops(ops: &[Op], src: [Pat; 2]) -> Pat {
        for op in ops {
            assert!(is_commutative(*op), "Pat::comm: {op} is not commutative");
        }
        Pat {
            ops: Some(ops.to_vec()),
            src: Some(src.into()),
            commutative: true,
            ..Pat::blank()
        }
    }

    /// Capture the matched node as `name`.
    pub fn named(mut self, name: &'static str) -> Pat {
        self.name = Some(name);
        self
    }

    /// Require the node's dtype to be `dt`.
    pub fn dtype(mut self, dt: DType) -> Pat {
        self.dtype = Some(DTypeCheck::Is(dt));
        self
    }

    /// Require the node's dtype to satisfy `pred`.
    pub fn dtype_where(mut self, pred: DTypePred) -> Pat {
        self.dtype = Some(DTypeCheck::Where(pred));
        self
    }

    /// Require the node's arg to satisfy `pred`.
    pub fn arg_where(mut self, pred: ArgPred) -> Pat {
        self.arg = Some(pred);
        self
    }

    /// Require `guard` to hold over the captures once this (sub)pattern has matched.
    pub fn guard(mut self, guard: Guard) -> Pat {
        self.guard = Some(guard);
        self
    }

    /// The ops this pattern's root can match (`None`: any op). The engine indexes rules by it.
    pub fn root_ops(&self) -> Option<&[Op]> {
        self.ops.as_deref()
    }

    /// Every way this pattern matches the node `id`, in a deterministic order.
    pub fn matches(&self, g: &Graph, id: NodeId) -> Vec<Captures> {
        let mut out = Vec::new();
        self.match_into(g, id, Captures::default(), &mut out);
        out
    }

    /// The first match, if any.
    pub fn first_match(&self, g: &Graph, id: NodeId) -> Option<Captures> {
        self.matches(g, id).into_iter().next()
    }

    fn match_into(&self, g: &Graph, id: NodeId, caps: Captures, out: &mut Vec<Captures>) {
        let n = g.node(id);
        if let Some(ops) = &self.ops {
            if !ops.contains(&n.op) {
                return;
            }
        }
        match self.dtype {
            Some(DTypeCheck::Is(dt)) if n.dtype != dt => return,
            Some(DTypeCheck::Where(p)) if !p(n.dtype) => return,
            _ => {}
        }
        if let Some(p) = self.arg {
            if !p(&n.arg) {
                return;
            }
        }
        if let Some(p) = self.konst {
            match n.arg {
                Arg::Const(bits) if n.op == Op::CONST && p(n.dtype, bits) => {}
                _ => return,
            }
        }
        let mut caps = caps;
        if let Some(name) = self.name {
            if !caps.bind(name, id) {
                return;
            }
        }
        let Some(pats) = &self.src else {
            self.finish(g, caps, out);
            return;
        };
        if pats.len() != n.src.len() {
            return;
        }
        let straight: Vec<usize> = (0..pats.len()).collect();
        let mut orders = vec![straight];
        if self.commutative && n.src.len() == 2 && n.src[0] != n.src[1] {
            orders.push(vec![1, 0]);
        }
        for order in orders {
            // order[i]: which source the i-th sub-pattern is matched against.
            let mut cur = vec![caps.clone()];
            for (pi, &si) in order.iter().enumerate() {
                let mut next = Vec::new();
                for c in cur {
                    pats[pi].match_into(g, n.src[si], c, &mut next);
                }
                cur = next;
                if cur.is_empty() {
                    break;
                }
            }
            for c in cur {
                self.finish(g, c, out);
            }
        }
    }

    fn finish(&self, g: &Graph, caps: Captures, out: &mut Vec<Captures>) {
        if self.guard.is_none_or(|guard| guard(g, &caps)) {
            out.push(caps);
        }
    }
}

/// What a match captured: name → node, in the order the names were bound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captures {
    binds: Vec<(&'static str, NodeId)>,
}

impl Captures {
    /// The node captured as `name`.
    pub fn get(&self, name: &str) -> Option<NodeId> {
        self.binds
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, id)| id)
    }

    /// The bits of the CONST captured as `name` (`None` when it is not a CONST).
    pub fn const_bits(&self, g: &Graph, name: &str) -> Option<u64> {
        let n = g.node(self.get(name)?);
        match n.arg {
            Arg::Const(b) if n.op == Op::CONST => Some(b),
            _ => None,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, NodeId)> + '_ {
        self.binds.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.binds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// Binds `name` to `id`; false when `name` is already bound to another node.
    fn bind(&mut self, name: &'static str, id: NodeId) -> bool {
        match self.get(name) {
            Some(prev) => prev == id,
            None => {
                self.binds.push((name, id));
                true
            }
        }
    }
}

impl Index<&str> for Captures {
    type Output = NodeId;

    /// Panics when the pattern has no capture named `name` (a bug in the rule).
    fn index(&self, name: &str) -> &NodeId {
        match self.binds.iter().find(|(n, _)| *n == name) {
            Some((_, id)) => id,
            None => panic!("no capture named '{name}' (captured: {self})"),
        }
    }
}

impl fmt::Display for Captures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .binds
            .iter()
            .map(|(n, id)| format!("{n}={id}"))
            .collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uopkit_interp::ir::Node;

    fn konst(g: &mut Graph, dt: DType, v: u64) -> NodeId {
        g.add(Node {
            op: Op::CONST,
            dtype: dt,
            src: vec![],
            arg: Arg::Const(v),
        })
    }
    fn bin(g: &mut Graph, op: Op, a: NodeId, b: NodeId) -> NodeId {
        let dt = g.node(a).dtype;
        g.add(Node {
            op,
            dtype: dt,
            src: vec![a, b],
            arg: Arg::None,
        })
    }

    #[test]
    fn var_and_const_captures() {
        let mut g = Graph::new();
        let x = g.add(Node {
            op: Op::RANGE,
            dtype: DType::Int64,
            src: vec![],
            arg: Arg::Index(0),
        });
        let c = konst(&mut g, DType::Int64, 3);
        let e = bin(&mut g, Op::ADD, x, c);
        let p = Pat::op(Op::ADD, [Pat::var("x"), Pat::cvar("c")]);
        let m = p.matches(&g, e);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0]["x"], x);
        assert_eq!(m[0]["c"], c);
        assert_eq!(m[0].const_bits(&g, "c"), Some(3));
        assert_eq!(m[0].const_bits(&g, "x"), None);
        // Written order only: c + x does not match a non-commutative pattern.
        let e2 = bin(&mut g, Op::ADD, c, x);
        assert!(p.matches(&g, e2).is_empty());
    }

    #[test]
    fn commutative_matching_yields_both_orders() {
        let mut g = Graph::new();
        let a = konst(&mut g, DType::Int32, 1);
        let b = konst(&mut g, DType::Int32, 2);
        let e = bin(&mut g, Op::MUL, a, b);
        let p = Pat::comm(Op::MUL, [Pat::var("x"), Pat::var("y")]);
        let m = p.matches(&g, e);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0]["x"], m[0]["y"]), (a, b));
        assert_eq!((m[1]["x"], m[1]["y"]), (b, a));
        // Equal operands: one match, not two.
        let e2 = bin(&mut g, Op::MUL, a, a);
        assert_eq!(p.matches(&g, e2).len(), 1);
    }

    #[test]
    fn repeated_names_bind_consistently() {
        let mut g = Graph::new();
        let a = konst(&mut g, DType::Int32, 1);
        let b = konst(&mut g, DType::Int32, 2);
        let p = Pat::op(Op::ADD, [Pat::var("x"), Pat::var("x")]);
        let aa = bin(&mut g, Op::ADD, a, a);
        let ab = bin(&mut g, Op::ADD, a, b);
        assert_eq!(p.matches(&g, aa).len(), 1);
        assert!(p.matches(&g, ab).is_empty());
    }

    #[test]
    fn dtype_arg_const_and_guard_predicates() {
        let mut g = Graph::new();
        let z = konst(&mut g, DType::Int8, 0);
        let one = konst(&mut g, DType::Int8, 1);
        let f = konst(&mut g, DType::Float32, 0);
        assert!(Pat::const_where("z", |_, b| b == 0)
            .first_match(&g, z)
            .is_some());
        assert!(Pat::const_where("z", |_, b| b == 0)
            .first_match(&g, one)
            .is_none());
        assert!(Pat::cvar("c")
            .dtype(DType::Int8)
            .first_match(&g, f)
            .is_none());
        assert!(Pat::cvar("c")
            .dtype_where(DType::is_float)
            .first_match(&g, f)
            .is_some());
        assert!(Pat::any()
            .arg_where(|a| matches!(a, Arg::Const(1)))
            .first_match(&g, one)
            .is_some());
        let e = bin(&mut g, Op::ADD, z, one);
        let p = Pat::comm(Op::ADD, [Pat::cvar("a"), Pat::cvar("b")])
            .guard(|g, c| c.const_bits(g, "a").unwrap() < c.const_bits(g, "b").unwrap());
        let m = p.matches(&g, e);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0]["a"], z);
        // A set of ops; any sources.
        assert!(Pat::ops(&[Op::SUB, Op::ADD], [Pat::any(), Pat::any()])
            .first_match(&g, e)
            .is_some());
        assert!(Pat::node(Op::ADD).first_match(&g, e).is_some());
        assert!(Pat::node(Op::MUL).first_match(&g, e).is_none());
        // Arity must match exactly.
        assert!(Pat::op(Op::ADD, [Pat::any()]).first_match(&g, e).is_none());
    }

    #[test]
    #[should_panic(expected = "not commutative")]
    fn comm_rejects_non_commutative_ops() {
        let _ = Pat::comm(Op::SUB, [Pat::any(), Pat::any()]);
    }
}
