//! Building a kernel graph in program order: [`Builder::push`] takes instructions as the
//! linear form spells them (RANGE opens a loop, END closes it) and turns position into
//! edges: the effects of a loop body become `END(body, range)`, and every INDEX of a
//! buffer the kernel writes goes through `AFTER(buffer, last effect, open ranges…)`.
//! A read of a written buffer is pending until the buffer's next effect, which comes after
//! it; a read still pending when its loop closes is pending as that loop's END (or, folded
//! by a REDUCE, as the REDUCE), since nothing outside the loop may name it.
//! [`lift`] feeds a whole [`Program`] through it.

use std::collections::{BTreeMap, BTreeSet};

use uopkit_interp::ir::{DType, Graph, KArg, NodeId, Op};
use uopkit_interp::kernel::{InstId, ParamDecl, Program};

use super::{add, KernelGraph, KernelGraphError, Ranges};

struct Scope {
    /// The RANGE this scope is the body of (None at the top level).
    range: Option<NodeId>,
    effects: Vec<NodeId>,
    /// Buffers whose last effect happened in this scope.
    wrote: BTreeSet<NodeId>,
}

/// Builds one kernel graph from instructions in program order.
pub struct Builder {
    name: String,
    params: Vec<ParamDecl>,
    pub graph: Graph,
    scopes: Vec<Scope>,
    /// Buffers (PARAM/BUFFER nodes) the kernel writes, and the last effect on each.
    written: BTreeSet<NodeId>,
    last: BTreeMap<NodeId, NodeId>,
    /// The buffer each INDEX node addresses.
    index_buf: BTreeMap<NodeId, NodeId>,
    /// Loads of each written buffer since its last effect: the next effect on the buffer
    /// comes after them (a write never overtakes an earlier read).
    reads: BTreeMap<NodeId, Vec<NodeId>>,
    /// The open ranges of the nodes so far (to tell which pending reads a loop's END closes).
    ranges: Ranges,
    next_tag: u32,
}

impl Builder {
    pub fn new(name: impl Into<String>, params: Vec<ParamDecl>) -> Builder {
        Builder {
            name: name.into(),
            params,
            graph: Graph::new(),
            scopes: vec![Scope {
                range: None,
                effects: vec![],
                wrote: BTreeSet::new(),
            }],
            written: BTreeSet::new(),
            last: BTreeMap::new(),
            index_buf: BTreeMap::new(),
            reads: BTreeMap::new(),
            ranges: Ranges::default(),
            next_tag: 1,
        }
    }

    pub fn params(&self) -> &[ParamDecl] {
        &self.params
    }

    fn tag(&mut self) -> u32 {
        let t = self.next_tag;
        self.next_tag += 1;
        t
    }

    fn open_ranges(&self) -> Vec<NodeId> {
        self.scopes.iter().filter_map(|s| s.range).collect()
    }

    fn effect(&mut self, e: NodeId, bufs: impl IntoIterator<Item = NodeId>) {
        let scope = self
            .scopes
            .last_mut()
            .expect("the top scope is never closed");
        scope.effects.push(e);
        for b in bufs {
            self.last.insert(b, e);
            scope.wrote.insert(b);
        }
    }

    /// Removes the pending reads that need `range` open; the buffers they read.
    fn take_reads_in(&mut self, range: NodeId) -> BTreeSet<NodeId> {
        let mut bufs = BTreeSet::new();
        for (b, rs) in self.reads.iter_mut() {
            let before = rs.len();
            rs.retain(|&r| !self.ranges.of(&self.graph, r).contains(&range));
            if rs.len() != before {
                bufs.insert(*b);
            }
        }
        self.reads.retain(|_, rs| !rs.is_empty());
        bufs
    }

    /// Whether the innermost open loop has effects so far.
    pub fn scope_has_effects(&self) -> bool {
        self.scopes.last().is_some_and(|s| !s.effects.is_empty())
    }

