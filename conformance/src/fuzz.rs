//! Differential fuzzing of the compiler against the oracle.
//!
//! [`run`] generates tensor programs (`gen::tensor`) from a seed, runs each through the
//! backend and the oracle (`backend::check_cpu`: every output compared bit for bit), and on
//! a disagreement shrinks the program ([`crate::shrink`]: first the recipe, then the graph)
//! to a small case that still disagrees the same way, writes it to `out_dir` as
//! `fuzz_<id>.json` ([`finding_id`]: a hash of the shrunk case, so finding it again — the
//! same seed twice, or another seed — writes nothing new; never overwriting) with the
//! oracle's values as expected values (see `corpus/regressions/README.md`), and reports it
//! with the stage that first diverges ([`first_divergence`]).
//!
//! Everything runs on the calling thread, so thread-local settings (the compiler's test-only
//! fault injection) apply. The same seed and options give the same cases.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
#[cfg(feature = "testkit")]
use std::time::Instant;

#[cfg(feature = "testkit")]
use proptest::strategy::{Strategy, ValueTree};

use crate::allowances::Allowances;
use crate::backend;
use crate::backends::Backend;
use crate::case::Case;
#[cfg(feature = "testkit")]
use crate::gen::export::fill_expect_from_oracle;
#[cfg(feature = "testkit")]
use crate::gen::rules::seeded_runner;
use crate::gen::tensor::TensorConfig;
#[cfg(feature = "testkit")]
use crate::gen::tensor::{recipe, Generated};
use crate::harness;
use crate::shrink::ShrinkOpts;
#[cfg(feature = "testkit")]
use crate::shrink::{shrink_case, shrink_recipe, ShrinkStats};

/// What to fuzz and for how long.
#[derive(Clone, Debug)]
pub struct FuzzOpts {
    /// The backend under test: `"cpu"`.
    pub backend: String,
    /// Wall-clock budget for generating and checking cases (shrinking a failure may run
    /// past it, within `shrink`'s own budget).
    pub seconds: u64,
    pub seed: u64,
    /// Stop after this many generated cases.
    pub max_cases: Option<u64>,
    /// Where shrunk failing cases are written (the corpus keeps them in
    /// `corpus/regressions/`). Created when missing.
    pub out_dir: PathBuf,
    /// Stop after this many failures (each is shrunk and written).
    pub max_failures: u64,
    /// What the generated programs contain.
    pub gen: TensorConfig,
    /// Limits of shrinking one failure (recipe and graph each get this budget).
    pub shrink: ShrinkOpts,
    /// Count the backend's refusals (a scheduler error on a graph the oracle defines, such
    /// as tinygrad's "cycle detected in the assign graph") as failures too. Off: they are
    /// counted and listed in the report ([`FuzzReport::refusals`]) but not shrunk.
    pub refusals_fail: bool,
}

