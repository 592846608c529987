//! Running a case through the oracle and judging the result against the case's
//! expectations (outputs, or the error it must raise).

use uopkit_interp::eval::{self, Column, Compact, Elem, Evaluation, Value};
use uopkit_interp::ir::{Graph, NodeId};
use uopkit_interp::scalar::literal;
use uopkit_interp::verify::Verified;
use uopkit_interp::Error as OracleError;

use crate::case::{Case, ErrorKind, ExpectError};
use crate::compare::{self, OutputDiff};
use crate::load::{self, LoadError, Loaded};

/// A case evaluated by the oracle.
pub struct OracleRun {
    pub loaded: Loaded,
    pub verified: Verified,
    pub evaluation: Evaluation,
}

impl OracleRun {
    pub fn graph(&self) -> &Graph {
        &self.loaded.graph
    }
}

/// Why running a case failed before any comparison.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Load(#[from] LoadError),
    /// The oracle stopped (undefined behaviour or an evaluation error); ids are case-file ids.
    /// No prefix: whoever prints it says that the oracle stopped (`uopkit run`'s `oracle: `,
    /// the trial name `oracle::…`, `the oracle failed: `).
    #[error("{0}")]
    Oracle(OracleError),
    #[error("{0}")]
    Output(String),
}

/// Loads, verifies and evaluates a case; the roots are its outputs.
pub fn run_oracle(case: &Case) -> Result<OracleRun, RunError> {
    let (loaded, verified) = load::load(case)?;
    let roots = output_nodes(case, &loaded)?;
    let evaluation = eval::evaluate(&loaded.graph, &verified, &loaded.inputs, &roots)
        .map_err(|e| RunError::Oracle(loaded.file_error(e)))?;
    // Outputs are observable: an uninitialized element there is undefined behaviour.
    for &r in &roots {
        evaluation
            .output(&loaded.graph, r)
            .map_err(|e| RunError::Oracle(loaded.file_error(e)))?;
    }
    Ok(OracleRun {
        loaded,
        verified,
        evaluation,
    })
}

/// [`run_oracle`] with the inputs materialized straight into the oracle's compact form and
/// moved into the evaluation ([`load::load_compact`], [`eval::evaluate_columns`]), so that
/// no element list of the inputs is kept: the oracle path of `uopkit run` and
/// [`check_oracle`]. The run's `loaded.inputs` is empty (a backend that needs the inputs as
/// [`uopkit_interp::eval::BufferInit`]s takes a [`run_oracle`] run). The same values and the
/// same errors as [`run_oracle`].
pub fn run_oracle_compact(case: &Case) -> Result<OracleRun, RunError> {
    let (loaded, verified, columns) = load::load_compact(case)?;
    let roots = output_nodes(case, &loaded)?;
    let evaluation = eval::evaluate_columns(
        &loaded.graph,
        &verified,
        columns,
        &roots,
        &eval::Options::default(),
    )
    .map_err(|e| RunError::Oracle(loaded.file_error(e)))?;
    for &r in &roots {
        evaluation
            .output_compact(&loaded.graph, r)
            .map_err(|e| RunError::Oracle(loaded.file_error(e)))?;
    }
    Ok(OracleRun {
        loaded,
        verified,
        evaluation,
    })
}

fn output_nodes(case: &Case, loaded: &Loaded) -> Result<Vec<NodeId>, RunError> {
    case.outputs
        .iter()
        .map(|o| {
            loaded
                .arena(o.node)
                .map_err(|e| RunError::Output(format!("output '{}': {e}", o.name)))
        })
        .collect()
}

/// The value of each output, in the case's order.
pub fn output_values<'a>(case: &Case, run: &'a OracleRun) -> Result<Vec<&'a Value>, RunError> {
    output_nodes(case, &run.loaded)?
        .into_iter()
        .map(|id| {
            run.evaluation
                .output(run.graph(), id)
                .map_err(|e| RunError::Oracle(run.loaded.file_error(e)))
        })
        .collect()
}

/// The value of each output in the oracle's compact form, in the case's order (no copy).
pub fn output_compacts<'a>(case: &Case, run: &'a OracleRun) -> Result<Vec<&'a Compact>, RunError> {
    output_nodes(case, &run.loaded)?
        .into_iter()
        .map(|id| {
            run.evaluation
                .output_compact(run.graph(), id)
                .map_err(|e| RunError::Oracle(run.loaded.file_error(e)))
        })
        .collect()
}

