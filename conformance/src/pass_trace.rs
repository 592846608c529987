//! The rewrite trace `uopkit diff` shows for the pass that differs (a light form of
//! tinygrad's `VIZ=1`): the steps of that pass in that kernel, in the order the rules fired,
//! with the steps that built the diverging node marked `>>`.
//!
//! The diverging node: in the index arithmetic of a lowering pass, the first expression of
//! the kernel whose values (over every assignment of its loop variables, by the oracle)
//! the pass changed, taken after the pass; in a kernel pass, the kernel's sink after the pass
//! (the whole kernel: its values are not compared node by node). A step *touches* it when
//! its matched node or its replacement is the diverging node or one of its sources,
//! transitively.

use std::collections::BTreeSet;

use uopkit_compiler::rewrite::trace::{RewriteTrace, TraceGraph, TraceStep, TracedNode};
use uopkit_interp::ir::{Graph, NodeId};

use crate::gen::expr::{evaluate, loop_vars};

/// Which steps `uopkit diff --trace` prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum TraceMode {
    /// Only the steps that touch the diverging node (with a count of the others).
    #[default]
    Touching,
    /// Every step of the pass in the kernel.
    All,
    /// No trace section.
    None,
}

impl std::str::FromStr for TraceMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "touching" => Ok(TraceMode::Touching),
            "all" => Ok(TraceMode::All),
            "none" => Ok(TraceMode::None),
            _ => Err(format!(
                "--trace {s}: expected touching (the default), all or none"
            )),
        }
    }
}

/// What `uopkit diff` can say about rewrite steps for its first difference.
#[derive(Clone, Debug)]
pub enum TraceSection {
    /// The first difference is at a stage no rewrite pass made (lowering, rendering).
    NotARewritePass { stage: String },
    /// The traces of the differing pass, one per kernel shown.
    Pass(Vec<PassTrace>),
}

/// One step of a [`PassTrace`], numbered within it (from 1).
#[derive(Clone, Debug)]
pub struct ShownStep {
    pub number: usize,
    pub step: TraceStep,
    /// Its matched node or replacement is in the diverging node's ancestry.
    pub touches: bool,
}

/// The steps of one pass in one kernel.
#[derive(Clone, Debug)]
pub struct PassTrace {
    pub pass: String,
    pub kernel: String,
    pub graph: TraceGraph,
    /// The diverging node (None when it could not be pinned: then every step touches).
    pub diverging: Option<TracedNode>,
    /// How the diverging node was chosen.
    pub why: String,
    pub steps: Vec<ShownStep>,
    /// Rule applications of the whole compile that the trace's cap left out (they may
    /// include steps of this pass).
    pub not_recorded: usize,
}

impl PassTrace {
    /// Picks out `pass`'s steps in `kernel`'s `graph` from `trace` and marks them.
    pub fn from_trace(trace: &RewriteTrace, pass: &str, kernel: &str, graph: TraceGraph) -> Self {
        let g = trace.graph(kernel, graph);
        let calls: Vec<_> = trace
            .calls()
            .iter()
            .filter(|c| c.kernel == kernel && c.graph == graph && c.pass == pass)
            .collect();
        let pinned = g.and_then(|g| match graph {
            TraceGraph::Index => calls.iter().find_map(|c| {
                let (&before, &after) = (c.before.first()?, c.after.first()?);
                (before != after && changes_values(g, before, after)).then(|| {
                    (
                        after,
                        "the first index expression of the kernel whose values the pass changed, after the pass"
                            .to_string(),
                    )
                })
            }),
            TraceGraph::Kernel => calls
                .last()
                .and_then(|c| c.after.first().copied())
                .map(|sink| {
                    (
                        sink,
                        "the kernel's sink after the pass (a kernel pass is not pinned to a node)"
                            .to_string(),
                    )
                }),
        });
        let (ancestry, diverging, why) = match (g, pinned) {
            (Some(g), Some((node, why))) => (
                Some(g.reachable(&[node]).into_iter().collect::<BTreeSet<NodeId>>()),
                Some(TracedNode::of(g, node)),
                why,
            ),
            _ => (
                None,
                None,
                "not pinned to a node (no expression's values changed under the oracle): every step is shown as touching"
                    .to_string(),
            ),
        };
        let steps = trace
            .steps()
            .iter()
            .filter(|s| s.kernel == kernel && s.graph == graph && s.pass == pass)
            .enumerate()
            .map(|(i, s)| ShownStep {
                number: i + 1,
                touches: ancestry
                    .as_ref()
                    .is_none_or(|a| a.contains(&s.matched.id) || a.contains(&s.replacement.id)),
                step: s.clone(),
            })
            .collect();
        PassTrace {
            pass: pass.to_string(),
            kernel: kernel.to_string(),
            graph,
            diverging,
            why,
            steps,
            not_recorded: trace.more(),
        }
    }

