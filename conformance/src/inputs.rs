//! Initial buffer contents from a case's `inputs` (literals, fills, aranges, seeded PRNG).

use uopkit_interp::ir::{DType, Op};
use uopkit_interp::scalar::{self, literal};

use crate::case::Init;

/// SplitMix64, the documented generator behind `{"prng": …}` inputs.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One device component of a buffer's initial contents: `size` elements, None = unwritten.
pub fn component(init: &Init, dt: DType, size: usize) -> Result<Vec<Option<u64>>, String> {
    Ok(match init {
        Init::Data(items) => {
            if items.len() != size {
                return Err(format!(
                    "data has {} elements, the buffer has {size}",
                    items.len()
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    literal::parse(dt, v)
                        .map(Some)
                        .map_err(|e| format!("element {i}: {e}"))
                })
                .collect::<Result<_, _>>()?
        }
        Init::Fill(v) => vec![Some(literal::parse(dt, v)?); size],
        Init::Arange { start, step } => {
            let (start, step) = (literal::parse(dt, start)?, literal::parse(dt, step)?);
            // start + i*step with one rounding: MULACC(i, step, start), i converted exactly.
            (0..size)
                .map(|i| {
                    let i = scalar::cast(DType::Int64, dt, i as u64)
                        .map_err(|e| format!("arange index {i}: {e}"))?;
                    scalar::alu(Op::MULACC, dt, &[i, step, start])
                        .map(Some)
                        .map_err(|e| format!("arange: {e}"))
                })
                .collect::<Result<_, String>>()?
        }
        Init::Prng { seed, lo, hi } => {
            if lo > hi {
                return Err(format!("prng range [{lo}, {hi}] is empty"));
            }
            let span = (*hi as i128 - *lo as i128 + 1) as u128;
            let mut rng = SplitMix64(*seed);
            (0..size)
                .map(|_| {
                    let v = *lo as i128 + (rng.next_u64() as u128 % span) as i128;
                    literal::parse(dt, &serde_json::Value::from(v as i64)).map(Some)
                })
                .collect::<Result<_, _>>()?
        }
        Init::Uninit(_) => vec![None; size],
        Init::PerDevice(_) => {
            return Err("per_device may only appear at the top of an input".into())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // First outputs for seed 0, as published with the algorithm (Vigna's splitmix64.c).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
}
