//! The op vocabulary: tinygrad 0.14's tensor-level ops plus every ALU op.

use std::fmt;
use std::str::FromStr;

macro_rules! ops {
    ($($(#[$attr:meta])* $name:ident),* $(,)?) => {
        /// An operation. The spelling (`ADD`, `STORE`, …) is tinygrad's `Ops` enum name.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(clippy::upper_case_acronyms, non_camel_case_types)]
        pub enum Op { $($(#[$attr])* $name),* }

        impl Op {
            pub const ALL: &'static [Op] = &[$($(#[$attr])* Op::$name),*];
            pub fn name(self) -> &'static str {
                match self { $($(#[$attr])* Op::$name => stringify!($name)),* }
            }
        }

        impl FromStr for Op {
            type Err = UnknownOp;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let s = s.strip_prefix("Ops.").unwrap_or(s);
                match s {
                    $($(#[$attr])* stringify!($name) => Ok(Op::$name),)*
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

#[rustfmt::skip]
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
    // a test-only ALU op proving the "Adding an op" recipe (ARCHITECTURE.md)
    #[cfg(feature = "test-op")] ABSDIFF,
    // kernel level (programs made by the compiler's lowering; see interp::kernel)
    RANGE, END, INDEX, LOAD, SPECIAL, BARRIER,
);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown op '{0}'")]
pub struct UnknownOp(pub String);

impl Op {
    /// An ALU op of one source (arity from the op table, `ir::table`).
    pub fn is_unary_alu(self) -> bool {
        self.info().is_some_and(|i| i.arity == 1)
    }

    pub fn is_binary_alu(self) -> bool {
        self.info().is_some_and(|i| i.arity == 2)
    }

    pub fn is_ternary_alu(self) -> bool {
        self.info().is_some_and(|i| i.arity == 3)
    }

    /// An op with an entry in the op table.
    pub fn is_alu(self) -> bool {
        self.info().is_some()
    }

    pub fn is_comparison(self) -> bool {
        self.info().is_some_and(|i| i.is_comparison())
    }

    pub fn is_movement(self) -> bool {
        matches!(
            self,
            Op::RESHAPE | Op::EXPAND | Op::PERMUTE | Op::PAD | Op::SHRINK | Op::FLIP
        )
    }

    /// Ops that only appear in kernel-level programs, never in tensor graphs.
    pub fn is_kernel_only(self) -> bool {
        matches!(
            self,
            Op::RANGE | Op::END | Op::INDEX | Op::LOAD | Op::SPECIAL | Op::BARRIER
        )
    }

    /// The ops REDUCE and ALLREDUCE accept (tinygrad's `GroupOp.Reduce`): those with a
    /// reduction identity in the op table.
    pub fn is_reduce_op(self) -> bool {
        self.info().is_some_and(|i| i.reduce.is_some())
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
