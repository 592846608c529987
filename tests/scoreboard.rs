//! `uopkit report`: the scoreboard of a run, as a terminal table, Markdown and HTML, on a
//! small corpus with a pass, an expected failure, a failure and a skip.

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_scoreboard_shows_each_op_dtype_and_backend() {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    let good = std::fs::read_to_string(repo().join("corpus/alu/add_float32.json")).expect("read");
    std::fs::write(corpus.join("good.json"), &good).expect("write");
    // Its expected value is wrong: the oracle trial fails (listed: xfail) ...
    let mut bad: serde_json::Value = serde_json::from_str(&good).expect("json");
    bad["outputs"][0]["expect"][0] = serde_json::json!("0x12345678");
    std::fs::write(corpus.join("bad.json"), bad.to_string()).expect("write");
    // ... and a copy, not listed: a failure.
    std::fs::write(corpus.join("worse.json"), bad.to_string()).expect("write");
    // Undefined: oracle-only, skipped on kernels.
    std::fs::copy(
        repo().join("corpus/ub/div_by_zero_cdiv_int32.json"),
        corpus.join("ub.json"),
    )
    .expect("copy");
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    std::fs::write(
        manifests.join("xfail.json"),
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "bad", "backend": "oracle", "reason": "its expected value is wrong on purpose"}]}"#,
    )
    .expect("write");
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
