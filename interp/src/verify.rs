//! The verifier: the IR's spec. It infers every node's dtype, shape and device and rejects a
//! malformed graph with the node and the reason, before anything is allocated or run.

use crate::error::{Error, Result};
use crate::ir::{table, Arg, DType, DeviceSpec, Graph, NodeId, Op, ReduceOrder};

/// The largest number of elements one value may have. The oracle keeps ~24 bytes per
/// element, so this caps one value at a few GiB; larger graphs are refused up front.
pub const MAX_ELEMENTS: usize = 1 << 28;

/// A declared reduce order may split into at most this many parts, or as many as there are
/// reduced elements if that is more.
pub const MAX_REDUCE_PARTS: usize = 1024;

/// The largest number of elements all values of a graph may have together (every device's
/// component counted): the oracle keeps every node's value, so this bounds its memory at a
/// few GiB however the elements are spread over nodes.
pub const MAX_TOTAL_ELEMENTS: usize = 1 << 28;

/// The largest number of elements one value may have in a graph verified for compilation
/// ([`Limits::COMPILE`]): a value the compiler fuses into a kernel is never materialized
/// (the k×m×n product of a matmul), so only int64 index arithmetic bounds it.
pub const MAX_COMPILE_ELEMENTS: usize = 1 << 40;

/// What [`verify_with`] caps. [`verify`] checks the oracle's limits ([`Limits::ORACLE`]);
/// a graph that is compiled and not evaluated may be verified with [`Limits::COMPILE`],
/// whose caps are on what the oracle would keep, not on what a kernel computes (the
/// compiler bounds the buffers it allocates itself). Every other rule is the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most elements one value (or one BUFFER) may have.
    pub max_elements: usize,
    /// The most elements all values may have together.
    pub max_total_elements: usize,
}

impl Limits {
    /// The oracle's: [`MAX_ELEMENTS`] per value, [`MAX_TOTAL_ELEMENTS`] in all.
    pub const ORACLE: Limits = Limits {
        max_elements: MAX_ELEMENTS,
        max_total_elements: MAX_TOTAL_ELEMENTS,
    };
    /// For compilation: [`MAX_COMPILE_ELEMENTS`] per value, no cap on the total.
    pub const COMPILE: Limits = Limits {
        max_elements: MAX_COMPILE_ELEMENTS,
        max_total_elements: usize::MAX,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::ORACLE
    }
}

/// The largest one dimension may be. A dimension over [`MAX_ELEMENTS`] only fits an empty
/// value (another dimension is 0); this bound keeps the products of the non-zero dimensions
/// of such a value (strides, counts of outer and inner positions) far from overflow.
pub const MAX_DIMENSION: usize = 1 << 40;

/// The number of elements of `shape`, or None if the product overflows `usize`.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// Checks a value's shape against the limits and returns its element count: the product
/// (checked) is at most [`MAX_ELEMENTS`]; every dimension is at most [`MAX_DIMENSION`]; and
/// the product of the non-zero dimensions fits `usize`, so that every stride and every
/// prefix or suffix product an evaluator computes (even of an empty value) is exact.
pub fn check_shape(shape: &[usize]) -> Result<usize, String> {
    check_shape_within(shape, MAX_ELEMENTS)
}

/// [`check_shape`] with `max` elements in place of [`MAX_ELEMENTS`].
pub fn check_shape_within(shape: &[usize], max: usize) -> Result<usize, String> {
    if let Some((ax, &d)) = shape.iter().enumerate().find(|(_, &d)| d > MAX_DIMENSION) {
        return Err(format!(
            "shape {shape:?}: dimension {ax} is {d}, over the limit of {MAX_DIMENSION} for one dimension"
        ));
    }
    let extent = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |a, &d| a.checked_mul(d));
    if extent.is_none() {
        return Err(format!(
            "shape {shape:?}: the product of its dimensions overflows (more than {max} elements)"
        ));
    }
    match checked_numel(shape) {
        Some(n) if n <= max => Ok(n),
        _ => Err(format!(
            "value of shape {shape:?} has more than {max} elements"
        )),
    }
}

