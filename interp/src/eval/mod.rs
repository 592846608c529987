//! The exact interpreter of tensor graphs: the definition of meaning.
//!
//! Nodes are evaluated once each, sources first (node ids are a topological order). Storage
//! is versioned (see [`storage`]), multi-device values keep one component per device, and
//! every element is computed by [`crate::scalar`]. Undefined behaviour stops evaluation
//! with the node and the element; reads of unwritten memory travel as poison and are
//! reported when they reach an output.

pub mod movement;
pub mod order;
pub mod storage;
pub mod value;

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::ir::{Arg, DType, DeviceSpec, Graph, NodeId, Op};
use crate::scalar::{self, Ub};
use crate::verify::{storage_view, Verified};
use storage::{Version, Versions};
pub use value::{Data, Elem, Value};

/// Initial contents of one buffer: one list per device component; None = never written.
pub type BufferInit = Vec<Vec<Option<u64>>>;

/// The outcome of evaluating a graph: the value of every evaluated node.
pub struct Evaluation {
    values: Vec<Option<Rc<Value>>>,
}

impl Evaluation {
    pub fn value(&self, id: NodeId) -> Option<&Value> {
        self.values.get(id.index()).and_then(|v| v.as_deref())
    }

    /// The value of `id` as an observable output: an element that was never written is
    /// undefined behaviour here (like a sanitizer reporting the use of poison).
    pub fn output(&self, g: &Graph, id: NodeId) -> Result<&Value> {
        let v = self.value(id).ok_or_else(|| Error::Eval {
            node: id,
            op: g.node(id).op,
            reason: "node has no value (it is void or was not evaluated)".into(),
        })?;
        if let Some((c, i, Elem::Uninit { buffer, index })) = v.first_uninit() {
            return Err(Error::Ub {
                node: id,
                op: g.node(id).op,
                element: c * v.shape.iter().product::<usize>() + i,
                kind: Ub::UninitializedRead,
                origin: Some((buffer, index)),
            });
        }
        Ok(v)
    }
}

/// Evaluates everything `roots` depend on. `inputs` gives the initial contents of BUFFER
/// nodes; a buffer missing from it starts uninitialized.
pub fn evaluate(
    g: &Graph,
    ver: &Verified,
    inputs: &BTreeMap<NodeId, BufferInit>,
    roots: &[NodeId],
) -> Result<Evaluation> {
    let mut ev = Evaluator {
        g,
        ver,
        inputs,
        values: vec![None; g.len()],
        versions: Versions::default(),
        states: BTreeMap::new(),
    };
    for id in g.reachable(roots) {
        ev.eval_node(id)?;
    }
    Ok(Evaluation { values: ev.values })
}

struct Evaluator<'a> {
    g: &'a Graph,
    ver: &'a Verified,
    inputs: &'a BTreeMap<NodeId, BufferInit>,
    values: Vec<Option<Rc<Value>>>,
    versions: Versions,
    /// The buffer version each BUFFER/PARAM/AFTER storage root reads, and the movement
    /// nodes (innermost first) that turn the flat buffer into that root's view.
    states: BTreeMap<NodeId, (Version, Vec<NodeId>)>,
}

