//! Comparing a computed value with a case's expected literals. `exact` means the same bits
//! (+0 and −0 differ); the NaN policy says whether NaN payloads matter.

use serde_json::Value as Json;
use uopkit_interp::eval::{Data, Elem, Value};
use uopkit_interp::ir::DType;
use uopkit_interp::scalar::{literal, round};

use crate::case::{NanPolicy, Output};

/// One element that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Device component (0 for a single-device value).
    pub component: usize,
    pub index: Vec<usize>,
    pub expected: u64,
    pub actual: u64,
}

/// The result of comparing one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputDiff {
    pub name: String,
    pub dtype: DType,
    pub total: usize,
    /// Number of device components (1 for a single-device value).
    pub components: usize,
    pub mismatches: Vec<Mismatch>,
}

/// Expected bits per component, parsed from the output's literals.
pub fn expected_bits(
    out: &Output,
    dt: DType,
    multi: Option<usize>,
) -> Result<Vec<Vec<u64>>, String> {
    let numel: usize = out.shape.iter().product();
    let parse_list = |v: &Json| -> Result<Vec<u64>, String> {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("expected a list of {numel} literals, found {v}"))?;
        if arr.len() != numel {
            return Err(format!(
                "expect has {} elements, shape {:?} has {numel}",
                arr.len(),
                out.shape
            ));
        }
        arr.iter()
            .enumerate()
            .map(|(i, x)| literal::parse(dt, x).map_err(|e| format!("expect element {i}: {e}")))
            .collect()
    };
    match multi {
        None => Ok(vec![parse_list(&out.expect)?]),
        Some(ndev) => {
            let arr = out
                .expect
                .as_array()
                .filter(|a| a.len() == ndev && a.iter().all(|x| x.is_array()))
                .ok_or_else(|| {
                    format!("a multi-device output expects one list per device ({ndev} lists)")
                })?;
            arr.iter().map(parse_list).collect()
        }
    }
}

fn is_nan(dt: DType, bits: u64) -> bool {
    dt.is_float() && round::to_f64(dt, bits).is_nan()
}

/// Compares `value` with the output's expectation.
pub fn compare(out: &Output, value: &Value) -> Result<OutputDiff, String> {
    if value.shape != out.shape {
        return Err(format!(
            "output '{}': the case says shape {:?}, the node has shape {:?}",
            out.name, out.shape, value.shape
        ));
    }
    let multi = match &value.data {
        Data::Multi(c) => Some(c.len()),
        Data::Single(_) => None,
    };
    let expected = expected_bits(out, value.dtype, multi)
        .map_err(|e| format!("output '{}': {e}", out.name))?;
    let mut mismatches = vec![];
    let mut total = 0;
    for (c, (exp, act)) in expected.iter().zip(value.data.components()).enumerate() {
        total += exp.len();
        for (i, (&e, a)) in exp.iter().zip(act).enumerate() {
            let a = match *a {
                Elem::Bits(b) => b,
                Elem::Uninit { .. } => {
                    return Err(format!(
                        "output '{}' element {i} was never written",
                        out.name
                    ))
                }
            };
            let same = e == a
                || (out.nan == NanPolicy::Any && is_nan(value.dtype, e) && is_nan(value.dtype, a));
            if !same {
                mismatches.push(Mismatch {
                    component: c,
                    index: unravel(i, &out.shape),
                    expected: e,
                    actual: a,
                });
            }
        }
    }
    Ok(OutputDiff {
        name: out.name.clone(),
        dtype: value.dtype,
        total,
        components: expected.len(),
        mismatches,
    })
}

/// Compares a backend's value with the oracle's, under the output's policy.
pub fn compare_values(out: &Output, oracle: &Value, actual: &Value) -> Result<OutputDiff, String> {
    if oracle.shape != actual.shape || oracle.dtype != actual.dtype {
        return Err(format!(
            "output '{}': the oracle gives {} {:?}, the backend {} {:?}",
            out.name, oracle.dtype, oracle.shape, actual.dtype, actual.shape
        ));
    }
    let mut mismatches = vec![];
    let mut total = 0;
    let (ocomps, acomps) = (oracle.data.components(), actual.data.components());
    if ocomps.len() != acomps.len() {
        return Err(format!(
            "output '{}': {} device components from the oracle, {} from the backend",
            out.name,
            ocomps.len(),
            acomps.len()
        ));
    }
    for (c, (o, a)) in ocomps.iter().zip(acomps).enumerate() {
        total += o.len();
        for (i, (e, a)) in o.iter().zip(a).enumerate() {
            let (Elem::Bits(e), Elem::Bits(a)) = (*e, *a) else {
                return Err(format!("output '{}' element {i} is undefined", out.name));
            };
            let same = e == a
                || (out.nan == NanPolicy::Any
                    && is_nan(oracle.dtype, e)
                    && is_nan(oracle.dtype, a));
            if !same {
                mismatches.push(Mismatch {
                    component: c,
                    index: unravel(i, &oracle.shape),
                    expected: e,
                    actual: a,
                });
            }
        }
    }
    Ok(OutputDiff {
        name: out.name.clone(),
        dtype: oracle.dtype,
        total,
        components: ocomps.len(),
        mismatches,
    })
}

/// The multi-index of flat index `i` in `shape` (row-major).
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for ax in (0..shape.len()).rev() {
        if shape[ax] > 0 {
            idx[ax] = i % shape[ax];
            i /= shape[ax];
        }
    }
    idx
}

impl OutputDiff {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// The failure text: how many elements differ and the first few, with values and bits.
    pub fn report(&self, limit: usize) -> String {
        let hex_digits = (self.dtype.bits() as usize).div_ceil(4);
        let mut s = format!(
            "output '{}' ({}): {} of {} elements differ (exact)\n",
            self.name,
            self.dtype,
            self.mismatches.len(),
            self.total
        );
        for m in self.mismatches.iter().take(limit) {
            s += &format!(
                "  {}{:?}: expected {} (0x{:0w$x}), got {} (0x{:0w$x})\n",
                if self.components > 1 {
                    format!("device {} ", m.component)
                } else {
                    String::new()
                },
                m.index,
                literal::display(self.dtype, m.expected),
                m.expected,
                literal::display(self.dtype, m.actual),
                m.actual,
                w = hex_digits
            );
        }
        if self.mismatches.len() > limit {
            s += &format!("  … and {} more\n", self.mismatches.len() - limit);
        }
        s
    }
}
