//! The one conformance harness: it lists trials (case × backend), runs them and judges them,
//! for `uopkit check`, `tests/conformance.rs` (libtest-mimic, [`libtest_main`]), `uopkit fuzz`
//! and `uopkit diff`, and for a backend crate's own `cargo test`.
//!
//! A trial's verdict ([`Verdict`]): the reference backend (the oracle) is judged against the
//! case's own expected values; every other backend against the oracle's values under the
//! case's comparison modes and the backend's allowance manifest, plus the case's schedule
//! expectations on the facts the backend reports. `manifests/xfail.json` then turns a
//! listed failure into `xfail` and a listed pass into `xpass` (a failure: the list cannot go
//! stale).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uopkit_interp::ir::NodeId;

use crate::allowances::Allowances;
use crate::backend::{check_invariant_facts, check_schedule_facts, schedule_opts_for};
use crate::backends::registry::{OpenOpts, Registry};
use crate::backends::{Backend, BackendError, Job, Role};
use crate::case::Case;
use crate::compare;
use crate::corpus;
use crate::load;
use crate::run::{self, RunError};
use crate::xfail::{self, Xfail};

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
            Verdict::Fail { message, .. } => Some(message),
            Verdict::Skip(r) => Some(r),
            Verdict::XFail { reason, .. } => Some(reason),
            Verdict::XPass(m) | Verdict::Invalid(m) => Some(m),
        }
    }

    fn fail(kind: FailKind, message: impl Into<String>) -> Verdict {
        Verdict::Fail {
            kind,
            message: message.into(),
        }
    }
}

/// Judges `case` (named `name`) on `backend`, without the xfail manifest. Never panics: a
/// panic inside uopkit is a `Crash` failure of the trial.
pub fn judge(case: &Case, name: &str, backend: &dyn Backend, allow: &Allowances) -> Verdict {
    catch_unwind(AssertUnwindSafe(|| judge_inner(case, name, backend, allow))).unwrap_or_else(|p| {
        let text = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Verdict::fail(
            FailKind::Crash,
            format!("uopkit panicked on this case (a bug: please report it with the case): {text}"),
        )
    })
}

