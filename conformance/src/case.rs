//! The case file format (`uopkit-case/1`, see `docs/case-format.md`) as serde types.
//! Literals stay `serde_json::Value`s so that reading and writing a case keeps its bytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use uopkit_interp::ir::{DType, Op};
use uopkit_interp::scalar::Ub;

use crate::protocol::{BufferSpec, ProgramJson, StepJson};

pub const FORMAT: &str = "uopkit-case/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub format: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The tensor graph (empty for a kernel-level case).
    #[serde(default)]
    pub graph: Vec<NodeJson>,
    /// A kernel-level case: a schedule of kernel programs with its buffers and the expected
    /// contents of some buffers after it (`docs/case-format.md`, "Kernel-level cases").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelBody>,
    #[serde(default)]
    pub inputs: BTreeMap<String, Init>,
    #[serde(default)]
    pub outputs: Vec<Output>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_error: Option<ExpectError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleExpect>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeJson {
    pub id: u64,
    pub op: Op,
    pub dtype: DType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub src: Vec<u64>,
    #[serde(default, skip_serializing_if = "Json::is_null")]
    pub arg: Json,
}

/// Initial contents of a buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Init {
    Data(Vec<Json>),
    Fill(Json),
    Arange { start: Json, step: Json },
    Prng { seed: u64, lo: i128, hi: i128 },
    Uninit(bool),
    PerDevice(Vec<Init>),
}

/// How an output is compared (`docs/comparison.md`). JSON: `"exact"`, `{"ulp": n}`, `"bounded"`,
/// `{"either": [ALT, …]}`, `{"either_output": [ALT, …]}`, where each ALT is a list shaped like
/// `expect` (for a multi-device output, one list per device).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compare {
    /// The same bits (+0 and −0 differ; NaN per the output's `nan` policy).
    #[default]
    Exact,
    /// At most n steps apart on the dtype's ordered line (±0 are 0 apart, NaN vs a number never
    /// matches; NaN vs NaN per the `nan` policy).
    Ulp(u64),
    /// Exact against the case's literals (the canonical evaluation order); a backend may land
    /// anywhere inside the bound the oracle derives from the backend's allowances.
    Bounded,
    /// Per element: `expect`'s value or the value at the same position of any alternative
    /// (`null` there: no alternative at that position).
    Either(Vec<Json>),
    /// The whole output equals `expect` or one of the alternatives.
    EitherOutput(Vec<Json>),
}

