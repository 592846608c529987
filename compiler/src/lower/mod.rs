//! Lowering: one planned kernel (a value expression stored into a buffer view) becomes a
//! kernel-level [`Program`]: a loop per axis of the target view, index arithmetic for every
//! view (movement ops become integer expressions on the loop variables), loads, the fused
//! ALU ops, reductions as loops over a register accumulator, and the store.
//!
//! Index expressions are built as nodes of a small hash-consed graph first ([`index`]), so
//! the rewrite engine's symbolic rules can simplify them before they are emitted.

pub mod index;

use std::collections::BTreeMap;

use uopkit_interp::ir::{Arg, DType, Graph, NodeId, Op, ReduceOrder};
use uopkit_interp::kernel::{KArg, ParamDecl};

use crate::kgraph::{tree_leaves, Builder, KernelGraph, MAX_TREE_LEAVES};
use uopkit_interp::verify::Verified;

use crate::rewrite::trace::{RewriteTrace, TraceGraph};
use crate::rewrite::RuleSet;
use crate::spec::{chain_shape, BufId, BufferDecl, Expr, KernelSpec, Move, Src};
use index::IndexGraph;

/// Why a kernel could not be lowered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot lower node {}: {reason}", node.0)]
pub struct LowerError {
    pub node: NodeId,
    pub reason: String,
}

/// Lowers one kernel, simplifying its index arithmetic with `passes` (rewrite rule sets,
/// applied in order). Returns the program and the buffers to pass, in param slot order.
pub fn lower(
    name: &str,
    spec: &KernelSpec,
    buffers: &[BufferDecl],
    g: &Graph,
    ver: &Verified,
    passes: &[RuleSet],
) -> Result<(KernelGraph, Vec<BufId>), LowerError> {
    lower_traced(name, spec, buffers, g, ver, passes, None)
}

/// [`lower`], recording the rewrite passes' rule applications on the index arithmetic in
/// `trace` (as kernel `name`, [`TraceGraph::Index`]) when given.
pub fn lower_traced(
    name: &str,
    spec: &KernelSpec,
    buffers: &[BufferDecl],
    g: &Graph,
    ver: &Verified,
    passes: &[RuleSet],
    mut trace: Option<&mut RewriteTrace>,
) -> Result<(KernelGraph, Vec<BufId>), LowerError> {
    if let Some(t) = trace.as_deref_mut() {
        t.enter(name, TraceGraph::Index);
    }
    let mut args = vec![spec.target];
    let expr_loads = spec.expr.iter().flat_map(|e| e.loads());
    for src in spec.leaves.values().chain(expr_loads) {
        if !args.contains(&src.buffer) {
            args.push(src.buffer);
        }
    }
    let params = args
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let d = &buffers[b.0 as usize];
            ParamDecl {
                dtype: d.dtype,
                size: d.size,
                written: i == 0,
            }
        })
        .collect();
    let mut l = Lowerer {
        g,
        ver,
        spec,
        buffers,
        kb: Builder::new(name, params),
        ix: IndexGraph::default(),
        scopes: vec![BTreeMap::new()],
        ranges: BTreeMap::new(),
        next_axis: 0,
        slot: args
            .iter()
            .enumerate()
            .map(|(i, b)| (*b, i as u32))
            .collect(),
        params: BTreeMap::new(),
        passes,
        trace,
    };
    let lowered = l.lower_kernel();
    if let Some(t) = l.trace.as_deref_mut() {
        t.snapshot(&l.ix.graph);
    }
    lowered?;
    let kg = l.kb.finish().map_err(|e| LowerError {
        node: spec.value,
        reason: e.to_string(),
    })?;
    Ok((kg, args))
}

/// A node of the kernel graph being built (the tensor graph's nodes are `NodeId`s too).
type KNode = NodeId;

/// A memo key: an index-graph node, or a graph node's value at an index vector under a
/// validity condition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Index(NodeId),
    Value(NodeId, Vec<NodeId>, Option<NodeId>),
}

