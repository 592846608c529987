//! Kernel-level programs: what the compiler's lowering produces and its renderers turn into
//! C/CUDA/HIP, and what the oracle's kernel interpreter (issue 4) will execute.
//!
//! A program is a linear SSA list, like tinygrad's LINEAR: every instruction names earlier
//! instructions as sources. `RANGE` opens a loop (its body runs for 0..end) that the matching
//! `END` closes; a value defined inside a loop is only used inside it (values that live
//! across iterations go through a register buffer: `BUFFER` with `Reg` storage, `INDEX`,
//! `LOAD`, `STORE`).
//!
//! | op | src | arg | meaning |
//! |---|---|---|---|
//! | PARAM | – | `Param(slot)` | the buffer passed in slot `slot` (dtype = element dtype) |
//! | BUFFER | – | `Reg(size)` | a private array of `size` elements (accumulators) |
//! | BUFFER | – | `Local(size)` | `size` elements shared by the work items of a workgroup (top level only) |
//! | CONST | – | `Const(bits)` | a scalar of the inst's dtype |
//! | RANGE | (end) | `Axis(id)` | loop variable 0..end (int64) |
//! | END | (range) | – | closes the loop |
//! | INDEX | (buf, idx) | – | the address of element idx (idx int64) of a PARAM or BUFFER |
//! | LOAD | (index) or (index, alt, gate) | – | read; when gated and gate is false, `alt` without reading |
//! | STORE | (index, value) or (index, value, gate) | – | write (skipped when the gate is false) |
//! | ALU, CAST, BITCAST | operands | – | as in `crate::scalar` (one element); an undefined result (division by zero, …) is poison |
//! | SPECIAL | (end) | `Special(name)` | launch index 0..end (`gidxN`: workgroup, `lidxN`: item in the workgroup, `idxN`: global, one item per workgroup); end is a CONST, top level only |
//! | BARRIER | (deps…) | – | waits for every work item of the workgroup |
//!
//! Undefined ALU results are **poison**, not immediate errors: lowering computes speculatively
//! on lanes it then discards (padding evaluates the padded expression on gated loads that
//! read 0), so a division by zero there is harmless. Poison becomes an error only when it is
//! stored, used as an index, a gate or a loop bound (`interp::UbMode::Deferred`, the default;
//! `Immediate` is the stricter reading for tests). The C renderer refines this by making those
//! ops total.
//!
//! [`check::check`] enforces these rules; [`interp::run`] executes a program exactly.

pub mod check;
pub mod interp;

use std::fmt;

pub use crate::ir::KArg;
use crate::ir::{DType, Op};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstId(pub u32);

impl InstId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for InstId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inst {
    pub op: Op,
    pub dtype: DType,
    pub src: Vec<InstId>,
    pub arg: KArg,
}

/// A buffer the kernel takes: its element dtype, its size in elements, and whether the
/// kernel writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamDecl {
    pub dtype: DType,
    pub size: usize,
    pub written: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub params: Vec<ParamDecl>,
    pub insts: Vec<Inst>,
}

impl Program {
    pub fn new(name: impl Into<String>, params: Vec<ParamDecl>) -> Self {
        Program {
            name: name.into(),
            params,
            insts: vec![],
        }
    }

    /// Appends an instruction and returns its id. Sources must be earlier instructions.
    pub fn push(&mut self, op: Op, dtype: DType, src: Vec<InstId>, arg: KArg) -> InstId {
        debug_assert!(src.iter().all(|s| s.index() < self.insts.len()));
        self.insts.push(Inst {
            op,
            dtype,
            src,
            arg,
        });
        InstId(self.insts.len() as u32 - 1)
    }

    pub fn inst(&self, id: InstId) -> &Inst {
        &self.insts[id.index()]
    }
}

impl fmt::Display for Program {
    /// A readable listing, one instruction a line, indented by loop depth.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            writeln!(
                f,
                "  p{i}: {}[{}]{}",
                p.dtype,
                p.size,
                if p.written { " (written)" } else { "" }
            )?;
        }
        writeln!(f, ")")?;
        let mut depth = 1;
        for (i, inst) in self.insts.iter().enumerate() {
            if inst.op == Op::END {
                depth -= 1;
            }
            let srcs: Vec<String> = inst.src.iter().map(|s| s.to_string()).collect();
            let arg = match &inst.arg {
                KArg::None => String::new(),
                KArg::Param(s) => format!(" slot={s}"),
                KArg::Reg(n) => format!(" reg[{n}]"),
                KArg::Const(b) => format!(" {}", crate::scalar::literal::display(inst.dtype, *b)),
                KArg::Axis(a) => format!(" axis={a}"),
                KArg::Special(name) => format!(" {name}"),
                KArg::Local(n) => format!(" local[{n}]"),
            };
            writeln!(
                f,
                "{:w$}v{i} = {} {}({}){arg}",
                "",
                inst.op,
                inst.dtype,
                srcs.join(", "),
                w = depth * 2
            )?;
            if inst.op == Op::RANGE {
                depth += 1;
            }
        }
        Ok(())
    }
}
