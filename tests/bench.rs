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
