//! Judging one trial: a backend's outputs against the oracle (or, for the reference, the case's
//! own expectations), then the xfail manifest.

use std::panic::{catch_unwind, AssertUnwindSafe};

use uopkit_interp::ir::NodeId;

use crate::allowances::Allowances;
use crate::backend::{check_invariant_facts, check_schedule_facts, schedule_opts_for};
use crate::backends::{panic_message, Backend, BackendError, Job, Ran, Role};
use crate::case::Case;
use crate::compare;
use crate::run::{self, OracleRun, RunError};
use crate::xfail::{Outcome, Xfail};

/// How a failure came about (the fuzzer shrinks by class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailKind {
    /// Outputs (or schedule facts) differ from the oracle's.
    Mismatch,
    /// The compiler refused to schedule the graph.
    Refused,
    /// The backend reported an error.
    Backend,
    /// The backend's process died, hung, ran out of memory, changed the FP environment, or
    /// uopkit itself panicked.
    Crash,
    /// The oracle could not evaluate the case (it is not undefined: a bug or a limit).
    Oracle,
    /// The reference trial: the oracle disagrees with the case's expectations.
    Expectation,
}

/// What one trial came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    /// Passed, but some elements differ from the oracle's bits within what the case's
    /// comparison mode or the backend's allowance manifest allows; says which and how many.
    Allowed(String),
    Fail {
        kind: FailKind,
        message: String,
    },
    /// Not run on this backend, with the reason.
    Skip(String),
    /// Listed in the xfail manifest and failed as listed.
    XFail {
        reason: String,
        failure: String,
    },
    /// Listed in the xfail manifest but passed (a failure of the run).
    XPass(String),
    /// The case file cannot be read or its graph is invalid (and it does not expect that).
    Invalid(String),
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "ok",
            Verdict::Allowed(_) => "allowed",
            Verdict::Fail { .. } => "FAIL",
            Verdict::Skip(_) => "skip",
            Verdict::XFail { .. } => "xfail",
            Verdict::XPass(_) => "XPASS",
            Verdict::Invalid(_) => "BAD",
        }
    }

    /// Whether the run fails because of it.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Verdict::Fail { .. } | Verdict::XPass(_) | Verdict::Invalid(_)
        )
    }

    /// The text to show beside the label.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Verdict::Pass => None,
            Verdict::Allowed(by) => Some(by),
            Verdict::Fail { message, .. } => Some(message),
            Verdict::Skip(r) => Some(r),
            Verdict::XFail { reason, .. } => Some(reason),
            Verdict::XPass(m) | Verdict::Invalid(m) => Some(m),
        }
    }

    pub fn fail(kind: FailKind, message: impl Into<String>) -> Verdict {
        Verdict::Fail {
            kind,
            message: message.into(),
        }
    }
}

/// Judges `case` (named `name`) on `backend`, without the xfail manifest. Never panics: a
/// panic inside uopkit is a `Crash` failure of the trial.
pub fn judge(case: &Case, name: &str, backend: &dyn Backend, allow: &Allowances) -> Verdict {
    judge_full(case, name, backend, allow).0
}

/// [`judge`], also returning what the backend computed when it ran.
pub fn judge_full(
    case: &Case,
    name: &str,
    backend: &dyn Backend,
    allow: &Allowances,
) -> (Verdict, Option<Ran>) {
    guarded(|| judge_inner(case, name, backend, allow, &run::run_oracle(case)))
}

/// Judges `case` on each of `slots` (backend, manifest) with one oracle run for them all.
pub fn judge_each(case: &Case, name: &str, slots: &[(&dyn Backend, &Allowances)]) -> Vec<Verdict> {
    let oracle = match catch_unwind(AssertUnwindSafe(|| run::run_oracle(case))) {
        Ok(o) => o,
        Err(p) => return slots.iter().map(|_| crashed(p.as_ref()).0).collect(),
    };
    slots
        .iter()
        .map(|(b, allow)| guarded(|| judge_inner(case, name, *b, allow, &oracle)).0)
        .collect()
}

/// `f`, with a panic inside uopkit turned into a `Crash` failure.
fn guarded(f: impl FnOnce() -> (Verdict, Option<Ran>)) -> (Verdict, Option<Ran>) {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| crashed(p.as_ref()))
}

