//! From a graph (built with the tensor builder, or shrunk) to a [`Case`]: the nodes the
//! outputs reach, numbered 0.. in dependency order, their args in the case format (the
//! inverse of `load::parse_arg`), the buffers' initial contents as literals, and the
//! outputs with their shapes.
//!
//! Expected values are left empty (`"expect": []`) by [`export`]: a generated case is
//! judged against the oracle (`backend::check_cpu`), which does not read them.
//! [`fill_expect_from_oracle`] writes the oracle's values, for regression cases only (see
//! `corpus/regressions/README.md`: the corpus otherwise never takes expected values from the
//! oracle).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};
use uopkit_interp::eval::{BufferInit, Data, Elem};
use uopkit_interp::ir::{Arg, DType, Graph, NodeId, Op};
use uopkit_interp::scalar::literal;
use uopkit_interp::verify;

use crate::case::{Case, Compare, Init, NanPolicy, NodeJson, Output, FORMAT};
use crate::run;

/// A node's `arg` as case-file JSON (see `docs/ir.md`).
pub fn arg_json(op: Op, dtype: DType, arg: &Arg) -> Json {
    match arg {
        Arg::None => Json::Null,
        Arg::Buffer { slot, size, device } => json!({"slot": slot, "size": size, "device": device}),
        Arg::Const(bits) => literal::format(dtype, *bits),
        Arg::Device(d) => json!(d),
        Arg::Shape(s) => json!(s),
        Arg::Perm(p) => json!(p),
        Arg::Window { offsets, sizes } => json!([offsets, sizes]),
        Arg::Flip(f) => json!(f),
        Arg::Reduce { op, axes, order } => match order {
            uopkit_interp::ir::ReduceOrder::Sequential => json!([op.name(), axes]),
            o => json!([op.name(), axes, o]),
        },
        Arg::AllReduce { op, devices } => json!([op.name(), devices]),
        Arg::Index(i) if op == Op::MSELECT => json!(i),
        Arg::Index(i) => json!(i),
        Arg::Axis(a) => json!([a]),
        Arg::Name(n) => json!(n),
        // Kernel graphs are never exported as cases; spelled for completeness.
        Arg::Kernel(k, tag) => json!({"kernel": format!("{k:?}"), "tag": tag}),
    }
}

/// The initial contents of one buffer as a case input. Fully unwritten contents give None
/// (the buffer is left out: uninitialized); partly written contents cannot be written in
/// the case format and are an error.
pub fn init_json(dtype: DType, init: &BufferInit) -> Result<Option<Init>, String> {
    let comp = |c: &Vec<Option<u64>>| -> Result<Option<Init>, String> {
        if c.iter().all(|e| e.is_none()) {
            return Ok(None);
        }
        let data: Option<Vec<Json>> = c
            .iter()
            .map(|e| e.map(|b| literal::format(dtype, b)))
            .collect();
        data.map(|d| Some(Init::Data(d)))
            .ok_or_else(|| "a buffer whose contents are partly unwritten".to_string())
    };
    match init.as_slice() {
        [one] => comp(one),
        many => {
            let per: Vec<Option<Init>> = many.iter().map(comp).collect::<Result<_, _>>()?;
            if per.iter().all(|p| p.is_none()) {
                return Ok(None);
            }
            let per: Option<Vec<Init>> = per.into_iter().collect();
            per.map(|p| Some(Init::PerDevice(p)))
                .ok_or_else(|| "a multi-device buffer with an unwritten component".to_string())
        }
    }
}

/// What `roots` reach in `g` as case-file nodes numbered 0.. in dependency order, with the
/// order (the graph node of each file id) and the file id of each graph node.
pub fn graph_nodes(
    g: &Graph,
    roots: &[NodeId],
) -> (Vec<NodeJson>, Vec<NodeId>, BTreeMap<NodeId, u64>) {
    let order = g.reachable(roots);
    let file_id: BTreeMap<NodeId, u64> = order
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i as u64))
        .collect();
    let nodes = order
        .iter()
        .map(|&id| {
            let n = g.node(id);
            NodeJson {
                id: file_id[&id],
                op: n.op,
                dtype: n.dtype,
                src: n.src.iter().map(|s| file_id[s]).collect(),
                arg: arg_json(n.op, n.dtype, &n.arg),
            }
        })
        .collect();
    (nodes, order, file_id)
}

