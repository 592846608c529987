//! Realization and fusion: walks the graph from its outputs and emits steps.
//!
//! Realization points: graph buffers (they are storage), STOREs, CONTIGUOUS, COPY results,
//! reductions reached through a movement op, and outputs. Everything else (elementwise,
//! casts, movement, reductions feeding elementwise ops) fuses into the kernel that consumes
//! it. The seeds' rules live here: a STORE into a buffer on another device is a COPY into
//! that buffer (it keeps its identity); a source that is not a whole buffer is first
//! materialized on its own device; a bare COPY is an anonymous store into a fresh buffer on
//! the target device.
//!
//! Multi-device values (a device tuple) are realized as one buffer per device: every node is
//! planned per *component* (`value_c(n, c)` is component `c` of `n`; a single-device value
//! has the one component 0). Kernels on a multi-device value run once per device, MSELECT
//! picks a component, MSTACK lists its sources, a broadcast COPY is one COPY per other device,
//! a gather (COPY of an UNSHARD) copies the shards to the target and writes each into its
//! window of one buffer, and ALLREDUCE is lowered in [`super::allreduce`].

use std::collections::{BTreeMap, BTreeSet};

use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, NodeId, Op};
use uopkit_interp::verify::{storage_view, Verified};

use super::allreduce::AllreduceMode;
use super::versions::{stores_in, Versions};
use super::{BufId, BufferDecl, BufferKind, ScheduleError};
pub use crate::spec::{chain_shape, Expr, KernelSpec, Move, Src, Tag};

#[derive(Clone, Debug)]
pub enum Planned {
    Kernel(KernelSpec),
    Copy { dst: BufId, src: BufId },
}

/// A planned step with the buffer versions it reads and the version it writes.
#[derive(Clone, Debug)]
pub struct PlannedStep {
    pub what: Planned,
    pub reads: Vec<(BufId, Tag)>,
    /// (buffer, version overwritten, version made).
    pub write: (BufId, Tag, Tag),
}

pub struct Planner<'a> {
    pub(super) g: &'a Graph,
    pub(super) ver: &'a Verified,
    versions: Versions,
    pub buffers: Vec<BufferDecl>,
    /// (BUFFER node, component) → its buffer.
    graph_buf: BTreeMap<(NodeId, usize), BufId>,
    pub steps: Vec<PlannedStep>,
    /// (node, component) → where that component's value is.
    values: BTreeMap<(NodeId, usize), Src>,
    /// (node, component) → the value as one whole flat buffer.
    wholes: BTreeMap<(NodeId, usize), Src>,
    /// (node without a device, device) → its value realized on that device.
    values_on: BTreeMap<(NodeId, Device), Src>,
    done_stores: BTreeMap<NodeId, ()>,
    /// How ALLREDUCE is lowered.
    pub allreduce: AllreduceMode,
    /// Copies of old buffer versions taken for steps that also see a newer one.
    snapshots: BTreeMap<(NodeId, BufId, Tag), Src>,
    /// Buffer versions that a planned step overwrites.
    overwritten: std::collections::BTreeSet<(BufId, Tag)>,
}

pub(super) fn err(node: NodeId, reason: impl Into<String>) -> ScheduleError {
    ScheduleError {
        node,
        reason: reason.into(),
    }
}

impl<'a> Planner<'a> {
    pub fn new(g: &'a Graph, ver: &'a Verified, roots: &[NodeId]) -> Result<Self, ScheduleError> {
        let versions = Versions::compute(g, &g.reachable(roots))?;
        Ok(Planner {
            g,
            ver,
            versions,
            buffers: vec![],
            graph_buf: BTreeMap::new(),
            steps: vec![],
            values: BTreeMap::new(),
            wholes: BTreeMap::new(),
            values_on: BTreeMap::new(),
            done_stores: BTreeMap::new(),
            allreduce: AllreduceMode::Auto,
            snapshots: BTreeMap::new(),
            overwritten: std::collections::BTreeSet::new(),
        })
    }

