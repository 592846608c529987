//! Case-file scalar literals (docs/case-format.md, "Scalar literals"): parsing JSON into bits
//! and formatting bits back into JSON that parses to the same bits.

use std::cmp::Ordering;

use serde_json::Value;

use super::cast::{from_i128, mask, to_i128};
use super::round::{canonical_nan, from_f64, is_nan, sign_mask, to_f64};
use crate::ir::DType;

/// Longest decimal literal accepted (digits and exponent), so exact comparison stays cheap.
const MAX_DECIMAL_LEN: usize = 2000;

/// Parse a literal into bits of `dt`. Errors are human-readable reasons.
///
/// * bool: `true`/`false`/`0`/`1`.
/// * ints: JSON integers in range (no wrapping).
/// * floats: JSON numbers, or strings `"inf"`, `"-inf"`, `"nan"` (canonical quiet NaN),
///   `"-nan"`, or a decimal (`"0.1"`, `"-0.0"`, `"1e-40"`), rounded once to nearest, ties
///   to even, from the exact decimal value. A JSON number with a fraction or exponent is
///   first read as an f64 by serde_json; write it as a string to have it rounded exactly.
/// * any dtype: `"0x…"` is raw bits and must fit in `dt.bits()`.
pub fn parse(dt: DType, v: &Value) -> Result<u64, String> {
    if dt == DType::Void {
        return Err("void has no values".into());
    }
    match v {
        Value::Bool(b) if dt.is_bool() => Ok(*b as u64),
        Value::Number(n) => parse_number(dt, n),
        Value::String(s) => parse_string(dt, s),
        _ => Err(format!("expected {} for {dt}, found {v}", expected(dt))),
    }
}

fn expected(dt: DType) -> &'static str {
    if dt.is_bool() {
        "true, false, 0 or 1"
    } else if dt.is_float() {
        "a number or string"
    } else {
        "an integer (or a \"0x…\" hex string)"
    }
}

fn parse_number(dt: DType, n: &serde_json::Number) -> Result<u64, String> {
    let int = n
        .as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from));
    if let Some(v) = int {
        if dt.is_float() {
            return Ok(from_i128(dt, v)); // exact integer, rounded once
        }
        let (lo, hi) = dt.int_range().unwrap_or((0, 0));
        if v < lo || v > hi {
            return Err(if dt.is_bool() {
                format!("{v} is not a bool (expected true, false, 0 or 1)")
            } else {
                format!("{v} does not fit {dt}")
            });
        }
        return Ok(from_i128(dt, v));
    }
    if dt.is_float() {
        // The number's own text (serde_json keeps it: `arbitrary_precision`), rounded once
        // and exactly like a decimal string.
        return parse_string(dt, &n.to_string());
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() == 0.0 && f.abs() >= 9.2e18 {
        Err(format!("{n} does not fit {dt}"))
    } else {
        Err(format!("expected {} for {dt}, found {n}", expected(dt)))
    }
}

/// Round an f64 that came from a finite decimal: if f64 itself overflowed, the decimal was
/// finite, so a dtype without infinities saturates rather than turning into NaN.
fn finite_decimal(dt: DType, x: f64) -> u64 {
    if x.is_infinite() && dt.float_format().is_some_and(|ff| !ff.has_inf) {
        from_f64(dt, f64::MAX.copysign(x))
    } else {
        from_f64(dt, x)
    }
}