impl Evaluator<'_> {
    fn val(&self, id: NodeId) -> Result<Rc<Value>> {
        self.values[id.index()]
            .clone()
            .ok_or_else(|| self.eval_err(id, "value needed before it was computed".into()))
    }

    fn eval_err(&self, id: NodeId, reason: String) -> Error {
        Error::Eval {
            node: id,
            op: self.g.node(id).op,
            reason,
        }
    }

    fn ub(&self, id: NodeId, element: usize, kind: Ub) -> Error {
        Error::Ub {
            node: id,
            op: self.g.node(id).op,
            element,
            kind,
            origin: None,
        }
    }

    fn eval_node(&mut self, id: NodeId) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let info = self.ver.info(id);
        let value = |data: Data| {
            Some(Value {
                dtype: info.dtype,
                shape: info.shape.clone(),
                data,
            })
        };
        let v: Option<Value> = match n.op {
            Op::BUFFER => {
                let state = self.initial_version(id)?;
                let v = self.view_of(&state, &[]);
                self.states.insert(id, (state, vec![]));
                Some(v)
            }
            Op::PARAM => {
                return Err(
                    self.eval_err(id, "PARAM outside a CALL body (inline CALLs first)".into())
                )
            }
            Op::CALL => {
                return Err(self.eval_err(
                    id,
                    "CALL must be inlined before evaluation (ir::inline_calls)".into(),
                ))
            }
            Op::CONST => {
                let Arg::Const(bits) = n.arg else {
                    return Err(self.eval_err(id, "CONST without a value".into()));
                };
                value(Data::Single(vec![Elem::Bits(bits)]))
            }
            Op::STORE => {
                self.eval_store(id)?;
                None
            }
            Op::AFTER => match storage_view(g, n.src[0]) {
                Some((root, chain)) => {
                    let (base, inner) = self
                        .states
                        .get(&root)
                        .cloned()
                        .ok_or_else(|| self.eval_err(root, "storage not evaluated".into()))?;
                    let state = self.versions.after(g, id, base, &n.src[1..])?;
                    let chain: Vec<NodeId> = inner.into_iter().chain(chain).collect();
                    let v = self.view_of(&state, &chain);
                    self.states.insert(id, (state, chain));
                    Some(v)
                }
                None => Some((*self.val(n.src[0])?).clone()),
            },
            Op::SINK | Op::GROUP => None,
            Op::CONTIGUOUS | Op::DETACH => Some((*self.val(n.src[0])?).clone()),
            Op::COPY => {
                let x = self.val(n.src[0])?;
                let Arg::Device(target) = &n.arg else {
                    return Err(self.eval_err(id, "COPY without a device".into()));
                };
                let data = match (&x.data, target) {
                    (Data::Single(d), DeviceSpec::Multi(ds)) => {
                        Data::Multi(vec![d.clone(); ds.len()])
                    }
                    (data, _) => data.clone(),
                };
                value(data)
            }
            Op::MSELECT => {
                let x = self.val(n.src[0])?;
                let Arg::Index(i) = n.arg else {
                    return Err(self.eval_err(id, "MSELECT without an index".into()));
                };
                value(Data::Single(x.data.components()[i].clone()))
            }
            Op::MSTACK => {
                let comps = n
                    .src
                    .iter()
                    .map(|&s| Ok(self.val(s)?.data.components()[0].clone()))
                    .collect::<Result<Vec<_>>>()?;
                value(Data::Multi(comps))
            }
            Op::UNSHARD => {
                let x = self.val(n.src[0])?;
                let Arg::Axis(axis) = n.arg else {
                    return Err(self.eval_err(id, "UNSHARD without an axis".into()));
                };
                value(Data::Single(concat(&x.shape, axis, x.data.components())))
            }
            Op::ALLREDUCE => {
                let x = self.val(n.src[0])?;
                let Arg::AllReduce { op, .. } = n.arg else {
                    return Err(self.eval_err(id, "ALLREDUCE without an op".into()));
                };
                let comps = x.data.components();
                let mut acc = comps[0].clone();
                for c in &comps[1..] {
                    for (i, (a, b)) in acc.iter_mut().zip(c).enumerate() {
                        *a = alu_elem(op, info.dtype, &[*a, *b]).map_err(|k| self.ub(id, i, k))?;
                    }
                }
                value(Data::Multi(vec![acc; comps.len()]))
            }
            op if op.is_movement() => {
                let x = self.val(n.src[0])?;
                Some(self.move_value(id, &x))
            }
            Op::REDUCE => {
                let x = self.val(n.src[0])?;
                let Arg::Reduce {
                    op,
                    axes,
                    ref order,
                } = n.arg
                else {
                    return Err(self.eval_err(id, "REDUCE without an op".into()));
                };
                let out_n: usize = info.shape.iter().product();
                let red_n: usize = x.shape[..axes].iter().product();
                // The reduced elements of output o, in row-major order, folded in the
                // declared order (sequential unless a compiler recorded a split).
                let mut xs = Vec::with_capacity(red_n);
                let data = x.data.map(|comp| {
                    (0..out_n)
                        .map(|o| {
                            xs.clear();
                            xs.extend((0..red_n).map(|r| comp[r * out_n + o]));
                            order::fold(op, info.dtype, &xs, order).map_err(|k| self.ub(id, o, k))
                        })
                        .collect::<Result<Vec<_>>>()
                })?;
                value(data)
            }
            Op::CAST | Op::BITCAST => {
                let x = self.val(n.src[0])?;
                let (from, to) = (x.dtype, info.dtype);
                let data = x.data.map(|comp| {
                    comp.iter()
                        .enumerate()
                        .map(|(i, e)| match *e {
                            Elem::Bits(b) if n.op == Op::CAST => scalar::cast(from, to, b)
                                .map(Elem::Bits)
                                .map_err(|k| self.ub(id, i, k)),
                            Elem::Bits(b) => {
                                scalar::bitcast(from, to, b).map(Elem::Bits).ok_or_else(|| {
                                    self.eval_err(id, format!("cannot bitcast {from} to {to}"))
                                })
                            }
                            poison => Ok(poison),
                        })
                        .collect::<Result<Vec<_>>>()
                })?;
                value(data)
            }
            op if op.is_alu() => {
                let srcs = n
                    .src
                    .iter()
                    .map(|&s| self.val(s))
                    .collect::<Result<Vec<_>>>()?;
                Some(self.eval_alu(id, &srcs)?)
            }
            op => {
                return Err(self.eval_err(id, format!("{op} cannot be evaluated in a tensor graph")))
            }
        };
        self.values[id.index()] = v.map(Rc::new);
        Ok(())
    }

    fn initial_version(&self, id: NodeId) -> Result<Version> {
        let info = self.ver.info(id);
        let ncomp = info.device.as_ref().map_or(1, |d| d.devices().len());
        let size = info.shape[0];
        let comps = match self.inputs.get(&id) {
            Some(init) => {
                if init.len() != ncomp || init.iter().any(|c| c.len() != size) {
                    return Err(self.eval_err(
                        id,
                        format!(
                            "initial contents have {} component(s) of sizes {:?}; the buffer has {ncomp} of {size}",
                            init.len(),
                            init.iter().map(|c| c.len()).collect::<Vec<_>>()
                        ),
                    ));
                }
                init.iter()
                    .map(|c| {
                        c.iter()
                            .enumerate()
                            .map(|(i, b)| {
                                b.map_or(
                                    Elem::Uninit {
                                        buffer: id,
                                        index: i,
                                    },
                                    Elem::Bits,
                                )
                            })
                            .collect()
                    })
                    .collect()
            }
            None => (0..ncomp)
                .map(|_| {
                    (0..size)
                        .map(|i| Elem::Uninit {
                            buffer: id,
                            index: i,
                        })
                        .collect()
                })
                .collect(),
        };
        Ok(Version {
            buffer: id,
            made_by: None,
            comps: Rc::new(comps),
        })
    }

    /// A buffer version seen through movement nodes (innermost first).
    fn view_of(&self, state: &Version, chain: &[NodeId]) -> Value {
        let buf = self.ver.info(state.buffer);
        let mut v = version_value(buf.dtype, state, buf.device.as_ref());
        for &m in chain {
            v = self.move_value(m, &v);
        }
        v
    }

    /// Applies movement node `m` to `x` (padding reads zero).
    fn move_value(&self, m: NodeId, x: &Value) -> Value {
        let n = self.g.node(m);
        let shape = crate::verify::movement_shape(n.op, &n.arg, &x.shape).unwrap_or_default();
        let zero = Elem::Bits(0);
        let data = match x
            .data
            .map::<()>(|c| Ok(movement::apply(n.op, &n.arg, &x.shape, c, &zero)))
        {
            Ok(d) => d,
            Err(()) => x.data.clone(),
        };
        Value {
            dtype: x.dtype,
            shape,
            data,
        }
    }

    fn eval_store(&mut self, id: NodeId) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let (root, chain) = storage_view(g, n.src[0])
            .ok_or_else(|| self.eval_err(id, "STORE target is not storage".into()))?;
        let (base, inner) = self
            .states
            .get(&root)
            .cloned()
            .ok_or_else(|| self.eval_err(root, "storage not evaluated".into()))?;
        let chain: Vec<NodeId> = inner.into_iter().chain(chain).collect();
        // Which buffer element each target element is: move the identity index list.
        let size = base.comps[0].len();
        let mut idx: Vec<Option<usize>> = (0..size).map(Some).collect();
        let mut shape = vec![size];
        for &m in &chain {
            let mn = g.node(m);
            idx = movement::apply(mn.op, &mn.arg, &shape, &idx, &None);
            shape = crate::verify::movement_shape(mn.op, &mn.arg, &shape)
                .map_err(|r| self.eval_err(m, r))?;
        }
        let value = self.val(n.src[1])?;
        let scalar_value = value.shape.is_empty() && !shape.is_empty();
        let mut comps = (*base.comps).clone();
        let ncomp = comps.len();
        for (c, comp) in comps.iter_mut().enumerate() {
            let src = match &value.data {
                Data::Single(d) => d,
                Data::Multi(ds) if ds.len() == ncomp => &ds[c],
                Data::Multi(_) => {
                    return Err(
                        self.eval_err(id, "STORE between values on different device tuples".into())
                    )
                }
            };
            for (i, target) in idx.iter().enumerate() {
                if let Some(t) = target {
                    comp[*t] = src[if scalar_value { 0 } else { i }];
                }
            }
        }
        self.versions.record_store(id, &base, comps);
        Ok(())
    }

    fn eval_alu(&self, id: NodeId, srcs: &[Rc<Value>]) -> Result<Value> {
        let n = self.g.node(id);
        let info = self.ver.info(id);
        let operand_dt = if n.op == Op::WHERE {
            srcs[1].dtype
        } else {
            srcs[0].dtype
        };
        let numel: usize = info.shape.iter().product();
        let ncomp = srcs
            .iter()
            .map(|s| s.data.components().len())
            .max()
            .unwrap_or(1);
        let mut comps = Vec::with_capacity(ncomp);
        let mut operands = vec![Elem::Bits(0); srcs.len()];
        for c in 0..ncomp {
            let mut out = Vec::with_capacity(numel);
            for i in 0..numel {
                for (k, s) in srcs.iter().enumerate() {
                    let comp =
                        &s.data.components()[if s.data.components().len() == 1 { 0 } else { c }];
                    operands[k] = comp[if s.shape.is_empty() { 0 } else { i }];
                }
                out.push(
                    alu_elem(n.op, operand_dt, &operands)
                        .map_err(|k| self.ub(id, c * numel + i, k))?,
                );
            }
            comps.push(out);
        }
        let data = if matches!(info.device, Some(DeviceSpec::Multi(_))) {
            Data::Multi(comps)
        } else {
            Data::Single(comps.pop().unwrap_or_default())
        };
        Ok(Value {
            dtype: info.dtype,
            shape: info.shape.clone(),
            data,
        })
    }
}

