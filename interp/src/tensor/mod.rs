//! A graph builder shaped like tinygrad's `Tensor`.
//!
//! A [`Ctx`] owns the graph being built (plus the initial contents of the buffers it
//! created); a [`Tensor`] is a cheap handle: a context, a node and, for multi-device values,
//! the sharded axis. Every constructor verifies the node it adds (the verifier's rules run
//! on the new node and what it depends on), so a bad shape, axis, dtype or device comes back
//! as [`Error::Verify`] and never reaches the graph: the context's graph is always valid.
//! Such an error names the operand the failing op was applied to (the new node has no id)
//! or, for creation, the id the new node would have had; `op` is the op that failed.
//! Checking a node costs O(its sources) in the common case (the verifier runs on the node
//! over stand-ins with its sources' dtype, shape and device), so long graphs build in
//! linear time.
//!
//! Lowering follows tinygrad 0.14's front end where that is exact and simple; the places it
//! differs are documented on the methods and summarized here:
//!
//! * **dtypes**: no promotion lattice. Two tensors of different dtypes are an error (CAST
//!   first); a Rust literal ([`Scalar`]) commits to its partner's dtype like tinygrad's weak
//!   literals (`uint8 + 300` holds 44). Float-only ops (EXP2, LOG2, SIN, SQRT, RECIPROCAL,
//!   POW, FDIV, `/`) cast int and bool operands to float32 first (`least_upper_float`).
//! * **ops**: `sub` emits SUB, `neg` emits NEG (bool: `CMPNE(x, true)`), `eq` emits CMPEQ
//!   (tinygrad: `a + b*-1`, `x*-1`, `NOT(CMPNE)`; the values are identical). `div` is
//!   tinygrad's `MUL(a, RECIPROCAL(b))` (two roundings); `fdiv` emits FDIV (one rounding).
//! * **sum** does not upcast (tinygrad's `sum_acc_dtype` does): use [`Tensor::sum_acc`].
//! * **constants** (`full`, `zeros`, `ones`) are device-less CONSTs expanded to the shape,
//!   like tinygrad; storage made for a device-less value (assign to it, `clone_storage`)
//!   goes to `CPU`, tinygrad's default device here.
//! * **arange** is a BUFFER with known contents (tinygrad builds it from a cumsum).
//! * **storage**: `Tensor` handles are values. `assign` replaces the handle's node by
//!   `AFTER(target, STORE(target, value))`; other handles keep the old node and read the old
//!   contents (write-after-read). [`Tensor::latest`] reads a storage after every assign made
//!   so far through the context (what tinygrad's tensors see once realized).
//! * **multi-device**: a sharded tensor is the per-device value (MSTACK of shards); its
//!   [`Tensor::shape`] is the logical shape. Movement that would cross shards is an error.

mod creation;
mod elementwise;
mod movement;
mod multi;
mod reduce;
mod storage;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::eval::{self, BufferInit, Elem, Value};
use crate::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op};
use crate::scalar;
use crate::verify::{self, Info};

/// The graph being built and the initial contents of its buffers. Cloning a `Ctx` clones
/// the handle (both refer to one graph).
#[derive(Clone, Default)]
pub struct Ctx(Rc<RefCell<State>>);

#[derive(Default)]
struct State {
    graph: Graph,
    /// The verifier's view of every node of `graph` (same index).
    infos: Vec<Info>,
    /// Every node of `graph`, to find an existing node without adding a new one.
    known: HashMap<Node, NodeId>,
    next_slot: u32,
    inputs: BTreeMap<NodeId, BufferInit>,
    /// Per node (same index): the storage it views, if it is a view of storage.
    storage: Vec<Option<StorageOf>>,
    /// Per storage (BUFFER node): the newest STORE made into it through this context.
    last_store: HashMap<NodeId, NodeId>,
    /// The limits every constructor verifies within ([`verify::Limits::ORACLE`] unless
    /// the context was made with [`Ctx::with_limits`]); `evaluate` always uses the oracle's.
    limits: verify::Limits,
}

/// [`StorageOf`] of a node not yet added (a BUFFER's buffer is itself: `None`).
#[derive(Copy, Clone)]
struct PendingStorage {
    buffer: Option<NodeId>,
    newest: Option<NodeId>,
}