fn parse_string(dt: DType, s: &str) -> Result<u64, String> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        let digits = hex.trim_start_matches('0');
        let bits = if digits.is_empty() && !hex.is_empty() {
            0
        } else if digits.len() <= 16 && !digits.starts_with('+') {
            u64::from_str_radix(digits, 16).map_err(|_| format!("bad hex literal \"{s}\""))?
        } else {
            return Err(format!("bad hex literal \"{s}\" (at most 64 bits)"));
        };
        if bits & !mask(dt) != 0 {
            return Err(format!(
                "\"{s}\" does not fit in the {} bits of {dt}",
                dt.bits()
            ));
        }
        return Ok(bits);
    }
    if !dt.is_float() {
        return Err(format!("expected {} for {dt}, found \"{s}\"", expected(dt)));
    }
    let neg = s.starts_with('-');
    let sign = if neg { sign_mask(dt) } else { 0 };
    let body = s.strip_prefix(['-', '+']).unwrap_or(s).to_ascii_lowercase();
    match body.as_str() {
        "nan" => return Ok(sign | canonical_nan(dt)),
        "inf" | "infinity" => {
            let ff = dt.float_format().ok_or("not a float")?;
            if !ff.has_inf {
                return Err(format!("{dt} has no infinity"));
            }
            return Ok(sign | (((1u64 << ff.exp_bits) - 1) << ff.man_bits));
        }
        _ => {}
    }
    let dec = Decimal::parse(s).ok_or_else(|| {
        format!("expected a decimal, \"inf\", \"-inf\", \"nan\", \"-nan\" or \"0x…\" bits for {dt}, found \"{s}\"")
    })?;
    if s.len() > MAX_DECIMAL_LEN {
        return Err(format!(
            "decimal literal longer than {MAX_DECIMAL_LEN} characters"
        ));
    }
    Ok(round_decimal(dt, s, &dec))
}

/// A decimal `±digits · 10^exp10` with `digits` the significant digits (no leading zeros).
struct Decimal {
    digits: Vec<u8>,
    exp10: i64,
}

impl Decimal {
    /// `[+-]? digits? (. digits?)? ([eE] [+-]? digits)?` with at least one mantissa digit.
    fn parse(s: &str) -> Option<Decimal> {
        let b = s.as_bytes();
        let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
        let mut digits = Vec::new();
        let mut seen = false;
        let mut frac = 0i64;
        let mut in_frac = false;
        while i < b.len() {
            match b[i] {
                c @ b'0'..=b'9' => {
                    seen = true;
                    if !(digits.is_empty() && c == b'0') {
                        digits.push(c - b'0');
                    }
                    if in_frac {
                        frac += 1;
                    }
                }
                b'.' if !in_frac => in_frac = true,
                _ => break,
            }
            i += 1;
        }
        if !seen {
            return None;
        }
        let mut exp = 0i64;
        if i < b.len() {
            if !matches!(b[i], b'e' | b'E') {
                return None;
            }
            i += 1;
            let eneg = matches!(b.get(i), Some(b'-'));
            i += usize::from(matches!(b.get(i), Some(b'+' | b'-')));
            if i >= b.len() {
                return None;
            }
            for &c in &b[i..] {
                if !c.is_ascii_digit() {
                    return None;
                }
                exp = (exp * 10 + (c - b'0') as i64).min(1 << 40); // saturate: only 0/inf beyond
            }
            if eneg {
                exp = -exp;
            }
        }
        // Digits counted after the point include the leading zeros we dropped, which is right:
        // the value is (integer of all digits) · 10^(exp - frac).
        Some(Decimal {
            digits,
            exp10: exp - frac,
        })
    }
}

