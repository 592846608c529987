//! Structural checks of kernel programs: everything the interpreter relies on before it
//! executes an instruction. A program that passes [`check`] cannot make the interpreter
//! panic; one that fails it is malformed (a compiler bug), reported as
//! [`KernelError::Malformed`] naming the first offending instruction.
//!
//! The rules (the table in [`super`] is the spec):
//! * every source is an earlier instruction, and a value defined inside a loop is only used
//!   inside that loop (before its END);
//! * RANGE/END nest: an END closes the innermost open RANGE, and no RANGE is left open;
//! * arity, argument kind and dtypes of every op: PARAM matches its [`ParamDecl`] slot,
//!   INDEX has the dtype of its buffer and an integer index, LOAD/STORE go through an
//!   INDEX with a value of its dtype and a bool gate, ALU operands as the tensor verifier
//!   wants them, CAST/BITCAST between value dtypes (BITCAST of equal widths, no bool);
//! * buffers (PARAM, BUFFER) are only used as INDEX's buffer, pointers (INDEX) only as a
//!   LOAD's or STORE's address; effects (STORE, END, BARRIER) are never used as values
//!   (BARRIER may list anything as dependencies);
//! * a STORE into a param needs the param to be declared `written`;
//! * SPECIAL (`gidxN`, `lidxN`, `idxN`) and local BUFFERs only at the top level (outside
//!   every loop), a SPECIAL's extent is a CONST, and two SPECIALs of one name agree on it.
//!
//! [`ParamDecl`]: super::ParamDecl

use std::collections::BTreeMap;

use super::interp::{KernelError, Mem};
use super::{InstId, KArg, Program};
use crate::ir::{DType, Op};
use crate::scalar::cast::{mask, to_i128};

/// The largest register or local buffer the interpreter allocates (elements).
pub const MAX_SCRATCH_ELEMS: usize = 1 << 24;

/// Checks `prog`; Ok means the interpreter can run it (it may still reach undefined
/// behaviour or exhaust its step budget at run time).
pub fn check(prog: &Program) -> Result<(), KernelError> {
    analyze(prog).map(|_| ())
}

/// Which launch coordinate a SPECIAL is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DimKind {
    /// `gidxN` and `idxN`: the workgroup's coordinate.
    Group,
    /// `lidxN`: the work item's coordinate inside its workgroup.
    Local,
}

/// One launch dimension (all SPECIALs of one name).
#[derive(Clone, Debug)]
pub(crate) struct Dim {
    pub name: String,
    pub kind: DimKind,
    pub extent: u64,
}

/// What the checks found out, for the interpreter.
#[derive(Clone, Debug)]
pub(crate) struct Analysis {
    /// For a RANGE: the index of its END; for an END: the index of its RANGE.
    pub partner: Vec<usize>,
    /// For PARAM, BUFFER and INDEX: the memory they name.
    pub mem: Vec<Option<Mem>>,
    /// For a BUFFER: its number among the register (or local) buffers.
    pub slot: Vec<usize>,
    /// Register buffers (BUFFER inst, size), numbered as in `slot`.
    pub regs: Vec<(InstId, usize)>,
    /// Local buffers (BUFFER inst, size), numbered as in `slot`.
    pub locals: Vec<(InstId, usize)>,
    /// Launch dimensions, in name order (groups first); for a SPECIAL, `slot` is its dim.
    pub dims: Vec<Dim>,
}

/// What an instruction produces, for the type checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Value(DType),
    Buffer(DType),
    Pointer(DType),
    Effect,
}

impl Kind {
    fn describe(self) -> String {
        match self {
            Kind::Value(dt) => format!("a {dt} value"),
            Kind::Buffer(dt) => format!("a {dt} buffer"),
            Kind::Pointer(dt) => format!("a {dt} address (INDEX)"),
            Kind::Effect => "an effect".into(),
        }
    }
}

