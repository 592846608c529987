//! The external-backend protocol `uopkit-backend/1` (`docs/backend-protocol.md`): the messages
//! as serde types with their JSON Schema, and the conversions between them and the kit's
//! values. uopkit's own compiled backends speak it too, from worker processes
//! (`crate::worker`), so there is one wire format and one client (`backends::process`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use uopkit_compiler::schedule::Schedule;
use uopkit_interp::eval::{BufferInit, Data, Elem, Value};
use uopkit_interp::ir::{DType, Graph, NodeId, Op};
use uopkit_interp::kernel::{KArg, Program};
use uopkit_interp::verify::Verified;

use crate::case::NodeJson;
use crate::gen::export::graph_nodes;

pub const PROTOCOL: &str = "uopkit-backend/1";

/// Raw bits as `"0x…"`, or null for an uninitialized element.
pub type Bits = Option<String>;

/// A message from uopkit to a backend.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Hello { protocol: String },
    Run(RunRequest),
    RunSchedule(ScheduleRequest),
}

/// A message from a backend to uopkit.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Answer {
    Hello(Hello),
    Result(ResultAnswer),
    Unsupported {
        id: u64,
        reason: String,
    },
    Error {
        id: u64,
        message: String,
        /// The backend asks to be replaced after this answer (its process state is suspect).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        restart: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Tensor graph in, output bits out.
    Graph,
    /// uopkit's schedule (buffers, kernel programs, copies) in, buffer contents out.
    Kernel,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: String,
    pub name: String,
    pub level: Level,
    #[serde(default)]
    pub accepts: Accepts,
    /// The allowance manifest to judge this backend under (`manifests/allowances/<name>.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowances: Option<String>,
}

/// What a backend can take; an absent list means anything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Accepts {
    /// Device kinds: `CPU`, `CUDA`, `HIP` (any ordinal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtypes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<String>>,
}

/// Graph level: the case's canonical graph and its buffers' initial contents.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    pub id: u64,
    pub case: String,
    /// Nodes in the case-file format (`docs/case-format.md`), ids 0.. in dependency order.
    #[schemars(with = "Vec<Json>")]
    pub graph: Vec<NodeJson>,
    pub inputs: Vec<InputBits>,
    pub outputs: Vec<OutputSpec>,
    #[serde(default)]
    pub options: Options,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputBits {
    pub node: u64,
    pub dtype: String,
    /// One list per device component.
    pub components: Vec<Vec<Bits>>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    pub name: String,
    pub node: u64,
    pub dtype: String,
    pub shape: Vec<usize>,
    /// Number of device components (1 for a single-device value).
    pub devices: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// `naive`, `ring` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allreduce: Option<String>,
}

