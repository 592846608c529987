//! `uopkit check` / `uopkit fuzz` with `--format json|junit` and `--output FILE`: the JSON
//! document follows the published schema (`uopkit schema --report`), lists every trial with
//! its verdict and the tallies of the text summary; the JUnit XML is well formed and counts
//! the same; `--output` writes the file and keeps the document off stdout; exit codes are
//! those of the text report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{uopkit, Out};

/// bad (a wrong expected value: the oracle trial fails), good, ub (oracle-only: kernels
/// skips it), worse (wrong too, but listed in xfail.json for the oracle: xfail).
fn small_corpus() -> (tempfile::TempDir, PathBuf) {
    common::small_corpus(
        &["good", "bad", "worse", "ub"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "worse", "backend": "oracle", "reason": "wrong <on> purpose & \"quoted\""}]}"#,
    )
}

const EXPECTED: [(&str, &str); 8] = [
    ("oracle::bad", "FAIL"),
    ("kernels::bad", "ok"),
    ("oracle::good", "ok"),
    ("kernels::good", "ok"),
    ("oracle::ub", "ok"),
    ("kernels::ub", "skip"),
    ("oracle::worse", "xfail"),
    ("kernels::worse", "ok"),
];

fn check(corpus: &Path, extra: &[&str]) -> Out {
    let mut args = vec![
        "check",
        "--corpus",
        corpus.to_str().expect("utf-8"),
        "--backend",
        "oracle,kernels",
        "--jobs",
        "2",
    ];
    args.extend_from_slice(extra);
    uopkit(&args)
}

