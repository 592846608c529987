//! What `uopkit` writes to terminals and to pipes: colour in the human summaries only where
//! it is wanted (a terminal, `CLICOLOR_FORCE`, `--color always`; never with `NO_COLOR` unless
//! `--color always`; never in `--output` files or in JSON/JUnit documents), and a progress
//! bar on stderr only when stderr is a terminal — piped output carries no escape codes.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{repo, Out};

/// Runs uopkit with the colour variables cleared, then `env` set.
fn uopkit(args: &[&str], env: &[(&str, &str)]) -> Out {
    common::uopkit_with(args, env, &["NO_COLOR", "CLICOLOR_FORCE", "CLICOLOR"])
}

/// good, bad (the oracle trial fails), worse (fails, listed in xfail.json: xfail), ub
/// (kernels skips it).
fn small_corpus() -> (tempfile::TempDir, PathBuf) {
    common::small_corpus(
        &["good", "bad", "worse", "ub"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "worse", "backend": "oracle", "reason": "wrong on purpose"}]}"#,
    )
}

fn check(corpus: &Path, extra: &[&str], env: &[(&str, &str)]) -> Out {
    let mut args = vec![
        "check",
        "--corpus",
        corpus.to_str().expect("utf-8"),
        "--backend",
        "oracle,kernels",
        "-v",
    ];
    args.extend_from_slice(extra);
    uopkit(&args, env)
}

const ESC: char = '\x1b';