    /// The number of device components of `n`'s value (1 unless it lives on a device tuple).
    pub fn ncomp(&self, n: NodeId) -> usize {
        match &self.ver.info(n).device {
            Some(DeviceSpec::Multi(ds)) => ds.len(),
            _ => 1,
        }
    }

    /// Whether `n`'s value lives on a device tuple.
    pub fn is_multi(&self, n: NodeId) -> bool {
        matches!(self.ver.info(n).device, Some(DeviceSpec::Multi(_)))
    }

    /// The component of `n` that a kernel for component `c` of a value reads (a
    /// single-device value has only component 0).
    fn comp_of(&self, n: NodeId, c: usize) -> usize {
        if self.is_multi(n) {
            c
        } else {
            0
        }
    }

    /// The device component `c` of `n` lives on (a value without a device is computed on the
    /// CPU).
    pub fn device_of(&self, n: NodeId, c: usize) -> Result<Device, ScheduleError> {
        match &self.ver.info(n).device {
            None => Ok(Device::CPU),
            Some(DeviceSpec::Single(d)) => Ok(*d),
            Some(DeviceSpec::Multi(ds)) => ds.get(c).copied().ok_or_else(|| {
                err(
                    n,
                    format!("component {c} of a value on {} devices", ds.len()),
                )
            }),
        }
    }

    pub(super) fn new_buffer(
        &mut self,
        dtype: DType,
        size: usize,
        device: Device,
        kind: BufferKind,
    ) -> BufId {
        let id = BufId(self.buffers.len() as u32);
        self.buffers.push(BufferDecl {
            dtype,
            size,
            device,
            kind,
            storage: id.0,
        });
        id
    }

    fn graph_buffer(&mut self, node: NodeId, c: usize) -> Result<BufId, ScheduleError> {
        let c = self.comp_of(node, c);
        if let Some(&b) = self.graph_buf.get(&(node, c)) {
            return Ok(b);
        }
        let info = self.ver.info(node);
        let device = self.device_of(node, c)?;
        let kind = if self.is_multi(node) {
            BufferKind::GraphComponent(node, c)
        } else {
            BufferKind::Graph(node)
        };
        let b = self.new_buffer(info.dtype, info.shape[0], device, kind);
        self.graph_buf.insert((node, c), b);
        Ok(b)
    }

    /// The buffers of graph BUFFER nodes, by (node, component).
    pub fn graph_buffers(&self) -> &BTreeMap<(NodeId, usize), BufId> {
        &self.graph_buf
    }

    /// The value of `n` (a single-device value, or component 0) as a buffer view,
    /// scheduling whatever computes it.
    pub fn value(&mut self, n: NodeId) -> Result<Src, ScheduleError> {
        self.value_c(n, 0)
    }

    /// Every component of `n`'s value, in device order (one for a single-device value).
    pub fn components(&mut self, n: NodeId) -> Result<Vec<Src>, ScheduleError> {
        (0..self.ncomp(n)).map(|c| self.value_c(n, c)).collect()
    }

