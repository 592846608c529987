//! The compiler: rewrite → schedule → lower → render → run.

pub mod exec;
pub mod lower;
pub mod render;
pub mod rewrite;
pub mod runtime;
pub mod schedule;
