//! The libtest harness reads and opens only what the selected trials need (cargo-nextest
//! runs each trial in its own process as `--exact NAME`): a run of one trial does not open
//! the other backends nor fail on another case's broken file, `--list` opens nothing and
//! still lists every trial, and a full run reports the broken case as failing trials.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uopkit_conformance::backends::registry::{OpenOpts, Registry};
use uopkit_conformance::backends::Backend;
use uopkit_conformance::harness::{self, Settings};

mod common;

/// good, bad (its oracle trial fails) and broken (not JSON at all).
fn corpus() -> (tempfile::TempDir, PathBuf) {
    let (dir, corpus) = common::small_corpus(
        &["good", "bad"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": []}"#,
    );
    std::fs::write(corpus.join("broken.json"), "{ this is not json").expect("write");
    (dir, corpus)
}

/// The builtin backends and `unopenable`, which fails whenever it is opened.
fn registry() -> Registry {
    let mut reg = Registry::builtin();
    reg.register(
        "unopenable",
        "fails to open: opened only when one of its trials runs",
        false,
        || -> Result<Arc<dyn Backend>, String> { Err("the unopenable backend was opened".into()) },
    );
    reg
}

fn settings(corpus: &Path, backends: &[&str]) -> Settings {
    Settings {
        corpus: corpus.to_path_buf(),
        manifests: None,
        backends: backends.iter().map(|b| b.to_string()).collect(),
        filters: vec![],
        open: OpenOpts::default(),
    }
}

/// libtest's conclusion and the trials' labels, or the set-up error.
type Outcome = Result<(libtest_mimic::Conclusion, Vec<(String, &'static str)>), String>;

/// Runs the harness with libtest arguments `extra`; its report goes to a log file. Returns
/// the result (conclusion and labels) or the set-up error, and the log.
fn run(corpus: &Path, backends: &[&str], extra: &[&str]) -> (Outcome, String) {
    let log = corpus.parent().expect("temp dir").join("libtest.log");
    let _ = std::fs::remove_file(&log);
    let mut argv = vec![
        "trial_selection",
        "--test-threads",
        "1",
        "--logfile",
        log.to_str().expect("utf-8"),
    ];
    argv.extend_from_slice(extra);
    let args = libtest_mimic::Arguments::from_iter(argv);
    let got = harness::libtest_run(&registry(), &settings(corpus, backends), &args)
        .map_err(|e| e.to_string());
    (got, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn one_exact_trial_opens_one_backend_and_ignores_other_cases() {
    let (_dir, corpus) = corpus();
    let (got, log) = run(
        &corpus,
        &["oracle", "unopenable"],
        &["--exact", "oracle::good"],
    );
    let (conclusion, labels) = got.expect("the other backend is not opened");
    assert_eq!(labels, vec![("oracle::good".to_string(), "ok")], "{log}");
    assert_eq!((conclusion.num_passed, conclusion.num_failed), (1, 0));
    assert_eq!(conclusion.num_filtered_out, 5, "{log}");
    assert!(!log.contains("broken"), "{log}");
    // The same arguments name the trial with its kind, as `--list` prints it.
    let (got, log) = run(
        &corpus,
        &["oracle", "unopenable"],
        &["--exact", "[oracle] oracle::good"],
    );
    let (_, labels) = got.expect("the other backend is not opened");
    assert_eq!(labels, vec![("oracle::good".to_string(), "ok")], "{log}");
}

#[test]
fn a_filter_opens_only_the_backends_it_selects() {
    let (_dir, corpus) = corpus();
    let (got, log) = run(&corpus, &["oracle", "unopenable"], &["oracle::"]);
    let (conclusion, labels) = got.expect("the other backend is not opened");
    let names: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["oracle::bad", "oracle::broken", "oracle::good"]);
    assert_eq!(conclusion.num_failed, 2, "bad and broken fail:\n{log}");
}

#[test]
fn listing_opens_nothing_and_names_every_trial_as_a_full_run_does() {
    let (_dir, corpus) = corpus();
    let (got, log) = run(&corpus, &["oracle", "unopenable"], &["--list"]);
    let _ = got.expect("listing opens no backend");
    let listed: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(|l| l.split_once("] ").map_or(l, |(_, n)| n).to_string())
        .collect();
    let mut want = vec![];
    for b in ["oracle", "unopenable"] {
        for c in ["bad", "broken", "good"] {
            want.push(format!("{b}::{c}"));
        }
    }
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, want, "{log}");
    // A full run (without the unopenable backend) runs under exactly the listed names.
    let (got, log) = run(&corpus, &["oracle"], &[]);
    let (_, labels) = got.expect("suite loads");
    let ran: Vec<String> = labels.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(ran, want[..3], "{log}");
    let (got, log) = run(&corpus, &["oracle"], &["--list"]);
    let _ = got.expect("listing");
    assert_eq!(log.lines().filter(|l| l.ends_with(": test")).count(), 3);
}

#[test]
fn a_full_run_reports_the_broken_case_and_the_unopenable_backend() {
    let (_dir, corpus) = corpus();
    let (got, log) = run(&corpus, &["oracle"], &[]);
    let (conclusion, labels) = got.expect("suite loads");
    assert!(
        labels.contains(&("oracle::broken".to_string(), "BAD")),
        "{labels:?}"
    );
    assert_eq!(conclusion.num_failed, 2, "{log}");
    assert!(log.contains("oracle::broken"), "{log}");
    assert!(
        log.contains("broken.json"),
        "the failure names the file:\n{log}"
    );
    // A run that needs the unopenable backend stops before any trial, naming it.
    let (got, _) = run(&corpus, &["oracle", "unopenable"], &[]);
    let err = got.expect_err("a set-up error");
    assert!(
        err.contains("backend unopenable: the unopenable backend was opened"),
        "{err}"
    );
}

#[test]
fn a_plan_reads_only_the_cases_it_keeps() {
    let (_dir, corpus) = corpus();
    let reg = registry();
    let plan = harness::plan_suite(&settings(&corpus, &["oracle", "unopenable"]), &reg)
        .expect("plans without opening");
    let names: Vec<&str> = plan.cases.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["bad", "broken", "good"]);
    assert_eq!(plan.backends, ["oracle", "unopenable"]);
    let good = names.iter().position(|n| *n == "good").expect("good");
    let suite = plan.open(&reg, |c| c == good, |b| b == 0).expect("opens");
    assert_eq!(suite.cases.len(), 1);
    assert_eq!(suite.cases[0].name, "good");
    assert!(suite.cases[0].case.is_ok());
    assert_eq!(suite.backends.len(), 1);
    assert_eq!(suite.backends[0].backend.name(), "oracle");
}