    /// The steps that touch the diverging node.
    pub fn touching(&self) -> impl Iterator<Item = &ShownStep> {
        self.steps.iter().filter(|s| s.touches)
    }

    /// The section as `uopkit diff` prints it (empty for [`TraceMode::None`]).
    pub fn render(&self, mode: TraceMode) -> String {
        if mode == TraceMode::None {
            return String::new();
        }
        let touching = self.touching().count();
        let mut out = format!(
            "rewrite trace of pass '{}' in kernel {} ({}): {} step(s), {touching} touching the diverging node\n",
            self.pass,
            self.kernel,
            self.graph,
            self.steps.len()
        );
        match &self.diverging {
            Some(d) => out += &format!("diverging node: {d}\n  ({})\n", self.why),
            None => out += &format!("diverging node: {}\n", self.why),
        }
        let mut hidden = 0;
        for s in &self.steps {
            if mode == TraceMode::Touching && !s.touches {
                hidden += 1;
                continue;
            }
            out += &format!(
                "{} #{} {}: {}\n       -> {}\n",
                if s.touches { ">>" } else { "  " },
                s.number,
                s.step.rule,
                s.step.matched,
                s.step.replacement
            );
        }
        if hidden > 0 {
            out += &format!(
                "({hidden} other step(s) of the pass in this kernel do not touch it: `--trace all` shows them)\n"
            );
        }
        if self.not_recorded > 0 {
            out += &format!(
                "… {} more step(s) not recorded (the trace keeps the first {})\n",
                self.not_recorded,
                uopkit_compiler::rewrite::trace::DEFAULT_MAX_STEPS
            );
        }
        out
    }
}