/// Writes an output as `uopkit run` prints it: `NAME: DTYPE [SHAPE] = [e0, e1, …]` (one line
/// per device for a multi-device value, `?` for an element never written), element by
/// element from the compact form (no list of the elements or of their texts is built).
pub fn write_output(w: &mut impl std::io::Write, name: &str, v: &Compact) -> std::io::Result<()> {
    let comp = |w: &mut dyn std::io::Write, c: &Column| -> std::io::Result<()> {
        w.write_all(b"[")?;
        for i in 0..c.len() {
            if i > 0 {
                w.write_all(b", ")?;
            }
            match c.get(i) {
                Elem::Bits(b) => w.write_all(literal::display(v.dtype, b).as_bytes())?,
                Elem::Uninit { .. } => w.write_all(b"?")?,
            }
        }
        w.write_all(b"]")
    };
    if v.multi {
        writeln!(
            w,
            "{name}: {} {:?} on {} devices",
            v.dtype,
            v.shape,
            v.comps.len()
        )?;
        for (i, c) in v.comps.iter().enumerate() {
            write!(w, "  device {i}: ")?;
            comp(w, c)?;
            writeln!(w)?;
        }
    } else {
        write!(w, "{name}: {} {:?} = ", v.dtype, v.shape)?;
        comp(w, v.comps.first().map_or(&Column::default(), |c| c))?;
        writeln!(w)?;
    }
    Ok(())
}

/// Runs a case through the oracle and checks it: Ok with one diff per output (all passing)
/// or Err with a report of what went wrong. (Through [`run_oracle_compact`].)
pub fn check_oracle(case: &Case) -> Result<Vec<OutputDiff>, String> {
    judge_oracle(case, &run_oracle_compact(case))
}

/// Judges an oracle run (or its failure) against the case's expectations, like
/// [`check_oracle`] without evaluating again.
pub fn judge_oracle(
    case: &Case,
    result: &Result<OracleRun, RunError>,
) -> Result<Vec<OutputDiff>, String> {
    match (&case.expect_error, result) {
        (Some(want), Ok(_)) => Err(format!(
            "expected an error ({}) but the oracle produced the outputs",
            describe_expected(want)
        )),
        (Some(want), Err(got)) => match_error(want, got).map(|_| vec![]),
        (None, Err(e)) => Err(e.to_string()),
        (None, Ok(run)) => {
            // From the compact form: the outputs' public form is not built to judge them.
            let values = output_compacts(case, run).map_err(|e| e.to_string())?;
            let mut diffs = vec![];
            let mut report = String::new();
            for (out, v) in case.outputs.iter().zip(values) {
                let d = compare::compare_compact(out, v)?;
                if !d.passed() {
                    report += &d.report(8);
                }
                diffs.push(d);
            }
            if report.is_empty() {
                Ok(diffs)
            } else {
                Err(report)
            }
        }
    }
}

fn describe_expected(want: &ExpectError) -> String {
    let mut s = match want.kind {
        ErrorKind::Ub => format!(
            "ub {}",
            want.ub.map(|u| u.describe()).unwrap_or("of any kind")
        ),
        ErrorKind::Verify => "verifier rejection".to_string(),
    };
    if let Some(n) = want.node {
        s += &format!(" at node {n}");
    }
    if let Some(e) = want.element {
        s += &format!(", element {e}");
    }
    s
}

/// Whether the error `got` is the one the case expects.
pub fn match_error(want: &ExpectError, got: &RunError) -> Result<(), String> {
    let mismatch = || format!("expected {}, got: {got}", describe_expected(want));
    let text = got.to_string();
    if let Some(c) = &want.contains {
        if !text.contains(c.as_str()) {
            return Err(format!("{} (message does not contain '{c}')", mismatch()));
        }
    }
    match (want.kind, got) {
        (
            ErrorKind::Ub,
            RunError::Oracle(OracleError::Ub {
                node,
                element,
                kind,
                ..
            }),
        ) => {
            let ok = want.ub.is_none_or(|u| u == *kind)
                && want.node.is_none_or(|n| n == u64::from(node.0))
                && want.element.is_none_or(|e| e == *element);
            if ok {
                Ok(())
            } else {
                Err(mismatch())
            }
        }
        (ErrorKind::Verify, RunError::Load(LoadError::Verify(e))) => {
            if want.node.is_none_or(|n| n == u64::from(e.node().0)) {
                Ok(())
            } else {
                Err(mismatch())
            }
        }
        (ErrorKind::Verify, RunError::Load(LoadError::Case(e))) => {
            if want.node.is_none_or(|n| Some(n) == e.node) {
                Ok(())
            } else {
                Err(mismatch())
            }
        }
        _ => Err(mismatch()),
    }
}
