//! A run: the selected cases, the opened backends with their manifests, and running every
//! trial in parallel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{apply_xfail, judge, judge_each, Verdict};
use crate::allowances::Allowances;
use crate::backends::registry::{OpenOpts, Registry};
use crate::backends::Backend;
use crate::case::Case;
use crate::corpus;
use crate::progress::{Progress, Quiet};
use crate::xfail::Xfail;

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

pub(super) fn select(
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

/// The allowance manifest `b` names, from `<manifests>/allowances/<name>.json` (strict when it
/// names none).
pub fn allowances_for(b: &dyn Backend, manifests: &Path) -> Result<Allowances, SetupError> {
    let Some(m) = b.allowances() else {
        return Ok(Allowances::strict(b.name()));
    };
    let path = manifests.join("allowances").join(format!("{m}.json"));
    let a = Allowances::load(&path).map_err(SetupError)?;
    if a.backend != m {
        return Err(SetupError(format!(
            "{}: names backend '{}', not '{m}'",
            path.display(),
            a.backend
        )));
    }
    Ok(a)
}

/// Reads the corpus, the manifests and opens the backends (every trial of the selection;
/// [`super::plan_suite`] then [`super::Plan::open`] for fewer).
pub fn load_suite(s: &Settings, reg: &Registry) -> Result<Suite, SetupError> {
    load_suite_with(s, reg, &Quiet)
}

/// [`load_suite`], telling `progress` each slow phase (listing, starting backends, loading
/// the cases).
pub fn load_suite_with(
    s: &Settings,
    reg: &Registry,
    progress: &dyn Progress,
) -> Result<Suite, SetupError> {
    progress.phase(&format!("listing {}", s.corpus.display()));
    super::plan_suite(s, reg)?.open_with(reg, |_| true, |_| true, progress)
}

/// One judged trial.
#[derive(Clone, Debug)]
pub struct TrialResult {
    pub case: usize,
    pub backend: usize,
    pub verdict: Verdict,
}

impl Suite {
    /// The trial name `backend::case`.
    pub fn trial_name(&self, case: usize, backend: usize) -> String {
        super::plan::trial_name(
            self.backends[backend].backend.name(),
            &self.cases[case].name,
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

    /// Judges every backend's trial of one case, with one oracle run (xfail applied).
    pub fn run_case(&self, case: usize) -> Vec<Verdict> {
        let entry = &self.cases[case];
        let verdicts = match &entry.case {
            Err(e) => vec![Verdict::Invalid(e.clone()); self.backends.len()],
            Ok(c) => {
                let slots: Vec<(&dyn Backend, &Allowances)> = self
                    .backends
                    .iter()
                    .map(|s| (s.backend.as_ref(), s.allow.as_ref()))
                    .collect();
                judge_each(c, &entry.name, &slots)
            }
        };
        verdicts
            .into_iter()
            .zip(&self.backends)
            .map(|(v, slot)| apply_xfail(&self.xfail, &entry.name, slot.backend.name(), v))
            .collect()
    }

    /// Runs every case on `jobs` threads (each with room for deep graphs), all of a case's
    /// trials on one thread so that the oracle runs once per case. Results are in case order,
    /// then backend order.
    pub fn run_all(&self, jobs: usize) -> Vec<TrialResult> {
        self.run_all_with(jobs, &Quiet)
    }

    /// [`Suite::run_all`], telling `progress` the number of trials, then each verdict as it
    /// comes.
    pub fn run_all_with(&self, jobs: usize, progress: &dyn Progress) -> Vec<TrialResult> {
        progress.start((self.cases.len() * self.backends.len()) as u64);
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<TrialResult>> = Mutex::new(vec![]);
        let work = || loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= self.cases.len() {
                break;
            }
            let done = self
                .run_case(c)
                .into_iter()
                .enumerate()
                .map(|(b, verdict)| {
                    progress.trial_done(&verdict);
                    TrialResult {
                        case: c,
                        backend: b,
                        verdict,
                    }
                })
                .collect::<Vec<_>>();
            results
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(done);
        };
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                let spawned = std::thread::Builder::new()
                    .stack_size(256 << 20)
                    .spawn_scoped(scope, work);
                if spawned.is_err() {
                    break;
                }
            }
        });
        // If no thread could start, the cases are still to do: do them here.
        work();
        let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        results.sort_by_key(|r| (r.case, r.backend));
        results
    }
}

/// Counts per backend.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Passed trials, the allowed ones included.
    pub passed: usize,
    /// Passed trials whose values differ from the oracle's within an allowance.
    pub allowed: usize,
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
            Verdict::Allowed(_) => {
                self.passed += 1;
                self.allowed += 1;
            }
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

    /// `12 passed, 0 failed, 1 xfail, 0 xpass, 3 skipped` (`12 passed (2 allowed), …` when
    /// some passed within an allowance; `, N invalid` when some are invalid).
    pub fn line(&self) -> String {
        crate::palette::Palette::PLAIN.tally_line(self)
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
