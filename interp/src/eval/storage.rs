//! Storage as versions. A BUFFER node reads the buffer's initial contents; every STORE makes
//! a new version of its buffer from the version its target names; `AFTER(view, deps…)` reads
//! the newest version among the stores in `deps`. Because versions are values, a reader
//! ordered before an assign sees the old contents by construction (write-after-read).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::value::Elem;
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Op};

/// One version of a buffer: the elements of each device component (`C`: how the evaluator
/// holds them; the default is the public element lists).
#[derive(Debug)]
pub struct Version<C = Vec<Vec<Elem>>> {
    /// The BUFFER/PARAM node whose storage this is.
    pub buffer: NodeId,
    /// The STORE that made this version; None for the initial contents.
    pub made_by: Option<NodeId>,
    pub comps: Rc<C>,
}

impl<C> Clone for Version<C> {
    fn clone(&self) -> Self {
        Version {
            buffer: self.buffer,
            made_by: self.made_by,
            comps: self.comps.clone(),
        }
    }
}

pub struct Versions<C = Vec<Vec<Elem>>> {
    /// The version each STORE produced and where it sits in its buffer's tree of versions.
    after_store: HashMap<NodeId, Recorded<C>>,
}

/// A recorded version. The versions of a buffer form a tree rooted at its initial contents
/// (`None`); each knows its parent, its depth (the number of stores between it and the
/// initial contents, itself included) and a jump pointer to an ancestor (Myers' skew-binary
/// scheme), so that "is this version older" takes O(log depth) steps however long the
/// chain of assigns between them is.
struct Recorded<C> {
    version: Version<C>,
    base: Option<NodeId>,
    depth: usize,
    jump: Option<NodeId>,
}

/// What the stores a node stands for (see [`stores_in`]) leave, per buffer: the newest of
/// them, or two that are not ordered.
pub type Summary = BTreeMap<NodeId, Newest>;

/// The newest store to one buffer among a set, or a pair of stores in it that are not ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Newest {
    Store(NodeId),
    Unordered(NodeId, NodeId),
}

impl<C> Default for Versions<C> {
    fn default() -> Self {
        Versions {
            after_store: HashMap::new(),
        }
    }
}

impl<C> Versions<C> {
    pub fn record_store(&mut self, store: NodeId, base: &Version<C>, comps: C) -> Version<C> {
        let v = Version {
            buffer: base.buffer,
            made_by: Some(store),
            comps: Rc::new(comps),
        };
        let parent = base.made_by;
        let depth = self.depth(parent) + 1;
        // Jump to the parent's jump's jump when the two jumps below the parent are equally
        // long (they then merge into one twice as long), else to the parent.
        let j = self.jump(parent);
        let jj = self.jump(j);
        let jump = if self.depth(parent) - self.depth(j) == self.depth(j) - self.depth(jj) {
            jj
        } else {
            parent
        };
        self.after_store.insert(
            store,
            Recorded {
                version: v.clone(),
                base: parent,
                depth,
                jump,
            },
        );
        v
    }

    fn depth(&self, v: Option<NodeId>) -> usize {
        v.and_then(|s| self.after_store.get(&s))
            .map_or(0, |e| e.depth)
    }

    /// The jump pointer of `v` (the initial contents jump to themselves).
    fn jump(&self, v: Option<NodeId>) -> Option<NodeId> {
        v.and_then(|s| self.after_store.get(&s))
            .and_then(|e| e.jump)
    }

    fn version(&self, s: NodeId) -> Option<&Version<C>> {
        self.after_store.get(&s).map(|e| &e.version)
    }

    /// The summary of one STORE (after it was recorded).
    pub fn store_summary(&self, store: NodeId) -> Summary {
        match self.after_store.get(&store) {
            Some(e) => BTreeMap::from([(e.version.buffer, Newest::Store(store))]),
            None => BTreeMap::new(),
        }
    }

    /// Adds the summary `other` into `into` (the union of the two sets of stores).
    pub fn merge(&self, into: &mut Summary, other: &Summary) {
        for (&buf, &b) in other {
            let merged = match (into.get(&buf), b) {
                (None, b) => b,
                (Some(&Newest::Unordered(x, y)), _) => Newest::Unordered(x, y),
                (Some(_), Newest::Unordered(x, y)) => Newest::Unordered(x, y),
                (Some(&Newest::Store(a)), Newest::Store(b)) => {
                    if self.is_ancestor(Some(a), Some(b)) {
                        Newest::Store(b)
                    } else if self.is_ancestor(Some(b), Some(a)) {
                        Newest::Store(a)
                    } else {
                        Newest::Unordered(a.min(b), a.max(b))
                    }
                }
            };
            into.insert(buf, merged);
        }
    }