fn crashed(p: &(dyn std::any::Any + Send)) -> (Verdict, Option<Ran>) {
    {
        let v = Verdict::fail(
            FailKind::Crash,
            format!(
                "uopkit panicked on this case (a bug: please report it with the case): {}",
                panic_message(p)
            ),
        );
        (v, None)
    }
}

fn judge_inner(
    case: &Case,
    name: &str,
    backend: &dyn Backend,
    allow: &Allowances,
    result: &Result<OracleRun, RunError>,
) -> (Verdict, Option<Ran>) {
    let only = |v: Verdict| (v, None);
    if let Some(body) = &case.kernel {
        return only(judge_kernel_case(case, name, body, backend));
    }
    if backend.role() == Role::Reference {
        if let (None, Err(RunError::Load(e))) = (&case.expect_error, result) {
            return only(Verdict::Invalid(e.to_string()));
        }
        return only(match run::judge_oracle(case, result) {
            Ok(_) => Verdict::Pass,
            Err(report) => Verdict::fail(FailKind::Expectation, report),
        });
    }
    if case.expect_error.is_some() {
        return only(Verdict::Skip(
            "undefined or invalid graph: oracle-only".into(),
        ));
    }
    let oracle = match result {
        Ok(o) => o,
        Err(RunError::Load(e)) => return only(Verdict::Invalid(e.to_string())),
        Err(e) => {
            return only(Verdict::fail(
                FailKind::Oracle,
                format!("the oracle failed: {e}"),
            ))
        }
    };
    let outputs: Vec<(String, NodeId)> = match case
        .outputs
        .iter()
        .map(|o| oracle.loaded.arena(o.node).map(|n| (o.name.clone(), n)))
        .collect::<Result<_, _>>()
    {
        Ok(o) => o,
        Err(e) => return only(Verdict::Invalid(e.to_string())),
    };
    let opts = match schedule_opts_for(case) {
        Ok(o) => o,
        Err(e) => return only(Verdict::Invalid(e.to_string())),
    };
    let job = Job {
        case: name,
        graph: &oracle.loaded.graph,
        verified: &oracle.verified,
        inputs: &oracle.loaded.inputs,
        outputs: &outputs,
        file_id: &oracle.loaded.file_id,
        opts,
        allreduce: case.schedule.as_ref().and_then(|s| s.allreduce.clone()),
    };
    if let Some(why) = backend.unavailable() {
        return only(unavailable_verdict(backend, why));
    }
    if let Some(why) = backend.skip_reason(&job) {
        return only(Verdict::Skip(why));
    }
    let ran = match backend.run(&job) {
        Ok(r) => r,
        Err(e) => return only(error_verdict(e)),
    };
    if backend.role() == Role::CompileOnly {
        return (Verdict::Pass, Some(ran));
    }
    let mut allowed = vec![];
    let mut report = match compare::check_outputs(case, name, oracle, &ran.outputs, allow) {
        Ok(diffs) => {
            allowed = diffs.iter().filter_map(|d| d.allowance()).collect();
            String::new()
        }
        Err(r) => r,
    };
    if let Some(f) = &ran.facts {
        report += &check_invariant_facts(f);
    }
    if let Some(exp) = &case.schedule {
        report += &check_schedule_facts(exp, ran.facts.as_ref());
    }
    // The backend's other runs of the case, only once the first one agrees (a first run that
    // differs is the finding; its variants would only repeat it, or differ by chance).
    if report.is_empty() {
        for v in &ran.variants {
            match &v.outputs {
                Err(e) => {
                    let m = format!("the run with {} failed: {e}", v.label);
                    return (Verdict::fail(FailKind::Backend, m), Some(ran));
                }
                Ok(outs) => match compare::check_outputs(case, name, oracle, outs, allow) {
                    Ok(diffs) => {
                        for a in diffs.iter().filter_map(|d| d.allowance()) {
                            if !allowed.contains(&a) {
                                allowed.push(a);
                            }
                        }
                    }
                    Err(r) => {
                        report += &format!(
                            "the first run agrees with the oracle, the run with {} does not:\n{r}",
                            v.label
                        );
                        break;
                    }
                },
            }
        }
    }
    if report.is_empty() {
        let v = if allowed.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Allowed(allowed.join("\n"))
        };
        return (v, Some(ran));
    }
    if let Some(s) = &ran.schedule {
        report += &format!("schedule:\n{}", job.schedule_text(s));
    }
    (Verdict::fail(FailKind::Mismatch, report), Some(ran))
}