    /// Component `c` of the value of `n` as a buffer view, scheduling whatever computes it.
    pub fn value_c(&mut self, n: NodeId, c: usize) -> Result<Src, ScheduleError> {
        let c = self.comp_of(n, c);
        if let Some(s) = self.values.get(&(n, c)) {
            return Ok(s.clone());
        }
        if self.is_view_step(n) {
            return self.view_value(n, c);
        }
        let node = self.g.node(n).clone();
        let src = match node.op {
            Op::BUFFER => Src {
                buffer: self.graph_buffer(n, c)?,
                tag: Tag::Initial,
                chain: vec![],
            },
            Op::AFTER => {
                // The view's own storage may come from an earlier AFTER whose stores come
                // first in program order: plan them before this AFTER's own dependencies,
                // so that their reads of older versions are planned before the overwrites.
                if self.is_storage_view(node.src[0]) {
                    self.value_c(node.src[0], c)?;
                }
                self.run_effects(&node.src[1..])?;
                if self.is_storage_view(node.src[0]) {
                    let (buf, version, chain) = self.versions.root(n)?.clone();
                    let buffer = self.graph_buffer(buf, c)?;
                    let tag = version.map_or(Tag::Initial, Tag::Store);
                    Src {
                        buffer,
                        tag,
                        chain: chain.iter().map(|&m| self.move_of(m)).collect(),
                    }
                } else {
                    self.value_c(node.src[0], c)?
                }
            }
            Op::DETACH => self.value_c(node.src[0], c)?,
            Op::COPY => self.copy_value(n, c)?,
            Op::MSELECT => {
                let Arg::Index(i) = node.arg else {
                    return Err(err(n, "MSELECT without an index"));
                };
                self.value_c(node.src[0], i)?
            }
            Op::MSTACK => {
                let s = *node
                    .src
                    .get(c)
                    .ok_or_else(|| err(n, format!("MSTACK has no source {c}")))?;
                self.value_c(s, 0)?
            }
            Op::UNSHARD => {
                // Outside a COPY (an output): gathered on the tuple's first device.
                let to = self.device_of(n, 0)?;
                self.gather(n, to)?
            }
            Op::ALLREDUCE => {
                let comps = self.allreduce_components(n)?;
                for (k, s) in comps.iter().enumerate() {
                    self.values.insert((n, k), s.clone());
                }
                comps
                    .get(c)
                    .cloned()
                    .ok_or_else(|| err(n, format!("ALLREDUCE has no component {c}")))?
            }
            _ => self.materialize_c(n, c)?,
        };
        self.values.insert((n, c), src.clone());
        Ok(src)
    }

    /// Whether `n` is a movement op or a DETACH on a view of storage: its value is its
    /// source's view with the move (if any) appended ([`Self::view_value`]).
    fn is_view_step(&self, n: NodeId) -> bool {
        let op = self.g.node(n).op;
        (op.is_movement() || op == Op::DETACH) && self.is_storage_view(n)
    }

    /// The value of a view of storage `n` (see [`Self::is_view_step`]): the value of the
    /// first node below it that is not a view step (or whose value is known), with the moves
    /// of the steps between appended. Walks the chain in a loop and remembers the value of
    /// `n` only: a chain of k views costs O(k) time and memory (remembering every view of the
    /// chain kept k chains of up to k moves) and no stack.
    fn view_value(&mut self, n: NodeId, c: usize) -> Result<Src, ScheduleError> {
        let c = self.comp_of(n, c);
        let mut steps = vec![];
        let (mut cur, mut cc) = (n, c);
        let mut src = loop {
            if let Some(s) = self.values.get(&(cur, cc)) {
                break s.clone();
            }
            if !self.is_view_step(cur) {
                break self.value_c(cur, cc)?;
            }
            steps.push(cur);
            cur = self.g.node(cur).src[0];
            cc = self.comp_of(cur, cc);
        };
        src.chain.extend(
            steps
                .iter()
                .rev()
                .filter(|&&m| self.g.node(m).op.is_movement())
                .map(|&m| self.move_of(m)),
        );
        self.values.insert((n, c), src.clone());
        Ok(src)
    }

    /// A COPY: single→single (no step when the devices are equal), single→tuple (a
    /// broadcast: one COPY per other device), tuple→same tuple (nothing moves), UNSHARD→single
    /// (a gather).
    fn copy_value(&mut self, n: NodeId, c: usize) -> Result<Src, ScheduleError> {
        let x = self.g.node(n).src[0];
        let info = self.ver.info(n).clone();
        let to = self.device_of(n, c)?;
        if self.g.node(x).op == Op::UNSHARD {
            return self.gather(x, to);
        }
        let xc = self.comp_of(x, c);
        if self.device_of(x, xc)? == to {
            // Never a COPY from a device to itself: the value is already there.
            return self.value_c(x, xc);
        }
        let from = self.whole_buffer_c(x, xc)?;
        Ok(self.copy_to(&from, to, info.dtype, info.numel(), &info.shape))
    }

