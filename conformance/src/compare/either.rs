//! The alternatives of `either` / `either_output` outputs, parsed like `expect`.

use serde_json::Value as Json;
use uopkit_interp::ir::DType;
use uopkit_interp::scalar::literal;

use super::Alternatives;
use crate::case::{Compare, Output};

/// The alternatives of `mode` for `out` (empty for the other modes). Each alternative has
/// `expect`'s structure; a `null` element means "no alternative here" (`either`) or "as in
/// `expect`" (`either_output`).
pub(super) fn alternatives(
    out: &Output,
    mode: &Compare,
    dt: DType,
    multi: Option<usize>,
) -> Result<Alternatives, String> {
    let list = match mode {
        Compare::Either(l) | Compare::EitherOutput(l) => l,
        _ => return Ok(vec![]),
    };
    let numel: usize = out.shape.iter().product();
    let parse_list = |k: usize, v: &Json| -> Result<Vec<Option<u64>>, String> {
        let arr = v.as_array().ok_or_else(|| {
            format!("alternative {k}: expected a list of {numel} literals, found {v}")
        })?;
        if arr.len() != numel {
            return Err(format!(
                "alternative {k} has {} elements, shape {:?} has {numel}",
                arr.len(),
                out.shape
            ));
        }
        arr.iter()
            .enumerate()
            .map(|(i, x)| {
                if x.is_null() {
                    Ok(None)
                } else {
                    literal::parse(dt, x)
                        .map(Some)
                        .map_err(|e| format!("alternative {k} element {i}: {e}"))
                }
            })
            .collect()
    };
    list.iter()
        .enumerate()
        .map(|(k, alt)| match multi {
            None => Ok(vec![parse_list(k, alt)?]),
            Some(ndev) => {
                let arr = alt
                    .as_array()
                    .filter(|a| a.len() == ndev && a.iter().all(|x| x.is_array()))
                    .ok_or_else(|| format!("alternative {k}: a multi-device output needs one list per device ({ndev} lists)"))?;
                arr.iter().map(|c| parse_list(k, c)).collect()
            }
        })
        .collect::<Result<_, String>>()
        .map_err(|e| format!("output '{}': {e}", out.name))
}
