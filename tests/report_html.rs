//! `uopkit check --format html --output FILE`: one self-contained page (no script, no external
//! resource, balanced tags) with, for each failing trial, the failure message escaped, the
//! case's graph drawn with the differing node in red and a ULP histogram of each output that
//! differs; skipped and expected-failure trials in collapsed lists; the same bytes for the
//! same run; without Graphviz the DOT text instead of pictures. The wrong backend is
//! `uopkit worker --backend kernels` behind a proxy that adds 1, 2 and 3 to the bits of three
//! elements of the first output.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{repo, PERMUTED_RESHAPE};

const PERTURB: &str = r#"import json, subprocess, sys
DELTAS = {0: 1, 1: 2, 14: 3}
worker = subprocess.Popen([sys.argv[1], "worker", "--backend", "kernels"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
for line in sys.stdin:
    worker.stdin.write(line)
    worker.stdin.flush()
    answer = json.loads(worker.stdout.readline())
    if answer.get("type") == "hello":
        answer["name"] = "perturb"
    if answer.get("type") == "result" and answer.get("outputs"):
        comp = answer["outputs"][0]["components"][0]
        for i, d in DELTAS.items():
            if i < len(comp) and comp[i] is not None:
                comp[i] = hex(int(comp[i], 16) + d)
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
worker.stdin.close()
worker.wait()
"#;

struct Run {
    code: i32,
    stderr: String,
    html: String,
}

/// good (add_float32), bad (a wrong expected value: the oracle trial fails), ub (skipped on
/// the backend), worse (listed as an expected failure of the oracle).
fn corpus() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, corpus) = common::small_corpus(
        &["good", "bad", "worse", "ub"],
        r#"{"format": "uopkit-xfail/1", "expected_failures": [
            {"case": "worse", "backend": "oracle", "reason": "wrong <on> purpose"}]}"#,
    );
    let script = dir.path().join("perturb.py");
    std::fs::write(&script, PERTURB).expect("write the script");
    (dir, corpus, script)
}

fn check_html(corpus: &Path, script: &Path, out: &Path, path_env: Option<&str>) -> Run {
    let backend = format!(
        "oracle,exec:python3 {} {}",
        script.display(),
        env!("CARGO_BIN_EXE_uopkit")
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_uopkit"));
    cmd.args(["check", "--corpus"])
        .arg(corpus)
        .args(["--backend", &backend, "--jobs", "1", "--format", "html"])
        .arg("--output")
        .arg(out)
        .current_dir(repo());
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    let o = cmd.output().expect("uopkit runs");
    Run {
        code: o.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        html: std::fs::read_to_string(out).unwrap_or_default(),
    }
}

/// Every element closed in order (void HTML elements and `/>` apart); comments and the
/// doctype skipped. Errors name the offending tag.
fn balanced(html: &str) -> Result<(), String> {
    const VOID: &[&str] = &["meta", "br", "hr", "img", "input", "link", "wbr"];
    let mut stack: Vec<String> = vec![];
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        if let Some(r) = rest.strip_prefix("<!--") {
            let end = r.find("-->").ok_or("an unclosed comment")?;
            rest = &r[end + 3..];
            continue;
        }
        let end = rest.find('>').ok_or("an unclosed tag")?;
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == ':' || *c == '-')
            .collect();
        if name.is_empty() {
            return Err(format!("a bare '<' before {tag:?}"));
        }
        if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
            stack.push(name);
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(format!("left open: {stack:?}"))
    }
}

/// The section of trial `name` (`backend::case`).
fn section<'a>(html: &'a str, name: &str) -> &'a str {
    let head = format!("</span> {name}</h2>");
    let start = html
        .find(&head)
        .unwrap_or_else(|| panic!("no section for {name}"));
    let end = html[start..]
        .find("</section>")
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

fn graphviz() -> bool {
    Command::new("dot").arg("-V").output().is_ok()
}

