//! Shrinking a failing case to a small one that still fails.
//!
//! Two levels, both greedy (accept the first candidate that still fails, start over) and
//! bounded by [`ShrinkOpts`]:
//!
//! * [`shrink_recipe`]: on a generated program (`gen::tensor::Recipe`): drop steps, then make
//!   the steps' words smaller (smaller shapes, simpler ops, small values). Cheap and large.
//! * [`shrink_case`]: on any case's graph: drop outputs; move an output down to one of its
//!   sources (cutting the nodes above); bypass a node by a source of the same type and
//!   shape; replace a subgraph by a BUFFER holding its oracle value (plus a RESHAPE), or by
//!   a CONST when the value is uniform; replace buffer contents by `0, 1, 2, …`.
//!
//! A candidate is only offered to the predicate when the oracle runs it without error or
//! undefined behaviour, so the result is always a valid, defined case. The predicate
//! decides what "still fails" means (the fuzzer keeps the failure's class: a value mismatch
//! stays a value mismatch).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use uopkit_interp::eval::{Data, Elem};
use uopkit_interp::ir::{DType, Op};

use crate::case::{Case, Init, NodeJson};
use crate::gen::export::{fix_output_shapes, value_json};
use crate::gen::tensor::{build, Generated, Recipe, TensorConfig, STEP_WORDS};
use crate::run;

/// Limits of one shrink.
#[derive(Clone, Copy, Debug)]
pub struct ShrinkOpts {
    /// The most candidates offered to the predicate.
    pub max_checks: usize,
    /// Wall-clock budget.
    pub max_time: Duration,
}

impl Default for ShrinkOpts {
    fn default() -> Self {
        ShrinkOpts {
            max_checks: 400,
            max_time: Duration::from_secs(60),
        }
    }
}

/// What a shrink did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShrinkStats {
    /// Candidates offered to the predicate.
    pub checks: usize,
    /// Candidates accepted (each one a smaller failing case).
    pub accepted: usize,
    pub nodes_before: usize,
    pub nodes_after: usize,
}

struct Budget {
    opts: ShrinkOpts,
    start: Instant,
    checks: usize,
}

impl Budget {
    fn new(opts: ShrinkOpts) -> Self {
        Budget {
            opts,
            start: Instant::now(),
            checks: 0,
        }
    }
    fn left(&self) -> bool {
        self.checks < self.opts.max_checks && self.start.elapsed() < self.opts.max_time
    }
}

// ------------------------------------------------------------------------------------------
// Recipes

