//! Ordering planned steps: a step runs after the step that made each version it reads
//! (read-after-write), and a step that overwrites a version runs after every reader of that
//! version (write-after-read). Ties keep planning order, so the result is deterministic.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use uopkit_interp::ir::NodeId;

use super::realize::{PlannedStep, Tag};
use super::{BufId, ScheduleError};

/// A permutation of `steps` (indices in run order).
pub fn order(steps: &[PlannedStep]) -> Result<Vec<usize>, ScheduleError> {
    let mut producer: BTreeMap<(BufId, Tag), usize> = BTreeMap::new();
    let mut overwriter: BTreeMap<(BufId, Tag), usize> = BTreeMap::new();
    for (i, s) in steps.iter().enumerate() {
        let (b, prev, new) = s.write;
        producer.insert((b, new), i);
        if let Some(other) = overwriter.insert((b, prev), i) {
            return Err(ScheduleError {
                node: store_node(new).unwrap_or(NodeId(0)),
                reason: format!("steps {other} and {i} both overwrite the same contents of {b}"),
            });
        }
    }
    let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (i, s) in steps.iter().enumerate() {
        for r in &s.reads {
            if let Some(&p) = producer.get(r) {
                edges.insert((p, i));
            }
            if let Some(&w) = overwriter.get(r) {
                if w != i {
                    edges.insert((i, w));
                }
            }
        }
        let (b, prev, _) = s.write;
        if let Some(&p) = producer.get(&(b, prev)) {
            edges.insert((p, i));
        }
    }
    let mut indegree = vec![0usize; steps.len()];
    let mut succ: Vec<Vec<usize>> = vec![vec![]; steps.len()];
    for &(a, b) in &edges {
        if a != b {
            indegree[b] += 1;
            succ[a].push(b);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..steps.len())
        .filter(|&i| indegree[i] == 0)
        .map(Reverse)
        .collect();
    let mut out = Vec::with_capacity(steps.len());
    while let Some(Reverse(i)) = ready.pop() {
        out.push(i);
        for &j in &succ[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    if out.len() != steps.len() {
        let stuck = (0..steps.len()).find(|i| !out.contains(i)).unwrap_or(0);
        return Err(ScheduleError {
            node: store_node(steps[stuck].write.2).unwrap_or(NodeId(0)),
            reason: "cycle detected in the assign graph: a value is read after the buffer holding it is overwritten".into(),
        });
    }
    Ok(out)
}

fn store_node(t: Tag) -> Option<NodeId> {
    match t {
        Tag::Store(n) => Some(n),
        _ => None,
    }
}

/// The version of each buffer after all steps: follow the writes from the initial contents.
pub fn final_tags(steps: &[PlannedStep]) -> BTreeMap<BufId, Tag> {
    let mut next: BTreeMap<(BufId, Tag), Tag> = BTreeMap::new();
    let mut bufs = BTreeSet::new();
    for s in steps {
        let (b, prev, new) = s.write;
        next.insert((b, prev), new);
        bufs.insert(b);
    }
    bufs.into_iter()
        .map(|b| {
            let mut t = Tag::Initial;
            while let Some(&n) = next.get(&(b, t)) {
                t = n;
            }
            (b, t)
        })
        .collect()
}