pub(crate) fn analyze(prog: &Program) -> Result<Analysis, KernelError> {
    let n = prog.insts.len();
    if n > u32::MAX as usize {
        return Err(KernelError::Args(format!("{n} instructions: too many")));
    }
    let mut a = Analysis {
        partner: vec![usize::MAX; n],
        mem: vec![None; n],
        slot: vec![usize::MAX; n],
        regs: vec![],
        locals: vec![],
        dims: vec![],
    };
    let mut kinds: Vec<Kind> = Vec::with_capacity(n);
    // Innermost loop open when each instruction was defined (a RANGE is inside itself).
    let mut scope: Vec<Option<usize>> = Vec::with_capacity(n);
    let mut closed = vec![false; n];
    let mut open: Vec<usize> = vec![];
    let mut dims: BTreeMap<(DimKind, String), (u64, Vec<usize>)> = BTreeMap::new();
    for (i, inst) in prog.insts.iter().enumerate() {
        let id = InstId(i as u32);
        let bad = |reason: String| KernelError::Malformed {
            inst: id,
            op: inst.op,
            reason,
        };
        for (k, s) in inst.src.iter().enumerate() {
            if s.index() >= i {
                return Err(bad(format!(
                    "source {k} ({s}) is not an earlier instruction"
                )));
            }
            if let Some(r) = scope[s.index()] {
                if closed[r] {
                    return Err(bad(format!("source {k} ({s}) is defined inside the loop of v{r}, which was closed before this use")));
                }
            }
        }
        let src_kind = |k: usize| kinds[inst.src[k].index()];
        let arity = |ok: &[usize]| -> Result<(), KernelError> {
            if ok.contains(&inst.src.len()) {
                Ok(())
            } else {
                let want: Vec<String> = ok.iter().map(|x| x.to_string()).collect();
                Err(bad(format!(
                    "takes {} source(s), got {}",
                    want.join(" or "),
                    inst.src.len()
                )))
            }
        };
        let no_arg = || -> Result<(), KernelError> {
            if inst.arg == KArg::None {
                Ok(())
            } else {
                Err(bad(format!("takes no argument, got {:?}", inst.arg)))
            }
        };
        let value_dtype = |dt: DType| -> Result<(), KernelError> {
            if dt == DType::Void {
                Err(bad("a value instruction cannot have dtype void".into()))
            } else {
                Ok(())
            }
        };
        // The dtype of value source k, or an error when it is not a value.
        let value_src = |k: usize| -> Result<DType, KernelError> {
            match src_kind(k) {
                Kind::Value(dt) => Ok(dt),
                other => Err(bad(format!(
                    "source {k} ({}) must be a value, got {}",
                    inst.src[k],
                    other.describe()
                ))),
            }
        };
        let int_src = |k: usize, what: &str| -> Result<DType, KernelError> {
            let dt = value_src(k)?;
            if dt.is_int() {
                Ok(dt)
            } else {
                Err(bad(format!(
                    "{what} (source {k}) must be an integer, got {dt}"
                )))
            }
        };
        let kind = match inst.op {
            Op::PARAM => {
                arity(&[0])?;
                let KArg::Param(slot) = inst.arg else {
                    return Err(bad(format!(
                        "needs a Param(slot) argument, got {:?}",
                        inst.arg
                    )));
                };
                let Some(decl) = prog.params.get(slot as usize) else {
                    return Err(bad(format!(
                        "param slot {slot} does not exist (the program has {})",
                        prog.params.len()
                    )));
                };
                if decl.dtype != inst.dtype {
                    return Err(bad(format!(
                        "dtype {} differs from param slot {slot}'s {}",
                        inst.dtype, decl.dtype
                    )));
                }
                value_dtype(inst.dtype)?;
                a.mem[i] = Some(Mem::Param(slot));
                Kind::Buffer(inst.dtype)
            }
            Op::BUFFER => {
                arity(&[0])?;
                value_dtype(inst.dtype)?;
                let (size, local) = match inst.arg {
                    KArg::Reg(size) => (size, false),
                    KArg::Local(size) => (size, true),
                    _ => {
                        return Err(bad(format!(
                            "needs a Reg(size) or Local(size) argument, got {:?}",
                            inst.arg
                        )))
                    }
                };
                if size > MAX_SCRATCH_ELEMS {
                    return Err(bad(format!(
                        "{size} elements: more than the interpreter's limit of {MAX_SCRATCH_ELEMS}"
                    )));
                }
                if local {
                    if let Some(&r) = open.last() {
                        return Err(bad(format!(
                            "a local buffer must be defined outside every loop (it is inside v{r})"
                        )));
                    }
                    a.slot[i] = a.locals.len();
                    a.locals.push((id, size));
                    a.mem[i] = Some(Mem::Local(id));
                } else {
                    a.slot[i] = a.regs.len();
                    a.regs.push((id, size));
                    a.mem[i] = Some(Mem::Reg(id));
                }
                Kind::Buffer(inst.dtype)
            }
            Op::CONST => {
                arity(&[0])?;
                value_dtype(inst.dtype)?;
                let KArg::Const(bits) = inst.arg else {
                    return Err(bad(format!(
                        "needs a Const(bits) argument, got {:?}",
                        inst.arg
                    )));
                };
                if bits & !mask(inst.dtype) != 0 {
                    return Err(bad(format!(
                        "bits {bits:#x} do not fit {} (values are zero-extended)",
                        inst.dtype
                    )));
                }
                Kind::Value(inst.dtype)
            }
            Op::RANGE => {
                arity(&[1])?;
                if !matches!(inst.arg, KArg::Axis(_)) {
                    return Err(bad(format!(
                        "needs an Axis(id) argument, got {:?}",
                        inst.arg
                    )));
                }
                if !inst.dtype.is_int() {
                    return Err(bad(format!(
                        "the loop variable must be an integer, got {}",
                        inst.dtype
                    )));
                }
                let dt = int_src(0, "the loop bound")?;
                if dt != inst.dtype {
                    return Err(bad(format!(
                        "the loop bound is {dt}, the loop variable {}",
                        inst.dtype
                    )));
                }
                Kind::Value(inst.dtype)
            }
            Op::END => {
                arity(&[1])?;
                no_arg()?;
                if inst.dtype != DType::Void {
                    return Err(bad(format!("END has dtype void, got {}", inst.dtype)));
                }
                let r = inst.src[0].index();
                match open.last() {
                    Some(&top) if top == r => {}
                    Some(&top) => {
                        return Err(bad(format!(
                            "closes {} but the innermost open loop is v{top}",
                            inst.src[0]
                        )));
                    }
                    None => return Err(bad(format!("closes {} but no loop is open", inst.src[0]))),
                }
                Kind::Effect
            }
            Op::INDEX => {
                arity(&[2])?;
                no_arg()?;
                let Kind::Buffer(bdt) = src_kind(0) else {
                    return Err(bad(format!(
                        "source 0 must be a PARAM or BUFFER, got {}",
                        src_kind(0).describe()
                    )));
                };
                if bdt != inst.dtype {
                    return Err(bad(format!(
                        "dtype {} differs from its buffer's {bdt}",
                        inst.dtype
                    )));
                }
                int_src(1, "the index")?;
                a.mem[i] = a.mem[inst.src[0].index()];
                Kind::Pointer(inst.dtype)
            }
            Op::LOAD | Op::STORE => {
                let load = inst.op == Op::LOAD;
                arity(if load { &[1, 3] } else { &[2, 3] })?;
                no_arg()?;
                let Kind::Pointer(pdt) = src_kind(0) else {
                    return Err(bad(format!(
                        "source 0 must be an INDEX, got {}",
                        src_kind(0).describe()
                    )));
                };
                if load && inst.dtype != pdt {
                    return Err(bad(format!(
                        "dtype {} differs from its address's {pdt}",
                        inst.dtype
                    )));
                }
                if !load && inst.dtype != DType::Void {
                    return Err(bad(format!("STORE has dtype void, got {}", inst.dtype)));
                }
                if !load || inst.src.len() == 3 {
                    let vdt = value_src(1)?;
                    if vdt != pdt {
                        let what = if load {
                            "the alternative value"
                        } else {
                            "the stored value"
                        };
                        return Err(bad(format!("{what} is {vdt}, the address {pdt}")));
                    }
                }
                if inst.src.len() == 3 {
                    let g = value_src(2)?;
                    if g != DType::Bool {
                        return Err(bad(format!("the gate must be bool, got {g}")));
                    }
                }
                if !load {
                    if let Some(Mem::Param(slot)) = a.mem[inst.src[0].index()] {
                        if !prog.params[slot as usize].written {
                            return Err(bad(format!(
                                "stores into param slot {slot}, which is not declared written"
                            )));
                        }
                    }
                }
                if load {
                    Kind::Value(inst.dtype)
                } else {
                    Kind::Effect
                }
            }
            Op::CAST | Op::BITCAST => {
                arity(&[1])?;
                no_arg()?;
                value_dtype(inst.dtype)?;
                let from = value_src(0)?;
                let to = inst.dtype;
                if inst.op == Op::BITCAST
                    && (from.bits() != to.bits() || from == DType::Bool || to == DType::Bool)
                {
                    return Err(bad(format!("BITCAST from {from} to {to}: widths must match (and bool cannot be bitcast)")));
                }
                Kind::Value(to)
            }
            op if op.is_alu() => {
                no_arg()?;
                check_alu(prog, i, &kinds).map_err(bad)?;
                Kind::Value(inst.dtype)
            }
            Op::SPECIAL => {
                arity(&[1])?;
                let KArg::Special(name) = &inst.arg else {
                    return Err(bad(format!(
                        "needs a Special(name) argument, got {:?}",
                        inst.arg
                    )));
                };
                let kind = parse_special(name).ok_or_else(|| {
                    bad(format!(
                        "unknown launch dimension '{name}' (gidxN, lidxN or idxN)"
                    ))
                })?;
                if let Some(&r) = open.last() {
                    return Err(bad(format!(
                        "SPECIAL must be outside every loop (it is inside v{r})"
                    )));
                }
                if !inst.dtype.is_int() {
                    return Err(bad(format!(
                        "a launch index must be an integer, got {}",
                        inst.dtype
                    )));
                }
                let end = &prog.insts[inst.src[0].index()];
                let (Op::CONST, KArg::Const(bits)) = (end.op, &end.arg) else {
                    return Err(bad(format!("the extent ({}) must be a CONST", inst.src[0])));
                };
                if end.dtype != inst.dtype {
                    return Err(bad(format!(
                        "the extent is {}, the launch index {}",
                        end.dtype, inst.dtype
                    )));
                }
                let extent = to_i128(end.dtype, *bits);
                if extent < 0 {
                    return Err(bad(format!("negative extent {extent}")));
                }
                let extent = extent as u64;
                let e = dims.entry((kind, name.clone())).or_insert((extent, vec![]));
                if e.0 != extent {
                    return Err(bad(format!(
                        "extent {extent} differs from an earlier SPECIAL {name}'s {}",
                        e.0
                    )));
                }
                e.1.push(i);
                Kind::Value(inst.dtype)
            }
            Op::BARRIER => {
                no_arg()?;
                if inst.dtype != DType::Void {
                    return Err(bad(format!("BARRIER has dtype void, got {}", inst.dtype)));
                }
                Kind::Effect
            }
            op => return Err(bad(format!("{op} is not a kernel-level instruction"))),
        };
        kinds.push(kind);
        match inst.op {
            Op::RANGE => {
                open.push(i);
                scope.push(Some(i));
            }
            Op::END => {
                let r = inst.src[0].index();
                open.pop();
                closed[r] = true;
                a.partner[r] = i;
                a.partner[i] = r;
                scope.push(open.last().copied());
            }
            _ => scope.push(open.last().copied()),
        }
    }
    if let Some(&r) = open.last() {
        return Err(KernelError::Malformed {
            inst: InstId(r as u32),
            op: Op::RANGE,
            reason: "the loop is never closed (no END)".into(),
        });
    }
    for (d, ((kind, name), (extent, insts))) in dims.into_iter().enumerate() {
        for i in insts {
            a.slot[i] = d;
        }
        a.dims.push(Dim { name, kind, extent });
    }
    // Every source's kind was checked where the op reads it; what is left is the reverse:
    // buffers, pointers and effects used where a value is expected are caught above.
    Ok(a)
}

