//! The external-backend protocol `uopkit-backend/1` (`docs/backend-protocol.md`): the messages
//! as serde types with their JSON Schema, and the conversions between them and the kit's
//! values. uopkit's own compiled backends speak it too, from worker processes
//! (`crate::worker`), so there is one wire format and one client (`backends::process`).

mod bits;
mod convert;

pub use bits::Bits;

pub use convert::{
    bits_of, elem_bits, graph_request, hex, output_values, parse_bits, program_json,
    schedule_outputs, schedule_request, value_bits,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::case::NodeJson;

pub const PROTOCOL: &str = "uopkit-backend/1";

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
    /// The backend checks that each case *compiles* (a GPU compiler without a GPU, say): its
    /// answers carry no outputs, and a trial passes when the run succeeds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compile_only: bool,
    /// The backend cannot run on this machine (no device, no driver): every trial is skipped
    /// with this reason and no request is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// A graph-level backend that also answers `run_schedule` with kernel programs run as they
    /// are: the harness sends it the corpus's kernel-level cases too (a kernel-level backend
    /// gets them in any case).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kernel_cases: bool,
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgramJson {
    pub name: String,
    pub params: Vec<ParamJson>,
    pub insts: Vec<InstJson>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParamJson {
    pub dtype: String,
    pub size: usize,
    pub written: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Graph level, optional: other runs of the same request the backend also made (another
    /// thread count, another launch shape, …), each compared with the oracle like `outputs`
    /// and after them, so a difference that only one way of running shows is reported as
    /// such (docs/backend-protocol.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<VariantBits>,
}

/// One more run of a graph-level request: its outputs, or why it failed.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VariantBits {
    /// What was different about this run, for the report ("parallel loops in 3 chunks").
    pub label: String,
    /// One per requested output, in order (absent when `error` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<OutputBits>>,
    /// Why this run produced no outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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

/// One line of JSON (no newline inside: serde_json never emits one in compact form).
pub fn to_line<T: Serialize>(msg: &T) -> String {
    let mut s = serde_json::to_string(msg).unwrap_or_else(|e| {
        format!("{{\"type\":\"error\",\"id\":0,\"message\":\"cannot serialize: {e}\"}}")
    });
    s.push('\n');
    s
}
