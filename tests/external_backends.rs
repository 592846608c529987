//! External backends through `uopkit check --backend exec:…` (docs/backend-protocol.md):
//! the two examples pass their declared subsets, a deliberately wrong one is caught, and a
//! broken one (bad JSON, exit, hang, wrong sizes) is reported clearly, case by case.
//!
//! The numpy example needs a Python with numpy: `UOPKIT_TEST_PYTHON` names it (CI sets
//! it to a venv's); without one that test says so and is skipped, unless
//! `UOPKIT_REQUIRE_NUMPY=1` (CI), where a missing numpy fails.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("UOPKIT_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn uopkit(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the uopkit binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn has_numpy() -> bool {
    let ok = Command::new(python())
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("UOPKIT_REQUIRE_NUMPY").is_ok_and(|v| v == "1") {
        panic!(
            "UOPKIT_REQUIRE_NUMPY=1 but '{}' cannot import numpy",
            python()
        );
    }
    ok
}

/// `name: N passed, F failed, …` → (N, F).
fn counts(text: &str, backend: &str) -> (usize, usize) {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{backend}: ")))
        .unwrap_or_else(|| panic!("no summary for {backend}:\n{text}"));
    let num = |what: &str| -> usize {
        line.split(", ")
            .find_map(|p| {
                p.trim_start_matches(&format!("{backend}: "))
                    .strip_suffix(what)
            })
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '{what}' in {line}"))
    };
    (num(" passed"), num(" failed"))
}

#[test]
fn kernel_level_example_passes_its_subset() {
    let cmd = format!("exec:{} examples/backends/kernel_interp.py", python());
    let (code, text) = uopkit(&["check", "--backend", &cmd]);
    assert_eq!(code, 0, "{text}");
    let (passed, failed) = counts(&text, "kernel-interp");
    assert_eq!(failed, 0, "{text}");
    assert!(passed >= 200, "only {passed} cases passed:\n{text}");
}

#[test]
fn graph_level_example_passes_its_subset_and_a_wrong_one_is_caught() {
    if !has_numpy() {
        eprintln!(
            "skipped: '{}' cannot import numpy (set UOPKIT_TEST_PYTHON)",
            python()
        );
        return;
    }
    let script = repo().join("examples/backends/numpy_graph.py");
    let cmd = format!("exec:{} {}", python(), script.display());
    let (code, text) = uopkit(&["check", "--backend", &cmd]);
    assert_eq!(code, 0, "{text}");
    let (passed, failed) = counts(&text, "numpy-graph");
    assert_eq!(failed, 0, "{text}");
    assert!(passed >= 200, "only {passed} cases passed:\n{text}");
    let wrong = format!("{cmd} --wrong");
    let (code, text) = uopkit(&["check", "--backend", &wrong, "alu/add_float32"]);
    assert_eq!(code, 1, "the wrong backend was not caught:\n{text}");
    assert!(
        text.contains("FAIL  numpy-graph-wrong::alu/add_float32"),
        "{text}"
    );
    assert!(text.contains("1 ulp"), "{text}");
}

/// A corpus of copies of one case, named after the misbehaviour they trigger.
fn broken_corpus(names: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    for n in names {
        std::fs::copy(
            repo().join("corpus/alu/add_float32.json"),
            corpus.join(format!("{n}.json")),
        )
        .expect("copy");
    }
    (dir, corpus)
}

#[test]
fn a_broken_backend_is_reported_case_by_case() {
    let names = [
        "garbage",
        "exit",
        "hang",
        "count",
        "size",
        "width",
        "error",
        "unsupported",
        "zeros",
    ];
    let (_dir, corpus) = broken_corpus(&names);
    let cmd = format!(
        "exec:{} {}",
        python(),
        repo().join("tests/backends/broken.py").display()
    );
    let (code, text) = uopkit(&[
        "check",
        "--corpus",
        corpus.to_str().expect("utf-8"),
        "--backend",
        &format!("oracle,{cmd}"),
        "--timeout",
        "3",
    ]);
    assert_eq!(code, 1, "{text}");
    for (case, want) in [
        ("garbage", "not a valid protocol message"),
        ("exit", "exited with status 3"),
        ("hang", "no answer within 3 s"),
        ("count", "answered 0 output(s) for the 1 requested"),
        ("size", "element(s), expected 20"),
        ("width", "does not fit in float32"),
        ("error", "this case failed on purpose"),
        ("zeros", "elements differ"),
    ] {
        let line = text
            .lines()
            .position(|l| l.starts_with(&format!("FAIL  broken::{case}:")))
            .unwrap_or_else(|| panic!("no failure reported for {case}:\n{text}"));
        let report: String = text
            .lines()
            .skip(line)
            .take(4)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            report.contains(want),
            "{case}: expected '{want}' in:\n{report}"
        );
    }
    assert!(
        text.contains("exiting on purpose"),
        "the backend's stderr is not shown:\n{text}"
    );
    assert!(text.contains("oracle: 9 passed, 0 failed"), "{text}");
    assert!(
        text.contains("broken: 0 passed, 8 failed, 0 xfail, 0 xpass, 1 skipped"),
        "{text}"
    );
    assert!(text.contains("skipped 1: broken: not this one"), "{text}");
}

#[test]
fn a_backend_that_does_not_start_is_reported_once_with_exit_2() {
    let (code, text) = uopkit(&[
        "check",
        "--backend",
        "exec:/nonexistent/backend",
        "alu/add_float32",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("cannot start '/nonexistent/backend'"),
        "{text}"
    );
    assert!(text.contains("hint: `--backend oracle`"), "{text}");
    assert_eq!(
        text.matches("error:").count(),
        1,
        "reported more than once:\n{text}"
    );
}