fn judge_inner(case: &Case, name: &str, backend: &dyn Backend, allow: &Allowances) -> Verdict {
    if backend.role() == Role::Reference {
        if case.expect_error.is_none() {
            if let Err(e) = load::load(case) {
                return Verdict::Invalid(e.to_string());
            }
        }
        return match run::check_oracle(case) {
            Ok(_) => Verdict::Pass,
            Err(report) => Verdict::fail(FailKind::Expectation, report),
        };
    }
    if case.expect_error.is_some() {
        return Verdict::Skip("undefined or invalid graph: oracle-only".into());
    }
    let oracle = match run::run_oracle(case) {
        Ok(o) => o,
        Err(RunError::Load(e)) => return Verdict::Skip(format!("the case does not load: {e}")),
        Err(e) => return Verdict::fail(FailKind::Oracle, format!("the oracle failed: {e}")),
    };
    let outputs: Vec<(String, NodeId)> = match case
        .outputs
        .iter()
        .map(|o| oracle.loaded.arena(o.node).map(|n| (o.name.clone(), n)))
        .collect::<Result<_, _>>()
    {
        Ok(o) => o,
        Err(e) => return Verdict::Invalid(e.to_string()),
    };
    let opts = match schedule_opts_for(case) {
        Ok(o) => o,
        Err(e) => return Verdict::Invalid(e),
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
    if let Some(why) = backend.skip_reason(&job) {
        return Verdict::Skip(why);
    }
    let ran = match backend.run(&job) {
        Ok(r) => r,
        Err(BackendError::Unsupported(r)) => return Verdict::Skip(r),
        Err(e @ BackendError::Refused(_)) => {
            return Verdict::fail(FailKind::Refused, e.to_string())
        }
        Err(BackendError::Failed(m)) => return Verdict::fail(FailKind::Backend, m),
        Err(BackendError::Died(m)) => return Verdict::fail(FailKind::Crash, m),
    };
    let mut report = match compare::check_outputs(case, name, &oracle, &ran.outputs, allow) {
        Ok(_) => String::new(),
        Err(r) => r,
    };
    if let Some(f) = &ran.facts {
        report += &check_invariant_facts(f);
    }
    if let Some(exp) = &case.schedule {
        report += &check_schedule_facts(exp, ran.facts.as_ref());
    }
    if report.is_empty() {
        Verdict::Pass
    } else {
        if let Some(s) = &ran.schedule {
            report += &format!("schedule:\n{s}");
        }
        Verdict::fail(FailKind::Mismatch, report)
    }
}

/// Applies the xfail manifest to a verdict.
pub fn apply_xfail(xf: &Xfail, case: &str, backend: &str, v: Verdict) -> Verdict {
    let Some(e) = xf.entry(case, backend) else {
        return v;
    };
    match v {
        Verdict::Pass => Verdict::XPass(format!(
            "{case} on {backend} is listed as an expected failure ({}) but passed; remove the entry from manifests/xfail.json",
            e.reason
        )),
        Verdict::Fail { message, .. } => match &e.contains {
            Some(c) if !message.contains(c.as_str()) => Verdict::fail(
                FailKind::Mismatch,
                format!(
                    "{case} on {backend} is listed as an expected failure ({}) containing '{c}', but it failed differently:\n{message}",
                    e.reason
                ),
            ),
            _ => Verdict::XFail {
                reason: e.reason.clone(),
                failure: message,
            },
        },
        other => other,
    }
}

/// Where the manifests are: `--manifests`, else `manifests/` beside the corpus directory,
/// else the repository's own.
pub fn manifests_dir(corpus: &Path, explicit: Option<&Path>) -> PathBuf {
    if let Some(m) = explicit {
        return m.to_path_buf();
    }
    let beside = corpus
        .canonicalize()
        .ok()
        .and_then(|c| c.parent().map(|p| p.join("manifests")));
    match beside {
        Some(b) if b.is_dir() => b,
        _ => crate::allowances::default_dir(),
    }
}

/// What a run is asked to do.
#[derive(Clone, Debug)]
pub struct Settings {
    pub corpus: PathBuf,
    /// None: [`manifests_dir`].
    pub manifests: Option<PathBuf>,
    pub backends: Vec<String>,
    /// Case selection: a path to a case file or a directory (under the corpus), or text the
    /// case's name contains. Empty: every case. A selection that selects nothing is an error.
    pub filters: Vec<String>,
    pub open: OpenOpts,
}

/// One case of the selection.
pub struct CaseEntry {
    pub name: String,
    pub file: PathBuf,
    /// The case, or why it cannot be read.
    pub case: Result<Arc<Case>, String>,
}

/// A backend with the manifest it is judged under.
pub struct Slot {
    pub backend: Arc<dyn Backend>,
    pub allow: Arc<Allowances>,
}

/// Cases × backends, with the manifests.
pub struct Suite {
    pub corpus: PathBuf,
    pub cases: Vec<CaseEntry>,
    pub backends: Vec<Slot>,
    pub xfail: Arc<Xfail>,
    /// Things the user should know (non-regular files skipped, …).
    pub warnings: Vec<String>,
}

/// A problem with the set-up (exit 2): no such corpus, a filter that selects nothing, an
/// unknown or broken backend, an unreadable manifest.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

fn select(
    corpus: &Path,
    files: Vec<PathBuf>,
    filters: &[String],
) -> Result<Vec<PathBuf>, SetupError> {
    if filters.is_empty() {
        return Ok(files);
    }
    let croot = corpus
        .canonicalize()
        .unwrap_or_else(|_| corpus.to_path_buf());
    let mut keep = vec![false; files.len()];
    for f in filters {
        let p = Path::new(f);
        let mut hit = false;
        if p.exists() {
            let pc = p
                .canonicalize()
                .map_err(|e| SetupError(format!("{f}: {e}")))?;
            if !pc.starts_with(&croot) {
                return Err(SetupError(format!(
                    "{f} is not inside the corpus {} (use --corpus)",
                    corpus.display()
                )));
            }
            for (k, file) in files.iter().enumerate() {
                let fc = file.canonicalize().unwrap_or_else(|_| file.clone());
                if fc == pc || fc.starts_with(&pc) {
                    keep[k] = true;
                    hit = true;
                }
            }
        } else {
            for (k, file) in files.iter().enumerate() {
                if corpus::case_name(corpus, file).contains(f.as_str()) {
                    keep[k] = true;
                    hit = true;
                }
            }
        }
        if !hit {
            return Err(SetupError(format!(
                "'{f}' selects no case in {} (give a case name fragment, a case file or a directory under the corpus)",
                corpus.display()
            )));
        }
    }
    Ok(files
        .into_iter()
        .zip(keep)
        .filter_map(|(f, k)| k.then_some(f))
        .collect())
}

/// Reads the corpus, the manifests and opens the backends.
pub fn load_suite(s: &Settings, reg: &Registry) -> Result<Suite, SetupError> {
    if !s.corpus.is_dir() {
        return Err(SetupError(format!(
            "{}: not a corpus directory (use --corpus DIR)",
            s.corpus.display()
        )));
    }
    let listing = corpus::list(&s.corpus).map_err(|e| {
        SetupError(format!(
            "{}: cannot list the corpus: {e}",
            s.corpus.display()
        ))
    })?;
    let files = listing.files;
    let all_names: Vec<String> = files
        .iter()
        .map(|f| corpus::case_name(&s.corpus, f))
        .collect();
    let files = select(&s.corpus, files, &s.filters)?;
    let mdir = manifests_dir(&s.corpus, s.manifests.as_deref());
    let xf_path = mdir.join("xfail.json");
    let xfail = if xf_path.exists() {
        xfail::load(&xf_path).map_err(|e| SetupError(e.to_string()))?
    } else if s.manifests.is_some() {
        return Err(SetupError(format!("{}: no such file", xf_path.display())));
    } else {
        Xfail::empty()
    };
    if s.backends.is_empty() {
        return Err(SetupError("no backend selected".into()));
    }
    let mut backends = vec![];
    let mut seen = std::collections::BTreeSet::new();
    for spec in &s.backends {
        let b = reg.open(spec, &s.open).map_err(|e| {
            SetupError(format!(
                "backend {spec}: {e}\nhint: `--backend oracle` runs the oracle alone"
            ))
        })?;
        if !seen.insert(b.name().to_string()) {
            return Err(SetupError(format!(
                "backend {} is selected twice",
                b.name()
            )));
        }
        let allow = match b.allowances() {
            None => Allowances::strict(b.name()),
            Some(m) => {
                let path = mdir.join("allowances").join(format!("{m}.json"));
                let a = Allowances::load(&path).map_err(SetupError)?;
                if a.backend != m {
                    return Err(SetupError(format!(
                        "{}: names backend '{}', not '{m}'",
                        path.display(),
                        a.backend
                    )));
                }
                a
            }
        };
        backends.push(Slot {
            backend: b,
            allow: Arc::new(allow),
        });
    }
    let mut known: Vec<String> = reg.names();
    known.extend(backends.iter().map(|b| b.backend.name().to_string()));
    let known: Vec<&str> = known.iter().map(|s| s.as_str()).collect();
    xfail
        .check_names(|c| all_names.iter().any(|n| n == c), &known)
        .map_err(|e| SetupError(format!("{}: {e}", xf_path.display())))?;
    let cases = files
        .into_iter()
        .map(|file| CaseEntry {
            name: corpus::case_name(&s.corpus, &file),
            case: load::read_case(&file)
                .map(Arc::new)
                .map_err(|e| e.in_file(&file).to_string()),
            file,
        })
        .collect();
    Ok(Suite {
        corpus: s.corpus.clone(),
        cases,
        backends,
        xfail: Arc::new(xfail),
        warnings: listing.warnings,
    })
}

/// One judged trial.
#[derive(Clone, Debug)]
pub struct TrialResult {
    pub case: usize,
    pub backend: usize,
    pub verdict: Verdict,
    pub elapsed: Duration,
}

impl Suite {
    /// The trial name `backend::case`.
    pub fn trial_name(&self, case: usize, backend: usize) -> String {
        format!(
            "{}::{}",
            self.backends[backend].backend.name(),
            self.cases[case].name
        )
    }

    /// Judges one trial (xfail applied).
    pub fn run_trial(&self, case: usize, backend: usize) -> Verdict {
        let entry = &self.cases[case];
        let slot = &self.backends[backend];
        let v = match &entry.case {
            Err(e) => Verdict::Invalid(e.clone()),
            Ok(c) => judge(c, &entry.name, slot.backend.as_ref(), &slot.allow),
        };
        apply_xfail(&self.xfail, &entry.name, slot.backend.name(), v)
    }

    /// Runs every trial on `jobs` threads (each with room for deep graphs); `progress` sees
    /// each result as it comes. Results are in case order, then backend order.
    pub fn run_all(
        &self,
        jobs: usize,
        progress: &(dyn Fn(&TrialResult) + Sync),
    ) -> Vec<TrialResult> {
        let trials: Vec<(usize, usize)> = (0..self.cases.len())
            .flat_map(|c| (0..self.backends.len()).map(move |b| (c, b)))
            .collect();
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<TrialResult>> = Mutex::new(Vec::with_capacity(trials.len()));
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                let spawned = std::thread::Builder::new()
                    .stack_size(256 << 20)
                    .spawn_scoped(scope, || loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(c, b)) = trials.get(k) else { break };
                        let t0 = std::time::Instant::now();
                        let verdict = self.run_trial(c, b);
                        let r = TrialResult {
                            case: c,
                            backend: b,
                            verdict,
                            elapsed: t0.elapsed(),
                        };
                        progress(&r);
                        results.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                    });
                if spawned.is_err() {
                    break;
                }
            }
        });
        let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        // A thread that could not start leaves trials undone: run them here.
        let done: std::collections::BTreeSet<(usize, usize)> =
            results.iter().map(|r| (r.case, r.backend)).collect();
        for &(c, b) in &trials {
            if !done.contains(&(c, b)) {
                let t0 = std::time::Instant::now();
                let verdict = self.run_trial(c, b);
                results.push(TrialResult {
                    case: c,
                    backend: b,
                    verdict,
                    elapsed: t0.elapsed(),
                });
            }
        }
        results.sort_by_key(|r| (r.case, r.backend));
        results
    }
}