impl Compare {
    /// The mode's name as written in reports: `exact`, `ulp(2)`, `bounded`, `either`, `either_output`.
    pub fn label(&self) -> String {
        match self {
            Compare::Exact => "exact".into(),
            Compare::Ulp(n) => format!("ulp({n})"),
            Compare::Bounded => "bounded".into(),
            Compare::Either(a) => format!("either({} alternative list(s))", a.len()),
            Compare::EitherOutput(a) => format!("either_output({} alternative output(s))", a.len()),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NanPolicy {
    /// A NaN must have exactly the expected bits.
    #[default]
    Canonical,
    /// Any NaN matches any NaN.
    Any,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    pub name: String,
    pub node: u64,
    pub shape: Vec<usize>,
    /// Row-major literals; for a multi-device value, one list per device.
    pub expect: Json,
    #[serde(default)]
    pub compare: Compare,
    #[serde(default)]
    pub nan: NanPolicy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Ub,
    Verify,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectError {
    pub kind: ErrorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ub: Option<Ub>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// Kernel-level cases: the program (index into `kernel.programs`) and instruction (its
    /// index in the program) where the error happens; `element` is then the element of the
    /// memory accessed (out of bounds) or of the buffer never written (uninitialized read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inst: Option<u32>,
}

/// The body of a kernel-level case: the buffers, programs and steps exactly as the
/// kernel-level protocol request `run_schedule` carries them (`docs/backend-protocol.md`),
/// and the buffers to compare after the last step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelBody {
    pub buffers: Vec<BufferSpec>,
    pub programs: Vec<ProgramJson>,
    pub steps: Vec<StepJson>,
    /// The buffers to compare after the last step (may be empty when `expect_error` is given).
    #[serde(default)]
    pub expect: Vec<BufferExpect>,
}

/// A buffer's expected contents after a kernel-level case's steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferExpect {
    pub name: String,
    pub buffer: u32,
    /// `size` literals of the buffer's dtype.
    pub expect: Vec<Json>,
    #[serde(default)]
    pub nan: NanPolicy,
}

/// Expectations about the compiled schedule (checked by the compiler's trials).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleExpect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_kernel: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_pairs: Option<Vec<(String, String)>>,
    /// How the compiler must lower ALLREDUCE for this case: "naive", "ring" or "auto"
    /// (tinygrad's default choice). An instruction to the compiler, not an expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allreduce: Option<String>,
}

impl Case {
    /// The canonical text of a case file (what `uopkit fmt` writes; the corpus generator's
    /// `builder.dumps_case` writes the same bytes): one top-level key per line, `graph` and
    /// `outputs` one element per line and `inputs` one buffer per line, each value written
    /// as Python's `json.dumps` writes it (`", "` and `": "`, non-ASCII as `\uXXXX`), a
    /// newline at the end.
    pub fn to_canonical_string(&self) -> String {
        if let Some(k) = &self.kernel {
            return self.kernel_canonical_string(k);
        }
        let mut parts: Vec<String> = vec![
            field("format", &self.format),
            field("description", &self.description),
            field("tags", &self.tags),
            rows("graph", self.graph.iter().map(compact)),
            if self.inputs.is_empty() {
                field("inputs", &self.inputs)
            } else {
                let inner: Vec<String> = self
                    .inputs
                    .iter()
                    .map(|(k, v)| format!("    {}: {}", compact(k), compact(v)))
                    .collect();
                format!("  \"inputs\": {{\n{}\n  }}", inner.join(",\n"))
            },
            rows("outputs", self.outputs.iter().map(compact)),
        ];
        if let Some(e) = &self.expect_error {
            parts.push(field("expect_error", e));
        }
        if let Some(s) = &self.schedule {
            parts.push(field("schedule", s));
        }
        format!("{{\n{}\n}}\n", parts.join(",\n"))
    }
}

impl Case {
    /// The canonical text of a kernel-level case: `kernel` with one buffer, one instruction,
    /// one step and one expected buffer per line (`dumps_kernel_case` in corpus/gen/builder.py,
    /// which tools/tinygrad_export_kernels.py uses too, writes the same bytes).
    fn kernel_canonical_string(&self, k: &KernelBody) -> String {
        let mut programs = vec![];
        for p in &k.programs {
            let insts: Vec<String> = p
                .insts
                .iter()
                .map(|i| format!("          {}", compact(i)))
                .collect();
            programs.push(format!(
                "      {{\"name\": {}, \"params\": {}, \"insts\": [\n{}\n      ]}}",
                compact(&p.name),
                compact(&p.params),
                insts.join(",\n")
            ));
        }
        let list = |key: &str, items: Vec<String>| {
            if items.is_empty() {
                format!("    {}: []", compact(&key))
            } else {
                format!("    {}: [\n{}\n    ]", compact(&key), items.join(",\n"))
            }
        };
        let row = |v: String| format!("      {v}");
        let body = [
            list(
                "buffers",
                k.buffers.iter().map(|b| row(compact(b))).collect(),
            ),
            list("programs", programs),
            list("steps", k.steps.iter().map(|s| row(compact(s))).collect()),
            list("expect", k.expect.iter().map(|e| row(compact(e))).collect()),
        ];
        let mut parts: Vec<String> = vec![
            field("format", &self.format),
            field("description", &self.description),
            field("tags", &self.tags),
            format!("  \"kernel\": {{\n{}\n  }}", body.join(",\n")),
        ];
        if let Some(e) = &self.expect_error {
            parts.push(field("expect_error", e));
        }
        format!("{{\n{}\n}}\n", parts.join(",\n"))
    }
}

/// `  "key": value` with the value on one line.
fn field(key: &str, v: &impl Serialize) -> String {
    format!("  {}: {}", compact(&key), compact(v))
}

/// `  "key": [` one element per line `]` (`[]` when empty).
fn rows(key: &str, items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.map(|s| format!("    {s}")).collect();
    if items.is_empty() {
        return format!("  {}: []", compact(&key));
    }
    format!("  {}: [\n{}\n  ]", compact(&key), items.join(",\n"))
}

/// One value on one line, as Python's `json.dumps(v)` writes it.
fn compact(v: &impl Serialize) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    // Plain data with string keys: serializing cannot fail.
    if v.serialize(&mut ser).is_err() {
        return "null".into();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// serde_json's compact output with Python's separators and ASCII-only strings.
struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for ch in fragment.chars() {
            if ch.is_ascii() {
                let mut b = [0u8; 1];
                w.write_all(ch.encode_utf8(&mut b).as_bytes())?;
            } else {
                let mut units = [0u16; 2];
                for u in ch.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// The JSON Schema of the case format (what `uopkit schema` prints).
pub fn json_schema() -> Json {
    let literal = serde_json::json!({
        "description": "scalar literal: bool, integer, number, or a string (\"inf\", \"-inf\", \"nan\", \"-nan\", \"-0.0\", a decimal, or \"0x…\" raw bits)",
        "type": ["boolean", "integer", "number", "string"]
    });
    let init = serde_json::json!({
        "oneOf": [
            {"type": "object", "required": ["data"], "properties": {"data": {"type": "array", "items": {"$ref": "#/$defs/literal"}}}, "additionalProperties": false},
            {"type": "object", "required": ["fill"], "properties": {"fill": {"$ref": "#/$defs/literal"}}, "additionalProperties": false},
            {"type": "object", "required": ["arange"], "properties": {"arange": {"type": "object", "required": ["start", "step"], "properties": {"start": {"$ref": "#/$defs/literal"}, "step": {"$ref": "#/$defs/literal"}}}}, "additionalProperties": false},
            {"type": "object", "required": ["prng"], "properties": {"prng": {"type": "object", "required": ["seed", "lo", "hi"], "properties": {"seed": {"type": "integer"}, "lo": {"type": "integer"}, "hi": {"type": "integer"}}}}, "additionalProperties": false},
            {"type": "object", "required": ["uninit"], "properties": {"uninit": {"type": "boolean"}}, "additionalProperties": false},
            {"type": "object", "required": ["per_device"], "properties": {"per_device": {"type": "array", "items": {"$ref": "#/$defs/init"}}}, "additionalProperties": false}
        ]
    });
    let ops: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
    let dtypes: Vec<&str> = std::iter::once("void")
        .chain(DType::ALL.iter().map(|d| d.name()))
        .collect();
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "uopkit case",
        "description": "One conformance case: a UOp tensor graph, its inputs, and the expected outputs or error. See docs/case-format.md.",
        "type": "object",
        "required": ["format", "description"],
        "oneOf": [{"required": ["graph"]}, {"required": ["kernel"]}],
        "additionalProperties": false,
        "properties": {
            "format": {"const": FORMAT},
            "description": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "graph": {"type": "array", "items": {
                "type": "object", "required": ["id", "op", "dtype"], "additionalProperties": false,
                "properties": {
                    "id": {"type": "integer", "minimum": 0},
                    "op": {"enum": ops},
                    "dtype": {"enum": dtypes},
                    "src": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    "arg": {"description": "per-op argument, see docs/ir.md"}
                }
            }},
            "kernel": {
                "description": "a kernel-level case: buffers, programs and steps as in the kernel-level protocol's run_schedule request (`uopkit schema --protocol`), and the buffers expected after the steps",
                "type": "object", "required": ["buffers", "programs", "steps"], "additionalProperties": false,
                "properties": {
                    "buffers": {"type": "array"},
                    "programs": {"type": "array"},
                    "steps": {"type": "array"},
                    "expect": {"type": "array", "items": {
                        "type": "object", "required": ["name", "buffer", "expect"], "additionalProperties": false,
                        "properties": {
                            "name": {"type": "string"},
                            "buffer": {"type": "integer", "minimum": 0},
                            "expect": {"type": "array", "items": {"$ref": "#/$defs/literal"}},
                            "nan": {"enum": ["canonical", "any"]}
                        }
                    }}
                }
            },
            "inputs": {"type": "object", "additionalProperties": {"$ref": "#/$defs/init"}},
            "outputs": {"type": "array", "items": {
                "type": "object", "required": ["name", "node", "shape", "expect"], "additionalProperties": false,
                "properties": {
                    "name": {"type": "string"},
                    "node": {"type": "integer"},
                    "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    "expect": {"type": "array"},
                    "compare": {"oneOf": [
                        {"enum": ["exact", "bounded"]},
                        {"type": "object", "required": ["ulp"], "properties": {"ulp": {"type": "integer", "minimum": 0}}, "additionalProperties": false},
                        {"type": "object", "required": ["either"], "properties": {"either": {"type": "array", "items": {"type": "array"}}}, "additionalProperties": false},
                        {"type": "object", "required": ["either_output"], "properties": {"either_output": {"type": "array", "items": {"type": "array"}}}, "additionalProperties": false}
                    ]},
                    "nan": {"enum": ["canonical", "any"]}
                }
            }},
            "expect_error": {
                "type": "object", "required": ["kind"], "additionalProperties": false,
                "properties": {
                    "kind": {"enum": ["ub", "verify"]},
                    "ub": {"enum": ["div_by_zero", "div_overflow", "shift_out_of_range", "float_to_int_out_of_range", "out_of_bounds", "uninitialized_read"]},
                    "node": {"type": "integer"},
                    "element": {"type": "integer"},
                    "contains": {"type": "string"},
                    "program": {"type": "integer", "minimum": 0},
                    "inst": {"type": "integer", "minimum": 0}
                }
            },
            "schedule": {
                "type": "object", "additionalProperties": false,
                "properties": {
                    "copies": {"type": "integer"},
                    "kernels": {"type": "integer"},
                    "no_kernel": {"type": "boolean"},
                    "writes": {"type": "array", "items": {"type": "integer"}},
                    "copy_pairs": {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}},
                    "allreduce": {"enum": ["naive", "ring", "auto"]}
                }
            }
        },
        "$defs": {"literal": literal, "init": init}
    })
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    /// The bytes Python's `corpus/gen/builder.py dumps_case` writes for this case (produced
    /// there and pasted: non-ASCII and an astral character as UTF-16 escapes, a control
    /// character as `\u0001`, empty lists and maps inline, `expect_error` on one line).
    const PYTHON: &str = r#"{
  "format": "uopkit-case/1",
  "description": "caf\u00e9 \ud83d\ude00\t\"q\"\u0001",
  "tags": [],
  "graph": [
    {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"device": "CPU:0", "size": 2, "slot": 0}}
  ],
  "inputs": {},
  "outputs": [],
  "expect_error": {"kind": "ub", "ub": "div_by_zero", "node": 0}
}
"#;

    #[test]
    fn canonical_text_is_the_generators() {
        let case: Case = serde_json::from_str(PYTHON).expect("parses");
        assert_eq!(case.description, "caf\u{e9} \u{1F600}\t\"q\"\u{1}");
        assert_eq!(case.to_canonical_string(), PYTHON);
    }
}