    /// Appends one instruction (sources are earlier results of `push`) and returns its node.
    pub fn push(&mut self, op: Op, dtype: DType, src: Vec<NodeId>, arg: KArg) -> NodeId {
        let g = &mut self.graph;
        match op {
            Op::PARAM => {
                let id = add(g, op, dtype, src, arg.clone(), 0);
                if let KArg::Param(s) = arg {
                    if self.params.get(s as usize).is_some_and(|p| p.written) {
                        self.written.insert(id);
                    }
                }
                id
            }
            Op::BUFFER => {
                let tag = self.tag();
                let id = add(&mut self.graph, op, dtype, src, arg, tag);
                self.written.insert(id);
                id
            }
            Op::RANGE => {
                let id = add(g, op, dtype, src, arg, 0);
                self.scopes.push(Scope {
                    range: Some(id),
                    effects: vec![],
                    wrote: BTreeSet::new(),
                });
                id
            }
            Op::END => {
                let Some(scope) = (self.scopes.len() > 1).then(|| self.scopes.pop()).flatten()
                else {
                    return src.first().copied().unwrap_or(NodeId(0));
                };
                let Some(range) = scope.range else {
                    return NodeId(0);
                };
                // Reads made in the loop and still pending (no later effect on their buffer
                // in it) need `range`, which is closed from here on: a later effect on the
                // buffer comes after the END instead, which comes after every iteration. In
                // a loop without effects such reads are dead (a value made in a loop is not
                // used after it; one a REDUCE folds is pending as the REDUCE).
                let inner = self.take_reads_in(range);
                let body = match scope.effects.len() {
                    0 => return range,
                    1 => scope.effects[0],
                    _ => add(
                        &mut self.graph,
                        Op::GROUP,
                        DType::Void,
                        scope.effects,
                        KArg::None,
                        0,
                    ),
                };
                let end = add(
                    &mut self.graph,
                    Op::END,
                    DType::Void,
                    vec![body, range],
                    KArg::None,
                    0,
                );
                self.effect(end, scope.wrote);
                for b in inner {
                    self.reads.entry(b).or_default().push(end);
                }
                end
            }
            Op::INDEX => {
                let buf = src[0];
                let mut base = buf;
                if self.written.contains(&buf) {
                    let mut deps: Vec<NodeId> = self.last.get(&buf).copied().into_iter().collect();
                    deps.extend(self.open_ranges());
                    if !deps.is_empty() {
                        let bdt = self.graph.node(buf).dtype;
                        let mut s = vec![buf];
                        s.extend(deps);
                        base = add(&mut self.graph, Op::AFTER, bdt, s, KArg::None, 0);
                    }
                }
                let mut s = src;
                s[0] = base;
                let id = add(&mut self.graph, op, dtype, s, arg, 0);
                self.index_buf.insert(id, buf);
                id
            }
            Op::LOAD => {
                let id = add(g, op, dtype, src.clone(), arg, 0);
                if let Some(&buf) = src.first().and_then(|i| self.index_buf.get(i)) {
                    if self.written.contains(&buf) {
                        self.reads.entry(buf).or_default().push(id);
                    }
                }
                id
            }
            Op::STORE => {
                let mut src = src;
                let buf = src.first().and_then(|i| self.index_buf.get(i)).copied();
                // Reads of the buffer since its last effect that the store does not already
                // depend on become sources of its address: the store stays after them.
                if let (Some(b), Some(&at)) = (buf, src.first()) {
                    let pending = self.reads.remove(&b).unwrap_or_default();
                    let reached = reaches(&self.graph, &src, &pending);
                    let needed: Vec<NodeId> = pending
                        .into_iter()
                        .filter(|l| !reached.contains(l))
                        .collect();
                    if !needed.is_empty() {
                        let at_node = self.graph.node(at).clone();
                        let base = at_node.src[0];
                        let mut deps = if self.graph.node(base).op == Op::AFTER {
                            self.graph.node(base).src.clone()
                        } else {
                            vec![base]
                        };
                        deps.extend(needed);
                        let bdt = self.graph.node(b).dtype;
                        let after = add(&mut self.graph, Op::AFTER, bdt, deps, KArg::None, 0);
                        let mut isrc = at_node.src.clone();
                        isrc[0] = after;
                        let at2 = add(
                            &mut self.graph,
                            Op::INDEX,
                            at_node.dtype,
                            isrc,
                            KArg::None,
                            0,
                        );
                        self.index_buf.insert(at2, b);
                        src[0] = at2;
                    }
                }
                let id = add(&mut self.graph, op, dtype, src, arg, 0);
                self.effect(id, buf);
                id
            }
            Op::BARRIER => {
                // After every effect so far, inside the open loops; every buffer's next
                // access comes after it.
                let mut s: Vec<NodeId> = self
                    .last
                    .values()
                    .copied()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                // …and after every read not yet followed by an effect.
                s.extend(std::mem::take(&mut self.reads).into_values().flatten());
                s.extend(self.open_ranges());
                let tag = self.tag();
                let id = add(&mut self.graph, op, dtype, s, arg, tag);
                let bufs: Vec<NodeId> = self.written.iter().copied().collect();
                self.effect(id, bufs);
                id
            }
            _ => add(g, op, dtype, src, arg, 0),
        }
    }

