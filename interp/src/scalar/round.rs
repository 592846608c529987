//! Decoding float bits to f64 and rounding exact values to a float dtype.
//!
//! Every supported float dtype embeds exactly in f64, so f64 is the carrier for values.
//! Rounding never goes through an intermediate format: [`round_parts`] takes an exact
//! value (an integer significand, a binary exponent and a sticky bit) and rounds it once,
//! to nearest with ties to even, into the layout given by [`FloatFormat`].

use crate::ir::dtype::{DType, FloatFormat};

fn bias(ff: FloatFormat) -> i32 {
    (1i32 << (ff.exp_bits - 1)) - 1
}

fn sign_bit(ff: FloatFormat) -> u64 {
    1u64 << (ff.exp_bits + ff.man_bits)
}

/// 2^k for k in f64's normal exponent range (all our dtypes' scales are well inside it).
fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Positive quiet NaN bits of `dt` (0 for non-float dtypes).
///
/// IEEE-style formats set the top mantissa bit (float32 0x7fc00000, float16 0x7e00,
/// bfloat16 0x7fc0, fp8e5m2 0x7e, float64 0x7ff8000000000000); fp8e4m3 has a single
/// NaN pattern per sign, S.1111.111 (0x7f).
pub fn canonical_nan(dt: DType) -> u64 {
    let Some(ff) = dt.float_format() else {
        return 0;
    };
    let exp_all = ((1u64 << ff.exp_bits) - 1) << ff.man_bits;
    if ff.has_inf {
        exp_all | (1u64 << (ff.man_bits - 1))
    } else {
        exp_all | ((1u64 << ff.man_bits) - 1)
    }
}

/// Whether `bits` is a NaN of the float dtype `dt` (false for non-float dtypes).
pub fn is_nan(dt: DType, bits: u64) -> bool {
    let Some(ff) = dt.float_format() else {
        return false;
    };
    let exp = (bits >> ff.man_bits) & ((1u64 << ff.exp_bits) - 1);
    let man = bits & ((1u64 << ff.man_bits) - 1);
    let exp_all = (1u64 << ff.exp_bits) - 1;
    if ff.has_inf {
        exp == exp_all && man != 0
    } else {
        exp == exp_all && man == (1u64 << ff.man_bits) - 1
    }
}

/// The sign bit of a float dtype's encoding (0 for non-float dtypes).
pub fn sign_mask(dt: DType) -> u64 {
    dt.float_format().map_or(0, sign_bit)
}

/// Decode float bits of `dt` to f64. Exact for every float dtype (NaN keeps its sign, not its
/// payload). For a non-float dtype the integer value is returned (callers do not rely on it).
pub fn to_f64(dt: DType, bits: u64) -> f64 {
    let Some(ff) = dt.float_format() else {
        return super::cast::to_i128(dt, bits) as f64;
    };
    if dt == DType::Float64 {
        return f64::from_bits(bits);
    }
    let m = ff.man_bits;
    let neg = bits & sign_bit(ff) != 0;
    let exp = ((bits >> m) & ((1u64 << ff.exp_bits) - 1)) as i32;
    let man = bits & ((1u64 << m) - 1);
    let exp_all = (1i32 << ff.exp_bits) - 1;
    let mag = if is_nan(dt, bits) {
        f64::NAN
    } else if ff.has_inf && exp == exp_all {
        f64::INFINITY
    } else if exp == 0 {
        // Subnormal: man · 2^(emin - m), emin = 1 - bias.
        man as f64 * pow2(1 - bias(ff) - m as i32)
    } else {
        (man | (1u64 << m)) as f64 * pow2(exp - bias(ff) - m as i32)
    };
    if neg {
        -mag
    } else {
        mag
    }
}