#[test]
fn a_failing_run_is_one_page_with_pictures_and_histograms() {
    let (dir, corpus, script) = corpus();
    let out = dir.path().join("run.html");
    let run = check_html(&corpus, &script, &out, None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let html = &run.html;
    assert!(html.starts_with("<!DOCTYPE html>\n"), "{html}");
    assert!(html.ends_with("</html>\n"));
    balanced(html).unwrap_or_else(|e| panic!("{e}"));
    assert!(!html.to_lowercase().contains("<script"), "no JavaScript");
    for external in ["<link", "src=\"", "@import", "href=\"http"] {
        assert!(!html.contains(external), "an external resource: {external}");
    }
    // The summary per backend.
    assert!(
        html.contains("<tr><th>oracle</th><td class=\"n pass\">2</td><td class=\"n\">0</td><td class=\"n fail\">1</td><td class=\"n xfail\">1</td><td class=\"n\">0</td>"),
        "{html}"
    );
    assert!(
        html.contains("<tr><th>perturb</th><td class=\"n\">0</td><td class=\"n\">0</td><td class=\"n fail\">3</td><td class=\"n\">0</td><td class=\"n skip\">1</td>"),
        "{html}"
    );
    assert!(html.contains("<tr><th>backends</th><td>oracle, perturb</td></tr>"));
    // The oracle trial's failure message, escaped.
    let bad = section(html, "oracle::bad");
    assert!(
        bad.contains("<pre class=\"message\">output &apos;add&apos; (float32 [20], exact)"),
        "{bad}"
    );
    // The backend's mismatch: a histogram of exactly the perturbation, the worst elements.
    let good = section(html, "perturb::good");
    for (bucket, count) in [("0", 17), ("1", 1), ("2", 1), ("3–4", 1)] {
        let bar = format!("data-bucket=\"{bucket}\" data-count=\"{count}\"");
        assert!(good.contains(&bar), "{bar} in {good}");
    }
    assert_eq!(
        good.matches("<svg class=\"histogram\"").count(),
        1,
        "{good}"
    );
    assert!(
        good.contains("<td><code>[14]</code></td><td><code>1.0 (0x3f800000)</code></td><td><code>1.0000004 (0x3f800003)</code></td><td class=\"n\">3</td>"),
        "{good}"
    );
    assert!(
        good.contains("every interpreted compiler stage agrees"),
        "{good}"
    );
    assert!(good.contains("In red: node 2"), "{good}");
    // Skipped and expected failures: collapsed, with their reasons.
    assert!(html.contains("<details class=\"xfail-list\"><summary>xfail (1)</summary>"));
    assert!(html.contains("<code>oracle::worse</code>: wrong &lt;on&gt; purpose"));
    assert!(html.contains("<code>perturb::ub</code>: undefined or invalid graph"));
    if graphviz() {
        // The graph drawn, its output node (2: ADD) in red; and the schedule.
        let pics: Vec<&str> = good.split("<div class=\"pic\">").skip(1).collect();
        assert_eq!(pics.len(), 2, "a graph and a schedule picture: {good}");
        let graph = pics[0];
        assert!(graph.starts_with("<svg"), "{graph}");
        let node = graph
            .split("<g id=\"t")
            .find(|g| g.contains(">2: ADD</text>"))
            .expect("the ADD node is drawn");
        assert!(node.contains("stroke=\"red\""), "highlighted: {node}");
        assert!(!html.contains("<?xml"), "the SVG prologue is dropped");
    }
    // The same run, the same bytes.
    let again = check_html(&corpus, &script, &out, None);
    assert_eq!(again.code, 1);
    assert!(again.html == run.html, "the page differs on a second run");
}

#[test]
fn without_graphviz_the_page_has_the_dot_text() {
    let (dir, corpus, script) = corpus();
    // A PATH with python3 only: no `dot`.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = String::from_utf8_lossy(&python.stdout).trim().to_string();
    std::os::unix::fs::symlink(&python, bin.join("python3")).expect("symlink");
    let out = dir.path().join("run.html");
    let run = check_html(&corpus, &script, &out, Some(bin.to_str().expect("utf-8")));
    assert_eq!(run.code, 1, "{}", run.stderr);
    let good = section(&run.html, "perturb::good");
    assert!(good.contains("install graphviz for pictures"), "{good}");
    assert!(good.contains("<pre class=\"dot\">digraph"), "{good}");
    assert!(!good.contains("<div class=\"pic\">"), "{good}");
    assert!(
        good.contains("data-bucket=\"3–4\" data-count=\"1\""),
        "{good}"
    );
    balanced(&run.html).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fuzz_refuses_html_before_running() {
    let o = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(["fuzz", "--cases", "1", "--format", "html"])
        .current_dir(repo())
        .output()
        .expect("uopkit runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format html is for `uopkit check`"));
}

#[test]
fn the_balance_check_can_fail() {
    assert!(balanced("<p><b>x</p></b>").is_err());
    assert!(balanced("<div><p>x</p>").is_err());
    assert!(balanced("<meta charset=\"utf-8\"><p>a<br>b</p><svg><rect/></svg>").is_ok());
}

/// The node the page draws in red for a compiler bug: the one `stages::diff` pins.
#[test]
fn the_stage_diff_names_the_diverging_node() {
    use uopkit_compiler::rewrite::faults;
    let case = uopkit_conformance::load::parse_case(PERMUTED_RESHAPE).expect("the case parses");
    let clean = uopkit_conformance::stages::diff(&case).expect("diff runs");
    assert_eq!(clean.node, None);
    faults::set_active(&["fault_mod_drop"]);
    let report = uopkit_conformance::stages::diff(&case);
    faults::set_active(&[]);
    let report = report.expect("diff runs");
    assert!(report.first.is_some());
    assert_eq!(report.node, Some(4), "{:?}", report.first);
}
