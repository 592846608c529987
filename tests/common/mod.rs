//! Helpers shared by the integration tests that run `uopkit` on a small corpus.
// Each test binary uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A temporary corpus of the named cases with `manifests/xfail.json` = `xfail` beside it:
/// `good` (corpus/alu/add_float32), `bad` and `worse` (the same with a wrong first expected
/// value: the oracle trial fails), `ub` (the first case of corpus/ub: oracle-only).
pub fn small_corpus(cases: &[&str], xfail: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).expect("mkdir");
    let good = std::fs::read_to_string(repo().join("corpus/alu/add_float32.json")).expect("read");
    let mut bad: serde_json::Value = serde_json::from_str(&good).expect("json");
    bad["outputs"][0]["expect"][0] = serde_json::json!("0x12345678");
    for &name in cases {
        let path = corpus.join(format!("{name}.json"));
        match name {
            "good" => std::fs::write(path, &good).expect("write"),
            "bad" | "worse" => std::fs::write(path, bad.to_string()).expect("write"),
            "ub" => {
                let ub = std::fs::read_dir(repo().join("corpus/ub"))
                    .expect("ub dir")
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|e| e == "json"))
                    .min()
                    .expect("a ub case");
                std::fs::copy(ub, path).expect("copy");
            }
            other => panic!("no such small-corpus case: {other}"),
        }
    }
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    std::fs::write(manifests.join("xfail.json"), xfail).expect("write");
    (dir, corpus)
}

/// What one run of the `uopkit` binary printed.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// stdout then stderr.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs the `uopkit` binary cargo built for this test in the repository root, with the
/// variables `remove` cleared and then `env` set.
pub fn uopkit_with(args: &[&str], env: &[(&str, &str)], remove: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_uopkit"));
    cmd.args(args).current_dir(repo());
    for var in remove {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the uopkit binary runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// [`uopkit_with`] in the plain environment.
pub fn uopkit(args: &[&str]) -> Out {
    uopkit_with(args, &[], &[])
}

/// x = arange(6) as [3,2], permuted to [2,3], flattened, doubled: the flat index k reads
/// x at (k % 3) * 2 + k / 3, a modulo the deliberately wrong rule `fault_mod_drop` drops
/// (hand-derived [0,4,8,2,6,10]).
pub const PERMUTED_RESHAPE: &str = r#"{
  "format": "uopkit-case/1",
  "description": "permute then reshape: index arithmetic with a modulo; hand-derived [0,4,8,2,6,10]",
  "graph": [
    {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"device": "CPU:0", "size": 6, "slot": 0}},
    {"id": 1, "op": "RESHAPE", "dtype": "int32", "src": [0], "arg": [3, 2]},
    {"id": 2, "op": "PERMUTE", "dtype": "int32", "src": [1], "arg": [1, 0]},
    {"id": 3, "op": "RESHAPE", "dtype": "int32", "src": [2], "arg": [6]},
    {"id": 4, "op": "ADD", "dtype": "int32", "src": [3, 3]}
  ],
  "inputs": {"0": {"arange": {"start": 0, "step": 1}}},
  "outputs": [{"name": "y", "node": 4, "shape": [6], "expect": [0, 4, 8, 2, 6, 10]}]
}"#;

/// Σ arange(16) as int32 = 120 (hand-derived): an order-free sum, which the GPU target
/// reduces in local memory over 8 work items.
pub const INT_SUM: &str = r#"{
  "format": "uopkit-case/1",
  "description": "sum of arange(16) int32; hand-derived 120",
  "graph": [
    {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"device": "CPU:0", "size": 16, "slot": 0}},
    {"id": 1, "op": "REDUCE", "dtype": "int32", "src": [0], "arg": ["ADD", 1]}
  ],
  "inputs": {"0": {"arange": {"start": 0, "step": 1}}},
  "outputs": [{"name": "s", "node": 1, "shape": [], "expect": [120]}]
}"#;