    /// Plans a COPY of the whole buffer `from` into a fresh buffer on `to`, seen as `shape`.
    pub(super) fn copy_to(
        &mut self,
        from: &Src,
        to: Device,
        dtype: DType,
        numel: usize,
        shape: &[usize],
    ) -> Src {
        let dst = self.new_buffer(dtype, numel, to, BufferKind::Intermediate);
        let made = self.push(
            Planned::Copy {
                dst,
                src: from.buffer,
            },
            vec![(from.buffer, from.tag)],
            dst,
            Tag::Initial,
        );
        Src {
            buffer: dst,
            tag: made,
            chain: vec![reshape(shape)],
        }
    }

    /// The logical value of `u` = UNSHARD(x, axis) on device `to`: every shard that is not on
    /// `to` is copied there whole, then one kernel per shard writes it into its window of the
    /// concatenation along `axis`.
    fn gather(&mut self, u: NodeId, to: Device) -> Result<Src, ScheduleError> {
        let node = self.g.node(u).clone();
        let Arg::Axis(axis) = node.arg else {
            return Err(err(u, "UNSHARD without an axis"));
        };
        let x = node.src[0];
        let full = self.ver.info(u).clone();
        let shard = self.ver.info(x).clone();
        let mut parts = vec![];
        for c in 0..self.ncomp(x) {
            parts.push(if self.device_of(x, c)? == to {
                self.value_c(x, c)?
            } else {
                let whole = self.whole_buffer_c(x, c)?;
                self.copy_to(&whole, to, shard.dtype, shard.numel(), &shard.shape)
            });
        }
        let target = self.new_buffer(full.dtype, full.numel(), to, BufferKind::Intermediate);
        let mut tag = Tag::Initial;
        for (c, part) in parts.into_iter().enumerate() {
            let mut offsets = vec![0; shard.shape.len()];
            offsets[axis] = c * shard.shape[axis];
            let window = Move {
                op: Op::SHRINK,
                arg: Arg::Window {
                    offsets,
                    sizes: shard.shape.clone(),
                },
            };
            tag = self.expr_kernel_over(
                u,
                to,
                target,
                tag,
                vec![reshape(&full.shape), window],
                Expr::Load(part),
            );
        }
        Ok(Src {
            buffer: target,
            tag,
            chain: vec![reshape(&full.shape)],
        })
    }

    /// Plans a kernel on `device` storing `expr` into the fresh buffer `target` (seen through
    /// `chain`); `value` is the graph node it serves.
    pub(super) fn expr_kernel(
        &mut self,
        value: NodeId,
        device: Device,
        target: BufId,
        chain: Vec<Move>,
        expr: Expr,
    ) -> Tag {
        self.expr_kernel_over(value, device, target, Tag::Initial, chain, expr)
    }

    /// Like [`Planner::expr_kernel`], over version `prev` of `target` (a write into a view
    /// of a buffer that earlier steps wrote too).
    pub(super) fn expr_kernel_over(
        &mut self,
        value: NodeId,
        device: Device,
        target: BufId,
        prev: Tag,
        chain: Vec<Move>,
        expr: Expr,
    ) -> Tag {
        let mut reads: Vec<(BufId, Tag)> = expr.loads().iter().map(|s| (s.buffer, s.tag)).collect();
        reads.sort();
        reads.dedup();
        let spec = KernelSpec {
            device,
            target,
            target_chain: chain,
            value,
            leaves: BTreeMap::new(),
            expr: Some(expr),
        };
        self.push(Planned::Kernel(spec), reads, target, prev)
    }

    /// Movement over storage is a view, not a computation.
    /// Whether `n` is a view of storage: `storage_view(g, n).is_some()`, read from the
    /// graph's per-node flag (O(1); the walk is O(chain) and was made once per node of a
    /// long view chain).
    fn is_storage_view(&self, n: NodeId) -> bool {
        self.g.is_storage(n)
    }

