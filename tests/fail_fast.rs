//! `UOPKIT_FAIL_FAST=1` stops a harness test binary at its first failing trial (what
//! `scripts/mutants.sh` relies on to judge a caught mutant quickly); without it every trial
//! runs. This binary is its own subject: it re-executes itself as a harness over a small
//! corpus (`bad`, `good`, `worse`; `bad` and `worse` fail their oracle trial).

use std::process::{Command, ExitCode};

use uopkit_conformance::backends::registry::Registry;
use uopkit_conformance::harness;

mod common;

const CHILD: &str = "UOPKIT_FAIL_FAST_TEST_CHILD";

/// One run of this binary as the harness, one trial at a time, in name order.
fn child(corpus: &std::path::Path, fail_fast: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("own path"));
    cmd.env(CHILD, "1")
        .env("UOPKIT_CORPUS", corpus)
        .env("UOPKIT_BACKENDS", "oracle")
        .env_remove("UOPKIT_FAIL_FAST")
        .args(["--test-threads", "1"]);
    if let Some(v) = fail_fast {
        cmd.env("UOPKIT_FAIL_FAST", v);
    }
    let out = cmd.output().expect("run the harness child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn main() -> ExitCode {
    if std::env::var_os(CHILD).is_some() {
        let corpus = std::path::PathBuf::from(std::env::var_os("UOPKIT_CORPUS").expect("corpus"));
        return harness::libtest_main(&Registry::builtin(), &corpus, "oracle");
    }
    let (_dir, corpus) = common::small_corpus(
        &["bad", "good", "worse"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": []}"#,
    );
    let mut failures = vec![];
    let mut check = |ok: bool, what: &str, text: &str| {
        if !ok {
            failures.push(format!("{what}\n--- output ---\n{text}"));
        }
    };

    let (code, text) = child(&corpus, None);
    check(code == Some(101), "without fail-fast: exit 101", &text);
    check(
        text.contains("oracle::worse") && text.contains("oracle::good"),
        "without fail-fast: every trial runs",
        &text,
    );

    let (code, text) = child(&corpus, Some("1"));
    check(code == Some(101), "with fail-fast: exit 101", &text);
    check(
        text.contains("UOPKIT_FAIL_FAST: oracle::bad failed; stopping the run"),
        "with fail-fast: the first failing trial is named",
        &text,
    );
    check(
        !text.contains("oracle::worse") && !text.contains("oracle::good"),
        "with fail-fast: no trial after the first failure runs",
        &text,
    );

    let (code, text) = child(&corpus, Some("maybe"));
    check(
        code == Some(2),
        "a bad UOPKIT_FAIL_FAST value: exit 2",
        &text,
    );
    check(
        text.contains("UOPKIT_FAIL_FAST='maybe': expected 1 or 0"),
        "a bad value is named",
        &text,
    );

    if failures.is_empty() {
        println!("fail_fast: 3 runs as expected");
        ExitCode::SUCCESS
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}
