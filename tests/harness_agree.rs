//! `uopkit check` and the libtest harness (`cargo test --test conformance`) are one harness:
//! on a small corpus with an expected failure, an unexpected pass and a skip, both give each
//! trial the same verdict; and the CLI's selection and set-up errors behave as documented.

use std::path::PathBuf;
use std::process::Command;

use uopkit_conformance::backends::registry::{OpenOpts, Registry};
use uopkit_conformance::harness::{self, Settings};

mod common;
use common::repo;

fn uopkit(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo())
        .output()
        .expect("the uopkit binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// good (passes everywhere), bad (its expected value is wrong: the oracle trial fails, the
/// kernels trial — judged against the oracle — passes), ub (oracle-only). The manifest
/// lists oracle::bad (→ xfail) and kernels::good (→ xpass).
fn small_corpus() -> (tempfile::TempDir, PathBuf) {
    common::small_corpus(
        &["good", "bad", "ub"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "bad", "backend": "oracle", "reason": "its expected value is wrong on purpose"},
            {"case": "good", "backend": "kernels", "reason": "listed although it passes"}]}"#,
    )
}

#[test]
fn check_and_the_libtest_harness_agree() {
    let (_dir, corpus) = small_corpus();
    let corpus_s = corpus.to_str().expect("utf-8");
    let (code, text) = uopkit(
        &[
            "check",
            "--corpus",
            corpus_s,
            "--backend",
            "oracle,kernels",
            "-v",
        ],
        &[],
    );
    assert_eq!(code, 1, "an xpass fails the run:\n{text}");
    // check prints every trial that is not a plain pass, with its label.
    let mut from_check = std::collections::BTreeMap::new();
    for b in ["oracle", "kernels"] {
        for c in ["bad", "good", "ub"] {
            let name = format!("{b}::{c}");
            let label = ["FAIL", "XPASS", "xfail", "skip", "BAD"]
                .into_iter()
                .find(|l| {
                    text.lines()
                        .any(|line| line.starts_with(&format!("{l:<5} {name}:")))
                })
                .unwrap_or("ok");
            from_check.insert(name, label);
        }
    }
    let settings = Settings {
        corpus: corpus.clone(),
        manifests: None,
        backends: vec!["oracle".into(), "kernels".into()],
        filters: vec![],
        open: OpenOpts::default(),
    };
    // libtest's report goes to a log file, not into this test's own output.
    let log = corpus.parent().expect("temp dir").join("libtest.log");
    let args = libtest_mimic::Arguments::from_iter([
        "harness_agree",
        "--test-threads",
        "1",
        "--logfile",
        log.to_str().expect("utf-8"),
    ]);
    let (conclusion, labels) =
        harness::libtest_run(&Registry::builtin(), &settings, &args).expect("suite loads");
    let from_libtest: std::collections::BTreeMap<String, &str> = labels.into_iter().collect();
    let want: std::collections::BTreeMap<String, &str> = [
        ("kernels::bad", "ok"),
        ("kernels::good", "XPASS"),
        ("kernels::ub", "skip"),
        ("oracle::bad", "xfail"),
        ("oracle::good", "ok"),
        ("oracle::ub", "ok"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .collect();
    assert_eq!(from_check, want, "uopkit check:\n{text}");
    assert_eq!(from_libtest, want);
    assert_eq!(
        conclusion.num_failed, 1,
        "only the xpass fails under libtest"
    );
    assert_eq!(
        conclusion.num_ignored, 2,
        "the skip and the xfail show as ignored with their reasons"
    );
    let log = std::fs::read_to_string(&log).expect("libtest log");
    assert!(
        log.contains("xfail: its expected value is wrong on purpose"),
        "{log}"
    );
    assert!(
        log.contains("undefined or invalid graph: oracle-only"),
        "{log}"
    );
    assert!(log.contains("XPASS"), "{log}");
    assert!(
        text.contains("oracle: 2 passed, 0 failed, 1 xfail, 0 xpass, 0 skipped"),
        "{text}"
    );
    assert!(
        text.contains("kernels: 1 passed, 0 failed, 0 xfail, 1 xpass, 1 skipped"),
        "{text}"
    );
}

#[test]
fn a_selection_that_selects_nothing_is_an_error() {
    let (code, text) = uopkit(&["check", "--backend", "oracle", "no_such_case_name"], &[]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("'no_such_case_name' selects no case"),
        "{text}"
    );
}

#[test]
fn selections_accept_paths_and_the_summary_counts_the_selected_cases() {
    let (code, text) = uopkit(&["check", "--backend", "oracle", "corpus/seeds"], &[]);
    assert_eq!(code, 0, "{text}");
    let n = std::fs::read_dir(repo().join("corpus/seeds"))
        .expect("seeds")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json"))
        })
        .count();
    assert!(text.contains(&format!("{n} case(s) selected")), "{text}");
    assert!(
        text.contains(&format!("oracle: {n} passed, 0 failed")),
        "{text}"
    );
    let (code, text) = uopkit(
        &[
            "check",
            "--backend",
            "oracle",
            "corpus/alu/add_float32.json",
        ],
        &[],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("1 case(s) selected"), "{text}");
}

#[test]
fn a_missing_c_compiler_is_reported_once_with_a_hint() {
    let (code, text) = uopkit(
        &["check", "--backend", "oracle,cpu", "alu/add_float32"],
        &[("UOPKIT_CC", "/nonexistent/cc")],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/nonexistent/cc"), "{text}");
    assert!(text.contains("hint: `--backend oracle`"), "{text}");
    assert_eq!(text.matches("error:").count(), 1, "{text}");
}

#[test]
fn an_unknown_backend_lists_the_known_ones() {
    let (code, text) = uopkit(&["check", "--backend", "nope"], &[]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("unknown backend 'nope' (known: cpu, cuda, cuda-cpu, gpusim, hip, hip-cpu, hiprtc, kernels, nvrtc, oracle, exec:CMD, tinygrad:DEV)"),
        "{text}"
    );
}

#[test]
fn manifests_are_found_beside_the_corpus_from_any_directory() {
    let (dir, corpus) = small_corpus();
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args([
            "check",
            "--corpus",
            corpus.to_str().expect("utf-8"),
            "--backend",
            "oracle",
        ])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("oracle: 2 passed, 0 failed, 1 xfail"),
        "{text}"
    );
}

#[test]
fn an_invalid_case_exits_2_on_any_backend() {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    // ADD of int32 and float32: the verifier rejects it, and the case does not expect that.
    std::fs::write(
        corpus.join("mixed.json"),
        r#"{"format": "uopkit-case/1", "description": "invalid on purpose", "graph": [
            {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 2, "device": "CPU"}},
            {"id": 1, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 1, "size": 2, "device": "CPU"}},
            {"id": 2, "op": "ADD", "dtype": "int32", "src": [0, 1]}],
          "inputs": {"0": {"fill": 1}, "1": {"fill": 1}},
          "outputs": [{"name": "o", "node": 2, "shape": [2], "expect": [2, 2]}]}"#,
    )
    .expect("write");
    for backend in ["oracle", "kernels"] {
        let (code, text) = uopkit(
            &[
                "check",
                "--corpus",
                corpus.to_str().expect("utf-8"),
                "--backend",
                backend,
            ],
            &[],
        );
        assert_eq!(code, 2, "{backend}:\n{text}");
        assert!(text.contains(&format!("BAD   {backend}::mixed:")), "{text}");
        assert!(text.contains("1 unreadable or invalid"), "{text}");
    }
}
