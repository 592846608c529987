//! From a case file to a verified graph with inputs. Every problem becomes a [`CaseError`]
//! that names the file, the node (by its case-file id) and the reason.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use uopkit_interp::eval::{BufferInit, ColumnInit};
use uopkit_interp::ir::inline::inline_calls;
use uopkit_interp::ir::{Arg, DType, Device, DeviceSpec, Graph, Node, NodeId, Op, ReduceOrder};
use uopkit_interp::scalar::literal;
use uopkit_interp::verify::{self, Verified, MAX_DIMENSION, MAX_ELEMENTS};

use crate::case::{Case, Init, FORMAT};
use crate::inputs;

/// An error about a case file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{reason}", file.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default(), node.map(|n| format!("node {n}: ")).unwrap_or_default())]
pub struct CaseError {
    pub file: Option<PathBuf>,
    /// The case-file id of the node the error is about.
    pub node: Option<u64>,
    pub reason: String,
}

impl CaseError {
    pub fn new(node: Option<u64>, reason: impl Into<String>) -> Self {
        CaseError {
            file: None,
            node,
            reason: reason.into(),
        }
    }

    pub fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }
}

/// A case's graph in the arena, with the mapping between case-file ids and arena ids.
pub struct Loaded {
    pub graph: Graph,
    /// Case-file id of each arena node (the first file node that produced it).
    pub file_id: Vec<u64>,
    /// Arena id of each case-file node.
    pub arena_id: BTreeMap<u64, NodeId>,
    pub inputs: BTreeMap<NodeId, BufferInit>,
}

impl Loaded {
    pub fn arena(&self, file_id: u64) -> Result<NodeId, CaseError> {
        self.arena_id
            .get(&file_id)
            .copied()
            .ok_or_else(|| CaseError::new(Some(file_id), "no such node in the graph"))
    }

    /// The case-file id of arena node `n`.
    pub fn file_id_of(&self, n: NodeId) -> u64 {
        file_id_in(&self.file_id, n)
    }

    /// Translates an oracle error's arena ids into case-file ids.
    pub fn file_error(&self, e: uopkit_interp::Error) -> uopkit_interp::Error {
        file_error_in(&self.file_id, e)
    }
}

/// The case-file id of arena node `n` under the loader's `file_id` table (the arena id itself
/// for a node the table does not cover, e.g. one the compiler made).
pub fn file_id_in(file_id: &[u64], n: NodeId) -> u64 {
    file_id.get(n.index()).copied().unwrap_or(u64::from(n.0))
}

/// An oracle error with its arena ids translated by `file_id` ([`file_id_in`]).
pub fn file_error_in(file_id: &[u64], e: uopkit_interp::Error) -> uopkit_interp::Error {
    // Case-file ids fit in u32 (the loader refuses larger ones).
    e.map_nodes(|n| NodeId(file_id_in(file_id, n) as u32))
}

/// The largest case file [`read_case`] reads (256 MiB): the loader keeps the text, its JSON
/// tree and the graph at once, so a bigger file is refused before it is read.
pub const MAX_CASE_BYTES: u64 = 256 << 20;

/// Reads and parses a case file. Only a regular file (or a symbolic link to one) of at most
/// [`MAX_CASE_BYTES`] is read: a FIFO, device or directory is an error before it is opened,
/// so reading never blocks.
pub fn read_case(path: &Path) -> Result<Case, CaseError> {
    let text = read_case_text(path).map_err(|r| CaseError::new(None, r).in_file(path))?;
    parse_case(&text).map_err(|e| e.in_file(path))
}