/// One ALU op on elements: poison in, poison out (WHERE with a defined condition only
/// looks at the chosen branch).
fn alu_elem(op: Op, dt: DType, operands: &[Elem]) -> Result<Elem, Ub> {
    if op == Op::WHERE {
        if let Elem::Bits(c) = operands[0] {
            return Ok(if c != 0 { operands[1] } else { operands[2] });
        }
    }
    let mut bits = [0u64; 3];
    for (k, e) in operands.iter().enumerate() {
        match *e {
            Elem::Bits(b) => bits[k] = b,
            poison => return Ok(poison),
        }
    }
    scalar::alu(op, dt, &bits[..operands.len()]).map(Elem::Bits)
}

/// The value a buffer version holds, as a flat value of the buffer's shape.
fn version_value(dtype: DType, state: &Version, device: Option<&DeviceSpec>) -> Value {
    let data = match device {
        Some(DeviceSpec::Multi(_)) => Data::Multi((*state.comps).clone()),
        _ => Data::Single(state.comps[0].clone()),
    };
    Value {
        dtype,
        shape: vec![state.comps[0].len()],
        data,
    }
}

/// Concatenates per-device components of `shape` along `axis` (UNSHARD's meaning).
pub fn concat<T: Clone>(shape: &[usize], axis: usize, comps: &[Vec<T>]) -> Vec<T> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis..].iter().product();
    let mut out = Vec::with_capacity(outer * inner * comps.len());
    for o in 0..outer {
        for c in comps {
            out.extend_from_slice(&c[o * inner..(o + 1) * inner]);
        }
    }
    out
}

/// The start value of a reduction (what an empty reduction gives).
pub fn reduce_identity(op: Op, dt: DType) -> u64 {
    match op {
        Op::ADD => 0,
        Op::MUL => {
            if dt.is_float() {
                scalar::round::from_f64(dt, 1.0)
            } else {
                1
            }
        }
        _ => {
            if let Some(f) = dt.float_format() {
                if f.has_inf {
                    scalar::round::from_f64(dt, f64::NEG_INFINITY)
                } else {
                    // E4M3 has no infinity: its lowest value is -448.
                    scalar::round::from_f64(dt, -448.0)
                }
            } else if dt.is_signed_int() {
                1u64 << (dt.bits() - 1)
            } else {
                0
            }
        }
    }
}
