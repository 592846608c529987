//! Realization and fusion: walks the graph from its outputs and emits steps.
//!
//! Realization points: graph buffers (they are storage), STOREs, CONTIGUOUS, COPY results,
//! reductions reached through a movement op, and outputs. Everything else (elementwise,
//! casts, movement, reductions feeding elementwise ops) fuses into the kernel that consumes
//! it. The seeds' rules live here: a STORE into a buffer on another device is a COPY into
//! that buffer (it keeps its identity); a source that is not a whole buffer is first
//! materialized on its own device; a bare COPY is an anonymous store into a fresh buffer on
//! the target device.

use std::collections::BTreeMap;

use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, NodeId, Op};
use uopkit_interp::verify::{movement_shape, storage_view, Verified};

use super::versions::{stores_in, Versions};
use super::{BufId, BufferDecl, BufferKind, ScheduleError};

/// A movement step of a view (the same ops and args as the graph's movement nodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub op: Op,
    pub arg: Arg,
}

/// Which contents of a buffer a read sees.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tag {
    /// The contents before the schedule runs (graph buffers' inputs).
    Initial,
    /// The contents after this STORE.
    Store(NodeId),
    /// The contents written by planned step n (intermediate buffers).
    Made(usize),
}

/// A value available in a buffer: `buffer` at version `tag`, seen through `chain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Src {
    pub buffer: BufId,
    pub tag: Tag,
    pub chain: Vec<Move>,
}

/// What a planned kernel computes: `value` stored into `target` seen through `chain`;
/// `leaves` are the nodes of the value's expression read from buffers.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    pub device: Device,
    pub target: BufId,
    pub target_chain: Vec<Move>,
    pub value: NodeId,
    pub leaves: BTreeMap<NodeId, Src>,
}

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
    g: &'a Graph,
    ver: &'a Verified,
    versions: Versions,
    pub buffers: Vec<BufferDecl>,
    graph_buf: BTreeMap<NodeId, BufId>,
    pub steps: Vec<PlannedStep>,
    values: BTreeMap<NodeId, Src>,
    done_stores: BTreeMap<NodeId, ()>,
}

fn err(node: NodeId, reason: impl Into<String>) -> ScheduleError {
    ScheduleError {
        node,
        reason: reason.into(),
    }
}