/// Round the exact value `±(mant + s) · 2^exp` to the layout `ff`, where `s` is 0 if
/// `sticky` is false and some number strictly between 0 and 1 otherwise. Round to nearest,
/// ties to even; subnormals are produced (no flushing); overflow gives ±inf, or for a format
/// without infinities (fp8e4m3) saturates to ±max finite.
///
/// Precondition: `mant != 0 || !sticky` (a sticky fraction alone cannot be placed).
pub fn round_parts(ff: FloatFormat, neg: bool, mant: u128, exp: i32, sticky: bool) -> u64 {
    let sign = if neg { sign_bit(ff) } else { 0 };
    if mant == 0 {
        return sign;
    }
    let m = ff.man_bits as i32;
    let emin = 1 - bias(ff);
    let lead = exp + (127 - mant.leading_zeros() as i32); // exponent of the leading bit
    let mut q = lead.max(emin) - m; // exponent of the last kept bit (the quantum)
    let shift = q - exp;
    let (mut r, round, rest) = if shift <= 0 {
        // Exact: at most m+1 bits after the shift since q >= lead - m.
        (mant << (-shift) as u32, false, sticky)
    } else if shift > 128 {
        (0, false, true)
    } else {
        let s = shift as u32;
        let kept = if s == 128 { 0 } else { mant >> s };
        let round = (mant >> (s - 1)) & 1 == 1;
        let below = mant & ((1u128 << (s - 1)) - 1);
        (kept, round, sticky || below != 0)
    };
    if round && (rest || r & 1 == 1) {
        r += 1;
        if r >> (m + 1) != 0 {
            // Carried into the next binade: r == 2^(m+1).
            r >>= 1;
            q += 1;
        }
    }
    if r == 0 {
        return sign;
    }
    let man_mask = (1u128 << m) - 1;
    let (biased, frac) = if r >> m == 0 {
        (0i64, r as u64) // subnormal (q == emin - m)
    } else {
        ((q + m + bias(ff)) as i64, (r & man_mask) as u64)
    };
    let exp_all = (1i64 << ff.exp_bits) - 1;
    if ff.has_inf {
        if biased >= exp_all {
            return sign | ((exp_all as u64) << m);
        }
    } else if biased > exp_all || (biased == exp_all && frac == man_mask as u64) {
        // fp8e4m3: finite overflow saturates to max finite (S.1111.110), like tinygrad's
        // float_to_fp8 and CUDA's satfinite conversion.
        return sign | ((exp_all as u64) << m) | (man_mask as u64 - 1);
    }
    sign | ((biased as u64) << m) | frac
}

/// Sign, 53-bit-or-less integer significand and exponent of a finite nonzero f64.
fn decompose(x: f64) -> (bool, u64, i32) {
    let b = x.to_bits();
    let neg = b >> 63 != 0;
    let e = ((b >> 52) & 0x7ff) as i32;
    let f = b & ((1u64 << 52) - 1);
    if e == 0 {
        (neg, f, -1074)
    } else {
        (neg, f | (1u64 << 52), e - 1075)
    }
}

/// ±inf of `dt`, or for fp8e4m3 (no infinities) its NaN with that sign, as tinygrad's
/// float_to_fp8 does.
fn infinity(dt: DType, ff: FloatFormat, neg: bool) -> u64 {
    let sign = if neg { sign_bit(ff) } else { 0 };
    if ff.has_inf {
        sign | (((1u64 << ff.exp_bits) - 1) << ff.man_bits)
    } else {
        sign | canonical_nan(dt)
    }
}

/// Round an f64 to the float dtype `dt` (once, to nearest, ties to even). NaN becomes the
/// canonical quiet NaN of `dt` keeping the sign. For a non-float `dt` the value is truncated
/// and wrapped (callers do not rely on it).
pub fn from_f64(dt: DType, x: f64) -> u64 {
    let Some(ff) = dt.float_format() else {
        let v = if x.is_finite() { x.trunc() as i128 } else { 0 };
        return super::cast::wrap_i128(dt, v);
    };
    if x.is_nan() {
        let sign = if x.is_sign_negative() {
            sign_bit(ff)
        } else {
            0
        };
        return sign | canonical_nan(dt);
    }
    if dt == DType::Float64 {
        return x.to_bits();
    }
    if x.is_infinite() {
        return infinity(dt, ff, x < 0.0);
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            sign_bit(ff)
        } else {
            0
        };
    }
    let (neg, mant, exp) = decompose(x);
    round_parts(ff, neg, mant as u128, exp, false)
}

/// Error-free sum: a + b == s + t exactly, s = fl(a + b) (Knuth's TwoSum; no overflow).
pub fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let t = (a - (s - bb)) + (b - bb);
    (s, t)
}

