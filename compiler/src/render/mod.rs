//! Renderers: kernel-level [`Program`](uopkit_interp::kernel::Program)s → source text for a
//! backend's compiler.
//!
//! * [`c`]: one C translation unit per list of programs, bit-exact with the oracle's scalar
//!   semantics (`uopkit_interp::scalar`) when compiled with `-ffp-contract=off`.

pub mod c;

pub use c::{c_symbol, c_unit, render_c};