/// Round a decimal once to `dt`. Rust's f64 parser is correctly rounded; for narrower dtypes
/// the f64 is off only when it lands exactly on a rounding boundary of `dt` (a midpoint or the
/// overflow threshold, all f64-representable), so there the decimal is compared exactly.
fn round_decimal(dt: DType, s: &str, dec: &Decimal) -> u64 {
    let x: f64 = s.parse().unwrap_or(f64::NAN);
    if x.is_nan() {
        return canonical_nan(dt); // unreachable: Decimal::parse accepted it
    }
    let r = finite_decimal(dt, x);
    if dt == DType::Float64 || x == 0.0 || x.is_infinite() {
        return r;
    }
    // x is the decimal rounded to f64, so the decimal lies within one f64 step of x. If the
    // dtype values on both sides of x differ, a rounding boundary of the dtype lies in that
    // interval: compare the decimal with the boundary itself (exactly representable in f64,
    // since dtype values here have at most 24 significant bits) and round from its side.
    let ax = x.abs();
    let (below, above) = (
        finite_decimal(dt, ax.next_down()),
        finite_decimal(dt, ax.next_up()),
    );
    if below == above {
        return r;
    }
    let (fb, fa) = (to_f64(dt, below), to_f64(dt, above));
    let boundary = if fa.is_infinite() {
        // Overflow: max finite + half its ulp.
        fb + (fb - to_f64(dt, below - 1)) / 2.0
    } else {
        (fb + fa) / 2.0
    };
    let magnitude = match compare_decimal(dec, boundary) {
        Ordering::Less => below,
        Ordering::Greater => above,
        Ordering::Equal => finite_decimal(dt, boundary),
    };
    if x < 0.0 {
        magnitude | sign_mask(dt)
    } else {
        magnitude
    }
}

/// Compare `|dec|` with the positive finite f64 `x`, exactly, with a small big-integer.
fn compare_decimal(dec: &Decimal, x: f64) -> Ordering {
    if dec.digits.is_empty() {
        return Ordering::Less;
    }
    let bits = x.to_bits();
    let (m, e) = {
        let ef = ((bits >> 52) & 0x7ff) as i64;
        let f = bits & ((1u64 << 52) - 1);
        if ef == 0 {
            (f, -1074)
        } else {
            (f | (1 << 52), ef - 1075)
        }
    };
    // dec = D·2^E·5^E and x = M·2^e; scale both to integers.
    let (ee, k) = (dec.exp10, dec.exp10.min(e));
    let mut l = Big::from_digits(&dec.digits);
    l.mul_pow5(ee.max(0) as u64);
    l.shl((ee - k) as u64);
    let mut r = Big(vec![m as u32, (m >> 32) as u32]);
    r.mul_pow5((-ee).max(0) as u64);
    r.shl((e - k) as u64);
    l.cmp(&r)
}

/// Little-endian base-2^32 unsigned integer, just enough for exact decimal comparison.
struct Big(Vec<u32>);

