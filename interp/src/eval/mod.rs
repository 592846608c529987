//! The exact interpreter of tensor graphs: the definition of meaning.
//!
//! Nodes are evaluated once each, sources first (node ids are a topological order). Storage
//! is versioned (see [`storage`]), multi-device values keep one component per device, and
//! every element is computed by [`crate::scalar`]. Undefined behaviour stops evaluation
//! with the node and the element; reads of unwritten memory travel as poison and are
//! reported when they reach an output.
//!
//! Values are held compactly ([`Compact`]: raw bits, 4 bytes per element for dtypes of up
//! to 32 bits, and a poison list only where something was never written); the public
//! [`Value`] form is built on demand. The memory the evaluation needs is estimated and
//! checked against a budget before anything is allocated ([`budget`], `docs/oracle-memory.md`).

pub mod budget;
mod fast;
pub mod movement;
pub mod order;
pub mod storage;
pub mod value;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::error::{Error, Result};
use crate::ir::{Arg, DType, DeviceSpec, Graph, NodeId, Op, ReduceOrder};
use crate::scalar::{self, Ub};
use crate::verify::{storage_view, Verified};
use storage::{Version, Versions};
pub use value::{Column, Compact, Data, Elem, Value, Words};

/// Initial contents of one buffer: one list per device component; None = never written.
pub type BufferInit = Vec<Vec<Option<u64>>>;

/// Initial contents of one buffer in compact form: one column per device component.
pub type ColumnInit = Vec<Column>;

/// The outcome of evaluating a graph: the value of every evaluated node.
pub struct Evaluation {
    values: Vec<Option<Rc<Compact>>>,
    /// The public form of a value, built the first time it is asked for.
    public: Vec<OnceCell<Box<Value>>>,
    /// The device tuples of multi-device nodes (to name the device in errors).
    devices: BTreeMap<NodeId, DeviceSpec>,
}

impl Evaluation {
    /// The value of `id` in the public form (built on first use: one [`Elem`] per element).
    pub fn value(&self, id: NodeId) -> Option<&Value> {
        let v = self.values.get(id.index())?.as_deref()?;
        Some(self.public[id.index()].get_or_init(|| Box::new(v.to_value())))
    }

    /// The value of `id` in the evaluator's compact form (no copy).
    pub fn compact(&self, id: NodeId) -> Option<&Compact> {
        self.values.get(id.index()).and_then(|v| v.as_deref())
    }

    /// The error for an output whose element was never written, if any.
    fn check_output(&self, g: &Graph, id: NodeId) -> Result<&Compact> {
        let v = self.compact(id).ok_or_else(|| Error::Eval {
            node: id,
            op: g.node(id).op,
            reason: "node has no value (it is void or was not evaluated)".into(),
        })?;
        if let Some((c, i, Elem::Uninit { buffer, index })) = v.first_uninit() {
            return Err(Error::Ub {
                node: id,
                op: g.node(id).op,
                element: i,
                kind: Ub::UninitializedRead,
                origin: Some((buffer, index)),
                device: device_of(self.devices.get(&id), v.multi, c),
            });
        }
        Ok(v)
    }

    /// The value of `id` as an observable output: an element that was never written is
    /// undefined behaviour here (like a sanitizer reporting the use of poison).
    pub fn output(&self, g: &Graph, id: NodeId) -> Result<&Value> {
        self.check_output(g, id)?;
        self.value(id).ok_or_else(|| Error::Eval {
            node: id,
            op: g.node(id).op,
            reason: "node has no value".into(),
        })
    }

    /// [`Evaluation::output`] in the compact form (no per-element copy).
    pub fn output_compact(&self, g: &Graph, id: NodeId) -> Result<&Compact> {
        self.check_output(g, id)
    }
}

/// The (position, name) of component `c` of a multi-device value, for errors.
fn device_of(spec: Option<&DeviceSpec>, multi: bool, c: usize) -> Option<(usize, String)> {
    if !multi {
        return None;
    }
    let name = spec
        .and_then(|s| s.devices().get(c))
        .map_or_else(|| format!("component {c}"), |d| d.to_string());
    Some((c, name))
}

/// How to evaluate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The memory budget in bytes; None: `UOPKIT_MEMORY_LIMIT`, else the default
    /// ([`budget::default_limit`]).
    pub memory_limit: Option<u64>,
}

