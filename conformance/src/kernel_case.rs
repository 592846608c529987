//! Kernel-level cases (`docs/case-format.md`, "Kernel-level cases"): a schedule of kernel
//! programs in the kernel-level protocol's JSON form, the buffers' initial contents and the
//! expected contents of some buffers after the steps. [`load`] turns the body into checked
//! programs and buffers (every problem a [`KernelCaseError`] naming the program, instruction
//! and reason); [`run`] executes the steps on the exact kernel interpreter; [`judge`]
//! compares the result with the case's expectations (the oracle trial of such a case).

use std::collections::BTreeMap;
use std::str::FromStr;

use uopkit_interp::eval::Elem;
use uopkit_interp::ir::{DType, NodeId, Op};
use uopkit_interp::kernel::interp::{self, KernelError, RunOpts};
use uopkit_interp::kernel::{check, InstId, KArg, ParamDecl, Program};
use uopkit_interp::scalar::{self, literal, Ub};
use uopkit_interp::verify::{MAX_ELEMENTS, MAX_TOTAL_ELEMENTS};

use crate::case::{Case, ErrorKind, KernelBody, NanPolicy};
use crate::protocol::{self, InstArg, StepJson};

/// A problem with a kernel-level case body: where (program, instruction, or neither) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{reason}", program.as_ref().map(|p| format!("{p}: ")).unwrap_or_default(), inst.map(|i| format!("instruction v{i}: ")).unwrap_or_default())]
pub struct KernelCaseError {
    /// `program N (name)` or another place in the body (`buffer 3`, `step 2`, `expect 0`).
    pub program: Option<String>,
    pub inst: Option<u32>,
    pub reason: String,
}

fn err(place: impl Into<String>, reason: impl Into<String>) -> KernelCaseError {
    KernelCaseError {
        program: Some(place.into()),
        inst: None,
        reason: reason.into(),
    }
}

/// One step, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Program index, buffer ids bound to its param slots.
    Kernel {
        program: usize,
        args: Vec<u32>,
    },
    Copy {
        dst: u32,
        src: u32,
    },
}

/// A buffer, checked: dtype and initial contents (poison where undefined).
#[derive(Clone, Debug, PartialEq)]
pub struct Buf {
    pub id: u32,
    pub dtype: DType,
    pub init: Vec<Elem>,
}

/// An expected buffer, checked: its bits.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub name: String,
    pub buffer: u32,
    pub bits: Vec<u64>,
    pub nan: NanPolicy,
}

/// A loaded kernel-level case.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelCase {
    pub buffers: BTreeMap<u32, Buf>,
    pub programs: Vec<Program>,
    pub steps: Vec<Step>,
    pub expect: Vec<Expect>,
}

fn program_place(i: usize, name: &str) -> String {
    format!("program {i} ({name})")
}

