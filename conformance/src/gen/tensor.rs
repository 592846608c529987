//! Tensor-level graphs: random programs written with the tensor builder
//! (`uopkit_interp::tensor`), so every graph is well typed and verified by construction.
//!
//! A program is a [`Recipe`]: a list of steps, each a few random words. [`build`] interprets
//! the words against what exists so far (which tensor to use, which op, which axes), so any
//! recipe builds a valid graph; a step that does not apply (no tensor of a fitting dtype,
//! a shape that would grow too large, a builder error) is skipped. Removing steps or making
//! words smaller gives a simpler program, which is how a failing program is shrunk (by
//! proptest, or by `crate::shrink::shrink_recipe`).
//!
//! Steps: buffers with known contents (small shapes, values that keep arithmetic away from
//! overflow and undefined behaviour), elementwise ALU (division and shifts made safe:
//! positive divisors, masked shift counts; a dividend is sometimes masked to a small
//! non-negative range, as an index is), WHERE, CAST/BITCAST, movement (reshape, permute,
//! pad, shrink, flip, expand, and *view chains*: permute/shrink/flip followed by a reshape,
//! which needs `flat % d` index arithmetic), reductions, CONTIGUOUS, DETACH, COPY between
//! `CPU:n` devices, clone, assign (whole or a slice), reading the latest contents, and —
//! behind [`TensorConfig::multi_device`] — sharding, ALLREDUCE and gathering (the CPU
//! backend does not run multi-device graphs yet: such cases are for the oracle).
//!
//! [`tensor_case`] is the proptest strategy; its value is a [`Generated`]: the recipe, a
//! log of the steps taken, and the graph as a [`Case`] with empty expectations.

use std::fmt;

#[cfg(feature = "testkit")]
use proptest::collection::vec;
#[cfg(feature = "testkit")]
use proptest::prelude::*;
use uopkit_interp::ir::{DType, Device, DeviceSpec};
use uopkit_interp::scalar::cast::wrap_i128;
use uopkit_interp::scalar::round::from_f64;
use uopkit_interp::tensor::{Ctx, Operand, Scalar, Tensor};

use super::export::export;
use super::expr::Choices;
use crate::case::Case;
use crate::inputs::SplitMix64;

use DType::*;

/// Words per step. A choice past a step's words reads 0 (the first option), so there are
/// enough for the longest step (a binary op on a picked tensor with a partner, its op, a
/// division's kind, divisor and dividend mask: about 11); with 6, a step's later choices
/// were nearly always the first (a division was `cdiv` by 2).
pub const STEP_WORDS: usize = 12;
/// One step of a recipe.
pub type StepCode = [u32; STEP_WORDS];

/// A tensor program: what [`build`] interprets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recipe {
    pub steps: Vec<StepCode>,
}

/// What the generated programs may contain.
#[derive(Clone, Debug)]
pub struct TensorConfig {
    /// The most steps in a recipe.
    pub max_steps: usize,
    /// The largest rank of a buffer.
    pub max_rank: usize,
    /// The largest axis of a buffer.
    pub max_dim: usize,
    /// The most elements of any tensor.
    pub max_elements: usize,
    /// Element dtypes of the buffers (bool comes from comparisons too).
    pub dtypes: Vec<DType>,
    /// Buffers may hold edge values: ±0, ±inf, NaN, the largest finite values, integer
    /// extremes (more undefined behaviour and overflow).
    pub edge_values: bool,
    /// EXP2, LOG2, SIN, SQRT, RECIPROCAL and POW on floats.
    pub transcendental: bool,
    /// Single devices used: `CPU:0 .. CPU:(devices-1)` (COPY between them).
    pub devices: u32,
    /// Multi-device steps (shard, ALLREDUCE, gather): oracle-only cases for now.
    pub multi_device: bool,
    /// The most outputs of a case.
    pub max_outputs: usize,
}

impl Default for TensorConfig {
    fn default() -> Self {
        TensorConfig {
            max_steps: 8,
            max_rank: 3,
            max_dim: 4,
            max_elements: 48,
            dtypes: vec![
                Int32, Float32, Int64, UInt8, Int8, Float16, UInt32, Int16, BFloat16, Float64,
            ],
            edge_values: false,
            transcendental: true,
            devices: 2,
            multi_device: false,
            max_outputs: 2,
        }
    }
}

/// A generated program: its recipe, what each step did, and the case.
#[derive(Clone)]
pub struct Generated {
    pub recipe: Recipe,
    pub log: Vec<String>,
    pub case: Case,
}