impl Default for FuzzOpts {
    fn default() -> Self {
        FuzzOpts {
            backend: "cpu".into(),
            seconds: 60,
            seed: 0,
            max_cases: None,
            out_dir: PathBuf::from("corpus/regressions"),
            max_failures: 1,
            gen: TensorConfig::default(),
            shrink: ShrinkOpts::default(),
            refusals_fail: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown backend '{0}'")]
    UnknownBackend(String),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Generate(String),
    #[error(transparent)]
    Manifest(#[from] backend::ManifestError),
}

/// How a backend failed on a case (the harness's [`harness::FailKind`]). Shrinking keeps the
/// class.
pub use crate::harness::FailKind as FailClass;

/// The outcome of one case on a backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Not a test of the backend: the oracle reports an error or undefined behaviour, or the
    /// backend does not take such cases yet.
    Skip(String),
    Fail {
        class: FailClass,
        message: String,
    },
}

/// Judges `case` on `b` through the harness ([`harness::judge`]) and classifies the result:
/// anything that is not a failure of the backend (the oracle's own errors, undefined
/// programs, invalid graphs) is a skip.
pub fn check_on(b: &dyn Backend, allow: &Allowances, case: &Case) -> Verdict {
    use crate::harness::Verdict as V;
    match harness::judge(case, "", b, allow) {
        V::Pass | V::Allowed(_) => Verdict::Pass,
        V::Skip(r) => Verdict::Skip(r),
        V::Invalid(m) => Verdict::Skip(format!("invalid: {m}")),
        V::XFail { failure, .. } => Verdict::Skip(failure),
        V::XPass(m) => Verdict::Skip(m),
        V::Fail {
            kind: FailClass::Oracle | FailClass::Expectation,
            message,
        } => Verdict::Skip(message),
        V::Fail { kind, message } => Verdict::Fail {
            class: kind,
            message,
        },
    }
}

/// The pipeline stage (rewrite pass, lowering, rendering, …) where the compiled case first
/// departs from the oracle, with the kernel, node and culprit rule (`stages::diff`).
pub fn first_divergence(case: &Case, b: &dyn Backend, allow: &Allowances) -> Option<String> {
    harness::diff(case, "", Some((b, allow)))
        .ok()
        .and_then(|r| r.first)
}

/// One failure the fuzzer found.
#[derive(Clone, Debug)]
pub struct FuzzFailure {
    /// The generated case's number (1 = the first case of the run).
    pub case_number: u64,
    pub class: FailClass,
    /// The backend's report on the original case.
    pub message: String,
    /// The report on the shrunk case.
    pub shrunk_message: String,
    /// The original program, step by step.
    pub program: Vec<String>,
    pub nodes_before: usize,
    pub nodes_after: usize,
    /// Candidates tried while shrinking (recipe and graph).
    pub shrink_checks: usize,
    /// The shrunk case, with the oracle's values as expectations.
    pub case: Case,
    /// Where it was written.
    pub path: PathBuf,
    /// The stage that first diverges, when known ([`first_divergence`]).
    pub stage: Option<String>,
}

/// What a fuzz run did.
#[derive(Clone, Debug)]
pub struct FuzzReport {
    pub backend: String,
    pub seed: u64,
    /// Cases generated.
    pub cases: u64,
    pub passed: u64,
    /// Cases not sent to the backend (oracle UB/error, or not supported by the backend).
    pub skipped: u64,
    /// Cases the scheduler refused (when they are not failures): the reasons, without node
    /// ids, with how often each came.
    pub refusals: BTreeMap<String, u64>,
    pub failures: Vec<FuzzFailure>,
    pub elapsed: Duration,
}

impl FuzzReport {
    /// No failure.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

impl fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fuzz {} seed {}: {} cases ({} passed, {} skipped, {} refused, {} failed) in {:.1}s",
            self.backend,
            self.seed,
            self.cases,
            self.passed,
            self.skipped,
            self.refusals.values().sum::<u64>(),
            self.failures.len(),
            self.elapsed.as_secs_f64()
        )?;
        for (why, n) in &self.refusals {
            writeln!(f, "refused {n}×: {why}")?;
        }
        for x in &self.failures {
            writeln!(
                f,
                "FAIL case #{} ({:?}): shrunk from {} to {} nodes ({} shrink checks), written to {}",
                x.case_number,
                x.class,
                x.nodes_before,
                x.nodes_after,
                x.shrink_checks,
                x.path.display()
            )?;
            writeln!(
                f,
                "  first divergence: {}",
                x.stage
                    .as_deref()
                    .unwrap_or("unknown (no kernel-level oracle yet)")
            )?;
            for line in x.shrunk_message.lines().take(12) {
                writeln!(f, "  {line}")?;
            }
        }
        Ok(())
    }
}

/// Fuzzes `opts.backend` until `opts.seconds` pass, `opts.max_cases` cases ran or
/// `opts.max_failures` failures were found.
#[cfg(feature = "testkit")]
pub fn run(opts: FuzzOpts) -> Result<FuzzReport, Error> {
    if opts.backend != "cpu" {
        return Err(Error::UnknownBackend(opts.backend.clone()));
    }
    let allow = backend::cpu_allowances()?;
    run_on(opts, &crate::backends::cpu::Cpu, allow)
}

/// Fuzzes backend `b` (judged under `allow`); `opts.backend` names it in the report and in
/// the written cases.
#[cfg(feature = "testkit")]
pub fn run_on(opts: FuzzOpts, b: &dyn Backend, allow: &Allowances) -> Result<FuzzReport, Error> {
    run_on_with(opts, b, allow, &crate::progress::Quiet)
}