/// Shrinks a generated program while `fails` holds for what it builds. Returns the smallest
/// failing program found (the input when nothing smaller fails).
pub fn shrink_recipe(
    recipe: &Recipe,
    cfg: &TensorConfig,
    opts: ShrinkOpts,
    fails: &mut dyn FnMut(&Generated) -> bool,
) -> (Generated, ShrinkStats) {
    let mut budget = Budget::new(opts);
    let mut cur = build(recipe, cfg);
    let mut stats = ShrinkStats {
        nodes_before: cur.case.graph.len(),
        ..ShrinkStats::default()
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    seen.insert(cur.case.to_canonical_string());
    let mut improved = true;
    while improved && budget.left() {
        improved = false;
        for cand in recipe_candidates(&cur.recipe) {
            if !budget.left() {
                break;
            }
            let g = build(&cand, cfg);
            // Only smaller graphs, and each graph once.
            if g.case.graph.len() > cur.case.graph.len()
                || !seen.insert(g.case.to_canonical_string())
            {
                continue;
            }
            if run::run_oracle(&g.case).is_err() {
                continue;
            }
            budget.checks += 1;
            if fails(&g) {
                stats.accepted += 1;
                cur = g;
                improved = true;
                break;
            }
        }
    }
    stats.checks = budget.checks;
    stats.nodes_after = cur.case.graph.len();
    (cur, stats)
}

/// Simpler recipes: one step fewer (the last steps first), then one word of one step
/// smaller.
fn recipe_candidates(r: &Recipe) -> Vec<Recipe> {
    let mut out = vec![];
    for i in (0..r.steps.len()).rev() {
        if r.steps.len() > 1 {
            let mut s = r.clone();
            s.steps.remove(i);
            out.push(s);
        }
    }
    for i in 0..r.steps.len() {
        for w in 0..STEP_WORDS {
            let v = r.steps[i][w];
            for smaller in [0, v / 2, v % 4] {
                if smaller < v {
                    let mut s = r.clone();
                    s.steps[i][w] = smaller;
                    out.push(s);
                }
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// Cases

/// The case without nodes the outputs do not reach, ids renumbered 0.. in dependency order
/// (inputs follow their buffers).
pub fn gc(case: &Case) -> Case {
    let by_id: BTreeMap<u64, &NodeJson> = case.graph.iter().map(|n| (n.id, n)).collect();
    // Post-order DFS from the outputs (iterative).
    let mut order: Vec<u64> = vec![];
    let mut done: BTreeSet<u64> = BTreeSet::new();
    for out in &case.outputs {
        let mut stack = vec![(out.node, false)];
        while let Some((id, expanded)) = stack.pop() {
            if done.contains(&id) {
                continue;
            }
            if expanded {
                done.insert(id);
                order.push(id);
                continue;
            }
            stack.push((id, true));
            if let Some(n) = by_id.get(&id) {
                for &s in n.src.iter().rev() {
                    if !done.contains(&s) {
                        stack.push((s, false));
                    }
                }
            }
        }
    }
    let new_id: BTreeMap<u64, u64> = order
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i as u64))
        .collect();
    let mut out = case.clone();
    out.graph = order
        .iter()
        .filter_map(|id| by_id.get(id))
        .map(|n| NodeJson {
            id: new_id[&n.id],
            src: n
                .src
                .iter()
                .map(|s| new_id.get(s).copied().unwrap_or(*s))
                .collect(),
            ..(*n).clone()
        })
        .collect();
    out.inputs = case
        .inputs
        .iter()
        .filter_map(|(k, v)| {
            let id: u64 = k.parse().ok()?;
            new_id.get(&id).map(|n| (n.to_string(), v.clone()))
        })
        .collect();
    for o in out.outputs.iter_mut() {
        o.node = new_id.get(&o.node).copied().unwrap_or(o.node);
    }
    out
}

/// Shrinks `case` while `fails` holds. The case should already fail; the result is the
/// smallest failing case found, garbage-collected and renumbered.
pub fn shrink_case(
    case: &Case,
    opts: ShrinkOpts,
    fails: &mut dyn FnMut(&Case) -> bool,
) -> (Case, ShrinkStats) {
    let mut budget = Budget::new(opts);
    let mut cur = gc(case);
    let mut stats = ShrinkStats {
        nodes_before: case.graph.len(),
        ..ShrinkStats::default()
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    seen.insert(cur.to_canonical_string());
    let mut improved = true;
    while improved && budget.left() {
        improved = false;
        let cands = case_candidates(&cur);
        for cand in cands {
            if !budget.left() {
                break;
            }
            let mut cand = gc(&cand);
            if fix_output_shapes(&mut cand).is_err() {
                continue;
            }
            if !smaller(&cand, &cur) || !seen.insert(cand.to_canonical_string()) {
                continue;
            }
            if run::run_oracle(&cand).is_err() {
                continue;
            }
            budget.checks += 1;
            if fails(&cand) {
                stats.accepted += 1;
                cur = cand;
                improved = true;
                break;
            }
        }
    }
    stats.checks = budget.checks;
    stats.nodes_after = cur.graph.len();
    (cur, stats)
}

/// Fewer nodes, or as many with fewer outputs or simpler inputs.
fn smaller(a: &Case, b: &Case) -> bool {
    let weight = |c: &Case| {
        let data: usize = c
            .inputs
            .values()
            .map(|i| matches!(i, Init::Data(_)) as usize)
            .sum();
        (c.graph.len(), c.outputs.len(), data)
    };
    weight(a) < weight(b)
}

fn node(case: &Case, id: u64) -> Option<&NodeJson> {
    case.graph.iter().find(|n| n.id == id)
}

/// `case` with every use of node `from` (sources and outputs) pointing to `to`.
fn redirect(case: &Case, from: u64, to: u64) -> Case {
    let mut c = case.clone();
    for n in c.graph.iter_mut() {
        for s in n.src.iter_mut() {
            if *s == from {
                *s = to;
            }
        }
    }
    for o in c.outputs.iter_mut() {
        if o.node == from {
            o.node = to;
        }
    }
    c
}

/// `case` with node `id` replaced by `new`: its first node takes the id, further node k
/// (0-based) gets a fresh id and is named in sources as `u64::MAX - k`. `init` gives the
/// contents of a buffer among them (0: the first node, k ≥ 1: further node k-1).
fn replace(case: &Case, id: u64, new: Vec<NodeJson>, init: Option<(usize, Init)>) -> Case {
    let mut c = case.clone();
    let fresh = c.graph.iter().map(|n| n.id).max().unwrap_or(0) + 1;
    let fix = |s: u64| {
        if s >= u64::MAX - 16 {
            fresh + (u64::MAX - s)
        } else {
            s
        }
    };
    let mut new = new.into_iter();
    let Some(first) = new.next() else { return c };
    if let Some(slot) = c.graph.iter_mut().find(|n| n.id == id) {
        *slot = NodeJson {
            id,
            src: first.src.iter().map(|&s| fix(s)).collect(),
            ..first
        };
    }
    for (k, n) in new.enumerate() {
        c.graph.push(NodeJson {
            id: fresh + k as u64,
            src: n.src.iter().map(|&s| fix(s)).collect(),
            ..n
        });
    }
    c.inputs.remove(&id.to_string());
    if let Some((k, i)) = init {
        // 0: the replaced node itself; k ≥ 1: the k-th further node.
        let target = if k == 0 { id } else { fresh + k as u64 - 1 };
        c.inputs.insert(target.to_string(), i);
    }
    c
}

fn next_slot(case: &Case) -> u64 {
    case.graph
        .iter()
        .filter(|n| n.op == Op::BUFFER)
        .filter_map(|n| n.arg.get("slot").and_then(|s| s.as_u64()))
        .max()
        .map_or(0, |s| s + 1)
}

/// The candidates of one round, most promising first.
fn case_candidates(cur: &Case) -> Vec<Case> {
    let mut out = vec![];
    // 1. Drop an output.
    if cur.outputs.len() > 1 {
        for k in 0..cur.outputs.len() {
            let mut c = cur.clone();
            c.outputs.remove(k);
            out.push(c);
        }
    }
    // 2. Move an output down to one of its sources.
    for k in 0..cur.outputs.len() {
        if let Some(n) = node(cur, cur.outputs[k].node) {
            for &s in &n.src {
                if node(cur, s).is_some_and(|m| m.dtype != DType::Void) {
                    let mut c = cur.clone();
                    c.outputs[k].node = s;
                    out.push(c);
                }
            }
        }
    }
    // Nodes by the size of what they reach, largest first.
    let Ok(oracle) = run::run_oracle(cur) else {
        return out;
    };
    let reach = |id: u64| -> usize {
        let mut seen = BTreeSet::new();
        let mut stack = vec![id];
        while let Some(i) = stack.pop() {
            if seen.insert(i) {
                if let Some(n) = node(cur, i) {
                    stack.extend(n.src.iter().copied());
                }
            }
        }
        seen.len()
    };
    let mut ids: Vec<(usize, u64)> = cur.graph.iter().map(|n| (reach(n.id), n.id)).collect();
    ids.sort_by(|a, b| b.cmp(a));
    let slot = next_slot(cur);
    for &(size, id) in &ids {
        let Some(n) = node(cur, id) else { continue };
        if n.dtype == DType::Void {
            continue;
        }
        // 3. Bypass: use a source of the same dtype instead (verification checks shapes).
        for &s in &n.src {
            if node(cur, s).is_some_and(|m| m.dtype == n.dtype) {
                out.push(redirect(cur, id, s));
            }
        }
        if size <= 2 || n.op == Op::BUFFER {
            continue;
        }
        // 4. The node's oracle value as a buffer (+ reshape), or a constant.
        let Ok(aid) = oracle.loaded.arena(id) else {
            continue;
        };
        let Some(v) = oracle.evaluation.value(aid) else {
            continue;
        };
        let Data::Single(elems) = &v.data else {
            continue;
        };
        let Some(bits): Option<Vec<u64>> = elems
            .iter()
            .map(|e| {
                if let Elem::Bits(b) = e {
                    Some(*b)
                } else {
                    None
                }
            })
            .collect()
        else {
            continue;
        };
        let info = oracle.verified.info(aid);
        if !bits.is_empty() && bits.iter().all(|&b| b == bits[0]) {
            let k = uopkit_interp::scalar::literal::format(v.dtype, bits[0]);
            let konst = NodeJson {
                id: 0,
                op: Op::CONST,
                dtype: v.dtype,
                src: vec![],
                arg: k,
            };
            if v.shape.is_empty() {
                out.push(replace(cur, id, vec![konst], None));
            } else {
                let expand = NodeJson {
                    id: 0,
                    op: Op::EXPAND,
                    dtype: v.dtype,
                    src: vec![u64::MAX],
                    arg: json!(v.shape),
                };
                out.push(replace(cur, id, vec![expand, konst], None));
            }
        }
        let Some(device) = info.device.as_ref().filter(|d| !d.is_multi()) else {
            continue;
        };
        let Ok(Json::Array(lits)) = value_json(v) else {
            continue;
        };
        let buffer = |i| NodeJson {
            id: i,
            op: Op::BUFFER,
            dtype: v.dtype,
            src: vec![],
            arg: json!({"slot": slot, "size": bits.len(), "device": device}),
        };
        if v.shape == [bits.len()] {
            out.push(replace(
                cur,
                id,
                vec![buffer(0)],
                Some((0, Init::Data(lits))),
            ));
        } else {
            let reshape = NodeJson {
                id: 0,
                op: Op::RESHAPE,
                dtype: v.dtype,
                src: vec![u64::MAX],
                arg: json!(v.shape),
            };
            out.push(replace(
                cur,
                id,
                vec![reshape, buffer(0)],
                Some((1, Init::Data(lits))),
            ));
        }
    }
    // 5. Simpler buffer contents: 0, 1, 2, … (distinct values, so that reading a wrong
    // element still shows; a constant fill could hide it).
    for (k, init) in &cur.inputs {
        let is_bool = k
            .parse::<u64>()
            .ok()
            .and_then(|id| node(cur, id))
            .is_some_and(|n| n.dtype == DType::Bool);
        if matches!(init, Init::Data(_)) && !is_bool {
            let mut c = cur.clone();
            c.inputs.insert(
                k.clone(),
                Init::Arange {
                    start: json!(0),
                    step: json!(1),
                },
            );
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::export::export;
    use uopkit_interp::ir::Device;
    use uopkit_interp::tensor::{Ctx, Tensor};

    /// A "bug" that only needs a PERMUTE somewhere: the shrinker keeps the permute and drops
    /// everything else.
    #[test]
    fn shrinks_to_the_failing_part() {
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
            .add(1)
            .unwrap()
            .mul(&a)
            .unwrap()
            .permute(&[1, 0])
            .unwrap()
            .sum(&[0])
            .unwrap()
            .cast(DType::Int64)
            .unwrap();
        let other = a.sub(3).unwrap();
        let case = export(
            &ctx.graph(),
            &ctx.inputs(),
            &[("b".into(), b.id()), ("o".into(), other.id())],
            "test",
            &[],
        )
        .unwrap();
        let before = case.graph.len();
        let mut fails = |c: &Case| c.graph.iter().any(|n| n.op == Op::PERMUTE);
        let (small, stats) = shrink_case(&case, ShrinkOpts::default(), &mut fails);
        assert!(fails(&small));
        assert!(run::run_oracle(&small).is_ok());
        assert_eq!(small.outputs.len(), 1);
        assert!(
            small.graph.len() <= 3,
            "{before} → {}: {:#?}",
            small.graph.len(),
            small.graph
        );
        assert_eq!(stats.nodes_before, before);
        assert_eq!(stats.nodes_after, small.graph.len());
        assert!(
            small
                .inputs
                .values()
                .all(|i| matches!(i, Init::Arange { .. })),
            "{:?}",
            small.inputs
        );
    }

    #[test]
    fn gc_renumbers_in_dependency_order() {
        let ctx = Ctx::new();
        let a = Tensor::from_i64s(&ctx, &[3], DType::Int32, Device::CPU, &[1, 2, 3]).unwrap();
        let b = a.add(2).unwrap();
        let mut case = export(
            &ctx.graph(),
            &ctx.inputs(),
            &[("b".into(), b.id())],
            "test",
            &[],
        )
        .unwrap();
        // Shuffle ids: reverse them.
        let n = case.graph.len() as u64;
        for node in case.graph.iter_mut() {
            node.id = n - 1 - node.id;
            node.src = node.src.iter().map(|s| n - 1 - s).collect();
        }
        case.inputs = case
            .inputs
            .iter()
            .map(|(k, v)| ((n - 1 - k.parse::<u64>().unwrap()).to_string(), v.clone()))
            .collect();
        case.outputs[0].node = n - 1 - case.outputs[0].node;
        let g = gc(&case);
        assert!(g
            .graph
            .iter()
            .enumerate()
            .all(|(i, node)| node.id == i as u64 && node.src.iter().all(|&s| s < node.id)));
        assert!(run::run_oracle(&g).is_ok());
    }
}