/// What a view of storage views (the same notion as [`verify::storage_view`], kept per
/// node so that long AFTER chains are not walked again and again).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct StorageOf {
    /// The BUFFER or PARAM node.
    buffer: NodeId,
    /// The newest STORE into `buffer` that the view's AFTER chain waits for directly
    /// (stores into one storage through a context are made in order, so ids order them).
    newest: Option<NodeId>,
}

/// How a multi-device tensor is laid out: over `devices`, split along `axis` (None:
/// replicated, every device holds the whole value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sharding {
    pub devices: Vec<Device>,
    pub axis: Option<usize>,
}

/// A handle on one node of a [`Ctx`].
#[derive(Clone)]
pub struct Tensor {
    ctx: Ctx,
    id: NodeId,
    /// The sharded axis of a multi-device value (None: replicated, or single-device).
    axis: Option<usize>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info();
        write!(f, "Tensor({} {} {:?}", self.id, info.dtype, self.shape())?;
        if let Some(d) = &info.device {
            write!(f, " on {d}")?;
        }
        if let Some(a) = self.axis {
            write!(f, " sharded on axis {a}")?;
        }
        write!(f, ")")
    }
}

impl Ctx {
    pub fn new() -> Ctx {
        Ctx::default()
    }

    /// A context whose constructors verify within `limits`: [`verify::Limits::COMPILE`]
    /// builds graphs for the compiler that the oracle would refuse (a 4096² matmul's
    /// product). [`Ctx::evaluate`] still verifies within the oracle's limits and refuses
    /// such a graph with its size message.
    pub fn with_limits(limits: verify::Limits) -> Ctx {
        let ctx = Ctx::default();
        ctx.0.borrow_mut().limits = limits;
        ctx
    }

    /// A copy of the graph built so far (every node of it is valid).
    pub fn graph(&self) -> Graph {
        self.0.borrow().graph.clone()
    }

    /// Runs `f` on the graph without copying it.
    pub fn with_graph<R>(&self, f: impl FnOnce(&Graph) -> R) -> R {
        f(&self.0.borrow().graph)
    }

    /// The initial contents of the buffers made with known data (`from_*`, `arange`).
    pub fn inputs(&self) -> BTreeMap<NodeId, BufferInit> {
        self.0.borrow().inputs.clone()
    }

    /// The verifier's view of a node.
    pub fn info(&self, id: NodeId) -> Info {
        self.0.borrow().infos[id.index()].clone()
    }