impl Big {
    fn from_digits(d: &[u8]) -> Big {
        let mut b = Big(vec![0]);
        for &x in d {
            b.mul_add_small(10, x as u32);
        }
        b
    }
    fn mul_add_small(&mut self, k: u32, add: u32) {
        let mut carry = add as u64;
        for limb in &mut self.0 {
            let v = *limb as u64 * k as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }
    fn mul_pow5(&mut self, mut n: u64) {
        while n > 0 {
            let step = n.min(13); // 5^13 < 2^32
            self.mul_add_small(5u32.pow(step as u32), 0);
            n -= step;
        }
    }
    fn shl(&mut self, n: u64) {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        if bits != 0 {
            let mut carry = 0u32;
            for limb in &mut self.0 {
                let v = ((*limb as u64) << bits) | carry as u64;
                *limb = v as u32;
                carry = (v >> 32) as u32;
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, limbs));
    }
    fn cmp(&self, other: &Big) -> Ordering {
        let trim = |v: &[u32]| v.len() - v.iter().rev().take_while(|&&x| x == 0).count();
        let (a, b) = (&self.0[..trim(&self.0)], &other.0[..trim(&other.0)]);
        a.len()
            .cmp(&b.len())
            .then_with(|| a.iter().rev().cmp(b.iter().rev()))
    }
}

/// Format bits of `dt` as a JSON literal that [`parse`] maps back to the same bits.
///
/// bool → `true`/`false`; ints → JSON integers; floats → strings: `"nan"`/`"-nan"` for the
/// canonical NaNs, `"0x…"` for other NaNs, `"inf"`, `"-inf"`, `"-0.0"`, otherwise the
/// shortest decimal that rounds back to the same value in `dt` (fp8: the exact value).
pub fn format(dt: DType, bits: u64) -> Value {
    let bits = bits & mask(dt);
    if dt == DType::Void {
        return Value::Null;
    }
    if dt.is_bool() {
        return Value::Bool(bits != 0);
    }
    if dt.is_signed_int() {
        return Value::from(to_i128(dt, bits) as i64);
    }
    if dt.is_unsigned_int() {
        return Value::from(bits);
    }
    Value::String(float_string(dt, bits))
}

fn hex(dt: DType, bits: u64) -> String {
    format!("0x{:0w$x}", bits, w = dt.bits().div_ceil(4) as usize)
}

fn float_string(dt: DType, bits: u64) -> String {
    let sign = sign_mask(dt);
    if is_nan(dt, bits) {
        return match bits ^ canonical_nan(dt) {
            0 => "nan".into(),
            s if s == sign => "-nan".into(),
            _ => hex(dt, bits),
        };
    }
    let x = to_f64(dt, bits);
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if bits & sign != 0 {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = match dt {
        DType::Float32 => format!("{:e}", f32::from_bits(bits as u32)),
        DType::Float64 => format!("{x:e}"),
        // fp8 values have few digits: show them exactly (448, not its shortest "450").
        DType::Fp8E4M3 | DType::Fp8E5M2 => format!("{x:e}"),
        // Shortest correctly rounded digit string that rounds back to the same bits.
        _ => (0..17)
            .map(|p| format!("{x:.p$e}"))
            .find(|s| parse_string(dt, s) == Ok(bits))
            .unwrap_or_else(|| format!("{x:e}")),
    };
    pretty(&sci)
}

/// Turn Rust's `d.ddde±x` into plain notation when the exponent is moderate.
fn pretty(sci: &str) -> String {
    let Some((mant, exp)) = sci.split_once('e') else {
        return sci.to_string();
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return sci.to_string();
    };
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let sign = if neg { "-" } else { "" };
    if !(-5..17).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        return format!("{sign}{first}{frac}e{exp}");
    }
    let n = digits.len() as i32;
    if exp < 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else if exp + 1 >= n {
        format!("{sign}{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
    } else {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{sign}{int}.{frac}")
    }
}

/// Human display: `"1.5"`, `"-0.0"`, `"nan"`, `"nan(0x7fc00001)"`, `"255"`, `"true"`.
pub fn display(dt: DType, bits: u64) -> String {
    let bits = bits & mask(dt);
    if dt.is_float() && is_nan(dt, bits) && bits & !sign_mask(dt) != canonical_nan(dt) {
        return format!("nan({})", hex(dt, bits));
    }
    match format(dt, bits) {
        Value::String(s) => s,
        Value::Null => "void".into(),
        v => v.to_string(),
    }
}

#[cfg(test)]
mod tests {

    /// Decimals just past a rounding boundary of the dtype, where the boundary itself is the
    /// f64 next to the decimal's f64 (found by review; derived exactly with Python's
    /// `fractions`): the decimal's side of the boundary decides, not the boundary's tie.
    #[test]
    fn decimals_next_to_a_boundary_round_from_their_side() {
        use serde_json::json;
        let p = |dt, s: &str| parse(dt, &json!(s)).unwrap();
        assert_eq!(p(DType::Float32, "1.0000000596046449"), 0x3f800001);
        assert_eq!(p(DType::Float16, "1.00048828125000017"), 0x3c01);
        assert_eq!(p(DType::BFloat16, "1.00390625000000017"), 0x3f81);
        assert_eq!(p(DType::Float16, "65519.999999999995"), 0x7bff);
        assert_eq!(p(DType::Float16, "-1.00048828125000017"), 0xbc01);
        // The exact ties still go to even.
        assert_eq!(p(DType::Float16, "1.00048828125"), 0x3c00);
        assert_eq!(p(DType::Float16, "65520"), 0x7c00);
    }

    /// A JSON number is read from its own text (serde_json keeps it), exactly like a string.
    #[test]
    fn json_numbers_round_once_from_their_text() {
        let n: Value = serde_json::from_str("1.0000000596046449").unwrap();
        assert_eq!(parse(DType::Float32, &n).unwrap(), 0x3f800001);
        let n: Value = serde_json::from_str("-1.5432835417340557e+88").unwrap();
        assert_eq!(parse(DType::Float64, &n).unwrap(), 0xd23f0824128b2f33);
        let n: Value = serde_json::from_str("18446745173221179393").unwrap();
        assert_eq!(parse(DType::Float32, &n).unwrap(), 0x5f800001);
    }

    use super::*;
    use crate::scalar::round::tests::Rng;
    use serde_json::json;
    use DType::*;

    fn p(dt: DType, v: Value) -> Result<u64, String> {
        parse(dt, &v)
    }

    #[test]
    fn format_parse_round_trip_random_bits() {
        let mut rng = Rng(21);
        for dt in DType::ALL {
            let n = if dt.bits() <= 16 {
                1u64 << dt.bits()
            } else {
                200_000
            };
            for k in 0..n {
                let bits = if dt.bits() <= 16 {
                    k
                } else {
                    rng.next() & mask(dt)
                };
                let v = format(dt, bits);
                let text = v.to_string();
                // Through JSON text too, as a case file would carry it.
                let back: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(parse(dt, &back), Ok(bits), "{dt} {bits:#x} -> {text}");
            }
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format(Bool, 1), json!(true));
        assert_eq!(format(Int8, 0x80), json!(-128));
        assert_eq!(format(UInt64, u64::MAX), json!(18446744073709551615u64));
        assert_eq!(format(Int64, 1 << 63), json!(-9223372036854775808i64));
        assert_eq!(format(Float32, 0x3fc0_0000), json!("1.5"));
        assert_eq!(format(Float32, 0x3f80_0000), json!("1.0"));
        assert_eq!(format(Float32, 0x3dcc_cccd), json!("0.1"));
        assert_eq!(format(Float32, 1), json!("1e-45"));
        assert_eq!(format(Float32, 0x7f7f_ffff), json!("3.4028235e38"));
        assert_eq!(format(Float32, 0x8000_0000), json!("-0.0"));
        assert_eq!(format(Float32, 0x7fc0_0000), json!("nan"));
        assert_eq!(format(Float32, 0xffc0_0000), json!("-nan"));
        assert_eq!(format(Float32, 0x7fc0_0001), json!("0x7fc00001"));
        assert_eq!(format(Float32, 0xff80_0000), json!("-inf"));
        assert_eq!(format(Float16, 0x2e66), json!("0.1")); // shortest in float16, not 0.0999755859375
        assert_eq!(format(Float16, 0x7bff), json!("65500.0"));
        assert_eq!(format(Float16, 0x0001), json!("6e-8"));
        assert_eq!(format(Float16, 0x7c01), json!("0x7c01"));
        assert_eq!(format(BFloat16, 0x3dcd), json!("0.1"));
        assert_eq!(format(Fp8E4M3, 0x7e), json!("448.0")); // fp8 values are shown exactly
        assert_eq!(format(Fp8E4M3, 0x7f), json!("nan"));
        assert_eq!(format(Fp8E5M2, 0x7f), json!("0x7f"));
        assert_eq!(format(Float64, 0x3fb9_9999_9999_999a), json!("0.1"));
        assert_eq!(format(Float64, 1), json!("5e-324"));
        assert_eq!(
            format(Float64, 1e16f64.to_bits()),
            json!("10000000000000000.0")
        );
        assert_eq!(format(Float64, 1e17f64.to_bits()), json!("1e17"));
        assert_eq!(
            format(Float64, (-1.25e-300f64).to_bits()),
            json!("-1.25e-300")
        );
        assert_eq!(format(Float32, 0x4b18_9680), json!("10000000.0"));
        assert_eq!(format(Float32, 0x3727_c5ac), json!("0.00001"));
        assert_eq!(format(Float32, 0x3686_37bd), json!("4e-6"));
        assert_eq!(display(Float32, 0x7fc0_0001), "nan(0x7fc00001)");
        assert_eq!(display(Float32, 0xffc0_0000), "-nan");
        assert_eq!(display(Float32, 0x3fc0_0000), "1.5");
        assert_eq!(display(Float32, 0x8000_0000), "-0.0");
        assert_eq!(display(UInt8, 255), "255");
        assert_eq!(display(Bool, 0), "false");
    }

    #[test]
    fn parses() {
        assert_eq!(p(Bool, json!(true)), Ok(1));
        assert_eq!(p(Bool, json!(0)), Ok(0));
        assert_eq!(p(Bool, json!(1)), Ok(1));
        assert_eq!(p(Bool, json!("0x1")), Ok(1));
        assert_eq!(p(UInt64, json!(18446744073709551615u64)), Ok(u64::MAX));
        assert_eq!(p(Int64, json!(-9223372036854775808i64)), Ok(1 << 63));
        assert_eq!(p(Int8, json!(-1)), Ok(0xff));
        assert_eq!(p(Int8, json!("0xff")), Ok(0xff));
        assert_eq!(p(Float16, json!("0x3c00")), Ok(0x3c00));
        assert_eq!(p(Float32, json!("0x7fc00001")), Ok(0x7fc0_0001));
        assert_eq!(p(Float32, json!(1)), Ok(0x3f80_0000));
        assert_eq!(p(Float32, json!(0.1)), Ok(0x3dcc_cccd));
        assert_eq!(p(Float32, json!("0.1")), Ok(0x3dcc_cccd));
        assert_eq!(p(Float32, json!(16777217)), Ok(0x4b80_0000)); // tie to even
        assert_eq!(p(Float32, json!(18446744073709551615u64)), Ok(0x5f80_0000));
        assert_eq!(p(Float32, json!("-0.0")), Ok(0x8000_0000));
        assert_eq!(p(Float32, json!(-0.0)), Ok(0x8000_0000));
        assert_eq!(p(Float32, json!("1e-40")), Ok(71362)); // subnormal
        assert_eq!(p(Float32, json!("1e-50")), Ok(0));
        assert_eq!(p(Float32, json!("-1e-50")), Ok(0x8000_0000));
        assert_eq!(p(Float32, json!("1e39")), Ok(0x7f80_0000));
        assert_eq!(p(Float32, json!("inf")), Ok(0x7f80_0000));
        assert_eq!(p(Float32, json!("-inf")), Ok(0xff80_0000));
        assert_eq!(p(Float32, json!("nan")), Ok(0x7fc0_0000));
        assert_eq!(p(Float32, json!("-nan")), Ok(0xffc0_0000));
        assert_eq!(p(Float64, json!("0.1")), Ok(0x3fb9_9999_9999_999a));
        assert_eq!(p(Float64, json!("1e400")), Ok(0x7ff0_0000_0000_0000));
        assert_eq!(p(Fp8E4M3, json!("1e400")), Ok(0x7e)); // finite: saturates
        assert_eq!(p(Fp8E4M3, json!(1000)), Ok(0x7e));
        assert_eq!(p(Fp8E4M3, json!("nan")), Ok(0x7f));
        assert_eq!(p(Fp8E4M3, json!("-nan")), Ok(0xff));
        assert_eq!(p(Fp8E5M2, json!("-inf")), Ok(0xfc));
        assert_eq!(p(Float16, json!("65520")), Ok(0x7c00));
        assert_eq!(p(Float16, json!(".5")), Ok(0x3800));
        assert_eq!(p(Float16, json!("5.")), Ok(0x4500));
        assert_eq!(p(Float16, json!("+2E+1")), Ok(0x4d00));
        assert_eq!(p(Float16, json!("0.000")), Ok(0));
    }

    #[test]
    fn decimals_round_once_at_midpoints() {
        // float16 midpoint between 1 and 1 + 2^-10 is 1.00048828125 exactly.
        assert_eq!(p(Float16, json!("1.00048828125")), Ok(0x3c00)); // tie to even
        assert_eq!(
            p(Float16, json!("1.000488281250000000000000000001")),
            Ok(0x3c01)
        );
        assert_eq!(
            p(Float16, json!("1.000488281249999999999999999999")),
            Ok(0x3c00)
        );
        assert_eq!(
            p(Float16, json!("-1.000488281250000000000000000001")),
            Ok(0xbc01)
        );
        // Midpoint between 1 + 2^-10 and 1 + 2^-9 ties up to the even 1 + 2^-9.
        assert_eq!(p(Float16, json!("1.00146484375")), Ok(0x3c02));
        assert_eq!(
            p(Float16, json!("1.00146484374999999999999999")),
            Ok(0x3c01)
        );
        // Overflow threshold of float16: 65520 ties to inf, anything below stays finite.
        assert_eq!(
            p(Float16, json!("65519.9999999999999999999999")),
            Ok(0x7bff)
        );
        // Half the smallest float32 subnormal, 2^-150, and a hair above it.
        let half_min = "7.00649232162408535461864791644958065640130970938257885878534141944895541342930300743319094181060791015625e-46";
        assert_eq!(p(Float32, json!(half_min)), Ok(0));
        assert_eq!(
            p(
                Float32,
                json!(format!("{}1e-46", &half_min[..half_min.len() - 4]))
            ),
            Ok(1)
        );
        // bfloat16 midpoint 1 + 2^-8 = 1.00390625.
        assert_eq!(p(BFloat16, json!("1.00390625")), Ok(0x3f80));
        assert_eq!(
            p(BFloat16, json!("1.0039062500000000000000000000000000001")),
            Ok(0x3f81)
        );
        assert_eq!(p(BFloat16, json!("100390625e-8")), Ok(0x3f80));
        assert_eq!(
            p(
                BFloat16,
                json!("0.100390625000000000000000000000000000001e1")
            ),
            Ok(0x3f81)
        );
    }

    /// Exact decimal expansions of random rounding boundaries (midpoints between neighbours),
    /// nudged far below f64 precision: f64 parsing alone would land on the boundary itself.
    #[test]
    fn decimal_boundaries_random() {
        let mut rng = Rng(22);
        for dt in [Float16, BFloat16, Fp8E4M3, Fp8E5M2, Float32] {
            for _ in 0..3000 {
                let b = rng.next() & mask(dt) & !sign_mask(dt);
                let next = b + 1;
                if is_nan(dt, b) || is_nan(dt, next) || !to_f64(dt, next).is_finite() {
                    continue;
                }
                let m = (to_f64(dt, b) + to_f64(dt, next)) / 2.0; // exact in f64
                let neg = rng.next() & 1 == 1;
                let sign = if neg { "-" } else { "" };
                // {:.1100e} prints every digit of the binary value exactly, then zeros.
                let exact = format!("{m:.1100e}");
                let (mant, exp) = exact.split_once('e').unwrap();
                let digits: Vec<u8> = mant.bytes().filter(|c| *c != b'.').collect();
                let above = format!(
                    "{sign}{}.{}1e{exp}",
                    digits[0] as char,
                    std::str::from_utf8(&digits[1..]).unwrap()
                );
                let mut d = digits.clone();
                let mut i = d.len() - 1;
                while d[i] == b'0' {
                    d[i] = b'9';
                    i -= 1;
                }
                d[i] -= 1;
                let below = format!(
                    "{sign}{}.{}e{exp}",
                    d[0] as char,
                    std::str::from_utf8(&d[1..]).unwrap()
                );
                let s = if neg { sign_mask(dt) } else { 0 };
                let tie = if b & 1 == 0 { b } else { next };
                assert_eq!(
                    p(dt, json!(format!("{sign}{exact}"))),
                    Ok(s | tie),
                    "{dt} tie {m:e}"
                );
                assert_eq!(p(dt, json!(above)), Ok(s | next), "{dt} above {m:e}");
                assert_eq!(p(dt, json!(below)), Ok(s | b), "{dt} below {m:e}");
            }
        }
    }

    #[test]
    fn arbitrary_strings_do_not_panic() {
        let mut rng = Rng(23);
        let alphabet = b"0123456789.eE+-xXnaifNAI ";
        for _ in 0..200_000 {
            let len = (rng.next() % 12) as usize;
            let s: String = (0..len)
                .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize] as char)
                .collect();
            for dt in DType::ALL {
                if let Ok(bits) = parse(dt, &json!(s)) {
                    assert_eq!(bits & !mask(dt), 0, "{dt} {s:?}");
                }
            }
        }
    }

