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
//! - [`allreduce`]: lowers ALLREDUCE to COPY steps and kernels (naive or ring).
//! - [`placement`]: the check that every kernel touches only buffers of its own device.
//! - [`chunked`]: before all of these, a declared `chunks_of_split` order becomes two REDUCEs
//!   (the chunks' partials, then their fold), so the chunks can run on threads.
//!
//! A multi-device value is one buffer per device of its tuple (a multi-device BUFFER node
//! is one [`BufferKind::GraphComponent`] per device); kernels on it run once per device.

pub mod allreduce;
pub mod chunked;
pub mod memory;
pub mod order;
pub mod placement;
pub mod realize;
pub mod versions;

use std::fmt;

use uopkit_interp::ir::{DType, Device, NodeId};

pub use crate::spec::{BufId, BufferDecl, BufferKind};
use uopkit_interp::kernel::Program;

use crate::spec::KernelSpec;

/// One thing the runtime does.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Run `program` on `device` with `args` as its params (slot order).
    Kernel {
        device: Device,
        program: Program,
        args: Vec<BufId>,
        /// The graph node whose value the kernel computes (None for kernels that no node
        /// spells, such as allreduce folds), for reports that pin a difference to a node.
        value: Option<NodeId>,
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
    /// A multi-device value: every component's view, in device order (the first is
    /// `buffer`/`chain` again). None for a single-device value.
    pub components: Option<Vec<(BufId, Vec<realize::Move>)>>,
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

    /// The kernels' programs, in step order.
    pub fn programs(&self) -> Vec<uopkit_interp::kernel::Program> {
        self.steps
            .iter()
            .filter_map(|st| match st {
                Step::Kernel { program, .. } => Some(program.clone()),
                Step::Copy { .. } => None,
            })
            .collect()
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
                if let BufferKind::Graph(n) | BufferKind::GraphComponent(n, _) =
                    self.buffers[b.0 as usize].kind
                {
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

impl Schedule {
    /// The schedule's text form with graph nodes named by `node` (a caller with a case file
    /// names them by their case-file ids: `|n| format!("node {}", file_id(n))`).
    pub fn listing<'a>(&'a self, node: &'a dyn Fn(NodeId) -> String) -> Listing<'a> {
        Listing { sched: self, node }
    }
}

/// [`Schedule::listing`].
pub struct Listing<'a> {
    sched: &'a Schedule,
    node: &'a dyn Fn(NodeId) -> String,
}

impl fmt::Display for Schedule {
    /// A stable text form for snapshots and reports (graph nodes by arena id, `%N`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.listing(&|n| n.to_string()).fmt(f)
    }
}

impl fmt::Display for Listing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let this = self.sched;
        writeln!(f, "buffers:")?;
        for (i, b) in this.buffers.iter().enumerate() {
            let kind = match b.kind {
                BufferKind::Graph(n) => format!("graph {}", (self.node)(n)),
                BufferKind::GraphComponent(n, c) => {
                    format!("graph {} component {c}", (self.node)(n))
                }
                BufferKind::Intermediate => "intermediate".to_string(),
            };
            writeln!(
                f,
                "  b{i}: {}[{}] on {} ({kind}, storage s{})",
                b.dtype, b.size, b.device, b.storage
            )?;
        }
        writeln!(f, "steps:")?;
        for (i, s) in this.steps.iter().enumerate() {
            match s {
                Step::Kernel {
                    device,
                    program,
                    args,
                    ..
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
                    this.buffers[dst.0 as usize].device, this.buffers[src.0 as usize].device
                )?,
            }
        }
        writeln!(f, "outputs:")?;
        for (i, o) in this.outputs.iter().enumerate() {
            match o {
                Some(OutputView {
                    components: Some(cs),
                    ..
                }) => {
                    let parts: Vec<String> = cs
                        .iter()
                        .map(|(b, ch)| format!("{b} via {}", ch.len()))
                        .collect();
                    writeln!(f, "  {i}: per device [{}] movement op(s)", parts.join(", "))?
                }
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

impl Schedule {
    /// The value of each output once the schedule ran, given the flat contents of any of its
    /// buffers (read back from devices, or kept by an interpreter): each output's buffer (or
    /// each device's component) seen through its view.
    pub fn output_values<E: From<String>>(
        &self,
        mut contents: impl FnMut(BufId) -> Result<Vec<uopkit_interp::eval::Elem>, E>,
    ) -> Result<Vec<Option<uopkit_interp::eval::Value>>, E> {
        use uopkit_interp::eval::{movement, Data, Elem, Value};
        let mut view = |b: BufId, chain: &[realize::Move]| -> Result<(Vec<usize>, Vec<Elem>), E> {
            let mut data = contents(b)?;
            let mut shape = vec![self.buffers[b.0 as usize].size];
            for m in chain {
                data = movement::apply(m.op, &m.arg, &shape, &data, &Elem::Bits(0));
                shape =
                    uopkit_interp::verify::movement_shape(m.op, &m.arg, &shape).map_err(E::from)?;
            }
            Ok((shape, data))
        };
        let mut out = vec![];
        for o in &self.outputs {
            let Some(o) = o else {
                out.push(None);
                continue;
            };
            let dtype = self.buffers[o.buffer.0 as usize].dtype;
            out.push(Some(match &o.components {
                None => {
                    let (shape, data) = view(o.buffer, &o.chain)?;
                    Value {
                        dtype,
                        shape,
                        data: Data::Single(data),
                    }
                }
                // A multi-device value: one component per device.
                Some(cs) => {
                    let mut shape = vec![];
                    let mut comps = vec![];
                    for (b, chain) in cs {
                        let (sh, data) = view(*b, chain)?;
                        shape = sh;
                        comps.push(data);
                    }
                    Value {
                        dtype,
                        shape,
                        data: Data::Multi(comps),
                    }
                }
            }));
        }
        Ok(out)
    }
}

/// Why a graph cannot be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot schedule node {}: {reason}", node.0)]
pub struct ScheduleError {
    pub node: NodeId,
    pub reason: String,
}

pub use allreduce::AllreduceMode;

/// What the kernels are optimized for (which passes run; `optimize::passes`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// Loops on one thread (the C backend).
    #[default]
    Cpu,
    /// GPU-style: launch indices for the outer loops, local-memory reductions with barriers.
    Gpu,
}

/// Scheduling choices that do not change values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleOpts {
    /// How ALLREDUCE is lowered (naive, ring, or tinygrad's automatic choice).
    pub allreduce: AllreduceMode,
    /// The target of kernels on CPU devices (CUDA and HIP devices always get
    /// [`Target::Gpu`]: [`ScheduleOpts::target_for`]).
    pub target: Target,
    /// Run only the first n of the target's optimization passes (`uopkit diff` bisects with
    /// it); None: all of them.
    pub kernel_passes: Option<usize>,
    /// Rules of the kernel passes to leave out (`uopkit diff` looks for a culprit rule so).
    pub disabled_rules: Vec<String>,
}

impl ScheduleOpts {
    /// The target of a kernel that runs on `device`: a CUDA or HIP device always gets the
    /// GPU target (its runtime launches grids); a CPU device gets [`ScheduleOpts::target`]
    /// (the `gpusim` trials ask for GPU-style kernels on CPU devices).
    pub fn target_for(&self, device: uopkit_interp::ir::Device) -> Target {
        use uopkit_interp::ir::device::Backend;
        match device.backend {
            Backend::Cuda | Backend::Hip => Target::Gpu,
            Backend::Cpu => self.target,
        }
    }

    /// The environment variable that `pipeline::schedule` and `pipeline::schedule_with` read:
    /// `UOPKIT_ALLREDUCE=naive|ring|auto` (unset or empty: auto).
    pub const ALLREDUCE_ENV: &'static str = "UOPKIT_ALLREDUCE";

    /// The options the environment asks for (see [`ScheduleOpts::ALLREDUCE_ENV`]).
    pub fn from_env() -> Result<ScheduleOpts, OptsError> {
        let bad = |message: String| OptsError {
            setting: Self::ALLREDUCE_ENV.to_string(),
            message,
        };
        let allreduce = match std::env::var(Self::ALLREDUCE_ENV) {
            Ok(v) => v.parse().map_err(bad)?,
            Err(std::env::VarError::NotPresent) => AllreduceMode::Auto,
            Err(e) => return Err(bad(e.to_string())),
        };
        Ok(ScheduleOpts {
            allreduce,
            target: Target::Cpu,
            kernel_passes: None,
            disabled_rules: vec![],
        })
    }
}

/// A scheduler option that cannot be used: `setting` names where it came from (an
/// environment variable, a case file's field), `message` says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct OptsError {
    pub setting: String,
    pub message: String,
}

