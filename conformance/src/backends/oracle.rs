//! The oracle as a backend: the reference every other backend is judged against. Its trials
//! compare with the case's own expectations (hand-derived or from an independent source).

use uopkit_interp::eval;

use super::{Backend, BackendError, Job, Ran, Role};

pub struct Oracle;

impl Backend for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn role(&self) -> Role {
        Role::Reference
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let roots = job.roots();
        let ev = eval::evaluate(job.graph, job.verified, job.inputs, &roots)
            .map_err(|e| BackendError::Failed(job.file_error(e).to_string()))?;
        let outputs = roots
            .iter()
            .map(|&r| {
                ev.output(job.graph, r)
                    .map(|v| Some(v.clone()))
                    .map_err(|e| BackendError::Failed(job.file_error(e).to_string()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Ran {
            outputs,
            facts: None,
            schedule: None,
            variants: vec![],
        })
    }
}
