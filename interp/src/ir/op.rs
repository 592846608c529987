//! The op vocabulary: tinygrad 0.14's tensor-level ops plus every ALU op.

use std::fmt;
use std::str::FromStr;

macro_rules! ops {
    ($($name:ident),* $(,)?) => {
        /// An operation. The spelling (`ADD`, `STORE`, …) is tinygrad's `Ops` enum name.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(clippy::upper_case_acronyms, non_camel_case_types)]
        pub enum Op { $($name),* }

        impl Op {
            pub const ALL: &'static [Op] = &[$(Op::$name),*];
            pub fn name(self) -> &'static str {
                match self { $(Op::$name => stringify!($name)),* }
            }
        }

        impl FromStr for Op {
            type Err = UnknownOp;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let s = s.strip_prefix("Ops.").unwrap_or(s);
                match s {
                    $(stringify!($name) => Ok(Op::$name),)*
                    // tinygrad 0.12-era names kept as aliases.
                    "RECIP" => Ok(Op::RECIPROCAL),
                    "IDIV" => Ok(Op::CDIV),
                    "MOD" => Ok(Op::CMOD),
                    "MULTI" => Ok(Op::UNSHARD),
                    "REDUCE_AXIS" => Ok(Op::REDUCE),
                    _ => Err(UnknownOp(s.to_string())),
                }
            }
        }
    };
}

ops!(
    // storage, effects and structure
    BUFFER, PARAM, CONST, COPY, STORE, AFTER, CALL, SINK, GROUP, CONTIGUOUS, DETACH,
    // multi-device
    MSELECT, MSTACK, UNSHARD, ALLREDUCE, // movement
    RESHAPE, EXPAND, PERMUTE, PAD, SHRINK, FLIP, // reduction and type changes
    REDUCE, CAST, BITCAST, // unary ALU
    EXP2, LOG2, SIN, SQRT, RECIPROCAL, NEG, TRUNC, // binary ALU
    ADD, MUL, SUB, FDIV, POW, CDIV, CMOD, FLOORDIV, FLOORMOD, MAX, SHL, SHR, AND, OR, XOR, CMPLT,
    CMPNE, CMPEQ, // ternary ALU
    WHERE, MULACC,
    // kernel level (programs made by the compiler's lowering; see interp::kernel)
    RANGE, END, INDEX, LOAD, SPECIAL, BARRIER,
);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown op '{0}'")]
pub struct UnknownOp(pub String);

impl Op {
    pub fn is_unary_alu(self) -> bool {
        matches!(
            self,
            Op::EXP2 | Op::LOG2 | Op::SIN | Op::SQRT | Op::RECIPROCAL | Op::NEG | Op::TRUNC
        )
    }

    pub fn is_binary_alu(self) -> bool {
        matches!(
            self,
            Op::ADD
                | Op::MUL
                | Op::SUB
                | Op::FDIV
                | Op::POW
                | Op::CDIV
                | Op::CMOD
                | Op::FLOORDIV
                | Op::FLOORMOD
                | Op::MAX
                | Op::SHL
                | Op::SHR
                | Op::AND
                | Op::OR
                | Op::XOR
                | Op::CMPLT
                | Op::CMPNE
                | Op::CMPEQ
        )
    }

    pub fn is_ternary_alu(self) -> bool {
        matches!(self, Op::WHERE | Op::MULACC)
    }

    pub fn is_alu(self) -> bool {
        self.is_unary_alu() || self.is_binary_alu() || self.is_ternary_alu()
    }

    pub fn is_comparison(self) -> bool {
        matches!(self, Op::CMPLT | Op::CMPNE | Op::CMPEQ)
    }

    pub fn is_movement(self) -> bool {
        matches!(
            self,
            Op::RESHAPE | Op::EXPAND | Op::PERMUTE | Op::PAD | Op::SHRINK | Op::FLIP
        )
    }

    /// The ops REDUCE and ALLREDUCE accept (tinygrad's `GroupOp.Reduce`).
    /// Ops that only appear in kernel-level programs, never in tensor graphs.
    pub fn is_kernel_only(self) -> bool {
        matches!(
            self,
            Op::RANGE | Op::END | Op::INDEX | Op::LOAD | Op::SPECIAL | Op::BARRIER
        )
    }

    pub fn is_reduce_op(self) -> bool {
        matches!(self, Op::ADD | Op::MUL | Op::MAX)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Op {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Op {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        for &op in Op::ALL {
            assert_eq!(op.name().parse::<Op>().unwrap(), op);
        }
        assert_eq!("Ops.IDIV".parse::<Op>().unwrap(), Op::CDIV);
        assert!("DEFINE_GLOBAL".parse::<Op>().is_err());
    }
}
