//! The tinygrad bridge (`--backend tinygrad:DEV`, bridges/tinygrad/): the whole corpus passes
//! on tinygrad:PYTHON and tinygrad:CPU (passed, allowed by manifests/allowances/tinygrad-*.json,
//! expected failures of manifests/xfail.json, or skipped with the bridge's reason); a
//! deliberately wrong bridge (`UOPKIT_TINYGRAD_WRONG=swap-add-mul`) fails, naming the case;
//! without tinygrad every trial is skipped with the reason, or fails where required.
//!
//! The interpreter is `UOPKIT_TINYGRAD_PYTHON`, else `<repo>/.venv/bin/python`, else
//! `python3` (what the registry runs). Without tinygrad 0.14.0 there the corpus tests say so
//! and pass, unless `UOPKIT_REQUIRE_TINYGRAD=1` (CI), where they fail.

mod common;

use common::{repo, uopkit_with};
use std::process::Command;

fn python() -> String {
    match std::env::var("UOPKIT_TINYGRAD_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            let venv = repo().join(".venv/bin/python");
            if venv.is_file() {
                venv.to_string_lossy().into_owned()
            } else {
                "python3".into()
            }
        }
    }
}

/// Whether tinygrad 0.14.0 is importable; panics when it is required and is not.
fn has_tinygrad(test: &str) -> bool {
    let ok = Command::new(python())
        .args([
            "-c",
            "import importlib.metadata as m, tinygrad; assert m.version('tinygrad') == '0.14.0'",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("UOPKIT_REQUIRE_TINYGRAD").is_ok_and(|v| v == "1") {
            panic!(
                "UOPKIT_REQUIRE_TINYGRAD=1 but '{}' cannot import tinygrad 0.14.0",
                python()
            );
        }
        eprintln!("{test}: skipped: '{}' has no tinygrad 0.14.0", python());
    }
    ok
}

/// The summary line `name: N passed, F failed, X xfail, P xpass, S skipped` as numbers.
fn tally(text: &str, backend: &str) -> [usize; 5] {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{backend}: ")))
        .unwrap_or_else(|| panic!("no summary for {backend}:\n{text}"));
    let body = &line[backend.len() + 2..];
    let num = |what: &str| -> usize {
        body.split(", ")
            .find_map(|p| p.split(" (").next().and_then(|p| p.strip_suffix(what)))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '{what}' in {line}"))
    };
    [
        num(" passed"),
        num(" failed"),
        num(" xfail"),
        num(" xpass"),
        num(" skipped"),
    ]
}

fn jobs() -> String {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .to_string()
}

#[test]
fn whole_corpus_passes_on_tinygrad_python_and_cpu() {
    if !has_tinygrad("whole_corpus_passes_on_tinygrad_python_and_cpu") {
        return;
    }
    let py = python();
    let start = std::time::Instant::now();
    let out = uopkit_with(
        &[
            "check",
            "--backend",
            "tinygrad:PYTHON,tinygrad:CPU",
            "--jobs",
            &jobs(),
            "--color",
            "never",
        ],
        &[
            ("UOPKIT_TINYGRAD_PYTHON", py.as_str()),
            ("UOPKIT_REQUIRE_BACKENDS", "tinygrad:PYTHON,tinygrad:CPU"),
        ],
        &["UOPKIT_TINYGRAD_WRONG", "UOPKIT_BACKENDS"],
    );
    let text = out.all();
    eprintln!(
        "tinygrad corpus run: {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(out.code, 0, "the corpus fails on tinygrad:\n{text}");
    for b in ["tinygrad:PYTHON", "tinygrad:CPU"] {
        let [passed, failed, _xfail, xpass, skipped] = tally(&text, b);
        assert_eq!((failed, xpass), (0, 0), "{b}:\n{text}");
        // Most of the corpus runs (the rest are the oracle-only UB cases and declared skips).
        assert!(passed > 200, "{b}: only {passed} passed:\n{text}");
        // Every skip is counted under a reason line.
        let reasons: usize = text
            .lines()
            .skip_while(|l| !l.starts_with(&format!("{b}: ")))
            .skip(1)
            .take_while(|l| l.starts_with("  skipped "))
            .filter_map(|l| l.trim_start_matches("  skipped ").split(':').next())
            .filter_map(|n| n.trim().parse::<usize>().ok())
            .sum();
        assert_eq!(reasons, skipped, "{b}: skips without a reason:\n{text}");
    }
}

#[test]
fn a_bridge_that_swaps_add_and_mul_is_caught() {
    if !has_tinygrad("a_bridge_that_swaps_add_and_mul_is_caught") {
        return;
    }
    let py = python();
    let out = uopkit_with(
        &[
            "check",
            "--backend",
            "tinygrad:PYTHON",
            "--color",
            "never",
            "alu/add_int32",
            "alu/mul_int32",
        ],
        &[
            ("UOPKIT_TINYGRAD_PYTHON", py.as_str()),
            ("UOPKIT_TINYGRAD_WRONG", "swap-add-mul"),
        ],
        &["UOPKIT_BACKENDS"],
    );
    let text = out.all();
    assert_eq!(out.code, 1, "the wrong bridge was not caught:\n{text}");
    for case in ["alu/add_int32", "alu/mul_int32"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("FAIL  tinygrad:PYTHON::{case}: "))),
            "no failing trial names {case}:\n{text}"
        );
    }
    assert_eq!(tally(&text, "tinygrad:PYTHON")[1], 2, "{text}");
}

