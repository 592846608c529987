//! Initial buffer contents from a case's `inputs` (literals, fills, aranges, seeded PRNG).

use uopkit_interp::eval::{Column, Words};
use uopkit_interp::ir::{DType, NodeId, Op};
use uopkit_interp::scalar::{self, literal, round};

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
    if is_uninit(init)? {
        return Ok(vec![None; size]);
    }
    let mut out = Vec::with_capacity(size);
    each_bits(init, dt, size, &mut |b| out.push(Some(b)))?;
    Ok(out)
}

/// [`component`] in the oracle's compact form, built without the element list (4 bytes per
/// element of a dtype of up to 32 bits): an unwritten element is poison from element i of
/// `buffer`, as the evaluator makes it from a [`component`]'s None.
pub fn column(init: &Init, dt: DType, size: usize, buffer: NodeId) -> Result<Column, String> {
    if is_uninit(init)? {
        return Ok(Column::uninit(dt, buffer, size));
    }
    let mut w = Words::with_capacity(dt, size);
    each_bits(init, dt, size, &mut |b| w.push(b))?;
    Ok(Column::from_words(w))
}

/// Whether the contents are `{"uninit": true}`; the errors of the forms that give no
/// elements.
fn is_uninit(init: &Init) -> Result<bool, String> {
    match init {
        Init::Uninit(true) => Ok(true),
        Init::Uninit(false) => {
            Err("{\"uninit\": false} says nothing: give data, fill, arange or prng".into())
        }
        Init::PerDevice(_) => Err("per_device may only appear at the top of an input".into()),
        _ => Ok(false),
    }
}

/// Calls `push` with the bits of each of the `size` elements of a defined initial contents
/// (data, fill, arange, prng), in order; stops at the first error.
fn each_bits(init: &Init, dt: DType, size: usize, push: &mut dyn FnMut(u64)) -> Result<(), String> {
    match init {
        Init::Data(items) => {
            if items.len() != size {
                return Err(format!(
                    "data has {} elements, the buffer has {size}",
                    items.len()
                ));
            }
            for (i, v) in items.iter().enumerate() {
                push(literal::parse(dt, v).map_err(|e| format!("element {i}: {e}"))?);
            }
        }
        Init::Fill(v) => {
            let b = literal::parse(dt, v)?;
            for _ in 0..size {
                push(b);
            }
        }
        Init::Arange { start, step } => {
            let (start, step) = (literal::parse(dt, start)?, literal::parse(dt, step)?);
            if dt.is_float() {
                for i in 0..size {
                    push(exact_affine(dt, start, step, i)?);
                }
            } else {
                // Integers (and bool): start + i*step wraps, and so does every step of it.
                for i in 0..size {
                    let i = scalar::cast(DType::Int64, dt, i as u64)
                        .map_err(|e| format!("arange index {i}: {e}"))?;
                    push(
                        scalar::alu(Op::MULACC, dt, &[i, step, start])
                            .map_err(|e| format!("arange: {e}"))?,
                    );
                }
            }
        }
        Init::Prng { seed, lo, hi } => {
            if lo > hi {
                return Err(format!("prng range [{lo}, {hi}] is empty"));
            }
            // hi - lo + 1 may not fit i128 (or even u128, for the full range); a draw is
            // below 2^64, so a span that saturates is never reached by the modulo.
            let span = hi.abs_diff(*lo).saturating_add(1);
            let mut rng = SplitMix64(*seed);
            for _ in 0..size {
                let r = u128::from(rng.next_u64()) % span;
                // r < span, so lo + r <= hi: it fits (checked all the same).
                let v = i128::try_from(r)
                    .ok()
                    .and_then(|r| lo.checked_add(r))
                    .ok_or_else(|| format!("prng range [{lo}, {hi}] overflows"))?;
                push(prng_value(dt, v)?);
            }
        }
        Init::Uninit(_) | Init::PerDevice(_) => {
            is_uninit(init)?;
            return Err("uninitialized contents have no bits".into());
        }
    }
    Ok(())
}

/// A drawn integer in `dt`: it must be representable exactly (the format promises an exact
/// conversion).
fn prng_value(dt: DType, v: i128) -> Result<u64, String> {
    let bits = scalar::cast::from_i128(dt, v);
    let back = if dt.is_float() {
        round::to_f64(dt, bits) as i128
    } else {
        scalar::cast::to_i128(dt, bits)
    };
    let fits = dt.int_range().is_none_or(|(lo, hi)| (lo..=hi).contains(&v));
    if fits && back == v {
        Ok(bits)
    } else {
        Err(format!("prng value {v} is not exactly representable in {dt} (choose lo and hi inside its exact range)"))
    }
}