/// Evaluates everything `roots` depend on. `inputs` gives the initial contents of BUFFER
/// nodes; a buffer missing from it starts uninitialized. The memory budget comes from
/// `UOPKIT_MEMORY_LIMIT` (see [`budget`]).
pub fn evaluate(
    g: &Graph,
    ver: &Verified,
    inputs: &BTreeMap<NodeId, BufferInit>,
    roots: &[NodeId],
) -> Result<Evaluation> {
    evaluate_with(g, ver, inputs, roots, &Options::default())
}

/// [`evaluate`] with explicit options. The memory estimate is checked before anything is
/// allocated: a graph over the budget is refused with [`Error::Memory`].
pub fn evaluate_with(
    g: &Graph,
    ver: &Verified,
    inputs: &BTreeMap<NodeId, BufferInit>,
    roots: &[NodeId],
    opts: &Options,
) -> Result<Evaluation> {
    // A graph verified within looser limits (`Limits::COMPILE`, for compilation) is
    // re-verified within the oracle's: the oracle keeps every value, so its caps apply.
    if ver.limits() != crate::verify::Limits::ORACLE {
        let again = crate::verify::verify(g)?;
        return evaluate_with(g, &again, inputs, roots, opts);
    }
    let limit = limit(g, roots, opts)?;
    let order = g.reachable(roots);
    let poisoned = |id: NodeId| {
        inputs
            .get(&id)
            .is_none_or(|init| init.iter().any(|c| c.iter().any(Option::is_none)))
    };
    budget::check(g, ver, &poisoned, &order, roots, limit)?;
    let mut cols: BTreeMap<NodeId, ColumnInit> = BTreeMap::new();
    for &id in &order {
        if let Some(init) = inputs.get(&id) {
            let dt = ver.info(id).dtype;
            let comps = init
                .iter()
                .map(|c| {
                    Column::build_with(dt, c.len(), |i| {
                        c[i].map_or(
                            Elem::Uninit {
                                buffer: id,
                                index: i,
                            },
                            Elem::Bits,
                        )
                    })
                })
                .collect();
            cols.insert(id, comps);
        }
    }
    run(g, ver, cols, &order)
}

/// [`evaluate_with`] taking the inputs in compact form (moved into the evaluation, so the
/// caller does not keep a second copy).
pub fn evaluate_columns(
    g: &Graph,
    ver: &Verified,
    inputs: BTreeMap<NodeId, ColumnInit>,
    roots: &[NodeId],
    opts: &Options,
) -> Result<Evaluation> {
    // A graph verified within looser limits (`Limits::COMPILE`, for compilation) is
    // re-verified within the oracle's: the oracle keeps every value, so its caps apply.
    if ver.limits() != crate::verify::Limits::ORACLE {
        let again = crate::verify::verify(g)?;
        return evaluate_columns(g, &again, inputs, roots, opts);
    }
    let limit = limit(g, roots, opts)?;
    let order = g.reachable(roots);
    let poisoned = |id: NodeId| {
        inputs
            .get(&id)
            .is_none_or(|init| init.iter().any(|c| c.has_poison()))
    };
    budget::check(g, ver, &poisoned, &order, roots, limit)?;
    run(g, ver, inputs, &order)
}

fn limit(g: &Graph, roots: &[NodeId], opts: &Options) -> Result<u64> {
    match opts.memory_limit {
        Some(l) => Ok(l),
        None => budget::limit_from_env().map_err(|reason| {
            let node = roots.first().copied().unwrap_or(NodeId(0));
            Error::Config {
                node,
                op: g.node(node).op,
                variable: budget::ENV,
                reason,
            }
        }),
    }
}

fn run(
    g: &Graph,
    ver: &Verified,
    inputs: BTreeMap<NodeId, ColumnInit>,
    order: &[NodeId],
) -> Result<Evaluation> {
    let mut ev = Evaluator {
        g,
        ver,
        inputs,
        values: vec![None; g.len()],
        versions: Versions::default(),
        states: BTreeMap::new(),
        devices: BTreeMap::new(),
        summaries: vec![None; g.len()],
    };
    for &id in order {
        ev.eval_node(id)?;
    }
    let public = (0..ev.values.len()).map(|_| OnceCell::new()).collect();
    Ok(Evaluation {
        values: ev.values,
        public,
        devices: ev.devices,
    })
}

