//! The compiler: rewrite → schedule → lower → render → run.

pub mod exec;
pub mod kgraph;
pub mod linearize;
pub mod lower;
pub mod optimize;
pub mod render;
pub mod rewrite;
pub mod runtime;
pub mod schedule;
