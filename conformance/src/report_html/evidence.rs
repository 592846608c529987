//! What the HTML report shows about one failing trial beyond its message: the trial is judged
//! again (the run itself keeps only verdicts) to get the backend's outputs, each output is
//! compared with the oracle's element by element ([`compare::judge_outputs`]: a ULP-distance
//! histogram and the worst elements), and the node to highlight in the pictures is found —
//! the first diverging node `uopkit diff` pins (`stages::diff`, which runs the compiler's
//! interpreted stages), else the first output that differs.

use std::sync::Arc;

use uopkit_interp::ir::DType;
use uopkit_interp::scalar::literal;

use crate::allowances::Allowances;
use crate::backends::{Backend, Role};
use crate::case::Case;
use crate::compare::{self, Histogram, OutputDiff};
use crate::harness::{self, FailKind, Verdict};
use crate::run;

/// How many of the worst elements each output lists.
pub const WORST: usize = 5;

/// One output of the failing trial.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutputEvidence {
    pub name: String,
    /// The case-file node id.
    pub node: u64,
    /// `float32 [20]`.
    pub what: String,
    /// The comparison mode, as in text reports (`exact vs the oracle`).
    pub mode: String,
    pub differing: usize,
    pub total: usize,
    /// Against what the elements were compared: `oracle` or `expected`.
    pub against: &'static str,
    /// ULP distances over every element (None: not drawn for this mode or these values).
    pub histogram: Option<Histogram>,
    /// The worst elements, worst first.
    pub worst: Vec<Element>,
    /// Why the output could not be compared, when it could not.
    pub error: Option<String>,
}

/// One element that is not allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    /// `[3]`, or `device 1 [3]`.
    pub index: String,
    /// Value and bits: `3.0 (0x40400000)`.
    pub expected: String,
    pub actual: String,
    pub ulp: Option<u64>,
}

/// The trial's evidence.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// The outputs, in case order (empty when nothing was compared).
    pub outputs: Vec<OutputEvidence>,
    /// The case-file node id to draw in red.
    pub highlight: Option<u64>,
    /// Why that node.
    pub highlight_why: Option<String>,
    /// A note about the re-run (it came out differently, or could not give outputs).
    pub note: Option<String>,
}

/// Gathers the evidence of one failing trial of `case` (named `name`) on `backend`.
/// `verdict` is the run's verdict: only output mismatches and failed expectations are
/// re-run.
pub fn gather(
    case: Arc<Case>,
    name: &str,
    backend: Arc<dyn Backend>,
    allow: Arc<Allowances>,
    verdict: &Verdict,
) -> Evidence {
    let kind = match verdict {
        Verdict::Fail { kind, .. } => Some(*kind),
        _ => None,
    };
    if !matches!(kind, Some(FailKind::Mismatch | FailKind::Expectation)) {
        return Evidence::default();
    }
    let name = name.to_string();
    let job = move || {
        if backend.role() == Role::Reference {
            return oracle_evidence(&case);
        }
        backend_evidence(&case, &name, backend.as_ref(), &allow)
    };
    harness::on_big_stack(job).unwrap_or_else(|e| Evidence {
        note: Some(format!("the re-run for this report failed: {e}")),
        ..Evidence::default()
    })
}

/// What `uopkit diff`'s interpreted stages (`stages::diff`) say about a case.
#[derive(Clone, Debug, PartialEq)]
pub enum Divergence {
    /// Every interpreted stage agrees with the oracle.
    Agrees,
    /// The first stage that differs (its first line) and the node it is pinned to, if any.
    At { stage: String, node: Option<u64> },
    /// The stages could not be run.
    Unknown(String),
}

/// Runs the compiler's interpreted stages on `case` (on a thread with room for deep graphs).
pub fn divergence(case: Arc<Case>) -> Divergence {
    let job = move || match crate::stages::diff(&case) {
        Err(e) => Divergence::Unknown(e.to_string()),
        Ok(r) => match &r.first {
            None => Divergence::Agrees,
            Some(first) => Divergence::At {
                stage: first.lines().next().unwrap_or("").to_string(),
                node: r.node,
            },
        },
    };
    harness::on_big_stack(job).unwrap_or_else(Divergence::Unknown)
}

