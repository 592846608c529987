//! Bit-for-bit comparison of a compiled output with the expected bits (the oracle's value or
//! a reference's). No tolerance of any kind: one differing bit is a mismatch.

use uopkit_interp::eval::{Elem, Value};

/// The oracle's value as bits, or the first element it left unwritten.
pub fn bits_of(v: &Value) -> Result<Vec<u64>, String> {
    let comps = v.data.components();
    if comps.len() != 1 {
        return Err(format!("{} device components, expected 1", comps.len()));
    }
    comps[0]
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            Elem::Bits(b) => Ok(*b),
            Elem::Uninit { .. } => Err(format!("element {i} is uninitialized")),
        })
        .collect()
}

/// The first element where `got` differs from `want` (or a length/poison problem), as a
/// message naming the element and both bit patterns; None when every bit agrees.
pub fn first_difference(got: &Value, want: &[u64]) -> Option<String> {
    let g = match bits_of(got) {
        Ok(g) => g,
        Err(e) => return Some(e),
    };
    if g.len() != want.len() {
        return Some(format!("{} elements, expected {}", g.len(), want.len()));
    }
    g.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .map(|i| format!("element {i}: got bits {:#x}, expected {:#x}", g[i], want[i]))
}
