//! The expected-failure manifest (`manifests/xfail.json`, format `uopkit-xfail/1`): known
//! failures per case × backend, each with a reason. A listed trial that fails passes (its reason
//! noted); a listed trial that **passes** fails the run until its entry is removed, so the list
//! cannot go stale. An entry may also say what the failure must contain, so that a different
//! failure of a listed case is not hidden.
//!
//! ```json
//! {
//!   "format": "uopkit-xfail/1",
//!   "description": "…",
//!   "expected_failures": [
//!     {"case": "reduce/add_float32_order", "backend": "cpu", "reason": "issue 12: …", "contains": "differ"}
//!   ]
//! }
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "uopkit-xfail/1";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Xfail {
    pub format: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub expected_failures: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The case name (`alu/exp2_float32`: its path under `corpus/` without `.json`).
    pub case: String,
    /// The backend (`cpu`, `oracle`, …).
    pub backend: String,
    pub reason: String,
    /// If given, the failure message must contain this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
}

/// Why the manifest could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("{path}: cannot read: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// What a listed or unlisted trial came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Not listed, and it passed.
    Passed,
    /// Listed, and it failed as expected.
    ExpectedFailure { reason: String, failure: String },
}

/// `manifests/xfail.json` of this repository.
pub fn default_path() -> PathBuf {
    crate::allowances::default_dir().join("xfail.json")
}

/// Reads and checks an expected-failure manifest.
pub fn load(path: &Path) -> Result<Xfail, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    parse(&text).map_err(|reason| Error::Invalid {
        path: path.to_path_buf(),
        reason,
    })
}

pub fn parse(text: &str) -> Result<Xfail, String> {
    let x: Xfail = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if x.format != FORMAT {
        return Err(format!(
            "format must be \"{FORMAT}\", found \"{}\"",
            x.format
        ));
    }
    let mut seen = BTreeSet::new();
    for e in &x.expected_failures {
        if e.reason.trim().is_empty() {
            return Err(format!(
                "{} on {}: an expected failure needs a reason",
                e.case, e.backend
            ));
        }
        if !seen.insert((e.case.as_str(), e.backend.as_str())) {
            return Err(format!("{} on {} is listed twice", e.case, e.backend));
        }
    }
    Ok(x)
}

impl Xfail {
    /// A manifest with no entries.
    pub fn empty() -> Xfail {
        Xfail {
            format: FORMAT.into(),
            ..Default::default()
        }
    }

    pub fn entry(&self, case: &str, backend: &str) -> Option<&Entry> {
        self.expected_failures
            .iter()
            .find(|e| e.case == case && e.backend == backend)
    }

    /// The trial's verdict with the manifest applied: an unlisted trial keeps its result; a
    /// listed one passes when it fails (as described) and fails when it passes.
    pub fn judge(
        &self,
        case: &str,
        backend: &str,
        result: Result<(), String>,
    ) -> Result<(), String> {
        self.outcome(case, backend, result).map(|_| ())
    }

    /// Like [`Xfail::judge`], keeping the reason and the failure of an expected failure.
    pub fn outcome(
        &self,
        case: &str,
        backend: &str,
        result: Result<(), String>,
    ) -> Result<Outcome, String> {
        let Some(e) = self.entry(case, backend) else {
            return result.map(|()| Outcome::Passed);
        };
        match result {
            Ok(()) => Err(format!(
                "{case} on {backend} is listed as an expected failure ({}) but passed; remove the entry from manifests/xfail.json",
                e.reason
            )),
            Err(failure) => match &e.contains {
                Some(c) if !failure.contains(c.as_str()) => Err(format!(
                    "{case} on {backend} is listed as an expected failure ({}) containing '{c}', but it failed differently:\n{failure}",
                    e.reason
                )),
                _ => Ok(Outcome::ExpectedFailure { reason: e.reason.clone(), failure }),
            },
        }
    }

    /// Entries naming a case that does not exist or a backend that is not known (a renamed case
    /// would otherwise leave its entry behind, never judged).
    pub fn check_names(
        &self,
        case_exists: impl Fn(&str) -> bool,
        backends: &[&str],
    ) -> Result<(), String> {
        let bad: Vec<String> = self
            .expected_failures
            .iter()
            .filter_map(|e| {
                if !case_exists(&e.case) {
                    Some(format!("unknown case '{}'", e.case))
                } else if !backends.contains(&e.backend.as_str()) {
                    Some(format!("unknown backend '{}' for {}", e.backend, e.case))
                } else {
                    None
                }
            })
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("manifests/xfail.json: {}", bad.join("; ")))
        }
    }
}
