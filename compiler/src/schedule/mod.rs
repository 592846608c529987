//! The scheduler: from a verified tensor graph to an ordered list of steps, each a kernel
//! on one device or a COPY between devices.
//!
//! - [`versions`]: which version of which buffer every storage node reads (as the oracle).
//! - [`realize`]: decides realization points and fuses everything else into kernels,
//!   applying the seeds' storage rules (a cross-device STORE is a COPY, a bare COPY is an
//!   anonymous store into a fresh buffer, a computed source of a cross-device STORE is
//!   materialized on its own device first).
//! - [`order`]: orders steps by read-after-write and write-after-read dependencies.
//! - [`memory`]: lets intermediate buffers whose lifetimes do not overlap share storage.

pub mod memory;
pub mod order;
pub mod realize;
pub mod versions;

use std::fmt;

use uopkit_interp::ir::{DType, Device, NodeId};
use uopkit_interp::kernel::Program;

/// A buffer of the schedule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

impl fmt::Display for BufId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}", self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BufferKind {
    /// The storage of a BUFFER node of the graph (it keeps its identity: stores write it).
    Graph(NodeId),
    /// A buffer the schedule made: a realized intermediate, a COPY target, an output.
    Intermediate,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferDecl {
    pub dtype: DType,
    pub size: usize,
    pub device: Device,
    pub kind: BufferKind,
    /// After memory planning: the physical allocation this buffer lives in (buffers
    /// with the same storage never hold live data at the same time).
    pub storage: u32,
}

/// One thing the runtime does.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Run `program` on `device` with `args` as its params (slot order).
    Kernel {
        device: Device,
        program: Program,
        args: Vec<BufId>,
    },
    /// Copy all of `src` into `dst` (same dtype and size, different devices).
    Copy { dst: BufId, src: BufId },
}

/// Where an output's value is after the schedule ran: a buffer, seen through movement
/// nodes of the graph (innermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputView {
    pub buffer: BufId,
    pub chain: Vec<realize::Move>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub buffers: Vec<BufferDecl>,
    pub steps: Vec<Step>,
    /// One per requested root, in order (None for a root that is an effect).
    pub outputs: Vec<Option<OutputView>>,
}

impl Schedule {
    pub fn copies(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Copy { .. }))
            .count()
    }

    pub fn kernels(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Kernel { .. }))
            .count()
    }

    /// (destination device, source device) of every COPY step, in order.
    pub fn copy_pairs(&self) -> Vec<(Device, Device)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Copy { dst, src } => Some((
                    self.buffers[dst.0 as usize].device,
                    self.buffers[src.0 as usize].device,
                )),
                _ => None,
            })
            .collect()
    }

    /// The graph BUFFER nodes that some step writes.
    pub fn written_graph_buffers(&self) -> Vec<NodeId> {
        let mut out = vec![];
        for s in &self.steps {
            let written: Vec<BufId> = match s {
                Step::Copy { dst, .. } => vec![*dst],
                Step::Kernel { program, args, .. } => args
                    .iter()
                    .zip(&program.params)
                    .filter(|(_, p)| p.written)
                    .map(|(b, _)| *b)
                    .collect(),
            };
            for b in written {
                if let BufferKind::Graph(n) = self.buffers[b.0 as usize].kind {
                    if !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
        }
        out.sort();
        out
    }
}

impl fmt::Display for Schedule {
    /// A stable text form for snapshots and reports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "buffers:")?;
        for (i, b) in self.buffers.iter().enumerate() {
            let kind = match b.kind {
                BufferKind::Graph(n) => format!("graph {n}"),
                BufferKind::Intermediate => "intermediate".to_string(),
            };
            writeln!(
                f,
                "  b{i}: {}[{}] on {} ({kind}, storage s{})",
                b.dtype, b.size, b.device, b.storage
            )?;
        }
        writeln!(f, "steps:")?;
        for (i, s) in self.steps.iter().enumerate() {
            match s {
                Step::Kernel {
                    device,
                    program,
                    args,
                } => {
                    let args: Vec<String> = args
                        .iter()
                        .zip(&program.params)
                        .map(|(b, p)| format!("{b}{}", if p.written { "(w)" } else { "" }))
                        .collect();
                    writeln!(
                        f,
                        "  {i}: kernel {} on {device} ({})",
                        program.name,
                        args.join(", ")
                    )?;
                }
                Step::Copy { dst, src } => writeln!(
                    f,
                    "  {i}: copy {dst} on {} <- {src} on {}",
                    self.buffers[dst.0 as usize].device, self.buffers[src.0 as usize].device
                )?,
            }
        }
        writeln!(f, "outputs:")?;
        for (i, o) in self.outputs.iter().enumerate() {
            match o {
                Some(o) => writeln!(
                    f,
                    "  {i}: {} via {} movement op(s)",
                    o.buffer,
                    o.chain.len()
                )?,
                None => writeln!(f, "  {i}: effect")?,
            }
        }
        Ok(())
    }
}

