//! uopkit's oracle: the UOp IR, its verifier and an exact interpreter of tensor graphs.
//!
//! Pipeline inside this crate: [`ir`] (the graph) → [`verify`] (the spec: shapes, dtypes,
//! devices) → [`eval`] (the exact interpreter, built on [`scalar`] semantics).
//! [`tensor`] is a builder shaped like tinygrad's `Tensor` that produces graphs.

pub mod bounds;
pub mod error;
pub mod eval;
pub mod ir;
pub mod kernel;
pub mod scalar;
pub mod tensor;
pub mod verify;

pub use error::{Error, Result};