/// One step of a [`Plan`]: a kernel still to be lowered, or a COPY.
#[derive(Clone, Debug)]
pub enum PlanStep {
    Kernel(KernelSpec),
    Copy { dst: BufId, src: BufId },
}

/// What the scheduler decides: buffers (memory planned), steps in run order with each
/// kernel as a [`KernelSpec`], and where the outputs are. `crate::pipeline` lowers the
/// kernels into a [`Schedule`].
#[derive(Clone, Debug)]
pub struct Plan {
    pub buffers: Vec<BufferDecl>,
    pub steps: Vec<PlanStep>,
    pub outputs: Vec<Option<OutputView>>,
}

/// Plans everything `roots` need: realizations, the order of the steps, snapshots of outputs
/// that a later step overwrites, and memory. Kernels are left as specs (the lowering is a
/// later stage).
pub fn plan(
    g: &uopkit_interp::ir::Graph,
    ver: &uopkit_interp::verify::Verified,
    roots: &[NodeId],
    opts: &ScheduleOpts,
) -> Result<Plan, ScheduleError> {
    use realize::{Planned, Planner};
    use std::collections::BTreeSet;

    let mut p = Planner::new(g, ver, roots)?;
    p.allreduce = opts.allreduce;
    // Per root: None for an effect, else (whether it is multi-device, its components).
    let mut outs = vec![];
    for &r in roots {
        let n = g.node(r);
        if n.dtype == DType::Void {
            p.run_effects(&[r])?;
            outs.push(None);
        } else if p.is_multi(r) && n.op != uopkit_interp::ir::Op::UNSHARD {
            outs.push(Some((true, p.components(r)?)));
        } else {
            // (An UNSHARD output is gathered on the tuple's first device.)
            outs.push(Some((false, vec![p.value(r)?])));
        }
    }
    // An output that reads a version some step overwrites is copied out before that step.
    let finals = order::final_tags(&p.steps);
    let mut out_views = vec![];
    for (&r, out) in roots.iter().zip(&outs) {
        let Some((multi, comps)) = out else {
            out_views.push(None);
            continue;
        };
        let mut views = vec![];
        for src in comps {
            let is_final = finals.get(&src.buffer).is_none_or(|t| *t == src.tag);
            let src = if is_final {
                src.clone()
            } else {
                p.snapshot(r, src.clone())
            };
            views.push((src.buffer, src.chain));
        }
        let (buffer, chain) = views[0].clone();
        out_views.push(Some(OutputView {
            buffer,
            chain,
            components: multi.then_some(views),
        }));
    }
    let run_order = order::order(&p.steps)?;
    let mut buffers = p.buffers.clone();
    let ordered: Vec<&realize::PlannedStep> = run_order.iter().map(|&i| &p.steps[i]).collect();
    // Outputs live to the end; COPY endpoints keep their own storage (copies move whole
    // allocations).
    let mut keep: BTreeSet<BufId> = BTreeSet::new();
    for o in out_views.iter().flatten() {
        keep.insert(o.buffer);
        keep.extend(o.components.iter().flatten().map(|(b, _)| *b));
    }
    for s in &ordered {
        if let Planned::Copy { dst, src } = s.what {
            keep.extend([dst, src]);
        }
    }
    memory::plan(&mut buffers, &ordered, &keep);
    let steps = ordered
        .iter()
        .map(|s| match &s.what {
            Planned::Copy { dst, src } => PlanStep::Copy {
                dst: *dst,
                src: *src,
            },
            Planned::Kernel(spec) => PlanStep::Kernel(spec.clone()),
        })
        .collect();
    Ok(Plan {
        buffers,
        steps,
        outputs: out_views,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CUDA and HIP devices always get GPU kernels (their runtimes launch grids); a CPU
    /// device gets the target the options ask for (the gpusim trials ask for GPU kernels).
    #[test]
    fn each_device_gets_its_target() {
        for target in [Target::Cpu, Target::Gpu] {
            let opts = ScheduleOpts {
                target,
                ..ScheduleOpts::default()
            };
            for d in ["CUDA:0", "HIP:1"] {
                let dev: Device = d.parse().expect("a device name");
                assert_eq!(opts.target_for(dev), Target::Gpu, "{d} with {target:?}");
            }
            assert_eq!(opts.target_for(Device::cpu(1)), target);
        }
    }
}
