//! `gpusim`: the compiler's GPU-style kernels — the outer loops as launch indices
//! (`gidx0..2`), order-free integer reductions as local-memory trees over `lidx0` with
//! barriers (`optimize::gpu`) — run by the exact kernel interpreter under several seeded
//! interleavings of the work items ([`SEEDS`]). What the CUDA and HIP renderers print is
//! checked here on every machine: a missing barrier shows as outputs that differ from the
//! oracle, or from one interleaving to the next. A kernel whose launch a GPU refuses (more
//! workgroups or work items than CUDA allows, the limits the GPU pass keeps to:
//! `render::Launch::check_limits`) fails as it would on the device. No compiled code runs,
//! so it stays in the harness's process.

use uopkit_compiler::render::Launch;
use uopkit_compiler::schedule::{self, Target};
use uopkit_interp::kernel::interp::RunOpts;

use super::{schedule_facts, Backend, BackendError, Job, Ran};
use crate::stages::{interpret_schedule, Record};

pub use crate::stages::GPU_SEEDS as SEEDS;

pub struct GpuSim;

impl Backend for GpuSim {
    fn name(&self) -> &str {
        "gpusim"
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let mut opts = job.opts.clone();
        opts.target = Target::Gpu;
        let sched = super::schedule_with(job, &opts)?;
        for st in &sched.steps {
            if let schedule::Step::Kernel { program, .. } = st {
                Launch::of(program).map_err(|e| {
                    BackendError::Failed(format!(
                        "kernel {}: a launch no GPU makes: {e}\nschedule:\n{}",
                        program.name,
                        job.schedule_text(&sched)
                    ))
                })?;
            }
        }
        let base = RunOpts::from_env().map_err(BackendError::Failed)?;
        let mut first: Option<(u64, Vec<Option<uopkit_interp::eval::Value>>)> = None;
        for seed in SEEDS {
            let run = RunOpts {
                seed,
                ..base.clone()
            };
            let trace =
                interpret_schedule(&sched, job.inputs, &run, Record::Outputs).map_err(|e| {
                    BackendError::Failed(format!(
                        "kernel interpreter (seed {seed:#x}): {e}\nschedule:\n{}",
                        job.schedule_text(&sched)
                    ))
                })?;
            match &first {
                None => first = Some((seed, trace.outputs)),
                Some((s0, outs)) => {
                    if let Some(i) = (0..outs.len()).find(|&i| outs[i] != trace.outputs[i]) {
                        return Err(BackendError::Failed(format!(
                            "output {i} depends on the interleaving: seeds {s0:#x} and {seed:#x} differ (a missing barrier?)\nschedule:\n{}",
                            job.schedule_text(&sched)
                        )));
                    }
                }
            }
        }
        let outputs = first.map(|f| f.1).unwrap_or_default();
        Ok(Ran {
            outputs,
            facts: Some(schedule_facts(&sched, job)),
            schedule: Some(sched),
            variants: vec![],
        })
    }
}
