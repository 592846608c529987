//! The oracle's error type. Every error names the node it is about, as `node N (OP)` with the
//! plain number N (never the `%N` of IR listings): the case-file id once a loader has passed the
//! error through [`Error::map_nodes`], the arena index otherwise.

use crate::ir::{NodeId, Op};
use crate::scalar::Ub;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The graph breaks the IR's rules (wrong arity, shapes, dtypes, devices, …).
    #[error("node {} ({op}): {reason}", node.0)]
    Verify {
        node: NodeId,
        op: Op,
        reason: String,
    },
    /// Evaluation reached undefined behaviour at one element of one node.
    /// For a multi-device value, `device` is the component (its position in the device tuple
    /// and the device's name) and `element` is the index within that component.
    #[error(
        "undefined behaviour at node {} ({op}), {}element {element}: {kind}{}",
        node.0,
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
        "node {} ({op}): evaluation would need an estimated {} (this node {}), over the memory limit of {} (set {} to change it)",
        node.0,
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
    #[error("node {} ({op}): {reason}", node.0)]
    Config {
        node: NodeId,
        op: Op,
        variable: &'static str,
        reason: String,
    },
    /// Two stores to one buffer that `node` reads after are not ordered (neither target is
    /// after the other); `other` is `None` for the buffer's initial contents.
    #[error(
        "node {} ({op}): stores node {} and {} to buffer node {} are not ordered (neither target is after the other)",
        node.0,
        store.0,
        other.map(|o| format!("node {}", o.0)).unwrap_or_else(|| "its initial contents".into()),
        buffer.0
    )]
    Unordered {
        node: NodeId,
        op: Op,
        store: NodeId,
        other: Option<NodeId>,
        buffer: NodeId,
    },
    /// The input is well formed but refers to something the oracle cannot evaluate.
    #[error("node {} ({op}): {reason}", node.0)]
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
            | Error::Config { node, .. }
            | Error::Unordered { node, .. } => *node,
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
            Error::Unordered {
                node,
                store,
                other,
                buffer,
                ..
            } => {
                *node = f(*node);
                *store = f(*store);
                *buffer = f(*buffer);
                if let Some(o) = other {
                    *o = f(*o);
                }
            }
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
        Some((buf, i)) => format!(" (element {i} of buffer node {} was never written)", buf.0),
        None => String::new(),
    }
}

fn device_text(device: &Option<(usize, String)>) -> String {
    match device {
        Some((i, name)) => format!("device {i} ({name}), "),
        None => String::new(),
    }
}