/// Kernel level: uopkit's schedule.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    pub id: u64,
    pub case: String,
    pub buffers: Vec<BufferSpec>,
    pub programs: Vec<ProgramJson>,
    pub steps: Vec<StepJson>,
    /// Buffers whose contents to return after the last step.
    pub read: Vec<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    pub id: u32,
    pub dtype: String,
    pub size: usize,
    pub device: String,
    pub storage: u32,
    /// Initial contents of a graph buffer; null when undefined.
    pub init: Option<Vec<Bits>>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramJson {
    pub name: String,
    pub params: Vec<ParamJson>,
    pub insts: Vec<InstJson>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParamJson {
    pub dtype: String,
    pub size: usize,
    pub written: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstJson {
    pub op: String,
    pub dtype: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub src: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<InstArg>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InstArg {
    Param(u32),
    Reg(usize),
    Local(usize),
    Const(String),
    Axis(u32),
    Special(String),
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepJson {
    Kernel {
        program: usize,
        device: String,
        args: Vec<u32>,
    },
    Copy {
        dst: u32,
        src: u32,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultAnswer {
    pub id: u64,
    /// Graph level: one per requested output, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<OutputBits>>,
    /// Kernel level: the requested buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<Vec<BufferBits>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Facts>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputBits {
    pub name: String,
    pub components: Vec<Vec<Bits>>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BufferBits {
    pub id: u32,
    pub data: Vec<Bits>,
}

/// Schedule facts a backend reports (each optional).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<usize>,
    /// `[dst device, src device]` per COPY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_pairs: Option<Vec<(String, String)>>,
    /// Graph BUFFER node ids written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<Vec<u64>>,
}

/// The JSON Schema of both directions (what `uopkit schema --protocol` prints).
pub fn json_schema() -> Json {
    let req = schemars::schema_for!(Request);
    let ans = schemars::schema_for!(Answer);
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": PROTOCOL,
        "description": "Messages of the uopkit external-backend protocol, one JSON object per line; see docs/backend-protocol.md.",
        "oneOf": [
            {"title": "to the backend", "$ref": "#/$defs/request"},
            {"title": "from the backend", "$ref": "#/$defs/answer"}
        ],
        "$defs": {"request": req, "answer": ans}
    })
}

/// `"0x…"` of `bits` (low bits of the dtype's width).
pub fn hex(bits: u64) -> String {
    format!("{bits:#x}")
}

/// The mask of a dtype's bit width.
fn mask(dt: DType) -> u64 {
    match dt.bits() {
        64 => u64::MAX,
        b => (1u64 << b) - 1,
    }
}

/// Parses one element: `"0x…"` within the dtype's width, or null.
pub fn parse_bits(dt: DType, b: &Bits) -> Result<Option<u64>, String> {
    let Some(s) = b else { return Ok(None) };
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .ok_or_else(|| format!("element '{s}' is not a hex string \"0x…\""))?;
    let v = u64::from_str_radix(digits, 16)
        .map_err(|_| format!("element '{s}' is not a hex string \"0x…\""))?;
    if v & !mask(dt) != 0 {
        return Err(format!(
            "element '{s}' does not fit in {dt} ({} bits)",
            dt.bits()
        ));
    }
    Ok(Some(v))
}

pub fn bits_of(elems: &[Option<u64>]) -> Vec<Bits> {
    elems.iter().map(|e| e.map(hex)).collect()
}

fn elem_bits(e: &Elem) -> Bits {
    match e {
        Elem::Bits(b) => Some(hex(*b)),
        Elem::Uninit { .. } => None,
    }
}

/// A graph-level request for `roots` of `g`, and the arena node of each request node id.
pub fn graph_request(
    id: u64,
    case: &str,
    g: &Graph,
    verified: &Verified,
    inputs: &BTreeMap<NodeId, BufferInit>,
    outputs: &[(String, NodeId)],
    options: Options,
) -> (RunRequest, Vec<NodeId>) {
    let roots: Vec<NodeId> = outputs.iter().map(|o| o.1).collect();
    let (graph, order, req_id) = graph_nodes(g, &roots);
    let ins = order
        .iter()
        .filter(|&&n| g.node(n).op == Op::BUFFER)
        .filter_map(|&n| {
            inputs.get(&n).map(|init| InputBits {
                node: req_id[&n],
                dtype: g.node(n).dtype.name().to_string(),
                components: init.iter().map(|c| bits_of(c)).collect(),
            })
        })
        .collect();
    let outputs = outputs
        .iter()
        .map(|(name, n)| {
            let info = verified.info(*n);
            OutputSpec {
                name: name.clone(),
                node: req_id[n],
                dtype: info.dtype.name().to_string(),
                shape: info.shape.clone(),
                devices: match &info.device {
                    Some(d) if d.is_multi() => d.devices().len(),
                    _ => 1,
                },
            }
        })
        .collect();
    (
        RunRequest {
            id,
            case: case.to_string(),
            graph,
            inputs: ins,
            outputs,
            options,
        },
        order,
    )
}

/// The values of a graph-level answer, checked against what was asked for.
pub fn output_values(req: &RunRequest, outs: &[OutputBits]) -> Result<Vec<Option<Value>>, String> {
    if outs.len() != req.outputs.len() {
        return Err(format!(
            "the backend answered {} output(s) for the {} requested",
            outs.len(),
            req.outputs.len()
        ));
    }
    req.outputs
        .iter()
        .zip(outs)
        .map(|(spec, got)| {
            if got.name != spec.name {
                return Err(format!(
                    "output {} is named '{}', expected '{}'",
                    spec.node, got.name, spec.name
                ));
            }
            let dtype: DType = spec
                .dtype
                .parse()
                .map_err(|_| format!("unknown dtype {}", spec.dtype))?;
            let numel: usize = spec.shape.iter().product();
            if got.components.len() != spec.devices {
                return Err(format!(
                    "output '{}' has {} component(s), expected {}",
                    spec.name,
                    got.components.len(),
                    spec.devices
                ));
            }
            let mut comps = Vec::with_capacity(got.components.len());
            for (c, comp) in got.components.iter().enumerate() {
                if comp.len() != numel {
                    return Err(format!(
                        "output '{}' component {c} has {} element(s), expected {numel} (shape {:?})",
                        spec.name,
                        comp.len(),
                        spec.shape
                    ));
                }
                comps.push(elems(dtype, comp, NodeId(u32::MAX)).map_err(|e| {
                    format!("output '{}' component {c}: {e}", spec.name)
                })?);
            }
            let data = if spec.devices > 1 {
                Data::Multi(comps)
            } else {
                Data::Single(comps.pop().unwrap_or_default())
            };
            Ok(Some(Value {
                dtype,
                shape: spec.shape.clone(),
                data,
            }))
        })
        .collect()
}

/// Elements from bits; an unwritten element is poison attributed to `buffer`.
fn elems(dtype: DType, bits: &[Bits], buffer: NodeId) -> Result<Vec<Elem>, String> {
    bits.iter()
        .enumerate()
        .map(|(index, b)| {
            Ok(
                match parse_bits(dtype, b).map_err(|e| format!("element {index}: {e}"))? {
                    Some(v) => Elem::Bits(v),
                    None => Elem::Uninit { buffer, index },
                },
            )
        })
        .collect()
}

/// The bits of a value, per component.
pub fn value_bits(v: &Value) -> Vec<Vec<Bits>> {
    v.data
        .components()
        .iter()
        .map(|c| c.iter().map(elem_bits).collect())
        .collect()
}

/// A kernel program on the wire.
pub fn program_json(p: &Program) -> ProgramJson {
    ProgramJson {
        name: p.name.clone(),
        params: p
            .params
            .iter()
            .map(|d| ParamJson {
                dtype: d.dtype.name().to_string(),
                size: d.size,
                written: d.written,
            })
            .collect(),
        insts: p
            .insts
            .iter()
            .map(|i| InstJson {
                op: i.op.name().to_string(),
                dtype: i.dtype.name().to_string(),
                src: i.src.iter().map(|s| s.0).collect(),
                arg: match &i.arg {
                    KArg::None => None,
                    KArg::Param(s) => Some(InstArg::Param(*s)),
                    KArg::Reg(n) => Some(InstArg::Reg(*n)),
                    KArg::Local(n) => Some(InstArg::Local(*n)),
                    KArg::Const(b) => Some(InstArg::Const(hex(*b))),
                    KArg::Axis(a) => Some(InstArg::Axis(*a)),
                    KArg::Special(s) => Some(InstArg::Special(s.clone())),
                },
            })
            .collect(),
    }
}

/// A kernel-level request for schedule `s` with the graph buffers' contents `inputs`.
pub fn schedule_request(
    id: u64,
    case: &str,
    s: &Schedule,
    inputs: &BTreeMap<NodeId, BufferInit>,
) -> ScheduleRequest {
    use uopkit_compiler::schedule::{BufferKind, Step};
    let buffers = s
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let init = match b.kind {
                BufferKind::Graph(n) => inputs.get(&n).and_then(|c| c.first()),
                BufferKind::GraphComponent(n, c) => inputs.get(&n).and_then(|cs| cs.get(c)),
                BufferKind::Intermediate => None,
            };
            BufferSpec {
                id: i as u32,
                dtype: b.dtype.name().to_string(),
                size: b.size,
                device: b.device.to_string(),
                storage: b.storage,
                init: init.map(|c| bits_of(c)),
            }
        })
        .collect();
    let mut programs = vec![];
    let mut steps = vec![];
    for st in &s.steps {
        match st {
            Step::Kernel {
                device,
                program,
                args,
                ..
            } => {
                programs.push(program_json(program));
                steps.push(StepJson::Kernel {
                    program: programs.len() - 1,
                    device: device.to_string(),
                    args: args.iter().map(|a| a.0).collect(),
                });
            }
            Step::Copy { dst, src } => steps.push(StepJson::Copy {
                dst: dst.0,
                src: src.0,
            }),
        }
    }
    let mut read: Vec<u32> = s
        .outputs
        .iter()
        .flatten()
        .flat_map(|o| match &o.components {
            None => vec![o.buffer.0],
            Some(cs) => cs.iter().map(|(b, _)| b.0).collect(),
        })
        .collect();
    read.sort_unstable();
    read.dedup();
    ScheduleRequest {
        id,
        case: case.to_string(),
        buffers,
        programs,
        steps,
        read,
    }
}

/// The case outputs read out of a kernel-level answer's buffers through the schedule's views.
pub fn schedule_outputs(
    req: &ScheduleRequest,
    s: &Schedule,
    bufs: &[BufferBits],
) -> Result<Vec<Option<Value>>, String> {
    let mut got: BTreeMap<u32, &BufferBits> = BTreeMap::new();
    for b in bufs {
        if got.insert(b.id, b).is_some() {
            return Err(format!("buffer {} is answered twice", b.id));
        }
    }
    s.output_values(|b| {
        let decl = &s.buffers[b.0 as usize];
        let ans = got.get(&b.0).ok_or_else(|| {
            format!(
                "buffer {} was asked for ({:?}) but not answered",
                b.0, req.read
            )
        })?;
        if ans.data.len() != decl.size {
            return Err(format!(
                "buffer {} has {} element(s), expected {}",
                b.0,
                ans.data.len(),
                decl.size
            ));
        }
        elems(decl.dtype, &ans.data, NodeId(u32::MAX - b.0))
            .map_err(|e| format!("buffer {}: {e}", b.0))
    })
}

/// One line of JSON (no newline inside: serde_json never emits one in compact form).
pub fn to_line<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).unwrap_or_else(|e| {
        format!("{{\"type\":\"error\",\"id\":0,\"message\":\"cannot serialize: {e}\"}}")
    });
    s.push('\n');
    s
}