/// `start + i·step` for float bits, computed exactly (as integers times a common power of
/// two) and rounded once to `dt`.
fn exact_affine(dt: DType, start: u64, step: u64, i: usize) -> Result<u64, String> {
    let (a, b) = (round::to_f64(dt, start), round::to_f64(dt, step));
    if !a.is_finite() || !b.is_finite() {
        // inf/NaN arithmetic is exact in f64 already, and rounding it changes nothing.
        return Ok(round::from_f64(dt, a + (i as f64) * b));
    }
    let parts = |x: f64| -> (i128, i32) {
        if x == 0.0 {
            return (0, 0);
        }
        let bits = x.to_bits();
        let (e, f) = (
            ((bits >> 52) & 0x7ff) as i32,
            (bits & ((1 << 52) - 1)) as i128,
        );
        let (m, e) = if e == 0 {
            (f, -1074)
        } else {
            (f | (1 << 52), e - 1075)
        };
        (if x < 0.0 { -m } else { m }, e)
    };
    let ((ma, ea), (mb, eb)) = (parts(a), parts(b));
    let mb = mb
        .checked_mul(i as i128)
        .ok_or("arange: index times step overflows")?;
    let e0 = ea.min(eb);
    let shift = |m: i128, e: i32| -> Option<i128> {
        let s = u32::try_from(e - e0).ok()?;
        if m == 0 {
            return Some(0);
        }
        (s < 126 && m.unsigned_abs().leading_zeros() > s + 1).then(|| m << s)
    };
    let sum = shift(ma, ea)
        .zip(shift(mb, eb))
        .and_then(|(x, y)| x.checked_add(y))
        .ok_or_else(|| {
            format!("arange: start {a} and step {b} are too far apart in magnitude to sum exactly")
        })?;
    let ff = dt.float_format().ok_or("arange: not a float dtype")?;
    if sum == 0 {
        // An exact zero sum is +0 (x + -x = +0 in round to nearest), unless both are -0.
        return Ok(
            if a == 0.0 && a.is_sign_negative() && (i == 0 || b == 0.0 && b.is_sign_negative()) {
                round::sign_mask(dt)
            } else {
                0
            },
        );
    }
    Ok(round::round_parts(
        ff,
        sum < 0,
        sum.unsigned_abs(),
        e0,
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arange_rounds_once_from_the_exact_value() {
        // bfloat16 257 * 1.5 = 385.5, which rounds to 386 (0x43c1); rounding 257 to bf16
        // first (256) would give 384.
        let init = Init::Arange {
            start: serde_json::json!(0),
            step: serde_json::json!("1.5"),
        };
        let v = component(&init, DType::BFloat16, 300).unwrap();
        assert_eq!(v[257], Some(0x43c1));
        // fp8e4m3: 17 * 3 = 51 rounds to 52 (0x65).
        let init = Init::Arange {
            start: serde_json::json!(0),
            step: serde_json::json!(3),
        };
        assert_eq!(
            component(&init, DType::Fp8E4M3, 18).unwrap()[17],
            Some(0x65)
        );
        // float32: exact small values and a negative step crossing zero (+0, not -0).
        let init = Init::Arange {
            start: serde_json::json!("1.5"),
            step: serde_json::json!("-0.75"),
        };
        let v = component(&init, DType::Float32, 4).unwrap();
        assert_eq!(
            v,
            vec![
                Some(0x3fc00000),
                Some(0x3f400000),
                Some(0),
                Some(0xbf400000)
            ]
        );
    }

    #[test]
    fn prng_ranges_at_the_ends_of_i128_do_not_overflow() {
        for (lo, hi) in [
            (i128::MIN, i128::MAX),
            (i128::MAX, i128::MAX),
            (i128::MIN, i128::MIN),
        ] {
            let init = Init::Prng { seed: 1, lo, hi };
            // Not representable in int64 (an error), but never a panic.
            assert!(component(&init, DType::Int64, 3).is_err());
        }
        let init = Init::Prng {
            seed: 1,
            lo: i128::MIN,
            hi: i128::MAX,
        };
        assert!(component(&init, DType::Int64, 0).unwrap().is_empty());
        let init = Init::Prng {
            seed: 7,
            lo: -1,
            hi: 1,
        };
        let v = component(&init, DType::Int8, 50).unwrap();
        assert!(v.iter().all(|x| matches!(x, Some(0 | 1 | 0xff))));
    }

    #[test]
    fn splitmix64_reference_values() {
        // First outputs for seed 0, as published with the algorithm (Vigna's splitmix64.c).
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
}
