//! `uopkit bench`: the JSON's shape, bit-for-bit judgement (a corrupted result is reported
//! `exact: false`, exit 1), peers' figures present only when a Python gives them, and bad
//! arguments (exit 2). Quick mode only; no timing is asserted (speed targets live in the
//! benchmark itself).

mod common;
use common::{uopkit_with, Out};

fn bench(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut all = vec!["bench", "--quick", "--format", "json"];
    all.extend_from_slice(args);
    let mut e = vec![("UOPKIT_BENCH_PYTHON", "")];
    e.extend_from_slice(env);
    uopkit_with(&all, &e, &["UOPKIT_BENCH_CORRUPT"])
}

fn json(o: &Out) -> serde_json::Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.all()))
}

fn workload<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no workload {name} in {v:#}"))
}

#[test]
fn quick_json_has_every_workload_exact_with_its_ceiling() {
    let o = bench(&[], &[]);
    assert_eq!(o.code, 0, "{}", o.all());
    let v = json(&o);
    assert_eq!(v["format"], "uopkit-bench/1");
    let names: Vec<&str> = v["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .map(|w| w["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "elementwise",
            "sum",
            "matmul",
            "softmax",
            "conv",
            "f16_elementwise"
        ]
    );
    for w in v["workloads"].as_array().expect("workloads") {
        assert_eq!(w["exact"], true, "{w:#}");
        assert!(w.get("mismatch").is_none(), "{w:#}");
        for f in [
            "value",
            "ceiling",
            "ratio_to_ceiling",
            "compile_ms",
            "best_ms",
        ] {
            assert!(w[f].as_f64().is_some_and(|x| x > 0.0), "{f} in {w:#}");
        }
        let ratio = w["value"].as_f64().unwrap() / w["ceiling"].as_f64().unwrap();
        assert!((w["ratio_to_ceiling"].as_f64().unwrap() - ratio).abs() <= 1e-9 * ratio);
        let unit = w["unit"].as_str().expect("unit");
        assert!(unit == "GB/s" || unit == "GFLOP/s", "{w:#}");
        // No Python for the peers: the fields are absent, not zero or null.
        for f in ["numpy", "tinygrad", "tinygrad_first_ms"] {
            assert!(w.get(f).is_none(), "{f} in {w:#}");
        }
    }
    // ... and the report says why.
    let notes = v["peer_notes"].as_array().expect("peer_notes");
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.contains("no Python"))),
        "{notes:?}"
    );
    assert_eq!(workload(&v, "sum")["unit"], "GB/s");
    assert_eq!(workload(&v, "sum")["ceiling_probe"], "read");
    assert_eq!(workload(&v, "elementwise")["ceiling_probe"], "triad");
    assert_eq!(workload(&v, "matmul")["unit"], "GFLOP/s");
    let probes: Vec<&str> = v["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .map(|p| p["name"].as_str().expect("name"))
        .collect();
    for p in ["copy", "triad", "read", "mul+add"] {
        assert!(probes.contains(&p), "{probes:?}");
    }
}

#[test]
fn a_wrong_kernel_result_is_reported_not_exact() {
    let o = bench(
        &["--workloads", "sum,elementwise", "--rounds", "1"],
        &[("UOPKIT_BENCH_CORRUPT", "sum")],
    );
    assert_eq!(o.code, 1, "{}", o.all());
    let v = json(&o);
    let sum = workload(&v, "sum");
    assert_eq!(sum["exact"], false, "{sum:#}");
    let m = sum["mismatch"].as_str().expect("a mismatch message");
    assert!(m.starts_with("element 0: got bits"), "{m}");
    assert_eq!(workload(&v, "elementwise")["exact"], true);
    assert!(o.stderr.contains("not exact"), "{}", o.stderr);
}