/// Counts per backend.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub xfail: usize,
    pub xpass: usize,
    pub skipped: usize,
    pub invalid: usize,
    /// Skip reasons with their counts.
    pub skip_reasons: BTreeMap<String, usize>,
}

impl Tally {
    pub fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Pass => self.passed += 1,
            Verdict::Fail { .. } => self.failed += 1,
            Verdict::XFail { .. } => self.xfail += 1,
            Verdict::XPass(_) => self.xpass += 1,
            Verdict::Invalid(_) => self.invalid += 1,
            Verdict::Skip(r) => {
                self.skipped += 1;
                *self.skip_reasons.entry(r.clone()).or_default() += 1;
            }
        }
    }

    /// `12 passed, 0 failed, 1 xfail, 0 xpass, 3 skipped` (and `, N invalid` when some are).
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} passed, {} failed, {} xfail, {} xpass, {} skipped",
            self.passed, self.failed, self.xfail, self.xpass, self.skipped
        );
        if self.invalid > 0 {
            s += &format!(", {} invalid", self.invalid);
        }
        s
    }
}

/// Per-backend tallies of results, in the suite's backend order.
pub fn tallies(suite: &Suite, results: &[TrialResult]) -> Vec<Tally> {
    let mut t = vec![Tally::default(); suite.backends.len()];
    for r in results {
        t[r.backend].add(&r.verdict);
    }
    t
}