/// The product of `dims` if it is at most [`MAX_ELEMENTS`] (used for counts that are not a
/// value's size: the reduced-away part of a REDUCE, the outer positions of an UNSHARD).
fn bounded_product(dims: &[usize]) -> Option<usize> {
    checked_numel(dims).filter(|&n| n <= MAX_ELEMENTS)
}

/// What the verifier knows about a node's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub dtype: DType,
    /// The shape of the value; for a multi-device value, the shape of each component
    /// (for UNSHARD: the logical, concatenated shape).
    pub shape: Vec<usize>,
    /// None for device-less values (CONST and ALU on CONSTs) and for void nodes.
    pub device: Option<DeviceSpec>,
}

impl Info {
    /// The number of elements (saturating at `usize::MAX`; a verified value has at most
    /// [`MAX_ELEMENTS`]).
    pub fn numel(&self) -> usize {
        checked_numel(&self.shape).unwrap_or(usize::MAX)
    }
}

/// The result of verification: one [`Info`] per node of the graph.
#[derive(Clone, Debug)]
pub struct Verified {
    infos: Vec<Info>,
    limits: Limits,
}

impl Verified {
    pub fn info(&self, id: NodeId) -> &Info {
        &self.infos[id.index()]
    }

    /// The limits the graph was verified within (the evaluator takes only
    /// [`Limits::ORACLE`]).
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

/// Verifies every node of `g` (sources first) within the oracle's limits.
pub fn verify(g: &Graph) -> Result<Verified> {
    verify_with(g, &Limits::ORACLE)
}

/// Verifies every node of `g` (sources first) within `lim`.
pub fn verify_with(g: &Graph, lim: &Limits) -> Result<Verified> {
    let mut infos: Vec<Info> = Vec::with_capacity(g.len());
    let mut total: usize = 0;
    for id in g.ids() {
        let info = verify_node(g, &infos, id, lim)?;
        // Every value's shape is bounded before anything downstream (the next node's checks,
        // the evaluator) multiplies its dimensions.
        let numel = check_shape_within(&info.shape, lim.max_elements).map_err(|r| err(g, id, r))?;
        let copies = info.device.as_ref().map_or(1, |d| d.devices().len());
        total = total.saturating_add(numel.saturating_mul(copies));
        if total > lim.max_total_elements {
            let max = lim.max_total_elements;
            return Err(err(g, id, format!("the graph's values have more than {max} elements in all (the oracle keeps every value)")));
        }
        infos.push(info);
    }
    let v = Verified {
        infos,
        limits: *lim,
    };
    check_unshard_consumers(g)?;
    Ok(v)
}

fn err(g: &Graph, id: NodeId, reason: impl Into<String>) -> Error {
    Error::Verify {
        node: id,
        op: g.node(id).op,
        reason: reason.into(),
    }
}

fn void() -> Info {
    Info {
        dtype: DType::Void,
        shape: vec![],
        device: None,
    }
}

/// The storage a view reads or writes: BUFFER/PARAM (directly or through AFTER), under
/// RESHAPE/PERMUTE/SHRINK/FLIP and DETACH. Returns the root (BUFFER, PARAM or AFTER) and the
/// movement nodes from the root up to `id` (innermost first).
pub fn storage_view(g: &Graph, mut id: NodeId) -> Option<(NodeId, Vec<NodeId>)> {
    if !g.is_storage(id) {
        return None;
    }
    let mut chain = vec![];
    loop {
        let n = g.node(id);
        match n.op {
            Op::BUFFER | Op::PARAM | Op::AFTER => break,
            Op::RESHAPE | Op::PERMUTE | Op::SHRINK | Op::FLIP => {
                chain.push(id);
                id = n.src[0];
            }
            Op::DETACH => id = n.src[0],
            _ => return None,
        }
    }
    chain.reverse();
    Some((id, chain))
}

/// The BUFFER or PARAM node whose storage a view refers to (looking through AFTER).
pub fn storage_identity(g: &Graph, id: NodeId) -> Option<NodeId> {
    let (mut root, _) = storage_view(g, id)?;
    while g.node(root).op == Op::AFTER {
        root = storage_view(g, g.node(root).src[0])?.0;
    }
    Some(root)
}

fn same_device(a: &Option<DeviceSpec>, b: &Option<DeviceSpec>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

fn verify_node(g: &Graph, infos: &[Info], id: NodeId, lim: &Limits) -> Result<Info> {
    let n = g.node(id);
    let e = |reason: String| err(g, id, reason);
    let src: Vec<&Info> = n.src.iter().map(|s| &infos[s.index()]).collect();
    let arity = |want: std::ops::RangeInclusive<usize>| -> Result<()> {
        if want.contains(&n.src.len()) {
            Ok(())
        } else {
            Err(e(format!(
                "takes {} source(s), got {}",
                if want.start() == want.end() {
                    want.start().to_string()
                } else {
                    format!("{}..{}", want.start(), want.end())
                },
                n.src.len()
            )))
        }
    };
    let dtype_is = |want: DType| -> Result<()> {
        if n.dtype == want {
            Ok(())
        } else {
            Err(e(format!("dtype must be {want}, got {}", n.dtype)))
        }
    };
    let not_void = |i: usize| -> Result<()> {
        if src[i].dtype == DType::Void {
            Err(e(format!("source {i} is void (an effect), not a value")))
        } else {
            Ok(())
        }
    };
    let bad_arg = || e(format!("bad arg {:?} for {}", n.arg, n.op));

    Ok(match n.op {
        Op::BUFFER | Op::PARAM => {
            arity(0..=0)?;
            let Arg::Buffer { size, device, .. } = &n.arg else {
                return Err(bad_arg());
            };
            if n.dtype == DType::Void {
                return Err(e("a buffer needs an element dtype".into()));
            }
            if *size > lim.max_elements {
                let max = lim.max_elements;
                return Err(e(format!(
                    "buffer of {size} elements is over the limit of {max}"
                )));
            }
            if let DeviceSpec::Multi(ds) = device {
                check_device_tuple(ds).map_err(e)?;
            }
            Info {
                dtype: n.dtype,
                shape: vec![*size],
                device: Some(device.clone()),
            }
        }
        Op::CONST => {
            arity(0..=0)?;
            let Arg::Const(bits) = n.arg else {
                return Err(bad_arg());
            };
            if n.dtype == DType::Void {
                return Err(e("a constant needs a dtype".into()));
            }
            if n.dtype.bits() < 64 && bits >> n.dtype.bits() != 0 {
                return Err(e(format!("constant bits {bits:#x} do not fit {}", n.dtype)));
            }
            Info {
                dtype: n.dtype,
                shape: vec![],
                device: None,
            }
        }
        Op::COPY => {
            arity(1..=1)?;
            not_void(0)?;
            let Arg::Device(target) = &n.arg else {
                return Err(bad_arg());
            };
            dtype_is(src[0].dtype)?;
            if let DeviceSpec::Multi(ds) = target {
                check_device_tuple(ds).map_err(e)?;
            }
            let s = src[0];
            let from_unshard = g.node(n.src[0]).op == Op::UNSHARD;
            match (&s.device, target) {
                (Some(DeviceSpec::Multi(_)), DeviceSpec::Single(_)) if !from_unshard => {
                    return Err(e(
                        "COPY of a multi-device value to one device needs UNSHARD (a gather) or MSELECT (one component)"
                            .into(),
                    ))
                }
                (Some(DeviceSpec::Multi(a)), DeviceSpec::Multi(b)) if a != b => {
                    return Err(e(format!("COPY between different device tuples {} and {}", DeviceSpec::Multi(a.clone()), target)))
                }
                (Some(DeviceSpec::Multi(_)), DeviceSpec::Multi(_)) if from_unshard => {
                    return Err(e("COPY of an UNSHARD value must go to a single device".into()))
                }
                _ => {}
            }
            Info {
                dtype: n.dtype,
                shape: s.shape.clone(),
                device: Some(target.clone()),
            }
        }
        Op::STORE => {
            arity(2..=2)?;
            dtype_is(DType::Void)?;
            not_void(0)?;
            not_void(1)?;
            let (t, v) = (src[0], src[1]);
            if storage_view(g, n.src[0]).is_none() {
                return Err(e(format!(
                    "STORE target ({}) is not a view of storage (BUFFER, PARAM or AFTER under RESHAPE/PERMUTE/SHRINK/FLIP/DETACH)",
                    g.node(n.src[0]).op
                )));
            }
            if t.dtype != v.dtype {
                return Err(e(format!("STORE of {} into a {} target", v.dtype, t.dtype)));
            }
            if t.shape != v.shape {
                return Err(e(format!(
                    "STORE of shape {:?} into a target of shape {:?}",
                    v.shape, t.shape
                )));
            }
            match (&t.device, &v.device) {
                (Some(DeviceSpec::Multi(a)), Some(DeviceSpec::Multi(b))) if a != b => {
                    return Err(e("STORE between different device tuples".into()))
                }
                (Some(DeviceSpec::Multi(_)), Some(DeviceSpec::Single(_)))
                | (Some(DeviceSpec::Single(_)), Some(DeviceSpec::Multi(_))) => {
                    return Err(e(
                        "STORE between a multi-device and a single-device value (COPY first)"
                            .into(),
                    ))
                }
                _ => {}
            }
            void()
        }
        Op::AFTER => {
            arity(1..=usize::MAX)?;
            not_void(0)?;
            for (i, &d) in n.src.iter().enumerate().skip(1) {
                let op = g.node(d).op;
                if !matches!(op, Op::STORE | Op::CALL | Op::GROUP | Op::SINK | Op::AFTER) {
                    return Err(e(format!("AFTER dependency {i} is a {op}; expected STORE, CALL, GROUP, SINK or AFTER")));
                }
            }
            dtype_is(src[0].dtype)?;
            src[0].clone()
        }
        Op::CALL => {
            arity(1..=usize::MAX)?;
            dtype_is(DType::Void)?;
            if g.node(n.src[0]).op != Op::SINK {
                return Err(e("CALL body (source 0) must be a SINK".into()));
            }
            if !matches!(n.arg, Arg::None | Arg::Name(_)) {
                return Err(bad_arg());
            }
            void()
        }
        Op::SINK | Op::GROUP => {
            dtype_is(DType::Void)?;
            void()
        }
        Op::CONTIGUOUS | Op::DETACH => {
            arity(1..=1)?;
            not_void(0)?;
            dtype_is(src[0].dtype)?;
            src[0].clone()
        }
        Op::MSELECT => {
            arity(1..=1)?;
            dtype_is(src[0].dtype)?;
            let Arg::Index(i) = n.arg else {
                return Err(bad_arg());
            };
            let Some(DeviceSpec::Multi(ds)) = &src[0].device else {
                return Err(e("MSELECT needs a multi-device value".into()));
            };
            let Some(d) = ds.get(i) else {
                return Err(e(format!(
                    "MSELECT index {i} out of range for {} devices",
                    ds.len()
                )));
            };
            if g.node(n.src[0]).op == Op::UNSHARD {
                return Err(e(
                    "MSELECT of an UNSHARD value; select from the sharded value instead".into(),
                ));
            }
            Info {
                dtype: n.dtype,
                shape: src[0].shape.clone(),
                device: Some(DeviceSpec::Single(*d)),
            }
        }
        Op::MSTACK => {
            arity(1..=usize::MAX)?;
            let mut devs = vec![];
            for (i, s) in src.iter().enumerate() {
                match &s.device {
                    Some(DeviceSpec::Single(d)) => devs.push(*d),
                    _ => {
                        return Err(e(format!(
                            "MSTACK source {i} must be a single-device value"
                        )))
                    }
                }
                if s.shape != src[0].shape || s.dtype != n.dtype {
                    return Err(e(format!(
                        "MSTACK source {i} has {} {:?}, expected {} {:?}",
                        s.dtype, s.shape, n.dtype, src[0].shape
                    )));
                }
            }
            check_device_tuple(&devs).map_err(e)?;
            Info {
                dtype: n.dtype,
                shape: src[0].shape.clone(),
                device: Some(DeviceSpec::Multi(devs)),
            }
        }
        Op::UNSHARD => {
            arity(1..=1)?;
            dtype_is(src[0].dtype)?;
            let Arg::Axis(axis) = n.arg else {
                return Err(bad_arg());
            };
            let Some(DeviceSpec::Multi(ds)) = &src[0].device else {
                return Err(e("UNSHARD needs a multi-device value".into()));
            };
            if g.node(n.src[0]).op == Op::UNSHARD {
                return Err(e("UNSHARD of an UNSHARD value".into()));
            }
            let mut shape = src[0].shape.clone();
            let Some(dim) = shape.get_mut(axis) else {
                return Err(e(format!(
                    "UNSHARD axis {axis} out of range for shape {:?}",
                    src[0].shape
                )));
            };
            *dim = dim.checked_mul(ds.len()).ok_or_else(|| {
                e(format!(
                    "UNSHARD of {} components along axis {axis} of {:?} overflows",
                    ds.len(),
                    src[0].shape
                ))
            })?;
            // Gathering walks the positions before the axis once per component.
            if bounded_product(&src[0].shape[..axis]).is_none() {
                return Err(e(format!(
                    "UNSHARD along axis {axis} of {:?}: more than {MAX_ELEMENTS} outer positions",
                    src[0].shape
                )));
            }
            Info {
                dtype: n.dtype,
                shape,
                device: src[0].device.clone(),
            }
        }
        Op::ALLREDUCE => {
            arity(1..=1)?;
            dtype_is(src[0].dtype)?;
            let Arg::AllReduce { op, devices } = &n.arg else {
                return Err(bad_arg());
            };
            if !op.is_reduce_op() {
                return Err(e(format!("ALLREDUCE op must be ADD, MUL or MAX, got {op}")));
            }
            if src[0].device != Some(DeviceSpec::Multi(devices.clone())) {
                return Err(e(format!(
                    "ALLREDUCE over {} but its source lives on {}",
                    DeviceSpec::Multi(devices.clone()),
                    src[0]
                        .device
                        .as_ref()
                        .map(|d| d.to_string())
                        .unwrap_or_else(|| "no device".into())
                )));
            }
            if g.node(n.src[0]).op == Op::UNSHARD {
                return Err(e("ALLREDUCE of an UNSHARD value".into()));
            }
            src[0].clone()
        }
        op if op.is_movement() => {
            arity(1..=1)?;
            not_void(0)?;
            dtype_is(src[0].dtype)?;
            if g.node(n.src[0]).op == Op::UNSHARD {
                return Err(e(
                    "movement of an UNSHARD value is not supported; move the shards".into(),
                ));
            }
            let shape = movement_shape(op, &n.arg, &src[0].shape).map_err(e)?;
            Info {
                dtype: n.dtype,
                shape,
                device: src[0].device.clone(),
            }
        }
        Op::REDUCE => {
            arity(1..=1)?;
            not_void(0)?;
            dtype_is(src[0].dtype)?;
            let Arg::Reduce {
                op,
                axes,
                ref order,
            } = n.arg
            else {
                return Err(bad_arg());
            };
            if !op.is_reduce_op() {
                return Err(e(format!("REDUCE op must be ADD, MUL or MAX, got {op}")));
            }
            if axes > src[0].shape.len() {
                return Err(e(format!(
                    "REDUCE of the first {axes} axes of a {}-d value",
                    src[0].shape.len()
                )));
            }
            // A declared order splits the reduced elements. Empty parts are meaningful (an
            // 8-way split of 5 elements), but not billions of them: the oracle keeps one
            // accumulator per part.
            // The reduced-away part is iterated (and buffered) once per output element, so it
            // is bounded like a value even when the input is empty.
            let reduced = bounded_product(&src[0].shape[..axes]).ok_or_else(|| {
                e(format!(
                    "REDUCE over axes {:?} reduces more than {MAX_ELEMENTS} elements per output element",
                    &src[0].shape[..axes]
                ))
            })?;
            let most = reduced.max(MAX_REDUCE_PARTS);
            if let ReduceOrder::Split(k) | ReduceOrder::Chunks(k) = *order {
                if k == 0 || k > most {
                    return Err(e(format!("reduce order {order:?} needs 1..={most} parts ({reduced} reduced elements)")));
                }
            }
            if let ReduceOrder::ChunksOfSplit(c, k) = *order {
                // The oracle keeps k accumulators for each of the c chunks: c·k is bounded like
                // the parts of the other orders, so a fold stays linear in the reduced elements.
                if c == 0 || k == 0 || c.checked_mul(k).is_none_or(|p| p > most) {
                    return Err(e(format!("reduce order {order:?} needs 1..={most} chunks times lanes, each at least 1 ({reduced} reduced elements)")));
                }
                if reduced % c != 0 {
                    return Err(e(format!(
                        "reduce order {order:?}: {c} chunks do not divide the {reduced} reduced elements"
                    )));
                }
            }
            if let ReduceOrder::Tree(0) = *order {
                return Err(e(
                    "reduce order Tree(0) needs a leaf size of at least 1".into()
                ));
            }
            Info {
                dtype: n.dtype,
                shape: src[0].shape[axes..].to_vec(),
                device: src[0].device.clone(),
            }
        }
        Op::CAST => {
            arity(1..=1)?;
            not_void(0)?;
            if n.dtype == DType::Void {
                return Err(e("CAST to void".into()));
            }
            Info {
                dtype: n.dtype,
                shape: src[0].shape.clone(),
                device: src[0].device.clone(),
            }
        }
        Op::BITCAST => {
            arity(1..=1)?;
            not_void(0)?;
            let (from, to) = (src[0].dtype, n.dtype);
            if from.bits() != to.bits()
                || from == DType::Bool
                || to == DType::Bool
                || to == DType::Void
            {
                return Err(e(format!(
                    "BITCAST from {from} to {to}: widths must match (and bool cannot be bitcast)"
                )));
            }
            Info {
                dtype: n.dtype,
                shape: src[0].shape.clone(),
                device: src[0].device.clone(),
            }
        }
        op if op.is_alu() => verify_alu(g, id, &src)?,
        op => return Err(e(format!("{op} is not valid in a tensor graph"))),
    })
}

fn check_device_tuple(ds: &[crate::ir::Device]) -> Result<(), String> {
    if ds.is_empty() {
        return Err("empty device tuple".into());
    }
    let mut sorted = ds.to_vec();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != ds.len() {
        return Err(format!(
            "device tuple {} names a device twice",
            DeviceSpec::Multi(ds.to_vec())
        ));
    }
    Ok(())
}

fn verify_alu(g: &Graph, id: NodeId, src: &[&Info]) -> Result<Info> {
    let n = g.node(id);
    let e = |reason: String| err(g, id, reason);
    let Some(info) = n.op.info() else {
        return Err(e(format!("{} is not an ALU op", n.op)));
    };
    let want = info.arity as usize;
    if src.len() != want {
        return Err(e(format!("takes {want} source(s), got {}", src.len())));
    }
    for (i, s) in src.iter().enumerate() {
        if s.dtype == DType::Void {
            return Err(e(format!("source {i} is void (an effect), not a value")));
        }
    }
    let dts: Vec<DType> = src.iter().map(|s| s.dtype).collect();
    if let Err(err) = table::check_dtypes(info, &dts, n.dtype) {
        let hint = match err {
            table::DTypeError::Class {
                classes: table::Classes::FLOAT,
                ..
            } => " (CAST first)",
            _ => "",
        };
        return Err(e(format!("{err}{hint}")));
    }
    // Shapes: equal, except that a 0-d operand broadcasts.
    let mut shape: Vec<usize> = vec![];
    let mut device = None;
    for (i, s) in src.iter().enumerate() {
        if !s.shape.is_empty() {
            if !shape.is_empty() && shape != s.shape {
                return Err(e(format!(
                    "operand shapes differ: {:?} and {:?} (operand {i})",
                    shape, s.shape
                )));
            }
            shape = s.shape.clone();
        }
        if !same_device(&device, &s.device) {
            return Err(e(format!(
                "operands live on different devices: {} and {} (COPY first)",
                device
                    .as_ref()
                    .map(|d: &DeviceSpec| d.to_string())
                    .unwrap_or_default(),
                s.device.as_ref().map(|d| d.to_string()).unwrap_or_default()
            )));
        }
        if s.device.is_some() {
            device = s.device.clone();
        }
    }
    for (i, &s) in n.src.iter().enumerate() {
        if g.node(s).op == Op::UNSHARD {
            return Err(err(
                g,
                id,
                format!("operand {i} is an UNSHARD value; compute on the shards"),
            ));
        }
    }
    Ok(Info {
        dtype: n.dtype,
        shape,
        device,
    })
}

/// The output shape of a movement op, or why its argument does not fit `shape`.
pub fn movement_shape(op: Op, arg: &Arg, shape: &[usize]) -> Result<Vec<usize>, String> {
    let numel = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match (op, arg) {
        (Op::RESHAPE, Arg::Shape(new)) => {
            let (a, b) = (numel(shape), numel(new));
            if a.is_none() || a != b {
                return Err(format!(
                    "RESHAPE from {shape:?} to {new:?} changes the number of elements"
                ));
            }
            Ok(new.clone())
        }
        (Op::EXPAND, Arg::Shape(lead)) => {
            let out: Vec<usize> = lead.iter().chain(shape).copied().collect();
            if numel(&out).is_none() {
                return Err(format!("EXPAND to {out:?} overflows"));
            }
            Ok(out)
        }
        (Op::PERMUTE, Arg::Perm(p)) => {
            let mut seen = vec![false; shape.len()];
            if p.len() != shape.len()
                || p.iter()
                    .any(|&i| i >= shape.len() || std::mem::replace(&mut seen[i], true))
            {
                return Err(format!(
                    "PERMUTE {p:?} is not a permutation of {} axes",
                    shape.len()
                ));
            }
            Ok(p.iter().map(|&i| shape[i]).collect())
        }
        (Op::PAD, Arg::Window { offsets, sizes }) => {
            if offsets.len() != shape.len() || sizes.len() != shape.len() {
                return Err(format!(
                    "PAD needs one (offset, new_size) per axis of {shape:?}"
                ));
            }
            for (ax, ((&o, &s), &d)) in offsets.iter().zip(sizes).zip(shape).enumerate() {
                if o.checked_add(d).is_none_or(|end| end > s) {
                    return Err(format!(
                        "PAD axis {ax}: offset {o} + size {d} does not fit in new size {s}"
                    ));
                }
            }
            if numel(sizes).is_none() {
                return Err(format!("PAD to {sizes:?} overflows"));
            }
            Ok(sizes.clone())
        }
        (Op::SHRINK, Arg::Window { offsets, sizes }) => {
            if offsets.len() != shape.len() || sizes.len() != shape.len() {
                return Err(format!(
                    "SHRINK needs one (offset, size) per axis of {shape:?}"
                ));
            }
            for (ax, ((&o, &s), &d)) in offsets.iter().zip(sizes).zip(shape).enumerate() {
                if o.checked_add(s).is_none_or(|end| end > d) {
                    return Err(format!(
                        "SHRINK axis {ax}: window [{o}, {o}+{s}) is outside size {d}"
                    ));
                }
            }
            Ok(sizes.clone())
        }
        (Op::FLIP, Arg::Flip(f)) => {
            if f.len() != shape.len() {
                return Err(format!("FLIP needs one flag per axis of {shape:?}"));
            }
            Ok(shape.to_vec())
        }
        _ => Err(format!("bad arg {arg:?} for {op}")),
    }
}

/// UNSHARD is a logical view of sharded data: only COPY (a gather) may consume it inside a
/// graph (outputs may name it too). Ops with a more specific message check this themselves.
fn check_unshard_consumers(g: &Graph) -> Result<()> {
    for id in g.ids() {
        let n = g.node(id);
        if matches!(n.op, Op::COPY | Op::SINK | Op::GROUP) {
            continue;
        }
        if n.src.iter().any(|&s| g.node(s).op == Op::UNSHARD) {
            return Err(err(
                g,
                id,
                "an UNSHARD value may only be consumed by COPY to one device",
            ));
        }
    }
    Ok(())
}
