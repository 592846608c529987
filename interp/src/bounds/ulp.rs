//! The ordered line of a dtype: units in the last place as integer distances.
//!
//! A float's **ordinal** is its position on the line of its format's values in numeric order:
//! `+0` and `−0` are both 0, the smallest positive subnormal is 1, each next larger value adds 1,
//! negative values mirror the positive ones, and ±inf (where the format has them) sit one step
//! beyond ±max finite. NaN has no ordinal. The ULP distance of two non-NaN values is the
//! difference of their ordinals: adjacent values are 1 apart, `−0` and `+0` are 0 apart, the
//! smallest subnormals of opposite signs are 2 apart, `max` and `inf` are 1 apart. Integer and
//! bool dtypes use their integer value as the ordinal (one unit = 1).

use crate::ir::DType;
use crate::scalar::cast::to_i128;
use crate::scalar::round::{from_f64, is_nan, sign_mask, to_f64};

/// The ordinal of `bits` on `dt`'s line; None for a NaN.
pub fn ordinal(dt: DType, bits: u64) -> Option<i128> {
    if dt.float_format().is_none() {
        return Some(to_i128(dt, bits));
    }
    if is_nan(dt, bits) {
        return None;
    }
    let s = sign_mask(dt);
    let mag = (bits & (s - 1)) as i128;
    Some(if bits & s != 0 { -mag } else { mag })
}

/// The largest ordinal of a float dtype: +inf, or +max finite for fp8e4m3 (no infinity).
pub fn max_ordinal(dt: DType) -> i128 {
    match dt.float_format() {
        Some(ff) => {
            let exp_all = ((1u64 << ff.exp_bits) - 1) << ff.man_bits;
            if ff.has_inf {
                exp_all as i128
            } else {
                (exp_all | ((1u64 << ff.man_bits) - 2)) as i128
            }
        }
        None => dt.int_range().map_or(0, |(_, hi)| hi),
    }
}

/// The bits at ordinal `k` (clamped to the line's ends). For floats, ordinal 0 is `+0`.
pub fn from_ordinal(dt: DType, k: i128) -> u64 {
    match dt.float_format() {
        Some(_) => {
            let m = max_ordinal(dt);
            let k = k.clamp(-m, m);
            if k < 0 {
                sign_mask(dt) | (-k) as u64
            } else {
                k as u64
            }
        }
        None => {
            let (lo, hi) = dt.int_range().unwrap_or((0, 0));
            crate::scalar::cast::wrap_i128(dt, k.clamp(lo, hi))
        }
    }
}

/// ULP distance between two elements of `dt`; None when exactly one of them is a NaN, or both
/// are (NaN has no place on the line; NaN policies are the caller's business).
pub fn distance(dt: DType, a: u64, b: u64) -> Option<u64> {
    let (x, y) = (ordinal(dt, a)?, ordinal(dt, b)?);
    Some(u64::try_from((x - y).unsigned_abs()).unwrap_or(u64::MAX))
}

/// The value `n` steps from `bits` along the line (negative `n` goes down), clamped at the ends.
/// A NaN stays itself.
pub fn step(dt: DType, bits: u64, n: i128) -> u64 {
    match ordinal(dt, bits) {
        Some(k) => from_ordinal(dt, k.saturating_add(n)),
        None => bits,
    }
}

/// The largest value of `dt` that is ≤ `x`, as an f64; `-inf` when there is none (below the
/// lowest value of fp8e4m3) or when `x` is `-inf`. `x` must not be NaN.
pub fn round_down(dt: DType, x: f64) -> f64 {
    if x.is_infinite() || dt == DType::Float64 {
        return x;
    }
    let b = from_f64(dt, x);
    if is_nan(dt, b) {
        // Only fp8e4m3 maps a (finite, huge) value to NaN through from_f64's infinity rule.
        return if x > 0.0 {
            to_f64(dt, from_ordinal(dt, max_ordinal(dt)))
        } else {
            f64::NEG_INFINITY
        };
    }
    let v = to_f64(dt, b);
    if v <= x {
        return v;
    }
    let k = ordinal(dt, b).unwrap_or(0);
    if k <= -max_ordinal(dt) {
        return f64::NEG_INFINITY;
    }
    to_f64(dt, from_ordinal(dt, k - 1))
}

/// The smallest value of `dt` that is ≥ `x`, as an f64; `+inf` when there is none.
pub fn round_up(dt: DType, x: f64) -> f64 {
    -round_down(dt, -x)
}

