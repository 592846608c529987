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
    /// For a multi-device value, `device` is the component (its position in the device tuple
    /// and the device's name) and `element` is the index within that component.
    #[error(
        "undefined behaviour at node {node} ({op}), {}element {element}: {kind}{}",
        device_text(device),
        origin_text(origin)
    )]
    Ub {
        node: NodeId,
        op: Op,
        element: usize,
        kind: Ub,
        origin: Option<(NodeId, usize)>,
        device: Option<(usize, String)>,
    },
    /// Evaluating would need more memory than the oracle's budget allows (refused before
    /// allocating). `needed` is the estimated peak of the whole evaluation, `node_bytes` what
    /// `node` (where the running estimate first passes the limit) adds.
    #[error(
        "node {node} ({op}): evaluation would need an estimated {} (this node {}), over the memory limit of {} (set {} to change it)",
        crate::eval::budget::human(*needed),
        crate::eval::budget::human(*node_bytes),
        crate::eval::budget::human(*limit),
        crate::eval::budget::ENV
    )]
    Memory {
        node: NodeId,
        op: Op,
        needed: u64,
        node_bytes: u64,
        limit: u64,
    },
    /// A setting the oracle reads (an environment variable) has a bad value; `node` is the
    /// root whose evaluation needed it.
    #[error("node {node} ({op}): {reason}")]
    Config {
        node: NodeId,
        op: Op,
        variable: &'static str,
        reason: String,
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
            Error::Verify { node, .. }
            | Error::Ub { node, .. }
            | Error::Eval { node, .. }
            | Error::Memory { node, .. }
            | Error::Config { node, .. } => *node,
        }
    }

    /// The same error with every node id passed through `f` (used to translate arena ids
    /// into case-file ids).
    pub fn map_nodes(mut self, f: impl Fn(NodeId) -> NodeId) -> Self {
        match &mut self {
            Error::Verify { node, .. }
            | Error::Eval { node, .. }
            | Error::Memory { node, .. }
            | Error::Config { node, .. } => *node = f(*node),
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

fn device_text(device: &Option<(usize, String)>) -> String {
    match device {
        Some((i, name)) => format!("device {i} ({name}), "),
        None => String::new(),
    }
}
