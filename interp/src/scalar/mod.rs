//! Scalar semantics: the exact value of every ALU op, cast and bitcast on one element.
//!
//! Values travel as raw bits: the low `dtype.bits()` bits of a `u64`, zero-extended
//! (a signed int is stored in two's complement truncated to its width; bool is 0 or 1).
//! Every op computes its exact result and rounds once to the result dtype (round to
//! nearest, ties to even; integers wrap). Undefined behaviour is returned as [`Ub`],
//! never guessed. `docs/semantics.md` is the prose version of this module.

pub mod alu;
pub mod cast;
pub mod literal;
pub mod round;

pub use alu::alu;
pub use cast::{bitcast, cast};

/// Undefined behaviour found while computing one element.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ub {
    /// Integer CDIV/CMOD/FLOORDIV/FLOORMOD by zero.
    DivByZero,
    /// INT_MIN / -1 (and the matching modulo) of a signed integer.
    DivOverflow,
    /// A shift count that is negative or not below the bit width.
    ShiftOutOfRange,
    /// A float→int cast of NaN, ±inf, or a value whose truncation does not fit the int dtype.
    FloatToIntOutOfRange,
    /// An access outside a buffer.
    OutOfBounds,
    /// A read of storage that nothing wrote.
    UninitializedRead,
}

impl Ub {
    pub fn describe(self) -> &'static str {
        match self {
            Ub::DivByZero => "integer division or modulo by zero",
            Ub::DivOverflow => "signed integer division overflow (INT_MIN / -1)",
            Ub::ShiftOutOfRange => "shift count out of range",
            Ub::FloatToIntOutOfRange => {
                "float to int conversion of NaN, inf or an out-of-range value"
            }
            Ub::OutOfBounds => "out-of-bounds access",
            Ub::UninitializedRead => "read of uninitialized memory",
        }
    }
}

impl std::fmt::Display for Ub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}