/// The value `n` steps below (n < 0) or above (n > 0) the real `x` on `dt`'s line: for n ≤ 0
/// starts at [`round_down`], for n > 0 at [`round_up`]. Returns ±inf when it runs off the line.
pub fn step_real(dt: DType, x: f64, n: i128) -> f64 {
    if n == 0 {
        return x;
    }
    let start = if n < 0 {
        round_down(dt, x)
    } else {
        round_up(dt, x)
    };
    let has_inf = dt.float_format().is_some_and(|f| f.has_inf);
    if start.is_infinite() && (!has_inf || (start > 0.0) == (n > 0)) {
        // Already beyond the line's end in the direction of travel (or off a line without ±inf).
        return start;
    }
    let k = ordinal(dt, from_f64(dt, start)).unwrap_or(0) + n;
    let m = max_ordinal(dt);
    if k > m {
        f64::INFINITY
    } else if k < -m {
        f64::NEG_INFINITY
    } else {
        to_f64(dt, from_ordinal(dt, k))
    }
}

/// The smallest positive normal value of a float dtype (subnormals lie strictly below it).
pub fn min_normal(dt: DType) -> f64 {
    match dt.float_format() {
        Some(ff) => {
            let bias = (1i32 << (ff.exp_bits - 1)) - 1;
            2f64.powi(1 - bias)
        }
        None => 0.0,
    }
}

/// The largest finite value of a float dtype.
pub fn max_finite(dt: DType) -> f64 {
    match dt.float_format() {
        Some(ff) if ff.has_inf => to_f64(dt, from_ordinal(dt, max_ordinal(dt) - 1)),
        Some(_) => to_f64(dt, from_ordinal(dt, max_ordinal(dt))),
        None => 0.0,
    }
}

/// The unit roundoff u = 2^−p of a float dtype (p = mantissa bits + 1).
pub fn unit_roundoff(dt: DType) -> f64 {
    dt.float_format()
        .map_or(0.0, |ff| 2f64.powi(-(ff.man_bits as i32 + 1)))
}

/// Whether `bits` is a nonzero subnormal of the float dtype `dt`.
pub fn is_subnormal(dt: DType, bits: u64) -> bool {
    let Some(ff) = dt.float_format() else {
        return false;
    };
    let exp = (bits >> ff.man_bits) & ((1u64 << ff.exp_bits) - 1);
    let man = bits & ((1u64 << ff.man_bits) - 1);
    exp == 0 && man != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_basics() {
        let f = DType::Float32;
        assert_eq!(distance(f, 0x0000_0000, 0x8000_0000), Some(0));
        assert_eq!(distance(f, 0x3f80_0000, 0x3f80_0001), Some(1));
        assert_eq!(distance(f, 0x0000_0001, 0x8000_0001), Some(2));
        assert_eq!(distance(f, 0x7f7f_ffff, 0x7f80_0000), Some(1));
        assert_eq!(distance(f, 0x7fc0_0000, 0x3f80_0000), None);
        assert_eq!(step(f, 0x0000_0000, -1), 0x8000_0001);
        assert_eq!(step(f, 0x7f80_0000, 5), 0x7f80_0000);
        // 0.1f32 is just above 0.1
        assert_eq!(round_up(f, 0.1), 0.1f32 as f64);
        assert_eq!(
            round_down(f, 0.1),
            f32::from_bits(0.1f32.to_bits() - 1) as f64
        );
        assert_eq!(round_down(f, 1.0), 1.0);
        assert_eq!(round_down(f, -1e39), f64::NEG_INFINITY);
        assert_eq!(round_up(f, -1e39), -f32::MAX as f64);
        assert_eq!(round_down(f, 1e39), f32::MAX as f64);
        assert_eq!(round_down(DType::Fp8E4M3, -1000.0), f64::NEG_INFINITY);
        assert_eq!(round_down(DType::Fp8E4M3, 1000.0), 448.0);
        assert_eq!(step_real(f, 1.0, 1), f32::from_bits(0x3f80_0001) as f64);
        assert_eq!(step_real(f, 1.0, -1), f32::from_bits(0x3f7f_ffff) as f64);
        assert_eq!(
            step_real(f, f64::INFINITY, -2),
            f32::from_bits(0x7f7f_fffe) as f64
        );
        assert_eq!(step_real(f, f64::INFINITY, 2), f64::INFINITY);
        assert_eq!(step_real(f, f64::NEG_INFINITY, 1), -f32::MAX as f64);
        assert_eq!(step_real(DType::Float64, f64::INFINITY, -1), f64::MAX);
        assert_eq!(max_finite(DType::Float16), 65504.0);
        assert_eq!(max_finite(DType::Fp8E4M3), 448.0);
        assert_eq!(min_normal(DType::Float32), f32::MIN_POSITIVE as f64);
        assert_eq!(distance(DType::Int8, 0x80, 0x7f), Some(255));
    }
}
