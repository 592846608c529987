//! `cpu`: the compiler's CPU path — schedule, lower, render C, compile with the system C
//! compiler, run on `CPU:n` devices. It loads compiled code, so the harness runs it in a
//! worker process (`crate::worker`) unless asked for in-process mode (debugging), where the
//! runtime still saves and restores the FP control state around every load and launch.

use uopkit_compiler::exec;

use super::{schedule_facts, Backend, BackendError, Job, Ran};

pub struct Cpu;

impl Backend for Cpu {
    fn name(&self) -> &str {
        "cpu"
    }

    fn allowances(&self) -> Option<String> {
        Some("cpu".into())
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let sched = super::schedule_job(job)?;
        let outputs = exec::run(&sched, job.inputs).map_err(|e| {
            BackendError::Failed(format!(
                "{}\nschedule:\n{}",
                job.exec_error(e),
                job.schedule_text(&sched)
            ))
        })?;
        Ok(Ran {
            outputs,
            facts: Some(schedule_facts(&sched, job)),
            schedule: Some(sched),
        })
    }
}
