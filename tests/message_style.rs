//! One way of naming a node in everything the CLI prints: `node N` with N the case file's id
//! (never the `%N` of IR listings, never an arena index that differs from the file's id), no
//! doubled prefix (`oracle: oracle:`, a file name twice), and every output ends with a newline.
//! Run over every corpus case that expects an error, and over small cases whose file ids are
//! not the arena indices, plus malformed input.

use std::path::{Path, PathBuf};

mod common;
use common::{uopkit, Out};

use serde_json::Value;

/// `%` followed by a digit: the IR listing's node name, not the messages' `node N`.
fn percent_node(text: &str) -> Option<&str> {
    text.lines().find(|l| {
        l.as_bytes()
            .windows(2)
            .any(|w| w[0] == b'%' && w[1].is_ascii_digit())
    })
}

/// A line in which some `word: ` is followed at once by the same `word: ` (`oracle: oracle:`,
/// `f.json: f.json:`).
fn doubled_prefix(text: &str) -> Option<&str> {
    text.lines().find(|line| {
        line.match_indices(": ").any(|(i, _)| {
            let before = &line[..i];
            let word = before.rsplit(' ').next().unwrap_or(before);
            !word.is_empty() && line[i + 2..].starts_with(&format!("{word}: "))
        })
    })
}

/// The style every output must have; `what` names the command in failure messages.
fn assert_style(what: &str, out: &Out) {
    let all = out.all();
    assert!(
        percent_node(&all).is_none(),
        "{what}: a node named %N: {:?}\n{all}",
        percent_node(&all)
    );
    assert!(
        doubled_prefix(&all).is_none(),
        "{what}: a doubled prefix: {:?}\n{all}",
        doubled_prefix(&all)
    );
    for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{what}: {stream} does not end with a newline: {text:?}"
        );
    }
}

fn case_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read the corpus")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            case_files(&p, into);
        } else if p.extension().is_some_and(|e| e == "json") {
            into.push(p);
        }
    }
}

/// Every corpus case with `expect_error`, with the node it names.
fn expect_error_cases() -> Vec<(PathBuf, Value)> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files = Vec::new();
    case_files(&corpus, &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let json: Value = serde_json::from_str(&text).ok()?;
            let want = json.get("expect_error")?.clone();
            Some((p, want))
        })
        .collect()
}

#[test]
fn run_names_the_expected_node_of_every_corpus_error_case() {
    let cases = expect_error_cases();
    assert!(
        cases.len() >= 30,
        "the corpus has {} cases with expect_error",
        cases.len()
    );
    for (file, want) in &cases {
        let path = file.to_str().expect("utf-8 path");
        let out = uopkit(&["run", path]);
        assert_eq!(out.code, 0, "{path}:\n{}", out.all());
        assert_style(path, &out);
        assert!(
            out.stdout.ends_with("as expected\n"),
            "{path}: {:?}",
            out.stdout
        );
        if let Some(node) = want.get("node").and_then(Value::as_u64) {
            let text = out.all();
            if want["kind"] == "ub" {
                let line = text
                    .lines()
                    .find(|l| l.contains("undefined behaviour"))
                    .unwrap_or_else(|| panic!("{path}: no UB message:\n{text}"));
                assert!(
                    line.starts_with(&format!("oracle: undefined behaviour at node {node} (")),
                    "{path}: expected the UB at node {node}: {line}"
                );
            } else {
                assert!(text.contains(&format!("node {node} (")), "{path}:\n{text}");
            }
        }
    }
}

#[test]
fn check_on_every_corpus_error_case_prints_in_style() {
    let cases = expect_error_cases();
    let mut args = vec!["check", "--backend", "oracle,kernels", "-v"];
    let paths: Vec<String> = cases
        .iter()
        .map(|(p, _)| p.to_str().expect("utf-8 path").to_string())
        .collect();
    args.extend(paths.iter().map(String::as_str));
    let out = uopkit(&args);
    assert_eq!(out.code, 0, "{}", out.all());
    assert_style("check", &out);
    assert!(
        out.all()
            .contains(&format!("oracle: {} passed, 0 failed", cases.len())),
        "{}",
        out.all()
    );
}

