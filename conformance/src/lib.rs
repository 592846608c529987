//! The conformance kit: case files (`case`, `load`, `inputs`), running them through the
//! oracle (`run`), comparing results (`compare`) and finding the corpus (`corpus`).

pub mod backend;
pub mod case;
pub mod compare;
pub mod corpus;
pub mod inputs;
pub mod load;
pub mod run;

pub use case::Case;