impl fmt::Debug for Generated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "program of {} nodes:", self.case.graph.len())?;
        for l in &self.log {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

/// Recipes of 1 to `cfg.max_steps` steps.
#[cfg(feature = "testkit")]
pub fn recipe(cfg: &TensorConfig) -> impl Strategy<Value = Recipe> {
    vec(any::<StepCode>(), 1..=cfg.max_steps.max(1)).prop_map(|steps| Recipe { steps })
}

/// Random tensor programs as cases (expected values empty: compare with the oracle).
#[cfg(feature = "testkit")]
pub fn tensor_case(cfg: TensorConfig) -> impl Strategy<Value = Generated> {
    recipe(&cfg).prop_map(move |r| build(&r, &cfg))
}

/// Interprets `recipe`. Always gives a valid case (a program whose every step was skipped
/// still has its first buffer).
pub fn build(recipe: &Recipe, cfg: &TensorConfig) -> Generated {
    let mut b = Builder {
        ctx: Ctx::new(),
        pool: vec![],
        log: vec![],
        cfg,
    };
    for (k, code) in recipe.steps.iter().enumerate() {
        let mut c = Choices::new(code);
        let kind = if b.pool.is_empty() {
            0
        } else {
            c.weighted(&b.weights())
        };
        let made = b.step(kind, &mut c);
        match made {
            Ok(Some((t, what))) if t.numel() <= cfg.max_elements => {
                b.log.push(format!(
                    "t{} = {what}  # {} {:?}",
                    b.pool.len(),
                    t.dtype(),
                    t.shape()
                ));
                b.pool.push(t);
            }
            Ok(_) => b.log.push(format!("(step {k} skipped)")),
            Err(e) => b.log.push(format!("(step {k} skipped: {e})")),
        }
    }
    if b.pool.is_empty() {
        // Only possible for an empty recipe: one buffer.
        let mut c = Choices::new(&[]);
        if let Ok(Some((t, what))) = b.step(0, &mut c) {
            b.log
                .push(format!("t0 = {what}  # {} {:?}", t.dtype(), t.shape()));
            b.pool.push(t);
        }
    }
    // Outputs: the last tensor, and maybe one more chosen by the first step's last word.
    let last = b.pool.len() - 1;
    let mut outs = vec![last];
    let w = recipe.steps.first().map_or(0, |s| s[STEP_WORDS - 1]);
    if cfg.max_outputs > 1 && b.pool.len() > 1 && w % 3 == 1 {
        let other = (w as usize / 3) % last;
        if b.pool[other].id() != b.pool[last].id() {
            outs.insert(0, other);
        }
    }
    let outputs: Vec<(String, _)> = outs
        .iter()
        .map(|&i| (format!("t{i}"), b.pool[i].id()))
        .collect();
    b.log.push(format!(
        "outputs: {}",
        outputs
            .iter()
            .map(|o| o.0.clone())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let case = export(
        &b.ctx.graph(),
        &b.ctx.inputs(),
        &outputs,
        "generated tensor program (expected values: the oracle's, at check time)",
        &["generated"],
    )
    .expect("the builder's graphs verify and have known inputs");
    Generated {
        recipe: recipe.clone(),
        log: b.log,
        case,
    }
}

struct Builder<'c> {
    ctx: Ctx,
    pool: Vec<Tensor>,
    log: Vec<String>,
    cfg: &'c TensorConfig,
}

type Made = Option<(Tensor, String)>;
type R<T> = uopkit_interp::Result<T>;

const KINDS: &[&str] = &[
    "leaf",
    "unary",
    "binary",
    "where",
    "cast",
    "bitcast",
    "movement",
    "view_chain",
    "reduce",
    "contiguous",
    "copy",
    "clone",
    "assign",
    "latest",
    "multi",
];

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// numpy's broadcast of two shapes, if they broadcast.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let get = |s: &[usize], i: usize| {
        if i + s.len() >= n {
            s[i + s.len() - n]
        } else {
            1
        }
    };
    (0..n)
        .map(|i| match (get(a, i), get(b, i)) {
            (x, y) if x == y || y == 1 => Some(x),
            (1, y) => Some(y),
            _ => None,
        })
        .collect()
}

fn fmt_dev(d: &Option<DeviceSpec>) -> String {
    d.as_ref().map_or("-".into(), |d| d.to_string())
}