fn read_case_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "cannot read: not a regular file ({})",
            file_kind(&meta.file_type())
        ));
    }
    let too_big = |n: u64| {
        format!("cannot read: the file has {n} bytes or more, over the limit of {MAX_CASE_BYTES} bytes for a case file")
    };
    if meta.len() > MAX_CASE_BYTES {
        return Err(too_big(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    // The file may grow between the check and the read: read one byte past the limit at most.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_CASE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_CASE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| format!("cannot read: not UTF-8 text: {e}"))
}

/// What kind of file system object `t` is, in words.
pub fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

pub fn parse_case(text: &str) -> Result<Case, CaseError> {
    let case: Case = serde_json::from_str(text)
        .map_err(|e| CaseError::new(None, format!("malformed case: {e}")))?;
    if case.format != FORMAT {
        return Err(CaseError::new(
            None,
            format!("unknown format '{}' (expected '{FORMAT}')", case.format),
        ));
    }
    Ok(case)
}

/// Builds the graph (in dependency order), verifies it and materializes the inputs.
pub fn load(case: &Case) -> Result<(Loaded, Verified), LoadError> {
    let (mut loaded, verified) = load_graph(case)?;
    loaded.inputs = materialize_inputs(case, &loaded, &verified, |init, dt, size, _| {
        inputs::component(init, dt, size)
    })
    .map_err(LoadError::Case)?;
    check_outputs(case, &loaded, &verified).map_err(LoadError::Case)?;
    Ok((loaded, verified))
}

/// [`load`] with the inputs materialized straight into the oracle's compact form (for
/// [`uopkit_interp::eval::evaluate_columns`]; 4 bytes per float32 element instead of 16) and
/// returned beside the graph: `Loaded::inputs` is left empty. The same checks, in the same
/// order, and the same errors as [`load`].
pub fn load_compact(
    case: &Case,
) -> Result<(Loaded, Verified, BTreeMap<NodeId, ColumnInit>), LoadError> {
    let (loaded, verified) = load_graph(case)?;
    let columns =
        materialize_inputs(case, &loaded, &verified, inputs::column).map_err(LoadError::Case)?;
    check_outputs(case, &loaded, &verified).map_err(LoadError::Case)?;
    Ok((loaded, verified, columns))
}

/// The graph, CALLs inlined, verified (no inputs yet).
fn load_graph(case: &Case) -> Result<(Loaded, Verified), LoadError> {
    if case.kernel.is_some() {
        return Err(LoadError::Case(CaseError::new(
            None,
            "a kernel-level case has no tensor graph (only `uopkit check` and `uopkit fmt` take it)",
        )));
    }
    let mut loaded = build_graph(case).map_err(LoadError::Case)?;
    let mut verified =
        verify::verify(&loaded.graph).map_err(|e| LoadError::Verify(loaded.file_error(e)))?;
    if loaded
        .graph
        .ids()
        .any(|id| loaded.graph.node(id).op == Op::CALL)
    {
        let inl =
            inline_calls(&loaded.graph).map_err(|e| LoadError::Verify(loaded.file_error(e)))?;
        let file_id = inl
            .origin
            .iter()
            .map(|o| loaded.file_id[o.index()])
            .collect();
        let arena_id = loaded
            .arena_id
            .iter()
            .map(|(&f, old)| (f, inl.remap[old.index()]))
            .collect();
        loaded = Loaded {
            graph: inl.graph,
            file_id,
            arena_id,
            inputs: BTreeMap::new(),
        };
        verified =
            verify::verify(&loaded.graph).map_err(|e| LoadError::Verify(loaded.file_error(e)))?;
    }
    Ok((loaded, verified))
}

/// Every output names a node with a value, says its shape right, and (unless the case expects
/// an error, or gives no values at all) gives expected literals that parse in the node's
/// dtype: a case that gets these wrong is bad input, not a disagreement.
fn check_outputs(case: &Case, loaded: &Loaded, ver: &Verified) -> Result<(), CaseError> {
    for o in &case.outputs {
        let id = loaded.arena(o.node)?;
        let info = ver.info(id);
        if info.dtype == DType::Void {
            return Err(CaseError::new(
                Some(o.node),
                format!(
                    "output '{}' names a {} node, which has no value",
                    o.name,
                    loaded.graph.node(id).op
                ),
            ));
        }
        if info.shape != o.shape {
            return Err(CaseError::new(
                Some(o.node),
                format!(
                    "output '{}': the case says shape {:?}, the node has shape {:?}",
                    o.name, o.shape, info.shape
                ),
            ));
        }
        // An empty `expect` gives no values (generated cases are judged against the oracle).
        let no_values = o.expect.as_array().is_some_and(|a| a.is_empty());
        if case.expect_error.is_none() && !no_values {
            let multi = multi_components(info.device.as_ref(), loaded.graph.node(id).op);
            crate::compare::expected_bits(o, info.dtype, multi)
                .map_err(|e| CaseError::new(Some(o.node), format!("output '{}': {e}", o.name)))?;
        }
    }
    Ok(())
}

/// How many per-device components an output's value has: `Some(n)` for a value on a tuple of
/// n devices, `None` for a single value. An UNSHARD lives on the tuple but its value is the
/// one logical (concatenated) tensor.
pub fn multi_components(device: Option<&DeviceSpec>, op: Op) -> Option<usize> {
    match (device, op) {
        (_, Op::UNSHARD) => None,
        (Some(DeviceSpec::Multi(ds)), _) => Some(ds.len()),
        _ => None,
    }
}

/// Why a case could not be loaded: the file itself is wrong, or the verifier rejected the
/// graph (which a case may expect).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Case(CaseError),
    #[error("verifier: {0}")]
    Verify(uopkit_interp::Error),
}

fn build_graph(case: &Case) -> Result<Loaded, CaseError> {
    // Case-file id → position in `case.graph` (looked up only, never iterated).
    let mut by_id: HashMap<u64, usize> = HashMap::with_capacity(case.graph.len());
    for (i, n) in case.graph.iter().enumerate() {
        if n.id > u64::from(u32::MAX) {
            return Err(CaseError::new(Some(n.id), "node ids must be below 2^32"));
        }
        if by_id.insert(n.id, i).is_some() {
            return Err(CaseError::new(Some(n.id), "duplicate node id"));
        }
    }
    // The sources of each node, as positions.
    let mut srcs: Vec<Vec<usize>> = Vec::with_capacity(case.graph.len());
    for n in &case.graph {
        let s = n
            .src
            .iter()
            .map(|s| {
                by_id.get(s).copied().ok_or_else(|| {
                    CaseError::new(Some(n.id), format!("source {s} is not a node of the graph"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        srcs.push(s);
    }
    drop(by_id);
    let order = topo_order(case, &srcs)?;
    let mut graph = Graph::new();
    // The arena id of each position (set once the node is added, before its users).
    let mut at: Vec<NodeId> = vec![NodeId(u32::MAX); case.graph.len()];
    let mut file_id: Vec<u64> = vec![];
    for i in order {
        let n = &case.graph[i];
        let arg = parse_arg(n.op, n.dtype, &n.arg)
            .map_err(|r| CaseError::new(Some(n.id), format!("{}: {r}", n.op)))?;
        let src = srcs[i].iter().map(|&s| at[s]).collect();
        let id = graph.add(Node {
            op: n.op,
            dtype: n.dtype,
            src,
            arg,
        });
        if id.index() == file_id.len() {
            file_id.push(n.id);
        } else if matches!(n.op, Op::BUFFER | Op::PARAM) {
            // Hash-consing would silently make them one storage.
            return Err(CaseError::new(
                Some(n.id),
                format!("{} is the same node as node {} (same slot, size and device): give each buffer its own slot", n.op, file_id[id.index()]),
            ));
        }
        at[i] = id;
    }
    let arena_id = case
        .graph
        .iter()
        .zip(at)
        .map(|(n, id)| (n.id, id))
        .collect();
    Ok(Loaded {
        graph,
        file_id,
        arena_id,
        inputs: BTreeMap::new(),
    })
}

/// Sources before users; a cycle is an error naming a node on it. Iterative, so a deep
/// graph cannot overflow the stack.
fn topo_order(case: &Case, srcs: &[Vec<usize>]) -> Result<Vec<usize>, CaseError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; case.graph.len()];
    let mut order = Vec::with_capacity(case.graph.len());
    for start in 0..case.graph.len() {
        if mark[start] != Mark::New {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        mark[start] = Mark::Open;
        while let Some(&mut (i, ref mut next)) = stack.last_mut() {
            let srcs = &srcs[i];
            if *next < srcs.len() {
                let s = srcs[*next];
                *next += 1;
                match mark[s] {
                    Mark::New => {
                        mark[s] = Mark::Open;
                        stack.push((s, 0));
                    }
                    Mark::Open => {
                        return Err(CaseError::new(
                            Some(case.graph[s].id),
                            "cycle: this node depends on itself",
                        ));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[i] = Mark::Done;
                order.push(i);
                stack.pop();
            }
        }
    }
    Ok(order)
}

/// A non-negative integer of a node's arg (`field` names it: `arg.size`, `arg[1]`, …) of
/// at most `limit`; the error says which field and why.
fn count(field: &str, v: &Json, limit: usize, what: &str) -> Result<usize, String> {
    let Json::Number(n) = v else {
        return Err(format!(
            "{field}: expected a non-negative integer, found {v}"
        ));
    };
    let text = n.to_string();
    let Some(u) = n.as_u64() else {
        let why = if text.starts_with('-') {
            "is negative"
        } else if text.contains(['.', 'e', 'E']) {
            "is not an integer"
        } else {
            "is too large for u64"
        };
        return Err(format!(
            "{field}: {text} {why} (expected a non-negative integer)"
        ));
    };
    usize::try_from(u)
        .ok()
        .filter(|&u| u <= limit)
        .ok_or_else(|| format!("{field}: {what} {u} is over the limit of {limit}"))
}

fn usize_list(field: &str, v: &Json, what: &str) -> Result<Vec<usize>, String> {
    let arr = v
        .as_array()
        .ok_or_else(|| format!("{field}: expected a list of non-negative integers, found {v}"))?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| count(&format!("{field}[{i}]"), x, MAX_DIMENSION, what))
        .collect()
}

fn reduce_op(v: &Json) -> Result<Op, String> {
    let op: Op = v
        .as_str()
        .ok_or_else(|| format!("expected an op name, found {v}"))?
        .parse()
        .map_err(|e| format!("{e}"))?;
    if op.is_reduce_op() {
        Ok(op)
    } else {
        Err(format!("reduce op must be ADD, MUL or MAX, got {op}"))
    }
}

fn device_spec(v: &Json) -> Result<DeviceSpec, String> {
    serde_json::from_value(v.clone()).map_err(|e| format!("bad device: {e}"))
}

fn pair_of_lists(v: &Json) -> Result<(Vec<usize>, Vec<usize>), String> {
    match v.as_array().map(|a| a.as_slice()) {
        Some([a, b]) => Ok((
            usize_list("arg[0]", a, "offset")?,
            usize_list("arg[1]", b, "size")?,
        )),
        _ => Err(format!("expected [[offsets…], [sizes…]], found {v}")),
    }
}

/// Parses a node's JSON `arg` into the IR's [`Arg`] (see `docs/ir.md`).
pub fn parse_arg(op: Op, dtype: DType, v: &Json) -> Result<Arg, String> {
    Ok(match op {
        Op::BUFFER | Op::PARAM => {
            // Numbers stay JSON here, so that a size too large for u64 gets a message that
            // names the field rather than serde's "invalid number".
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct B {
                slot: Json,
                size: Json,
                device: DeviceSpec,
            }
            let b: B = serde_json::from_value(v.clone())
                .map_err(|e| format!("expected {{\"slot\", \"size\", \"device\"}}: {e}"))?;
            let slot = count("arg.slot", &b.slot, u32::MAX as usize, "slot")?;
            let size = count("arg.size", &b.size, MAX_ELEMENTS, "element count")?;
            Arg::Buffer {
                slot: u32::try_from(slot).map_err(|_| "arg.slot: over the limit of u32")?,
                size,
                device: b.device,
            }
        }
        Op::CONST => Arg::Const(literal::parse(dtype, v)?),
        Op::COPY => Arg::Device(device_spec(v)?),
        Op::RESHAPE | Op::EXPAND => Arg::Shape(usize_list("arg", v, "dimension")?),
        Op::PERMUTE => Arg::Perm(usize_list("arg", v, "axis")?),
        Op::PAD | Op::SHRINK => {
            let (offsets, sizes) = pair_of_lists(v)?;
            Arg::Window { offsets, sizes }
        }
        Op::FLIP => {
            let arr = v
                .as_array()
                .ok_or_else(|| format!("expected a list of bools, found {v}"))?;
            Arg::Flip(
                arr.iter()
                    .map(|b| {
                        b.as_bool()
                            .ok_or_else(|| format!("expected a bool, found {b}"))
                    })
                    .collect::<Result<_, _>>()?,
            )
        }
        Op::REDUCE => {
            let (o, n, order) = match v.as_array().map(|a| a.as_slice()) {
                Some([o, n]) => (o, n, ReduceOrder::Sequential),
                Some([o, n, ord]) => (
                    o,
                    n,
                    serde_json::from_value(ord.clone())
                        .map_err(|e| format!("bad reduce order {ord} (\"sequential\", {{\"split\": k}}, {{\"chunks\": k}}, {{\"tree\": leaf}}, {{\"chunks_of_split\": [c, k]}}): {e}"))?,
                ),
                _ => return Err(format!("expected [op, n] or [op, n, order], found {v}")),
            };
            if matches!(
                order,
                ReduceOrder::Split(0)
                    | ReduceOrder::Chunks(0)
                    | ReduceOrder::Tree(0)
                    | ReduceOrder::ChunksOfSplit(0, _)
                    | ReduceOrder::ChunksOfSplit(_, 0)
            ) {
                return Err(format!("reduce order {order:?} needs a positive count"));
            }
            Arg::Reduce {
                op: reduce_op(o)?,
                axes: count("arg[1] (axis count)", n, MAX_DIMENSION, "axis count")?,
                order,
            }
        }
        Op::ALLREDUCE => match v.as_array().map(|a| a.as_slice()) {
            Some([o, ds]) => {
                let devices: Vec<Device> = serde_json::from_value(ds.clone())
                    .map_err(|e| format!("bad device list: {e}"))?;
                Arg::AllReduce {
                    op: reduce_op(o)?,
                    devices,
                }
            }
            _ => return Err(format!("expected [op, [devices…]], found {v}")),
        },
        Op::MSELECT => Arg::Index(count(
            "arg (device index)",
            v,
            MAX_DIMENSION,
            "device index",
        )?),
        Op::UNSHARD => {
            let axes = if v.is_number() {
                vec![count("arg (axis)", v, MAX_DIMENSION, "axis")?]
            } else {
                usize_list("arg", v, "axis")?
            };
            match axes.as_slice() {
                [a] => Arg::Axis(*a),
                _ => return Err(format!("expected one sharded axis, found {v}")),
            }
        }
        Op::CALL => match v {
            Json::Null => Arg::None,
            Json::String(s) => Arg::Name(s.clone()),
            Json::Object(o) => Arg::Name(
                o.get("name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("call")
                    .to_string(),
            ),
            _ => return Err(format!("expected a name, found {v}")),
        },
        Op::CAST | Op::BITCAST => match v {
            Json::Null => Arg::None,
            Json::String(s) if s.parse::<DType>().ok() == Some(dtype) => Arg::None,
            _ => {
                return Err(format!(
                    "arg must be null or the node's dtype '{dtype}', found {v}"
                ))
            }
        },
        _ => {
            if !v.is_null() {
                return Err(format!("takes no arg, found {v}"));
            }
            Arg::None
        }
    })
}

/// The initial contents of each BUFFER with an input, one `C` per device component, made by
/// `component(init, dtype, size, buffer)`.
fn materialize_inputs<C: Clone>(
    case: &Case,
    loaded: &Loaded,
    ver: &Verified,
    component: impl Fn(&Init, DType, usize, NodeId) -> Result<C, String>,
) -> Result<BTreeMap<NodeId, Vec<C>>, CaseError> {
    let mut out = BTreeMap::new();
    for (key, init) in &case.inputs {
        let fid: u64 = key
            .parse()
            .map_err(|_| CaseError::new(None, format!("input key '{key}' is not a node id")))?;
        let id = loaded.arena(fid)?;
        let node = loaded.graph.node(id);
        if node.op != Op::BUFFER {
            return Err(CaseError::new(
                Some(fid),
                format!("inputs are for BUFFER nodes, this is a {}", node.op),
            ));
        }
        let info = ver.info(id);
        let ndev = info.device.as_ref().map_or(1, |d| d.devices().len());
        let comps = match init {
            Init::PerDevice(per) => {
                if per.len() != ndev {
                    return Err(CaseError::new(
                        Some(fid),
                        format!(
                            "per_device gives {} components for {ndev} devices",
                            per.len()
                        ),
                    ));
                }
                per.iter()
                    .map(|i| component(i, node.dtype, info.shape[0], id))
                    .collect::<Result<Vec<_>, _>>()
            }
            single => {
                let c = component(single, node.dtype, info.shape[0], id);
                c.map(|c| vec![c; ndev])
            }
        }
        .map_err(|r| CaseError::new(Some(fid), format!("input: {r}")))?;
        out.insert(id, comps);
    }
    Ok(out)
}