/// `s` without its SGR escape sequences (`ESC [ … m`).
fn strip(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == ESC {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn assert_painted(out: &Out) {
    let s = &out.stdout;
    assert!(
        s.contains("\x1b[1m\x1b[31mFAIL\x1b[0m  oracle::bad: "),
        "FAIL in bold red: {s:?}"
    );
    assert!(
        s.contains("\x1b[33mxfail\x1b[0m oracle::worse: "),
        "xfail in yellow: {s:?}"
    );
    assert!(
        s.contains("\x1b[33mskip\x1b[0m  kernels::ub: "),
        "skip in yellow: {s:?}"
    );
    assert!(
        s.contains(
            "\x1b[1moracle\x1b[0m: \x1b[32m2 passed\x1b[0m, \x1b[1m\x1b[31m1 failed\x1b[0m, "
        ),
        "the tally: backend bold, counts coloured: {s:?}"
    );
}

#[test]
fn piped_output_has_no_escape_codes_and_no_progress() {
    let (_dir, corpus) = small_corpus();
    let out = check(&corpus, &[], &[]);
    assert_eq!(out.code, 1, "a failing trial: {}", out.stderr);
    assert!(!out.stdout.contains(ESC), "{:?}", out.stdout);
    assert!(!out.stdout.contains('\r'), "{:?}", out.stdout);
    assert_eq!(out.stderr, "", "no progress lines into a pipe");
    assert!(out.stdout.starts_with("FAIL  oracle::bad: output 'add'"));
    assert!(out
        .stdout
        .contains("\noracle: 2 passed, 1 failed, 1 xfail, 0 xpass, 0 skipped\n"));
    // --color never is the same text.
    let never = check(&corpus, &["--color", "never"], &[]);
    assert_eq!(never.stdout, out.stdout);
}

#[test]
fn clicolor_force_paints_the_summary_and_nothing_else_changes() {
    let (_dir, corpus) = small_corpus();
    let plain = check(&corpus, &[], &[]);
    let forced = check(&corpus, &[], &[("CLICOLOR_FORCE", "1")]);
    assert_eq!(forced.code, 1);
    assert_painted(&forced);
    assert_eq!(strip(&forced.stdout), plain.stdout, "only colour is added");
    assert_eq!(
        forced.stderr, "",
        "still no progress: stderr is not a terminal"
    );
}

#[test]
fn no_color_wins_over_clicolor_force_but_not_over_the_flag() {
    let (_dir, corpus) = small_corpus();
    let both = check(&corpus, &[], &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")]);
    assert!(
        !both.stdout.contains(ESC),
        "NO_COLOR wins: {:?}",
        both.stdout
    );
    // An empty NO_COLOR does not count.
    let empty = check(&corpus, &[], &[("NO_COLOR", ""), ("CLICOLOR_FORCE", "1")]);
    assert_painted(&empty);
    // --color always beats NO_COLOR; --color never beats CLICOLOR_FORCE.
    let always = check(&corpus, &["--color", "always"], &[("NO_COLOR", "1")]);
    assert_painted(&always);
    let never = check(&corpus, &["--color", "never"], &[("CLICOLOR_FORCE", "1")]);
    assert!(!never.stdout.contains(ESC), "{:?}", never.stdout);
    let bad = check(&corpus, &["--color", "sometimes"], &[]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("sometimes"), "{}", bad.stderr);
}

#[test]
fn files_and_documents_never_carry_colour() {
    let (dir, corpus) = small_corpus();
    let file = dir.path().join("report.txt");
    let f = file.to_str().expect("utf-8");
    let out = check(&corpus, &["--color", "always", "--output", f], &[]);
    assert_eq!(out.code, 1);
    let text = std::fs::read_to_string(&file).expect("the report file");
    assert!(!text.contains(ESC), "{text:?}");
    assert_eq!(text, check(&corpus, &[], &[]).stdout);
    // A JSON document on stdout stays plain; the summary beside it, on stderr, is painted.
    let json = check(&corpus, &["--color", "always", "--format", "json"], &[]);
    assert!(!json.stdout.contains(ESC), "{:?}", json.stdout);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON on stdout");
    assert_eq!(doc["command"], "check");
    assert!(
        json.stderr.contains("\x1b[1m\x1b[31mFAIL\x1b[0m"),
        "{:?}",
        json.stderr
    );
    // The JSON document written to a file alongside a painted summary.
    let jfile = dir.path().join("report.json");
    let j = jfile.to_str().expect("utf-8");
    let out = check(
        &corpus,
        &["--color", "always", "--format", "json", "--output", j],
        &[],
    );
    assert!(out.stdout.contains(ESC), "the summary on stdout is painted");
    let written = std::fs::read_to_string(&jfile).expect("the json file");
    assert!(!written.contains(ESC));
}

#[test]
fn the_fuzz_summary_is_painted_only_when_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let regressions = dir.path().join("regressions");
    let r = regressions.to_str().expect("utf-8");
    let args = ["fuzz", "--cases", "2", "--seconds", "60", "--out", r];
    let plain = uopkit(&args, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(
        plain.stdout.starts_with("fuzz cpu seed 0: 2 cases ("),
        "{:?}",
        plain.stdout
    );
    assert!(!plain.stdout.contains(ESC));
    assert_eq!(plain.stderr, "", "no progress into a pipe");
    let forced = uopkit(&args, &[("CLICOLOR_FORCE", "1")]);
    assert!(
        forced
            .stdout
            .starts_with("\x1b[1mfuzz cpu seed 0: 2 cases ("),
        "{:?}",
        forced.stdout
    );
    assert_eq!(
        strip(&forced.stdout).replace(" in ", "|").split('|').next(),
        plain.stdout.replace(" in ", "|").split('|').next()
    );
}

/// Under a pseudo-terminal (util-linux `script`), stderr is a terminal: the progress
/// spinner names the set-up phases, the bar is cleared, then the painted summary follows.
#[test]
fn a_terminal_shows_progress_then_the_painted_summary() {
    let has_script = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        eprintln!("skipped: util-linux `script` is not installed (needed for a pseudo-terminal)");
        return;
    }
    let (_dir, corpus) = small_corpus();
    let line = format!(
        "'{}' check --corpus '{}' --backend oracle,kernels",
        env!("CARGO_BIN_EXE_uopkit"),
        corpus.display()
    );
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(repo())
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .output()
        .expect("script runs");
    let tty = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert_eq!(out.status.code(), Some(1), "{tty:?}");
    assert!(
        tty.contains("listing "),
        "the first phase is named: {tty:?}"
    );
    assert!(tty.contains("starting backend oracle"), "{tty:?}");
    // The last line clear comes before the summary: nothing of the bar is left after it.
    let cleared = tty.rfind("\x1b[2K").expect("the bar is cleared");
    let summary = &tty[cleared + "\x1b[2K".len()..];
    assert!(
        summary.starts_with("\x1b[1m\x1b[31mFAIL\x1b[0m  oracle::bad"),
        "{summary:?}"
    );
    assert!(!summary.contains("trials"), "{summary:?}");
}