impl TraceSection {
    /// The section as `uopkit diff` prints it after its report (empty for
    /// [`TraceMode::None`]).
    pub fn render(&self, mode: TraceMode) -> String {
        if mode == TraceMode::None {
            return String::new();
        }
        match self {
            TraceSection::NotARewritePass { stage } => format!(
                "no rewrite trace: the first difference, at stage '{stage}', is not made by a rewrite pass\n"
            ),
            TraceSection::Pass(traces) if traces.is_empty() => {
                "no rewrite trace: no kernel ran the pass\n".to_string()
            }
            TraceSection::Pass(traces) => traces
                .iter()
                .map(|t| t.render(mode))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Whether `before` and `after` (integer/bool expressions over loop variables) differ for
/// some assignment of the variables, by the oracle. False when they cannot be evaluated.
fn changes_values(g: &Graph, before: NodeId, after: NodeId) -> bool {
    let Ok(vars) = loop_vars(g, &[before, after]) else {
        return false;
    };
    match (evaluate(g, before, &vars), evaluate(g, after, &vars)) {
        (Ok(a), Ok(b)) => a != b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uopkit_interp::ir::{Arg, DType, Node, Op};

    fn add(g: &mut Graph, op: Op, dtype: DType, src: Vec<NodeId>, arg: Arg) -> NodeId {
        g.add(Node {
            op,
            dtype,
            src,
            arg,
        })
    }

    fn int(g: &mut Graph, v: i64) -> NodeId {
        add(g, Op::CONST, DType::Int64, vec![], Arg::Const(v as u64))
    }

    /// Two index expressions of one kernel: `r0 < 7` → `true` (right, its values are kept)
    /// and `(r0 % 3) * 2` → `r0 * 2` (wrong). Only the wrong one's step touches the diverging
    /// node, the default view hides the other, and `all` shows it unmarked.
    #[test]
    fn only_the_steps_that_built_the_diverging_node_are_marked() {
        let mut g = Graph::new();
        let end = int(&mut g, 6);
        let r = add(&mut g, Op::RANGE, DType::Int64, vec![end], Arg::Index(0));
        let seven = int(&mut g, 7);
        let lt = add(&mut g, Op::CMPLT, DType::Bool, vec![r, seven], Arg::None);
        let yes = add(&mut g, Op::CONST, DType::Bool, vec![], Arg::Const(1));
        let three = int(&mut g, 3);
        let two = int(&mut g, 2);
        let m = add(&mut g, Op::CMOD, DType::Int64, vec![r, three], Arg::None);
        let before = add(&mut g, Op::MUL, DType::Int64, vec![m, two], Arg::None);
        let after = add(&mut g, Op::MUL, DType::Int64, vec![r, two], Arg::None);

        let mut t = RewriteTrace::new(100);
        t.enter("k0", TraceGraph::Index);
        t.record(&g, "p", "lt_always", lt, yes);
        t.record_call("p", &[lt], &[yes]);
        t.record(&g, "p", "mod_wrong", m, r);
        t.record_call("p", &[before], &[after]);
        // Another pass and another kernel are not part of the trace shown.
        t.record(&g, "q", "other_pass", m, r);
        t.enter("k1", TraceGraph::Index);
        t.record(&g, "p", "other_kernel", m, r);
        t.enter("k0", TraceGraph::Index);
        t.snapshot(&g);

        let p = PassTrace::from_trace(&t, "p", "k0", TraceGraph::Index);
        assert_eq!(p.diverging.as_ref().map(|d| d.id), Some(after));
        let rules: Vec<(&str, bool)> = p.steps.iter().map(|s| (s.step.rule, s.touches)).collect();
        assert_eq!(rules, [("lt_always", false), ("mod_wrong", true)]);

        let shown = p.render(TraceMode::Touching);
        assert!(
            shown.contains(">> #2 mod_wrong: %"),
            "the wrong step is marked:\n{shown}"
        );
        assert!(!shown.contains("lt_always"), "{shown}");
        assert!(
            shown.contains("(1 other step(s) of the pass in this kernel do not touch it"),
            "{shown}"
        );
        let all = p.render(TraceMode::All);
        assert!(all.contains("   #1 lt_always: "), "{all}");
        assert!(all.contains(">> #2 mod_wrong: "), "{all}");
        assert!(!all.contains("other step(s)"), "{all}");
        assert_eq!(p.render(TraceMode::None), "");
    }

    #[test]
    fn a_capped_trace_says_how_many_steps_it_left_out() {
        let mut g = Graph::new();
        let a = int(&mut g, 1);
        let b = int(&mut g, 2);
        let mut t = RewriteTrace::new(1);
        t.enter("k0", TraceGraph::Kernel);
        for _ in 0..4 {
            t.record(&g, "p", "r", a, b);
        }
        t.snapshot(&g);
        let shown = PassTrace::from_trace(&t, "p", "k0", TraceGraph::Kernel).render(TraceMode::All);
        assert!(shown.contains("… 3 more step(s) not recorded"), "{shown}");
    }

    #[test]
    fn a_stage_without_a_pass_has_no_trace() {
        let s = TraceSection::NotARewritePass {
            stage: "rendered: cpu".into(),
        };
        assert_eq!(
            s.render(TraceMode::Touching),
            "no rewrite trace: the first difference, at stage 'rendered: cpu', is not made by a rewrite pass\n"
        );
        assert_eq!(s.render(TraceMode::None), "");
    }
}