/// The oracle trial failed its expectations: the oracle's values against the case's literals.
fn oracle_evidence(case: &Case) -> Evidence {
    let oracle = match run::run_oracle(case) {
        Ok(o) => o,
        Err(e) => return noted(format!("the oracle fails on the re-run: {e}")),
    };
    let values = match run::output_values(case, &oracle) {
        Ok(v) => v,
        Err(e) => return noted(e.to_string()),
    };
    let outputs = case
        .outputs
        .iter()
        .zip(values)
        .map(|(out, v)| match compare::compare(out, v) {
            Ok(d) => {
                let hist = d.histogram.clone().or_else(|| exact_histogram(&d));
                from_diff(&d, out.node, hist)
            }
            Err(e) => errored(&out.name, out.node, e),
        })
        .collect();
    finish(outputs, "the case's expected values")
}

/// A backend trial: the backend's outputs against the oracle's.
fn backend_evidence(
    case: &Case,
    name: &str,
    backend: &dyn Backend,
    allow: &Allowances,
) -> Evidence {
    let (verdict, ran) = harness::judge_full(case, name, backend, allow);
    let Some(ran) = ran else {
        return noted(format!(
            "the re-run for this report gave no outputs ({}: {})",
            verdict.label(),
            verdict.detail().unwrap_or("").lines().next().unwrap_or("")
        ));
    };
    let oracle = match run::run_oracle(case) {
        Ok(o) => o,
        Err(e) => return noted(format!("the oracle fails on the re-run: {e}")),
    };
    let judged = match compare::judge_outputs(case, name, &oracle, &ran.outputs, allow) {
        Ok(j) => j,
        Err(e) => return noted(e),
    };
    let outputs = case
        .outputs
        .iter()
        .zip(judged)
        .map(|(out, j)| match j.diff {
            Ok(d) => from_diff(&d, out.node, j.distances),
            Err(e) => errored(&out.name, out.node, e),
        })
        .collect();
    let mut ev = finish(outputs, "the oracle");
    if matches!(verdict, Verdict::Pass | Verdict::Allowed(_)) {
        ev.note = Some(
            "the trial passed when re-run for this report: the backend is not deterministic?"
                .into(),
        );
    }
    ev
}

/// The highlight falls back to the first output that differs.
fn finish(outputs: Vec<OutputEvidence>, against: &str) -> Evidence {
    let first = outputs
        .iter()
        .find(|o| o.differing > 0 || o.error.is_some());
    Evidence {
        highlight: first.map(|o| o.node),
        highlight_why: first.map(|o| {
            format!(
                "node {}: output '{}', the first output that differs from {against}",
                o.node, o.name
            )
        }),
        outputs,
        note: None,
    }
}

fn noted(note: String) -> Evidence {
    Evidence {
        note: Some(note),
        ..Evidence::default()
    }
}

fn errored(name: &str, node: u64, e: String) -> OutputEvidence {
    OutputEvidence {
        name: name.to_string(),
        node,
        error: Some(e),
        ..OutputEvidence::default()
    }
}

/// For an `exact` comparison: the allowed elements have distance 0, the others their own.
fn exact_histogram(d: &OutputDiff) -> Option<Histogram> {
    if d.mode != crate::case::Compare::Exact {
        return None;
    }
    let mut h = Histogram::default();
    for _ in d.mismatches.len()..d.total {
        h.add(Some(0));
    }
    for m in &d.mismatches {
        h.add(m.ulp);
    }
    Some(h)
}

fn from_diff(d: &OutputDiff, node: u64, histogram: Option<Histogram>) -> OutputEvidence {
    let against = match d.reference {
        compare::Reference::Expected => "expected",
        compare::Reference::Oracle => "oracle",
    };
    let mode = match d.reference {
        compare::Reference::Oracle => format!("{} vs the oracle", d.mode.label()),
        compare::Reference::Expected => format!("{} vs the expected values", d.mode.label()),
    };
    OutputEvidence {
        name: d.name.clone(),
        node,
        what: format!("{} {:?}", d.dtype, d.shape),
        mode,
        differing: d.mismatches.len(),
        total: d.total,
        against,
        histogram,
        worst: d
            .worst()
            .into_iter()
            .take(WORST)
            .map(|m| Element {
                index: if d.components > 1 {
                    format!("device {} {:?}", m.component, m.index)
                } else {
                    format!("{:?}", m.index)
                },
                expected: value(d.dtype, m.expected),
                actual: value(d.dtype, m.actual),
                ulp: m.ulp,
            })
            .collect(),
        error: None,
    }
}

fn value(dt: DType, bits: u64) -> String {
    let w = (dt.bits() as usize).div_ceil(4);
    format!("{} (0x{:0w$x})", literal::display(dt, bits), bits, w = w)
}
