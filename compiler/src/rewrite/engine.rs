//! The rewrite engine: apply a [`RuleSet`] to a graph until nothing changes (a bounded
//! fixpoint, reported with an explicit [`StopReason`], as egg's `Runner` does).
//!
//! The graph is hash-consed and a node never changes, so rewriting builds new nodes: one
//! *pass* walks the nodes reachable from the roots, rebuilds each node whose sources changed
//! (memoized old → new within the pass) and tries the rules on it. At each node the rules
//! are tried in priority order (their order in the set); the first whose rewrite function
//! returns `Some` wins, and at most one rule fires per node per pass: whatever the
//! replacement needs is done by the next pass. Passes repeat until one fires no rule
//! (`FixedPoint`), or a limit is hit.
//!
//! * [`Order::BottomUp`]: sources first (their rewritten versions), then the node.
//! * [`Order::TopDown`]: the node first (as it was), then the sources of whatever it became.
//!
//! [`rewrite_traced`] also records each rule application in a caller's
//! [`RewriteTrace`](super::trace::RewriteTrace) (none is kept by [`rewrite`]).
//!
//! Everything is deterministic: ids are visited in a fixed order, rules in priority order,
//! matches in the pattern's fixed order, and hit counts live in a `BTreeMap`.
//!
//! Limits default to [`DEFAULT_MAX_ITERATIONS`] / [`DEFAULT_MAX_NODES`]; the env vars
//! `UOPKIT_REWRITE_MAX_ITERS` and `UOPKIT_REWRITE_MAX_NODES` (read once per process) change
//! the defaults, so CI can tighten budgets. A value set explicitly in [`RewriteOpts`] wins.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use uopkit_interp::ir::{Graph, Node, NodeId, Op};

use super::pattern::{Captures, Pat};
use super::trace::RewriteTrace;

/// A rule's right-hand side: given the captures and the matched node, build the replacement
/// (which must have the matched node's dtype), or decline with `None`.
pub type RewriteFn = fn(&mut Graph, &Captures, NodeId) -> Option<NodeId>;

/// A named rewrite rule. Its priority is its position in the [`RuleSet`].
#[derive(Clone, Debug)]
pub struct Rule {
    pub name: &'static str,
    pub pattern: Pat,
    pub rewrite: RewriteFn,
}

impl Rule {
    pub fn new(name: &'static str, pattern: Pat, rewrite: RewriteFn) -> Rule {
        Rule {
            name,
            pattern,
            rewrite,
        }
    }
}

/// An ordered list of rules with unique names, indexed by the op of each pattern's root.
#[derive(Clone, Debug)]
pub struct RuleSet {
    pub name: &'static str,
    rules: Vec<Rule>,
    /// For each op (by `op as usize`): indices of the rules whose root can match it, ascending.
    by_op: Vec<Vec<usize>>,
}

impl RuleSet {
    /// Panics (a programming error in a rule table) when two rules share a name.
    pub fn new(name: &'static str, rules: Vec<Rule>) -> RuleSet {
        let mut seen = HashSet::new();
        for r in &rules {
            assert!(
                seen.insert(r.name),
                "rule set '{name}': duplicate rule name '{}'",
                r.name
            );
        }
        let mut by_op = vec![Vec::new(); Op::ALL.len()];
        for (i, r) in rules.iter().enumerate() {
            match r.pattern.root_ops() {
                None => by_op.iter_mut().for_each(|v| v.push(i)),
                Some(ops) => {
                    for &op in ops {
                        let v = &mut by_op[op as usize];
                        if v.last() != Some(&i) {
                            v.push(i);
                        }
                    }
                }
            }
        }
        RuleSet { name, rules, by_op }
    }

