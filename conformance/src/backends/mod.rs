//! The backend seam: everything the harness can run a case on — the oracle, the kernel
//! interpreter on lowered programs, the CPU backend, an external program speaking
//! `docs/backend-protocol.md`, a user's Rust crate — is a [`Backend`]. The harness
//! (`crate::harness`) lists trials (case × backend), asks each backend whether it takes a case,
//! runs it on the case's input bits and judges the outputs against the oracle; adding a
//! backend touches neither the harness, the CLI nor the fuzzer: register it in a
//! [`registry::Registry`].
//!
//! Compiled backends run in worker processes ([`process::ProcessBackend`] over
//! `crate::worker`), so the oracle never shares a process with compiled code.

pub mod cpu;
pub mod gpu;
pub mod gpusim;
pub mod kernels;
pub mod oracle;
pub mod process;
pub mod registry;

use std::collections::BTreeMap;

use uopkit_compiler::schedule::{Schedule, ScheduleOpts};
use uopkit_interp::eval::{BufferInit, Value};
use uopkit_interp::ir::{Graph, NodeId};
use uopkit_interp::verify::Verified;

pub use crate::protocol::{Accepts, Facts};

/// What a trial compares a backend's outputs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The reference: judged against the case's own (independently derived) expectations.
    Reference,
    /// Judged against the oracle's values, under the backend's allowances.
    Candidate,
    /// Checks that each case compiles (a GPU compiler on a machine without a GPU): a run
    /// that succeeds passes; there are no outputs to compare.
    CompileOnly,
}

/// One case to run: the verified graph, the buffers' initial contents, the outputs.
pub struct Job<'a> {
    /// The case's name in the corpus (`alu/add_float32`).
    pub case: &'a str,
    pub graph: &'a Graph,
    pub verified: &'a Verified,
    /// Initial contents of the graph's BUFFERs (absent: uninitialized).
    pub inputs: &'a BTreeMap<NodeId, BufferInit>,
    /// The case's outputs: name and node.
    pub outputs: &'a [(String, NodeId)],
    /// The case-file id of each graph node (for facts and messages).
    pub file_id: &'a [u64],
    /// Scheduling choices (the case's `schedule.allreduce`, or the environment's).
    pub opts: ScheduleOpts,
    /// The case's allreduce request as written (`naive`, `ring`, `auto`), for the wire.
    pub allreduce: Option<String>,
}

impl Job<'_> {
    pub fn roots(&self) -> Vec<NodeId> {
        self.outputs.iter().map(|o| o.1).collect()
    }

    /// The case-file id of a graph node.
    pub fn file_id_of(&self, n: NodeId) -> u64 {
        crate::load::file_id_in(self.file_id, n)
    }

    /// An oracle error with its arena ids translated into case-file ids (what a user finds in
    /// the case file).
    pub fn file_error(&self, e: uopkit_interp::Error) -> uopkit_interp::Error {
        crate::load::file_error_in(self.file_id, e)
    }

    /// uopkit's schedule as text, graph nodes by case-file id (`graph node 6`).
    pub fn schedule_text(&self, s: &Schedule) -> String {
        s.listing(&|n| format!("node {}", self.file_id_of(n)))
            .to_string()
    }

    /// A runtime error of uopkit's executor with its graph nodes named by case-file id.
    pub fn exec_error(
        &self,
        e: uopkit_compiler::exec::ExecError,
    ) -> uopkit_compiler::exec::ExecError {
        use uopkit_compiler::exec::ExecError as E;
        let file = |n: NodeId| NodeId(self.file_id_of(n) as u32);
        match e {
            E::MissingInput { node, component } => E::MissingInput {
                node: file(node),
                component,
            },
            E::SharedGraphBuffer(n) => E::SharedGraphBuffer(file(n)),
            other => other,
        }
    }
}

/// What a backend computed.
#[derive(Clone, Debug, Default)]
pub struct Ran {
    /// One per case output (None: the backend produced no value for it).
    pub outputs: Vec<Option<Value>>,
    /// Schedule facts (graph buffer ids in case-file ids); None when the backend has none.
    pub facts: Option<Facts>,
    /// uopkit's schedule, when the backend ran one (for failure reports and snapshots).
    pub schedule: Option<Schedule>,
    /// Other runs of the same case the backend also made (`protocol::VariantBits`): the
    /// harness compares each with the oracle after `outputs`.
    pub variants: Vec<Variant>,
}

/// One more run of a case: what was different about it, and its outputs or why it failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub label: String,
    pub outputs: Result<Vec<Option<Value>>, String>,
}

/// Why a backend did not produce outputs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The backend does not take this case: the trial is skipped with the reason.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The compiler refused to schedule the graph.
    #[error("scheduler: {0}")]
    Refused(String),
    /// The backend ran and reported an error (compile failure, runtime error, …).
    #[error("{0}")]
    Failed(String),
    /// The backend's process died, hung, ran out of memory, changed the FP environment or
    /// broke the protocol (the process was replaced).
    #[error("{0}")]
    Died(String),
}

/// Something the harness can run a case on.
pub trait Backend: Send + Sync {
    /// The trial prefix (`cpu`, `kernels`, `exec:…`).
    fn name(&self) -> &str;

    fn role(&self) -> Role {
        Role::Candidate
    }

