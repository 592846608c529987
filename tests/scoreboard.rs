//! `uopkit report`: the scoreboard of a run, as a terminal table, Markdown and HTML, on a
//! small corpus with a pass, an expected failure, a failure and a skip.

use std::process::Command;

mod common;

#[test]
fn the_scoreboard_shows_each_op_dtype_and_backend() {
    // good passes; bad has a wrong expected value (its oracle trial is listed: xfail); worse
    // is the same, not listed (a failure); ub is oracle-only (skipped on kernels).
    let (dir, corpus) = common::small_corpus(
        &["good", "bad", "worse", "ub"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "bad", "backend": "oracle", "reason": "its expected value is wrong on purpose"}]}"#,
    );
    let (md, html) = (dir.path().join("board.md"), dir.path().join("board.html"));
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(["report", "--backend", "oracle,kernels", "--corpus"])
        .arg(&corpus)
        .arg("--markdown")
        .arg(&md)
        .arg("--html")
        .arg(&html)
        .output()
        .expect("uopkit runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failure fails the run:\n{text}"
    );
    let row = |op: &str, dt: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() > 2 && w[0] == op && w[1] == dt)
            .unwrap_or_else(|| panic!("no {op} {dt} row:\n{text}"))
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    // ADD float32: 3 cases; the oracle fails one (worse), kernels pass all three.
    assert_eq!(
        row("ADD", "float32"),
        ["ADD", "float32", "3", "fail", "1/3", "pass", "3"]
    );
    // The undefined case's op: the oracle passes it (the UB is expected), kernels skip it.
    assert_eq!(
        row("CDIV", "int32"),
        ["CDIV", "int32", "1", "pass", "1", "skip", "1/1"]
    );
    let md = std::fs::read_to_string(&md).expect("markdown written");
    assert!(
        md.starts_with("| op | dtype | cases | oracle | kernels |\n"),
        "{md}"
    );
    assert!(
        md.contains("| ADD | float32 | 3 | fail 1/3 [1] | pass 3 |"),
        "{md}"
    );
    assert!(md.contains("1. worse: "), "{md}");
    assert!(
        md.contains("ub: undefined or invalid graph: oracle-only"),
        "{md}"
    );
    let html = std::fs::read_to_string(&html).expect("html written");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("<td class=\"fail\" title=\"worse: "),
        "{html}"
    );
    assert!(html.contains("<td class=\"skip\" title=\"ub: undefined or invalid graph: oracle-only\">skip 1/1</td>"), "{html}");
    // The same run gives the same table.
    let again = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(["report", "--backend", "oracle,kernels", "--corpus"])
        .arg(&corpus)
        .output()
        .expect("uopkit runs");
    assert_eq!(String::from_utf8_lossy(&again.stdout), text);
}
