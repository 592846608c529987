//! The kernel interpreter: executes a [`Program`] exactly, on buffers of [`Elem`]s.
//!
//! * Every instruction does what the table in [`super`] says; ALU ops, CAST and BITCAST are
//!   [`crate::scalar`]'s, one element at a time.
//! * Poison: an element nothing wrote is [`Elem::Uninit`]. Loading it is not an error; it
//!   flows through ALU ops like in the tensor oracle (WHERE with a defined condition picks
//!   a branch, anything else with a poisoned operand is poison) and may be stored (the
//!   caller reports it if it reaches an output). Poison used as an address (INDEX's index,
//!   when a LOAD or STORE dereferences it), as a LOAD/STORE gate or as a loop bound is
//!   [`Ub::UninitializedRead`]. Register and local buffers start as poison whose `buffer`
//!   is the BUFFER instruction's id (`NodeId(inst)`), `index` the element.
//! * Memory errors are found where memory is touched: an INDEX is only an address, so an
//!   out-of-bounds (or poisoned) INDEX that no LOAD or STORE dereferences, or only under a
//!   false gate, is fine.
//! * Undefined behaviour stops the run with [`KernelError::Ub`] naming the instruction
//!   (and the work item, memory and element where relevant). For ALU ops and CAST,
//!   [`UbMode`] says when: at once (the default, the table's literal semantics), or only
//!   when the undefined result is used (stored, dereferenced, a gate or a loop bound), so
//!   that a lane the program computes and then discards with a WHERE is fine.
//! * A step budget (instruction executions, all work items together; default
//!   [`DEFAULT_STEP_BUDGET`] or `UOPKIT_KERNEL_STEP_BUDGET`) bounds every run: the
//!   interpreter never hangs.
//! * Launches: the SPECIALs' extents define the work items (their cross product) and the
//!   workgroups (`gidxN`/`idxN` coordinates; `lidxN` are the items inside a workgroup).
//!   Workgroups run one after another, in an order shuffled by the seed. Inside a
//!   workgroup, every work item is a resumable execution (program counter, values, loop
//!   counters, register buffers); the items run one at a time, each until it reaches a
//!   BARRIER or the end, in an order shuffled by the seed, and a BARRIER releases them when
//!   all have reached it (the same BARRIER in the same loop iteration: anything else is
//!   barrier divergence, an error). Local buffers (`BUFFER` with [`KArg::Local`]) are
//!   shared by the items of a workgroup and fresh for every workgroup; register buffers are
//!   private to an item and fresh every time their BUFFER instruction executes. A kernel
//!   that lacks a barrier reads what the shuffled order happened to write, so it gives
//!   different results for different seeds.

use std::fmt;

use super::check::{analyze, Analysis, DimKind};
use super::{InstId, KArg, Program};
use crate::eval::Elem;
use crate::ir::{DType, NodeId, Op};
use crate::scalar::cast::{to_i128, wrap_i128};
use crate::scalar::{self, Ub};

/// The default step budget when `UOPKIT_KERNEL_STEP_BUDGET` is not set.
pub const DEFAULT_STEP_BUDGET: u64 = 1_000_000_000;

/// The most work items one workgroup may have (they are all live at once).
pub const MAX_WORKGROUP_ITEMS: u64 = 1 << 16;

/// A memory a kernel reads or writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mem {
    /// The buffer passed in a param slot.
    Param(u32),
    /// A register buffer (the BUFFER instruction that makes it).
    Reg(InstId),
    /// A local (workgroup-shared) buffer (the BUFFER instruction that makes it).
    Local(InstId),
}

impl fmt::Display for Mem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mem::Param(s) => write!(f, "param slot {s}"),
            Mem::Reg(i) => write!(f, "register buffer {i}"),
            Mem::Local(i) => write!(f, "local buffer {i}"),
        }
    }
}