/// A case holding what `outputs` (name, node) reach in `g`, with `inputs` as the buffers'
/// contents and empty expectations. Node ids are 0.. in dependency order.
pub fn export(
    g: &Graph,
    inputs: &BTreeMap<NodeId, BufferInit>,
    outputs: &[(String, NodeId)],
    description: &str,
    tags: &[&str],
) -> Result<Case, String> {
    let ver = verify::verify(g).map_err(|e| format!("the graph does not verify: {e}"))?;
    let roots: Vec<NodeId> = outputs.iter().map(|o| o.1).collect();
    let (graph, order, file_id) = graph_nodes(g, &roots);
    let mut case_inputs = BTreeMap::new();
    for &id in &order {
        let n = g.node(id);
        if n.op == Op::BUFFER {
            if let Some(init) = inputs.get(&id) {
                if let Some(i) =
                    init_json(n.dtype, init).map_err(|e| format!("buffer {id}: {e}"))?
                {
                    case_inputs.insert(file_id[&id].to_string(), i);
                }
            }
        }
    }
    let outputs = outputs
        .iter()
        .map(|(name, id)| Output {
            name: name.clone(),
            node: file_id[id],
            shape: ver.info(*id).shape.clone(),
            expect: Json::Array(vec![]),
            compare: Compare::Exact,
            nan: NanPolicy::Canonical,
        })
        .collect();
    Ok(Case {
        format: FORMAT.to_string(),
        description: description.to_string(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        graph,
        kernel: None,
        inputs: case_inputs,
        outputs,
        expect_error: None,
        schedule: None,
    })
}

/// The literals of a value: a list, or one list per device for a multi-device value.
pub fn value_json(v: &uopkit_interp::eval::Value) -> Result<Json, String> {
    let list = |c: &Vec<Elem>| -> Result<Json, String> {
        c.iter()
            .map(|e| match e {
                Elem::Bits(b) => Ok(literal::format(v.dtype, *b)),
                Elem::Uninit { .. } => Err("an element was never written".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Json::Array)
    };
    match &v.data {
        Data::Single(c) => list(c),
        Data::Multi(cs) => cs
            .iter()
            .map(list)
            .collect::<Result<Vec<_>, _>>()
            .map(Json::Array),
    }
}

/// Fills every output's `expect` with the oracle's values (and fixes its `shape`). For
/// regression cases only: their reference is the oracle at discovery time.
pub fn fill_expect_from_oracle(case: &mut Case) -> Result<(), String> {
    let oracle = run::run_oracle(case).map_err(|e| e.to_string())?;
    let values = run::output_values(case, &oracle).map_err(|e| e.to_string())?;
    let filled: Vec<(Vec<usize>, Json)> = values
        .iter()
        .map(|v| Ok((v.shape.clone(), value_json(v)?)))
        .collect::<Result<_, String>>()?;
    for (out, (shape, expect)) in case.outputs.iter_mut().zip(filled) {
        out.shape = shape;
        out.expect = expect;
    }
    Ok(())
}

/// Sets every output's `shape` to what the verifier computes (after an edit of the graph).
pub fn fix_output_shapes(case: &mut Case) -> Result<(), String> {
    // Load the graph alone: the outputs' stale shapes are what is being fixed.
    let graph_only = Case {
        outputs: vec![],
        ..case.clone()
    };
    let (loaded, ver) = crate::load::load(&graph_only).map_err(|e| e.to_string())?;
    for out in case.outputs.iter_mut() {
        let id = loaded.arena(out.node).map_err(|e| e.to_string())?;
        out.shape = ver.info(id).shape.clone();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use uopkit_interp::ir::Device;
    use uopkit_interp::tensor::{Ctx, Tensor};

    #[test]
    fn export_then_load_gives_the_same_values() {
        let ctx = Ctx::new();
        let a = Tensor::from_i64s(
            &ctx,
            &[2, 3],
            DType::Int32,
            Device::CPU,
            &[1, 2, 3, 4, 5, 6],
        )
        .unwrap();
        let b = a
            .permute(&[1, 0])
            .unwrap()
            .reshape(&[6])
            .unwrap()
            .add(7)
            .unwrap();
        let f = Tensor::from_f64s(&ctx, &[2], DType::Float16, Device::CPU, &[0.5, -0.0]).unwrap();
        let s = f.sum(&[0]).unwrap();
        let mut case = export(
            &ctx.graph(),
            &ctx.inputs(),
            &[("b".into(), b.id()), ("s".into(), s.id())],
            "test",
            &["gen"],
        )
        .unwrap();
        assert_eq!(case.outputs[0].shape, vec![6]);
        assert_eq!(case.outputs[1].shape, Vec::<usize>::new());
        fill_expect_from_oracle(&mut case).unwrap();
        assert_eq!(case.outputs[0].expect, json!([8, 11, 9, 12, 10, 13]));
        assert_eq!(case.outputs[1].expect, json!(["0.5"]));
        // The filled case passes the oracle check, and its text round-trips.
        assert!(run::check_oracle(&case).is_ok());
        let text = case.to_canonical_string();
        assert_eq!(crate::load::parse_case(&text).unwrap(), case);
    }
}
