//! The compiler, in stages that import only earlier ones (see ARCHITECTURE.md and
//! `tests/stage_order.rs`): scoped and rewrite (libraries) → spec → schedule → kgraph → lower →
//! optimize → linearize → render → runtime → exec, composed by `pipeline`.

pub mod exec;
pub mod kgraph;
pub mod linearize;
pub mod lower;
pub mod optimize;
pub mod pipeline;
pub mod render;
pub mod rewrite;
pub mod runtime;
pub mod schedule;
pub mod scoped;
pub mod spec;