/// Where poison was used in a way that is undefined.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PoisonUse {
    /// As the index of an address a LOAD or STORE dereferences.
    Index,
    /// As a LOAD's or STORE's gate.
    Gate,
    /// As a RANGE's bound.
    LoopBound,
}

impl fmt::Display for PoisonUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoisonUse::Index => "the index",
            PoisonUse::Gate => "the gate",
            PoisonUse::LoopBound => "the loop bound",
        })
    }
}

/// A work item: its launch coordinates by name (empty for a program without SPECIALs).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct WorkItem(pub Vec<(String, u64)>);

impl fmt::Display for WorkItem {
    /// " in work item gidx0=1 lidx0=3", or nothing for a program without SPECIALs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        f.write_str(" in work item")?;
        for (name, v) in &self.0 {
            write!(f, " {name}={v}")?;
        }
        Ok(())
    }
}

/// Why a kernel run failed. Every variant about an instruction names it (and its op).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The program breaks the rules of [`super::check`] (or, at run time, a loop bound is
    /// negative).
    #[error("{} ({op}): malformed program: {reason}", inst)]
    Malformed {
        inst: InstId,
        op: Op,
        reason: String,
    },
    /// The buffers passed do not match the program's params.
    #[error("kernel arguments: {0}")]
    Args(String),
    /// Undefined behaviour at one instruction of one work item. `mem`/`index`: the access
    /// (for memory errors); `poison`: how poison was used and which element it came from;
    /// `observed`: under [`UbMode::Deferred`], the instruction that used the result of the
    /// undefined operation `inst`.
    #[error(
        "{inst} ({op}){item}: undefined behaviour: {kind}{}",
        ub_detail(mem, index, poison, observed)
    )]
    Ub {
        inst: InstId,
        op: Op,
        kind: Ub,
        mem: Option<Mem>,
        index: Option<i128>,
        poison: Option<(PoisonUse, Elem)>,
        observed: Option<(InstId, Op)>,
        item: WorkItem,
    },
    /// The run executed `steps` instructions (all work items together) without finishing;
    /// `inst` is the next instruction it would have executed.
    #[error("{inst} ({op}): step budget exhausted after {steps} instruction executions")]
    StepBudget { inst: InstId, op: Op, steps: u64 },
    /// The work items of a workgroup did not all reach the same barrier.
    #[error("{inst} ({op}){item}: barrier divergence: {reason}")]
    Barrier {
        inst: InstId,
        op: Op,
        item: WorkItem,
        reason: String,
    },
}

impl KernelError {
    /// The instruction the error is about (None for argument errors).
    pub fn inst(&self) -> Option<InstId> {
        match self {
            KernelError::Malformed { inst, .. }
            | KernelError::Ub { inst, .. }
            | KernelError::StepBudget { inst, .. }
            | KernelError::Barrier { inst, .. } => Some(*inst),
            KernelError::Args(_) => None,
        }
    }
}

fn ub_detail(
    mem: &Option<Mem>,
    index: &Option<i128>,
    poison: &Option<(PoisonUse, Elem)>,
    observed: &Option<(InstId, Op)>,
) -> String {
    let mut parts = vec![];
    if let Some((i, op)) = observed {
        parts.push(format!("its result is used by {i} ({op})"));
    }
    match (mem, index) {
        (Some(m), Some(i)) => parts.push(format!("element {i} of {m}")),
        (Some(m), None) => parts.push(format!("{m}")),
        _ => {}
    }
    if let Some((u, e)) = poison {
        parts.push(match e {
            Elem::Uninit { buffer, index } => {
                format!("{u} is poison: element {index} of buffer {buffer} was never written")
            }
            Elem::Bits(_) => format!("{u} is poison"),
        });
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// How to run a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOpts {
    /// The most instruction executions (all work items together) before the run stops with
    /// [`KernelError::StepBudget`].
    pub step_budget: u64,
    /// Seeds the order in which workgroups, and work items between barriers, run.
    pub seed: u64,
    /// When undefined behaviour of an ALU op or CAST is reported.
    pub ub: UbMode,
}

/// When an ALU op or CAST whose result is undefined (integer division by zero, a shift out
/// of range, a float→int cast out of range, …) stops the run.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum UbMode {
    /// At once: the op itself is undefined behaviour (a stricter reading, for tests).
    Immediate,
    /// When its result is used: the op yields poison that names it, and the run stops (with
    /// the op's error) only when that poison is stored, dereferenced as an index, used as a
    /// gate or a loop bound. A WHERE whose defined condition picks the other operand, or a
    /// gated-off LOAD's alternative that is never used, discards it. This is what a renderer
    /// that makes division, modulo and shifts total computes (the C renderer does, for the
    /// padded lanes the lowering computes and then discards). The kernel IR's definition.
    #[default]
    Deferred,
}

