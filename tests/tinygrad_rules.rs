//! tinygrad's own rule sets, fuzzed against the oracle (conformance/src/gen/tinygrad_rules.rs,
//! bridges/tinygrad/rules.py): the real `symbolic` keeps the meaning of a budget of random
//! index expressions; a deliberately wrong variant of a tinygrad rule, switched on in the
//! bridge (`--wrong NAME`), is caught with a small counterexample written as a case; an
//! interpreter without tinygrad, or one that never answers, is a typed error.
//!
//! Without tinygrad 0.14.0 the tinygrad tests say so and pass, unless
//! `UOPKIT_REQUIRE_TINYGRAD=1` (CI), where they fail.

use std::process::Command;
use std::time::Duration;

use uopkit_conformance::gen::tinygrad_rules::{
    check_tinygrad_rules, python, Failure, IndexDtype, RulesError, TinygradRulesConfig, BATCH,
};

fn has_tinygrad(test: &str) -> bool {
    let py = python(&TinygradRulesConfig::default());
    let ok = Command::new(&py)
        .args([
            "-c",
            "import importlib.metadata as m, tinygrad; assert m.version('tinygrad') == '0.14.0'",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("UOPKIT_REQUIRE_TINYGRAD").is_ok_and(|v| v == "1") {
            panic!("UOPKIT_REQUIRE_TINYGRAD=1 but '{py}' cannot import tinygrad 0.14.0");
        }
        eprintln!("{test}: skipped: '{py}' has no tinygrad 0.14.0");
    }
    ok
}

fn budget(cases: u32) -> TinygradRulesConfig {
    TinygradRulesConfig {
        cases,
        ..TinygradRulesConfig::default()
    }
}

fn passes(rule_set: &str, cases: u32) {
    match check_tinygrad_rules(rule_set, &budget(cases)) {
        Ok(r) => {
            eprintln!(
                "{rule_set}: {} generated, {} checked ({} rewritten; {}; {} comparisons), {} may overflow, {} unsupported {:?}, {} raised {:?}, {} assignments, {:.1} s ({:.0}/s)",
                r.cases, r.checked, r.rewritten, r.by_dtype(), r.bool_roots, r.may_overflow, r.unsupported, r.unsupported_reasons,
                r.raised, r.raised_messages, r.assignments, r.seconds, r.rate()
            );
            // Every dtype is sent (weakint, int64, int32), and bool comparisons.
            for d in IndexDtype::ALL {
                let n = r.checked_by_dtype.get(&d).copied().unwrap_or(0);
                assert!(n * 5 >= r.checked, "{d}: {n} of {}", r.checked);
            }
            assert!(r.bool_roots * 20 >= r.checked, "{r:?}");
            assert!(!r.stopped_by_time);
            assert_eq!(r.cases, cases);
            // Almost every expression is checked, and tinygrad changes a third or more.
            assert!(r.checked * 10 >= cases * 9, "{r:?}");
            assert!(r.rewritten * 3 >= r.checked, "{r:?}");
            assert_eq!(r.unsupported, 0, "{:?}", r.unsupported_reasons);
            assert_eq!(r.raised, 0, "{:?}", r.raised_messages);
        }
        Err(f) => panic!("{f}"),
    }
}

#[test]
fn real_symbolic_keeps_the_meaning_of_every_expression() {
    if has_tinygrad("real_symbolic_keeps_the_meaning_of_every_expression") {
        passes("symbolic", 1500);
    }
}

#[test]
fn real_sym_and_symbolic_simple_keep_the_meaning() {
    if has_tinygrad("real_sym_and_symbolic_simple_keep_the_meaning") {
        passes("sym", 300);
        passes("symbolic_simple", 300);
    }
}

/// The 10,000-expression budget (by hand: `cargo test --test tinygrad_rules -- --ignored`).
#[test]
#[ignore]
fn real_symbolic_ten_thousand() {
    if has_tinygrad("real_symbolic_ten_thousand") {
        passes("symbolic", 10_000);
    }
}

fn caught(fault: &str, expect_in_before: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = TinygradRulesConfig {
        cases: 1500,
        fault: Some(fault.into()),
        case_dir: Some(dir.path().to_path_buf()),
        ..TinygradRulesConfig::default()
    };
    let cx = match check_tinygrad_rules("symbolic", &cfg) {
        Err(Failure::Counterexample(cx)) => cx,
        Err(Failure::Error(e)) => panic!("{fault}: an error instead of a counterexample: {e}"),
        Ok(r) => panic!("{fault}: the wrong rule was not caught: {r:?}"),
    };
    eprintln!("{fault}: {cx}");
    assert!(cx.nodes <= 8, "not shrunk: {cx}");
    assert!(cx.message.contains("not the same at"), "{cx}");
    for what in expect_in_before {
        assert!(cx.before.contains(what), "{cx}");
    }
    // The case: the expression over all assignments, and the oracle's values as expected.
    let path = cx.case_path.clone().expect("a case file");
    assert!(path.starts_with(dir.path()));
    let case = uopkit_conformance::load::read_case(&path).unwrap();
    assert!(
        case.tags.iter().any(|t| t == "tinygrad-rules"),
        "{:?}",
        case.tags
    );
    assert!(case.description.contains(&cx.after), "{}", case.description);
    assert!(uopkit_conformance::run::check_oracle(&case).is_ok());
}

#[test]
fn a_wrong_mod_rule_is_caught_with_a_small_counterexample() {
    if has_tinygrad("a_wrong_mod_rule_is_caught_with_a_small_counterexample") {
        // x % c -> x for 0 <= x < 2c: the smallest failure is a modulo of a value in [c, 2c).
        caught("mod-drop-bound", &["MOD"]);
    }
}

#[test]
fn a_wrong_div_rule_is_caught_with_a_small_counterexample() {
    if has_tinygrad("a_wrong_div_rule_is_caught_with_a_small_counterexample") {
        // (x + c) // d -> x // d + c // d drops the carry.
        caught("div-drop-carry", &["FLOORDIV", "ADD"]);
    }
}

/// A time budget stops the run between batches of `BATCH` expressions, before `cases`.
#[test]
fn a_time_budget_stops_between_batches() {
    if !has_tinygrad("a_time_budget_stops_between_batches") {
        return;
    }
    let cfg = TinygradRulesConfig {
        cases: 10_000_000,
        time_budget: Some(Duration::from_secs(2)),
        ..TinygradRulesConfig::default()
    };
    match check_tinygrad_rules("symbolic", &cfg) {
        Ok(r) => {
            eprintln!("{} expressions in {:.1} s", r.cases, r.seconds);
            assert!(r.stopped_by_time, "{r:?}");
            assert!(r.cases >= BATCH && r.cases % BATCH == 0, "{r:?}");
            assert!(r.cases < 10_000_000);
            // One batch may run past the budget, not more.
            assert!(r.seconds < 2.0 + 30.0, "{r:?}");
        }
        Err(f) => panic!("{f}"),
    }
}

#[test]
fn an_interpreter_without_tinygrad_is_unavailable() {
    // `python3 -I` ignores PYTHONPATH and the user's site-packages.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("py");
    std::fs::write(&script, "#!/bin/sh\nexec python3 -I \"$@\"\n").unwrap();
    make_executable(&script);
    if Command::new(&script)
        .args(["-c", "import tinygrad"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: the system python3 has tinygrad");
        return;
    }
    let cfg = TinygradRulesConfig {
        python: Some(script.to_string_lossy().into_owned()),
        ..budget(10)
    };
    match check_tinygrad_rules("symbolic", &cfg) {
        Err(Failure::Error(RulesError::Unavailable(why))) => {
            assert!(why.contains("tinygrad is not importable"), "{why}")
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
    let missing = TinygradRulesConfig {
        python: Some("/nonexistent/python".into()),
        ..budget(10)
    };
    match check_tinygrad_rules("symbolic", &missing) {
        Err(Failure::Error(e @ RulesError::Spawn { .. })) => {
            assert!(e.to_string().contains("/nonexistent/python"), "{e}")
        }
        other => panic!("expected a spawn error, got {other:?}"),
    }
}

#[test]
fn a_bridge_that_never_answers_is_a_timeout_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("py");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 30\n").unwrap();
    make_executable(&script);
    let cfg = TinygradRulesConfig {
        python: Some(script.to_string_lossy().into_owned()),
        timeout: Duration::from_millis(500),
        ..budget(10)
    };
    let t0 = std::time::Instant::now();
    match check_tinygrad_rules("symbolic", &cfg) {
        Err(Failure::Error(RulesError::Child(m))) => {
            assert!(m.contains("no answer within"), "{m}")
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
}

#[test]
fn an_unknown_rule_set_is_rejected() {
    if has_tinygrad("an_unknown_rule_set_is_rejected") {
        match check_tinygrad_rules("no_such_rules", &budget(5)) {
            Err(Failure::Error(RulesError::Rejected(m))) => {
                assert!(m.contains("symbolic"), "{m}")
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
}

fn make_executable(p: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The same from the CLI: `uopkit fuzz-rules tinygrad:symbolic` passes a budget (exit 0), with
/// a wrong rule switched on it prints the counterexample and writes it (exit 1), and an unknown
/// rule set is bad input (exit 2).
#[test]
fn fuzz_rules_cli_runs_tinygrads_rule_sets() {
    if !has_tinygrad("fuzz_rules_cli_runs_tinygrads_rule_sets") {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let run = |name: &str, fault: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_uopkit"));
        c.args(["fuzz-rules", name, "--cases", "200", "--out"])
            .arg(dir.path())
            .env_remove("UOPKIT_TINYGRAD_RULE_FAULT");
        if let Some(f) = fault {
            c.env("UOPKIT_TINYGRAD_RULE_FAULT", f);
        }
        c.output().expect("uopkit runs")
    };
    let ok = run("tinygrad:symbolic", None);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{text}");
    assert!(
        text.contains("tinygrad:symbolic: 200 expressions"),
        "{text}"
    );
    // The checked expressions per dtype, and which bridge and interpreter answered.
    assert!(
        text.contains("int64 as weakint") && text.contains("int32"),
        "{text}"
    );
    assert!(
        text.contains("bridge: ") && text.contains("rules.py under "),
        "{text}"
    );
    let bad = run("tinygrad:symbolic", Some("div-drop-carry"));
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("changes the meaning"), "{text}");
    let written: Vec<_> = std::fs::read_dir(dir.path())
        .expect("the --out directory")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("tinygrad_rules_")
        })
        .collect();
    assert_eq!(written.len(), 1, "one counterexample case written");
    let unknown = run("tinygrad:nope", None);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("symbolic"));
}

/// A run that checks nothing (`--seconds 0`: no batch starts; `--cases 0`) proves nothing:
/// it says so and exits 2, never 0 with "no counterexample".
#[test]
fn fuzz_rules_cli_that_checks_nothing_is_not_a_pass() {
    if !has_tinygrad("fuzz_rules_cli_that_checks_nothing_is_not_a_pass") {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    for budget in [["--seconds", "0"], ["--cases", "0"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
            .args(["fuzz-rules", "tinygrad:symbolic", "--out"])
            .arg(dir.path())
            .args(budget)
            .env_remove("UOPKIT_TINYGRAD_RULE_FAULT")
            .output()
            .expect("uopkit runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{budget:?}: {stdout}{stderr}");
        assert!(
            stdout.contains("0 checked") && stdout.contains("NOTHING WAS CHECKED (not a pass)"),
            "{budget:?}: {stdout}"
        );
        assert!(
            !stdout.contains("no counterexample"),
            "{budget:?}: {stdout}"
        );
        assert!(
            stderr.contains("no expression was checked"),
            "{budget:?}: {stderr}"
        );
    }
}
