//! Backends that misbehave cannot hurt the oracle or stop a run.
//!
//! This binary is also an example of the Rust plug-in path: it registers its own backend
//! (`faulty`: the CPU backend, except on five cases where it segfaults, hangs, aborts, runs
//! out of memory or switches on flush-to-zero) and runs the harness with it; the harness
//! starts this very binary as the worker processes (`UOPKIT_WORKER_BACKEND`).
//!
//! Checks:
//! - each fault is reported as `faulty` failing that case, with the signal or reason, and
//!   every other trial still runs and passes; no `oracle::` trial changes;
//! - a C compiler wrapper that adds `-ffast-math -O3` (whose libraries switch on FTZ/DAZ
//!   when loaded) gives 0 oracle failures, and the FP change is reported on the backend.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use uopkit_compiler::runtime::fpenv;
use uopkit_conformance::backends::registry::{self, OpenOpts, Registry};
use uopkit_conformance::backends::{cpu::Cpu, Backend, BackendError, Job, Ran};
use uopkit_conformance::harness::{self, FailKind, Settings, Verdict};

struct Faulty;

impl Backend for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }

    fn allowances(&self) -> Option<String> {
        Some("cpu".into())
    }

    /// Asked in the worker (it knows the job): the harness sees a skip with this reason.
    fn skip_reason(&self, job: &Job) -> Option<String> {
        (job.case == "skipme").then(|| "faulty does not take cases named skipme".to_string())
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        match job.case {
            // SAFETY: deliberately crashing the worker process is the point of this test.
            // (Rust's own SIGSEGV handler ignores a raised signal: restore the default first.)
            "segv" => unsafe {
                libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                libc::raise(libc::SIGSEGV);
            },
            "hang" => loop {
                std::thread::sleep(Duration::from_secs(1));
            },
            "abort" => std::process::abort(),
            "oom" => {
                let v: Vec<u8> = vec![1; 8 << 30];
                std::hint::black_box(&v);
            }
            "ftz" => {
                let s = fpenv::current();
                fpenv::set(fpenv::FpState(s.0 | 0x8040));
            }
            _ => {}
        }
        Cpu.run(job)
    }
}

fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.register(
        "faulty",
        "the CPU backend with faults on chosen cases",
        true,
        || Ok(Arc::new(Faulty)),
    );
    r
}

struct Checks {
    failed: usize,
    passed: usize,
}