    /// Why it cannot run on this machine at all (no device, no driver library), if so: every
    /// trial is skipped with the reason, or fails when the run requires the backend
    /// ([`REQUIRE_ENV`]).
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// What it can take (devices, dtypes, ops); a case outside is skipped with the reason.
    fn accepts(&self) -> Accepts {
        Accepts::default()
    }

    /// The allowance manifest it is judged under (`manifests/allowances/<name>.json`); None:
    /// strict (exact bits under each output's own mode).
    fn allowances(&self) -> Option<String> {
        None
    }

    /// Why it will not take this case, if so (default: checks [`Backend::accepts`] on the graph).
    fn skip_reason(&self, job: &Job) -> Option<String> {
        accepts_graph(&self.accepts(), job.graph, job.verified, &job.roots())
    }

    /// Runs the case and returns its outputs.
    fn run(&self, job: &Job) -> Result<Ran, BackendError>;

    /// Whether the harness sends it kernel-level cases: their programs go as they are in a
    /// `run_schedule` request ([`Backend::run_schedule`]) and the buffers it answers are judged
    /// against the case's expectations. Default: no (the oracle's kernel interpreter alone
    /// judges such a case).
    fn kernel_cases(&self) -> bool {
        false
    }

    /// Kernel level: runs uopkit's kernel programs as they are (a `run_schedule` request:
    /// buffers with their initial contents, programs, steps) and returns the contents of the
    /// buffers the request reads. Default: unsupported (a graph-level backend).
    fn run_schedule(
        &self,
        req: &crate::protocol::ScheduleRequest,
    ) -> Result<Vec<crate::protocol::BufferBits>, BackendError> {
        Err(BackendError::Unsupported(format!(
            "{} takes graph-level requests only (request {})",
            self.name(),
            req.id
        )))
    }
}

/// The backends that must be available (`UOPKIT_REQUIRE_BACKENDS=nvrtc,hiprtc` in CI): for
/// those, [`Backend::unavailable`] fails every trial instead of skipping it.
pub use uopkit_compiler::runtime::{required, REQUIRE_ENV};

/// The text of a caught panic.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Device kind of a device name: `CPU:1` → `CPU`.
fn device_kind(d: &str) -> &str {
    d.split(':').next().unwrap_or(d)
}

/// Why a graph is outside `acc`, naming the first op, dtype or device that is.
pub fn accepts_graph(acc: &Accepts, g: &Graph, ver: &Verified, roots: &[NodeId]) -> Option<String> {
    if acc == &Accepts::default() {
        return None;
    }
    for n in g.reachable(roots) {
        let node = g.node(n);
        if let Some(ops) = &acc.ops {
            if !ops.iter().any(|o| o == node.op.name()) {
                return Some(format!("op {} not accepted", node.op.name()));
            }
        }
        if let Some(dts) = &acc.dtypes {
            let dt = node.dtype;
            if dt != uopkit_interp::ir::DType::Void && !dts.iter().any(|d| d == dt.name()) {
                return Some(format!("dtype {} not accepted", dt.name()));
            }
        }
        if let Some(devs) = &acc.devices {
            if let Some(spec) = &ver.info(n).device {
                for d in spec.devices() {
                    let name = d.to_string();
                    if !devs.iter().any(|k| k == device_kind(&name)) {
                        return Some(format!("device {name} not accepted"));
                    }
                }
            }
        }
    }
    None
}

/// The facts of one of uopkit's own schedules, graph buffers named by case-file id.
pub fn schedule_facts(s: &Schedule, job: &Job) -> Facts {
    facts_of(s, job.file_id)
}

/// Schedules a job with uopkit's compiler (default passes, the job's options); a refusal names
/// the case-file node.
pub fn schedule_job(job: &Job) -> Result<Schedule, BackendError> {
    schedule_with(job, &job.opts)
}

/// The job's schedule under explicit options (e.g. another [`uopkit_compiler::schedule::Target`]).
pub fn schedule_with(job: &Job, opts: &ScheduleOpts) -> Result<Schedule, BackendError> {
    uopkit_compiler::pipeline::schedule_with_opts(
        job.graph,
        job.verified,
        &job.roots(),
        &uopkit_compiler::pipeline::default_passes(),
        opts,
    )
    .map_err(|e| BackendError::Refused(format!("node {}: {}", job.file_id_of(e.node), e.reason)))
    .and_then(check_placement)
}

/// Fails a schedule in which a kernel reads or writes a buffer of another device: data may
/// move between devices only through COPY steps. CPU devices share memory, so such a
/// schedule can still produce the right values; this check is what makes the mistake visible.
fn check_placement(s: Schedule) -> Result<Schedule, BackendError> {
    let bad = uopkit_compiler::schedule::placement::misplaced(&s);
    match bad.first() {
        None => Ok(s),
        Some(first) => Err(BackendError::Failed(format!(
            "placement: {first}{}",
            if bad.len() > 1 {
                format!(" (and {} more misplaced arguments)", bad.len() - 1)
            } else {
                String::new()
            }
        ))),
    }
}

/// [`schedule_facts`] with the arena → case-file id map `file_id`.
pub fn facts_of(s: &Schedule, file_id: &[u64]) -> Facts {
    Facts {
        kernels: Some(s.kernels()),
        copies: Some(s.copies()),
        copy_pairs: Some(
            s.copy_pairs()
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        ),
        writes: Some(
            s.written_graph_buffers()
                .into_iter()
                .map(|n| crate::load::file_id_in(file_id, n))
                .collect(),
        ),
    }
}