    fn move_of(&self, m: NodeId) -> Move {
        let node = self.g.node(m);
        Move {
            op: node.op,
            arg: node.arg.clone(),
        }
    }

    /// The value of `n` as one whole flat buffer (for COPY, which copies whole buffers).
    pub fn whole_buffer(&mut self, n: NodeId) -> Result<Src, ScheduleError> {
        self.whole_buffer_c(n, 0)
    }

    /// Component `c` of the value of `n` as one whole flat buffer.
    pub fn whole_buffer_c(&mut self, n: NodeId, c: usize) -> Result<Src, ScheduleError> {
        let c = self.comp_of(n, c);
        if let Some(s) = self.wholes.get(&(n, c)).cloned() {
            return Ok(self.unstale(n, s));
        }
        let s = self.value_c(n, c)?;
        let size = self.buffers[s.buffer.0 as usize].size;
        let only_reshapes = s.chain.iter().all(|m| m.op == Op::RESHAPE);
        let s = if only_reshapes && size == self.ver.info(n).numel() {
            s
        } else {
            self.materialize_c(n, c)?
        };
        self.wholes.insert((n, c), s.clone());
        Ok(self.unstale(n, s))
    }

    /// A kernel computing `n` into a fresh buffer.
    pub fn materialize(&mut self, n: NodeId) -> Result<Src, ScheduleError> {
        self.materialize_c(n, 0)
    }

    /// A kernel computing component `c` of `n` into a fresh buffer on its device.
    pub fn materialize_c(&mut self, n: NodeId, c: usize) -> Result<Src, ScheduleError> {
        let c = self.comp_of(n, c);
        let device = self.device_of(n, c)?;
        self.materialize_on(n, c, device)
    }

    /// The value of `n`, which has no device (it is computed from constants only), realized on
    /// `device`, so that a kernel there never reads another device's memory.
    fn value_on(&mut self, n: NodeId, device: Device) -> Result<Src, ScheduleError> {
        if device == self.device_of(n, 0)? {
            return self.value_c(n, 0);
        }
        if let Some(s) = self.values_on.get(&(n, device)) {
            return Ok(s.clone());
        }
        let node = self.g.node(n).clone();
        let src = match node.op {
            Op::AFTER | Op::DETACH if !self.is_storage_view(node.src[0]) => {
                if node.op == Op::AFTER {
                    self.run_effects(&node.src[1..])?;
                }
                self.value_on(node.src[0], device)?
            }
            _ => self.materialize_on(n, 0, device)?,
        };
        self.values_on.insert((n, device), src.clone());
        Ok(src)
    }

    /// A kernel on `device` computing component `c` of `n` into a fresh buffer.
    fn materialize_on(
        &mut self,
        n: NodeId,
        c: usize,
        device: Device,
    ) -> Result<Src, ScheduleError> {
        let info = self.ver.info(n).clone();
        if info.dtype == DType::Void {
            return Err(err(n, "an effect has no value to materialize"));
        }
        if self.g.node(n).op == Op::UNSHARD {
            return Err(err(
                n,
                "an UNSHARD value is only read by a COPY to one device or as an output",
            ));
        }
        let target = self.new_buffer(info.dtype, info.numel(), device, BufferKind::Intermediate);
        let chain = vec![reshape(&info.shape)];
        let made = self.kernel(n, c, device, target, Tag::Initial, chain.clone())?;
        Ok(Src {
            buffer: target,
            tag: made,
            chain,
        })
    }

    /// Copies a whole version of a graph buffer into a fresh buffer on its device.
    fn copy_version(&mut self, whole: Src) -> Src {
        match self.buffers[whole.buffer.0 as usize].kind {
            // The BUFFER node's value is the whole flat buffer.
            BufferKind::Graph(n) | BufferKind::GraphComponent(n, _) => self.snapshot(n, whole),
            // Intermediates are written once and never overwritten.
            BufferKind::Intermediate => whole,
        }
    }

