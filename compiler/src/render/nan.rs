//! `defer_nan`: where the C renderer canonicalizes float32/float64 NaNs.
//!
//! The oracle replaces every NaN that arithmetic produces by the canonical quiet NaN (sign
//! clear). Doing that after every op puts a compare-and-select into every loop-carried
//! chain. This analysis moves it to the places where the bits can be observed.
//!
//! A float value `d` of the compiled program *stands for* the oracle's value `o` when
//! either `d == o` bit for bit, or `o` is the canonical NaN and `d` is some NaN. Classes:
//! * [`Class::Deferred`]: stands for the oracle's value (an arithmetic result whose
//!   canonicalization was left out);
//! * [`Class::Canon`]: exactly the oracle's bits, and not a NaN other than the canonical
//!   one (a non-NaN constant, an int→float cast), so it also stands for itself;
//! * [`Class::Exact`]: exactly the oracle's bits, any NaN payload (a load from a buffer,
//!   NEG, a float→float cast, BITCAST).
//!
//! Why it is exact. `uk_canon(d)` is `o` whenever `d` stands for `o`. An arithmetic op whose
//! result the oracle canonicalizes (ADD, SUB, MUL, FDIV, RECIPROCAL, SQRT, TRUNC, MULACC,
//! EXP2, LOG2, SIN, POW) gives, on operands that stand for the oracle's, a result that stands
//! for the oracle's: on non-NaN operands the operands are equal; a NaN operand makes the
//! IEEE result a NaN whatever its payload (POW(NaN, 0) = POW(1, NaN) = 1 does not read the
//! payload either), and the oracle's result is then the canonical NaN. Comparisons do not
//! read a NaN's payload or sign, so their (bool) results are exact. MAX (`a < b ? b : a`)
//! and WHERE move one operand's bits after a payload-blind comparison, so on operands that
//! all stand for themselves they give a value that does too. Everything else (a STORE to a
//! param, NEG, casts, BITCAST, narrow floats, anything not listed) reads the bits: it gets
//! `uk_canon(d)` at that use. A register buffer is *deferred* when every value stored into
//! it stands for the oracle's (a fixed point, starting from all registers); its loads are
//! then `Deferred` and its stores take deferred values as they are.

use uopkit_interp::ir::table::CSpelling;
use uopkit_interp::ir::{DType, Op};
use uopkit_interp::kernel::{KArg, Program};

/// How a float value of the compiled program relates to the oracle's (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Exact,
    Canon,
    Deferred,
}

impl Class {
    /// Stands for the oracle's value (may be used where a deferred value may).
    fn stands(self) -> bool {
        matches!(self, Class::Canon | Class::Deferred)
    }
}

/// The analysis of one program: each instruction's class and, per instruction, whether
/// each operand must be canonicalized at this use.
#[derive(Clone, Debug)]
pub struct NanPlan {
    pub class: Vec<Class>,
    /// `canon_at[i][k]`: operand `k` of instruction `i` is written `uk_canon(v)`.
    pub canon_at: Vec<Vec<bool>>,
    /// Arithmetic instructions whose own canonicalization is left out.
    pub deferred_op: Vec<bool>,
}

impl NanPlan {
    /// The plan that canonicalizes after every op (the renderer without the pass).
    pub fn eager(p: &Program) -> NanPlan {
        NanPlan {
            class: vec![Class::Exact; p.insts.len()],
            canon_at: p.insts.iter().map(|i| vec![false; i.src.len()]).collect(),
            deferred_op: vec![false; p.insts.len()],
        }
    }

    /// How many uses canonicalize (for tests and reports).
    pub fn canon_uses(&self) -> usize {
        self.canon_at.iter().flatten().filter(|&&b| b).count()
    }
}

fn is_wide_float(dt: DType) -> bool {
    matches!(dt, DType::Float32 | DType::Float64)
}

/// The ops whose float32/float64 result the renderer canonicalizes (`alu_expr`).
fn canonicalizing(op: Op) -> bool {
    if op == Op::RECIPROCAL {
        return true;
    }
    let Some(info) = op.info() else {
        return false;
    };
    if !info.classes.float || info.is_comparison() || matches!(op, Op::WHERE | Op::NEG | Op::MAX) {
        return false;
    }
    matches!(
        info.c,
        CSpelling::Infix(_) | CSpelling::CMath(_) | CSpelling::Libm(_)
    )
}

/// The register buffer (a `BUFFER Reg`) an INDEX instruction addresses, if any.
fn reg_of(p: &Program, index: usize) -> Option<usize> {
    let inst = p.insts.get(index)?;
    if inst.op != Op::INDEX {
        return None;
    }
    let b = inst.src.first()?.index();
    let bi = p.insts.get(b)?;
    (bi.op == Op::BUFFER && matches!(bi.arg, KArg::Reg(_)) && is_wide_float(bi.dtype)).then_some(b)
}