    /// A REDUCE node: `value` folded with `op` over `ranges` in `order` (which it closes; their loops'
    /// scopes must be closed by the caller after this call, without effects in them).
    pub fn reduce(
        &mut self,
        op: Op,
        dtype: DType,
        value: NodeId,
        ranges: &[NodeId],
        order: uopkit_interp::ir::ReduceOrder,
    ) -> NodeId {
        let r = super::reduce(&mut self.graph, op, dtype, value, ranges, order);
        // The pending reads the fold reads inside its loops are pending as the REDUCE: a
        // later effect on their buffer comes after it (the loops' ENDs drop the others).
        let pending: Vec<NodeId> = self.reads.values().flatten().copied().collect();
        let folded = reaches(&self.graph, &[value], &pending);
        for rs in self.reads.values_mut() {
            let before = rs.len();
            rs.retain(|l| {
                !(folded.contains(l)
                    && ranges
                        .iter()
                        .any(|x| self.ranges.of(&self.graph, *l).contains(x)))
            });
            if rs.len() != before {
                rs.push(r);
            }
        }
        r
    }

    /// The kernel graph: a SINK of the top-level effects. Loops still open are an error.
    pub fn finish(mut self) -> Result<KernelGraph, KernelGraphError> {
        if self.scopes.len() != 1 {
            let range = self
                .scopes
                .last()
                .and_then(|s| s.range)
                .unwrap_or(NodeId(0));
            return Err(KernelGraphError::Malformed {
                kernel: self.name,
                node: range,
                reason: "a loop is not closed".into(),
            });
        }
        let top = self.scopes.pop().map(|s| s.effects).unwrap_or_default();
        let sink = add(&mut self.graph, Op::SINK, DType::Void, top, KArg::None, 0);
        Ok(KernelGraph {
            name: self.name,
            params: self.params,
            graph: self.graph,
            sink,
        })
    }
}

/// Which of `targets` the nodes `from` depend on. Sources have lower ids than their users,
/// so the search never goes below the smallest target.
fn reaches(g: &Graph, from: &[NodeId], targets: &[NodeId]) -> BTreeSet<NodeId> {
    let Some(&floor) = targets.iter().min() else {
        return BTreeSet::new();
    };
    let want: BTreeSet<NodeId> = targets.iter().copied().collect();
    let mut found = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut stack: Vec<NodeId> = from.to_vec();
    while let Some(n) = stack.pop() {
        if n < floor || !seen.insert(n) {
            continue;
        }
        if want.contains(&n) {
            found.insert(n);
        }
        stack.extend(g.node(n).src.iter().copied());
    }
    found
}

/// A linear program as a kernel graph (the inverse of linearizing, up to placement:
/// linearizing the result computes the same values).
pub fn lift(p: &Program) -> Result<KernelGraph, KernelGraphError> {
    let mut b = Builder::new(p.name.clone(), p.params.clone());
    let mut map: Vec<NodeId> = Vec::with_capacity(p.insts.len());
    for (i, inst) in p.insts.iter().enumerate() {
        let mut src = Vec::with_capacity(inst.src.len());
        for s in &inst.src {
            match map.get(s.index()) {
                Some(&n) => src.push(n),
                None => {
                    return Err(KernelGraphError::Lift {
                        kernel: p.name.clone(),
                        inst: i as u32,
                        reason: format!("source {} is not an earlier instruction", InstId(s.0)),
                    })
                }
            }
        }
        map.push(b.push(inst.op, inst.dtype, src, inst.arg.clone()));
    }
    b.finish()
}