    /// Copies `src` (the value of `n`, a version that a later step overwrites) into a fresh
    /// buffer, so the value survives until the schedule ends.
    pub fn snapshot(&mut self, n: NodeId, src: Src) -> Src {
        let info = self.ver.info(n).clone();
        let device = self.buffers[src.buffer.0 as usize].device;
        let target = self.new_buffer(info.dtype, info.numel(), device, BufferKind::Intermediate);
        let chain = vec![reshape(&info.shape)];
        let reads = vec![(src.buffer, src.tag)];
        let spec = KernelSpec {
            device,
            target,
            target_chain: chain.clone(),
            value: n,
            leaves: BTreeMap::from([(n, src)]),
            expr: None,
        };
        let made = self.push(Planned::Kernel(spec), reads, target, Tag::Initial);
        Src {
            buffer: target,
            tag: made,
            chain,
        }
    }

    /// Plans a kernel storing component `c` of the value of `value` into `target` (seen
    /// through `chain`).
    fn kernel(
        &mut self,
        value: NodeId,
        c: usize,
        device: Device,
        target: BufId,
        prev: Tag,
        chain: Vec<Move>,
    ) -> Result<Tag, ScheduleError> {
        let mut leaves = BTreeMap::new();
        self.collect_leaves(
            value,
            c,
            device,
            false,
            true,
            &mut leaves,
            &mut BTreeSet::new(),
        )?;
        for src in leaves.values_mut() {
            let stale = src.clone();
            *src = self.fresh_leaf(stale);
        }
        let mut reads: Vec<(BufId, Tag)> =
            leaves.values().map(|s: &Src| (s.buffer, s.tag)).collect();
        reads.sort();
        reads.dedup();
        let spec = KernelSpec {
            device,
            target,
            target_chain: chain,
            value,
            leaves,
            expr: None,
        };
        Ok(self.push(Planned::Kernel(spec), reads, target, prev))
    }

    /// A read of a buffer version that an already planned step overwrites goes through a
    /// snapshot taken before that step: the reader may also depend on the newer version (a
    /// value read both before and after an assign, directly or through other steps), and
    /// then it could run neither before nor after the overwrite. The snapshot depends only
    /// on the version it copies, so write-after-read ordering can always place it.
    fn unstale(&mut self, n: NodeId, src: Src) -> Src {
        if !self.overwritten.contains(&(src.buffer, src.tag)) {
            return src;
        }
        let key = (n, src.buffer, src.tag);
        if let Some(s) = self.snapshots.get(&key) {
            return s.clone();
        }
        let s = self.snapshot(n, src);
        self.snapshots.insert(key, s.clone());
        s
    }

    /// [`Self::unstale`] for a leaf of a kernel, keyed by the leaf's own view.
    fn fresh_leaf(&mut self, src: Src) -> Src {
        if !self.overwritten.contains(&(src.buffer, src.tag)) {
            return src;
        }
        // Copy the whole version (views stay views of the copy).
        let key = (NodeId(u32::MAX), src.buffer, src.tag);
        let copy = match self.snapshots.get(&key) {
            Some(s) => s.clone(),
            None => {
                let whole = Src {
                    buffer: src.buffer,
                    tag: src.tag,
                    chain: vec![],
                };
                let s = self.copy_version(whole);
                self.snapshots.insert(key, s.clone());
                s
            }
        };
        Src {
            buffer: copy.buffer,
            tag: copy.tag,
            chain: src.chain,
        }
    }

    pub(super) fn push(
        &mut self,
        what: Planned,
        reads: Vec<(BufId, Tag)>,
        target: BufId,
        prev: Tag,
    ) -> Tag {
        let made = match &what {
            Planned::Kernel(_) | Planned::Copy { .. } => Tag::Made(self.steps.len()),
        };
        self.overwritten.insert((target, prev));
        self.steps.push(PlannedStep {
            what,
            reads,
            write: (target, prev, made),
        });
        made
    }