    pub fn len(&self) -> usize {
        self.0.borrow().graph.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `node` after checking it with the verifier's rules, or returns the equal node
    /// that is already there. On error nothing is added; the error names the node's first
    /// source (the operand the op was applied to) and the op that could not be built.
    pub fn add_node(&self, node: Node) -> Result<NodeId> {
        self.0.borrow_mut().add(node)
    }

    /// Wraps any node (verified like [`Ctx::add_node`]) as a tensor. A multi-device node is
    /// taken as replicated.
    pub fn raw(&self, node: Node) -> Result<Tensor> {
        let id = self.add_node(node)?;
        Ok(self.tensor(id, None))
    }

    /// A handle on an existing node (a multi-device node is taken as replicated unless
    /// `axis` says it is sharded).
    pub fn tensor_of(&self, id: NodeId, axis: Option<usize>) -> Result<Tensor> {
        let info = {
            let st = self.0.borrow();
            st.infos
                .get(id.index())
                .cloned()
                .ok_or_else(|| Error::Verify {
                    node: id,
                    op: Op::SINK,
                    reason: format!("{id} is not a node of this context"),
                })?
        };
        if let Some(a) = axis {
            if !matches!(info.device, Some(DeviceSpec::Multi(_))) || a >= info.shape.len() {
                return Err(Error::Verify {
                    node: id,
                    op: self.with_graph(|g| g.node(id).op),
                    reason: format!(
                        "cannot treat a value of shape {:?} on {:?} as sharded on axis {a}",
                        info.shape, info.device
                    ),
                });
            }
        }
        Ok(self.tensor(id, axis))
    }

    fn tensor(&self, id: NodeId, axis: Option<usize>) -> Tensor {
        Tensor {
            ctx: self.clone(),
            id,
            axis,
        }
    }

    fn new_slot(&self) -> u32 {
        let mut st = self.0.borrow_mut();
        st.next_slot += 1;
        st.next_slot - 1
    }

    /// Verifies the whole graph and evaluates `outs` with the oracle; one value per tensor
    /// (a multi-device tensor gives its per-device components).
    pub fn evaluate(&self, outs: &[&Tensor]) -> Result<Vec<Value>> {
        let st = self.0.borrow();
        let verified = verify::verify(&st.graph)?;
        let roots: Vec<NodeId> = outs.iter().map(|t| t.id).collect();
        let ev = eval::evaluate(&st.graph, &verified, &st.inputs, &roots)?;
        roots
            .iter()
            .map(|&r| ev.output(&st.graph, r).cloned())
            .collect()
    }

    /// Evaluates one tensor and reads it as integers (one list per device component).
    pub fn eval_ints(&self, t: &Tensor) -> Result<Vec<Vec<i128>>> {
        Ok(value_ints(&self.evaluate(&[t])?[0]))
    }

    /// Evaluates one tensor and reads it as f64 (one list per device component).
    pub fn eval_floats(&self, t: &Tensor) -> Result<Vec<Vec<f64>>> {
        Ok(value_floats(&self.evaluate(&[t])?[0]))
    }
}

impl State {
    fn add(&mut self, node: Node) -> Result<NodeId> {
        if let Some(&id) = self.known.get(&node) {
            return Ok(id);
        }
        if let Some(&s) = node.src.iter().find(|s| s.index() >= self.graph.len()) {
            return Err(Error::Verify {
                node: s,
                op: node.op,
                reason: format!("source {s} is not a node of this context"),
            });
        }
        let info = self.check(&node)?;
        let storage = self.storage_of(&node);
        let id = self.graph.add(node.clone());
        debug_assert_eq!(id.index(), self.infos.len());
        self.infos.push(info);
        self.storage.push(storage.map(|s| StorageOf {
            buffer: s.buffer.unwrap_or(id),
            newest: s.newest,
        }));
        self.known.insert(node, id);
        Ok(id)
    }

    /// The storage a (verified) node views; `buffer` None stands for the node itself.
    fn storage_of(&self, node: &Node) -> Option<PendingStorage> {
        let of = |s: NodeId| self.storage[s.index()];
        match node.op {
            Op::BUFFER | Op::PARAM => Some(PendingStorage {
                buffer: None,
                newest: None,
            }),
            Op::RESHAPE | Op::PERMUTE | Op::SHRINK | Op::FLIP | Op::DETACH => {
                of(node.src[0]).map(|s| PendingStorage {
                    buffer: Some(s.buffer),
                    newest: s.newest,
                })
            }
            Op::AFTER => of(node.src[0]).map(|s| {
                let stores = node.src[1..].iter().copied().filter(|&d| {
                    let n = self.graph.node(d);
                    n.op == Op::STORE && of(n.src[0]).map(|t| t.buffer) == Some(s.buffer)
                });
                PendingStorage {
                    buffer: Some(s.buffer),
                    newest: stores.chain(s.newest).max(),
                }
            }),
            _ => None,
        }
    }

    /// Runs the verifier on `node` without touching the graph. A node's validity depends
    /// only on what it reaches, so the verifier runs on a small graph: the node over
    /// stand-ins for its sources (fresh nodes with the same dtype, shape and device) when
    /// only the sources' [`Info`] matters, otherwise the node over everything it reaches.
    fn check(&self, node: &Node) -> Result<Info> {
        // The verifier also looks at the sources' ops (UNSHARD consumers, AFTER
        // dependencies, CALL bodies) and walks STORE targets down to their storage; stand-ins
        // reproduce that where it is known to pass, otherwise the real sources are used.
        let op_of = |s: &NodeId| self.graph.node(*s).op;
        let effect = |op: Op| matches!(op, Op::STORE | Op::CALL | Op::GROUP | Op::SINK | Op::AFTER);
        let structural = node.op == Op::CALL
            || node.src.iter().any(|s| op_of(s) == Op::UNSHARD)
            || (node.op == Op::STORE
                && node
                    .src
                    .first()
                    .is_none_or(|s| self.storage[s.index()].is_none()))
            || (node.op == Op::AFTER && !node.src.iter().skip(1).all(|s| effect(op_of(s))));
        if structural {
            self.check_in(node, self.graph.reachable(&node.src))
        } else {
            self.check_over_stand_ins(node)
        }
    }

