//! The conformance kit: case files (`case`, `load`, `inputs`), running them through the
//! oracle (`run`), comparing results (`compare`) and finding the corpus (`corpus`).

pub mod allowances;
pub mod atomic;
pub mod backend;
pub mod backends;
pub mod bench;
pub mod case;
pub mod compare;
pub mod corpus;
pub mod dot;
pub mod fuzz;
pub mod gen;
pub mod harness;
pub mod inputs;
pub mod kernel_case;
pub mod kfuzz;
pub mod load;
pub mod palette;
pub mod pass_trace;
pub mod progress;
pub mod protocol;
pub mod report;
pub mod report_html;
pub mod run;
pub mod shrink;
pub mod stages;
pub mod worker;
pub mod xfail;

pub use case::Case;