impl RunOpts {
    /// The environment variable that sets the step budget (a non-negative integer; `_`
    /// separators and surrounding blanks allowed).
    pub const STEP_BUDGET_ENV: &'static str = "UOPKIT_KERNEL_STEP_BUDGET";

    /// Parses a value of [`RunOpts::STEP_BUDGET_ENV`]; the error names the variable.
    pub fn parse_step_budget(value: &str) -> Result<u64, String> {
        let digits = value.trim().replace('_', "");
        digits.parse().map_err(|e| {
            format!(
                "{}={value:?} is not a step budget (a non-negative integer below 2^64): {e}",
                Self::STEP_BUDGET_ENV
            )
        })
    }

    /// The step budget the environment asks for: [`RunOpts::STEP_BUDGET_ENV`] if set, else
    /// [`DEFAULT_STEP_BUDGET`]. A value that does not parse (or is not Unicode) is an error
    /// naming the variable.
    pub fn step_budget_from_env() -> Result<u64, String> {
        match std::env::var(Self::STEP_BUDGET_ENV) {
            Ok(s) => Self::parse_step_budget(&s),
            Err(std::env::VarError::NotPresent) => Ok(DEFAULT_STEP_BUDGET),
            Err(e) => Err(format!("{}: {e}", Self::STEP_BUDGET_ENV)),
        }
    }

    /// The default options with the environment's step budget (see
    /// [`RunOpts::step_budget_from_env`]); a bad value is an error.
    pub fn from_env() -> Result<RunOpts, String> {
        Ok(RunOpts {
            step_budget: Self::step_budget_from_env()?,
            ..RunOpts::fixed_default()
        })
    }

    /// [`RunOpts::step_budget_from_env`] for callers that cannot fail ([`Default`]): a bad
    /// value is reported on stderr once (like `UOPKIT_REWRITE_MAX_ITERS`) and the default
    /// budget is used. Callers that can return an error should use [`RunOpts::from_env`].
    pub fn default_step_budget() -> u64 {
        static BUDGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *BUDGET.get_or_init(|| {
            Self::step_budget_from_env().unwrap_or_else(|e| {
                eprintln!("uopkit: ignoring {e}; using {DEFAULT_STEP_BUDGET}");
                DEFAULT_STEP_BUDGET
            })
        })
    }

    fn fixed_default() -> RunOpts {
        RunOpts {
            step_budget: DEFAULT_STEP_BUDGET,
            seed: 0,
            ub: UbMode::Deferred,
        }
    }
}

impl Default for RunOpts {
    fn default() -> Self {
        RunOpts {
            step_budget: Self::default_step_budget(),
            ..RunOpts::fixed_default()
        }
    }
}

/// What a successful run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Instruction executions, all work items together.
    pub steps: u64,
    pub work_items: u64,
    pub workgroups: u64,
    /// Barrier releases (each counts once per workgroup).
    pub barriers: u64,
}