    /// [`Versions::after`] from the summary of `deps`: the newest version of `base.buffer`.
    /// The result is the same (the set of stores with the base must be a chain, and its
    /// newest element is the answer); the work is proportional to the number of buffers, not
    /// to the number of stores the dependencies stand for.
    pub fn after_summary(
        &self,
        g: &Graph,
        at: NodeId,
        base: Version<C>,
        deps: &Summary,
    ) -> Result<Version<C>> {
        let unordered = |a: NodeId, other: Option<NodeId>| Error::Unordered {
            node: at,
            op: g.node(at).op,
            store: a,
            other,
            buffer: base.buffer,
        };
        match deps.get(&base.buffer) {
            None => Ok(base),
            Some(&Newest::Unordered(a, b)) => Err(unordered(a, Some(b))),
            Some(&Newest::Store(s)) => {
                let Some(v) = self.version(s) else {
                    return Ok(base);
                };
                if self.is_ancestor(base.made_by, Some(s)) {
                    Ok(v.clone())
                } else if self.is_ancestor(Some(s), base.made_by) {
                    Ok(base)
                } else {
                    Err(unordered(s, base.made_by))
                }
            }
        }
    }

    /// The newest version of `base.buffer` once the stores in `deps` have run.
    pub fn after(
        &self,
        g: &Graph,
        at: NodeId,
        base: Version<C>,
        deps: &[NodeId],
    ) -> Result<Version<C>> {
        let stores = stores_in(g, deps);
        let mut newest = base;
        for s in stores {
            let Some(v) = self.version(s) else {
                continue;
            };
            if v.buffer != newest.buffer {
                continue;
            }
            if self.is_ancestor(newest.made_by, Some(s)) {
                newest = v.clone();
            } else if !self.is_ancestor(Some(s), newest.made_by) {
                return Err(Error::Unordered {
                    node: at,
                    op: g.node(at).op,
                    store: s,
                    other: newest.made_by,
                    buffer: newest.buffer,
                });
            }
        }
        Ok(newest)
    }

    /// Whether version `old` is `new` or one of the versions `new` was built from: whether
    /// `new`'s ancestor at `old`'s depth is `old`, found along the jump pointers in
    /// O(log depth) steps.
    fn is_ancestor(&self, old: Option<NodeId>, new: Option<NodeId>) -> bool {
        if old == new {
            return true;
        }
        let recorded = |v: Option<NodeId>| v.is_none_or(|s| self.after_store.contains_key(&s));
        if !recorded(old) || !recorded(new) {
            return false;
        }
        let target = self.depth(old);
        let mut cur = new;
        while let Some(e) = cur.and_then(|c| self.after_store.get(&c)) {
            if e.depth <= target {
                break;
            }
            cur = if self.depth(e.jump) >= target {
                e.jump
            } else {
                e.base
            };
        }
        cur == old
    }
}

/// The STOREs that `deps` stand for, by id: STOREs themselves, and those inside GROUP/SINK
/// and the dependencies of AFTERs. (The compiler's scheduler uses the same rule.)
pub fn stores_in(g: &Graph, deps: &[NodeId]) -> Vec<NodeId> {
    let mut out = vec![];
    let mut stack: Vec<NodeId> = deps.to_vec();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        let n = g.node(d);
        match n.op {
            Op::STORE => out.push(d),
            Op::GROUP | Op::SINK => stack.extend(n.src.iter().copied()),
            Op::AFTER => stack.extend(n.src[1..].iter().copied()),
            _ => {}
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The jump-pointer walk answers exactly what the walk along parents answers, on a tree
    /// of versions with long chains and branches.
    #[test]
    fn is_ancestor_agrees_with_the_parent_walk() {
        let mut vs: Versions<()> = Versions::default();
        let init = Version {
            buffer: NodeId(0),
            made_by: None,
            comps: Rc::new(()),
        };
        let mut made: Vec<Version<()>> = vec![init];
        let mut parent_of: Vec<Option<usize>> = vec![None];
        let mut seed = 0x1234_5678_u64;
        for i in 1..3000u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Mostly extend the newest version (long chains), sometimes branch off an old one.
            let p = if seed >> 60 == 0 {
                (seed >> 20) as usize % made.len()
            } else {
                made.len() - 1
            };
            let v = vs.record_store(NodeId(i), &made[p].clone(), ());
            made.push(v);
            parent_of.push(Some(p));
        }
        let naive = |a: usize, b: usize| {
            let mut cur = Some(b);
            while let Some(c) = cur {
                if c == a {
                    return true;
                }
                cur = parent_of[c];
            }
            false
        };
        for _ in 0..20000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = (seed >> 33) as usize % made.len();
            let b = (seed >> 13) as usize % made.len();
            assert_eq!(
                vs.is_ancestor(made[a].made_by, made[b].made_by),
                naive(a, b),
                "versions {a} and {b}"
            );
        }
        // Unrecorded stores are ancestors of nothing but themselves.
        assert!(!vs.is_ancestor(Some(NodeId(99999)), made[5].made_by));
        assert!(!vs.is_ancestor(None, Some(NodeId(99999))));
        assert!(vs.is_ancestor(Some(NodeId(99999)), Some(NodeId(99999))));
    }
}
