//! numpy and tinygrad figures for the same workloads: `benches/peers.py` (embedded here, so
//! the installed binary needs no checkout), run with a Python that has them. Which Python:
//! `--python`, else `UOPKIT_BENCH_PYTHON` (empty: none), else `.venv/bin/python` when it
//! exists. A missing Python, library or figure leaves the fields absent; it is never a zero.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The script, as `benches/peers.py` holds it.
pub const SCRIPT: &str = include_str!("../../../benches/peers.py");

/// The environment variable naming the Python to run the peers with.
pub const ENV: &str = "UOPKIT_BENCH_PYTHON";

/// The Python to use, if any (see the module doc).
pub fn python(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    match std::env::var_os(ENV) {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(PathBuf::from(".venv/bin/python")).filter(|p| p.exists()),
    }
}

/// One workload's peer figures (in the workload's unit), and tinygrad's first call in ms.
#[derive(Clone, Debug, Default)]
pub struct PeerFigures {
    pub numpy: Option<f64>,
    pub tinygrad: Option<f64>,
    pub tinygrad_first_ms: Option<f64>,
}

/// Runs the script with `python` on `workloads` (each `{"name", "kind", sizes…}`): figures by
/// workload name, or why there are none (for a note on stderr).
pub fn run(
    python: &Path,
    workloads: &[serde_json::Value],
    rounds: usize,
) -> Result<BTreeMap<String, PeerFigures>, String> {
    let req = serde_json::json!({"rounds": rounds, "workloads": workloads});
    let mut child = Command::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(req.to_string().as_bytes())
            .map_err(|e| format!("{}: writing the request: {e}", python.display()))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} peers.py failed ({}): {}",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("peers.py printed no JSON: {e}"))?;
    let num = |x: &serde_json::Value| x.as_f64().filter(|f| f.is_finite() && *f > 0.0);
    let mut figures = BTreeMap::new();
    if let Some(results) = v.get("results").and_then(|r| r.as_object()) {
        for (name, r) in results {
            figures.insert(
                name.clone(),
                PeerFigures {
                    numpy: r.get("numpy").and_then(num),
                    tinygrad: r.get("tinygrad").and_then(num),
                    tinygrad_first_ms: r.get("tinygrad_first_ms").and_then(num),
                },
            );
        }
    }
    Ok(figures)
}
