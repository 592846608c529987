//! Scalar element types. Names and sizes follow tinygrad's `dtype.py` (0.14).

use std::fmt;
use std::str::FromStr;

/// A storable element type. `Void` is the dtype of effects (STORE, SINK).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Void,
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    /// OCP fp8 E4M3 ("fn": no infinities, one NaN pattern per sign, max 448).
    Fp8E4M3,
    /// OCP fp8 E5M2 (IEEE-like: infinities and NaNs, max 57344).
    Fp8E5M2,
    Float16,
    BFloat16,
    Float32,
    Float64,
}

/// The binary layout of a floating-point dtype.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FloatFormat {
    pub exp_bits: u32,
    pub man_bits: u32,
    /// IEEE-style: all-ones exponent encodes inf/NaN. False for E4M3, where only S.1111.111 is NaN.
    pub has_inf: bool,
}

impl DType {
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::Int8,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::UInt8,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Fp8E4M3,
        DType::Fp8E5M2,
        DType::Float16,
        DType::BFloat16,
        DType::Float32,
        DType::Float64,
    ];

    /// tinygrad's name for the dtype (as printed by `str(dtypes.x)` without the prefix).
    pub fn name(self) -> &'static str {
        match self {
            DType::Void => "void",
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::Int16 => "int16",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::UInt16 => "uint16",
            DType::UInt32 => "uint32",
            DType::UInt64 => "uint64",
            DType::Fp8E4M3 => "fp8e4m3",
            DType::Fp8E5M2 => "fp8e5m2",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// Bits of storage per element (bool is stored in one byte but has 1 bit of meaning).
    pub fn bits(self) -> u32 {
        match self {
            DType::Void => 0,
            DType::Bool => 1,
            DType::Int8 | DType::UInt8 | DType::Fp8E4M3 | DType::Fp8E5M2 => 8,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 16,
            DType::Int32 | DType::UInt32 | DType::Float32 => 32,
            DType::Int64 | DType::UInt64 | DType::Float64 => 64,
        }
    }

    /// Bytes per element in a buffer.
    pub fn itemsize(self) -> usize {
        (self.bits() as usize).div_ceil(8)
    }

    pub fn is_float(self) -> bool {
        self.float_format().is_some()
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64
        )
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64
        )
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    pub fn float_format(self) -> Option<FloatFormat> {
        let (exp_bits, man_bits, has_inf) = match self {
            DType::Fp8E4M3 => (4, 3, false),
            DType::Fp8E5M2 => (5, 2, true),
            DType::Float16 => (5, 10, true),
            DType::BFloat16 => (8, 7, true),
            DType::Float32 => (8, 23, true),
            DType::Float64 => (11, 52, true),
            _ => return None,
        };
        Some(FloatFormat {
            exp_bits,
            man_bits,
            has_inf,
        })
    }

    /// Smallest and largest value of an integer dtype (bool: 0..1).
    pub fn int_range(self) -> Option<(i128, i128)> {
        if self.is_bool() {
            return Some((0, 1));
        }
        if !self.is_int() {
            return None;
        }
        let b = self.bits();
        Some(if self.is_signed_int() {
            (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
        } else {
            (0, (1i128 << b) - 1)
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype '{0}' (expected one of bool, int8..int64, uint8..uint64, fp8e4m3, fp8e5m2, float16, bfloat16, float32, float64)")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Accept tinygrad's aliases too ("half", "float", "dtypes.float32").
        let s = s.strip_prefix("dtypes.").unwrap_or(s);
        Ok(match s {
            "void" => DType::Void,
            "bool" => DType::Bool,
            "int8" | "char" => DType::Int8,
            "int16" | "short" => DType::Int16,
            "int32" | "int" => DType::Int32,
            "int64" | "long" => DType::Int64,
            "uint8" | "uchar" => DType::UInt8,
            "uint16" | "ushort" => DType::UInt16,
            "uint32" | "uint" => DType::UInt32,
            "uint64" | "ulong" => DType::UInt64,
            "fp8e4m3" | "float8_e4m3" => DType::Fp8E4M3,
            "fp8e5m2" | "float8_e5m2" => DType::Fp8E5M2,
            "float16" | "half" => DType::Float16,
            "bfloat16" => DType::BFloat16,
            "float32" | "float" => DType::Float32,
            "float64" | "double" => DType::Float64,
            _ => return Err(UnknownDType(s.to_string())),
        })
    }
}

impl serde::Serialize for DType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for DType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dt in DType::ALL {
            assert_eq!(dt.name().parse::<DType>().unwrap(), dt);
        }
        assert_eq!("half".parse::<DType>().unwrap(), DType::Float16);
        assert!("float128".parse::<DType>().is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(DType::Int8.int_range(), Some((-128, 127)));
        assert_eq!(DType::UInt64.int_range(), Some((0, u64::MAX as i128)));
        assert_eq!(DType::Float32.int_range(), None);
        assert_eq!(DType::BFloat16.itemsize(), 2);
        assert_eq!(DType::Bool.itemsize(), 1);
    }
}