/// A graph whose case-file ids are not the arena indices: two equal CONSTs (5 and 6) become
/// one arena node, so the CDIV (file id 42) is arena node 3.
fn remapped(expect_error: Option<&str>, cdiv_dtype: &str, divisor: &str) -> String {
    let expect = expect_error
        .map(|e| format!(r#", "expect_error": {e}"#))
        .unwrap_or_default();
    format!(
        r#"{{"format": "uopkit-case/1", "description": "ids are not arena indices",
  "graph": [
    {{"id": 10, "op": "BUFFER", "dtype": "int32", "arg": {{"device": "CPU:0", "size": 4, "slot": 0}}}},
    {{"id": 5, "op": "CONST", "dtype": "int32", "arg": 3}},
    {{"id": 6, "op": "CONST", "dtype": "int32", "arg": 3}},
    {{"id": 30, "op": "BUFFER", "dtype": "int32", "arg": {{"device": "CPU:0", "size": 4, "slot": 1}}}},
    {{"id": 42, "op": "CDIV", "dtype": "{cdiv_dtype}", "src": [10, 30]}}
  ],
  "inputs": {{"10": {{"data": [7, -7, 5, 1]}}{divisor}}},
  "outputs": [{{"name": "q", "node": 42, "shape": [4], "expect": [], "compare": "exact"}}]{expect}}}"#
    )
}

const ZERO_DIVISOR: &str = r#", "30": {"data": [2, 3, 0, 0]}"#;
const UB_AT_42: &str = r#"{"kind": "ub", "ub": "div_by_zero", "node": 42, "element": 2}"#;

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write the case");
    p.to_str().expect("utf-8 path").to_string()
}