/// The verdict on a backend's error: unsupported input is a skip, anything else a failure of
/// its kind.
fn error_verdict(e: BackendError) -> Verdict {
    match e {
        BackendError::Unsupported(r) => Verdict::Skip(r),
        e @ BackendError::Refused(_) => Verdict::fail(FailKind::Refused, e.to_string()),
        BackendError::Failed(m) => Verdict::fail(FailKind::Backend, m),
        BackendError::Died(m) => Verdict::fail(FailKind::Crash, m),
    }
}

/// The trial of a backend that cannot run here: a failure when the run requires it
/// ([`crate::backends::REQUIRE_ENV`]), else a skip with the reason.
fn unavailable_verdict(backend: &dyn Backend, why: String) -> Verdict {
    if crate::backends::required(backend.name()) {
        Verdict::fail(
            FailKind::Backend,
            format!(
                "{} is required here ({}) but unavailable: {why}",
                backend.name(),
                crate::backends::REQUIRE_ENV
            ),
        )
    } else {
        Verdict::Skip(why)
    }
}

/// A kernel-level case: the oracle runs it on the kernel interpreter against the case's
/// expectations; a backend that runs kernel programs as they are ([`Backend::kernel_cases`])
/// gets the programs in a `run_schedule` request and the buffers the case expects are judged
/// against the kernel interpreter's (exact bits, NaNs as each expectation says); a body that
/// does not load is `Invalid` on every backend; other backends skip it with the reason.
fn judge_kernel_case(
    case: &Case,
    name: &str,
    body: &crate::case::KernelBody,
    backend: &dyn Backend,
) -> Verdict {
    use crate::kernel_case;
    let kc = match kernel_case::check_envelope(case).and_then(|()| kernel_case::load(body)) {
        Ok(kc) => kc,
        Err(e) => return Verdict::Invalid(format!("invalid kernel-level case: {e}")),
    };
    if backend.role() != Role::Reference {
        if backend.role() != Role::Candidate || !backend.kernel_cases() {
            return Verdict::Skip(kernel_case::SKIP_REASON.into());
        }
        if case.expect_error.is_some() {
            return Verdict::Skip("undefined or invalid program: oracle-only".into());
        }
        if let Some(why) = backend.unavailable() {
            return unavailable_verdict(backend, why);
        }
        let req = kernel_case::request(name, body, &kc);
        return match backend.run_schedule(&req) {
            Ok(got) => match kernel_case::compare_answer(&kc, &got) {
                Ok(Ok(())) => Verdict::Pass,
                Ok(Err(report)) => Verdict::fail(FailKind::Mismatch, report),
                Err(why) => Verdict::fail(FailKind::Oracle, why),
            },
            Err(e) => error_verdict(e),
        };
    }
    match kernel_case::judge(case, body) {
        Ok(()) => Verdict::Pass,
        Err(report) => Verdict::fail(FailKind::Expectation, report),
    }
}

/// Applies the xfail manifest to a verdict ([`Xfail::outcome`]: a listed failure is `xfail`
/// when it fails as listed, a listed pass is `xpass`).
pub fn apply_xfail(xf: &Xfail, case: &str, backend: &str, v: Verdict) -> Verdict {
    if xf.entry(case, backend).is_none() {
        return v;
    }
    match v {
        Verdict::Pass | Verdict::Allowed(_) => match xf.outcome(case, backend, Ok(())) {
            Err(m) => Verdict::XPass(m),
            Ok(_) => v,
        },
        Verdict::Fail { kind, message } => match xf.outcome(case, backend, Err(message)) {
            Ok(Outcome::ExpectedFailure { reason, failure }) => Verdict::XFail { reason, failure },
            Ok(Outcome::Passed) => Verdict::Pass,
            Err(m) => Verdict::fail(kind, m),
        },
        other => other,
    }
}