/// The schema `uopkit schema --report` publishes.
fn schema() -> Value {
    let out = uopkit(&["schema", "--report"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("the schema is JSON")
}

/// A small JSON Schema checker for what schemars emits ($ref into $defs, type, const, enum,
/// properties, required, additionalProperties, items, oneOf/anyOf/allOf): the errors found.
fn validate(root: &Value, schema: &Value, v: &Value, at: &str, errs: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        return; // `true` or `{}`-like: anything goes
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        let target = &root["$defs"][name];
        assert!(!target.is_null(), "unresolved {r}");
        validate(root, target, v, at, errs);
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            errs.push(format!("{at}: {v} is not of type {t}"));
        }
        if types.contains(&"integer") && v.is_u64() {
            if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
                if (v.as_u64().unwrap_or(0) as f64) < min {
                    errs.push(format!("{at}: below {min}"));
                }
            }
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errs.push(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errs.push(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let Some(o) = v.as_object() {
        for req in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let k = req.as_str().unwrap_or("");
            if !o.contains_key(k) {
                errs.push(format!("{at}: required field '{k}' is missing"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(root, ps, x, &format!("{at}.{k}"), errs),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => errs.push(format!("{at}: unexpected field '{k}'")),
                    Some(ap @ Value::Object(_)) => {
                        validate(root, ap, x, &format!("{at}.{k}"), errs)
                    }
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(a)) = (s.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            validate(root, items, x, &format!("{at}[{i}]"), errs);
        }
    }
    for (key, need_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(alts) = s.get(key).and_then(Value::as_array) {
            let passing = alts
                .iter()
                .filter(|alt| {
                    let mut e = vec![];
                    validate(root, alt, v, at, &mut e);
                    e.is_empty()
                })
                .count();
            if passing == 0 || (need_one && passing > 1) {
                errs.push(format!("{at}: {passing} of the {key} alternatives match"));
            }
        }
    }
    for alt in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        validate(root, alt, v, at, errs);
    }
}

fn assert_valid(doc: &Value) {
    let root = schema();
    let mut errs = vec![];
    validate(&root, &root, doc, "$", &mut errs);
    assert!(errs.is_empty(), "the report breaks its schema: {errs:#?}");
    // And the checker does check: a document with a field of the wrong type fails.
    let mut broken = doc.clone();
    broken["format"] = Value::from(7);
    let mut errs = vec![];
    validate(&root, &root, &broken, "$", &mut errs);
    assert!(
        !errs.is_empty(),
        "a broken document passes the schema check"
    );
}

/// `oracle: 2 passed, 1 failed, …` lines of the text summary, as numbers by name.
fn text_tallies(summary: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut t = BTreeMap::new();
    for line in summary.lines() {
        let Some((backend, rest)) = line.split_once(": ") else {
            continue;
        };
        if !["oracle", "kernels"].contains(&backend) {
            continue;
        }
        let counts = rest
            .split(", ")
            .filter_map(|part| {
                let (n, what) = part.split_once(' ')?;
                Some((what.to_string(), n.parse().ok()?))
            })
            .collect();
        t.insert(backend.to_string(), counts);
    }
    t
}

#[test]
fn check_json_lists_every_trial_follows_the_schema_and_matches_the_text_summary() {
    let (_dir, corpus) = small_corpus();
    let text = check(&corpus, &["-v"]);
    assert_eq!(
        text.code, 1,
        "a failing trial fails the run:\n{}",
        text.stdout
    );
    let out = check(&corpus, &["--format", "json", "-v"]);
    assert_eq!(out.code, 1, "the exit code does not depend on the format");
    let doc: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}):\n{}", out.stdout));
    assert_valid(&doc);
    assert_eq!(doc["format"], "uopkit-report/1");
    assert_eq!(doc["command"], "check");
    assert_eq!(doc["backends"], serde_json::json!(["oracle", "kernels"]));
    assert_eq!(doc["cases"], 4);
    let trials = doc["trials"].as_array().expect("trials");
    let got: Vec<(String, String)> = trials
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_string(),
                t["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = EXPECTED
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(got, want, "every trial, in the order check lists them");
    for t in trials {
        let name = t["name"].as_str().unwrap_or("");
        assert_eq!(
            name,
            format!(
                "{}::{}",
                t["backend"].as_str().unwrap_or(""),
                t["case"].as_str().unwrap_or("")
            )
        );
        match t["verdict"].as_str() {
            Some("FAIL") => {
                assert_eq!(t["kind"], "expectation", "{t}");
                assert!(t["detail"].as_str().is_some_and(|d| !d.is_empty()), "{t}");
            }
            Some("ok") => assert!(t.get("detail").is_none() && t.get("kind").is_none()),
            Some("xfail") => {
                assert_eq!(t["detail"], "wrong <on> purpose & \"quoted\"");
                assert!(t["failure"].is_string(), "{t}");
            }
            _ => assert!(t["detail"].is_string(), "{t}"),
        }
        // Every trial the text report shows is a trial of the document with that label.
        if t["verdict"] != "ok" {
            let label = t["verdict"].as_str().unwrap_or("");
            assert!(
                text.stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("{label:<5} {name}:"))),
                "{name} {label} not in the text report:\n{}",
                text.stdout
            );
        }
    }
    // The tallies are the text summary's (which, with a JSON document on stdout, is on
    // stderr, identical to the text report's, -v included).
    assert!(out.stderr.contains(&text.stdout), "{}", out.stderr);
    let from_text = text_tallies(&text.stdout);
    for t in doc["tallies"].as_array().expect("tallies") {
        let b = t["backend"].as_str().unwrap_or("");
        let line = &from_text[b];
        for field in ["passed", "failed", "xfail", "xpass", "skipped"] {
            assert_eq!(t[field].as_u64(), line.get(field).copied(), "{b} {field}");
        }
    }
    assert_eq!(doc["tallies"][0]["failed"], 1);
    assert_eq!(doc["tallies"][1]["skipped"], 1);
    // The same run gives the same document.
    let again = check(&corpus, &["--format", "json"]);
    assert_eq!(again.stdout, out.stdout, "the document is deterministic");
}

/// Tags of an XML document, checked for balance; panics on anything malformed.
fn xml_tags(xml: &str) -> Vec<String> {
    let mut stack: Vec<String> = vec![];
    let mut tags = vec![];
    let mut rest = xml;
    while let Some(i) = rest.find('<') {
        let text = &rest[..i];
        check_entities(text);
        let end = rest[i..].find('>').expect("an unclosed tag") + i;
        let tag = &rest[i + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
            continue;
        }
        let name = tag
            .split(|c: char| c.is_whitespace() || c == '/')
            .next()
            .unwrap_or("");
        assert!(!name.is_empty(), "empty tag");
        // Attribute values: in double quotes, with no raw < or bare &.
        let attrs = &tag[name.len()..];
        assert_eq!(
            attrs.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        assert!(!attrs.contains('<'), "raw < in <{tag}>");
        check_entities(attrs);
        tags.push(name.to_string());
        if !tag.ends_with('/') {
            stack.push(name.to_string());
        }
    }
    assert!(rest.trim().is_empty(), "text after the root element");
    assert!(stack.is_empty(), "unclosed elements {stack:?}");
    tags
}

fn check_entities(s: &str) {
    for (i, _) in s.match_indices('&') {
        let ent = &s[i..s.len().min(i + 8)];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#"]
                .iter()
                .any(|e| ent.starts_with(e)),
            "a bare & in {s:?}"
        );
    }
    assert!(
        s.chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r')),
        "a control character in {s:?}"
    );
}

fn count(tags: &[String], name: &str) -> usize {
    tags.iter().filter(|t| *t == name).count()
}

#[test]
fn check_junit_is_well_formed_and_counts_like_the_json() {
    let (_dir, corpus) = small_corpus();
    let out = check(&corpus, &["--format", "junit"]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.starts_with("<?xml"), "{}", out.stdout);
    let tags = xml_tags(&out.stdout);
    assert_eq!(count(&tags, "testsuites"), 1);
    assert_eq!(count(&tags, "testsuite"), 2, "one per backend");
    assert_eq!(count(&tags, "testcase"), EXPECTED.len());
    let fails = EXPECTED.iter().filter(|(_, v)| *v == "FAIL").count();
    let skips = EXPECTED
        .iter()
        .filter(|(_, v)| ["skip", "xfail"].contains(v))
        .count();
    assert_eq!(count(&tags, "failure"), fails);
    assert_eq!(count(&tags, "skipped"), skips);
    assert!(out.stdout.contains(
        "<testsuite name=\"oracle\" tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"1\">"
    ));
    assert!(out
        .stdout
        .contains("<testcase classname=\"oracle\" name=\"bad\">"));
    assert!(
        out.stdout
            .contains("<skipped message=\"wrong &lt;on&gt; purpose &amp; &quot;quoted&quot;\"/>"),
        "the xfail reason, escaped:\n{}",
        out.stdout
    );
    assert!(out.stderr.contains("oracle: 2 passed, 1 failed, 1 xfail"));
}

#[test]
fn output_writes_the_file_and_keeps_the_document_off_stdout() {
    let (dir, corpus) = small_corpus();
    let json = dir.path().join("report.json");
    let out = check(
        &corpus,
        &[
            "--format",
            "json",
            "--output",
            json.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.code, 1);
    assert!(!out.stdout.contains("uopkit-report/1"), "{}", out.stdout);
    assert!(
        out.stdout.contains("oracle: 2 passed, 1 failed"),
        "{}",
        out.stdout
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("written")).expect("JSON");
    assert_eq!(doc["trials"].as_array().map(Vec::len), Some(EXPECTED.len()));

    let xml = dir.path().join("results.xml");
    let out = check(
        &corpus,
        &[
            "--format",
            "junit",
            "--output",
            xml.to_str().expect("utf-8"),
            "good",
        ],
    );
    assert_eq!(out.code, 0, "only passing trials: {}", out.stderr);
    assert!(!out.stdout.contains("<testsuite"), "{}", out.stdout);
    let tags = xml_tags(&std::fs::read_to_string(&xml).expect("written"));
    assert_eq!(count(&tags, "testcase"), 2);
    assert_eq!(count(&tags, "failure"), 0);

    // Text to a file: nothing on stdout.
    let txt = dir.path().join("summary.txt");
    let out = check(&corpus, &["--output", txt.to_str().expect("utf-8"), "good"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let written = std::fs::read_to_string(&txt).expect("written");
    assert!(written.contains("oracle: 1 passed, 0 failed"), "{written}");

    // An output file in a directory that does not exist: bad input, nothing left behind.
    let nowhere = dir.path().join("missing").join("r.json");
    let out = check(
        &corpus,
        &[
            "--format",
            "json",
            "--output",
            nowhere.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot write the report"),
        "{}",
        out.stderr
    );
    assert!(!nowhere.exists());
}

#[test]
fn an_unknown_format_is_bad_input() {
    let (_dir, corpus) = small_corpus();
    let out = check(&corpus, &["--format", "yaml"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("yaml"), "{}", out.stderr);
    assert!(out.stdout.is_empty());
    let out = uopkit(&["fuzz", "--format", "xml", "--cases", "1"]);
    assert_eq!(out.code, 2);
}

#[test]
fn fuzz_reports_json_and_junit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let regressions = dir.path().join("regressions");
    let regressions = regressions.to_str().expect("utf-8");
    let args = |format: &'static str| {
        vec![
            "fuzz",
            "--backend",
            "kernels",
            "--cases",
            "3",
            "--seed",
            "5",
            "--out",
            regressions,
            "--format",
            format,
        ]
    };
    let out = uopkit(&args("json"));
    let doc: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}):\n{}", out.stdout));
    assert_valid(&doc);
    assert_eq!(doc["command"], "fuzz");
    assert_eq!(doc["seed"], 5);
    assert_eq!(doc["cases"], 3);
    assert!(doc["seconds"].is_number());
    let findings = doc["findings"].as_array().expect("findings");
    assert_eq!(out.code, i32::from(!findings.is_empty()), "{}", out.stderr);
    for f in findings {
        assert!(Path::new(f["file"].as_str().unwrap_or("")).is_file(), "{f}");
    }
    assert!(
        out.stderr.contains("fuzz kernels seed 5: 3 cases"),
        "{}",
        out.stderr
    );

    let out = uopkit(&args("junit"));
    let tags = xml_tags(&out.stdout);
    assert_eq!(count(&tags, "testcase"), findings.len().max(1));
    assert_eq!(count(&tags, "failure"), findings.len());
}
