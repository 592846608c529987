//! Between the protocol's messages and the kit's values: bits as hex strings, a case's graph
//! as a graph-level request, a schedule as a kernel-level request, and answers back to values.

use std::collections::BTreeMap;

use uopkit_compiler::schedule::Schedule;
use uopkit_interp::eval::{BufferInit, Data, Elem, Value};
use uopkit_interp::ir::{DType, Graph, NodeId, Op};
use uopkit_interp::kernel::{KArg, Program};
use uopkit_interp::verify::Verified;

use super::{
    Bits, BufferBits, BufferSpec, InputBits, InstArg, InstJson, Options, OutputBits, OutputSpec,
    ParamJson, ProgramJson, RunRequest, ScheduleRequest, StepJson,
};
use crate::gen::export::graph_nodes;

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
    let s = match b {
        Bits::Null => return Ok(None),
        Bits::Hex(v) if v & !mask(dt) == 0 => return Ok(Some(*v)),
        // Out of the dtype's width: the message below names it as written.
        Bits::Hex(_) | Bits::Text(_) => b.text().unwrap_or_default(),
    };
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
    elems.iter().map(|&e| Bits::of(e)).collect()
}

pub fn elem_bits(e: &Elem) -> Bits {
    match e {
        Elem::Bits(b) => Bits::Hex(*b),
        Elem::Uninit { .. } => Bits::Null,
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
                devices: crate::load::multi_components(info.device.as_ref(), g.node(*n).op)
                    .unwrap_or(1),
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