    /// Finds the nodes of a kernel's expression that are read from buffers (component `c` of
    /// each). `moved` says whether a movement op lies between the kernel root and `n` (a
    /// reduction under one is realized on its own rather than recomputed per element).
    ///
    /// `fused` holds the fused nodes already walked (with whether under a movement op, which
    /// decides what fuses below them): a shared sub-expression is walked once, so a DAG costs
    /// its nodes, not its expression tree. Callers pass an empty set.
    #[allow(clippy::too_many_arguments)]
    fn collect_leaves(
        &mut self,
        n: NodeId,
        c: usize,
        device: Device,
        moved: bool,
        root: bool,
        out: &mut BTreeMap<NodeId, Src>,
        fused: &mut BTreeSet<(NodeId, bool)>,
    ) -> Result<(), ScheduleError> {
        if out.contains_key(&n) || (!root && fused.contains(&(n, moved))) {
            return Ok(());
        }
        let node = self.g.node(n).clone();
        let fuse = match node.op {
            Op::CONST => return Ok(()),
            Op::DETACH | Op::CAST | Op::BITCAST => true,
            op if op.is_alu() => true,
            op if op.is_movement() => !self.is_storage_view(n),
            Op::REDUCE => root || !moved,
            // The kernel that realizes a CONTIGUOUS computes its source.
            Op::CONTIGUOUS => root,
            _ => false,
        };
        if fuse {
            if !root {
                fused.insert((n, moved));
            }
            let moved = moved || node.op.is_movement();
            for &s in &node.src {
                self.collect_leaves(s, c, device, moved, false, out, fused)?;
            }
            return Ok(());
        }
        // A value without a device (computed from constants) is realized where it is read.
        let src = if self.ver.info(n).device.is_none() {
            self.value_on(n, device)?
        } else {
            self.value_c(n, c)?
        };
        out.insert(n, src);
        Ok(())
    }

    /// Schedules the STOREs that `deps` stand for.
    pub fn run_effects(&mut self, deps: &[NodeId]) -> Result<(), ScheduleError> {
        for s in stores_in(self.g, deps) {
            self.store(s)?;
        }
        Ok(())
    }

    fn store(&mut self, s: NodeId) -> Result<(), ScheduleError> {
        if self.done_stores.contains_key(&s) {
            return Ok(());
        }
        self.done_stores.insert(s, ());
        let target = self.g.node(s).src[0];
        let (root, _) =
            storage_view(self.g, target).ok_or_else(|| err(s, "STORE target is not storage"))?;
        // A STORE into a multi-device buffer is one store per device.
        for c in 0..self.ncomp(root) {
            self.store_c(s, c)?;
        }
        Ok(())
    }