/// Default number of parallel trials: the machine's cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Runs `f` on a thread with room for deep graphs.
pub fn on_big_stack<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let worker = std::thread::Builder::new().stack_size(256 << 20).spawn(f);
    match worker.map(|h| h.join()) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err("the trial panicked".into()),
        Err(e) => Err(format!("cannot start a thread: {e}")),
    }
}

/// Settings from the environment, for test binaries:
/// `UOPKIT_BACKENDS` (default `oracle,kernels,cpu`), `UOPKIT_CORPUS`, `UOPKIT_MANIFESTS`,
/// `UOPKIT_TIMEOUT` (seconds), `UOPKIT_WORKER_MEMORY` (bytes), `UOPKIT_IN_PROCESS=1`.
pub fn settings_from_env(
    default_corpus: &Path,
    default_backends: &str,
) -> Result<Settings, SetupError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let backends = var("UOPKIT_BACKENDS").unwrap_or_else(|| default_backends.to_string());
    let mut open = OpenOpts::default();
    apply_limits_env(&mut open)?;
    Ok(Settings {
        corpus: var("UOPKIT_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_corpus.to_path_buf()),
        manifests: var("UOPKIT_MANIFESTS").map(PathBuf::from),
        backends: split_backends(&backends),
        filters: vec![],
        open,
    })
}

/// `UOPKIT_TIMEOUT`, `UOPKIT_WORKER_MEMORY`, `UOPKIT_IN_PROCESS` into `open` (bad values are
/// errors naming the variable).
pub fn apply_limits_env(open: &mut OpenOpts) -> Result<(), SetupError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let Some(t) = var("UOPKIT_TIMEOUT") {
        let secs: f64 = t
            .trim()
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or_else(|| {
                SetupError(format!(
                    "UOPKIT_TIMEOUT='{t}': expected a positive number of seconds"
                ))
            })?;
        open.limits.timeout = Duration::from_secs_f64(secs);
    }
    if let Some(m) = var("UOPKIT_WORKER_MEMORY") {
        open.limits.memory = Some(parse_bytes(&m).ok_or_else(|| {
            SetupError(format!(
                "UOPKIT_WORKER_MEMORY='{m}': expected bytes (e.g. 4G, 512M)"
            ))
        })?);
    }
    if let Some(v) = var("UOPKIT_IN_PROCESS") {
        open.in_process = match v.trim() {
            "1" | "true" | "yes" => true,
            "0" | "false" | "no" => false,
            _ => {
                return Err(SetupError(format!(
                    "UOPKIT_IN_PROCESS='{v}': expected 1 or 0"
                )))
            }
        };
    }
    Ok(())
}