/// The device a kernel computing a value of this device spec runs on.
fn single_device(node: NodeId, d: Option<&DeviceSpec>) -> Result<Device, ScheduleError> {
    match d {
        None => Ok(Device::CPU),
        Some(DeviceSpec::Single(d)) => Ok(*d),
        Some(DeviceSpec::Multi(_)) => Err(err(
            node,
            "multi-device values are not scheduled yet (issue 5)",
        )),
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
            done_stores: BTreeMap::new(),
        })
    }

    fn new_buffer(&mut self, dtype: DType, size: usize, device: Device, kind: BufferKind) -> BufId {
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

    fn graph_buffer(&mut self, node: NodeId) -> Result<BufId, ScheduleError> {
        if let Some(&b) = self.graph_buf.get(&node) {
            return Ok(b);
        }
        let info = self.ver.info(node);
        let device = single_device(node, info.device.as_ref())?;
        let b = self.new_buffer(info.dtype, info.shape[0], device, BufferKind::Graph(node));
        self.graph_buf.insert(node, b);
        Ok(b)
    }

    /// The buffers of graph BUFFER nodes, by node.
    pub fn graph_buffers(&self) -> &BTreeMap<NodeId, BufId> {
        &self.graph_buf
    }

    /// The value of `n` as a buffer view, scheduling whatever computes it.
    pub fn value(&mut self, n: NodeId) -> Result<Src, ScheduleError> {
        if let Some(s) = self.values.get(&n) {
            return Ok(s.clone());
        }
        let node = self.g.node(n).clone();
        let src = match node.op {
            Op::BUFFER => Src {
                buffer: self.graph_buffer(n)?,
                tag: Tag::Initial,
                chain: vec![],
            },
            Op::AFTER => {
                self.run_effects(&node.src[1..])?;
                match storage_view(self.g, node.src[0]) {
                    Some(_) => {
                        // The view's own storage may come from an earlier AFTER whose stores
                        // must run too.
                        self.value(node.src[0])?;
                        let (buf, version, chain) = self.versions.root(n)?.clone();
                        let buffer = self.graph_buffer(buf)?;
                        let tag = version.map_or(Tag::Initial, Tag::Store);
                        Src {
                            buffer,
                            tag,
                            chain: chain.iter().map(|&m| self.move_of(m)).collect(),
                        }
                    }
                    None => self.value(node.src[0])?,
                }
            }
            Op::DETACH => self.value(node.src[0])?,
            Op::COPY => {
                let info = self.ver.info(n);
                let to = single_device(n, info.device.as_ref())?;
                let from = self.whole_buffer(node.src[0])?;
                let dst = self.new_buffer(info.dtype, info.numel(), to, BufferKind::Intermediate);
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
                    chain: vec![reshape(&info.shape)],
                }
            }
            op if op.is_movement() && self.is_storage_view(n) => {
                let mut s = self.value(node.src[0])?;
                s.chain.push(self.move_of(n));
                s
            }
            _ => self.materialize(n)?,
        };
        self.values.insert(n, src.clone());
        Ok(src)
    }

    /// Movement over storage is a view, not a computation.
    fn is_storage_view(&self, n: NodeId) -> bool {
        storage_view(self.g, n).is_some()
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
        let s = self.value(n)?;
        let size = self.buffers[s.buffer.0 as usize].size;
        let only_reshapes = s.chain.iter().all(|m| m.op == Op::RESHAPE);
        if only_reshapes && size == self.ver.info(n).numel() {
            return Ok(s);
        }
        self.materialize(n)
    }

    /// A kernel computing `n` into a fresh buffer.
    pub fn materialize(&mut self, n: NodeId) -> Result<Src, ScheduleError> {
        let info = self.ver.info(n).clone();
        if info.dtype == DType::Void {
            return Err(err(n, "an effect has no value to materialize"));
        }
        let device = single_device(n, info.device.as_ref())?;
        let target = self.new_buffer(info.dtype, info.numel(), device, BufferKind::Intermediate);
        let chain = vec![reshape(&info.shape)];
        let made = self.kernel(n, device, target, Tag::Initial, chain.clone())?;
        Ok(Src {
            buffer: target,
            tag: made,
            chain,
        })
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
        };
        let made = self.push(Planned::Kernel(spec), reads, target, Tag::Initial);
        Src {
            buffer: target,
            tag: made,
            chain,
        }
    }

    /// Plans a kernel storing the value of `value` into `target` (seen through `chain`).
    fn kernel(
        &mut self,
        value: NodeId,
        device: Device,
        target: BufId,
        prev: Tag,
        chain: Vec<Move>,
    ) -> Result<Tag, ScheduleError> {
        let mut leaves = BTreeMap::new();
        self.collect_leaves(value, false, true, &mut leaves)?;
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
        };
        Ok(self.push(Planned::Kernel(spec), reads, target, prev))
    }

    fn push(&mut self, what: Planned, reads: Vec<(BufId, Tag)>, target: BufId, prev: Tag) -> Tag {
        let made = match &what {
            Planned::Kernel(_) | Planned::Copy { .. } => Tag::Made(self.steps.len()),
        };
        self.steps.push(PlannedStep {
            what,
            reads,
            write: (target, prev, made),
        });
        made
    }

    /// Finds the nodes of a kernel's expression that are read from buffers. `moved` says
    /// whether a movement op lies between the kernel root and `n` (a reduction under one is
    /// realized on its own rather than recomputed per element).
    fn collect_leaves(
        &mut self,
        n: NodeId,
        moved: bool,
        root: bool,
        out: &mut BTreeMap<NodeId, Src>,
    ) -> Result<(), ScheduleError> {
        if out.contains_key(&n) {
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
            let moved = moved || node.op.is_movement();
            for &s in &node.src {
                self.collect_leaves(s, moved, false, out)?;
            }
            return Ok(());
        }
        let src = self.value(n)?;
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
        let node = self.g.node(s).clone();
        let (target, value) = (node.src[0], node.src[1]);
        let (root, view) =
            storage_view(self.g, target).ok_or_else(|| err(s, "STORE target is not storage"))?;
        let base = self.value(root)?;
        let mut chain = base.chain.clone();
        chain.extend(view.iter().map(|&m| self.move_of(m)));
        let buf = base.buffer;
        let decl = self.buffers[buf.0 as usize].clone();
        let new_tag = Tag::Store(s);
        let vinfo = self.ver.info(value).clone();
        let value_dev = match &vinfo.device {
            None => decl.device,
            d => single_device(value, d.as_ref())?,
        };
        let whole_target = chain.iter().all(|m| m.op == Op::RESHAPE) && vinfo.numel() == decl.size;
        if value_dev != decl.device {
            // A STORE into a buffer on another device is a COPY.
            let src = self.whole_buffer(value)?;
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
            };
            self.push(Planned::Kernel(spec), reads, buf, base.tag);
            self.retag(buf, base.tag, new_tag);
            return Ok(());
        }
        // Same device: one kernel, unless the value reads the target through another view
        // (an in-place update would then read elements it already overwrote).
        let mut leaves = BTreeMap::new();
        self.collect_leaves(value, false, true, &mut leaves)?;
        let hazard = leaves.values().any(|l| l.buffer == buf && l.chain != chain);
        if hazard {
            let tmp = self.materialize(value)?;
            let leaves = BTreeMap::from([(value, tmp.clone())]);
            let spec = KernelSpec {
                device: decl.device,
                target: buf,
                target_chain: chain,
                value,
                leaves,
            };
            self.push(
                Planned::Kernel(spec),
                vec![(tmp.buffer, tmp.tag)],
                buf,
                base.tag,
            );
        } else {
            self.kernel(value, decl.device, buf, base.tag, chain)?;
        }
        self.retag(buf, base.tag, new_tag);
        Ok(())
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

/// The shape after applying `chain` to a flat buffer of `size` elements.
pub fn chain_shape(size: usize, chain: &[Move]) -> Result<Vec<usize>, String> {
    let mut shape = vec![size];
    for m in chain {
        shape = movement_shape(m.op, &m.arg, &shape)?;
    }
    Ok(shape)
}