    /// Component `c` of STORE `s`.
    fn store_c(&mut self, s: NodeId, c: usize) -> Result<(), ScheduleError> {
        let node = self.g.node(s).clone();
        let (target, value) = (node.src[0], node.src[1]);
        let (root, view) =
            storage_view(self.g, target).ok_or_else(|| err(s, "STORE target is not storage"))?;
        let base = self.value_c(root, c)?;
        let mut chain = base.chain.clone();
        chain.extend(view.iter().map(|&m| self.move_of(m)));
        let buf = base.buffer;
        let decl = self.buffers[buf.0 as usize].clone();
        let new_tag = Tag::Store(s);
        let vinfo = self.ver.info(value).clone();
        let value_dev = match &vinfo.device {
            None => decl.device,
            Some(_) => self.device_of(value, self.comp_of(value, c))?,
        };
        let whole_target = chain.iter().all(|m| m.op == Op::RESHAPE) && vinfo.numel() == decl.size;
        if value_dev != decl.device {
            // A STORE into a buffer on another device is a COPY.
            let src = self.whole_buffer_c(value, c)?;
            if whole_target {
                self.push(
                    Planned::Copy {
                        dst: buf,
                        src: src.buffer,
                    },
                    vec![(src.buffer, src.tag)],
                    buf,
                    base.tag,
                );
                self.retag(buf, base.tag, new_tag);
                return Ok(());
            }
            // Into a view: copy whole, then store the view on the target device.
            let anon = self.new_buffer(
                vinfo.dtype,
                vinfo.numel(),
                decl.device,
                BufferKind::Intermediate,
            );
            let made = self.push(
                Planned::Copy {
                    dst: anon,
                    src: src.buffer,
                },
                vec![(src.buffer, src.tag)],
                anon,
                Tag::Initial,
            );
            let reads = vec![(anon, made)];
            let leaves = BTreeMap::from([(
                value,
                Src {
                    buffer: anon,
                    tag: made,
                    chain: vec![reshape(&vinfo.shape)],
                },
            )]);
            let spec = KernelSpec {
                device: decl.device,
                target: buf,
                target_chain: chain,
                value,
                leaves,
                expr: None,
            };
            self.push(Planned::Kernel(spec), reads, buf, base.tag);
            self.retag(buf, base.tag, new_tag);
            return Ok(());
        }
        // Same device: one kernel, unless the value reads the target through another view
        // (an in-place update would then read elements it already overwrote).
        let mut leaves = BTreeMap::new();
        self.collect_leaves(
            value,
            c,
            decl.device,
            false,
            true,
            &mut leaves,
            &mut BTreeSet::new(),
        )?;
        let mut moved_reads = std::collections::BTreeSet::new();
        self.moved_leaves(
            value,
            &leaves,
            false,
            &mut std::collections::BTreeSet::new(),
            &mut moved_reads,
        );
        let hazard = leaves
            .iter()
            .any(|(k, l)| l.buffer == buf && (l.chain != chain || moved_reads.contains(k)));
        if hazard {
            let tmp = self.materialize_c(value, c)?;
            let leaves = BTreeMap::from([(value, tmp.clone())]);
            let spec = KernelSpec {
                device: decl.device,
                target: buf,
                target_chain: chain,
                value,
                leaves,
                expr: None,
            };
            self.push(
                Planned::Kernel(spec),
                vec![(tmp.buffer, tmp.tag)],
                buf,
                base.tag,
            );
        } else {
            self.kernel(value, c, decl.device, buf, base.tag, chain)?;
        }
        self.retag(buf, base.tag, new_tag);
        Ok(())
    }

    /// The leaves that the fused expression of `n` reads through a movement op or a
    /// reduction: element i of such a leaf is not (only) element i of the kernel's output, so
    /// an in-place store would read elements it already overwrote.
    fn moved_leaves(
        &self,
        n: NodeId,
        leaves: &BTreeMap<NodeId, Src>,
        moved: bool,
        seen: &mut std::collections::BTreeSet<(NodeId, bool)>,
        out: &mut std::collections::BTreeSet<NodeId>,
    ) {
        if !seen.insert((n, moved)) {
            return;
        }
        if leaves.contains_key(&n) {
            if moved {
                out.insert(n);
            }
            return;
        }
        let node = self.g.node(n);
        let moved = moved || node.op.is_movement() || node.op == Op::REDUCE;
        for &s in &node.src {
            self.moved_leaves(s, leaves, moved, seen, out);
        }
    }

    /// Names the version the last step made by its STORE (graph buffers' versions are the
    /// STOREs that made them, as in the oracle).
    fn retag(&mut self, buf: BufId, prev: Tag, new: Tag) {
        if let Some(last) = self.steps.last_mut() {
            debug_assert_eq!(last.write.0, buf);
            last.write = (buf, prev, new);
        }
    }
}

/// A RESHAPE from a flat buffer to `shape`.
pub fn reshape(shape: &[usize]) -> Move {
    Move {
        op: Op::RESHAPE,
        arg: Arg::Shape(shape.to_vec()),
    }
}
