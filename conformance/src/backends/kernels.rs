//! `kernels`: the compiler's scheduled, lowered programs run by the exact kernel interpreter
//! (`uopkit_interp::kernel::interp`) on the real buffers in schedule order. It runs no
//! compiled code, so it stays in the harness's process; a disagreement here pins a bug to
//! scheduling or lowering rather than to rendering.

use uopkit_interp::kernel::interp::RunOpts;

use super::{schedule_facts, Backend, BackendError, Job, Ran};
use crate::stages::{interpret_schedule, Record};

pub struct Kernels;

impl Backend for Kernels {
    fn name(&self) -> &str {
        "kernels"
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let sched = super::schedule_job(job)?;
        let opts = RunOpts::from_env().map_err(BackendError::Failed)?;
        let trace =
            interpret_schedule(&sched, job.inputs, &opts, Record::Outputs).map_err(|e| {
                BackendError::Failed(format!(
                    "kernel interpreter: {e}\nschedule:\n{}",
                    job.schedule_text(&sched)
                ))
            })?;
        Ok(Ran {
            outputs: trace.outputs,
            facts: Some(schedule_facts(&sched, job)),
            schedule: Some(sched),
            variants: vec![],
        })
    }
}