/// `4G`, `512M`, `100K`, `12345`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        (i, 'T' | 't') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

/// `oracle,cpu,exec:python3 x.py` → the specs. A comma inside `exec:` belongs to the command
/// when it is not followed by a known backend spec; to be safe, put `exec:` last.
pub fn split_backends(s: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for part in s.split(',') {
        match out.last_mut() {
            Some(last) if last.starts_with("exec:") && !looks_like_spec(part) => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.trim().to_string()),
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn looks_like_spec(part: &str) -> bool {
    let p = part.trim();
    p.starts_with("exec:")
        || (!p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
}

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

/// Runs the suite `settings` describes as libtest-mimic trials under `args`; returns
/// libtest's conclusion and each trial's verdict label (`ok`, `FAIL`, `skip`, `xfail`,
/// `XPASS`, `BAD`) by trial name, in name order.
pub fn libtest_run(
    reg: &Registry,
    settings: &Settings,
    args: &libtest_mimic::Arguments,
) -> Result<(libtest_mimic::Conclusion, Vec<(String, &'static str)>), SetupError> {
    use libtest_mimic::{Completion, Failed, Trial};
    let suite = Arc::new(load_suite(settings, reg)?);
    type Sink = Arc<Mutex<(Vec<Tally>, BTreeMap<String, &'static str>)>>;
    let sink: Sink = Arc::new(Mutex::new((
        vec![Tally::default(); suite.backends.len()],
        BTreeMap::new(),
    )));
    let mut trials = vec![];
    for c in 0..suite.cases.len() {
        for b in 0..suite.backends.len() {
            let (suite2, sink2) = (suite.clone(), sink.clone());
            let name = suite.trial_name(c, b);
            let kind = suite.backends[b].backend.name().to_string();
            trials.push(
                Trial::ignorable_test(name.clone(), move || {
                    let s = suite2.clone();
                    let v = on_big_stack(move || s.run_trial(c, b))
                        .unwrap_or_else(|e| Verdict::fail(FailKind::Crash, e));
                    {
                        let mut g = sink2.lock().unwrap_or_else(|e| e.into_inner());
                        g.0[b].add(&v);
                        g.1.insert(name, v.label());
                    }
                    match v {
                        Verdict::Pass => Ok(Completion::Completed),
                        Verdict::Skip(r) => Ok(Completion::ignored_with(r)),
                        Verdict::XFail { reason, .. } => {
                            Ok(Completion::ignored_with(format!("xfail: {reason}")))
                        }
                        Verdict::XPass(m) => Err(Failed::from(format!("XPASS: {m}"))),
                        Verdict::Invalid(m) => Err(Failed::from(format!("invalid case: {m}"))),
                        Verdict::Fail { message, .. } => Err(Failed::from(message)),
                    }
                })
                .with_kind(kind),
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

/// `uopkit diff`: the interpreted stages (`stages::diff`), then the rendered stage on
/// `backend` (judged like a trial), pinning the first stage that differs from the oracle.
pub fn diff(
    case: &Case,
    name: &str,
    backend: Option<(&dyn Backend, &Allowances)>,
) -> Result<crate::stages::DiffReport, String> {
    let mut report = crate::stages::diff(case, false)?;
    if let Some((b, allow)) = backend {
        let stage = format!("rendered: {}", b.name());
        let difference = match judge(case, name, b, allow) {
            Verdict::Pass => None,
            Verdict::Skip(r) => Some(format!("skipped: {r}")),
            other => Some(other.detail().unwrap_or_default().to_string()),
        };
        if let (Some(d), None) = (&difference, &report.first) {
            report.first = Some(format!(
                "first difference at stage '{stage}': the interpreted kernels agree with the oracle, so the rendered code or the runtime differs\n{d}"
            ));
        }
        report
            .stages
            .push(crate::stages::StageResult { stage, difference });
    }
    Ok(report)
}