impl Builder<'_> {
    fn weights(&self) -> Vec<u32> {
        // Same order as KINDS.
        vec![
            2,
            3,
            7,
            2,
            2,
            1,
            6,
            4,
            3,
            1,
            1,
            1,
            2,
            1,
            if self.cfg.multi_device { 5 } else { 0 },
        ]
    }

    /// A tensor of the pool: the newest (the word 0) or any.
    fn pick(&self, c: &mut Choices) -> usize {
        let n = self.pool.len();
        if c.chance(60) {
            c.below(n)
        } else {
            n - 1
        }
    }

    fn name(&self, t: &Tensor) -> String {
        match self.pool.iter().rposition(|p| p.id() == t.id()) {
            Some(i) => format!("t{i}"),
            None => format!("{t:?}"),
        }
    }

    /// A partner for an elementwise op with `a`: a pool tensor of the same dtype and device
    /// whose shape broadcasts with `a`'s within the size limit.
    fn partner(&self, c: &mut Choices, a: &Tensor, dtype: DType) -> Option<Tensor> {
        let cands: Vec<&Tensor> = self
            .pool
            .iter()
            .filter(|t| {
                t.dtype() == dtype
                    && t.device() == a.device()
                    && broadcast(&t.shape(), &a.shape())
                        .is_some_and(|s| numel(&s) <= self.cfg.max_elements)
            })
            .collect();
        if cands.is_empty() || !c.chance(75) {
            return None;
        }
        Some(cands[c.below(cands.len())].clone())
    }

    fn device(&self, c: &mut Choices) -> Device {
        if self.cfg.devices > 1 && c.chance(15) {
            Device::cpu(1 + c.below(self.cfg.devices as usize - 1) as u32)
        } else {
            Device::CPU
        }
    }

    fn shape(&self, c: &mut Choices) -> Vec<usize> {
        let rank = c
            .pick(&[1usize, 2, 2, 3, 1, 0, 3, 2])
            .min(self.cfg.max_rank);
        let mut s: Vec<usize> = (0..rank)
            .map(|_| 1 + c.below(self.cfg.max_dim.max(1)))
            .collect();
        while numel(&s) > self.cfg.max_elements {
            let i = (0..s.len()).max_by_key(|&i| s[i]).unwrap_or(0);
            s[i] -= 1;
        }
        s
    }

    /// Buffer contents: small values (no overflow in a few ops), or edge values.
    fn data(&self, c: &mut Choices, dt: DType, n: usize) -> Vec<u64> {
        let mut rng = SplitMix64(c.word() as u64);
        let edge = self.cfg.edge_values && c.chance(50);
        (0..n)
            .map(|_| {
                let r = rng.next_u64();
                if dt.is_float() {
                    if edge && r.is_multiple_of(4) {
                        let specials = [
                            0.0,
                            -0.0,
                            f64::INFINITY,
                            f64::NEG_INFINITY,
                            f64::NAN,
                            f64::MAX,
                            -f64::MAX,
                            5e-324,
                            1e-40,
                            65504.0,
                            448.0,
                        ];
                        return from_f64(dt, specials[(r >> 8) as usize % specials.len()]);
                    }
                    let k = (r >> 8) % 81;
                    from_f64(dt, (k as f64 - 40.0) / 4.0)
                } else if dt.is_bool() {
                    r & 1
                } else {
                    let (lo, hi) = dt.int_range().unwrap_or((0, 1));
                    let v = if edge && r.is_multiple_of(4) {
                        [lo, hi, lo + 1, hi - 1, 0, -1][(r >> 8) as usize % 6]
                    } else if dt.is_signed_int() {
                        ((r >> 8) % 41) as i128 - 20
                    } else {
                        ((r >> 8) % 41) as i128
                    };
                    wrap_i128(dt, v.clamp(lo, hi))
                }
            })
            .collect()
    }

    fn literal(&self, c: &mut Choices, dt: DType) -> Scalar {
        if dt.is_float() {
            Scalar::Float(c.pick(&[1.0, 0.5, -2.0, 3.0, 0.0, -0.0, 0.25, 10.0]))
        } else if dt.is_bool() {
            Scalar::Bool(c.chance(50))
        } else if dt.is_signed_int() {
            Scalar::Int(c.pick(&[1i128, 2, -1, 3, 0, -7, 5, 100]))
        } else {
            Scalar::Int(c.pick(&[1i128, 2, 3, 0, 7, 5, 100, 255]))
        }
    }

    fn step(&mut self, kind: usize, c: &mut Choices) -> R<Made> {
        match KINDS.get(kind).copied().unwrap_or("leaf") {
            "leaf" => self.leaf(c),
            "unary" => self.unary(c),
            "binary" => self.binary(c),
            "where" => self.where_(c),
            "cast" => self.cast(c),
            "bitcast" => self.bitcast(c),
            "movement" => {
                let t = self.pool[self.pick(c)].clone();
                self.movement(c, &t)
            }
            "view_chain" => self.view_chain(c),
            "reduce" => self.reduce(c),
            "contiguous" => {
                let t = self.pool[self.pick(c)].clone();
                let name = self.name(&t);
                if c.chance(50) {
                    Ok(Some((t.detach()?, format!("{name}.detach()"))))
                } else {
                    Ok(Some((t.contiguous()?, format!("{name}.contiguous()"))))
                }
            }
            "copy" => self.copy(c),
            "clone" => {
                let t = self.pool[self.pick(c)].clone();
                let name = self.name(&t);
                let dev = if c.chance(50) {
                    Some(self.device(c))
                } else {
                    None
                };
                Ok(Some((
                    t.clone_storage(dev)?,
                    format!("{name}.clone({dev:?})"),
                )))
            }
            "assign" => self.assign(c),
            "latest" => {
                let t = self.pool[self.pick(c)].clone();
                let name = self.name(&t);
                let l = t.latest()?;
                Ok((l.id() != t.id()).then(|| (l, format!("{name}.latest()"))))
            }
            "multi" => self.multi(c),
            _ => Ok(None),
        }
    }

    fn leaf(&mut self, c: &mut Choices) -> R<Made> {
        let dt = c.pick(&self.cfg.dtypes.clone());
        let shape = self.shape(c);
        let dev = self.device(c);
        let bits = self.data(c, dt, numel(&shape));
        let t = Tensor::from_data(&self.ctx, &shape, dt, dev, &bits)?;
        Ok(Some((t, format!("buffer({dt}, {shape:?}, {dev})"))))
    }

    fn unary(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        let name = self.name(&t);
        let dt = t.dtype();
        let (r, what) = if dt.is_bool() || (dt.is_int() && c.chance(40)) {
            (t.not()?, "not")
        } else if dt.is_int() {
            (t.neg()?, "neg")
        } else {
            let mut ops = vec!["neg", "trunc"];
            if self.cfg.transcendental {
                ops.extend(["sqrt", "exp2", "log2", "sin", "reciprocal"]);
            }
            let op = c.pick(&ops);
            let r = match op {
                "neg" => t.neg()?,
                "trunc" => t.trunc()?,
                "sqrt" => t.sqrt()?,
                "exp2" => t.exp2()?,
                "log2" => t.log2()?,
                "sin" => t.sin()?,
                _ => t.reciprocal()?,
            };
            (r, op)
        };
        Ok(Some((r, format!("{name}.{what}()"))))
    }

    fn binary(&mut self, c: &mut Choices) -> R<Made> {
        let a = self.pool[self.pick(c)].clone();
        let dt = a.dtype();
        let partner = self.partner(c, &a, dt);
        let lit = self.literal(c, dt);
        let (bname, b): (String, Operand) = match &partner {
            Some(p) => (self.name(p), Operand::Tensor(p.clone())),
            None => (format!("{lit:?}"), Operand::Scalar(lit)),
        };
        let an = self.name(&a);
        let r = if dt.is_bool() {
            let op = c.pick(&["and", "or", "xor", "eq", "ne", "maximum"]);
            let r = match op {
                "and" => a.and(b)?,
                "or" => a.or(b)?,
                "xor" => a.xor(b)?,
                "eq" => a.eq(b)?,
                "ne" => a.ne(b)?,
                _ => a.maximum(b)?,
            };
            (r, format!("{an}.{op}({bname})"))
        } else if dt.is_int() {
            let op = c.pick(&[
                "add", "sub", "mul", "maximum", "minimum", "lt", "eq", "ne", "and", "or", "xor",
                "divmod", "divmod", "shift",
            ]);
            match op {
                "divmod" => {
                    let which = c.pick(&["cdiv", "cmod", "floordiv", "floormod"]);
                    // A divisor that is never 0 (and never -1: no INT_MIN / -1).
                    let (d, dn): (Operand, String) = match &partner {
                        Some(p) if c.chance(60) => {
                            (p.and(7)?.add(1)?.into(), format!("({bname} & 7) + 1"))
                        }
                        _ => {
                            let v = if dt.is_signed_int() {
                                c.pick(&[2i128, 3, 1, 4, 5, 7, -2, -3])
                            } else {
                                c.pick(&[2i128, 3, 1, 4, 5, 7, 16])
                            };
                            (Operand::Scalar(Scalar::Int(v)), v.to_string())
                        }
                    };
                    // Index-like dividends: a value masked to 0..=m (m + 1 a power of two),
                    // so its range is known and small, as an index's is. Rules that depend
                    // on the dividend's range (`x % c → x` for 0 ≤ x < c, and their wrong
                    // variants) match only such dividends; a buffer's element has its
                    // dtype's whole range.
                    let (a, an) = if c.chance(35) {
                        let m = c.pick(&[3i128, 7, 15, 1]);
                        (a.and(Scalar::Int(m))?, format!("({an} & {m})"))
                    } else {
                        (a, an)
                    };
                    let r = match which {
                        "cdiv" => a.cdiv(d)?,
                        "cmod" => a.cmod(d)?,
                        "floordiv" => a.floordiv(d)?,
                        _ => a.floormod(d)?,
                    };
                    (r, format!("{an}.{which}({dn})"))
                }
                "shift" => {
                    let bits = dt.bits() as i128;
                    let (s, sn): (Operand, String) = match &partner {
                        Some(p) if c.chance(50) => (
                            p.and(Scalar::Int(bits - 1))?.into(),
                            format!("{bname} & {}", bits - 1),
                        ),
                        _ => {
                            let v = c.below(bits as usize) as i128;
                            (Operand::Scalar(Scalar::Int(v)), v.to_string())
                        }
                    };
                    let left = c.chance(50);
                    let r = if left { a.shl(s)? } else { a.shr(s)? };
                    (
                        r,
                        format!("{an}.{}({sn})", if left { "shl" } else { "shr" }),
                    )
                }
                _ => {
                    let r = match op {
                        "add" => a.add(b)?,
                        "sub" => a.sub(b)?,
                        "mul" => a.mul(b)?,
                        "maximum" => a.maximum(b)?,
                        "minimum" => a.minimum(b)?,
                        "lt" => a.lt(b)?,
                        "eq" => a.eq(b)?,
                        "ne" => a.ne(b)?,
                        "and" => a.and(b)?,
                        "or" => a.or(b)?,
                        _ => a.xor(b)?,
                    };
                    (r, format!("{an}.{op}({bname})"))
                }
            }
        } else {
            let mut ops = vec![
                "add", "sub", "mul", "maximum", "minimum", "lt", "eq", "ne", "fdiv", "div",
                "mulacc",
            ];
            if self.cfg.transcendental {
                ops.push("pow");
            }
            let op = c.pick(&ops);
            let r = match op {
                "add" => a.add(b)?,
                "sub" => a.sub(b)?,
                "mul" => a.mul(b)?,
                "maximum" => a.maximum(b)?,
                "minimum" => a.minimum(b)?,
                "lt" => a.lt(b)?,
                "eq" => a.eq(b)?,
                "ne" => a.ne(b)?,
                "fdiv" => a.fdiv(b)?,
                "div" => a.div(b)?,
                "pow" => a.pow(b)?,
                _ => {
                    let lit2 = self.literal(c, dt);
                    a.mulacc(b, lit2)?
                }
            };
            (r, format!("{an}.{op}({bname})"))
        };
        Ok(Some(r))
    }

    fn where_(&mut self, c: &mut Choices) -> R<Made> {
        let a = self.pool[self.pick(c)].clone();
        let bools: Vec<Tensor> = self
            .pool
            .iter()
            .filter(|t| t.dtype() == Bool && t.device() == a.device())
            .cloned()
            .collect();
        let (cond, cn) = if !bools.is_empty() && c.chance(60) {
            let t = bools[c.below(bools.len())].clone();
            let n = self.name(&t);
            (t, n)
        } else {
            let x = self.pool[self.pick(c)].clone();
            if x.device() != a.device() {
                return Ok(None);
            }
            let lit = self.literal(c, x.dtype());
            let n = format!("{}.lt({lit:?})", self.name(&x));
            (x.lt(lit)?, n)
        };
        let b: Operand = match self.partner(c, &a, a.dtype()) {
            Some(p) => p.into(),
            None => Operand::Scalar(self.literal(c, a.dtype())),
        };
        let r = cond.where_(&a, b)?;
        let an = self.name(&a);
        Ok(Some((r, format!("{cn}.where({an}, …)"))))
    }

    fn cast(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        let name = self.name(&t);
        let mut targets = self.cfg.dtypes.clone();
        targets.push(Bool);
        let to = c.pick(&targets);
        let from = t.dtype();
        let src = if from.is_float() && (to.is_int()) {
            // Clamp first so that the conversion is defined (NaN still is not).
            let (lo, hi) = if to.is_signed_int() {
                (-100.0, 100.0)
            } else {
                (0.0, 100.0)
            };
            t.maximum(lo)?.minimum(hi)?
        } else {
            t.clone()
        };
        let r = src.cast(to)?;
        Ok((r.id() != t.id()).then(|| (r, format!("{name}.cast({to})"))))
    }

    fn bitcast(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        let name = self.name(&t);
        let from = t.dtype();
        let same: Vec<DType> = DType::ALL
            .iter()
            .copied()
            .filter(|d| d.bits() == from.bits() && *d != from && !d.is_bool() && !from.is_bool())
            .collect();
        if same.is_empty() {
            return Ok(None);
        }
        let to = c.pick(&same);
        Ok(Some((t.bitcast(to)?, format!("{name}.bitcast({to})"))))
    }

    /// A random re-factorization of `n` into `rank` axes.
    fn factor(&self, c: &mut Choices, n: usize, rank: usize) -> Vec<usize> {
        let mut primes = vec![];
        let (mut m, mut p) = (n, 2);
        while m > 1 {
            if m % p == 0 {
                primes.push(p);
                m /= p;
            } else {
                p += 1;
            }
        }
        let rank = rank.max(1);
        let mut s = vec![1usize; rank];
        for q in primes {
            s[c.below(rank)] *= q;
        }
        s
    }

    fn movement(&mut self, c: &mut Choices, t: &Tensor) -> R<Made> {
        let name = self.name(t);
        let s = t.shape();
        let nd = s.len();
        let max = self.cfg.max_elements;
        let what = c.below(6);
        let r = match what {
            0 => {
                let rank = 1 + c.below(self.cfg.max_rank.max(1));
                let new = self.factor(c, numel(&s), rank);
                (t.reshape(&new)?, format!("{name}.reshape({new:?})"))
            }
            1 => {
                let mut perm: Vec<usize> = (0..nd).collect();
                for i in (1..nd).rev() {
                    perm.swap(i, c.below(i + 1));
                }
                (t.permute(&perm)?, format!("{name}.permute({perm:?})"))
            }
            2 => {
                let pads: Vec<(usize, usize)> = (0..nd)
                    .map(|_| {
                        if c.chance(50) {
                            (c.below(3), c.below(3))
                        } else {
                            (0, 0)
                        }
                    })
                    .collect();
                let grown: usize = s.iter().zip(&pads).map(|(d, p)| d + p.0 + p.1).product();
                if grown > max {
                    return Ok(None);
                }
                (t.pad(&pads)?, format!("{name}.pad({pads:?})"))
            }
            3 => {
                let ranges: Vec<(usize, usize)> = s
                    .iter()
                    .map(|&d| {
                        let a = c.below(d.max(1));
                        let b = a + 1 + c.below(d - a);
                        (a, b.min(d))
                    })
                    .collect();
                (t.shrink(&ranges)?, format!("{name}.shrink({ranges:?})"))
            }
            4 => {
                let axes: Vec<usize> = (0..nd).filter(|_| c.chance(50)).collect();
                (t.flip(&axes)?, format!("{name}.flip({axes:?})"))
            }
            _ => {
                let mut new = s.clone();
                let ones: Vec<usize> = (0..nd).filter(|&i| s[i] == 1).collect();
                if !ones.is_empty() && c.chance(60) {
                    new[ones[c.below(ones.len())]] = 2 + c.below(3);
                } else {
                    new.insert(0, 2 + c.below(2));
                }
                if numel(&new) > max || new.len() > self.cfg.max_rank + 1 {
                    return Ok(None);
                }
                (t.expand(&new)?, format!("{name}.expand({new:?})"))
            }
        };
        Ok(Some(r))
    }

    /// A non-contiguous view (permute, shrink or flip) reshaped: index arithmetic with
    /// `flat / stride % dim`.
    fn view_chain(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        let name = self.name(&t);
        let s = t.shape();
        if s.len() < 2 && !c.chance(30) {
            // Make some rank first.
            let new = self.factor(c, numel(&s), 2);
            let r = t.reshape(&new)?;
            return self.view_then_reshape(c, &r, &format!("{name}.reshape({new:?})"));
        }
        self.view_then_reshape(c, &t, &name)
    }

    fn view_then_reshape(&mut self, c: &mut Choices, t: &Tensor, name: &str) -> R<Made> {
        let s = t.shape();
        let nd = s.len();
        let (v, vn) = match c.below(3) {
            0 => {
                let mut perm: Vec<usize> = (0..nd).collect();
                perm.rotate_left(1.min(nd));
                if nd > 2 && c.chance(50) {
                    perm.swap(0, nd - 1);
                }
                (t.permute(&perm)?, format!("{name}.permute({perm:?})"))
            }
            1 => {
                let ranges: Vec<(usize, usize)> = s
                    .iter()
                    .map(|&d| {
                        if d > 1 && c.chance(60) {
                            (c.below(2).min(d - 1), d)
                        } else {
                            (0, d)
                        }
                    })
                    .collect();
                (t.shrink(&ranges)?, format!("{name}.shrink({ranges:?})"))
            }
            _ => {
                let axes: Vec<usize> = (0..nd).filter(|_| c.chance(60)).collect();
                (t.flip(&axes)?, format!("{name}.flip({axes:?})"))
            }
        };
        let n = v.numel();
        let rank = 1 + c.below(3);
        let new = if c.chance(50) {
            vec![n]
        } else {
            self.factor(c, n, rank)
        };
        let r = v.reshape(&new)?;
        Ok(Some((r, format!("{vn}.reshape({new:?})"))))
    }

    fn reduce(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        let name = self.name(&t);
        let nd = t.ndim();
        if nd == 0 {
            return Ok(None);
        }
        let mut axes: Vec<usize> = (0..nd).filter(|_| c.chance(50)).collect();
        if axes.is_empty() {
            axes.push(c.below(nd));
        }
        let keep = c.chance(30);
        let op = if t.dtype().is_bool() {
            "max"
        } else {
            c.pick(&["sum", "max", "min", "prod", "sum"])
        };
        let r = match (op, keep) {
            ("sum", false) => t.sum(&axes)?,
            ("sum", true) => t.sum_keepdim(&axes)?,
            ("max", false) => t.max(&axes)?,
            ("max", true) => t.max_keepdim(&axes)?,
            ("min", false) => t.min(&axes)?,
            ("min", true) => t.min_keepdim(&axes)?,
            ("prod", false) => t.prod(&axes)?,
            _ => t.prod_keepdim(&axes)?,
        };
        Ok(Some((
            r,
            format!(
                "{name}.{op}({axes:?}{})",
                if keep { ", keepdim" } else { "" }
            ),
        )))
    }

    fn copy(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        let name = self.name(&t);
        let dev = self.device(c);
        let always = c.chance(50);
        let r = if always && !matches!(t.device(), Some(DeviceSpec::Multi(_))) {
            t.copy_to(dev)?
        } else {
            t.to(dev)?
        };
        Ok((r.id() != t.id())
            .then(|| (r, format!("{name}.to({dev}) from {}", fmt_dev(&t.device())))))
    }

    fn assign(&mut self, c: &mut Choices) -> R<Made> {
        let i = self.pick(c);
        let mut target = self.pool[i].clone();
        let name = self.name(&target);
        let s = target.shape();
        let slice = !s.is_empty() && c.chance(50);
        let ranges: Vec<(usize, usize)> = s
            .iter()
            .map(|&d| {
                if slice {
                    let a = c.below(d);
                    (a, a + 1 + c.below(d - a))
                } else {
                    (0, d)
                }
            })
            .collect();
        let want: Vec<usize> = ranges.iter().map(|r| r.1 - r.0).collect();
        let dt = target.dtype();
        let cands: Vec<Tensor> = self
            .pool
            .iter()
            .filter(|t| {
                t.dtype() == dt
                    && t.id() != target.id()
                    && broadcast(&t.shape(), &want).is_some_and(|b| b == want)
            })
            .cloned()
            .collect();
        let (value, vn): (Operand, String) = if !cands.is_empty() && c.chance(70) {
            let v = cands[c.below(cands.len())].clone();
            let n = self.name(&v);
            (v.into(), n)
        } else {
            let lit = self.literal(c, dt);
            (Operand::Scalar(lit), format!("{lit:?}"))
        };
        let r = if slice {
            target.assign_slice(&ranges, value)?
        } else {
            target.assign(value)?
        };
        let what = if slice {
            format!("{name}[{ranges:?}] = {vn}")
        } else {
            format!("{name}.assign({vn})")
        };
        Ok(Some((r, what)))
    }

    fn multi(&mut self, c: &mut Choices) -> R<Made> {
        let t = self.pool[self.pick(c)].clone();
        if !matches!(t.device(), Some(DeviceSpec::Single(_))) {
            return Ok(None);
        }
        let name = self.name(&t);
        let n = 2 + c.below(2);
        let devices: Vec<Device> = (0..n as u32).map(Device::cpu).collect();
        let s = t.shape();
        let axes: Vec<usize> = (0..s.len()).filter(|&a| s[a].is_multiple_of(n)).collect();
        let axis = if !axes.is_empty() && c.chance(70) {
            Some(axes[c.below(axes.len())])
        } else {
            None
        };
        let m = t.shard(&devices, axis)?;
        let (r, what) = match c.below(3) {
            0 => match axis {
                Some(a) => (
                    m.sum(&[a])?,
                    format!("{name}.shard({n}, {axis:?}).sum([{a}])"),
                ),
                None => (m.add(&m)?, format!("{name}.shard({n}, None).add(self)")),
            },
            1 => (
                m.mul(&m)?.to(Device::CPU)?,
                format!("({name}.shard({n}, {axis:?}))².to(CPU)"),
            ),
            _ => (m.clone(), format!("{name}.shard({n}, {axis:?})")),
        };
        Ok(Some((r, what)))
    }
}