/// Fresh buffers for `prog`'s params, every element poison from (`NodeId(slot)`, element).
pub fn uninit_buffers(prog: &Program) -> Vec<Vec<Elem>> {
    prog.params
        .iter()
        .enumerate()
        .map(|(s, p)| poison(NodeId(s as u32), p.size))
        .collect()
}

fn poison(buffer: NodeId, size: usize) -> Vec<Elem> {
    (0..size)
        .map(|index| Elem::Uninit { buffer, index })
        .collect()
}

/// Runs `prog` on `bufs` (one per param slot, each of the slot's declared size, elements of
/// its dtype as raw bits): checks the program ([`super::check::check`]), then executes it,
/// writing the param buffers in place. On an error the buffers hold what was written
/// before it.
pub fn run(
    prog: &Program,
    bufs: &mut [Vec<Elem>],
    opts: &RunOpts,
) -> Result<RunStats, KernelError> {
    let an = analyze(prog)?;
    if bufs.len() != prog.params.len() {
        return Err(KernelError::Args(format!(
            "the program takes {} buffer(s), got {}",
            prog.params.len(),
            bufs.len()
        )));
    }
    for (s, (b, p)) in bufs.iter().zip(&prog.params).enumerate() {
        if b.len() != p.size {
            return Err(KernelError::Args(format!(
                "param slot {s} holds {} elements, got a buffer of {}",
                p.size,
                b.len()
            )));
        }
    }
    let mut ex = Exec {
        prog,
        an: &an,
        bufs,
        steps: 0,
        budget: opts.step_budget,
        ub: opts.ub,
        stats: RunStats::default(),
    };
    ex.launch(opts.seed)?;
    ex.stats.steps = ex.steps;
    Ok(ex.stats)
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The result of an undefined ALU op or CAST under [`UbMode::Deferred`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Trap {
    inst: InstId,
    op: Op,
    kind: Ub,
}

/// A scalar: an element (bits or poison), or the result of undefined behaviour.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum X {
    E(Elem),
    Trap(Trap),
}

/// A value of one instruction in one work item.
#[derive(Clone, Debug)]
enum Val {
    /// Not computed yet (or an effect).
    None,
    X(X),
    Mem(Mem),
    /// An address: a memory and an element index (or the poison the index was).
    Ptr {
        mem: Mem,
        index: Result<i128, X>,
    },
}

#[derive(Clone, Debug)]
struct Loop {
    range: usize,
    end: i128,
    i: i128,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Stop {
    Barrier,
    Done,
}

/// One work item's resumable state.
struct Item {
    pc: usize,
    vals: Vec<Val>,
    loops: Vec<Loop>,
    regs: Vec<Vec<Elem>>,
    /// Its coordinate in every launch dimension (indexed like `Analysis::dims`).
    coords: Vec<u64>,
    stop: Option<Stop>,
}

struct Exec<'a> {
    prog: &'a Program,
    an: &'a Analysis,
    bufs: &'a mut [Vec<Elem>],
    steps: u64,
    budget: u64,
    ub: UbMode,
    stats: RunStats,
}

fn work_item(an: &Analysis, item: &Item) -> WorkItem {
    WorkItem(
        an.dims
            .iter()
            .zip(&item.coords)
            .map(|(d, &c)| (d.name.clone(), c))
            .collect(),
    )
}

impl Exec<'_> {
    fn work_item(&self, item: &Item) -> WorkItem {
        work_item(self.an, item)
    }

    fn launch(&mut self, seed: u64) -> Result<(), KernelError> {
        let mut rng = Rng(seed);
        let dims = &self.an.dims;
        let group_dims: Vec<usize> = (0..dims.len())
            .filter(|&d| dims[d].kind == DimKind::Group)
            .collect();
        let local_dims: Vec<usize> = (0..dims.len())
            .filter(|&d| dims[d].kind == DimKind::Local)
            .collect();
        let count = |ds: &[usize]| -> Option<u64> {
            ds.iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(dims[d].extent))
        };
        let first_special = || {
            let i = self
                .prog
                .insts
                .iter()
                .position(|i| i.op == Op::SPECIAL)
                .unwrap_or(0);
            InstId(i as u32)
        };
        let too_many = |what: &str| KernelError::Malformed {
            inst: first_special(),
            op: Op::SPECIAL,
            reason: format!("too many {what} for the interpreter"),
        };
        let n_groups = count(&group_dims).ok_or_else(|| too_many("workgroups"))?;
        let n_local = count(&local_dims).ok_or_else(|| too_many("work items per workgroup"))?;
        if n_local > MAX_WORKGROUP_ITEMS {
            return Err(too_many(&format!(
                "work items per workgroup ({n_local} > {MAX_WORKGROUP_ITEMS})"
            )));
        }
        if n_groups == 0 || n_local == 0 {
            return Ok(());
        }
        // The workgroups in the order i ↦ (a·i + b) mod n, a coprime to n: a permutation that
        // needs no memory however many workgroups there are.
        let mut a = 1 + rng.below(n_groups);
        for _ in 0..64 {
            if gcd(a, n_groups) == 1 {
                break;
            }
            a = 1 + rng.below(n_groups);
        }
        if gcd(a, n_groups) != 1 {
            a = 1;
        }
        let b = rng.below(n_groups);
        for k in 0..n_groups {
            let g = ((a as u128 * k as u128 + b as u128) % n_groups as u128) as u64;
            let mut coords = vec![0u64; dims.len()];
            unravel(g, &group_dims, dims, &mut coords);
            self.run_group(coords, &local_dims, n_local, &mut rng)?;
        }
        Ok(())
    }

    fn run_group(
        &mut self,
        coords: Vec<u64>,
        local_dims: &[usize],
        n_local: u64,
        rng: &mut Rng,
    ) -> Result<(), KernelError> {
        let an = self.an;
        self.stats.workgroups += 1;
        self.stats.work_items += n_local;
        let mut locals: Vec<Vec<Elem>> = an
            .locals
            .iter()
            .map(|&(id, size)| poison(NodeId(id.0), size))
            .collect();
        let mut items: Vec<Item> = (0..n_local)
            .map(|l| {
                let mut c = coords.clone();
                unravel(l, local_dims, &an.dims, &mut c);
                Item {
                    pc: 0,
                    vals: vec![Val::None; self.prog.insts.len()],
                    loops: vec![],
                    regs: vec![vec![]; an.regs.len()],
                    coords: c,
                    stop: None,
                }
            })
            .collect();
        let mut order: Vec<usize> = (0..items.len()).collect();
        loop {
            rng.shuffle(&mut order);
            for &i in &order {
                let stop = self.exec(&mut items[i], &mut locals)?;
                items[i].stop = Some(stop);
            }
            order.retain(|&i| items[i].stop == Some(Stop::Barrier));
            let Some(&first) = order.first() else {
                return Ok(());
            };
            let at = items[first].pc;
            let barrier_err = |item: &Item, reason: String| KernelError::Barrier {
                inst: InstId(at as u32),
                op: Op::BARRIER,
                item: self.work_item(item),
                reason,
            };
            if order.len() != items.len() {
                let done = items
                    .iter()
                    .find(|it| it.stop == Some(Stop::Done))
                    .map(|it| self.work_item(it))
                    .unwrap_or_default();
                return Err(barrier_err(
                    &items[first],
                    format!("this work item waits here, but work item{done} finished without reaching the barrier"),
                ));
            }
            let iters = |it: &Item| it.loops.iter().map(|l| l.i).collect::<Vec<_>>();
            for &i in &order[1..] {
                if items[i].pc != at {
                    return Err(barrier_err(
                        &items[first],
                        format!(
                            "this work item waits here, but work item{} waits at v{}",
                            self.work_item(&items[i]),
                            items[i].pc
                        ),
                    ));
                }
                if iters(&items[i]) != iters(&items[first]) {
                    return Err(barrier_err(
                        &items[first],
                        format!(
                            "this work item waits here in loop iteration {:?}, but work item{} in iteration {:?}",
                            iters(&items[first]),
                            self.work_item(&items[i]),
                            iters(&items[i])
                        ),
                    ));
                }
            }
            self.stats.barriers += 1;
            for it in &mut items {
                it.pc += 1;
                it.stop = None;
            }
        }
    }

    /// Runs `item` until it reaches a BARRIER (its pc stays there) or the end.
    fn exec(&mut self, item: &mut Item, locals: &mut [Vec<Elem>]) -> Result<Stop, KernelError> {
        let prog = self.prog;
        let an = self.an;
        let mode = self.ub;
        let n = prog.insts.len();
        while item.pc < n {
            let pc = item.pc;
            let inst = &prog.insts[pc];
            let id = InstId(pc as u32);
            if self.steps >= self.budget {
                return Err(KernelError::StepBudget {
                    inst: id,
                    op: inst.op,
                    steps: self.steps,
                });
            }
            self.steps += 1;
            let ub = |item: &Item,
                      kind: Ub,
                      mem: Option<Mem>,
                      index: Option<i128>,
                      poison: Option<(PoisonUse, Elem)>| KernelError::Ub {
                inst: id,
                op: inst.op,
                kind,
                mem,
                index,
                poison,
                observed: None,
                item: work_item(an, item),
            };
            // A trap that this instruction uses: the undefined op's error.
            let observe = |item: &Item, x: X| -> Result<Elem, KernelError> {
                match x {
                    X::E(e) => Ok(e),
                    X::Trap(t) => Err(KernelError::Ub {
                        inst: t.inst,
                        op: t.op,
                        kind: t.kind,
                        mem: None,
                        index: None,
                        poison: None,
                        observed: Some((id, inst.op)),
                        item: work_item(an, item),
                    }),
                }
            };
            // An undefined op: an error now, or a trap for later.
            let undefined = |item: &Item, kind: Ub| -> Result<Val, KernelError> {
                match mode {
                    UbMode::Immediate => Err(ub(item, kind, None, None, None)),
                    UbMode::Deferred => Ok(Val::X(X::Trap(Trap {
                        inst: id,
                        op: inst.op,
                        kind,
                    }))),
                }
            };
            let elem = |item: &Item, k: usize| -> Result<X, KernelError> {
                match &item.vals[inst.src[k].index()] {
                    Val::X(x) => Ok(*x),
                    _ => Err(KernelError::Malformed {
                        inst: id,
                        op: inst.op,
                        reason: format!("source {k} ({}) has no value here", inst.src[k]),
                    }),
                }
            };
            let mut next = pc + 1;
            let val = match inst.op {
                Op::PARAM => Val::Mem(Mem::Param(param_slot(&inst.arg))),
                Op::BUFFER => {
                    if let KArg::Reg(size) = inst.arg {
                        let r = &mut item.regs[an.slot[pc]];
                        r.clear();
                        r.extend((0..size).map(|index| Elem::Uninit {
                            buffer: NodeId(id.0),
                            index,
                        }));
                        Val::Mem(Mem::Reg(id))
                    } else {
                        Val::Mem(Mem::Local(id))
                    }
                }
                Op::CONST => Val::X(X::E(Elem::Bits(if let KArg::Const(b) = inst.arg {
                    b
                } else {
                    0
                }))),
                Op::SPECIAL => Val::X(X::E(Elem::Bits(wrap_i128(
                    inst.dtype,
                    item.coords[an.slot[pc]] as i128,
                )))),
                Op::RANGE => {
                    let end = match observe(item, elem(item, 0)?)? {
                        Elem::Bits(b) => to_i128(prog.insts[inst.src[0].index()].dtype, b),
                        p => {
                            return Err(ub(
                                item,
                                Ub::UninitializedRead,
                                None,
                                None,
                                Some((PoisonUse::LoopBound, p)),
                            ))
                        }
                    };
                    if end < 0 {
                        return Err(KernelError::Malformed {
                            inst: id,
                            op: inst.op,
                            reason: format!("negative loop bound {end}"),
                        });
                    }
                    if end == 0 {
                        next = an.partner[pc] + 1;
                        Val::None
                    } else {
                        item.loops.push(Loop {
                            range: pc,
                            end,
                            i: 0,
                        });
                        Val::X(X::E(Elem::Bits(0)))
                    }
                }
                Op::END => {
                    let Some(l) = item.loops.last_mut() else {
                        return Err(KernelError::Malformed {
                            inst: id,
                            op: inst.op,
                            reason: "no loop is running".into(),
                        });
                    };
                    l.i += 1;
                    if l.i < l.end {
                        let (range, i) = (l.range, l.i);
                        item.vals[range] =
                            Val::X(X::E(Elem::Bits(wrap_i128(prog.insts[range].dtype, i))));
                        next = range + 1;
                    } else {
                        item.loops.pop();
                    }
                    Val::None
                }
                Op::INDEX => {
                    let Val::Mem(mem) = item.vals[inst.src[0].index()] else {
                        return Err(KernelError::Malformed {
                            inst: id,
                            op: inst.op,
                            reason: "source 0 is not a buffer".into(),
                        });
                    };
                    let index = match elem(item, 1)? {
                        X::E(Elem::Bits(b)) => {
                            Ok(to_i128(prog.insts[inst.src[1].index()].dtype, b))
                        }
                        other => Err(other),
                    };
                    Val::Ptr { mem, index }
                }
                Op::LOAD | Op::STORE => {
                    let load = inst.op == Op::LOAD;
                    let gated = inst.src.len() == 3;
                    let open = if gated {
                        match observe(item, elem(item, 2)?)? {
                            Elem::Bits(b) => b & 1 != 0,
                            p => {
                                return Err(ub(
                                    item,
                                    Ub::UninitializedRead,
                                    None,
                                    None,
                                    Some((PoisonUse::Gate, p)),
                                ))
                            }
                        }
                    } else {
                        true
                    };
                    if !open {
                        if load {
                            Val::X(elem(item, 1)?)
                        } else {
                            Val::None
                        }
                    } else {
                        let Val::Ptr { mem, index } = item.vals[inst.src[0].index()] else {
                            return Err(KernelError::Malformed {
                                inst: id,
                                op: inst.op,
                                reason: "source 0 is not an address".into(),
                            });
                        };
                        let index = match index {
                            Ok(i) => i,
                            Err(x) => {
                                let p = observe(item, x)?;
                                return Err(ub(
                                    item,
                                    Ub::UninitializedRead,
                                    Some(mem),
                                    None,
                                    Some((PoisonUse::Index, p)),
                                ));
                            }
                        };
                        let value = if load {
                            None
                        } else {
                            Some(observe(item, elem(item, 1)?)?)
                        };
                        let size = match mem {
                            Mem::Param(s) => self.bufs[s as usize].len(),
                            Mem::Reg(b) => item.regs[an.slot[b.index()]].len(),
                            Mem::Local(b) => locals[an.slot[b.index()]].len(),
                        };
                        if index < 0 || index >= size as i128 {
                            return Err(ub(item, Ub::OutOfBounds, Some(mem), Some(index), None));
                        }
                        let store: &mut Vec<Elem> = match mem {
                            Mem::Param(s) => &mut self.bufs[s as usize],
                            Mem::Reg(b) => &mut item.regs[an.slot[b.index()]],
                            Mem::Local(b) => &mut locals[an.slot[b.index()]],
                        };
                        let slot = &mut store[index as usize];
                        match value {
                            None => Val::X(X::E(*slot)),
                            Some(v) => {
                                *slot = v;
                                Val::None
                            }
                        }
                    }
                }
                Op::CAST | Op::BITCAST => {
                    let from = prog.insts[inst.src[0].index()].dtype;
                    match elem(item, 0)? {
                        X::E(Elem::Bits(b)) => {
                            if inst.op == Op::CAST {
                                match scalar::cast(from, inst.dtype, b) {
                                    Ok(r) => Val::X(X::E(Elem::Bits(r))),
                                    Err(kind) => undefined(item, kind)?,
                                }
                            } else {
                                let r = scalar::bitcast(from, inst.dtype, b).ok_or_else(|| {
                                    KernelError::Malformed {
                                        inst: id,
                                        op: inst.op,
                                        reason: format!("BITCAST from {from} to {}", inst.dtype),
                                    }
                                })?;
                                Val::X(X::E(Elem::Bits(r)))
                            }
                        }
                        other => Val::X(other),
                    }
                }
                Op::BARRIER => {
                    return Ok(Stop::Barrier);
                }
                op if op.is_alu() => {
                    let mut operands = [X::E(Elem::Bits(0)); 3];
                    for (k, o) in operands.iter_mut().enumerate().take(inst.src.len()) {
                        *o = elem(item, k)?;
                    }
                    let operands = &operands[..inst.src.len()];
                    let operand_dt =
                        prog.insts[inst.src[if op == Op::WHERE { 1 } else { 0 }].index()].dtype;
                    match alu_x(op, operand_dt, operands) {
                        Ok(x) => Val::X(x),
                        Err(kind) => undefined(item, kind)?,
                    }
                }
                op => {
                    return Err(KernelError::Malformed {
                        inst: id,
                        op,
                        reason: format!("{op} is not a kernel-level instruction"),
                    });
                }
            };
            if !matches!(val, Val::None) {
                item.vals[pc] = val;
            }
            item.pc = next;
        }
        Ok(Stop::Done)
    }
}

