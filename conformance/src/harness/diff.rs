//! `uopkit diff`: the interpreted stages, then the rendered stage on a backend.

use super::{judge, Verdict};
use crate::allowances::Allowances;
use crate::backends::Backend;
use crate::case::Case;

/// `uopkit diff`: the interpreted stages (`stages::diff`), then the rendered stage on
/// `backend` (judged like a trial), pinning the first stage that differs from the oracle.
pub fn diff(
    case: &Case,
    name: &str,
    backend: Option<(&dyn Backend, &Allowances)>,
) -> Result<crate::stages::DiffReport, crate::stages::DiffError> {
    let mut report = crate::stages::diff(case)?;
    if let Some((b, allow)) = backend {
        let stage = format!("rendered: {}", b.name());
        let difference = match judge(case, name, b, allow) {
            Verdict::Pass | Verdict::Allowed(_) => None,
            Verdict::Skip(r) => Some(format!("skipped: {r}")),
            other => Some(other.detail().unwrap_or_default().to_string()),
        };
        if let (Some(d), None) = (&difference, &report.first) {
            report.first = Some(format!(
                "first difference at stage '{stage}': the interpreted kernels agree with the oracle, so the rendered code or the runtime differs\n{d}"
            ));
            report.trace = Some(crate::pass_trace::TraceSection::NotARewritePass {
                stage: stage.clone(),
            });
        }
        report
            .stages
            .push(crate::stages::StageResult { stage, difference });
    }
    Ok(report)
}