fn parse_special(name: &str) -> Option<DimKind> {
    let (kind, digits) = if let Some(d) = name.strip_prefix("gidx") {
        (DimKind::Group, d)
    } else if let Some(d) = name.strip_prefix("lidx") {
        (DimKind::Local, d)
    } else if let Some(d) = name.strip_prefix("idx") {
        (DimKind::Group, d)
    } else {
        return None;
    };
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(kind)
}

/// The tensor verifier's ALU rules, on instructions.
fn check_alu(prog: &Program, i: usize, kinds: &[Kind]) -> Result<(), String> {
    let inst = &prog.insts[i];
    let Some(info) = inst.op.info() else {
        return Err(format!("{} is not an ALU op", inst.op));
    };
    let want = info.arity as usize;
    if inst.src.len() != want {
        return Err(format!("takes {want} source(s), got {}", inst.src.len()));
    }
    let mut dts = vec![];
    for (k, s) in inst.src.iter().enumerate() {
        match kinds[s.index()] {
            Kind::Value(dt) => dts.push(dt),
            other => {
                return Err(format!(
                    "source {k} ({s}) must be a value, got {}",
                    other.describe()
                ))
            }
        }
    }
    crate::ir::table::check_dtypes(info, &dts, inst.dtype).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ParamDecl;

    #[test]
    fn special_names() {
        assert_eq!(parse_special("gidx0"), Some(DimKind::Group));
        assert_eq!(parse_special("idx12"), Some(DimKind::Group));
        assert_eq!(parse_special("lidx2"), Some(DimKind::Local));
        assert_eq!(parse_special("lidx"), None);
        assert_eq!(parse_special("gidx0x"), None);
        assert_eq!(parse_special("threadIdx"), None);
    }

    #[test]
    fn analysis_pairs_loops_and_numbers_buffers() {
        let mut p = Program::new(
            "t",
            vec![ParamDecl {
                dtype: DType::Int32,
                size: 2,
                written: true,
            }],
        );
        let n = p.push(Op::CONST, DType::Int64, vec![], KArg::Const(2));
        let r = p.push(Op::RANGE, DType::Int64, vec![n], KArg::Axis(0));
        let reg = p.push(Op::BUFFER, DType::Int32, vec![], KArg::Reg(3));
        let e = p.push(Op::END, DType::Void, vec![r], KArg::None);
        let a = analyze(&p).unwrap();
        assert_eq!(
            (a.partner[r.index()], a.partner[e.index()]),
            (e.index(), r.index())
        );
        assert_eq!(a.regs, vec![(reg, 3)]);
        assert_eq!(a.mem[reg.index()], Some(Mem::Reg(reg)));
    }
}
