//! `uopkit fuzz-rules NAME`: exit 0 when the budget passes, 1 with the counterexample printed
//! and written as a case, 2 on bad input; the deliberately wrong rule `fault_mod_drop` is
//! found through the CLI (switched on with `UOPKIT_TEST_FAULTS`, which only a test build —
//! the compiler's `fault-injection` feature, on in `cargo test` — reads).

mod common;

use common::{uopkit, uopkit_with};

#[test]
fn a_correct_rule_set_passes_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let r = uopkit(&[
        "fuzz-rules",
        "symbolic",
        "--cases",
        "300",
        "--seed",
        "7",
        "--out",
        out,
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains("symbolic: 300 expressions (seed 0x7)"),
        "{}",
        r.all()
    );
    assert!(r.stdout.contains("all exact"), "{}", r.all());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A run that checks no generated case proves nothing: it says so and exits 2, at every
/// level (`--seconds 0`: no chunk starts; `--cases 0`).
#[test]
fn a_run_that_checks_nothing_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for (budget, level) in [
        (["--seconds", "0"], "expr"),
        (["--cases", "0"], "expr"),
        (["--seconds", "0"], "kernel"),
        (["--cases", "0"], "tensor"),
    ] {
        let mut args = vec!["fuzz-rules", "symbolic", "--out", out, "--level", level];
        args.extend_from_slice(&budget);
        let r = uopkit(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.all());
        assert!(
            r.stdout
                .contains("symbolic: NOTHING WAS CHECKED (not a pass)"),
            "{args:?}: {}",
            r.all()
        );
        assert!(!r.stdout.contains("all exact"), "{args:?}: {}", r.all());
        assert!(
            r.stderr.contains("no generated case was checked"),
            "{args:?}: {}",
            r.all()
        );
    }
}

#[test]
fn fault_mod_drop_is_found_shrunk_and_written_as_a_case() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let args = [
        "fuzz-rules",
        "fault_mod_drop",
        "--cases",
        "2000",
        "--out",
        out,
    ];
    let env = [("UOPKIT_TEST_FAULTS", "fault_mod_drop")];
    let r = uopkit_with(&args, &env, &[]);
    assert_eq!(r.code, 1, "{}", r.all());
    let text = &r.stdout;
    for want in [
        "fault_mod_drop: the rewrite is not exact",
        "input:",
        "rewritten:",
        "inputs:",
        "before:",
        "after:",
        "undefined behaviour: not added or removed",
        "written to",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{}", r.all());
    }
    // Shrunk: "(N nodes)" with N small (the bound of tests/fuzz_pipeline.rs; seed 0 shrinks
    // to 7 nodes, `(r0 % 4 % 2) / r0`, a local minimum of proptest's tape shrinking).
    let nodes: usize = text
        .split(" nodes)")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no node count:\n{text}"));
    assert!(nodes <= 8, "{nodes} nodes:\n{text}");
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let case = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        case.contains("\"rule\"") && case.contains("fault_mod_drop"),
        "{case}"
    );
    // The next run replays it first (and writes nothing new).
    let r2 = uopkit_with(
        &["fuzz-rules", "fault_mod_drop", "--cases", "0", "--out", out],
        &env,
        &[],
    );
    assert_eq!(r2.code, 1, "{}", r2.all());
    assert!(r2.stdout.contains("replayed from"), "{}", r2.all());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn without_the_test_switch_faults_are_unknown_names() {
    let r = uopkit_with(
        &["fuzz-rules", "fault_mod_drop", "--cases", "1"],
        &[],
        &["UOPKIT_TEST_FAULTS"],
    );
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.stderr
            .contains("unknown rule or rule set 'fault_mod_drop'"),
        "{}",
        r.all()
    );
    assert!(
        r.stderr.contains("symbolic") && r.stderr.contains("mod_affine"),
        "{}",
        r.all()
    );
}

/// `--level tensor` / `--level kernel`: the whole `symbolic` set passes on generated tensor
/// programs and kernels; `fault_mod_drop` is found on kernels (exit 1, both programs printed).
#[test]
fn levels_tensor_and_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for level in ["tensor", "kernel"] {
        let args = [
            "fuzz-rules",
            "symbolic",
            "--level",
            level,
            "--cases",
            "200",
            "--out",
            out,
        ];
        let r = uopkit(&args);
        assert_eq!(r.code, 0, "{}", r.all());
        let want = format!("symbolic: 200 {level}-level programs");
        assert!(r.stdout.contains(&want), "{}", r.all());
    }
    let args = [
        "fuzz-rules",
        "fault_mod_drop",
        "--level",
        "kernel",
        "--cases",
        "300",
        "--out",
        out,
    ];
    let r = uopkit_with(&args, &[("UOPKIT_TEST_FAULTS", "fault_mod_drop")], &[]);
    assert_eq!(r.code, 1, "{}", r.all());
    for want in [
        "kernel-level program",
        "input:",
        "rewritten:",
        "CMOD",
        "differs:",
    ] {
        assert!(r.stdout.contains(want), "missing {want:?}:\n{}", r.all());
    }
    let r = uopkit(&["fuzz-rules", "tinygrad:symbolic", "--level", "kernel"]);
    assert_eq!(r.code, 2, "{}", r.all());
}

/// `fault_mod_drop` through the CLI at the tensor level: found on a generated tensor program
/// (`(t & m) % c`), shrunk, printed with both results' bits, and written as a case.
#[test]
fn fault_mod_drop_is_found_on_tensor_programs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let args = [
        "fuzz-rules",
        "fault_mod_drop",
        "--level",
        "tensor",
        "--cases",
        "2000",
        "--out",
        out,
    ];
    let r = uopkit_with(&args, &[("UOPKIT_TEST_FAULTS", "fault_mod_drop")], &[]);
    assert_eq!(r.code, 1, "{}", r.all());
    for want in [
        "tensor-level program",
        "generated program #",
        "shrunk",
        "fault_mod_drop",
        "bits",
        "written to",
    ] {
        assert!(r.stdout.contains(want), "missing {want:?}:\n{}", r.all());
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A seeded run ignores proptest's environment variables: the same counterexample, shrunk
/// the same way, with `PROPTEST_MAX_SHRINK_ITERS=0` and friends as without them.
#[test]
fn proptest_environment_variables_do_not_change_a_seeded_run() {
    let run = |env: &[(&str, &str)]| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().to_str().unwrap().to_string();
        let args = [
            "fuzz-rules",
            "fault_mod_drop",
            "--cases",
            "2000",
            "--seed",
            "3",
            "--out",
            &out,
        ];
        let mut all = vec![("UOPKIT_TEST_FAULTS", "fault_mod_drop")];
        all.extend_from_slice(env);
        let r = uopkit_with(&args, &all, &[]);
        assert_eq!(r.code, 1, "{}", r.all());
        // The counterexample without the file name (a fresh folder each run).
        r.stdout
            .lines()
            .filter(|l| !l.contains("written to"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let plain = run(&[]);
    let with_env = run(&[
        ("PROPTEST_CASES", "1"),
        ("PROPTEST_MAX_SHRINK_ITERS", "0"),
        ("PROPTEST_MAX_SHRINK_TIME", "1"),
        ("PROPTEST_MAX_GLOBAL_REJECTS", "0"),
        ("PROPTEST_RNG_SEED", "99"),
    ]);
    assert_eq!(plain, with_env);
}
