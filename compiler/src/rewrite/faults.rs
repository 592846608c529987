//! Deliberately wrong rules, to prove that the kit finds bugs: a test switches one on for
//! its own thread and checks that the property tests, the differential fuzzer and
//! `uopkit diff` all catch it. Only builds with the `fault-injection` feature (which the
//! workspace's tests enable and normal builds do not), so users are never offered them.

use super::engine::Rule;

/// The names of the faults that exist: rules injected into a pass ([`active_rules_for`]):
/// `fault_mod_drop` into `symbolic`, `fault_lanes_order_drop` into the CPU kernel pass
/// `cpu_split_lanes`; and `fault_gpu_barrier_drop`, which makes the GPU local reduction
/// (`optimize::gpu`) leave out the barrier after the partial sums, and
/// `fault_local_misindex`, which makes a level of its tree (s > 1) read the local buffer at
/// `l + s − 1` instead of `l + s` ([`is_active`]).
pub const FAULTS: &[&str] = &[
    "fault_mod_drop",
    "fault_lanes_order_drop",
    "fault_gpu_barrier_drop",
    "fault_local_misindex",
];

/// Whether the named fault is on for this thread.
pub fn is_active(name: &str) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        active::ACTIVE.with(|a| a.borrow().contains(&name))
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = name;
        false
    }
}

#[cfg(feature = "fault-injection")]
mod active {
    use std::cell::RefCell;

    thread_local! {
        pub static ACTIVE: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
    }
}

/// Turns the named faults on for the current thread (an empty list turns them off).
/// Unknown names are ignored.
#[cfg(feature = "fault-injection")]
pub fn set_active(names: &[&'static str]) {
    active::ACTIVE.with(|a| {
        *a.borrow_mut() = names
            .iter()
            .copied()
            .filter(|n| FAULTS.contains(n))
            .collect()
    });
}

/// The environment variable a test build of `uopkit` reads to switch faults on for its main
/// thread (comma-separated names, [`activate_from_env`]). Builds without `fault-injection`
/// (every normal build) ignore it, so users are never offered the faults.
pub const FAULTS_ENV: &str = "UOPKIT_TEST_FAULTS";

/// Switches on, for this thread, the known faults that [`FAULTS_ENV`] names, and returns
/// them. Without the `fault-injection` feature: nothing, and an empty list.
pub fn activate_from_env() -> Vec<&'static str> {
    #[cfg(feature = "fault-injection")]
    {
        let wanted = std::env::var(FAULTS_ENV).unwrap_or_default();
        let names: Vec<&'static str> = FAULTS
            .iter()
            .copied()
            .filter(|f| wanted.split(',').any(|w| w.trim() == *f))
            .collect();
        set_active(&names);
        names
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        vec![]
    }
}

/// Whether any fault is on for this thread.
pub fn any_active() -> bool {
    #[cfg(feature = "fault-injection")]
    {
        active::ACTIVE.with(|a| !a.borrow().is_empty())
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        false
    }
}

/// The rules of the faults that are on for this thread and join the pass named `pass`
/// (highest priority first: the pass puts them before its own rules).
pub fn active_rules_for(pass: &str) -> Vec<Rule> {
    #[cfg(feature = "fault-injection")]
    {
        let names: Vec<&'static str> = active::ACTIVE.with(|a| a.borrow().clone());
        wrong::all()
            .into_iter()
            .filter(|(p, r)| *p == pass && names.contains(&r.name))
            .map(|(_, r)| r)
            .collect()
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = pass;
        vec![]
    }
}

#[cfg(feature = "fault-injection")]
mod wrong {
    use uopkit_interp::ir::{Arg, Graph, NodeId, Op, ReduceOrder};

    use crate::rewrite::engine::Rule;
    use crate::rewrite::pattern::{Captures, Pat};
    use crate::rewrite::range::Ranges;

    /// Each wrong rule with the pass it joins.
    pub fn all() -> Vec<(&'static str, Rule)> {
        vec![
            (
                "symbolic",
                Rule::new(
                    "fault_mod_drop",
                    Pat::ops(&[Op::CMOD, Op::FLOORMOD], [Pat::var("x"), Pat::cvar("c")]),
                    mod_drop,
                ),
            ),
            (
                "cpu_split_lanes",
                Rule::new("fault_lanes_order_drop", Pat::node(Op::REDUCE), order_drop),
            ),
        ]
    }

    /// WRONG on purpose: `x % c → x` whenever 0 ≤ x < 2c (right only below c).
    fn mod_drop(g: &mut Graph, c: &Captures, _: NodeId) -> Option<NodeId> {
        let d = c.const_bits(g, "c")? as i64 as i128;
        let x = Ranges::new(g).get(c["x"])?;
        (d > 1 && x.min >= 0 && x.max < 2 * d).then(|| c["x"])
    }

    /// WRONG on purpose: a REDUCE declaring `split(k)` folded sequentially instead (an
    /// undeclared reassociation: other bits for floats whose sums round).
    fn order_drop(g: &mut Graph, _: &Captures, id: NodeId) -> Option<NodeId> {
        let mut n = g.node(id).clone();
        let Arg::Reduce { ref mut order, .. } = n.arg else {
            return None;
        };
        if !matches!(*order, ReduceOrder::Split(k) if k > 1) {
            return None;
        }
        *order = ReduceOrder::Sequential;
        Some(g.add(n))
    }
}