struct Lowerer<'a> {
    g: &'a Graph,
    ver: &'a Verified,
    spec: &'a KernelSpec,
    buffers: &'a [BufferDecl],
    kb: Builder,
    ix: IndexGraph,
    /// Emitted values per open loop scope (outer scopes are visible inside).
    scopes: Vec<BTreeMap<Key, KNode>>,
    /// The RANGE instruction of each open loop axis.
    ranges: BTreeMap<u32, KNode>,
    next_axis: u32,
    slot: BTreeMap<BufId, u32>,
    params: BTreeMap<u32, KNode>,
    passes: &'a [RuleSet],
    trace: Option<&'a mut RewriteTrace>,
}

impl Lowerer<'_> {
    fn err(&self, node: NodeId, reason: impl Into<String>) -> LowerError {
        LowerError {
            node,
            reason: reason.into(),
        }
    }

    fn lookup(&self, k: &Key) -> Option<KNode> {
        self.scopes.iter().rev().find_map(|s| s.get(k).copied())
    }

    fn remember(&mut self, k: Key, v: KNode) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(k, v);
        }
    }

    /// A constant, emitted once per loop scope (an instruction defined inside a loop is not
    /// visible after it).
    fn konst(&mut self, dtype: DType, bits: u64) -> KNode {
        let k = Key::Index(self.ix.konst(dtype, bits));
        if let Some(v) = self.lookup(&k) {
            return v;
        }
        let v = self.kb.push(Op::CONST, dtype, vec![], KArg::Const(bits));
        self.remember(k, v);
        v
    }

    fn param(&self, b: BufId) -> KNode {
        self.params[&self.slot[&b]]
    }

    /// Opens one loop per dim; returns the loop variables as index-graph nodes.
    fn open_loops(&mut self, shape: &[usize]) -> Vec<NodeId> {
        let mut vars = vec![];
        for &d in shape {
            let end = self.konst(DType::Int64, d as u64);
            let axis = self.next_axis;
            self.next_axis += 1;
            let r = self
                .kb
                .push(Op::RANGE, DType::Int64, vec![end], KArg::Axis(axis));
            self.ranges.insert(axis, r);
            self.scopes.push(BTreeMap::new());
            vars.push(self.ix.range(axis, d));
        }
        vars
    }

    fn close_loops(&mut self, vars: &[NodeId]) {
        for &v in vars.iter().rev() {
            let axis = self.ix.range_axis(v);
            if let Some(r) = axis.and_then(|a| self.ranges.remove(&a)) {
                self.kb.push(Op::END, DType::Void, vec![r], KArg::None);
            }
            self.scopes.pop();
        }
    }

    fn lower_kernel(&mut self) -> Result<(), LowerError> {
        let spec = self.spec;
        for (i, p) in self.kb.params().to_vec().iter().enumerate() {
            let id = self
                .kb
                .push(Op::PARAM, p.dtype, vec![], KArg::Param(i as u32));
            self.params.insert(i as u32, id);
        }
        let size = self.buffers[spec.target.0 as usize].size;
        let shape = chain_shape(size, &spec.target_chain).map_err(|r| self.err(spec.value, r))?;
        let vars = self.open_loops(&shape);
        let (flat, valid) = self.view_index(size, &spec.target_chain, &vars, None);
        if valid.is_some() {
            return Err(self.err(spec.value, "a STORE target view may not pad"));
        }
        let v = match &spec.expr {
            Some(e) => self.expr(e, &vars)?,
            None => self.value(spec.value, &vars, None)?,
        };
        let flat = self.emit_index(flat);
        let p = self.param(spec.target);
        let dtype = self.buffers[spec.target.0 as usize].dtype;
        let at = self.kb.push(Op::INDEX, dtype, vec![p, flat], KArg::None);
        self.kb
            .push(Op::STORE, DType::Void, vec![at, v], KArg::None);
        self.close_loops(&vars);
        Ok(())
    }

    /// Maps an index into the view `chain` (over a flat buffer of `size`) back to a flat
    /// buffer index, with the condition under which the element is not padding.
    fn view_index(
        &mut self,
        size: usize,
        chain: &[Move],
        idx: &[NodeId],
        valid: Option<NodeId>,
    ) -> (NodeId, Option<NodeId>) {
        // RESHAPE of a RESHAPE is the outer RESHAPE of the inner one's source (a reshape's
        // index map is the row-major flatten of its output shape unflattened to its input
        // shape, so the middle shape cancels): a chain of N reshapes lowers as one.
        let mut merged: Vec<&Move> = Vec::with_capacity(chain.len());
        for m in chain {
            if m.op == Op::RESHAPE && merged.last().is_some_and(|p| p.op == Op::RESHAPE) {
                merged.pop();
            }
            merged.push(m);
        }
        let chain = merged;
        let mut shapes = vec![vec![size]];
        for m in &chain {
            let next = uopkit_interp::verify::movement_shape(
                m.op,
                &m.arg,
                shapes.last().map_or(&[][..], |s| s),
            )
            .unwrap_or_default();
            shapes.push(next);
        }
        let mut idx = idx.to_vec();
        let mut valid = valid;
        for (m, in_shape) in chain.iter().zip(&shapes).rev() {
            let (i, v) = self.ix.move_back(m.op, &m.arg, in_shape, &idx);
            idx = i;
            valid = self.ix.and(valid, v);
        }
        (
            idx.first()
                .copied()
                .unwrap_or_else(|| self.ix.konst(DType::Int64, 0)),
            valid,
        )
    }

    /// Emits an index-graph expression (after simplification) as instructions.
    fn emit_index(&mut self, n: NodeId) -> KNode {
        let n = self
            .ix
            .simplify_traced(n, self.passes, self.trace.as_deref_mut());
        self.emit_ix(n)
    }

    fn emit_ix(&mut self, n: NodeId) -> KNode {
        let key = Key::Index(n);
        if let Some(v) = self.lookup(&key) {
            return v;
        }
        let node = self.ix.graph.node(n).clone();
        let v = match (node.op, &node.arg) {
            (Op::CONST, Arg::Const(b)) => return self.konst(node.dtype, *b),
            (Op::RANGE, Arg::Index(axis)) => self.ranges[&(*axis as u32)],
            _ => {
                let srcs = node.src.iter().map(|&s| self.emit_ix(s)).collect();
                self.kb.push(node.op, node.dtype, srcs, KArg::None)
            }
        };
        self.remember(key, v);
        v
    }

    /// The value of graph node `n` at index `idx`; `valid` gates loads (padding).
    fn value(
        &mut self,
        n: NodeId,
        idx: &[NodeId],
        valid: Option<NodeId>,
    ) -> Result<KNode, LowerError> {
        let key = Key::Value(n, idx.to_vec(), valid);
        if let Some(v) = self.lookup(&key) {
            return Ok(v);
        }
        let node = self.g.node(n).clone();
        let info = self.ver.info(n).clone();
        let v = if let Some(src) = self.spec.leaves.get(&n).cloned() {
            self.load(&src, info.dtype, idx, valid)
        } else {
            match node.op {
                Op::CONST => {
                    let Arg::Const(bits) = node.arg else {
                        return Err(self.err(n, "CONST without a value"));
                    };
                    self.konst(node.dtype, bits)
                }
                Op::DETACH | Op::CONTIGUOUS => self.value(node.src[0], idx, valid)?,
                Op::CAST | Op::BITCAST => {
                    let x = self.value(node.src[0], idx, valid)?;
                    self.kb.push(node.op, node.dtype, vec![x], KArg::None)
                }
                op if op.is_alu() => {
                    let mut srcs = vec![];
                    for &s in &node.src {
                        let scalar = self.ver.info(s).shape.is_empty();
                        srcs.push(if scalar {
                            self.value(s, &[], valid)?
                        } else {
                            self.value(s, idx, valid)?
                        });
                    }
                    self.kb.push(op, node.dtype, srcs, KArg::None)
                }
                op if op.is_movement() => {
                    let in_shape = self.ver.info(node.src[0]).shape.clone();
                    let (inner, pad_valid) = self.ix.move_back(op, &node.arg, &in_shape, idx);
                    let inner_valid = self.ix.and(valid, pad_valid);
                    let x = self.value(node.src[0], &inner, inner_valid)?;
                    match pad_valid {
                        None => x,
                        Some(pv) => {
                            // Padding reads zero, whatever the padded expression computes.
                            let c = self.emit_index(pv);
                            let zero = self.konst(node.dtype, 0);
                            self.kb
                                .push(Op::WHERE, node.dtype, vec![c, x, zero], KArg::None)
                        }
                    }
                }
                Op::REDUCE => self.reduce_node(n, idx, valid)?,
                op => {
                    return Err(self.err(
                        n,
                        format!(
                            "{op} cannot be fused into a kernel (it should have been realized)"
                        ),
                    ))
                }
            }
        };
        self.remember(key, v);
        Ok(v)
    }

    /// Loads the element of view `src` at `idx` (0 where the view pads, or where `valid` is
    /// false).
    fn load(&mut self, src: &Src, dtype: DType, idx: &[NodeId], valid: Option<NodeId>) -> KNode {
        let size = self.buffers[src.buffer.0 as usize].size;
        let (flat, gate) = self.view_index(size, &src.chain, idx, valid);
        let flat = self.emit_index(flat);
        let p = self.param(src.buffer);
        let at = self.kb.push(Op::INDEX, dtype, vec![p, flat], KArg::None);
        match gate {
            None => self.kb.push(Op::LOAD, dtype, vec![at], KArg::None),
            Some(gate) => {
                let gate = self.emit_index(gate);
                let alt = self.konst(dtype, 0);
                self.kb
                    .push(Op::LOAD, dtype, vec![at, alt, gate], KArg::None)
            }
        }
    }

    /// A kernel expression that no graph node spells (see [`Expr`]) at index `idx`.
    fn expr(&mut self, e: &Expr, idx: &[NodeId]) -> Result<KNode, LowerError> {
        Ok(match e {
            Expr::Load(src) => {
                let dtype = self.buffers[src.buffer.0 as usize].dtype;
                self.load(src, dtype, idx, None)
            }
            Expr::Alu { op, dtype, src } => {
                let srcs = src
                    .iter()
                    .map(|s| self.expr(s, idx))
                    .collect::<Result<Vec<_>, _>>()?;
                self.kb.push(*op, *dtype, srcs, KArg::None)
            }
        })
    }

    /// A reduction as a kernel-level REDUCE node over the reduced axes' loops, with its
    /// declared order (the `expand_reduce` pass turns it into accumulators in that order; a
    /// GPU pass may split an order-free one over work items).
    fn reduce_node(
        &mut self,
        n: NodeId,
        idx: &[NodeId],
        valid: Option<NodeId>,
    ) -> Result<KNode, LowerError> {
        let node = self.g.node(n).clone();
        let Arg::Reduce {
            op,
            axes,
            ref order,
        } = node.arg
        else {
            return Err(self.err(n, "REDUCE without an op"));
        };
        let in_shape = self.ver.info(node.src[0]).shape.clone();
        if let ReduceOrder::Tree(leaf) = *order {
            let red_n: usize = in_shape[..axes].iter().product();
            if tree_leaves(red_n, leaf, MAX_TREE_LEAVES).is_none() {
                return Err(self.err(
                    n,
                    format!(
                        "a tree order over {red_n} elements in leaves of {leaf} has more than {MAX_TREE_LEAVES} leaves: not lowered"
                    ),
                ));
            }
        }
        let vars = self.open_loops(&in_shape[..axes]);
        let full: Vec<NodeId> = vars.iter().chain(idx).copied().collect();
        let x = self.value(node.src[0], &full, valid)?;
        if self.kb.scope_has_effects() {
            return Err(self.err(n, "a REDUCE's value has effects"));
        }
        let ranges: Vec<KNode> = vars
            .iter()
            .filter_map(|&v| self.ix.range_axis(v))
            .filter_map(|a| self.ranges.get(&a).copied())
            .collect();
        let r = self.kb.reduce(op, node.dtype, x, &ranges, order.clone());
        self.close_loops(&vars);
        Ok(r)
    }
}
