//! CAST and BITCAST, plus the integer helpers the rest of the scalar module shares.

use super::round::{from_f64, round_parts, to_f64};
use super::Ub;
use crate::ir::DType;

/// The low `dt.bits()` bits set (0 for void).
pub fn mask(dt: DType) -> u64 {
    match dt.bits() {
        0 => 0,
        b if b >= 64 => u64::MAX,
        b => (1u64 << b) - 1,
    }
}

/// The integer value of int or bool bits: sign-extended for signed ints, zero-extended otherwise.
pub fn to_i128(dt: DType, bits: u64) -> i128 {
    let b = dt.bits();
    if dt.is_signed_int() {
        let sh = 64 - b;
        (((bits << sh) as i64) >> sh) as i128
    } else {
        (bits & mask(dt)) as i128
    }
}

/// An integer value wrapped into an int dtype (two's complement modulo 2^bits); for bool,
/// `v != 0` (Python's `bool(x)`).
pub fn wrap_i128(dt: DType, v: i128) -> u64 {
    if dt.is_bool() {
        (v != 0) as u64
    } else {
        (v as u64) & mask(dt)
    }
}

/// An integer value converted into any dtype: rounded once for floats (to nearest, ties to
/// even, exactly from the integer, so there is no double rounding through f64), wrapped for
/// ints, `v != 0` for bool.
pub fn from_i128(dt: DType, v: i128) -> u64 {
    match dt.float_format() {
        Some(ff) => round_parts(ff, v < 0, v.unsigned_abs(), 0, false),
        None => wrap_i128(dt, v),
    }
}

/// CAST `bits` of `from` to `to`.
///
/// * int→int wraps; bool→x gives 0/1; x→bool is `x != 0` (NaN is true, −0 is false).
/// * int→float and float→float round once (to nearest, ties to even; NaN becomes the
///   canonical quiet NaN of `to` keeping its sign).
/// * float→int truncates toward zero; NaN, ±inf, or a truncated value outside `to`'s range
///   is [`Ub::FloatToIntOutOfRange`].
/// * A cast to the same dtype returns the bits unchanged.
pub fn cast(from: DType, to: DType, bits: u64) -> Result<u64, Ub> {
    let bits = bits & mask(from);
    if from == DType::Void || to == DType::Void {
        return Ok(0);
    }
    if from == to {
        return Ok(bits);
    }
    if !from.is_float() {
        return Ok(from_i128(to, to_i128(from, bits)));
    }
    let x = to_f64(from, bits);
    if to.is_float() {
        return Ok(from_f64(to, x));
    }
    if to.is_bool() {
        return Ok((x != 0.0) as u64);
    }
    let Some((lo, hi)) = to.int_range() else {
        return Ok(0);
    };
    let t = x.trunc();
    // lo is 0 or -2^(n-1) and hi + 1 is 2^n or 2^(n-1): both exact in f64, so the range
    // test is exact. NaN and ±inf fail it too.
    if !(t >= lo as f64 && t < (hi + 1) as f64) {
        return Err(Ub::FloatToIntOutOfRange);
    }
    Ok(wrap_i128(to, t as i128))
}