type Comps = Vec<Rc<Column>>;

/// What a storage root (BUFFER/PARAM/AFTER) reads: a buffer version, seen through a view.
#[derive(Clone)]
struct ViewState {
    version: Version<Comps>,
    /// The buffer element of each view element (None: the identity).
    map: Option<Rc<Vec<u32>>>,
    shape: Vec<usize>,
}

struct Evaluator<'a> {
    g: &'a Graph,
    ver: &'a Verified,
    inputs: BTreeMap<NodeId, ColumnInit>,
    values: Vec<Option<Rc<Compact>>>,
    versions: Versions<Comps>,
    states: BTreeMap<NodeId, ViewState>,
    devices: BTreeMap<NodeId, DeviceSpec>,
    /// Per STORE/GROUP/SINK/AFTER: the newest store per buffer among the stores it stands
    /// for ([`storage::stores_in`]), so an AFTER does not walk nested dependencies again.
    summaries: Vec<Option<Rc<storage::Summary>>>,
}

impl Evaluator<'_> {
    fn val(&self, id: NodeId) -> Result<Rc<Compact>> {
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

    /// UB at element `element` of component `c` of node `id` (naming the device of a
    /// multi-device value).
    fn ub(&self, id: NodeId, multi: bool, c: usize, element: usize, kind: Ub) -> Error {
        Error::Ub {
            node: id,
            op: self.g.node(id).op,
            element,
            kind,
            origin: None,
            device: device_of(self.ver.info(id).device.as_ref(), multi, c),
        }
    }

    fn compact(&self, id: NodeId, multi: bool, comps: Comps) -> Compact {
        let info = self.ver.info(id);
        Compact {
            dtype: info.dtype,
            shape: info.shape.clone(),
            multi,
            comps,
        }
    }

    fn eval_node(&mut self, id: NodeId) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let info = self.ver.info(id);
        if let Some(d @ DeviceSpec::Multi(_)) = &info.device {
            self.devices.insert(id, d.clone());
        }
        let v: Option<Compact> = match n.op {
            Op::BUFFER => {
                let version = self.initial_version(id)?;
                let state = ViewState {
                    shape: vec![info.shape[0]],
                    version,
                    map: None,
                };
                let v = self.view_value(&state);
                self.states.insert(id, state);
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
                Some(self.compact(
                    id,
                    false,
                    vec![Rc::new(Column::from_bits(info.dtype, [bits]))],
                ))
            }
            Op::STORE => {
                self.eval_store(id)?;
                self.summaries[id.index()] = Some(Rc::new(self.versions.store_summary(id)));
                None
            }
            Op::AFTER => match storage_view(g, n.src[0]) {
                Some((root, chain)) => {
                    let base = self.root_state(root)?;
                    let deps = self.summary_of(&n.src[1..]);
                    self.summaries[id.index()] = Some(deps.clone());
                    let version =
                        self.versions
                            .after_summary(g, id, base.version.clone(), &deps)?;
                    let mut state = self.through(base, &chain)?;
                    state.version = version;
                    let v = self.view_value(&state);
                    self.states.insert(id, state);
                    Some(v)
                }
                None => {
                    self.summaries[id.index()] = Some(self.summary_of(&n.src[1..]));
                    Some((*self.val(n.src[0])?).clone())
                }
            },
            Op::SINK | Op::GROUP => {
                self.summaries[id.index()] = Some(self.summary_of(&n.src));
                None
            }
            Op::CONTIGUOUS | Op::DETACH => Some((*self.val(n.src[0])?).clone()),
            Op::COPY => {
                let x = self.val(n.src[0])?;
                let Arg::Device(target) = &n.arg else {
                    return Err(self.eval_err(id, "COPY without a device".into()));
                };
                let v = match (x.multi, target) {
                    (false, DeviceSpec::Multi(ds)) => {
                        let c = x.comps.first().cloned().unwrap_or_default();
                        self.compact(id, true, vec![c; ds.len()])
                    }
                    (multi, _) => self.compact(id, multi, x.comps.clone()),
                };
                Some(v)
            }
            Op::MSELECT => {
                let x = self.val(n.src[0])?;
                let Arg::Index(i) = n.arg else {
                    return Err(self.eval_err(id, "MSELECT without an index".into()));
                };
                let c = x.comps.get(i).cloned().ok_or_else(|| {
                    self.eval_err(id, format!("MSELECT {i} of {} components", x.comps.len()))
                })?;
                Some(self.compact(id, false, vec![c]))
            }
            Op::MSTACK => {
                let comps = n
                    .src
                    .iter()
                    .map(|&s| Ok(self.val(s)?.comps.first().cloned().unwrap_or_default()))
                    .collect::<Result<Vec<_>>>()?;
                Some(self.compact(id, true, comps))
            }
            Op::UNSHARD => {
                let x = self.val(n.src[0])?;
                let Arg::Axis(axis) = n.arg else {
                    return Err(self.eval_err(id, "UNSHARD without an axis".into()));
                };
                let elems: Vec<Vec<Elem>> = x.comps.iter().map(|c| c.to_elems()).collect();
                let col = Column::from_elems(x.dtype, &concat(&x.shape, axis, &elems));
                Some(self.compact(id, false, vec![Rc::new(col)]))
            }
            Op::ALLREDUCE => {
                let x = self.val(n.src[0])?;
                let Arg::AllReduce { op, .. } = n.arg else {
                    return Err(self.eval_err(id, "ALLREDUCE without an op".into()));
                };
                let numel = x.comps.first().map_or(0, |c| c.len());
                let acc = Column::build(info.dtype, numel, |i| {
                    let mut a = x.comps[0].get(i);
                    for c in &x.comps[1..] {
                        a = alu_elem(op, info.dtype, &[a, c.get(i)])
                            .map_err(|k| self.ub(id, false, 0, i, k))?;
                    }
                    Ok(a)
                })?;
                let acc = Rc::new(acc);
                Some(self.compact(id, true, vec![acc; x.comps.len()]))
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
                let red_n: usize = x.shape[..axes.min(x.shape.len())].iter().product();
                let comps = x
                    .comps
                    .iter()
                    .enumerate()
                    .map(|(c, comp)| {
                        self.reduce_column(
                            id, x.multi, c, op, info.dtype, comp, out_n, red_n, order,
                        )
                        .map(Rc::new)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Some(self.compact(id, x.multi, comps))
            }
            Op::CAST | Op::BITCAST => {
                let x = self.val(n.src[0])?;
                let (from, to) = (x.dtype, info.dtype);
                let comps = x
                    .comps
                    .iter()
                    .enumerate()
                    .map(|(c, comp)| {
                        let stored = comp.words().len();
                        let mut col = Column::build(to, stored, |i| match comp.get(i) {
                            Elem::Bits(b) if n.op == Op::CAST => scalar::cast(from, to, b)
                                .map(Elem::Bits)
                                .map_err(|k| self.ub(id, x.multi, c, i, k)),
                            Elem::Bits(b) => {
                                scalar::bitcast(from, to, b).map(Elem::Bits).ok_or_else(|| {
                                    self.eval_err(id, format!("cannot bitcast {from} to {to}"))
                                })
                            }
                            poison => Ok(poison),
                        })?;
                        if comp.is_splat() {
                            col = col.splat_to(comp.len());
                        }
                        Ok(Rc::new(col))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Some(self.compact(id, x.multi, comps))
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

    /// The summary of the stores that `deps` stand for.
    fn summary_of(&self, deps: &[NodeId]) -> Rc<storage::Summary> {
        let mut parts = deps
            .iter()
            .filter_map(|d| self.summaries[d.index()].as_ref());
        let Some(first) = parts.next() else {
            return Rc::new(BTreeMap::new());
        };
        let mut acc: Option<storage::Summary> = None;
        for p in parts {
            let a = acc.get_or_insert_with(|| (**first).clone());
            self.versions.merge(a, p);
        }
        match acc {
            Some(a) => Rc::new(a),
            None => first.clone(),
        }
    }

    fn root_state(&self, root: NodeId) -> Result<ViewState> {
        self.states
            .get(&root)
            .cloned()
            .ok_or_else(|| self.eval_err(root, "storage not evaluated".into()))
    }

    /// `state` seen through the movement nodes `chain` (innermost first): the index map is
    /// composed once per node, so a chain of views costs its length, not its square.
    fn through(&self, mut state: ViewState, chain: &[NodeId]) -> Result<ViewState> {
        for &m in chain {
            let mn = self.g.node(m);
            let shape = crate::verify::movement_shape(mn.op, &mn.arg, &state.shape)
                .map_err(|r| self.eval_err(m, r))?;
            if mn.op != Op::RESHAPE {
                let map: Vec<u32> = match &state.map {
                    Some(m) => m.as_ref().clone(),
                    None => (0..state.shape.iter().product::<usize>() as u32).collect(),
                };
                let moved = movement::apply(mn.op, &mn.arg, &state.shape, &map, &u32::MAX);
                if moved.contains(&u32::MAX) {
                    return Err(self.eval_err(m, "a view of storage cannot pad".into()));
                }
                state.map = Some(Rc::new(moved));
            }
            state.shape = shape;
        }
        Ok(state)
    }

    fn initial_version(&mut self, id: NodeId) -> Result<Version<Comps>> {
        let info = self.ver.info(id);
        let ncomp = info.device.as_ref().map_or(1, |d| d.devices().len());
        let size = info.shape[0];
        let comps: Comps = match self.inputs.remove(&id) {
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
                // Moved in: a dense input column becomes the initial version without a copy.
                init.into_iter().map(|c| Rc::new(c.into_dense())).collect()
            }
            None => {
                let c = Rc::new(Column::uninit(info.dtype, id, size));
                vec![c; ncomp]
            }
        };
        Ok(Version {
            buffer: id,
            made_by: None,
            comps: Rc::new(comps),
        })
    }

    /// The value a storage root reads.
    fn view_value(&self, state: &ViewState) -> Compact {
        let buf = self.ver.info(state.version.buffer);
        let multi = matches!(buf.device, Some(DeviceSpec::Multi(_)));
        let comps: Comps = state
            .version
            .comps
            .iter()
            .map(|c| match &state.map {
                None => c.clone(),
                Some(m) => Rc::new(c.gather(m)),
            })
            .collect();
        let comps = if multi {
            comps
        } else {
            comps.into_iter().take(1).collect()
        };
        Compact {
            dtype: buf.dtype,
            shape: state.shape.clone(),
            multi,
            comps,
        }
    }

    /// Applies movement node `m` to `x` (padding reads zero).
    fn move_value(&self, m: NodeId, x: &Compact) -> Compact {
        let n = self.g.node(m);
        let shape = crate::verify::movement_shape(n.op, &n.arg, &x.shape).unwrap_or_default();
        let out_len: usize = shape.iter().product();
        let comps = x
            .comps
            .iter()
            .map(|c| {
                if n.op == Op::RESHAPE && !c.is_splat() {
                    c.clone()
                } else {
                    Rc::new(c.movement(n.op, &n.arg, &x.shape, out_len))
                }
            })
            .collect();
        Compact {
            dtype: x.dtype,
            shape,
            multi: x.multi,
            comps,
        }
    }

    fn eval_store(&mut self, id: NodeId) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let (root, chain) = storage_view(g, n.src[0])
            .ok_or_else(|| self.eval_err(id, "STORE target is not storage".into()))?;
        let base = self.root_state(root)?;
        let size = base.version.comps.first().map_or(0, |c| c.len());
        let target = self.through(base, &chain)?;
        let value = self.val(n.src[1])?;
        let numel: usize = target.shape.iter().product();
        let scalar_value = value.shape.is_empty() && !target.shape.is_empty();
        let ncomp = target.version.comps.len();
        let dt = self.ver.info(target.version.buffer).dtype;
        let mut comps: Comps = Vec::with_capacity(ncomp);
        for (c, old) in target.version.comps.iter().enumerate() {
            let src = match (value.multi, value.comps.len()) {
                (false, _) => &value.comps[0],
                (true, k) if k == ncomp => &value.comps[c],
                (true, _) => {
                    return Err(
                        self.eval_err(id, "STORE between values on different device tuples".into())
                    )
                }
            };
            let get = |i: usize| src.get(if scalar_value { 0 } else { i });
            let col: Rc<Column> = if numel == size {
                // The store covers the whole buffer (its views are injective): the old
                // contents, and their poison, are replaced without being copied first.
                match &target.map {
                    None if !scalar_value && src.len() == size => src.clone(),
                    None => Rc::new(Column::build_with(dt, size, get)),
                    Some(m) => {
                        let mut inv = vec![0u32; size];
                        for (i, &t) in m.iter().enumerate() {
                            inv[t as usize] = i as u32;
                        }
                        Rc::new(Column::build_with(dt, size, |t| get(inv[t] as usize)))
                    }
                }
            } else {
                let mut col = old.dense();
                match &target.map {
                    None => (0..numel).for_each(|i| col.set(i, get(i))),
                    Some(m) => m
                        .iter()
                        .enumerate()
                        .for_each(|(i, &t)| col.set(t as usize, get(i))),
                }
                col.tidy();
                Rc::new(col)
            };
            comps.push(col);
        }
        self.versions.record_store(id, &target.version, comps);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn reduce_column(
        &self,
        id: NodeId,
        multi: bool,
        c: usize,
        op: Op,
        dt: DType,
        comp: &Column,
        out_n: usize,
        red_n: usize,
        order: &ReduceOrder,
    ) -> Result<Column> {
        let dense;
        let comp = if comp.is_repeat() {
            dense = comp.dense();
            &dense
        } else {
            comp
        };
        if let Some(col) = fast::reduce(op, dt, comp, out_n, red_n, order) {
            return Ok(col);
        }
        // The reduced elements of output o, in row-major order, folded in the declared order
        // (sequential unless a compiler recorded a split).
        Column::build(dt, out_n, |o| {
            order::fold_with(op, dt, red_n, |r| comp.get(r * out_n + o), order)
                .map_err(|k| self.ub(id, multi, c, o, k))
        })
    }

    fn eval_alu(&self, id: NodeId, srcs: &[Rc<Compact>]) -> Result<Compact> {
        let n = self.g.node(id);
        let info = self.ver.info(id);
        let operand_dt = if n.op == Op::WHERE {
            srcs[1].dtype
        } else {
            srcs[0].dtype
        };
        let numel: usize = info.shape.iter().product();
        let multi = matches!(info.device, Some(DeviceSpec::Multi(_)));
        let ncomp = srcs.iter().map(|s| s.comps.len()).max().unwrap_or(1);
        let mut comps = Vec::with_capacity(ncomp);
        for c in 0..ncomp {
            // Repeats (EXPANDed values) are expanded here; splats stay broadcasts.
            let dense: Vec<Option<Column>> = srcs
                .iter()
                .map(|s| {
                    let col = &s.comps[if s.comps.len() == 1 { 0 } else { c }];
                    col.is_repeat().then(|| col.dense())
                })
                .collect();
            let cols: Vec<&Column> = srcs
                .iter()
                .zip(&dense)
                .map(|(s, d)| match d {
                    Some(d) => d,
                    None => s.comps[if s.comps.len() == 1 { 0 } else { c }].as_ref(),
                })
                .collect();
            // An operand of shape () broadcasts; so does a splat column.
            let strides: Vec<usize> = srcs
                .iter()
                .zip(&cols)
                .map(|(s, col)| if s.shape.is_empty() { 0 } else { col.stride() })
                .collect();
            let all_splat = strides.iter().all(|&s| s == 0);
            let len = if all_splat { numel.min(1) } else { numel };
            let col = match fast::alu(n.op, operand_dt, info.dtype, &cols, &strides, len) {
                Some(col) => col,
                None => {
                    let mut operands = vec![Elem::Bits(0); srcs.len()];
                    Column::build(info.dtype, len, |i| {
                        for (k, col) in cols.iter().enumerate() {
                            operands[k] = col.get(i * strides[k]);
                        }
                        alu_elem(n.op, operand_dt, &operands)
                            .map_err(|k| self.ub(id, multi, c, i, k))
                    })?
                }
            };
            let col = if all_splat && numel > 1 {
                col.splat_to(numel)
            } else {
                col
            };
            comps.push(Rc::new(col));
        }
        let comps = if multi {
            comps
        } else {
            comps.into_iter().take(1).collect()
        };
        Ok(Compact {
            dtype: info.dtype,
            shape: info.shape.clone(),
            multi,
            comps,
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

pub use crate::ir::table::reduce_identity;