#[test]
fn the_python_device_skips_a_case_over_its_element_budget() {
    if !has_tinygrad("the_python_device_skips_a_case_over_its_element_budget") {
        return;
    }
    let py = python();
    // alu/add_int32 has two 11-element buffers: 22 elements.
    let run = |budget: &str| {
        uopkit_with(
            &[
                "check",
                "--backend",
                "tinygrad:PYTHON,tinygrad:CPU",
                "--color",
                "never",
                "alu/add_int32",
            ],
            &[
                ("UOPKIT_TINYGRAD_PYTHON", py.as_str()),
                ("UOPKIT_TINYGRAD_PYTHON_MAX_ELEMENTS", budget),
            ],
            &["UOPKIT_BACKENDS", "UOPKIT_TINYGRAD_WRONG"],
        )
    };
    let over = run("21");
    let text = over.all();
    assert_eq!(over.code, 0, "{text}");
    assert_eq!(tally(&text, "tinygrad:PYTHON"), [0, 0, 0, 0, 1], "{text}");
    assert!(
        text.contains("skipped 1: tinygrad's PYTHON device interprets every element in Python: a case with more than 21 buffer elements"),
        "{text}"
    );
    // The budget is the PYTHON device's only: CPU runs the case.
    assert_eq!(tally(&text, "tinygrad:CPU")[0], 1, "{text}");
    let within = run("22");
    let text = within.all();
    assert_eq!(tally(&text, "tinygrad:PYTHON"), [1, 0, 0, 0, 0], "{text}");
    // A budget that is not a whole number is an error naming the variable, not a silent
    // default (nor, for a negative one, a skip of everything).
    for value in ["lots", "-1"] {
        let bad = run(value);
        let text = bad.all();
        assert_eq!(bad.code, 1, "{text}");
        assert!(
            text.contains(&format!(
                "UOPKIT_TINYGRAD_PYTHON_MAX_ELEMENTS='{value}' is not a whole number"
            )),
            "{text}"
        );
    }
}

#[test]
fn without_tinygrad_trials_are_skipped_with_the_reason_or_fail_when_required() {
    let args = [
        "check",
        "--backend",
        "tinygrad:PYTHON",
        "--color",
        "never",
        "alu/add_int32",
    ];
    let missing = "/nonexistent/python-for-uopkit-test";
    let out = uopkit_with(
        &args,
        &[("UOPKIT_TINYGRAD_PYTHON", missing)],
        &["UOPKIT_REQUIRE_BACKENDS", "UOPKIT_BACKENDS"],
    );
    let text = out.all();
    assert_eq!(out.code, 0, "{text}");
    assert!(
        text.contains("skipped 1: the tinygrad bridge (/nonexistent/python-for-uopkit-test")
            && text.contains("did not start"),
        "{text}"
    );
    let out = uopkit_with(
        &args,
        &[
            ("UOPKIT_TINYGRAD_PYTHON", missing),
            ("UOPKIT_REQUIRE_BACKENDS", "tinygrad:PYTHON"),
        ],
        &["UOPKIT_BACKENDS"],
    );
    assert_eq!(
        out.code,
        1,
        "a required tinygrad that is absent must fail:\n{}",
        out.all()
    );
}

#[test]
fn a_bad_device_name_is_a_clear_error() {
    let out = uopkit_with(
        &["check", "--backend", "tinygrad:bad device", "alu/add_int32"],
        &[],
        &["UOPKIT_BACKENDS"],
    );
    assert_eq!(out.code, 2, "{}", out.all());
    assert!(
        out.all().contains("a tinygrad device name is"),
        "{}",
        out.all()
    );
}
