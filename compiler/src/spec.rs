//! Kernel specs: what the scheduler hands to the lowering. The scheduler ([`crate::schedule`])
//! decides buffers and steps; every kernel step is a [`KernelSpec`] (a value expression stored
//! into a buffer view) over [`BufferDecl`]s, which [`crate::lower`] turns into a kernel-level
//! program. This module depends on no stage: both sides import it.

use std::collections::BTreeMap;
use std::fmt;

use uopkit_interp::ir::{Arg, DType, Device, NodeId, Op};
use uopkit_interp::verify::movement_shape;

/// A buffer of the schedule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

impl fmt::Display for BufId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}", self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BufferKind {
    /// The storage of a BUFFER node of the graph (it keeps its identity: stores write it).
    Graph(NodeId),
    /// Component `c` (on device `c` of the tuple) of a multi-device BUFFER node.
    GraphComponent(NodeId, usize),
    /// A buffer the schedule made: a realized intermediate, a COPY target, an output.
    Intermediate,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferDecl {
    pub dtype: DType,
    pub size: usize,
    pub device: Device,
    pub kind: BufferKind,
    /// After memory planning: the physical allocation this buffer lives in (buffers
    /// with the same storage never hold live data at the same time).
    pub storage: u32,
}

/// A movement step of a view (the same ops and args as the graph's movement nodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub op: Op,
    pub arg: Arg,
}

/// Which contents of a buffer a read sees.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tag {
    /// The contents before the schedule runs (graph buffers' inputs).
    Initial,
    /// The contents after this STORE.
    Store(NodeId),
    /// The contents written by planned step n (intermediate buffers).
    Made(usize),
}

/// A value available in a buffer: `buffer` at version `tag`, seen through `chain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Src {
    pub buffer: BufId,
    pub tag: Tag,
    pub chain: Vec<Move>,
}

/// A kernel expression that no graph node spells (allreduce folds, chunk slices, shard and
/// chunk placement).
/// It is evaluated at every index of the kernel's target view; every view it loads has the
/// target view's shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The element of a buffer view (0 where the view pads).
    Load(Src),
    /// An ALU op on sub-expressions; `dtype` is the result's.
    Alu {
        op: Op,
        dtype: DType,
        src: Vec<Expr>,
    },
}

impl Expr {
    /// The views the expression reads, in order.
    pub fn loads(&self) -> Vec<&Src> {
        match self {
            Expr::Load(s) => vec![s],
            Expr::Alu { src, .. } => src.iter().flat_map(|e| e.loads()).collect(),
        }
    }
}

/// What a planned kernel computes: `value` stored into `target` seen through `chain`;
/// `leaves` are the nodes of the value's expression read from buffers. When `expr` is set the
/// kernel computes it instead (and `value` only names the graph node it serves, for errors).
#[derive(Clone, Debug)]
pub struct KernelSpec {
    pub device: Device,
    pub target: BufId,
    pub target_chain: Vec<Move>,
    pub value: NodeId,
    pub leaves: BTreeMap<NodeId, Src>,
    pub expr: Option<Expr>,
}

/// The shape after applying `chain` to a flat buffer of `size` elements.
pub fn chain_shape(size: usize, chain: &[Move]) -> Result<Vec<usize>, String> {
    let mut shape = vec![size];
    for m in chain {
        shape = movement_shape(m.op, &m.arg, &shape)?;
    }
    Ok(shape)
}
