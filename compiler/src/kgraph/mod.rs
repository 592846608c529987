//! Kernels as UOp graphs: what the lowering builds, the optimization passes rewrite and the
//! linearizer turns, last, into the linear [`Program`] that the kernel interpreter runs and
//! the renderers print (tinygrad's design: the kernel is a graph until `linearize`).
//!
//! A kernel graph lives in an ordinary hash-consed [`Graph`]; kernel-level nodes carry
//! [`Arg::Kernel`]. Its root is a `SINK` of effects. There is no statement order in a graph,
//! so everything the linear form says by position is said by an edge:
//!
//! | node | src | meaning |
//! |---|---|---|
//! | `PARAM` | – | the buffer in param slot `Param(s)` |
//! | `BUFFER` | – | a register (`Reg(n)`) or local (`Local(n)`) buffer; the tag keeps two apart |
//! | `RANGE` | (end) | a loop variable 0..end, `Axis(a)`; a node *depends on* the ranges it reaches |
//! | `SPECIAL` | (end) | a launch index (`gidxN`, `lidxN`, `idxN`) |
//! | `AFTER` | (buffer, deps…) | the buffer once `deps` (effects, or ranges: "in this iteration") happened |
//! | `INDEX` | (buffer or AFTER, idx) | an address |
//! | `LOAD`, `STORE` | as in the linear form | `STORE` is an effect |
//! | `REDUCE` | (value, ranges…) | `Arg::Reduce`: fold `value` over the ranges (closes them); expanded by a pass |
//! | `END` | (body, range) | the effect `body` once per iteration of `range` (closes it) |
//! | `GROUP` | (effects…) | the effects in this order |
//! | `BARRIER` | (deps…) | an effect after `deps`; the tag keeps two apart |
//! | `SINK` | (effects…) | the kernel |
//!
//! A node's *ranges* are the RANGEs it depends on that no END or REDUCE between closes
//! ([`Ranges`]): the loops it must be inside. Loads and stores of a buffer the kernel writes
//! reach it through `AFTER(buffer, last effect, open ranges…)` ([`build::Builder`] adds
//! these), so every read sees the write before it and an accumulator's reset stays inside
//! the loop it belongs to.

pub mod build;

use std::collections::BTreeSet;
use std::fmt;

use uopkit_interp::ir::{Arg, DType, Graph, KArg, Node, NodeId, Op};
use uopkit_interp::kernel::ParamDecl;

pub use build::{lift, Builder};

/// Why a kernel graph could not be built or linearized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelGraphError {
    #[error(
        "kernel {kernel}: node {node} needs the loop of range {range}, which is not open there"
    )]
    OutOfScope {
        kernel: String,
        node: NodeId,
        range: NodeId,
    },
    #[error("kernel {kernel}: node {node}: {reason}")]
    Malformed {
        kernel: String,
        node: NodeId,
        reason: String,
    },
    #[error("kernel {kernel}: instruction {inst}: {reason}")]
    Lift {
        kernel: String,
        inst: u32,
        reason: String,
    },
}

/// One kernel as a graph.
#[derive(Clone, Debug)]
pub struct KernelGraph {
    pub name: String,
    pub params: Vec<ParamDecl>,
    pub graph: Graph,
    pub sink: NodeId,
}

impl KernelGraph {
    pub fn node(&self, id: NodeId) -> &Node {
        self.graph.node(id)
    }

    /// The nodes the kernel consists of, in topological order.
    pub fn nodes(&self) -> Vec<NodeId> {
        self.graph.reachable(&[self.sink])
    }

    /// The kernel-level argument of a node (`KArg::None` for a node without one).
    pub fn karg(&self, id: NodeId) -> KArg {
        karg(self.node(id))
    }
}

/// The linear program's argument for a graph node.
pub fn karg(n: &Node) -> KArg {
    match &n.arg {
        Arg::Kernel(k, _) => k.clone(),
        Arg::Const(b) => KArg::Const(*b),
        _ => KArg::None,
    }
}