    fn check_over_stand_ins(&self, node: &Node) -> Result<Info> {
        let mut mini = Graph::new();
        let mut src = vec![];
        for (i, &s) in node.src.iter().enumerate() {
            let info = &self.infos[s.index()];
            let dtype = info.dtype;
            let numel: usize = info.shape.iter().product();
            let add = |g: &mut Graph, op, src: Vec<NodeId>, arg| {
                g.add(Node {
                    op,
                    dtype,
                    src,
                    arg,
                })
            };
            // An AFTER dependency (checked above to be an effect) stands in as a SINK; a
            // STORE target (checked above to be a view of storage) as a reshaped BUFFER.
            let id = match &info.device {
                _ if node.op == Op::AFTER && i > 0 => mini.add(Node {
                    op: Op::SINK,
                    dtype: DType::Void,
                    src: vec![],
                    arg: Arg::None,
                }),
                _ if dtype == DType::Void => add(&mut mini, Op::SINK, vec![], Arg::None),
                None => {
                    let c = add(&mut mini, Op::CONST, vec![], Arg::Const(0));
                    if info.shape.is_empty() {
                        c
                    } else {
                        add(
                            &mut mini,
                            Op::EXPAND,
                            vec![c],
                            Arg::Shape(info.shape.clone()),
                        )
                    }
                }
                Some(device) => {
                    let b = add(
                        &mut mini,
                        Op::BUFFER,
                        vec![],
                        Arg::Buffer {
                            slot: 0,
                            size: numel,
                            device: device.clone(),
                        },
                    );
                    if info.shape == [numel] {
                        b
                    } else {
                        add(
                            &mut mini,
                            Op::RESHAPE,
                            vec![b],
                            Arg::Shape(info.shape.clone()),
                        )
                    }
                }
            };
            src.push(id);
        }
        let new = mini.add(Node {
            src,
            ..node.clone()
        });
        match verify::verify_with(&mini, &self.limits) {
            Ok(v) => Ok(v.info(new).clone()),
            Err(Error::Verify {
                node: bad,
                op,
                reason,
            }) if bad == new => Err(Error::Verify {
                node: node
                    .src
                    .first()
                    .copied()
                    .unwrap_or(NodeId(self.graph.len() as u32)),
                op,
                reason,
            }),
            // A stand-in failed (not expected: it copies a verified node's info); decide
            // on the real sources instead.
            Err(_) => self.check_in(node, self.graph.reachable(&node.src)),
        }
    }

    /// Verifies `node` over the nodes `order` (what it reaches, in topological order).
    fn check_in(&self, node: &Node, order: Vec<NodeId>) -> Result<Info> {
        let mut map: HashMap<NodeId, NodeId> = HashMap::with_capacity(order.len());
        let mut mini = Graph::new();
        for id in order {
            let mut n = self.graph.node(id).clone();
            n.src = n.src.iter().map(|s| map[s]).collect();
            let m = mini.add(n);
            map.insert(id, m);
        }
        let mut n = node.clone();
        n.src = n.src.iter().map(|s| map[s]).collect();
        let new = mini.add(n);
        match verify::verify_with(&mini, &self.limits) {
            Ok(v) => Ok(v.info(new).clone()),
            Err(Error::Verify {
                node: bad,
                op,
                reason,
            }) if bad == new => Err(Error::Verify {
                node: node
                    .src
                    .first()
                    .copied()
                    .unwrap_or(NodeId(self.graph.len() as u32)),
                op,
                reason,
            }),
            Err(e) => {
                // Not expected (the sources were verified when added): translate the ids back.
                let back: HashMap<NodeId, NodeId> = map.iter().map(|(&k, &v)| (v, k)).collect();
                Err(e.map_nodes(|m| back.get(&m).copied().unwrap_or(m)))
            }
        }
    }
}

/// A Rust literal used as an operand. It commits to its partner's dtype (tinygrad's weak
/// literals): an int wraps into an int dtype and is rounded into a float dtype; a float
/// is rounded into a float dtype and refused by an int or bool dtype; `Bits` are used as is.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    Int(i128),
    Float(f64),
    Bool(bool),
    Bits(u64),
}

