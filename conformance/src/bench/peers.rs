//! numpy and tinygrad figures for the same workloads: `benches/peers.py` (embedded here, so
//! the installed binary needs no checkout), run with a Python that has them. Which Python:
//! `--python`, else `UOPKIT_BENCH_PYTHON` (empty: none), else `.venv/bin/python` when it
//! exists. A missing Python, library or figure leaves the fields absent; it is never a zero,
//! and it is never silent: [`PeerRun::notes`] says why (the bench prints them).

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

/// What the script gave: figures by workload name, and why a library or a figure is missing
/// (one line each, e.g. `tinygrad: cannot run on its CPU device: …`, `tinygrad sum: …`).
#[derive(Clone, Debug, Default)]
pub struct PeerRun {
    pub figures: BTreeMap<String, PeerFigures>,
    pub notes: Vec<String>,
}

/// Runs the script with `python` on `workloads` (each `{"name", "kind", sizes…}`): the
/// figures and notes, or why the script gave nothing at all.
pub fn run(
    python: &Path,
    workloads: &[serde_json::Value],
    rounds: usize,
) -> Result<PeerRun, String> {
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
    Ok(parse(&v))
}

/// The figures and notes of the script's JSON answer (see `benches/peers.py`).
pub fn parse(v: &serde_json::Value) -> PeerRun {
    let num = |x: &serde_json::Value| x.as_f64().filter(|f| f.is_finite() && *f > 0.0);
    let text = |x: &serde_json::Value| x.as_str().unwrap_or("no reason given").to_string();
    let mut run = PeerRun::default();
    if let Some(u) = v.get("unavailable").and_then(|u| u.as_object()) {
        for (lib, why) in u {
            run.notes.push(format!("{lib}: {}", text(why)));
        }
    }
    if let Some(results) = v.get("results").and_then(|r| r.as_object()) {
        for (name, r) in results {
            let f = PeerFigures {
                numpy: r.get("numpy").and_then(num),
                tinygrad: r.get("tinygrad").and_then(num),
                tinygrad_first_ms: r.get("tinygrad_first_ms").and_then(num),
            };
            if let Some(errors) = r.get("errors").and_then(|e| e.as_object()) {
                for (lib, why) in errors {
                    run.notes.push(format!("{lib} {name}: {}", text(why)));
                }
            }
            // A library the script says it has, with no figure and no reason: say so too.
            for (lib, got) in [("numpy", f.numpy), ("tinygrad", f.tinygrad)] {
                let has = v.get(lib).and_then(|b| b.as_bool()) == Some(true);
                let explained = r.get("errors").and_then(|e| e.get(lib)).is_some();
                if has && got.is_none() && !explained {
                    run.notes
                        .push(format!("{lib} {name}: no figure (none given, no reason)"));
                }
            }
            run.figures.insert(name.clone(), f);
        }
    }
    run
}