/// Adds a kernel-level node (`Arg::Kernel(arg, tag)`, or `Arg::Const`/`Arg::None`).
pub fn add(g: &mut Graph, op: Op, dtype: DType, src: Vec<NodeId>, arg: KArg, tag: u32) -> NodeId {
    let arg = match arg {
        KArg::None if tag == 0 => Arg::None,
        KArg::Const(b) => Arg::Const(b),
        k => Arg::Kernel(k, tag),
    };
    g.add(Node {
        op,
        dtype,
        src,
        arg,
    })
}

/// A CONST node.
pub fn konst(g: &mut Graph, dtype: DType, bits: u64) -> NodeId {
    add(g, Op::CONST, dtype, vec![], KArg::Const(bits), 0)
}

/// The open ranges of every node, computed on demand (node ids are topological, so a
/// node's sources are always computed first).
#[derive(Default)]
pub struct Ranges {
    sets: Vec<Option<BTreeSet<NodeId>>>,
}

impl Ranges {
    /// The RANGE nodes `id` depends on that are not closed on the way.
    pub fn of(&mut self, g: &Graph, id: NodeId) -> &BTreeSet<NodeId> {
        if self.sets.len() < g.len() {
            self.sets.resize(g.len(), None);
        }
        if self.sets[id.index()].is_none() {
            // Iteratively: compute every missing source first (sources have lower ids).
            let mut stack = vec![id];
            while let Some(&top) = stack.last() {
                let missing: Vec<NodeId> = g
                    .node(top)
                    .src
                    .iter()
                    .copied()
                    .filter(|s| self.sets[s.index()].is_none())
                    .collect();
                if missing.is_empty() {
                    stack.pop();
                    let set = self.compute(g, top);
                    self.sets[top.index()] = Some(set);
                } else {
                    stack.extend(missing);
                }
            }
        }
        self.sets[id.index()].as_ref().expect("computed above")
    }

    fn compute(&self, g: &Graph, id: NodeId) -> BTreeSet<NodeId> {
        let n = g.node(id);
        let get = |s: &NodeId| self.sets[s.index()].as_ref().expect("sources first");
        let mut set: BTreeSet<NodeId> = BTreeSet::new();
        match n.op {
            // END(body, range…) and REDUCE(value, range…): the first source's ranges minus
            // the ones they close (plus whatever the closed ranges' extents depend on).
            Op::END | Op::REDUCE => {
                if let Some(b) = n.src.first() {
                    set.extend(get(b));
                }
                for r in n.src.iter().skip(1) {
                    set.remove(r);
                    set.extend(g.node(*r).src.iter().flat_map(|e| get(e).iter().copied()));
                }
            }
            _ => {
                for s in &n.src {
                    set.extend(get(s));
                }
                if n.op == Op::RANGE {
                    set.insert(id);
                }
            }
        }
        set
    }
}

impl fmt::Display for KernelGraph {
    /// One node a line, in topological order: `%id = OP dtype(src…) arg`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel graph {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            let w = if p.written { " (written)" } else { "" };
            writeln!(f, "  p{i}: {}[{}]{w}", p.dtype, p.size)?;
        }
        writeln!(f, ")")?;
        for id in self.nodes() {
            let n = self.node(id);
            let srcs: Vec<String> = n.src.iter().map(|s| s.to_string()).collect();
            let arg = match &n.arg {
                Arg::None => String::new(),
                Arg::Const(b) => {
                    format!(" {}", uopkit_interp::scalar::literal::display(n.dtype, *b))
                }
                Arg::Kernel(k, 0) => format!(" {k:?}"),
                Arg::Kernel(k, t) => format!(" {k:?} #{t}"),
                a => format!(" {a:?}"),
            };
            writeln!(f, "  {id} = {} {}({}){arg}", n.op, n.dtype, srcs.join(", "))?;
        }
        Ok(())
    }
}