/// Checks a kernel-level body: dtypes, instruction sources and arguments, every program by
/// [`check::check`], buffer contents, step arguments against the params they bind, expected
/// contents.
pub fn load(body: &KernelBody) -> Result<KernelCase, KernelCaseError> {
    let mut buffers = BTreeMap::new();
    let mut storages = BTreeMap::new();
    // Sizes are checked before anything is allocated: each buffer and all of them together
    // within the oracle's limits for one value and for a whole graph.
    let mut total: usize = 0;
    for b in &body.buffers {
        let place = format!("buffer {}", b.id);
        if b.size > MAX_ELEMENTS {
            return Err(err(
                &place,
                format!(
                    "size {} is over the limit of {MAX_ELEMENTS} elements per buffer",
                    b.size
                ),
            ));
        }
        total = match total.checked_add(b.size) {
            Some(t) if t <= MAX_TOTAL_ELEMENTS => t,
            _ => {
                return Err(err(
                    &place,
                    format!("the buffers hold more than {MAX_TOTAL_ELEMENTS} elements in all"),
                ))
            }
        };
    }
    for b in &body.buffers {
        let place = format!("buffer {}", b.id);
        let dtype = DType::from_str(&b.dtype)
            .map_err(|_| err(&place, format!("unknown dtype '{}'", b.dtype)))?;
        if let Some(other) = storages.insert(b.storage, b.id) {
            return Err(err(
                &place,
                format!(
                    "shares storage {} with buffer {other}: kernel-level cases do not alias buffers",
                    b.storage
                ),
            ));
        }
        let init = match &b.init {
            None => uninit(b.id, b.size),
            Some(list) => {
                if list.len() != b.size {
                    return Err(err(
                        &place,
                        format!("init has {} elements, the buffer {}", list.len(), b.size),
                    ));
                }
                list.iter()
                    .enumerate()
                    .map(|(index, e)| {
                        protocol::parse_bits(dtype, e)
                            .map(|v| match v {
                                Some(bits) => Elem::Bits(bits),
                                None => Elem::Uninit {
                                    buffer: NodeId(b.id),
                                    index,
                                },
                            })
                            .map_err(|r| err(&place, format!("init element {index}: {r}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        if buffers
            .insert(
                b.id,
                Buf {
                    id: b.id,
                    dtype,
                    init,
                },
            )
            .is_some()
        {
            return Err(err(&place, "the id is used twice"));
        }
    }
    let programs = body
        .programs
        .iter()
        .enumerate()
        .map(|(i, p)| program(i, p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut steps = vec![];
    for (s, step) in body.steps.iter().enumerate() {
        let place = format!("step {s}");
        match step {
            StepJson::Kernel { program, args, .. } => {
                let Some(p) = programs.get(*program) else {
                    return Err(err(
                        &place,
                        format!("no program {program} (the case has {})", programs.len()),
                    ));
                };
                if args.len() != p.params.len() {
                    return Err(err(
                        &place,
                        format!(
                            "{} takes {} buffer(s), the step passes {}",
                            program_place(*program, &p.name),
                            p.params.len(),
                            args.len()
                        ),
                    ));
                }
                for (slot, (a, d)) in args.iter().zip(&p.params).enumerate() {
                    let b = buffers
                        .get(a)
                        .ok_or_else(|| err(&place, format!("slot {slot}: no buffer {a}")))?;
                    if b.dtype != d.dtype || b.init.len() != d.size {
                        return Err(err(
                            &place,
                            format!(
                                "slot {slot}: buffer {a} is {}[{}], the param is {}[{}]",
                                b.dtype,
                                b.init.len(),
                                d.dtype,
                                d.size
                            ),
                        ));
                    }
                    if args[..slot].contains(a) {
                        return Err(err(
                            &place,
                            format!("buffer {a} is bound to two slots (aliasing is not modelled)"),
                        ));
                    }
                }
                steps.push(Step::Kernel {
                    program: *program,
                    args: args.clone(),
                });
            }
            StepJson::Copy { dst, src } => {
                let (Some(d), Some(s2)) = (buffers.get(dst), buffers.get(src)) else {
                    return Err(err(&place, format!("copy {src} → {dst}: no such buffer")));
                };
                if d.dtype != s2.dtype || d.init.len() != s2.init.len() {
                    return Err(err(&place, "a copy needs buffers of one dtype and size"));
                }
                steps.push(Step::Copy {
                    dst: *dst,
                    src: *src,
                });
            }
        }
    }
    let mut expect = vec![];
    for (k, e) in body.expect.iter().enumerate() {
        let place = format!("expect {k} ({})", e.name);
        let b = buffers
            .get(&e.buffer)
            .ok_or_else(|| err(&place, format!("no buffer {}", e.buffer)))?;
        if e.expect.len() != b.init.len() {
            return Err(err(
                &place,
                format!(
                    "{} expected elements, buffer {} has {}",
                    e.expect.len(),
                    e.buffer,
                    b.init.len()
                ),
            ));
        }
        let bits = e
            .expect
            .iter()
            .enumerate()
            .map(|(i, v)| {
                literal::parse(b.dtype, v).map_err(|r| err(&place, format!("element {i}: {r}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        expect.push(Expect {
            name: e.name.clone(),
            buffer: e.buffer,
            bits,
            nan: e.nan,
        });
    }
    Ok(KernelCase {
        buffers,
        programs,
        steps,
        expect,
    })
}

fn uninit(id: u32, size: usize) -> Vec<Elem> {
    (0..size)
        .map(|index| Elem::Uninit {
            buffer: NodeId(id),
            index,
        })
        .collect()
}

/// One program from its JSON form; checked by [`check::check`].
fn program(i: usize, p: &protocol::ProgramJson) -> Result<Program, KernelCaseError> {
    let place = program_place(i, &p.name);
    let at = |inst: usize, reason: String| KernelCaseError {
        program: Some(place.clone()),
        inst: Some(inst as u32),
        reason,
    };
    let mut params = vec![];
    for (s, d) in p.params.iter().enumerate() {
        let dtype = DType::from_str(&d.dtype)
            .map_err(|_| err(&place, format!("param {s}: unknown dtype '{}'", d.dtype)))?;
        params.push(ParamDecl {
            dtype,
            size: d.size,
            written: d.written,
        });
    }
    let mut prog = Program::new(p.name.clone(), params);
    for (k, inst) in p.insts.iter().enumerate() {
        let op = Op::from_str(&inst.op).map_err(|_| at(k, format!("unknown op '{}'", inst.op)))?;
        let dtype = DType::from_str(&inst.dtype)
            .map_err(|_| at(k, format!("unknown dtype '{}'", inst.dtype)))?;
        if let Some(&s) = inst.src.iter().find(|&&s| s as usize >= k) {
            return Err(at(k, format!("source v{s} is not an earlier instruction")));
        }
        let arg = match &inst.arg {
            None => KArg::None,
            Some(InstArg::Param(s)) => KArg::Param(*s),
            Some(InstArg::Reg(n)) => KArg::Reg(*n),
            Some(InstArg::Local(n)) => KArg::Local(*n),
            Some(InstArg::Axis(a)) => KArg::Axis(*a),
            Some(InstArg::Special(s)) => KArg::Special(s.clone()),
            Some(InstArg::Const(c)) => KArg::Const(
                protocol::parse_bits(dtype, &protocol::Bits::Text(c.clone()))
                    .map_err(|r| at(k, r))?
                    .unwrap_or(0),
            ),
        };
        prog.push(
            op,
            dtype,
            inst.src.iter().map(|&s| InstId(s)).collect(),
            arg,
        );
    }
    check::check(&prog).map_err(|e| match e.inst() {
        Some(id) => at(id.index(), e.to_string()),
        None => err(&place, e.to_string()),
    })?;
    Ok(prog)
}

/// A kernel-level run that stopped: at which step and program, and the interpreter's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    pub step: usize,
    pub program: usize,
    pub name: String,
    pub error: KernelError,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {}: {}: {}",
            self.step,
            program_place(self.program, &self.name),
            self.error
        )
    }
}

/// Runs the steps on the kernel interpreter; the buffers' contents after the last step.
pub fn run(kc: &KernelCase, opts: &RunOpts) -> Result<BTreeMap<u32, Vec<Elem>>, Box<StepError>> {
    let mut mem: BTreeMap<u32, Vec<Elem>> = kc
        .buffers
        .iter()
        .map(|(id, b)| (*id, b.init.clone()))
        .collect();
    for (s, step) in kc.steps.iter().enumerate() {
        match step {
            Step::Copy { dst, src } => {
                let data = mem.get(src).cloned().unwrap_or_default();
                mem.insert(*dst, data);
            }
            Step::Kernel { program, args } => {
                let prog = &kc.programs[*program];
                let mut bufs: Vec<Vec<Elem>> = args
                    .iter()
                    .map(|a| mem.get_mut(a).map(std::mem::take).unwrap_or_default())
                    .collect();
                let r = interp::run(prog, &mut bufs, opts);
                for (a, b) in args.iter().zip(bufs) {
                    mem.insert(*a, b);
                }
                r.map_err(|error| {
                    Box::new(StepError {
                        step: s,
                        program: *program,
                        name: prog.name.clone(),
                        error,
                    })
                })?;
            }
        }
    }
    Ok(mem)
}

/// What a kernel-level case may not carry besides `kernel`: a tensor graph, its inputs,
/// outputs or schedule expectations (they would be ignored, and `uopkit fmt` would drop
/// them), or `expect_error` fields that only tensor-level cases check (`node`, `contains`),
/// or an instruction without its program.
pub fn check_envelope(case: &Case) -> Result<(), KernelCaseError> {
    let extra = [
        (!case.graph.is_empty(), "graph"),
        (!case.inputs.is_empty(), "inputs"),
        (!case.outputs.is_empty(), "outputs"),
        (case.schedule.is_some(), "schedule"),
    ];
    if let Some((_, what)) = extra.iter().find(|(present, _)| *present) {
        return Err(err(
            "case",
            format!("a kernel-level case has no '{what}' (its buffers, steps and expectations are inside 'kernel')"),
        ));
    }
    if let Some(w) = &case.expect_error {
        if w.node.is_some() || w.contains.is_some() {
            return Err(err(
                "expect_error",
                "'node' and 'contains' are for tensor-level cases; a kernel-level case names 'program', 'inst' and 'element'",
            ));
        }
        if w.inst.is_some() && w.program.is_none() {
            return Err(err("expect_error", "'inst' needs the 'program' it is in"));
        }
    }
    Ok(())
}

/// The oracle trial of a kernel-level case: Ok, or a report of what differs.
pub fn judge(case: &Case, body: &KernelBody) -> Result<(), String> {
    check_envelope(case).map_err(|e| format!("invalid kernel-level case: {e}"))?;
    let kc = load(body).map_err(|e| format!("invalid kernel-level case: {e}"))?;
    let opts = RunOpts::from_env()?;
    let result = run(&kc, &opts);
    match (&case.expect_error, result) {
        (None, Ok(mem)) => compare(&kc, &mem).map_err(|report| {
            format!(
                "the kernel interpreter's buffers differ from the case's expectations:\n{report}"
            )
        }),
        (None, Err(e)) => Err(format!("the kernel interpreter stopped: {e}")),
        (Some(want), Ok(mem)) => {
            // A poisoned expected element is an uninitialized read reaching the output.
            if want.kind == ErrorKind::Ub
                && want.ub == Some(Ub::UninitializedRead)
                && want.program.is_none()
            {
                for x in &kc.expect {
                    let poisoned = |i: usize| {
                        mem.get(&x.buffer)
                            .and_then(|b| b.get(i))
                            .is_some_and(|e| matches!(e, Elem::Uninit { .. }))
                    };
                    let len = mem.get(&x.buffer).map_or(0, Vec::len);
                    let hit = match want.element {
                        Some(w) => poisoned(w),
                        None => (0..len).any(poisoned),
                    };
                    if hit {
                        return Ok(());
                    }
                }
            }
            Err(format!(
                "expected an error ({}), but the steps ran to the end",
                describe_want(want)
            ))
        }
        (Some(want), Err(e)) => {
            let got = ub_of(&e);
            let matches = want.kind == ErrorKind::Ub
                && got.is_some_and(|(kind, _)| want.ub.is_none_or(|w| w == kind))
                && want.program.is_none_or(|p| p == e.program)
                && want.inst.is_none_or(|i| e.error.inst() == Some(InstId(i)))
                && want
                    .element
                    .is_none_or(|w| got.and_then(|(_, el)| el) == Some(w as i128));
            if matches {
                Ok(())
            } else {
                Err(format!("expected {}, got: {e}", describe_want(want)))
            }
        }
    }
}

fn describe_want(w: &crate::case::ExpectError) -> String {
    let mut s = match w.ub {
        Some(u) => format!("undefined behaviour {u:?}"),
        None => format!("{:?}", w.kind),
    };
    if let Some(p) = w.program {
        s += &format!(" in program {p}");
    }
    if let Some(i) = w.inst {
        s += &format!(" at instruction v{i}");
    }
    if let Some(e) = w.element {
        s += &format!(" at element {e}");
    }
    s
}

/// The UB kind of a stopped run and its element (the out-of-bounds index, or the element of
/// the buffer never written).
fn ub_of(e: &StepError) -> Option<(Ub, Option<i128>)> {
    match &e.error {
        KernelError::Ub {
            kind,
            index,
            poison,
            ..
        } => {
            let el = match (index, poison) {
                (Some(i), _) => Some(*i),
                (None, Some((_, Elem::Uninit { index, .. }))) => Some(*index as i128),
                _ => None,
            };
            Some((*kind, el))
        }
        _ => None,
    }
}

/// Whether `got` matches `want` under `nan` (exact bits; any NaN for any NaN under `Any`).
fn same(dt: DType, want: u64, got: u64, nan: NanPolicy) -> bool {
    want == got
        || (nan == NanPolicy::Any
            && dt.is_float()
            && scalar::round::is_nan(dt, want)
            && scalar::round::is_nan(dt, got))
}

fn compare(kc: &KernelCase, mem: &BTreeMap<u32, Vec<Elem>>) -> Result<(), String> {
    let mut report = String::new();
    for x in &kc.expect {
        let dt = kc.buffers[&x.buffer].dtype;
        let got = &mem[&x.buffer];
        let mut bad = 0usize;
        for (i, (w, g)) in x.bits.iter().zip(got).enumerate() {
            let line = match g {
                Elem::Bits(b) if same(dt, *w, *b, x.nan) => continue,
                Elem::Bits(b) => format!(
                    "  {} (buffer {}) element {i}: expected {}, got {}\n",
                    x.name,
                    x.buffer,
                    literal::display(dt, *w),
                    literal::display(dt, *b)
                ),
                Elem::Uninit { buffer, index } => format!(
                    "  {} (buffer {}) element {i}: expected {}, got poison (undefined behaviour: uninitialized read; element {index} of buffer {} was never written)\n",
                    x.name,
                    x.buffer,
                    literal::display(dt, *w),
                    buffer.0
                ),
            };
            bad += 1;
            if bad <= 8 {
                report += &line;
            }
        }
        if bad > 8 {
            report += &format!("  … {} more element(s) of {} differ\n", bad - 8, x.name);
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(report)
    }
}

/// The `run_schedule` request of a kernel-level case for a backend that runs kernel programs
/// as they are: its buffers, programs and steps, reading the buffers it expects.
pub fn request(case: &str, body: &KernelBody, kc: &KernelCase) -> protocol::ScheduleRequest {
    let mut read: Vec<u32> = kc.expect.iter().map(|x| x.buffer).collect();
    read.sort_unstable();
    read.dedup();
    protocol::ScheduleRequest {
        id: 0,
        case: case.to_string(),
        buffers: body.buffers.clone(),
        programs: body.programs.clone(),
        steps: body.steps.clone(),
        read,
    }
}

/// A backend's answer to [`request`] against the oracle: the kernel interpreter runs the same
/// steps, and every expected buffer of the backend must have the interpreter's bits (any NaN
/// for any NaN where the expectation says so). As for tensor-level cases, the backend is judged
/// against the oracle, not the case's expected values (those are the oracle trial's: some
/// imported cases expect what tinygrad computed). Ok, a report of what differs, or why the
/// oracle could not give a reference (`Err(Err(..))`).
pub fn compare_answer(
    kc: &KernelCase,
    got: &[protocol::BufferBits],
) -> Result<Result<(), String>, String> {
    let opts = RunOpts::from_env()?;
    let oracle = run(kc, &opts).map_err(|e| format!("the kernel interpreter stopped: {e}"))?;
    let mut want = kc.clone();
    for x in &mut want.expect {
        let bits = oracle
            .get(&x.buffer)
            .map(|b| {
                b.iter()
                    .enumerate()
                    .map(|(i, e)| match e {
                        Elem::Bits(v) => Ok(*v),
                        Elem::Uninit { .. } => Err(format!(
                            "the kernel interpreter leaves element {i} of {} (buffer {}) undefined",
                            x.name, x.buffer
                        )),
                    })
                    .collect::<Result<Vec<u64>, String>>()
            })
            .unwrap_or_else(|| Err(format!("the kernel interpreter has no buffer {}", x.buffer)))?;
        x.bits = bits;
    }
    let mut mem: BTreeMap<u32, Vec<Elem>> = BTreeMap::new();
    for x in &want.expect {
        let dt = kc.buffers[&x.buffer].dtype;
        let answer = (|| {
            let b = got
                .iter()
                .find(|b| b.id == x.buffer)
                .ok_or_else(|| format!("the answer has no buffer {} ({})", x.buffer, x.name))?;
            if b.data.len() != x.bits.len() {
                return Err(format!(
                    "the answer's buffer {} ({}) has {} element(s), expected {}",
                    x.buffer,
                    x.name,
                    b.data.len(),
                    x.bits.len()
                ));
            }
            b.data
                .iter()
                .enumerate()
                .map(|(i, e)| match protocol::parse_bits(dt, e) {
                    Ok(Some(v)) => Ok(Elem::Bits(v)),
                    Ok(None) => Err(format!(
                        "the answer's buffer {} ({}) element {i} is null",
                        x.buffer, x.name
                    )),
                    Err(e) => Err(format!(
                        "the answer's buffer {} ({}) element {i}: {e}",
                        x.buffer, x.name
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
        })();
        match answer {
            Ok(elems) => {
                mem.insert(x.buffer, elems);
            }
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(compare(&want, &mem).map_err(|report| {
        format!(
            "the backend's buffers differ from the oracle's (the kernel interpreter's):\n{report}"
        )
    }))
}

/// Why a backend other than the oracle skips a kernel-level case.
pub const SKIP_REASON: &str =
    "kernel-level case (a schedule of kernel programs): this backend does not run kernel programs as they are; the oracle's kernel interpreter judges it";
