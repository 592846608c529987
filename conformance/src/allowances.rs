//! Backend allowance manifests (`manifests/allowances/<backend>.json`, format
//! `uopkit-allowances/1`): what a backend may deviate in, as data. The comparison uses them in
//! two ways: `bounded` outputs get the oracle-derived bound for exactly these allowances, and
//! `overrides` replace a case output's comparison mode on this backend (with a reason).
//!
//! ```json
//! {
//!   "format": "uopkit-allowances/1",
//!   "backend": "cpu",
//!   "description": "…",
//!   "reassociate_reductions": false,
//!   "reassociate_allreduce": false,
//!   "flush_subnormals": [],
//!   "contract_mul_add": false,
//!   "nan_bits": "canonical",
//!   "ulp": {"EXP2": {"float32": 2, "*": 1}},
//!   "overrides": [{"case": "alu/exp2_float32", "output": "y", "compare": {"ulp": 2}, "reason": "…"}]
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uopkit_interp::bounds::Tolerances;
use uopkit_interp::ir::{DType, Op};

use crate::case::{Compare, NanPolicy, Output};

pub const FORMAT: &str = "uopkit-allowances/1";

/// One backend's allowances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowances {
    pub format: String,
    /// The backend's name as trials use it (`cpu`).
    pub backend: String,
    #[serde(default)]
    pub description: String,
    /// REDUCE over floats may be evaluated in any order.
    #[serde(default)]
    pub reassociate_reductions: bool,
    /// ALLREDUCE may combine components in any order (each device its own).
    #[serde(default)]
    pub reassociate_allreduce: bool,
    /// Float dtypes whose subnormal operands/results may be flushed to ±0.
    #[serde(default)]
    pub flush_subnormals: Vec<DType>,
    /// A float multiply feeding an add may be fused (one rounding).
    #[serde(default)]
    pub contract_mul_add: bool,
    /// `"any"`: where the oracle's value is a NaN, any NaN (any sign, any payload) is accepted,
    /// on every output (a case output's own `nan: any` needs no manifest). A number for a NaN,
    /// or a NaN for a number, is still a mismatch. Default `"canonical"`: the output's own policy.
    #[serde(default, skip_serializing_if = "is_canonical")]
    pub nan_bits: NanPolicy,
    /// ULP budget: op name → dtype name (or `"*"` for every float dtype) → steps.
    #[serde(default)]
    pub ulp: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per case output, a different comparison mode on this backend.
    #[serde(default)]
    pub overrides: Vec<Override>,
}

/// A comparison mode that replaces a case output's own on this backend.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// The case name (`reduce/add_float32_order`).
    pub case: String,
    /// The output name; absent: every output of the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    pub compare: Compare,
    pub reason: String,
}

/// The comparison mode an output gets on a backend, and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Mode<'a> {
    pub compare: Compare,
    /// The manifest override that set it (None: the case's own mode).
    pub origin: Option<&'a Override>,
}

/// The repository's `manifests/` directory.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("manifests")
}

/// `manifests/allowances/<backend>.json`.
pub fn default_path(backend: &str) -> PathBuf {
    default_dir()
        .join("allowances")
        .join(format!("{backend}.json"))
}

fn is_canonical(p: &NanPolicy) -> bool {
    *p == NanPolicy::Canonical
}

/// The float ALU ops a ULP budget may name (those the op table marks `ulp_budget`).
fn budget_op(op: Op) -> bool {
    op.info().is_some_and(|i| i.ulp_budget)
}

impl Allowances {
    /// No deviation at all.
    pub fn strict(backend: &str) -> Allowances {
        Allowances {
            format: FORMAT.into(),
            backend: backend.into(),
            description: "strict: bit-exact with the oracle".into(),
            reassociate_reductions: false,
            reassociate_allreduce: false,
            flush_subnormals: vec![],
            contract_mul_add: false,
            nan_bits: NanPolicy::Canonical,
            ulp: BTreeMap::new(),
            overrides: vec![],
        }
    }

    pub fn parse(text: &str) -> Result<Allowances, String> {
        let a: Allowances = serde_json::from_str(text).map_err(|e| e.to_string())?;
        a.validate()?;
        Ok(a)
    }

