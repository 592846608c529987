//! What every backend's trial shares beside the comparison: the scheduler options a case asks
//! for, schedule expectations and invariants checked on reported facts, the CPU manifest, and
//! the CPU backend in this process for the fuzzer's fault injection and the schedule
//! snapshots. A case whose graph is undefined (it expects an error) is never sent to a
//! backend: its behaviour there is undefined and may crash the process.

use std::sync::OnceLock;

use uopkit_compiler::schedule::{OptsError, Schedule, ScheduleOpts};

use crate::allowances::Allowances;
use crate::backends::{cpu::Cpu, Ran};
use crate::case::{Case, ScheduleExpect};
use crate::harness::{self, FailKind, Verdict};
use crate::protocol::Facts;

/// Whether the CPU backend can take this case today, or why not (the trial is then
/// ignored with that reason).
pub fn cpu_skip_reason(case: &Case) -> Option<&'static str> {
    if case.expect_error.is_some() {
        return Some("undefined or invalid graph: oracle-only");
    }
    None
}

/// The scheduler's options for a case: the environment's (`UOPKIT_ALLREDUCE`), unless the
/// case itself says how to lower ALLREDUCE (`"schedule": {"allreduce": "ring"}`).
pub fn schedule_opts_for(case: &Case) -> Result<ScheduleOpts, OptsError> {
    schedule_opts_with(case.schedule.as_ref().and_then(|s| s.allreduce.as_deref()))
}

/// The environment's scheduler options, with ALLREDUCE lowered as `allreduce` says when given.
pub fn schedule_opts_with(allreduce: Option<&str>) -> Result<ScheduleOpts, OptsError> {
    let mut opts = ScheduleOpts::from_env()?;
    if let Some(mode) = allreduce {
        opts.allreduce = mode.parse().map_err(|message| OptsError {
            setting: "schedule.allreduce".into(),
            message,
        })?;
    }
    Ok(opts)
}

/// A backend's allowance manifest could not be read or is invalid (the message names the
/// file and the problem).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ManifestError(pub String);

/// Why a case did not pass on the CPU backend in this process ([`check_cpu_with`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The CPU manifest could not be read.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The trial passed but the backend reported no schedule.
    #[error("the CPU backend returned no schedule")]
    NoSchedule,
    /// The trial's verdict was not a pass: `kind` for a failure (a mismatch, a refusal by
    /// the scheduler, a backend failure, a crash, …), None for a skip, an invalid case, an
    /// expected failure or an unexpected pass; `label` is the verdict's (`FAIL`, `skip`, …).
    #[error("{detail}")]
    Verdict {
        label: &'static str,
        kind: Option<FailKind>,
        detail: String,
    },
}

/// The CPU backend's allowances (`manifests/allowances/cpu.json`), read once.
pub fn cpu_allowances() -> Result<&'static Allowances, ManifestError> {
    static ALLOW: OnceLock<Result<Allowances, ManifestError>> = OnceLock::new();
    ALLOW
        .get_or_init(|| Allowances::for_backend("cpu").map_err(ManifestError))
        .as_ref()
        .map_err(|e| e.clone())
}

/// [`check_cpu_with`] under the CPU manifest, for a case without a corpus name.
pub fn check_cpu(case: &Case) -> Result<Schedule, CheckError> {
    check_cpu_with(case, "", cpu_allowances()?)
}

/// Runs `case` (named `name` in the corpus, for the manifest's per-case overrides) on the
/// CPU backend **in this process** (so thread-local settings such as the compiler's fault
/// injection apply) and judges it like a trial ([`harness::judge_full`]); Ok with the
/// schedule when it passes.
pub fn check_cpu_with(case: &Case, name: &str, allow: &Allowances) -> Result<Schedule, CheckError> {
    match harness::judge_full(case, name, &Cpu, allow) {
        (
            Verdict::Pass | Verdict::Allowed(_),
            Some(Ran {
                schedule: Some(s), ..
            }),
        ) => Ok(s),
        (Verdict::Pass | Verdict::Allowed(_), _) => Err(CheckError::NoSchedule),
        (v, _) => Err(CheckError::Verdict {
            label: v.label(),
            kind: match &v {
                Verdict::Fail { kind, .. } => Some(*kind),
                _ => None,
            },
            detail: v.detail().unwrap_or(v.label()).to_string(),
        }),
    }
}

/// What every schedule must satisfy, whatever the case expects, checked on a backend's
/// reported facts: no COPY from a device to itself.
pub fn check_invariant_facts(f: &Facts) -> String {
    let mut r = String::new();
    for (i, (dst, src)) in f.copy_pairs.iter().flatten().enumerate() {
        if canon(dst) == canon(src) {
            r += &format!("schedule: COPY {i} copies from {src} to itself\n");
        }
    }
    r
}

/// The case's expectations about the schedule, checked on the facts a backend reported
/// (graph buffers by case-file id). An expectation whose fact was not reported is not
/// checked.
pub fn check_schedule_facts(exp: &ScheduleExpect, facts: Option<&Facts>) -> String {
    let none = Facts::default();
    let f = facts.unwrap_or(&none);
    let mut r = String::new();
    if let (Some(n), Some(got)) = (exp.copies, f.copies) {
        if got != n {
            r += &format!("schedule: expected {n} COPY step(s), got {got}\n");
        }
    }
    if let (Some(n), Some(got)) = (exp.kernels, f.kernels) {
        if got != n {
            r += &format!("schedule: expected {n} kernel(s), got {got}\n");
        }
    }
    if let (Some(true), Some(got)) = (exp.no_kernel, f.kernels) {
        if got != 0 {
            r += &format!("schedule: expected no kernel, got {got}\n");
        }
    }
    if let (Some(w), Some(got)) = (&exp.writes, &f.writes) {
        let mut want: Vec<u64> = w.clone();
        want.sort();
        let mut got = got.clone();
        got.sort();
        if got != want {
            r += &format!("schedule: expected writes to graph buffers {want:?}, got {got:?}\n");
        }
    }
    if let (Some(pairs), Some(got)) = (&exp.copy_pairs, &f.copy_pairs) {
        let mut want: Vec<(String, String)> =
            pairs.iter().map(|(a, b)| (canon(a), canon(b))).collect();
        want.sort();
        want.dedup();
        let mut got: Vec<(String, String)> =
            got.iter().map(|(a, b)| (canon(a), canon(b))).collect();
        got.sort();
        got.dedup();
        if got != want {
            r += &format!("schedule: expected copy pairs {want:?}, got {got:?}\n");
        }
    }
    r
}

fn canon(d: &str) -> String {
    d.parse::<uopkit_interp::ir::Device>()
        .map(|d| d.to_string())
        .unwrap_or_else(|_| d.to_string())
}