/// Plans where `p` canonicalizes (see the module docs).
pub fn plan(p: &Program) -> NanPlan {
    let n = p.insts.len();
    // Optimistic: every float register deferred; drop those that store a value that does
    // not stand for the oracle's, until nothing changes.
    let mut deferred_reg: Vec<bool> = p
        .insts
        .iter()
        .map(|i| i.op == Op::BUFFER && matches!(i.arg, KArg::Reg(_)) && is_wide_float(i.dtype))
        .collect();
    loop {
        let plan = classify(p, &deferred_reg);
        let mut changed = false;
        for (i, inst) in p.insts.iter().enumerate() {
            let bad_store = match inst.op {
                Op::STORE => inst
                    .src
                    .first()
                    .and_then(|s| reg_of(p, s.index()))
                    .filter(|_| {
                        inst.src
                            .get(1)
                            .is_some_and(|v| !plan.class[v.index()].stands())
                    }),
                // A gated load from a register is left eager.
                Op::LOAD if inst.src.len() == 3 => {
                    inst.src.first().and_then(|s| reg_of(p, s.index()))
                }
                _ => None,
            };
            if let Some(r) = bad_store {
                if deferred_reg[r] {
                    deferred_reg[r] = false;
                    changed = true;
                }
            }
            let _ = i;
        }
        if !changed {
            debug_assert_eq!(plan.class.len(), n);
            return plan;
        }
    }
}

fn classify(p: &Program, deferred_reg: &[bool]) -> NanPlan {
    let n = p.insts.len();
    let mut class = vec![Class::Exact; n];
    let mut canon_at: Vec<Vec<bool>> = p.insts.iter().map(|i| vec![false; i.src.len()]).collect();
    let mut deferred_op = vec![false; n];
    for (i, inst) in p.insts.iter().enumerate() {
        // Operands that are earlier instructions (malformed ones are the renderer's error).
        let cls = |k: usize| -> Class {
            inst.src
                .get(k)
                .filter(|s| s.index() < i)
                .map_or(Class::Exact, |s| class[s.index()])
        };
        let wide = is_wide_float(inst.dtype);
        let mut need_exact = |k: usize, class: &[Class]| {
            if let Some(s) = inst.src.get(k).filter(|s| s.index() < i) {
                if class[s.index()] == Class::Deferred {
                    canon_at[i][k] = true;
                }
            }
        };
        match inst.op {
            Op::CONST => {
                if wide {
                    let KArg::Const(bits) = inst.arg else {
                        continue;
                    };
                    let canon_nan = match inst.dtype {
                        DType::Float32 => {
                            let x = f32::from_bits(bits as u32);
                            !x.is_nan() || bits as u32 == 0x7fc0_0000
                        }
                        _ => {
                            let x = f64::from_bits(bits);
                            !x.is_nan() || bits == 0x7ff8_0000_0000_0000
                        }
                    };
                    class[i] = if canon_nan {
                        Class::Canon
                    } else {
                        Class::Exact
                    };
                }
            }
            Op::LOAD => {
                let reg = inst.src.first().and_then(|s| reg_of(p, s.index()));
                if inst.src.len() == 1 && reg.is_some_and(|r| deferred_reg[r]) {
                    class[i] = Class::Deferred;
                }
                for k in 1..inst.src.len() {
                    need_exact(k, &class);
                }
            }
            Op::STORE => {
                let reg = inst.src.first().and_then(|s| reg_of(p, s.index()));
                if !reg.is_some_and(|r| deferred_reg[r]) {
                    for k in 1..inst.src.len() {
                        need_exact(k, &class);
                    }
                }
            }
            Op::CAST => {
                let from = inst.src.first().map(|s| p.insts[s.index()].dtype);
                if wide && from.is_some_and(|f| f.is_int() || f.is_bool()) {
                    class[i] = Class::Canon;
                }
                need_exact(0, &class);
            }
            op if op.is_alu() => {
                let info = op.info();
                let cmp = info.is_some_and(|f| f.is_comparison());
                let arity = inst.src.len();
                let odt = inst
                    .src
                    .first()
                    .map(|s| p.insts[s.index()].dtype)
                    .unwrap_or(DType::Void);
                if cmp && is_wide_float(odt) {
                    // Payload-blind: deferred operands as they are; the bool is exact.
                } else if wide && canonicalizing(op) {
                    deferred_op[i] = true;
                    class[i] = Class::Deferred;
                } else if wide && matches!(op, Op::MAX | Op::WHERE) {
                    let vals: Vec<usize> = if op == Op::WHERE {
                        vec![1, 2]
                    } else {
                        vec![0, 1]
                    };
                    let all_stand = vals.iter().all(|&k| cls(k).stands());
                    let any_deferred = vals.iter().any(|&k| cls(k) == Class::Deferred);
                    if all_stand {
                        class[i] = if any_deferred {
                            Class::Deferred
                        } else {
                            Class::Canon
                        };
                    } else {
                        for &k in &vals {
                            need_exact(k, &class);
                        }
                    }
                } else {
                    for k in 0..arity {
                        need_exact(k, &class);
                    }
                }
            }
            _ => {
                for k in 0..inst.src.len() {
                    need_exact(k, &class);
                }
            }
        }
    }
    NanPlan {
        class,
        canon_at,
        deferred_op,
    }
}