    pub fn load(path: &Path) -> Result<Allowances, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// `manifests/allowances/<backend>.json`.
    pub fn for_backend(backend: &str) -> Result<Allowances, String> {
        let a = Self::load(&default_path(backend))?;
        if a.backend != backend {
            return Err(format!(
                "{}: names backend '{}', not '{backend}'",
                default_path(backend).display(),
                a.backend
            ));
        }
        Ok(a)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!(
                "format must be \"{FORMAT}\", found \"{}\"",
                self.format
            ));
        }
        if self.backend.is_empty() {
            return Err("backend must be named".into());
        }
        for dt in &self.flush_subnormals {
            if !dt.is_float() {
                return Err(format!("flush_subnormals: {dt} is not a float dtype"));
            }
        }
        for (op, per) in &self.ulp {
            let o: Op = op.parse().map_err(|e| format!("ulp: {e}"))?;
            if !budget_op(o) {
                return Err(format!(
                    "ulp: {o} cannot have a ULP budget (float arithmetic ops only)"
                ));
            }
            for dt in per.keys() {
                if dt != "*" {
                    let d: DType = dt.parse().map_err(|e| format!("ulp.{op}: {e}"))?;
                    if !d.is_float() {
                        return Err(format!("ulp.{op}: {d} is not a float dtype"));
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        for o in &self.overrides {
            if o.reason.trim().is_empty() {
                return Err(format!("override of {} needs a reason", o.case));
            }
            if !seen.insert((o.case.clone(), o.output.clone())) {
                return Err(format!(
                    "two overrides for case {} output {:?}",
                    o.case, o.output
                ));
            }
        }
        Ok(())
    }

    /// The interp-side form, for the bound pass.
    pub fn tolerances(&self) -> Tolerances {
        let mut ulp = BTreeMap::new();
        for (op, per) in &self.ulp {
            let Ok(o) = op.parse::<Op>() else { continue };
            let floats = DType::ALL.iter().copied().filter(|d| d.is_float());
            if let Some(&n) = per.get("*") {
                for d in floats {
                    ulp.insert((o, d), n);
                }
            }
            for (dt, &n) in per {
                if let Ok(d) = dt.parse::<DType>() {
                    ulp.insert((o, d), n);
                }
            }
        }
        Tolerances {
            reassociate_reductions: self.reassociate_reductions,
            reassociate_allreduce: self.reassociate_allreduce,
            flush_subnormals: self.flush_subnormals.iter().copied().collect(),
            contract_mul_add: self.contract_mul_add,
            ulp,
        }
    }

    /// Whether the manifest allows no deviation (overrides aside).
    pub fn is_strict(&self) -> bool {
        self.tolerances().is_strict() && self.nan_bits == NanPolicy::Canonical
    }

    /// The NaN policy `out` is compared with on this backend: the manifest's `nan_bits: any`
    /// widens the output's own.
    pub fn nan_for(&self, out: &Output) -> NanPolicy {
        match self.nan_bits {
            NanPolicy::Any => NanPolicy::Any,
            NanPolicy::Canonical => out.nan,
        }
    }

    /// The mode `out` of case `case_name` is compared with on this backend: an override naming
    /// the output wins over one naming the whole case, which wins over the case's own mode.
    pub fn mode_for<'a>(&'a self, case_name: &str, out: &Output) -> Mode<'a> {
        let exact = self
            .overrides
            .iter()
            .find(|o| o.case == case_name && o.output.as_deref() == Some(out.name.as_str()));
        let whole = || {
            self.overrides
                .iter()
                .find(|o| o.case == case_name && o.output.is_none())
        };
        match exact.or_else(whole) {
            Some(o) => Mode {
                compare: o.compare.clone(),
                origin: Some(o),
            },
            None => Mode {
                compare: out.compare.clone(),
                origin: None,
            },
        }
    }

    /// Overrides that name a case (or an output) that does not exist: `outputs(case)` gives a
    /// case's output names, None when there is no such case.
    pub fn check_names(&self, outputs: impl Fn(&str) -> Option<Vec<String>>) -> Result<(), String> {
        let mut bad = vec![];
        for o in &self.overrides {
            match (outputs(&o.case), &o.output) {
                (None, _) => bad.push(format!("override names unknown case '{}'", o.case)),
                (Some(names), Some(n)) if !names.contains(n) => bad.push(format!(
                    "override names unknown output '{n}' of case '{}'",
                    o.case
                )),
                _ => {}
            }
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("{} manifest: {}", self.backend, bad.join("; ")))
        }
    }

    /// One line: what the backend may deviate in.
    pub fn summary(&self) -> String {
        let mut parts = vec![];
        if self.reassociate_reductions {
            parts.push("reassociate_reductions".to_string());
        }
        if self.reassociate_allreduce {
            parts.push("reassociate_allreduce".to_string());
        }
        if !self.flush_subnormals.is_empty() {
            let d: Vec<&str> = self.flush_subnormals.iter().map(|d| d.name()).collect();
            parts.push(format!("flush_subnormals [{}]", d.join(", ")));
        }
        if self.contract_mul_add {
            parts.push("contract_mul_add".to_string());
        }
        if self.nan_bits == NanPolicy::Any {
            parts.push("nan_bits any".to_string());
        }
        for (op, per) in &self.ulp {
            for (dt, n) in per {
                if *n > 0 {
                    parts.push(format!("ulp {op} {dt} ≤ {n}"));
                }
            }
        }
        if parts.is_empty() {
            format!("the {} manifest allows no deviation", self.backend)
        } else {
            format!("the {} manifest allows: {}", self.backend, parts.join(", "))
        }
    }
}