/// Rebuilds everything `root` reaches with the nodes in `map` replaced (and the nodes above
/// them rebuilt); returns the new root. Hash-consing shares whatever did not change.
pub fn substitute(
    g: &mut Graph,
    root: NodeId,
    map: &std::collections::BTreeMap<NodeId, NodeId>,
) -> NodeId {
    let order = g.reachable(&[root]);
    let mut new: std::collections::BTreeMap<NodeId, NodeId> = map.clone();
    for id in order {
        if new.contains_key(&id) {
            continue;
        }
        let n = g.node(id).clone();
        let src: Vec<NodeId> = n.src.iter().map(|s| *new.get(s).unwrap_or(s)).collect();
        let id2 = if src == n.src {
            id
        } else {
            g.add(Node { src, ..n })
        };
        new.insert(id, id2);
    }
    *new.get(&root).unwrap_or(&root)
}

/// The tag space of nodes made by passes (the builder's tags stay below it).
pub const PASS_TAG: u32 = 1 << 31;

/// A CONST's value as i128, if `id` is an integer CONST.
pub fn const_int(g: &Graph, id: NodeId) -> Option<i128> {
    let n = g.node(id);
    match (n.op, &n.arg) {
        (Op::CONST, Arg::Const(b)) if n.dtype.is_int() => {
            Some(uopkit_interp::scalar::cast::to_i128(n.dtype, *b))
        }
        _ => None,
    }
}

/// The most leaves a `tree(leaf)` reduction is expanded into.
pub const MAX_TREE_LEAVES: usize = 4096;

/// The leaves of the oracle's pairwise order over `n` elements: halves (the first ⌊n/2⌋)
/// down to at most `leaf` elements, in order; None when there would be more than `max`.
pub fn tree_leaves(n: usize, leaf: usize, max: usize) -> Option<Vec<(usize, usize)>> {
    fn split(lo: usize, hi: usize, leaf: usize, max: usize, out: &mut Vec<(usize, usize)>) -> bool {
        if out.len() > max {
            return false;
        }
        if hi - lo <= leaf {
            out.push((lo, hi));
            return out.len() <= max;
        }
        let mid = lo + (hi - lo) / 2;
        split(lo, mid, leaf, max, out) && split(mid, hi, leaf, max, out)
    }
    let mut out = vec![];
    split(0, n, leaf.max(1), max, &mut out).then_some(out)
}

/// An int64 CONST.
pub fn i64c(g: &mut Graph, v: i128) -> NodeId {
    konst(g, DType::Int64, v as i64 as u64)
}

/// An ALU node (or any node without an argument).
pub fn alu(g: &mut Graph, op: Op, dt: DType, src: Vec<NodeId>) -> NodeId {
    add(g, op, dt, src, KArg::None, 0)
}

/// A REDUCE node: `value` folded with `op` over `ranges` (which it closes) in `order`.
pub fn reduce(
    g: &mut Graph,
    op: Op,
    dtype: DType,
    value: NodeId,
    ranges: &[NodeId],
    order: uopkit_interp::ir::ReduceOrder,
) -> NodeId {
    let mut src = vec![value];
    src.extend_from_slice(ranges);
    g.add(Node {
        op: Op::REDUCE,
        dtype,
        src,
        arg: Arg::Reduce {
            op,
            axes: ranges.len(),
            order,
        },
    })
}

/// `x` with the ranges `rs` (extents `ends`, row-major, r₀ the most significant) replaced
/// by the unflattened flat index `f`: r_d = (f / stride_d) mod end_d, r₀ without the mod.
pub fn at_flat(
    g: &mut Graph,
    x: NodeId,
    rs: &[NodeId],
    ends: &[i128],
    f: NodeId,
) -> Option<NodeId> {
    let mut map = std::collections::BTreeMap::new();
    let mut stride: i128 = 1;
    for (d, (&r, &e)) in rs.iter().zip(ends).enumerate().rev() {
        let mut q = if stride == 1 {
            f
        } else {
            let sc = i64c(g, stride);
            alu(g, Op::CDIV, DType::Int64, vec![f, sc])
        };
        if d > 0 {
            let ec = i64c(g, e);
            q = alu(g, Op::CMOD, DType::Int64, vec![q, ec]);
        }
        map.insert(r, q);
        stride = stride.checked_mul(e)?;
    }
    Some(substitute(g, x, &map))
}
