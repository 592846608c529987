//! The harness as a libtest-mimic test binary (`tests/conformance.rs`, or a backend crate's own).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{
    on_big_stack, plan_suite, settings_from_env, FailKind, Settings, SetupError, Tally, Verdict,
};
use crate::backends::registry::Registry;

/// The main of a libtest-mimic conformance test binary: one trial per case × backend, the
/// backends from `UOPKIT_BACKENDS` (default `default_backends`), the corpus from
/// `UOPKIT_CORPUS` (default `default_corpus`). Compiled backends run in worker processes
/// that are this very binary (see `crate::worker`). An expected failure shows as
/// `ignored, xfail: <reason>`; a skip as `ignored, <reason>`; a summary line with the xfail
/// and xpass counts follows libtest's.
pub fn libtest_main(
    reg: &Registry,
    default_corpus: &Path,
    default_backends: &str,
) -> std::process::ExitCode {
    if let Some(code) = crate::backends::registry::serve_if_worker(reg) {
        return std::process::ExitCode::from(code.clamp(0, 255) as u8);
    }
    let args = libtest_mimic::Arguments::from_args();
    let settings = match settings_from_env(default_corpus, default_backends) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match libtest_run(reg, &settings, &args) {
        Ok((conclusion, _)) => conclusion.exit_code(),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Each trial's verdict label by trial name, in name order.
pub type TrialLabels = Vec<(String, &'static str)>;

/// Runs the suite `settings` describes as libtest-mimic trials under `args`; returns
/// libtest's conclusion and each trial's verdict label (`ok`, `allowed`, `FAIL`, `skip`, `xfail`,
/// `XPASS`, `BAD`) by trial name, in name order.
///
/// Every trial of the selection is named (the same names whatever `args` select), but only
/// the cases and backends of the trials `args` will run are read and opened: `--exact NAME`
/// (how cargo-nextest runs each trial in its own process) reads one case and opens one
/// backend, `--list` reads and opens nothing (except `exec:` backends, which are started to
/// learn the names their trials carry), so a case that cannot be read is still listed and
/// fails as its own trials, and only when they run.
pub fn libtest_run(
    reg: &Registry,
    settings: &Settings,
    args: &libtest_mimic::Arguments,
) -> Result<(libtest_mimic::Conclusion, TrialLabels), SetupError> {
    use libtest_mimic::{Completion, Failed, Trial};
    // Name every trial first; read and open only what the arguments will run (under
    // cargo-nextest, one trial per process; under `--list`, nothing).
    let plan = plan_suite(settings, reg)?;
    let fail_fast = super::env::fail_fast_from_env()?;
    let (nc, nb) = (plan.cases.len(), plan.backends.len());
    let (mut want_case, mut want_backend) = (vec![false; nc], vec![false; nb]);
    if !args.list {
        for (c, wc) in want_case.iter_mut().enumerate() {
            for (b, wb) in want_backend.iter_mut().enumerate() {
                let probe = Trial::test(plan.trial_name(c, b), || Ok(()))
                    .with_kind(plan.backends[b].clone());
                if !args.is_filtered_out(&probe) && !args.is_ignored(&probe) {
                    *wc = true;
                    *wb = true;
                }
            }
        }
    }
    let names: Vec<Vec<String>> = (0..nc)
        .map(|c| (0..nb).map(|b| plan.trial_name(c, b)).collect())
        .collect();
    let kinds = plan.backends.clone();
    let suite = Arc::new(plan.open(reg, |c| want_case[c], |b| want_backend[b])?);
    let (case_at, backend_at) = (positions(&want_case), positions(&want_backend));
    type Sink = Arc<Mutex<(Vec<Tally>, BTreeMap<String, &'static str>)>>;
    let sink: Sink = Arc::new(Mutex::new((
        vec![Tally::default(); suite.backends.len()],
        BTreeMap::new(),
    )));
    let mut trials = vec![];
    for (c, row) in names.into_iter().enumerate() {
        for (b, name) in row.into_iter().enumerate() {
            let (suite2, sink2) = (suite.clone(), sink.clone());
            let at = case_at[c].zip(backend_at[b]);
            trials.push(
                Trial::ignorable_test(name.clone(), move || {
                    let Some((c, b)) = at else {
                        return Err(Failed::from(format!(
                            "{name}: not prepared (the harness did not expect to run it)"
                        )));
                    };
                    let s = suite2.clone();
                    let v = on_big_stack(move || s.run_trial(c, b))
                        .unwrap_or_else(|e| Verdict::fail(FailKind::Crash, e));
                    {
                        let mut g = sink2.lock().unwrap_or_else(|e| e.into_inner());
                        g.0[b].add(&v);
                        g.1.insert(name.clone(), v.label());
                    }
                    if fail_fast
                        && matches!(
                            v,
                            Verdict::XPass(_) | Verdict::Invalid(_) | Verdict::Fail { .. }
                        )
                    {
                        // The first failure is the whole answer (mutation testing): stop the
                        // run now. Workers exit when their stdin closes with this process.
                        eprintln!("UOPKIT_FAIL_FAST: {name} failed; stopping the run");
                        std::process::exit(101);
                    }
                    match v {
                        Verdict::Pass | Verdict::Allowed(_) => Ok(Completion::Completed),
                        Verdict::Skip(r) => Ok(Completion::ignored_with(r)),
                        Verdict::XFail { reason, .. } => {
                            Ok(Completion::ignored_with(format!("xfail: {reason}")))
                        }
                        Verdict::XPass(m) => Err(Failed::from(format!("XPASS: {m}"))),
                        Verdict::Invalid(m) => Err(Failed::from(format!("invalid case: {m}"))),
                        Verdict::Fail { message, .. } => Err(Failed::from(message)),
                    }
                })
                .with_kind(kinds[b].clone()),
            );
        }
    }
    let conclusion = libtest_mimic::run(args, trials);
    let g = sink.lock().unwrap_or_else(|e| e.into_inner());
    if !args.list {
        for (slot, t) in suite.backends.iter().zip(g.0.iter()) {
            if t != &Tally::default() {
                eprintln!("{}: {}", slot.backend.name(), t.line());
            }
        }
    }
    let labels = g.1.iter().map(|(k, v)| (k.clone(), *v)).collect();
    Ok((conclusion, labels))
}

/// For each kept index, its position among the kept ones.
fn positions(keep: &[bool]) -> Vec<Option<usize>> {
    let mut next = 0;
    keep.iter()
        .map(|&k| {
            k.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}