/// [`run_on`], telling `progress` each case judged and each shrink begun.
#[cfg(feature = "testkit")]
pub fn run_on_with(
    opts: FuzzOpts,
    b: &dyn Backend,
    allow: &Allowances,
    progress: &dyn crate::progress::FuzzProgress,
) -> Result<FuzzReport, Error> {
    let start = Instant::now();
    let budget = Duration::from_secs(opts.seconds);
    let mut report = FuzzReport {
        backend: opts.backend.clone(),
        seed: opts.seed,
        cases: 0,
        passed: 0,
        skipped: 0,
        refusals: BTreeMap::new(),
        failures: vec![],
        elapsed: Duration::ZERO,
    };
    let strategy = recipe(&opts.gen);
    let mut runner = seeded_runner(1, opts.seed, 0);
    while start.elapsed() < budget
        && opts.max_cases.is_none_or(|m| report.cases < m)
        && (report.failures.len() as u64) < opts.max_failures
    {
        let tree = strategy
            .new_tree(&mut runner)
            .map_err(|e| Error::Generate(e.to_string()))?;
        let r = tree.current();
        let generated = crate::gen::tensor::build(&r, &opts.gen);
        report.cases += 1;
        match check_on(b, allow, &generated.case) {
            Verdict::Pass => report.passed += 1,
            Verdict::Skip(_) => report.skipped += 1,
            Verdict::Fail {
                class: FailClass::Refused,
                message,
            } if !opts.refusals_fail => {
                *report
                    .refusals
                    .entry(without_node_ids(&message))
                    .or_insert(0) += 1;
            }
            Verdict::Fail { class, message } => {
                progress.phase(&format!("shrinking case #{}", report.cases));
                let failure =
                    shrink_and_write(&opts, b, allow, report.cases, &generated, class, message)?;
                report.failures.push(failure);
            }
        }
        report.elapsed = start.elapsed();
        progress.case_done(&report);
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

/// `scheduler: node 6: cycle …` → `scheduler: cycle …` (to group refusals).
#[cfg(feature = "testkit")]
fn without_node_ids(message: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    first
        .split(": ")
        .filter(|part| {
            !(part.starts_with("node ") && part[5..].chars().all(|c| c.is_ascii_digit()))
        })
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(feature = "testkit")]
fn same_failure(b: &dyn Backend, allow: &Allowances, case: &Case, class: FailClass) -> bool {
    matches!(check_on(b, allow, case), Verdict::Fail { class: c, .. } if c == class)
}

#[cfg(feature = "testkit")]
fn shrink_and_write(
    opts: &FuzzOpts,
    b: &dyn Backend,
    allow: &Allowances,
    case_number: u64,
    generated: &Generated,
    class: FailClass,
    message: String,
) -> Result<FuzzFailure, Error> {
    let backend = opts.backend.as_str();
    let (g, s1): (Generated, ShrinkStats) = shrink_recipe(
        &generated.recipe,
        &opts.gen,
        opts.shrink,
        &mut |g: &Generated| same_failure(b, allow, &g.case, class),
    );
    let (mut case, s2) = shrink_case(&g.case, opts.shrink, &mut |c: &Case| {
        same_failure(b, allow, c, class)
    });
    let shrunk_message = match check_on(b, allow, &case) {
        Verdict::Fail { message, .. } => message,
        other => format!("{other:?}"),
    };
    let stage = first_divergence(&case, b, allow);
    case.description = format!(
        "expected values from the oracle at discovery time (fuzzer regression): the {backend} backend disagreed; found by `uopkit fuzz` seed {} case #{case_number} ({class:?}), shrunk from {} to {} nodes",
        opts.seed,
        generated.case.graph.len(),
        case.graph.len()
    );
    case.tags = vec!["regression".into(), "fuzz".into(), backend.into()];
    fill_expect_from_oracle(&mut case).map_err(Error::Generate)?;
    let path = write_new(&opts.out_dir, "fuzz", &case)?;
    Ok(FuzzFailure {
        case_number,
        class,
        message,
        shrunk_message,
        program: generated.log.clone(),
        nodes_before: generated.case.graph.len(),
        nodes_after: case.graph.len(),
        shrink_checks: s1.checks + s2.checks,
        case,
        path,
        stage,
    })
}

/// The identity of a finding: the first 16 hex digits of the SHA-256 of the case's canonical
/// text with its description and tags left out (they name the seed and case number that
/// found it), so the same shrunk case found twice — the same seed run again, or another
/// seed — has one identity.
pub fn finding_id(case: &Case) -> String {
    use sha2::Digest as _;
    let bare = Case {
        description: String::new(),
        tags: vec![],
        ..case.clone()
    };
    let digest = sha2::Sha256::digest(bare.to_canonical_string().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `case` as `dir/<stem>_<id>.json` ([`finding_id`]) unless that finding is already
/// there (then its path is returned and nothing is written). A different case under that
/// name (a file edited by hand) is never overwritten: the finding goes to `<stem>_<id>_<n>`
/// for the smallest free n. The text goes to a temporary file in `dir`, is synced, and is
/// linked into place without clobbering, so a reader never sees half a case.
pub fn write_new(dir: &Path, stem: &str, case: &Case) -> Result<PathBuf, Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let id = finding_id(case);
    let same = |path: &Path| crate::load::read_case(path).is_ok_and(|c| finding_id(&c) == id);
    let text = case.to_canonical_string();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{stem}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    tmp.write_all(text.as_bytes()).map_err(io(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    let mut n = 1u64;
    loop {
        let path = match n {
            1 => dir.join(format!("{stem}_{id}.json")),
            _ => dir.join(format!("{stem}_{id}_{n}.json")),
        };
        if same(&path) {
            return Ok(path);
        }
        match tmp.persist_noclobber(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => tmp = e.file,
            Err(e) => {
                return Err(Error::Io {
                    path,
                    source: e.error,
                })
            }
        }
        n = n.checked_add(1).ok_or_else(|| Error::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other("no free file name"),
        })?;
    }
}