/// Round the exact value `hi + lo` (two f64, not necessarily normalized) once to `dt`.
///
/// Used where an exact result is not an f64: ADD/SUB of far-apart operands, fused MULACC,
/// and FDIV/SQRT with their exact remainder. For float64 this is fl(hi + lo), which IEEE
/// addition already rounds correctly.
pub fn from_f64_pair(dt: DType, hi: f64, lo: f64) -> u64 {
    let Some(ff) = dt.float_format() else {
        return from_f64(dt, hi + lo);
    };
    if dt == DType::Float64 || !hi.is_finite() || !lo.is_finite() {
        return from_f64(dt, hi + lo);
    }
    let (s, t) = two_sum(hi, lo);
    // s overflowed f64: the exact value is far beyond every narrower dtype's range too.
    if !s.is_finite() || t == 0.0 {
        return from_f64(dt, s);
    }
    // s is a normal f64 (a subnormal s would make t zero) and |t| <= ulp(s)/2 < 2^exp, so
    // |s + t| is mant·2^exp plus (same sign) or minus (opposite sign) a fraction of 2^exp.
    let (neg, mant, exp) = decompose(s);
    if (t < 0.0) == neg {
        round_parts(ff, neg, mant as u128, exp, true)
    } else {
        round_parts(ff, neg, mant as u128 - 1, exp, true)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use half::{bf16, f16};

    /// SplitMix64: a tiny deterministic generator for the randomized tests.
    pub(crate) struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            z ^ (z >> 31)
        }
        /// A finite f64 of random sign, random 53-bit significand and exponent in [lo, hi].
        pub fn f64_in(&mut self, lo: i32, hi: i32) -> f64 {
            let e = lo + (self.next() % (hi - lo + 1) as u64) as i32;
            let m = (self.next() >> 11) as f64 / (1u64 << 53) as f64 + 0.5; // [0.5, 1)
            let v = m * 2f64.powi(e);
            if self.next() & 1 == 1 {
                -v
            } else {
                v
            }
        }
    }

    const SMALL: [DType; 4] = [
        DType::Fp8E4M3,
        DType::Fp8E5M2,
        DType::Float16,
        DType::BFloat16,
    ];

    /// Independent reference for the narrow dtypes: all finite non-negative values sorted,
    /// with a virtual "next binade" above max. Nearest by exact midpoint comparison.
    fn reference_round(dt: DType, table: &[(f64, u64)], x: f64) -> u64 {
        let ff = dt.float_format().unwrap();
        let sign = if x.is_sign_negative() {
            sign_bit(ff)
        } else {
            0
        };
        let a = x.abs();
        let i = table.partition_point(|&(v, _)| v <= a); // table[i-1].0 <= a < table[i].0
        let (lo, hi) = (table[i - 1], table.get(i).copied());
        let pick = match hi {
            None => lo,
            Some(hi) => {
                let mid = (lo.0 + hi.0) / 2.0; // exact: few significant bits
                if a < mid || (a == mid && lo.1 & 1 == 0) {
                    lo
                } else {
                    hi
                }
            }
        };
        if pick.1 == u64::MAX {
            // Rounded to the virtual value past max finite.
            return if ff.has_inf {
                sign | infinity(dt, ff, false)
            } else {
                sign | (table[table.len() - 2].1)
            };
        }
        sign | pick.1
    }

    fn table(dt: DType) -> Vec<(f64, u64)> {
        let ff = dt.float_format().unwrap();
        let mut t: Vec<(f64, u64)> = (0..sign_bit(ff))
            .map(|b| (to_f64(dt, b), b))
            .filter(|(v, _)| v.is_finite())
            .collect();
        t.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        // The next value in an unbounded exponent range (only reachable by rounding).
        let max = t[t.len() - 1].0;
        let ulp = max - t[t.len() - 2].0;
        t.push((max + ulp, u64::MAX));
        t
    }

    #[test]
    fn canonical_nans() {
        assert_eq!(canonical_nan(DType::Float32), 0x7fc00000);
        assert_eq!(canonical_nan(DType::Float16), 0x7e00);
        assert_eq!(canonical_nan(DType::BFloat16), 0x7fc0);
        assert_eq!(canonical_nan(DType::Fp8E5M2), 0x7e);
        assert_eq!(canonical_nan(DType::Fp8E4M3), 0x7f);
        assert_eq!(canonical_nan(DType::Float64), 0x7ff8000000000000);
        assert_eq!(from_f64(DType::Float32, -f64::NAN), 0xffc00000);
        assert_eq!(from_f64(DType::Fp8E4M3, -f64::NAN), 0xff);
        assert!(is_nan(DType::Fp8E4M3, 0xff) && !is_nan(DType::Fp8E4M3, 0x7e));
        assert!(!is_nan(DType::Fp8E5M2, 0x7c) && is_nan(DType::Fp8E5M2, 0x7d));
    }

    #[test]
    fn float16_exhaustive_round_trip_and_decode_vs_half() {
        for b in 0..=0xffffu64 {
            let v = to_f64(DType::Float16, b);
            let h = f16::from_bits(b as u16).to_f64();
            if h.is_nan() {
                assert!(v.is_nan());
                assert_eq!(v.is_sign_negative(), b & 0x8000 != 0);
                assert_eq!(from_f64(DType::Float16, v), (b & 0x8000) | 0x7e00);
            } else {
                assert_eq!(v.to_bits(), h.to_bits(), "decode {b:#06x}");
                assert_eq!(from_f64(DType::Float16, v), b, "round trip {b:#06x}");
            }
        }
    }

    #[test]
    fn bfloat16_exhaustive_round_trip_and_decode_vs_half() {
        for b in 0..=0xffffu64 {
            let v = to_f64(DType::BFloat16, b);
            let h = bf16::from_bits(b as u16).to_f64();
            if h.is_nan() {
                assert!(v.is_nan());
                assert_eq!(from_f64(DType::BFloat16, v), (b & 0x8000) | 0x7fc0);
            } else {
                assert_eq!(v.to_bits(), h.to_bits(), "decode {b:#06x}");
                assert_eq!(from_f64(DType::BFloat16, v), b, "round trip {b:#06x}");
            }
        }
    }

    #[test]
    fn float16_from_f32_inputs_vs_half() {
        // half's f32 -> f16 is a single correct rounding (F16C or its exact fallback).
        let mut rng = Rng(1);
        for i in 0..2_000_000u64 {
            let x = if i % 2 == 0 {
                f32::from_bits(rng.next() as u32)
            } else {
                // Concentrate on f16's range, including subnormals and overflow.
                rng.f64_in(-27, 17) as f32
            };
            let want = f16::from_f32(x).to_bits() as u64;
            let got = from_f64(DType::Float16, x as f64);
            if x.is_nan() {
                assert_eq!(got, ((x.is_sign_negative() as u64) << 15) | 0x7e00);
            } else {
                assert_eq!(got, want, "{x:e} ({:#010x})", x.to_bits());
            }
        }
    }

    #[test]
    fn half_from_f64_double_rounds_but_we_do_not() {
        // 1 + 2^-11 + 2^-40 is just above the midpoint between 1 and 1 + 2^-10. Through f32
        // the 2^-40 is lost and the tie goes to even (1.0); rounded once it goes up.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(from_f64(DType::Float16, x), 0x3c01);
        assert_eq!(
            from_f64(DType::BFloat16, 1.0 + 2f64.powi(-8) + 2f64.powi(-30)),
            0x3f81
        );
        assert_eq!(from_f64(DType::BFloat16, 1.0 + 2f64.powi(-8)), 0x3f80); // tie to even
        assert_eq!(from_f64(DType::BFloat16, 1.0 + 3.0 * 2f64.powi(-8)), 0x3f82);
        // tie to even (up)
    }

    #[test]
    fn bfloat16_from_f32_inputs_vs_half() {
        let mut rng = Rng(2);
        for i in 0..2_000_000u64 {
            let x = if i % 2 == 0 {
                f32::from_bits(rng.next() as u32)
            } else {
                rng.f64_in(-140, 129) as f32
            };
            let got = from_f64(DType::BFloat16, x as f64);
            if x.is_nan() {
                assert_eq!(got, ((x.is_sign_negative() as u64) << 15) | 0x7fc0);
            } else {
                assert_eq!(got, bf16::from_f32(x).to_bits() as u64, "{x:e}");
            }
        }
    }

    #[test]
    fn float32_from_f64_vs_as_cast() {
        let mut rng = Rng(3);
        for i in 0..3_000_000u64 {
            let x = match i % 3 {
                0 => f64::from_bits(rng.next()),
                1 => rng.f64_in(-152, 130), // subnormals, normals, overflow
                _ => {
                    // Exact f32 midpoints and their f64 neighbours.
                    let f = f32::from_bits(rng.next() as u32 & 0x7fff_ffff);
                    let m = (f as f64 + f32::from_bits(f.to_bits() + 1) as f64) / 2.0;
                    [m, m.next_up(), m.next_down()][(rng.next() % 3) as usize]
                }
            };
            let got = from_f64(DType::Float32, x);
            if x.is_nan() {
                assert_eq!(got & 0x7fff_ffff, 0x7fc00000);
            } else {
                assert_eq!(
                    got,
                    (x as f32).to_bits() as u64,
                    "{x:e} ({:#018x})",
                    x.to_bits()
                );
            }
        }
    }

    #[test]
    fn narrow_dtypes_from_f64_vs_exhaustive_nearest_table() {
        let mut rng = Rng(4);
        for dt in SMALL {
            let t = table(dt);
            let (lo_e, hi_e) = match dt {
                DType::Fp8E4M3 => (-12, 11),
                DType::Fp8E5M2 => (-19, 18),
                DType::Float16 => (-27, 18),
                _ => (-136, 130),
            };
            for i in 0..400_000u64 {
                let x = if i % 2 == 0 {
                    rng.f64_in(lo_e, hi_e)
                } else {
                    // A midpoint between neighbours, nudged by a few f64 ulps either way.
                    let k = 1 + (rng.next() as usize % (t.len() - 1));
                    let mut m = (t[k - 1].0 + t[k].0) / 2.0;
                    for _ in 0..(rng.next() % 3) {
                        m = if rng.next() & 1 == 0 {
                            m.next_up()
                        } else {
                            m.next_down()
                        };
                    }
                    if rng.next() & 1 == 0 {
                        -m
                    } else {
                        m
                    }
                };
                assert_eq!(from_f64(dt, x), reference_round(dt, &t, x), "{dt} {x:e}");
            }
        }
    }

    #[test]
    fn fp8_exhaustive_round_trip() {
        for dt in [DType::Fp8E4M3, DType::Fp8E5M2] {
            for b in 0..256u64 {
                let v = to_f64(dt, b);
                let want = if is_nan(dt, b) {
                    (b & 0x80) | canonical_nan(dt)
                } else {
                    b
                };
                assert_eq!(from_f64(dt, v), want, "{dt} {b:#04x}");
            }
        }
    }

    #[test]
    fn fp8_hand_cases() {
        let e4 = DType::Fp8E4M3;
        let e5 = DType::Fp8E5M2;
        assert_eq!(to_f64(e4, 0x7e), 448.0);
        assert_eq!(to_f64(e4, 0x01), 2f64.powi(-9)); // smallest subnormal
        assert_eq!(to_f64(e4, 0x08), 2f64.powi(-6)); // smallest normal
        assert!(to_f64(e4, 0x7f).is_nan() && to_f64(e4, 0x78) == 256.0); // S.1111.000 is finite
        assert_eq!(from_f64(e4, 448.0), 0x7e);
        assert_eq!(from_f64(e4, 464.0), 0x7e); // the tie would go to 480, which does not exist
        assert_eq!(from_f64(e4, 465.0), 0x7e); // finite overflow saturates
        assert_eq!(from_f64(e4, -1e300), 0xfe);
        assert_eq!(from_f64(e4, f64::INFINITY), 0x7f); // no inf: NaN with the sign
        assert_eq!(from_f64(e4, f64::NEG_INFINITY), 0xff);
        assert_eq!(from_f64(e4, 2f64.powi(-10)), 0x00); // half the smallest subnormal: tie to 0
        assert_eq!(from_f64(e4, -2f64.powi(-10)), 0x80);
        assert_eq!(from_f64(e4, 3.0 * 2f64.powi(-10)), 0x02); // 1.5 subnormal ulps: tie to even
        assert_eq!(from_f64(e4, 2f64.powi(-10).next_up()), 0x01);
        assert_eq!(to_f64(e5, 0x7b), 57344.0);
        assert_eq!(to_f64(e5, 0x7c), f64::INFINITY);
        assert!(to_f64(e5, 0x7d).is_nan());
        assert_eq!(from_f64(e5, 57344.0), 0x7b);
        assert_eq!(from_f64(e5, 61439.0), 0x7b);
        assert_eq!(from_f64(e5, 61440.0), 0x7c); // tie between max and 2^16: even is 2^16 = inf
        assert_eq!(from_f64(e5, -2f64.powi(-16)), 0x81); // smallest subnormal
    }

    #[test]
    fn float16_hand_cases() {
        let h = DType::Float16;
        assert_eq!(from_f64(h, 65504.0), 0x7bff);
        assert_eq!(from_f64(h, 65519.99), 0x7bff);
        assert_eq!(from_f64(h, 65520.0), 0x7c00);
        assert_eq!(from_f64(h, 2f64.powi(-24)), 0x0001);
        assert_eq!(from_f64(h, 2f64.powi(-25)), 0x0000);
        assert_eq!(from_f64(h, 2f64.powi(-25).next_up()), 0x0001);
        assert_eq!(from_f64(h, -0.0), 0x8000);
        // Subnormal carry into the smallest normal.
        assert_eq!(from_f64(h, 2f64.powi(-14) - 2f64.powi(-26)), 0x0400);
        assert_eq!(from_f64(DType::Float32, 1e-50), 0);
        assert_eq!(from_f64(DType::Float32, -1e300), 0xff800000);
    }

    #[test]
    fn pair_rounding_breaks_midpoint_ties() {
        let bf = DType::BFloat16;
        let mid = 1.0 + 2f64.powi(-8); // midpoint between 1 and 1 + 2^-7
        assert_eq!(from_f64_pair(bf, mid, 2f64.powi(-60)), 0x3f81);
        assert_eq!(from_f64_pair(bf, mid, -2f64.powi(-60)), 0x3f80);
        assert_eq!(from_f64_pair(bf, mid, 0.0), 0x3f80);
        // Negative values: direction is by value.
        assert_eq!(from_f64_pair(bf, -mid, -2f64.powi(-60)), 0xbf81);
        assert_eq!(from_f64_pair(bf, -mid, 2f64.powi(-60)), 0xbf80);
        // Unnormalized pairs: lo larger than an f64 ulp of hi.
        assert_eq!(
            from_f64_pair(bf, 1.0, 2f64.powi(-8) + 2f64.powi(-55)),
            0x3f81
        );
        // Power of two with a tiny negative correction: just below 2, rounds to 2.
        assert_eq!(from_f64_pair(DType::Float16, 2.0, -2f64.powi(-80)), 0x4000);
        // Just below the float16 overflow threshold stays finite; at or above it is inf.
        assert_eq!(
            from_f64_pair(DType::Float16, 65520.0, -2f64.powi(-60)),
            0x7bff
        );
        assert_eq!(
            from_f64_pair(DType::Float16, 65520.0, 2f64.powi(-60)),
            0x7c00
        );
        // f32 midpoint plus a tiny term, far below an f64 ulp of hi.
        let m32 = 1.0 + 2f64.powi(-24);
        assert_eq!(
            from_f64_pair(DType::Float32, m32, 2f64.powi(-200)),
            0x3f800001
        );
        assert_eq!(
            from_f64_pair(DType::Float32, m32, -2f64.powi(-200)),
            0x3f800000
        );
        // Float64: the correctly rounded sum.
        assert_eq!(
            from_f64_pair(DType::Float64, 1.0, 2f64.powi(-53)),
            1f64.to_bits()
        );
        assert_eq!(
            from_f64_pair(DType::Float64, 1.0, 2f64.powi(-53) + 2f64.powi(-100)),
            1f64.next_up().to_bits()
        );
        // Signed zero of an exact zero sum.
        assert_eq!(from_f64_pair(DType::Float16, -0.0, -0.0), 0x8000);
        assert_eq!(from_f64_pair(DType::Float16, 1.0, -1.0), 0x0000);
    }

    #[test]
    fn pair_rounding_random_midpoints_vs_table() {
        let mut rng = Rng(5);
        for dt in SMALL {
            let t = table(dt);
            for _ in 0..100_000 {
                let k = 1 + (rng.next() as usize % (t.len() - 2));
                let (a, b) = (t[k - 1], t[k]);
                let mid = (a.0 + b.0) / 2.0;
                let tiny = mid * 2f64.powi(-60 - (rng.next() % 200) as i32);
                let (up, down) = (reference_round(dt, &t, b.0), reference_round(dt, &t, a.0));
                assert_eq!(from_f64_pair(dt, mid, tiny), up, "{dt} {mid:e}+");
                assert_eq!(from_f64_pair(dt, mid, -tiny), down, "{dt} {mid:e}-");
                assert_eq!(from_f64_pair(dt, mid, 0.0), reference_round(dt, &t, mid));
            }
        }
    }
}
