//! The oracle's error type. Every error names the node it is about.

use crate::ir::{NodeId, Op};
use crate::scalar::Ub;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The graph breaks the IR's rules (wrong arity, shapes, dtypes, devices, …).
    #[error("node {node} ({op}): {reason}")]
    Verify {
        node: NodeId,
        op: Op,
        reason: String,
    },
    /// Evaluation reached undefined behaviour at one element of one node.
    #[error(
        "undefined behaviour at node {node} ({op}), element {element}: {kind}{}",
        origin_text(origin)
    )]
    Ub {
        node: NodeId,
        op: Op,
        element: usize,
        kind: Ub,
        origin: Option<(NodeId, usize)>,
    },
    /// The input is well formed but refers to something the oracle cannot evaluate.
    #[error("node {node} ({op}): {reason}")]
    Eval {
        node: NodeId,
        op: Op,
        reason: String,
    },
}

impl Error {
    /// The node the error is about.
    pub fn node(&self) -> NodeId {
        match self {
            Error::Verify { node, .. } | Error::Ub { node, .. } | Error::Eval { node, .. } => *node,
        }
    }

    /// The same error with every node id passed through `f` (used to translate arena ids
    /// into case-file ids).
    pub fn map_nodes(mut self, f: impl Fn(NodeId) -> NodeId) -> Self {
        match &mut self {
            Error::Verify { node, .. } | Error::Eval { node, .. } => *node = f(*node),
            Error::Ub { node, origin, .. } => {
                *node = f(*node);
                if let Some((o, _)) = origin {
                    *o = f(*o);
                }
            }
        }
        self
    }
}

fn origin_text(origin: &Option<(NodeId, usize)>) -> String {
    match origin {
        Some((buf, i)) => format!(" (element {i} of buffer {buf} was never written)"),
        None => String::new(),
    }
}