/// BITCAST: reinterpret the bits between two dtypes of the same width. `None` when the widths
/// differ or either dtype is bool or void.
pub fn bitcast(from: DType, to: DType, bits: u64) -> Option<u64> {
    let bad = |d: DType| d.is_bool() || d == DType::Void;
    if bad(from) || bad(to) || from.bits() != to.bits() {
        return None;
    }
    Some(bits & mask(from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scalar::round::canonical_nan;
    use DType::*;

    fn f32b(x: f32) -> u64 {
        x.to_bits() as u64
    }

    #[test]
    fn int_to_int_wraps() {
        assert_eq!(cast(Int32, Int8, 300), Ok(44));
        assert_eq!(cast(Int32, Int8, (-129i32) as u32 as u64), Ok(127));
        assert_eq!(cast(Int8, UInt8, 0xff), Ok(0xff)); // -1 -> 255
        assert_eq!(cast(Int8, Int64, 0x80), Ok((-128i64) as u64)); // sign-extends
        assert_eq!(cast(UInt8, Int64, 0x80), Ok(128)); // zero-extends
        assert_eq!(cast(UInt64, Int32, u64::MAX), Ok(0xffff_ffff));
        assert_eq!(cast(Int64, UInt16, (-1i64) as u64), Ok(0xffff));
        assert_eq!(cast(UInt32, UInt64, 0xffff_ffff), Ok(0xffff_ffff));
        // Stray high bits above the source width are ignored.
        assert_eq!(cast(UInt8, UInt16, 0x1ff), Ok(0xff));
    }

    #[test]
    fn bool_casts() {
        assert_eq!(cast(Bool, Float32, 1), Ok(f32b(1.0)));
        assert_eq!(cast(Bool, Int64, 1), Ok(1));
        assert_eq!(cast(Bool, Fp8E4M3, 1), Ok(0x38));
        assert_eq!(cast(Int32, Bool, 0x100), Ok(1));
        assert_eq!(cast(UInt8, Bool, 0), Ok(0));
        assert_eq!(cast(Float32, Bool, f32b(-0.0)), Ok(0));
        assert_eq!(cast(Float32, Bool, f32b(f32::NAN)), Ok(1));
        assert_eq!(cast(Float32, Bool, f32b(1e-45)), Ok(1));
        assert_eq!(cast(Float16, Bool, 0x8000), Ok(0));
        assert_eq!(cast(Fp8E4M3, Bool, 0x7f), Ok(1));
    }

    #[test]
    fn float_to_int_boundaries() {
        assert_eq!(cast(Float32, Int32, f32b(2147483520.0)), Ok(2147483520));
        assert_eq!(
            cast(Float32, Int32, f32b(2147483648.0)),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(cast(Float32, Int32, f32b(-2147483648.0)), Ok(0x8000_0000));
        assert_eq!(
            cast(Float64, Int32, (-2147483648.9f64).to_bits()),
            Ok(0x8000_0000)
        );
        assert_eq!(
            cast(Float64, Int32, (-2147483649.0f64).to_bits()),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(
            cast(Float64, Int32, 2147483647.99f64.to_bits()),
            Ok(0x7fff_ffff)
        );
        assert_eq!(
            cast(Float32, UInt8, f32b(-1.5)),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(cast(Float32, UInt8, f32b(-0.5)), Ok(0));
        assert_eq!(cast(Float32, UInt8, f32b(255.9)), Ok(255));
        assert_eq!(
            cast(Float32, UInt8, f32b(256.0)),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(cast(Float32, Int8, f32b(-128.7)), Ok(0x80));
        assert_eq!(cast(Float32, Int8, f32b(-2.7)), Ok((-2i8) as u8 as u64));
        assert_eq!(
            cast(Float32, Int32, f32b(f32::NAN)),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(
            cast(Float32, Int64, f32b(f32::INFINITY)),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(
            cast(Float32, UInt64, f32b(18446742974197923840.0)),
            Ok(18446742974197923840)
        );
        assert_eq!(
            cast(Float32, UInt64, f32b(18446744073709551616.0)),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(
            cast(Float64, Int64, (-9223372036854775808.0f64).to_bits()),
            Ok(1 << 63)
        );
        assert_eq!(
            cast(Float64, Int64, 9223372036854775808.0f64.to_bits()),
            Err(Ub::FloatToIntOutOfRange)
        );
        assert_eq!(cast(Float16, Int8, 0x57f0), Ok(127)); // 127.0
        assert_eq!(cast(Float16, Int8, 0x5800), Err(Ub::FloatToIntOutOfRange)); // 128.0
        assert_eq!(cast(Fp8E4M3, Int8, 0x7f), Err(Ub::FloatToIntOutOfRange)); // NaN
        assert_eq!(cast(Fp8E4M3, UInt16, 0x7e), Ok(448));
        assert_eq!(cast(Float16, Bool, 0x7c00), Ok(1));
        assert_eq!(cast(Float32, Int32, f32b(-0.0)), Ok(0));
    }

    #[test]
    fn int_to_float_rounds_once() {
        assert_eq!(cast(UInt64, Float32, u64::MAX), Ok(0x5f80_0000)); // 2^64
        assert_eq!(cast(Int32, Float32, (1 << 24) + 1), Ok(f32b(16777216.0)));
        assert_eq!(cast(Int32, Float32, (1 << 24) + 3), Ok(f32b(16777220.0)));
        // 2^63 + 2^39 + 1 is just above a float32 midpoint; via f64 it would round to the
        // midpoint first (2^63 + 2^39) and then tie to even, losing the +1.
        let v = (1u64 << 63) + (1u64 << 39) + 1;
        assert_eq!(cast(UInt64, Float32, v), Ok(f32b(9223373136366403584.0))); // 2^63 + 2^40
        assert_eq!(cast(UInt64, Float32, v), Ok((v as f32).to_bits() as u64));
        assert_eq!(
            cast(Int64, Float64, (i64::MIN) as u64),
            Ok((-9223372036854775808.0f64).to_bits())
        );
        assert_eq!(cast(Int64, Float16, 65519), Ok(0x7bff));
        assert_eq!(cast(Int64, Float16, 65520), Ok(0x7c00));
        assert_eq!(cast(Int32, Fp8E4M3, 1000), Ok(0x7e)); // saturates
        assert_eq!(cast(Int32, Fp8E5M2, (-100000i32) as u32 as u64), Ok(0xfc));
        assert_eq!(cast(Int8, BFloat16, 0x81), Ok(0xc2fe)); // -127
        assert_eq!(cast(Int32, BFloat16, 257), Ok(0x4380)); // 256 (tie to even)
        assert_eq!(cast(Int32, BFloat16, 259), Ok(0x4382)); // 260 (tie to even)
        assert_eq!(cast(Int32, Float32, 0), Ok(0)); // +0
    }

    #[test]
    fn int_to_float_random_vs_rust_as() {
        // Rust's `as` from integers rounds to nearest, ties to even, exactly.
        let mut s = 7u64;
        for _ in 0..1_000_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = s >> (s % 64); // spread the magnitudes
            assert_eq!(
                cast(UInt64, Float32, v),
                Ok((v as f32).to_bits() as u64),
                "{v}"
            );
            assert_eq!(cast(UInt64, Float64, v), Ok((v as f64).to_bits()), "{v}");
            let i = v as i64;
            assert_eq!(
                cast(Int64, Float32, i as u64),
                Ok((i as f32).to_bits() as u64),
                "{i}"
            );
            assert_eq!(
                cast(Int64, Float64, i as u64),
                Ok((i as f64).to_bits()),
                "{i}"
            );
            let f = f32::from_bits(s as u32);
            if f.is_finite() && f.abs() < 2e9 {
                assert_eq!(
                    cast(Float32, Int32, f.to_bits() as u64),
                    Ok(f as i32 as u32 as u64),
                    "{f}"
                );
            }
        }
    }

    #[test]
    fn float_to_float() {
        // float64 -> float16 subnormals: 2^-24 is the smallest, 2^-25 ties to 0.
        assert_eq!(cast(Float64, Float16, 2f64.powi(-24).to_bits()), Ok(0x0001));
        assert_eq!(cast(Float64, Float16, 2f64.powi(-25).to_bits()), Ok(0x0000));
        assert_eq!(
            cast(Float64, Float16, (3.0 * 2f64.powi(-25)).to_bits()),
            Ok(0x0002)
        );
        assert_eq!(cast(Float64, Float16, (1.0e-6f64).to_bits()), Ok(0x0011)); // 17 · 2^-24
        assert_eq!(cast(Float64, Float16, (-6.0e-8f64).to_bits()), Ok(0x8001));
        assert_eq!(cast(Float32, Float16, f32b(65520.0)), Ok(0x7c00));
        assert_eq!(cast(Float32, BFloat16, f32b(f32::MAX)), Ok(0x7f80)); // rounds up to inf
        assert_eq!(cast(Float16, Float32, 0x3555), Ok(f32b(0.33325195))); // 1365 · 2^-12
        assert_eq!(cast(BFloat16, Float16, 0x7f7f), Ok(0x7c00));
        assert_eq!(cast(Float32, Fp8E4M3, f32b(f32::INFINITY)), Ok(0x7f));
        assert_eq!(cast(Float32, Fp8E4M3, f32b(-1e10)), Ok(0xfe));
        assert_eq!(cast(Fp8E5M2, Fp8E4M3, 0x7c), Ok(0x7f)); // inf -> NaN
        assert_eq!(cast(Fp8E4M3, Fp8E5M2, 0x7e), Ok(0x5f)); // 448 -> 448
        assert_eq!(cast(Fp8E4M3, Float16, 0x01), Ok(0x1800)); // 2^-9
                                                              // NaN: canonical, sign kept.
        assert_eq!(cast(Float32, Float16, 0xffc0_0001), Ok(0xfe00));
        assert_eq!(cast(Float16, Float64, 0x7c01), Ok(canonical_nan(Float64)));
        assert_eq!(cast(Fp8E4M3, Float32, 0xff), Ok(0xffc0_0000));
        // Same dtype: untouched (a NaN payload survives).
        assert_eq!(cast(Float32, Float32, 0x7fc0_0001), Ok(0x7fc0_0001));
        // Exhaustive float16 -> float32 against half.
        for b in 0..=0xffffu64 {
            let h = half::f16::from_bits(b as u16);
            let got = cast(Float16, Float32, b).unwrap();
            if h.is_nan() {
                assert_eq!(got, (b & 0x8000) << 16 | 0x7fc0_0000);
            } else {
                assert_eq!(got, h.to_f32().to_bits() as u64);
            }
        }
    }

    #[test]
    fn all_pairs_on_edge_values_never_panic_and_stay_in_width() {
        let edges: [u64; 12] = [
            0,
            1,
            2,
            0x7f,
            0x80,
            0xff,
            0x7fff,
            0x8000,
            0x7c00,
            0x7fc0_0000,
            1 << 63,
            u64::MAX,
        ];
        for from in DType::ALL {
            for to in DType::ALL {
                for &e in &edges {
                    let b = e & mask(from);
                    if let Ok(r) = cast(from, to, b) {
                        assert_eq!(r & !mask(to), 0, "{from}->{to} {b:#x}");
                        if to.is_bool() {
                            let nonzero = if from.is_float() {
                                to_f64(from, b) != 0.0
                            } else {
                                b != 0
                            };
                            assert_eq!(r, nonzero as u64, "{from}->{to} {b:#x}");
                        }
                    } else {
                        assert!(from.is_float() && to.is_int(), "{from}->{to} {b:#x}");
                    }
                    // Lossless round trips: int -> wider int -> int, float -> float64 -> float.
                    if from.is_int() && to.is_int() && to.bits() >= from.bits() {
                        assert_eq!(cast(to, from, cast(from, to, b).unwrap()), Ok(b));
                    }
                    if from.is_float() && !crate::scalar::round::is_nan(from, b) {
                        assert_eq!(cast(Float64, from, cast(from, Float64, b).unwrap()), Ok(b));
                    }
                }
            }
        }
    }

    #[test]
    fn bitcasts() {
        assert_eq!(bitcast(Float16, BFloat16, 0x3c00), Some(0x3c00));
        assert_eq!(bitcast(Float32, Int32, f32b(-1.0)), Some(0xbf80_0000));
        assert_eq!(
            bitcast(UInt64, Float64, 0x3ff0_0000_0000_0000),
            Some(1f64.to_bits())
        );
        assert_eq!(bitcast(Fp8E4M3, Int8, 0x7f), Some(0x7f));
        assert_eq!(bitcast(Float32, Float64, 0), None);
        assert_eq!(bitcast(Bool, UInt8, 1), None);
        assert_eq!(bitcast(UInt8, Bool, 1), None);
        assert_eq!(bitcast(Void, Void, 0), None);
    }
}
