//! Generators of random, well-typed graphs and values, for property tests and fuzzing.
//!
//! * [`tensor`]: proptest strategies for tensor-level programs (elementwise, movement,
//!   reduce, cast, copy, clone, assign; multi-device behind a flag), built with the tensor
//!   builder and exported as [`crate::case::Case`]s. The differential fuzzer
//!   ([`crate::fuzz`]) runs them through the compiler and the oracle.
//! * [`expr`]: proptest strategies for kernel-level ALU and index expressions over loop
//!   variables (`RANGE` leaves), and their meaning according to the oracle.
//! * [`rules`]: the property every rewrite rule must have (the oracle's result before and
//!   after the rewrite is identical), with a targeted strategy per named rule.
//! * [`scalar`]: quickcheck `Arbitrary` newtypes for dtypes and scalar values, and the
//!   algebraic laws of `uopkit_interp::scalar` (in its tests).
//! * [`export`]: a graph (with buffer contents and outputs) as a case.
//!
//! Everything is deterministic given a seed ([`rules::seeded_runner`]). Inputs are generated
//! so that undefined behaviour is rare (small values, positive divisors, masked shift
//! counts); where it still happens, the oracle's UB report is the outcome (a fuzzer skips
//! such cases, the rule properties require UB on both sides).

pub mod export;
pub mod expr;
pub mod rules;
pub mod scalar;
pub mod tensor;