    #[test]
    fn errors() {
        let e = |dt: DType, v: Value| p(dt, v).unwrap_err();
        assert_eq!(e(UInt8, json!(300)), "300 does not fit uint8");
        assert_eq!(e(UInt8, json!(-1)), "-1 does not fit uint8");
        assert_eq!(e(Int8, json!(128)), "128 does not fit int8");
        assert_eq!(
            e(Int64, json!(9223372036854775808u64)),
            "9223372036854775808 does not fit int64"
        );
        assert_eq!(
            e(Float32, json!([1])),
            "expected a number or string for float32, found [1]"
        );
        assert!(e(Float32, json!(null)).contains("expected a number or string"));
        assert!(e(Float32, json!(true)).contains("expected a number or string"));
        assert!(e(Int32, json!(1.5)).contains("expected an integer"));
        assert!(e(Int32, json!("12")).contains("expected an integer"));
        assert!(e(Int32, json!(true)).contains("expected an integer"));
        assert!(e(Int32, json!({"a": 1})).contains("expected an integer"));
        assert!(e(UInt64, json!(1e30)).contains("does not fit"));
        assert!(e(Bool, json!(2)).contains("not a bool"));
        assert!(e(Bool, json!("true")).contains("expected true, false, 0 or 1"));
        assert!(e(Float16, json!("0x10000")).contains("does not fit in the 16 bits"));
        assert!(e(UInt8, json!("0x100")).contains("does not fit"));
        assert!(e(Bool, json!("0x2")).contains("does not fit"));
        assert!(e(Float32, json!("0x")).contains("bad hex"));
        assert!(e(Float32, json!("0xzz")).contains("bad hex"));
        assert!(e(Float32, json!("0x+1")).contains("bad hex"));
        assert!(e(Float64, json!("0x1ffffffffffffffff")).contains("bad hex"));
        assert!(e(Float32, json!("abc")).contains("expected a decimal"));
        assert!(e(Float32, json!("1e")).contains("expected a decimal"));
        assert!(e(Float32, json!("1.2.3")).contains("expected a decimal"));
        assert!(e(Float32, json!(".")).contains("expected a decimal"));
        assert!(e(Float32, json!("")).contains("expected a decimal"));
        assert!(e(Float32, json!(" 1")).contains("expected a decimal"));
        assert!(e(Fp8E4M3, json!("inf")).contains("has no infinity"));
        assert!(e(Void, json!(0)).contains("void"));
        assert!(e(Float32, json!("1".repeat(3000))).contains("longer than"));
        // Zero-padded hex is fine.
        assert_eq!(p(Float16, json!("0x00003c00")), Ok(0x3c00));
        assert_eq!(p(UInt8, json!("0x00")), Ok(0));
        // Huge exponents do not hang or overflow.
        assert_eq!(p(Float32, json!("1e99999999999999999999")), Ok(0x7f80_0000));
        assert_eq!(p(Float32, json!("1e-99999999999999999999")), Ok(0));
    }
}