fn param_slot(arg: &KArg) -> u32 {
    if let KArg::Param(s) = arg {
        *s
    } else {
        0
    }
}

/// Sets `coords[d]` for the dims `ds` from the row-major flat index `flat`.
fn unravel(mut flat: u64, ds: &[usize], dims: &[super::check::Dim], coords: &mut [u64]) {
    for &d in ds.iter().rev() {
        let e = dims[d].extent;
        coords[d] = flat % e;
        flat /= e;
    }
}

/// One ALU op on scalars: poison (or a trap) in, poison out, as the tensor oracle does:
/// WHERE with a defined condition only looks at the chosen branch; otherwise the first
/// operand that is not bits is the result.
fn alu_x(op: Op, dt: DType, operands: &[X]) -> Result<X, Ub> {
    if op == Op::WHERE {
        if let X::E(Elem::Bits(c)) = operands[0] {
            return Ok(if c & 1 != 0 { operands[1] } else { operands[2] });
        }
    }
    let mut bits = [0u64; 3];
    for (k, x) in operands.iter().enumerate() {
        match *x {
            X::E(Elem::Bits(b)) => bits[k] = b,
            other => return Ok(other),
        }
    }
    scalar::alu(op, dt, &bits[..operands.len()]).map(|b| X::E(Elem::Bits(b)))
}

#[cfg(test)]
mod env_tests {
    use super::RunOpts;

    #[test]
    fn step_budget_values_parse_or_name_the_variable() {
        assert_eq!(RunOpts::parse_step_budget(" 1_000 "), Ok(1000));
        assert_eq!(RunOpts::parse_step_budget("0"), Ok(0));
        for bad in ["abc", "", "-1", "1.5", "18446744073709551616"] {
            let e = RunOpts::parse_step_budget(bad).expect_err(bad);
            assert!(e.contains("UOPKIT_KERNEL_STEP_BUDGET"), "{e}");
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