    /// Several sets as one, in order (the first set's rules have the highest priority).
    pub fn concat(name: &'static str, sets: &[&RuleSet]) -> RuleSet {
        RuleSet::new(
            name,
            sets.iter().flat_map(|s| s.rules.iter().cloned()).collect(),
        )
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.rules.iter().map(|r| r.name).collect()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Tries the rules on node `id`, in priority order, and returns the first rewrite made
    /// (the rule's name and the replacement), or `None`. A rewrite to the node itself does
    /// not count. Panics when a rule changes the dtype (a bug in the rule).
    pub fn apply_once(&self, g: &mut Graph, id: NodeId) -> Option<(&'static str, NodeId)> {
        let op = g.node(id).op;
        for &ri in &self.by_op[op as usize] {
            let rule = &self.rules[ri];
            for caps in rule.pattern.matches(g, id) {
                if let Some(new) = (rule.rewrite)(g, &caps, id) {
                    if new == id {
                        continue;
                    }
                    let (was, now) = (g.node(id).dtype, g.node(new).dtype);
                    assert_eq!(
                        was, now,
                        "rule '{}' rewrote {id} ({was}) to {new} ({now})",
                        rule.name
                    );
                    return Some((rule.name, new));
                }
            }
        }
        None
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    BottomUp,
    TopDown,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A pass fired no rule: the result is a fixed point of the rule set.
    FixedPoint,
    /// `max_iterations` passes ran and the last one still fired a rule.
    IterationLimit,
    /// The passes added more than `max_nodes` nodes to the graph.
    NodeLimit,
}

pub const DEFAULT_MAX_ITERATIONS: usize = 256;
pub const DEFAULT_MAX_NODES: usize = 1 << 20;

/// Options of [`rewrite`]. `Default` is bottom-up with the (env-overridable) default limits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RewriteOpts {
    pub order: Order,
    /// The most passes to run.
    pub max_iterations: usize,
    /// The most nodes the rewrite may add to the graph (checked after each pass).
    pub max_nodes: usize,
}

impl Default for RewriteOpts {
    fn default() -> Self {
        let (max_iterations, max_nodes) = default_limits();
        RewriteOpts {
            order: Order::BottomUp,
            max_iterations,
            max_nodes,
        }
    }
}

impl RewriteOpts {
    pub fn bottom_up() -> Self {
        RewriteOpts {
            order: Order::BottomUp,
            ..Self::default()
        }
    }

    pub fn top_down() -> Self {
        RewriteOpts {
            order: Order::TopDown,
            ..Self::default()
        }
    }

    pub fn max_iterations(mut self, n: usize) -> Self {
        self.max_iterations = n;
        self
    }

