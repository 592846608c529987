//! The UOp DAG: nodes are interned in a [`Graph`], so structurally equal nodes are one node
//! (hash-consing) and a node reference is a cheap copyable [`NodeId`].

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use super::device::DeviceSpec;
use super::dtype::DType;
use super::op::Op;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// The argument of a node. Which variant an op takes is documented in `docs/ir.md` and
/// checked by the verifier.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    None,
    /// BUFFER / PARAM: a flat storage of `size` elements on `device`. `slot` makes two buffers
    /// with the same size distinct nodes (tinygrad's ParamArg.slot).
    Buffer {
        slot: u32,
        size: usize,
        device: DeviceSpec,
    },
    /// CONST: the value's bits in the node's dtype (low bits of the u64, zero-extended).
    Const(u64),
    /// COPY: the target device(s).
    Device(DeviceSpec),
    /// RESHAPE: the new shape. EXPAND: the new leading dims (EXPAND only prepends).
    Shape(Vec<usize>),
    /// PERMUTE: the permutation.
    Perm(Vec<usize>),
    /// PAD: per axis (offset, new_size). SHRINK: per axis (offset, size).
    Window {
        offsets: Vec<usize>,
        sizes: Vec<usize>,
    },
    /// FLIP: per axis.
    Flip(Vec<bool>),
    /// REDUCE: reduce the first `axes` axes with `op` (ADD, MUL or MAX), folding in `order`
    /// (sequential unless a compiler recorded how it split the reduction).
    Reduce {
        op: Op,
        axes: usize,
        order: super::ReduceOrder,
    },
    /// ALLREDUCE: reduce across `devices` with `op`.
    AllReduce {
        op: Op,
        devices: Vec<super::device::Device>,
    },
    /// MSELECT: the device index.
    Index(usize),
    /// UNSHARD: the sharded axis.
    Axis(usize),
    /// CALL: a name for reports.
    Name(String),
    /// A kernel-level node in the compiler's kernel graphs: the linear program's argument,
    /// and a tag that keeps otherwise equal nodes distinct (two register accumulators of
    /// one size are two buffers). Never in a tensor graph (the verifier rejects it).
    Kernel(KArg, u32),
}

/// The argument of a kernel-level instruction (see `crate::kernel`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KArg {
    None,
    Param(u32),
    Reg(usize),
    Const(u64),
    Axis(u32),
    /// A SPECIAL's launch dimension name (`gidx0`, `lidx1`, `idx0`).
    Special(String),
    /// A BUFFER in workgroup-shared (local) memory of `size` elements.
    Local(usize),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub op: Op,
    pub dtype: DType,
    pub src: Vec<NodeId>,
    pub arg: Arg,
}

/// An arena of interned nodes. Sources always precede their users (ids are a topological
/// order), so a graph built through [`Graph::add`] cannot contain a cycle.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    /// Hash-consing: each node's hash (SipHash with this graph's random keys, computed once
    /// per added node) → the newest node with that hash; `same_hash` links it to the older
    /// ones. The nodes are stored once (in `nodes`), and growing the table never hashes a
    /// node again.
    interned: HashMap<u64, NodeId, BuildHasherDefault<Prehashed>>,
    same_hash: Vec<Option<NodeId>>,
    keys: RandomState,
    /// Per node: whether it is a view of storage (BUFFER/PARAM, or AFTER, RESHAPE, PERMUTE,
    /// SHRINK, FLIP or DETACH of one). A structural property, kept so that finding a view's
    /// storage never walks a whole chain of assigns.
    storage: Vec<bool>,
}

impl Graph {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node, or returns the existing node that is structurally equal.
    /// Panics only on a programming error: a source id that is not in this graph.
    pub fn add(&mut self, node: Node) -> NodeId {
        let hash = self.keys.hash_one(&node);
        let head = self.interned.get(&hash).copied();
        let mut cur = head;
        while let Some(id) = cur {
            if self.nodes[id.index()] == node {
                return id;
            }
            cur = self.same_hash[id.index()];
        }
        assert!(
            node.src.iter().all(|s| s.index() < self.nodes.len()),
            "source of a new node must already be in the graph"
        );
        let id = NodeId(self.nodes.len() as u32);
        let storage = match node.op {
            Op::BUFFER | Op::PARAM => true,
            Op::AFTER | Op::DETACH | Op::RESHAPE | Op::PERMUTE | Op::SHRINK | Op::FLIP => {
                node.src.first().is_some_and(|s| self.storage[s.index()])
            }
            _ => false,
        };
        self.storage.push(storage);
        self.nodes.push(node);
        self.same_hash.push(head);
        self.interned.insert(hash, id);
        id
    }

    /// Whether `id` is a view of storage (see the `storage` field).
    pub fn is_storage(&self, id: NodeId) -> bool {
        self.storage.get(id.index()).copied().unwrap_or(false)
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// All node ids in topological order (sources first).
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    /// The nodes reachable from `roots`, in topological order.
    pub fn reachable(&self, roots: &[NodeId]) -> Vec<NodeId> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack: Vec<NodeId> = roots.to_vec();
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut seen[id.index()], true) {
                continue;
            }
            stack.extend(self.node(id).src.iter().copied());
        }
        self.ids().filter(|id| seen[id.index()]).collect()
    }
}

/// The hasher of the interning table, whose keys are hashes already.
#[derive(Clone, Copy, Debug, Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the key is a u64); fold anything else in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structurally_equal_nodes_are_one_node() {
        let mut g = Graph::new();
        let c = |g: &mut Graph| {
            g.add(Node {
                op: Op::CONST,
                dtype: DType::Int32,
                src: vec![],
                arg: Arg::Const(3),
            })
        };
        let a = c(&mut g);
        let b = c(&mut g);
        assert_eq!(a, b);
        let s1 = g.add(Node {
            op: Op::ADD,
            dtype: DType::Int32,
            src: vec![a, b],
            arg: Arg::None,
        });
        let s2 = g.add(Node {
            op: Op::ADD,
            dtype: DType::Int32,
            src: vec![a, a],
            arg: Arg::None,
        });
        assert_eq!(s1, s2);
        assert_eq!(g.len(), 2);
        assert_eq!(g.reachable(&[s1]), vec![a, s1]);
    }
}