/// Why a graph cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot schedule node {node}: {reason}")]
pub struct ScheduleError {
    pub node: NodeId,
    pub reason: String,
}

/// The rewrite passes a normal compile applies to index arithmetic, in order.
pub fn default_passes() -> Vec<crate::rewrite::RuleSet> {
    vec![crate::rewrite::symbolic()]
}

/// Schedules everything `roots` need with the default passes (see [`schedule_with`]).
pub fn schedule(
    g: &uopkit_interp::ir::Graph,
    ver: &uopkit_interp::verify::Verified,
    roots: &[NodeId],
) -> Result<Schedule, ScheduleError> {
    schedule_with(g, ver, roots, &default_passes())
}

/// Schedules everything `roots` need: plans realizations, orders the steps, snapshots
/// outputs that a later step overwrites, plans memory and lowers each kernel, simplifying
/// index arithmetic with `passes`.
pub fn schedule_with(
    g: &uopkit_interp::ir::Graph,
    ver: &uopkit_interp::verify::Verified,
    roots: &[NodeId],
    passes: &[crate::rewrite::RuleSet],
) -> Result<Schedule, ScheduleError> {
    use realize::{Planned, Planner};
    use std::collections::BTreeSet;

    let mut p = Planner::new(g, ver, roots)?;
    let mut outs = vec![];
    for &r in roots {
        let n = g.node(r);
        if n.dtype == DType::Void {
            p.run_effects(&[r])?;
            outs.push(None);
        } else {
            outs.push(Some(p.value(r)?));
        }
    }
    // An output that reads a version some step overwrites is copied out before that step.
    let finals = order::final_tags(&p.steps);
    let mut out_views = vec![];
    for (&r, out) in roots.iter().zip(&outs) {
        let Some(src) = out else {
            out_views.push(None);
            continue;
        };
        let is_final = finals.get(&src.buffer).is_none_or(|t| *t == src.tag);
        let src = if is_final {
            src.clone()
        } else {
            p.snapshot(r, src.clone())
        };
        out_views.push(Some(OutputView {
            buffer: src.buffer,
            chain: src.chain,
        }));
    }
    let run_order = order::order(&p.steps)?;
    let mut buffers = p.buffers.clone();
    let ordered: Vec<&realize::PlannedStep> = run_order.iter().map(|&i| &p.steps[i]).collect();
    // Outputs live to the end; COPY endpoints keep their own storage (copies move whole
    // allocations).
    let mut keep: BTreeSet<BufId> = out_views.iter().flatten().map(|o| o.buffer).collect();
    for s in &ordered {
        if let Planned::Copy { dst, src } = s.what {
            keep.extend([dst, src]);
        }
    }
    memory::plan(&mut buffers, &ordered, &keep);
    let mut steps = vec![];
    for (k, s) in ordered.iter().enumerate() {
        steps.push(match &s.what {
            Planned::Copy { dst, src } => Step::Copy {
                dst: *dst,
                src: *src,
            },
            Planned::Kernel(spec) => {
                let (program, args) =
                    crate::lower::lower(&format!("k{k}"), spec, &buffers, g, ver, passes).map_err(
                        |e| ScheduleError {
                            node: e.node,
                            reason: e.reason,
                        },
                    )?;
                Step::Kernel {
                    device: spec.device,
                    program,
                    args,
                }
            }
        });
    }
    Ok(Schedule {
        buffers,
        steps,
        outputs: out_views,
    })
}