impl Checks {
    fn check(&mut self, name: &str, ok: bool, detail: impl FnOnce() -> String) {
        if ok {
            println!("test {name} ... ok");
            self.passed += 1;
        } else {
            println!("test {name} ... FAILED\n{}", detail());
            self.failed += 1;
        }
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn faults(c: &mut Checks) {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("corpus dir");
    let src = repo().join("corpus/alu/add_float32.json");
    for name in ["segv", "hang", "abort", "oom", "ftz", "skipme"] {
        std::fs::copy(&src, corpus.join(format!("{name}.json"))).expect("copy");
    }
    for (i, other) in [
        "reduce/add_float32_order",
        "alu/mul_float32",
        "cast/float32_to_floats",
    ]
    .iter()
    .enumerate()
    {
        std::fs::copy(
            repo().join(format!("corpus/{other}.json")),
            corpus.join(format!("ok{i}.json")),
        )
        .expect("copy");
    }
    let mut open = OpenOpts::default();
    open.limits.timeout = Duration::from_secs(5);
    open.limits.memory = Some(2 << 30);
    let settings = Settings {
        corpus: corpus.clone(),
        manifests: Some(repo().join("manifests")),
        backends: vec!["oracle".into(), "faulty".into()],
        filters: vec![],
        open,
    };
    let suite = harness::load_suite(&settings, &registry()).expect("suite");
    let results = suite.run_all(2);
    let verdict = |case: &str, backend: &str| -> Verdict {
        results
            .iter()
            .find(|r| {
                suite.cases[r.case].name == case
                    && suite.backends[r.backend].backend.name() == backend
            })
            .map(|r| r.verdict.clone())
            .expect("trial ran")
    };
    for (case, want) in [
        ("segv", "SIGSEGV"),
        ("hang", "no answer within 5 s"),
        ("abort", "SIGABRT"),
        ("oom", "ran out of memory"),
        ("ftz", "FP control state"),
    ] {
        let v = verdict(case, "faulty");
        c.check(
            &format!("faults::{case}_is_that_backends_failure"),
            matches!(&v, Verdict::Fail { kind: FailKind::Crash, message } if message.contains(want)),
            || format!("expected a crash failure mentioning '{want}', got {v:?}"),
        );
    }
    let v = verdict("skipme", "faulty");
    c.check(
        "faults::a_workers_skip_reason_is_a_skip",
        v == Verdict::Skip("faulty does not take cases named skipme".into()),
        || format!("{v:?}"),
    );
    for case in ["ok0", "ok1", "ok2"] {
        let v = verdict(case, "faulty");
        c.check(
            &format!("faults::{case}_still_passes"),
            v == Verdict::Pass,
            || format!("{v:?}"),
        );
    }
    let oracle_bad: Vec<String> = results
        .iter()
        .filter(|r| {
            suite.backends[r.backend].backend.name() == "oracle" && r.verdict != Verdict::Pass
        })
        .map(|r| format!("{}: {:?}", suite.trial_name(r.case, r.backend), r.verdict))
        .collect();
    c.check(
        "faults::no_oracle_trial_changes",
        oracle_bad.is_empty(),
        || oracle_bad.join("\n"),
    );
}

/// An oracle verdict as a clean run gives it: a pass, or a failure manifests/xfail.json lists
/// (with the text it must contain), such as the imported tinygrad kernels whose tinygrad
/// results contract multiply-adds.
fn as_listed(v: &Verdict) -> bool {
    matches!(v, Verdict::Pass | Verdict::XFail { .. })
}

fn fast_math(c: &mut Checks) {
    let dir = tempfile::tempdir().expect("temp dir");
    let wrapper = dir.path().join("cc-fast-math");
    std::fs::write(&wrapper, "#!/bin/sh\nexec gcc -ffast-math -O3 \"$@\"\n").expect("wrapper");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    // The workers inherit these: a fresh cache, so every kernel is built by the wrapper.
    std::env::set_var("UOPKIT_CC", &wrapper);
    std::env::set_var("UOPKIT_CACHE_DIR", dir.path().join("cache"));
    let settings = |backends: &[&str], filters: &[&str]| Settings {
        corpus: repo().join("corpus"),
        manifests: Some(repo().join("manifests")),
        backends: backends.iter().map(|s| s.to_string()).collect(),
        filters: filters.iter().map(|s| s.to_string()).collect(),
        open: OpenOpts::default(),
    };
    let reg = registry();
    // First the compiled backend (in workers), then the oracle in this same process.
    let s1 = harness::load_suite(
        &settings(
            &["cpu", "oracle"],
            &[
                "policy",
                "reduce/add_float",
                "alu/sub_float",
                "alu/fdiv_float32",
            ],
        ),
        &reg,
    )
    .expect("suite");
    let r1 = s1.run_all(2);
    let s2 = harness::load_suite(&settings(&["oracle"], &[]), &reg).expect("suite");
    let r2 = s2.run_all(2);
    let oracle_bad: Vec<String> = r1
        .iter()
        .filter(|r| s1.backends[r.backend].backend.name() == "oracle" && !as_listed(&r.verdict))
        .map(|r| s1.trial_name(r.case, r.backend))
        .chain(
            r2.iter()
                .filter(|r| !as_listed(&r.verdict))
                .map(|r| s2.trial_name(r.case, r.backend)),
        )
        .collect();
    c.check(
        "fast_math::zero_oracle_failures",
        oracle_bad.is_empty(),
        || oracle_bad.join("\n"),
    );
    let fp_reports = r1
        .iter()
        .filter(|r| matches!(&r.verdict, Verdict::Fail { message, .. } if message.contains("FP control state")))
        .count();
    c.check(
        "fast_math::the_fp_change_is_reported_on_the_backend",
        fp_reports > 0,
        || {
            r1.iter()
                .map(|r| format!("{}: {:?}", s1.trial_name(r.case, r.backend), r.verdict))
                .collect::<Vec<_>>()
                .join("\n")
        },
    );
    std::env::remove_var("UOPKIT_CC");
    std::env::remove_var("UOPKIT_CACHE_DIR");
}

fn main() -> ExitCode {
    if let Some(code) = registry::serve_if_worker(&registry()) {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let mut c = Checks {
        failed: 0,
        passed: 0,
    };
    faults(&mut c);
    if Path::new("/usr/bin/gcc").exists() || which("gcc") {
        fast_math(&mut c);
    } else {
        println!("test fast_math ... ignored (no gcc on PATH for the -ffast-math wrapper)");
    }
    println!("\nbackend_faults: {} passed, {} failed", c.passed, c.failed);
    if c.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn which(p: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
}