#[test]
fn peer_figures_appear_only_where_the_peers_give_them() {
    // A stand-in for Python: prints figures for sum's numpy only.
    let dir = tempfile::tempdir().expect("temp dir");
    let py = dir.path().join("python");
    std::fs::write(
        &py,
        "#!/bin/sh\ncat >/dev/null\necho '{\"numpy\": true, \"tinygrad\": false, \"results\": {\"sum\": {\"numpy\": 12.5}}}'\n",
    )
    .expect("write");
    std::fs::set_permissions(&py, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let py = py.to_str().expect("utf-8 path");
    let o = bench(
        &["--workloads", "sum,matmul", "--rounds", "1", "--python", py],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    let v = json(&o);
    assert_eq!(workload(&v, "sum")["numpy"], 12.5);
    assert!(workload(&v, "sum").get("tinygrad").is_none());
    assert!(workload(&v, "matmul").get("numpy").is_none());
}

/// Writes an executable stand-in for Python that ignores its request and prints `answer`.
fn fake_python(dir: &std::path::Path, answer: &str) -> String {
    let py = dir.join("python");
    std::fs::write(&py, format!("#!/bin/sh\ncat >/dev/null\necho '{answer}'\n")).expect("write");
    std::fs::set_permissions(&py, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    py.to_str().expect("utf-8 path").to_string()
}

/// A peer that cannot run, or a figure that fails, is said in the JSON (`peer_notes`) and the
/// table ("peers:"); its figures stay absent.
#[test]
fn why_a_peer_figure_is_missing_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let py = fake_python(
        dir.path(),
        r#"{"numpy": true, "tinygrad": false, "unavailable": {"tinygrad": "cannot run on its CPU device: FileNotFoundError: clang"}, "results": {"sum": {"numpy": 12.5}, "matmul": {"errors": {"numpy": "MemoryError: too big"}}}}"#,
    );
    let args = [
        "--workloads",
        "sum,matmul",
        "--rounds",
        "1",
        "--python",
        &py,
    ];
    let o = bench(&args, &[]);
    assert_eq!(o.code, 0, "{}", o.all());
    let v = json(&o);
    assert_eq!(
        v["peer_notes"],
        serde_json::json!([
            "tinygrad: cannot run on its CPU device: FileNotFoundError: clang",
            "numpy matmul: MemoryError: too big"
        ])
    );
    assert_eq!(workload(&v, "sum")["numpy"], 12.5);
    for f in ["tinygrad", "tinygrad_first_ms"] {
        assert!(workload(&v, "sum").get(f).is_none(), "{f}");
    }
    assert!(workload(&v, "matmul").get("numpy").is_none());
    let mut table = vec!["bench", "--quick"];
    table.extend_from_slice(&args);
    let o = uopkit_with(&table, &[], &["UOPKIT_BENCH_CORRUPT"]);
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(
        o.stdout
            .contains("\npeers:\n  tinygrad: cannot run on its CPU device: FileNotFoundError: clang\n  numpy matmul: MemoryError: too big\n"),
        "{}",
        o.stdout
    );
    // A script that says it has tinygrad but gives no figure and no reason is reported too.
    let py = fake_python(
        dir.path(),
        r#"{"numpy": false, "tinygrad": true, "results": {"sum": {}}}"#,
    );
    let o = bench(
        &["--workloads", "sum", "--rounds", "1", "--python", &py],
        &[],
    );
    let v = json(&o);
    assert_eq!(
        v["peer_notes"],
        serde_json::json!(["tinygrad sum: no figure (none given, no reason)"])
    );
}

/// The real `benches/peers.py` under a Python without numpy: no figure, and the reason.
#[test]
fn peers_py_without_numpy_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let py = dir.path().join("py");
    std::fs::write(&py, "#!/bin/sh\nexec python3 -I \"$@\"\n").expect("write");
    std::fs::set_permissions(&py, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let has_numpy = std::process::Command::new(&py)
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success());
    match has_numpy {
        Ok(false) => {}
        other => {
            eprintln!("skipped: python3 -I imports numpy, or does not run: {other:?}");
            return;
        }
    }
    let py = py.to_str().expect("utf-8 path");
    let o = bench(
        &["--workloads", "sum", "--rounds", "1", "--python", py],
        &[],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    let v = json(&o);
    let notes: Vec<&str> = v["peer_notes"]
        .as_array()
        .expect("peer_notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("numpy: not installed (")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("tinygrad: ")),
        "{notes:?}"
    );
    for f in ["numpy", "tinygrad", "tinygrad_first_ms"] {
        assert!(workload(&v, "sum").get(f).is_none(), "{f}");
    }
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["--workloads", "nope"][..],
        &["--workloads", ","][..],
        &["--rounds", "0"][..],
        &["--rounds", "x"][..],
        &["--format", "xml"][..],
    ] {
        let o = bench(args, &[]);
        assert_eq!(o.code, 2, "{args:?}: {}", o.all());
        assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
    }
    let o = bench(&["--workloads", "nope"], &[]);
    assert!(o.stderr.contains("unknown workload 'nope'"), "{}", o.stderr);
}