#[test]
fn messages_name_case_file_ids_not_arena_indices() {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).expect("corpus dir");

    // Expected UB at the file id.
    let ok = write(
        &corpus,
        "ub_expected.json",
        &remapped(Some(UB_AT_42), "int32", ZERO_DIVISOR),
    );
    let out = uopkit(&["run", &ok]);
    assert_eq!(out.code, 0, "{}", out.all());
    assert_style("run ub_expected", &out);
    assert!(
        out.stdout
            .contains("oracle: undefined behaviour at node 42 (CDIV), element 2"),
        "{}",
        out.stdout
    );

    // An uninitialized read names the buffer by its file id too.
    let uninit = write(
        &corpus,
        "uninit.json",
        &remapped(
            Some(r#"{"kind": "ub", "ub": "uninitialized_read", "node": 42}"#),
            "int32",
            "",
        ),
    );
    let out = uopkit(&["run", &uninit]);
    assert_eq!(out.code, 0, "{}", out.all());
    assert_style("run uninit", &out);
    assert!(
        out.stdout.contains("at node 42 (CDIV)") && out.stdout.contains("of buffer node 30 "),
        "{}",
        out.stdout
    );

    // The wrong node expected: the report names both in one form.
    let wrong = write(
        &corpus,
        "ub_wrong_node.json",
        &remapped(
            Some(r#"{"kind": "ub", "ub": "div_by_zero", "node": 10, "element": 2}"#),
            "int32",
            ZERO_DIVISOR,
        ),
    );
    let out = uopkit(&["run", &wrong]);
    assert_eq!(out.code, 1, "{}", out.all());
    assert_style("run ub_wrong_node", &out);
    assert!(
        out.stdout
            .contains("at node 10, element 2, got: undefined behaviour at node 42 (CDIV)"),
        "{}",
        out.stdout
    );

    // UB the case does not expect, and a verifier error it does / does not expect.
    write(
        &corpus,
        "ub_unexpected.json",
        &remapped(None, "int32", ZERO_DIVISOR),
    );
    let verify_ok = write(
        dir.path(),
        "verify_expected.json",
        &remapped(
            Some(r#"{"kind": "verify", "node": 42}"#),
            "float32",
            ZERO_DIVISOR,
        ),
    );
    let out = uopkit(&["run", &verify_ok]);
    assert_eq!(out.code, 0, "{}", out.all());
    assert_style("run verify_expected", &out);
    assert!(
        out.stdout.contains("verifier: node 42 (CDIV): "),
        "{}",
        out.stdout
    );
    let verify_bad = write(
        dir.path(),
        "verify_unexpected.json",
        &remapped(None, "float32", ZERO_DIVISOR),
    );
    let out = uopkit(&["run", &verify_bad]);
    assert_eq!(out.code, 2, "{}", out.all());
    assert_style("run verify_unexpected", &out);
    assert!(
        out.stderr
            .starts_with(&format!("error: {verify_bad}: verifier: node 42 (CDIV): ")),
        "{}",
        out.stderr
    );

    // check: the failing trials name node 42, each prefix once.
    let c = corpus.to_str().expect("utf-8 path");
    let out = uopkit(&["check", "--corpus", c, "--backend", "oracle,kernels"]);
    assert_eq!(out.code, 1, "{}", out.all());
    assert_style("check", &out);
    let text = out.all();
    assert!(
        text.contains("oracle::ub_unexpected: undefined behaviour at node 42 (CDIV)"),
        "{text}"
    );
    assert!(
        text.contains(
            "kernels::ub_unexpected: the oracle failed: undefined behaviour at node 42 (CDIV)"
        ),
        "{text}"
    );

    // diff: the oracle's failure, once.
    let unexpected = corpus.join("ub_unexpected.json");
    let out = uopkit(&["diff", unexpected.to_str().expect("utf-8 path")]);
    assert_eq!(out.code, 2, "{}", out.all());
    assert_style("diff", &out);
    assert!(
        out.stderr
            .contains(": the oracle failed: undefined behaviour at node 42 (CDIV)"),
        "{}",
        out.stderr
    );
}

#[test]
fn malformed_input_and_bad_arguments_print_in_style() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let garbage = write(d, "garbage.json", "not json\n");
    let truncated = write(
        d,
        "truncated.json",
        r#"{"format": "uopkit-case/1", "graph": ["#,
    );
    let dangling = write(
        d,
        "dangling.json",
        &remapped(None, "int32", ZERO_DIVISOR).replace("[10, 30]", "[10, 99]"),
    );
    let missing = d.join("missing.json");
    let missing = missing.to_str().expect("utf-8 path");
    for (args, code, must) in [
        (vec!["run", garbage.as_str()], 2, "malformed case"),
        (vec!["run", truncated.as_str()], 2, "malformed case"),
        (
            vec!["run", dangling.as_str()],
            2,
            "node 42: source 99 is not a node of the graph",
        ),
        (vec!["run", missing], 2, "cannot read"),
        (
            vec!["check", "--backend", "nope", "corpus/ub"],
            2,
            "unknown backend 'nope'",
        ),
        (vec!["check", "--no-such-flag"], 2, "--no-such-flag"),
        (
            vec!["dot", dangling.as_str()],
            2,
            "source 99 is not a node of the graph",
        ),
    ] {
        let what = args.join(" ");
        let out = uopkit(&args);
        assert_eq!(out.code, code, "{what}:\n{}", out.all());
        assert_style(&what, &out);
        assert!(out.all().contains(must), "{what}:\n{}", out.all());
        // The file is named once per line, not twice.
        for line in out.all().lines() {
            if let Some(f) = args.iter().find(|a| a.ends_with(".json")) {
                assert!(line.matches(f).count() <= 1, "{what}: {line}");
            }
        }
    }
}

#[test]
fn the_style_checks_catch_what_they_look_for() {
    assert!(doubled_prefix("oracle: oracle: undefined behaviour").is_some());
    assert!(doubled_prefix("error: a.json: a.json: bad").is_some());
    assert!(doubled_prefix("FAIL  oracle::x: undefined behaviour at node 2").is_none());
    assert!(percent_node("at node %2 (CDIV)").is_some());
    assert!(percent_node("100.00% of elements").is_none());
}