impl Scalar {
    /// The dtype a literal takes when nothing else decides (tinygrad's defaults).
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Int(_) | Scalar::Bits(_) => DType::Int32,
            Scalar::Float(_) => DType::Float32,
            Scalar::Bool(_) => DType::Bool,
        }
    }

    /// The literal's bits in `dt`.
    pub fn bits(self, dt: DType) -> Result<u64, String> {
        let mask = if dt.bits() >= 64 {
            u64::MAX
        } else {
            (1u64 << dt.bits()) - 1
        };
        match self {
            Scalar::Bits(b) => {
                if b & !mask != 0 {
                    Err(format!("bits {b:#x} do not fit {dt}"))
                } else {
                    Ok(b)
                }
            }
            Scalar::Bool(b) => {
                if dt.is_float() {
                    Ok(scalar::round::from_f64(dt, b as u8 as f64))
                } else if dt == DType::Void {
                    Err("a literal cannot be void".into())
                } else {
                    Ok(b as u64)
                }
            }
            Scalar::Int(v) => {
                if dt.is_float() {
                    int_to_float(dt, v)
                } else if dt.is_bool() {
                    Ok((v != 0) as u64)
                } else if dt == DType::Void {
                    Err("a literal cannot be void".into())
                } else {
                    Ok((v as u64) & mask)
                }
            }
            Scalar::Float(f) => {
                if dt.is_float() {
                    Ok(scalar::round::from_f64(dt, f))
                } else {
                    Err(format!("float literal {f} with a {dt} tensor (no implicit promotion: cast the tensor to a float dtype first)"))
                }
            }
        }
    }
}

/// An exact int → float conversion (rounded once), through the scalar module's CAST.
fn int_to_float(dt: DType, v: i128) -> Result<u64, String> {
    let r = if let Ok(x) = i64::try_from(v) {
        scalar::cast(DType::Int64, dt, x as u64)
    } else if let Ok(x) = u64::try_from(v) {
        scalar::cast(DType::UInt64, dt, x)
    } else {
        Ok(scalar::round::from_f64(dt, v as f64))
    };
    r.map_err(|ub| format!("cannot convert {v} to {dt}: {ub}"))
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$v(x.into())
            }
        }
    )*};
}
scalar_from!(i8 => Int, i16 => Int, i32 => Int, i64 => Int, u8 => Int, u16 => Int, u32 => Int, u64 => Int, f32 => Float, f64 => Float, bool => Bool);

/// Something a binary op accepts on its right: a tensor, or a literal.
pub enum Operand {
    Tensor(Tensor),
    Scalar(Scalar),
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Operand {
        Operand::Tensor(t.clone())
    }
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Operand {
        Operand::Tensor(t)
    }
}

impl<T: Into<Scalar>> From<T> for Operand {
    fn from(x: T) -> Operand {
        Operand::Scalar(x.into())
    }
}

