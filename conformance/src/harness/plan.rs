//! A run's trials by name before anything is read or started: the selected case files, the
//! manifests and the backends' trial names. [`Plan::open`] then reads only the cases and
//! opens only the backends a run needs — what lets a test runner that starts one process
//! per trial (cargo-nextest) pay for one case and one backend per process, not the corpus.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::suite::{allowances_for, manifests_dir, select};
use super::{CaseEntry, Settings, SetupError, Slot, Suite};
use crate::backends::registry::{OpenOpts, Registry};
use crate::backends::Backend;
use crate::corpus;
use crate::load;
use crate::progress::{Progress, Quiet};
use crate::xfail::{self, Xfail};

/// The trial name `backend::case` (the same in every run, whatever it selects).
pub fn trial_name(backend: &str, case: &str) -> String {
    format!("{backend}::{case}")
}

/// What a run would do, named but not yet read or started.
pub struct Plan {
    pub corpus: PathBuf,
    /// The selected cases, `(name, file)`, in corpus order; none read yet.
    pub cases: Vec<(String, PathBuf)>,
    /// The backends' names (their trial kinds), in the order asked for.
    pub backends: Vec<String>,
    specs: Vec<String>,
    /// `exec:` backends are started while planning: their names come from their handshake.
    started: Vec<Option<Arc<dyn Backend>>>,
    open: OpenOpts,
    manifests: PathBuf,
    xfail: Arc<Xfail>,
    warnings: Vec<String>,
}

/// Lists the corpus, applies the selection, reads `xfail.json` and names the backends; of
/// the backends only `exec:` ones are started (to learn their names).
pub fn plan_suite(s: &Settings, reg: &Registry) -> Result<Plan, SetupError> {
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
    let all_names: Vec<String> = listing
        .files
        .iter()
        .map(|f| corpus::case_name(&s.corpus, f))
        .collect();
    let files = select(&s.corpus, listing.files, &s.filters)?;
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
    let (mut names, mut started) = (vec![], vec![]);
    for spec in &s.backends {
        let (name, b) = if crate::backends::registry::is_program_spec(spec) {
            let b = reg.open(spec, &s.open).map_err(|e| open_error(spec, e))?;
            (b.name().to_string(), Some(b))
        } else if reg.names().iter().any(|n| n == spec) {
            (spec.clone(), None)
        } else {
            // The registry's own message for an unknown name.
            return Err(open_error(
                spec,
                reg.open(spec, &s.open)
                    .err()
                    .unwrap_or_else(|| format!("unknown backend '{spec}'")),
            ));
        };
        if names.contains(&name) {
            return Err(SetupError(format!("backend {name} is selected twice")));
        }
        names.push(name);
        started.push(b);
    }
    let xfail = scope_to_corpus(xfail, &s.corpus, &mdir, &all_names);
    let mut known: Vec<String> = reg.names();
    known.extend(names.iter().cloned());
    // xfail entries may name `tinygrad:DEV` backends this run does not select.
    known.extend(
        xfail
            .expected_failures
            .iter()
            .map(|e| e.backend.clone())
            .filter(|b| crate::backends::registry::is_pattern_name(b)),
    );
    let known: Vec<&str> = known.iter().map(|s| s.as_str()).collect();
    xfail
        .check_names(|c| all_names.iter().any(|n| n == c), &known)
        .map_err(|e| SetupError(format!("{}: {e}", xf_path.display())))?;
    Ok(Plan {
        corpus: s.corpus.clone(),
        cases: files
            .into_iter()
            .map(|f| (corpus::case_name(&s.corpus, &f), f))
            .collect(),
        backends: names,
        specs: s.backends.clone(),
        started,
        open: s.open.clone(),
        manifests: mdir,
        xfail: Arc::new(xfail),
        warnings: listing.warnings,
    })
}