#[cfg(all(test, feature = "testkit"))]
mod tests {
    use super::*;
    use crate::gen::rules::seeded_runner;
    use proptest::strategy::ValueTree;
    use uopkit_interp::ir::Op;

    #[test]
    fn every_recipe_builds_and_the_oracle_runs_most() {
        let cfg = TensorConfig::default();
        let mut runner = seeded_runner(1, 42, 0);
        let s = tensor_case(cfg.clone());
        let (mut ok, mut nodes) = (0, 0);
        let mut ops = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let g = s.new_tree(&mut runner).unwrap().current();
            nodes += g.case.graph.len();
            ops.extend(g.case.graph.iter().map(|n| n.op));
            if crate::run::run_oracle(&g.case).is_ok() {
                ok += 1;
            }
        }
        assert!(
            ok > 270,
            "{ok} of 300 generated cases run through the oracle"
        );
        for op in [
            Op::PERMUTE,
            Op::RESHAPE,
            Op::SHRINK,
            Op::PAD,
            Op::FLIP,
            Op::EXPAND,
            Op::REDUCE,
            Op::CAST,
            Op::COPY,
            Op::STORE,
            Op::AFTER,
            Op::WHERE,
        ] {
            assert!(ops.contains(&op), "no {op} in 300 programs: {ops:?}");
        }
        assert!(nodes / 300 >= 5, "{nodes}");
    }

    #[test]
    fn generation_is_deterministic() {
        let draw = || {
            let mut runner = seeded_runner(1, 99, 0);
            let s = tensor_case(TensorConfig::default());
            (0..50)
                .map(|_| {
                    s.new_tree(&mut runner)
                        .unwrap()
                        .current()
                        .case
                        .to_canonical_string()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(), draw());
    }

    #[test]
    fn the_empty_recipe_is_one_buffer() {
        let g = build(&Recipe::default(), &TensorConfig::default());
        assert_eq!(g.case.graph.len(), 1);
        assert_eq!(g.case.graph[0].op, Op::BUFFER);
        assert!(crate::run::run_oracle(&g.case).is_ok());
    }

    #[test]
    fn multi_device_programs_run_on_the_oracle() {
        let cfg = TensorConfig {
            multi_device: true,
            ..TensorConfig::default()
        };
        let mut runner = seeded_runner(1, 7, 0);
        let s = tensor_case(cfg);
        let mut multi = 0;
        for _ in 0..200 {
            let g = s.new_tree(&mut runner).unwrap().current();
            if g.case.graph.iter().any(|n| {
                matches!(n.op, Op::MSTACK | Op::ALLREDUCE) || (n.op == Op::COPY && n.arg.is_array())
            }) {
                multi += 1;
                let r = crate::run::run_oracle(&g.case);
                assert!(
                    r.is_ok() || matches!(r, Err(crate::run::RunError::Oracle(_))),
                    "{g:?}"
                );
            }
        }
        assert!(multi > 10, "{multi}");
    }
}