impl Tensor {
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The verifier's view of this node (for a sharded tensor: one shard's shape).
    pub fn info(&self) -> Info {
        self.ctx.info(self.id)
    }

    pub fn dtype(&self) -> DType {
        self.info().dtype
    }

    /// The logical shape (for a sharded tensor: the whole tensor's shape).
    pub fn shape(&self) -> Vec<usize> {
        let info = self.info();
        let mut shape = info.shape;
        if let (Some(a), Some(DeviceSpec::Multi(ds))) = (self.axis, &info.device) {
            shape[a] *= ds.len();
        }
        shape
    }

    /// The shape of the node itself: per device component for a multi-device tensor.
    pub fn local_shape(&self) -> Vec<usize> {
        self.info().shape
    }

    pub fn ndim(&self) -> usize {
        self.info().shape.len()
    }

    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// Where the value lives (None for a device-less value built from constants).
    pub fn device(&self) -> Option<DeviceSpec> {
        self.info().device
    }

    /// The layout of a multi-device tensor; None for a single-device or device-less one.
    pub fn sharding(&self) -> Option<Sharding> {
        match self.info().device {
            Some(DeviceSpec::Multi(devices)) => Some(Sharding {
                devices,
                axis: self.axis,
            }),
            _ => None,
        }
    }

    fn devices(&self) -> Option<Vec<Device>> {
        match self.info().device {
            Some(DeviceSpec::Multi(ds)) => Some(ds),
            _ => None,
        }
    }

    fn is_multi(&self) -> bool {
        matches!(self.info().device, Some(DeviceSpec::Multi(_)))
    }

    /// The op of this tensor's node.
    pub fn op(&self) -> Op {
        self.ctx.with_graph(|g| g.node(self.id).op)
    }

    /// An error about building `op` on this tensor.
    fn err(&self, op: Op, reason: impl Into<String>) -> Error {
        Error::Verify {
            node: self.id,
            op,
            reason: reason.into(),
        }
    }

    /// Adds a node whose first source is usually `self`; the result has sharded axis `axis`.
    fn emit(
        &self,
        op: Op,
        dtype: DType,
        src: Vec<NodeId>,
        arg: Arg,
        axis: Option<usize>,
    ) -> Result<Tensor> {
        let id = self.ctx.add_node(Node {
            op,
            dtype,
            src,
            arg,
        })?;
        Ok(self.ctx.tensor(id, axis))
    }

    /// A one-source node on `self` keeping the dtype.
    fn unary_node(&self, op: Op, arg: Arg, axis: Option<usize>) -> Result<Tensor> {
        self.emit(op, self.dtype(), vec![self.id], arg, axis)
    }

    /// A device-less scalar CONST of `dtype` in this tensor's context.
    fn konst(&self, dtype: DType, s: Scalar) -> Result<Tensor> {
        let bits = s.bits(dtype).map_err(|r| self.err(Op::CONST, r))?;
        const_node(&self.ctx, dtype, bits)
    }

    /// Turns an operand into a tensor; a literal takes `dtype`.
    fn operand(&self, o: Operand, dtype: DType) -> Result<Tensor> {
        match o {
            Operand::Tensor(t) => {
                if !Rc::ptr_eq(&t.ctx.0, &self.ctx.0) {
                    return Err(self.err(Op::SINK, "operands come from different contexts"));
                }
                Ok(t)
            }
            Operand::Scalar(s) => self.konst(dtype, s),
        }
    }
}

fn const_node(ctx: &Ctx, dtype: DType, bits: u64) -> Result<Tensor> {
    let id = ctx.add_node(Node {
        op: Op::CONST,
        dtype,
        src: vec![],
        arg: Arg::Const(bits),
    })?;
    Ok(ctx.tensor(id, None))
}

/// Reads a value's elements as integers (signed dtypes sign-extended; floats truncated
/// toward zero; unwritten elements as 0 — [`Ctx::evaluate`] already reports those).
pub fn value_ints(v: &Value) -> Vec<Vec<i128>> {
    v.data
        .components()
        .iter()
        .map(|c| {
            c.iter()
                .map(|e| match *e {
                    Elem::Bits(b) if v.dtype.is_float() => {
                        scalar::round::to_f64(v.dtype, b) as i128
                    }
                    Elem::Bits(b) => bits_to_i128(v.dtype, b),
                    Elem::Uninit { .. } => 0,
                })
                .collect()
        })
        .collect()
}

/// Reads a value's elements as f64 (exact for every dtype up to 53-bit integers).
pub fn value_floats(v: &Value) -> Vec<Vec<f64>> {
    v.data
        .components()
        .iter()
        .map(|c| {
            c.iter()
                .map(|e| match *e {
                    Elem::Bits(b) if v.dtype.is_float() => scalar::round::to_f64(v.dtype, b),
                    Elem::Bits(b) => bits_to_i128(v.dtype, b) as f64,
                    Elem::Uninit { .. } => f64::NAN,
                })
                .collect()
        })
        .collect()
}

fn bits_to_i128(dt: DType, b: u64) -> i128 {
    let w = dt.bits();
    if dt.is_signed_int() && w < 64 {
        let sh = 64 - w;
        (((b << sh) as i64) >> sh) as i128
    } else if dt.is_signed_int() {
        b as i64 as i128
    } else {
        b as i128
    }
}

fn check_axes(t: &Tensor, op: Op, axes: &[usize]) -> Result<()> {
    let nd = t.ndim();
    let mut seen = vec![false; nd];
    for &a in axes {
        if a >= nd {
            return Err(t.err(
                op,
                format!(
                    "axis {a} is out of range for a {nd}-d tensor of shape {:?}",
                    t.shape()
                ),
            ));
        }
        if std::mem::replace(&mut seen[a], true) {
            return Err(t.err(op, format!("axis {a} is given twice")));
        }
    }
    Ok(())
}