    pub fn max_nodes(mut self, n: usize) -> Self {
        self.max_nodes = n;
        self
    }
}

/// The default limits, from `UOPKIT_REWRITE_MAX_ITERS` / `UOPKIT_REWRITE_MAX_NODES` when set
/// (read once). An unparsable value is reported on stderr once and ignored.
pub fn default_limits() -> (usize, usize) {
    static LIMITS: OnceLock<(usize, usize)> = OnceLock::new();
    *LIMITS.get_or_init(|| {
        let read = |var: &str, default: usize| match std::env::var(var) {
            Ok(s) => s.trim().parse().unwrap_or_else(|_| {
                eprintln!(
                    "uopkit: ignoring {var}={s:?} (not a non-negative integer); using {default}"
                );
                default
            }),
            Err(_) => default,
        };
        (
            read("UOPKIT_REWRITE_MAX_ITERS", DEFAULT_MAX_ITERATIONS),
            read("UOPKIT_REWRITE_MAX_NODES", DEFAULT_MAX_NODES),
        )
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewriteResult {
    /// The rewritten roots, one for each input root, in order.
    pub roots: Vec<NodeId>,
    pub stop: StopReason,
    /// Passes run (the last, rule-free pass of a fixed point included).
    pub iterations: usize,
    /// How many times each rule fired (rules that never fired are absent).
    pub hits: BTreeMap<&'static str, usize>,
    /// Nodes added to the graph by this call.
    pub nodes_added: usize,
}

impl RewriteResult {
    /// How many times `rule` fired.
    pub fn hit(&self, rule: &str) -> usize {
        self.hits.get(rule).copied().unwrap_or(0)
    }

    pub fn total_hits(&self) -> usize {
        self.hits.values().sum()
    }
}

/// Rewrites the graphs under `roots` with `rules` until a fixed point or a limit.
pub fn rewrite(
    graph: &mut Graph,
    roots: &[NodeId],
    rules: &RuleSet,
    opts: RewriteOpts,
) -> RewriteResult {
    rewrite_traced(graph, roots, rules, opts, None)
}

/// [`rewrite`], recording every rule application (and the call's roots) in `trace` when it
/// is `Some`. The steps are recorded in the order the rules fire; with `None` nothing is
/// recorded and nothing is rendered.
pub fn rewrite_traced(
    graph: &mut Graph,
    roots: &[NodeId],
    rules: &RuleSet,
    opts: RewriteOpts,
    mut trace: Option<&mut RewriteTrace>,
) -> RewriteResult {
    let start_len = graph.len();
    let mut cur = roots.to_vec();
    let mut hits = BTreeMap::new();
    let mut iterations = 0;
    let stop = loop {
        if iterations >= opts.max_iterations {
            break StopReason::IterationLimit;
        }
        iterations += 1;
        let (next, fired) = match opts.order {
            Order::BottomUp => pass_bottom_up(graph, &cur, rules, &mut hits, &mut trace),
            Order::TopDown => pass_top_down(graph, &cur, rules, &mut hits, &mut trace),
        };
        cur = next;
        if fired == 0 {
            break StopReason::FixedPoint;
        }
        if graph.len() - start_len > opts.max_nodes {
            break StopReason::NodeLimit;
        }
    };
    if let Some(t) = trace {
        t.record_call(rules.name, roots, &cur);
    }
    RewriteResult {
        roots: cur,
        stop,
        iterations,
        hits,
        nodes_added: graph.len() - start_len,
    }
}

/// `node` with its sources replaced through `memo` (the node itself when none changed).
fn rebuild(g: &mut Graph, id: NodeId, memo: &HashMap<NodeId, NodeId>) -> NodeId {
    let n = g.node(id);
    let src: Vec<NodeId> = n
        .src
        .iter()
        .map(|s| memo.get(s).copied().unwrap_or(*s))
        .collect();
    if src == n.src {
        return id;
    }
    let node = Node {
        op: n.op,
        dtype: n.dtype,
        src,
        arg: n.arg.clone(),
    };
    g.add(node)
}

fn pass_bottom_up(
    g: &mut Graph,
    roots: &[NodeId],
    rules: &RuleSet,
    hits: &mut BTreeMap<&'static str, usize>,
    trace: &mut Option<&mut RewriteTrace>,
) -> (Vec<NodeId>, usize) {
    let mut memo: HashMap<NodeId, NodeId> = HashMap::new();
    let mut fired = 0;
    // Ids ascend in topological order, so every source is done before its users.
    for id in g.reachable(roots) {
        let cur = rebuild(g, id, &memo);
        let new = match rules.apply_once(g, cur) {
            Some((name, new)) => {
                *hits.entry(name).or_insert(0) += 1;
                fired += 1;
                if let Some(t) = trace {
                    t.record(g, rules.name, name, cur, new);
                }
                new
            }
            None => cur,
        };
        if new != id {
            memo.insert(id, new);
        }
    }
    (
        roots
            .iter()
            .map(|r| memo.get(r).copied().unwrap_or(*r))
            .collect(),
        fired,
    )
}

fn pass_top_down(
    g: &mut Graph,
    roots: &[NodeId],
    rules: &RuleSet,
    hits: &mut BTreeMap<&'static str, usize>,
    trace: &mut Option<&mut RewriteTrace>,
) -> (Vec<NodeId>, usize) {
    enum Task {
        Enter(NodeId),
        /// All sources of `base` are done: `orig` becomes `base` rebuilt.
        Build {
            orig: NodeId,
            base: NodeId,
        },
    }
    let mut memo: HashMap<NodeId, NodeId> = HashMap::new();
    let mut active: HashSet<NodeId> = HashSet::new();
    let mut fired = 0;
    let mut stack: Vec<Task> = roots.iter().rev().map(|&r| Task::Enter(r)).collect();
    while let Some(task) = stack.pop() {
        match task {
            Task::Enter(id) => {
                // `active`: entered but not built. Only a replacement that contains its own
                // ancestor could reach one again; it is left as it is.
                if memo.contains_key(&id) || active.contains(&id) {
                    continue;
                }
                active.insert(id);
                let base = match rules.apply_once(g, id) {
                    Some((name, new)) => {
                        *hits.entry(name).or_insert(0) += 1;
                        fired += 1;
                        if let Some(t) = trace {
                            t.record(g, rules.name, name, id, new);
                        }
                        new
                    }
                    None => id,
                };
                stack.push(Task::Build { orig: id, base });
                for &s in g.node(base).src.iter().rev() {
                    stack.push(Task::Enter(s));
                }
            }
            Task::Build { orig, base } => {
                let new = rebuild(g, base, &memo);
                memo.insert(orig, new);
                active.remove(&orig);
            }
        }
    }
    (
        roots
            .iter()
            .map(|r| memo.get(r).copied().unwrap_or(*r))
            .collect(),
        fired,
    )
}
