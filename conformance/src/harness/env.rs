//! Run settings from the environment (`UOPKIT_BACKENDS`, `UOPKIT_CORPUS`, `UOPKIT_MANIFESTS`,
//! `UOPKIT_TIMEOUT`, `UOPKIT_WORKER_MEMORY`, `UOPKIT_IN_PROCESS`) and the `--backend` list.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Settings, SetupError};
use crate::backends::registry::OpenOpts;

/// Settings from the environment, for test binaries:
/// `UOPKIT_BACKENDS` (default: the caller's, e.g. [`super::DEFAULT_BACKENDS`]), `UOPKIT_CORPUS`, `UOPKIT_MANIFESTS`,
/// `UOPKIT_TIMEOUT` (seconds), `UOPKIT_WORKER_MEMORY` (bytes), `UOPKIT_IN_PROCESS=1`.
pub fn settings_from_env(
    default_corpus: &Path,
    default_backends: &str,
) -> Result<Settings, SetupError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let backends = var("UOPKIT_BACKENDS").unwrap_or_else(|| default_backends.to_string());
    let mut open = OpenOpts::default();
    apply_limits_env(&mut open)?;
    Ok(Settings {
        corpus: var("UOPKIT_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_corpus.to_path_buf()),
        manifests: var("UOPKIT_MANIFESTS").map(PathBuf::from),
        backends: split_backends(&backends),
        filters: vec![],
        open,
    })
}

/// `UOPKIT_TIMEOUT`, `UOPKIT_WORKER_MEMORY`, `UOPKIT_IN_PROCESS` into `open` (bad values are
/// errors naming the variable).
pub fn apply_limits_env(open: &mut OpenOpts) -> Result<(), SetupError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let Some(t) = var("UOPKIT_TIMEOUT") {
        let secs: f64 = t
            .trim()
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or_else(|| {
                SetupError(format!(
                    "UOPKIT_TIMEOUT='{t}': expected a positive number of seconds"
                ))
            })?;
        open.limits.timeout = Duration::from_secs_f64(secs);
    }
    if let Some(m) = var("UOPKIT_WORKER_MEMORY") {
        open.limits.memory = Some(parse_bytes(&m).ok_or_else(|| {
            SetupError(format!(
                "UOPKIT_WORKER_MEMORY='{m}': expected bytes (e.g. 4G, 512M)"
            ))
        })?);
    }
    if let Some(v) = var("UOPKIT_IN_PROCESS") {
        open.in_process = match v.trim() {
            "1" | "true" | "yes" => true,
            "0" | "false" | "no" => false,
            _ => {
                return Err(SetupError(format!(
                    "UOPKIT_IN_PROCESS='{v}': expected 1 or 0"
                )))
            }
        };
    }
    Ok(())
}

/// `UOPKIT_FAIL_FAST=1`: the test binary stops at the first failing trial (exit status 101)
/// instead of running the rest; for mutation testing (`scripts/mutants.sh`), where the first
/// failure is the whole answer. Bad values are errors naming the variable.
pub fn fail_fast_from_env() -> Result<bool, SetupError> {
    match std::env::var("UOPKIT_FAIL_FAST") {
        Err(_) => Ok(false),
        Ok(v) => match v.trim() {
            "" | "0" | "false" | "no" => Ok(false),
            "1" | "true" | "yes" => Ok(true),
            _ => Err(SetupError(format!(
                "UOPKIT_FAIL_FAST='{v}': expected 1 or 0"
            ))),
        },
    }
}

/// `4G`, `512M`, `100K`, `12345`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last()? {
        (i, 'K' | 'k') => (&s[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&s[..i], 1 << 20),
        (i, 'G' | 'g') => (&s[..i], 1 << 30),
        (i, 'T' | 't') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

/// `oracle,cpu,exec:python3 x.py` → the specs. A comma inside `exec:` belongs to the command
/// when it is not followed by a known backend spec; to be safe, put `exec:` last.
pub fn split_backends(s: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for part in s.split(',') {
        match out.last_mut() {
            Some(last) if last.starts_with("exec:") && !looks_like_spec(part) => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.trim().to_string()),
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn looks_like_spec(part: &str) -> bool {
    let p = part.trim();
    p.starts_with("exec:")
        || p.starts_with("tinygrad:")
        || (!p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
}
