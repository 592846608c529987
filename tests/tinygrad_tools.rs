//! The tinygrad exporters' own checks (`tools/tests/test_tinygrad_export.py`,
//! `tools/tests/test_tinygrad_export_kernels.py`, see tools/README.md), run from `cargo test` so
//! CI runs them: each must exit 0 and print its `ok:` line. Without tinygrad 0.14.0 they say
//! "skipped", which passes here unless `UOPKIT_REQUIRE_TINYGRAD=1` (CI), where it fails.

use std::path::Path;
use std::process::Command;

/// The interpreter the tinygrad bridge uses: `UOPKIT_TINYGRAD_PYTHON`, else the repository's
/// `.venv/bin/python`, else `python3`.
fn python() -> String {
    match std::env::var("UOPKIT_TINYGRAD_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
            if venv.is_file() {
                venv.to_string_lossy().into_owned()
            } else {
                "python3".into()
            }
        }
    }
}

fn run_check(script: &str, ok_line: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python())
        .arg(root.join(script))
        .current_dir(root)
        .output()
        .expect("the Python interpreter runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} failed:\n{text}");
    if text.contains("skipped:") {
        assert!(
            std::env::var("UOPKIT_REQUIRE_TINYGRAD").map_or(true, |v| v != "1"),
            "UOPKIT_REQUIRE_TINYGRAD=1 but {script} skipped:\n{text}"
        );
        eprintln!("{script}: {text}");
        return;
    }
    assert!(
        text.contains(ok_line),
        "{script} did not report '{ok_line}':\n{text}"
    );
}

#[test]
fn the_tensor_exporter_checks_pass() {
    run_check(
        "tools/tests/test_tinygrad_export.py",
        "ok: tinygrad_export:",
    );
}

#[test]
fn the_kernel_exporter_checks_pass() {
    run_check(
        "tools/tests/test_tinygrad_export_kernels.py",
        "ok: tinygrad_export_kernels:",
    );
}
