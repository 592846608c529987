//! Linearizing: a kernel graph → the linear [`Program`] the kernel interpreter runs and the
//! renderers print. The last stage before rendering, as in tinygrad.
//!
//! The effects are emitted from the SINK in order. `END(body, range)` becomes a loop: first
//! everything `body` needs that does not depend on `range` (nor on a loop not open yet) is
//! emitted before the loop — loop-invariant values are hoisted, and an accumulator's reset,
//! which depends on the outer ranges only, lands before the inner loop — then `RANGE`, the
//! body, `END`. A value is emitted once per scope where it is visible (a value made inside a
//! loop is not used after it), and a node is only emitted where all its ranges are open:
//! anything else is a malformed graph ([`KernelGraphError::OutOfScope`]).
//!
//! Deterministic: sources are visited in order, hoisting in node-id (topological) order.

use std::collections::{BTreeMap, BTreeSet};

use uopkit_interp::ir::{NodeId, Op};
use uopkit_interp::kernel::{InstId, KArg, Program};

use crate::kgraph::{karg, KernelGraph, KernelGraphError, Ranges};

/// The linear program of a kernel graph.
pub fn linearize(k: &KernelGraph) -> Result<Program, KernelGraphError> {
    let mut l = Lin {
        k,
        ranges: Ranges::default(),
        prog: Program::new(k.name.clone(), k.params.clone()),
        scopes: vec![BTreeMap::new()],
        open: vec![],
        done: BTreeSet::new(),
    };
    l.emit(k.sink)?;
    Ok(l.prog)
}

struct Lin<'a> {
    k: &'a KernelGraph,
    ranges: Ranges,
    prog: Program,
    /// The instruction of each emitted value, per open scope (outer scopes are visible).
    scopes: Vec<BTreeMap<NodeId, InstId>>,
    /// The open RANGE nodes, outermost first.
    open: Vec<NodeId>,
    /// Effects (and effect-only nodes) already emitted.
    done: BTreeSet<NodeId>,
}

impl Lin<'_> {
    fn lookup(&self, n: NodeId) -> Option<InstId> {
        self.scopes.iter().rev().find_map(|s| s.get(&n).copied())
    }

    fn emitted(&self, n: NodeId) -> bool {
        self.done.contains(&n) || self.lookup(n).is_some()
    }

    fn remember(&mut self, n: NodeId, v: InstId) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(n, v);
        }
    }

    fn malformed(&self, node: NodeId, reason: impl Into<String>) -> KernelGraphError {
        KernelGraphError::Malformed {
            kernel: self.k.name.clone(),
            node,
            reason: reason.into(),
        }
    }

    /// The ranges of `n` that are not open now, if any.
    fn closed_range(&mut self, n: NodeId) -> Option<NodeId> {
        let open = &self.open;
        self.ranges
            .of(&self.k.graph, n)
            .iter()
            .find(|r| !open.contains(r))
            .copied()
    }

    /// Emits `n` (and what it needs); returns its instruction when it is a value.
    fn emit(&mut self, n: NodeId) -> Result<Option<InstId>, KernelGraphError> {
        if let Some(v) = self.lookup(n) {
            return Ok(Some(v));
        }
        if self.done.contains(&n) {
            return Ok(None);
        }
        if let Some(range) = self.closed_range(n) {
            return Err(KernelGraphError::OutOfScope {
                kernel: self.k.name.clone(),
                node: n,
                range,
            });
        }
        let node = self.k.node(n).clone();
        match node.op {
            Op::END => {
                self.emit_loop(n)?;
                Ok(None)
            }
            Op::SINK | Op::GROUP => {
                for &s in &node.src {
                    self.emit(s)?;
                }
                self.done.insert(n);
                Ok(None)
            }
            Op::AFTER => {
                for &s in node.src.iter().skip(1) {
                    self.emit(s)?;
                }
                let Some(&buf) = node.src.first() else {
                    return Err(self.malformed(n, "AFTER without a buffer"));
                };
                let v = self.value(buf)?;
                self.remember(n, v);
                Ok(Some(v))
            }
            Op::RANGE => Err(self.malformed(n, "a RANGE is only opened by its END")),
            Op::REDUCE => Err(self.malformed(
                n,
                "REDUCE must be expanded by a pass (optimize::reduce) before linearizing",
            )),
            Op::BARRIER => {
                for &s in &node.src {
                    self.emit(s)?;
                }
                self.prog.push(Op::BARRIER, node.dtype, vec![], KArg::None);
                self.done.insert(n);
                Ok(None)
            }
            Op::STORE => {
                let mut src = vec![];
                for &s in &node.src {
                    src.push(self.value(s)?);
                }
                self.prog.push(Op::STORE, node.dtype, src, KArg::None);
                self.done.insert(n);
                Ok(None)
            }
            _ => {
                let mut src = vec![];
                for &s in &node.src {
                    src.push(self.value(s)?);
                }
                let v = self.prog.push(node.op, node.dtype, src, karg(&node));
                self.remember(n, v);
                Ok(Some(v))
            }
        }
    }

    fn value(&mut self, n: NodeId) -> Result<InstId, KernelGraphError> {
        match self.emit(n)? {
            Some(v) => Ok(v),
            None => Err(self.malformed(n, "an effect used as a value")),
        }
    }

    /// `END(body, range)`: hoist what the body needs outside the loop, then the loop.
    fn emit_loop(&mut self, n: NodeId) -> Result<(), KernelGraphError> {
        let node = self.k.node(n).clone();
        let (Some(&body), Some(&range)) = (node.src.first(), node.src.get(1)) else {
            return Err(self.malformed(n, "END needs (body, range)"));
        };
        let r = self.k.node(range).clone();
        if r.op != Op::RANGE || r.src.len() != 1 {
            return Err(self.malformed(n, "END's second source must be a RANGE"));
        }
        let end = self.value(r.src[0])?;
        for c in self.k.graph.reachable(&[body]) {
            if c == range || self.emitted(c) {
                continue;
            }
            let op = self.k.node(c).op;
            if op == Op::RANGE || self.closed_range(c).is_some() {
                continue;
            }
            self.emit(c)?;
        }
        let ri = self.prog.push(Op::RANGE, r.dtype, vec![end], karg(&r));
        self.open.push(range);
        self.scopes.push(BTreeMap::from([(range, ri)]));
        let res = self.emit(body);
        self.scopes.pop();
        self.open.pop();
        res?;
        self.prog.push(
            Op::END,
            uopkit_interp::ir::DType::Void,
            vec![ri],
            KArg::None,
        );
        self.done.insert(n);
        Ok(())
    }
}