/// `xfail.json` names cases relative to the corpus beside its manifests
/// (`<manifests>/../corpus`). A run over that corpus keeps every entry (and an entry naming
/// no case is an error, caught by `check_names`). A run over part of it
/// (`--corpus corpus/compiler`) renames the entries inside that part to the run's names and
/// leaves the others out. A run over some other corpus with these manifests keeps only the
/// entries naming one of its cases.
fn scope_to_corpus(mut xfail: Xfail, corpus: &Path, manifests: &Path, names: &[String]) -> Xfail {
    let own = manifests
        .parent()
        .map(|p| p.join("corpus"))
        .and_then(|r| r.canonicalize().ok());
    let rel = match (own, corpus.canonicalize()) {
        (Some(root), Ok(sub)) => sub.strip_prefix(&root).ok().map(Path::to_path_buf),
        _ => None,
    };
    match rel {
        Some(rel) if rel.as_os_str().is_empty() => {}
        Some(rel) => {
            let prefix = format!("{}/", rel.to_string_lossy().replace('\\', "/"));
            xfail
                .expected_failures
                .retain_mut(|e| match e.case.strip_prefix(&prefix) {
                    Some(rest) => {
                        e.case = rest.to_string();
                        true
                    }
                    None => false,
                });
        }
        None => xfail.expected_failures.retain(|e| names.contains(&e.case)),
    }
    xfail
}

fn open_error(spec: &str, e: String) -> SetupError {
    SetupError(format!(
        "backend {spec}: {e}\nhint: `--backend oracle` runs the oracle alone"
    ))
}

impl Plan {
    /// The name of trial (case, backend), as [`Suite::trial_name`] gives it once opened.
    pub fn trial_name(&self, case: usize, backend: usize) -> String {
        trial_name(&self.backends[backend], &self.cases[case].0)
    }

    /// The suite of the kept cases (read now; one that cannot be read is kept, with why)
    /// and the kept backends (opened now, with their allowance manifests), in plan order.
    pub fn open(
        self,
        reg: &Registry,
        keep_case: impl Fn(usize) -> bool,
        keep_backend: impl Fn(usize) -> bool,
    ) -> Result<Suite, SetupError> {
        self.open_with(reg, keep_case, keep_backend, &Quiet)
    }

    /// [`Plan::open`], telling `progress` each backend it starts and the cases it reads.
    pub fn open_with(
        self,
        reg: &Registry,
        keep_case: impl Fn(usize) -> bool,
        keep_backend: impl Fn(usize) -> bool,
        progress: &dyn Progress,
    ) -> Result<Suite, SetupError> {
        let mut backends = vec![];
        for (b, (spec, started)) in self.specs.iter().zip(self.started).enumerate() {
            if !keep_backend(b) {
                continue;
            }
            progress.phase(&format!("starting backend {spec}"));
            let backend = match started {
                Some(x) => x,
                None => reg
                    .open(spec, &self.open)
                    .map_err(|e| open_error(spec, e))?,
            };
            if backend.name() != self.backends[b] {
                return Err(SetupError(format!(
                    "backend {spec}: it names itself '{}'; a registered backend must carry its registered name",
                    backend.name()
                )));
            }
            let allow = allowances_for(backend.as_ref(), &self.manifests)?;
            backends.push(Slot {
                backend,
                allow: Arc::new(allow),
            });
        }
        let kept = (0..self.cases.len()).filter(|&c| keep_case(c)).count();
        progress.phase(&format!("loading {kept} cases"));
        let cases = self
            .cases
            .into_iter()
            .enumerate()
            .filter(|(c, _)| keep_case(*c))
            .map(|(_, (name, file))| CaseEntry {
                case: load::read_case(&file)
                    .map(Arc::new)
                    .map_err(|e| e.in_file(&file).to_string()),
                name,
                file,
            })
            .collect();
        Ok(Suite {
            corpus: self.corpus,
            cases,
            backends,
            xfail: self.xfail,
            warnings: self.warnings,
        })
    }
}
