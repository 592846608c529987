//! Comparing a computed value with a case's expectation (the oracle trial) or a backend's value
//! with the oracle's (backend trials), under the output's comparison mode:
//!
//! * `exact` — same bits (+0 and −0 differ); NaN per the output's `nan` policy;
//! * `ulp(n)` — at most n steps apart on the dtype's ordered line (`interp::bounds::ulp`);
//! * `bounded` — exact against the case's literals; a backend may land anywhere inside the
//!   oracle-derived bound for its allowances (`interp::bounds`), exact where no bound applies;
//! * `either` / `either_output` — one of a set of allowed values per element / whole outputs.
//!
//! `docs/comparison.md` is the prose version. Reports are in [`report`].

mod either;
pub mod report;

use serde_json::Value as Json;
use uopkit_interp::bounds::{self, ulp, Bounds, NodeBounds, Tolerances, Why};
use uopkit_interp::eval::{Column, Compact, Data, Elem, Value};
use uopkit_interp::ir::{DType, NodeId};
use uopkit_interp::scalar::{literal, round};

use crate::allowances::Allowances;
use crate::case::{Case, Compare, NanPolicy, Output};
use crate::run::{self, OracleRun};

pub use report::Histogram;

/// What one element was allowed to be.
#[derive(Clone, Debug, PartialEq)]
pub enum Limit {
    /// The reference's bits.
    Exact,
    /// Within n ULP of the reference.
    Ulp(u64),
    /// A value inside [lo, hi] (reals; compared as numbers).
    Range { lo: f64, hi: f64 },
    /// A bound applies but could not be derived: compared exactly.
    Unbounded(Why),
    /// The reference or one of this many other allowed values.
    OneOf(usize),
    /// The whole output had to equal the reference or one of this many alternatives.
    Outputs(usize),
}

/// One element that is not allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Device component (0 for a single-device value).
    pub component: usize,
    pub index: Vec<usize>,
    /// The reference's bits: the case's literal (oracle trial) or the oracle's value.
    pub expected: u64,
    pub actual: u64,
    /// ULP distance between expected and actual (None: a NaN is involved).
    pub ulp: Option<u64>,
    pub limit: Limit,
}

/// What the values were compared against.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The case's `expect` literals.
    Expected,
    /// The oracle's value.
    Oracle,
}

/// The result of comparing one output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputDiff {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub total: usize,
    /// Number of device components (1 for a single-device value).
    pub components: usize,
    /// Every element that is not allowed, in index order.
    pub mismatches: Vec<Mismatch>,
    /// The mode the comparison used.
    pub mode: Compare,
    pub nan: NanPolicy,
    pub reference: Reference,
    /// Where the mode came from when not from the case (a manifest override and its reason).
    pub origin: Option<String>,
    /// The allowances that widened the bound (`bounded`), in words.
    pub allowances: Vec<String>,
    /// The backend manifest's summary, when a backend was compared.
    pub manifest: Option<String>,
    /// Distribution of ULP distances over all elements (`ulp` and `bounded` modes).
    pub histogram: Option<Histogram>,
    /// `either_output`: the alternative that came closest and how many elements it misses.
    pub closest_alternative: Option<(usize, usize)>,
    /// Elements whose bits differ from the reference's but that the mode allows (a `ulp`
    /// distance, a bound, another allowed value; two NaNs under `nan: any` do not count).
    pub deviating: usize,
    /// Of `deviating`, the NaNs with other bits that only the backend manifest's
    /// `nan_bits: any` accepts, and that manifest (`nan_bits any (the tinygrad-CPU manifest)`).
    pub nan_widened: usize,
    pub nan_origin: Option<String>,
}

/// Expected bits per component, parsed from the output's literals.
pub fn expected_bits(
    out: &Output,
    dt: DType,
    multi: Option<usize>,
) -> Result<Vec<Vec<u64>>, String> {
    let numel: usize = out.shape.iter().product();
    let parse_list = |v: &Json| -> Result<Vec<u64>, String> {
        let arr = v
            .as_array()
            .ok_or_else(|| format!("expected a list of {numel} literals, found {v}"))?;
        if arr.len() != numel {
            return Err(format!(
                "expect has {} elements, shape {:?} has {numel}",
                arr.len(),
                out.shape
            ));
        }
        arr.iter()
            .enumerate()
            .map(|(i, x)| literal::parse(dt, x).map_err(|e| format!("expect element {i}: {e}")))
            .collect()
    };
    match multi {
        None => Ok(vec![parse_list(&out.expect)?]),
        Some(ndev) => {
            let arr = out
                .expect
                .as_array()
                .filter(|a| a.len() == ndev && a.iter().all(|x| x.is_array()))
                .ok_or_else(|| {
                    format!("a multi-device output expects one list per device ({ndev} lists)")
                })?;
            arr.iter().map(parse_list).collect()
        }
    }
}

fn is_nan(dt: DType, bits: u64) -> bool {
    dt.is_float() && round::is_nan(dt, bits)
}

fn multi_of(v: &Value) -> Option<usize> {
    match &v.data {
        Data::Multi(c) => Some(c.len()),
        Data::Single(_) => None,
    }
}

fn bits_of(v: &Value, name: &str, what: &str) -> Result<Vec<Vec<u64>>, String> {
    v.data
        .components()
        .iter()
        .map(|c| {
            c.iter()
                .enumerate()
                .map(|(i, e)| match *e {
                    Elem::Bits(b) => Ok(b),
                    Elem::Uninit { .. } => Err(format!("output '{name}' element {i} {what}")),
                })
                .collect()
        })
        .collect()
}

/// Compares `value` (the oracle's) with the output's expectation. `bounded` is exact here: the
/// case's literals are the canonical evaluation order.
pub fn compare(out: &Output, value: &Value) -> Result<OutputDiff, String> {
    if value.shape != out.shape {
        return Err(format!(
            "output '{}': the case says shape {:?}, the node has shape {:?}",
            out.name, out.shape, value.shape
        ));
    }
    let multi = multi_of(value);
    let expected = expected_bits(out, value.dtype, multi)
        .map_err(|e| format!("output '{}': {e}", out.name))?;
    let actual = bits_of(value, &out.name, "was never written")?;
    let alts = either::alternatives(out, &out.compare, value.dtype, multi)?;
    let policy = Policy {
        mode: &out.compare,
        nan: out.nan,
        own_nan: out.nan,
        bounds: None,
        alts,
    };
    Ok(diff(
        out,
        value.dtype,
        &expected,
        actual.as_slice(),
        &policy,
        Reference::Expected,
    ))
}

/// [`compare`] for a value in the oracle's compact form ([`uopkit_interp::eval::Evaluation::output_compact`]):
/// the same result and the same errors, without building the value's public form (16 bytes
/// per element) or a list of its bits (8 bytes per element).
pub fn compare_compact(out: &Output, value: &Compact) -> Result<OutputDiff, String> {
    if value.shape != out.shape {
        return Err(format!(
            "output '{}': the case says shape {:?}, the node has shape {:?}",
            out.name, out.shape, value.shape
        ));
    }
    let multi = value.multi.then_some(value.comps.len());
    let expected = expected_bits(out, value.dtype, multi)
        .map_err(|e| format!("output '{}': {e}", out.name))?;
    // The public form has one component for a single-device value.
    let comps: &[std::rc::Rc<Column>] = if value.multi {
        &value.comps
    } else {
        &value.comps[..value.comps.len().min(1)]
    };
    for c in comps {
        if let Some((i, _)) = c.first_poison() {
            return Err(format!(
                "output '{}' element {i} was never written",
                out.name
            ));
        }
    }
    let alts = either::alternatives(out, &out.compare, value.dtype, multi)?;
    let policy = Policy {
        mode: &out.compare,
        nan: out.nan,
        own_nan: out.nan,
        bounds: None,
        alts,
    };
    Ok(diff(
        out,
        value.dtype,
        &expected,
        &ColumnBits(comps),
        &policy,
        Reference::Expected,
    ))
}

/// Per-component bits to compare, indexed (so that a compact value is read in place).
trait Bits {
    fn components(&self) -> usize;
    fn len(&self, c: usize) -> usize;
    fn get(&self, c: usize, i: usize) -> u64;
}

impl Bits for [Vec<u64>] {
    fn components(&self) -> usize {
        <[Vec<u64>]>::len(self)
    }
    fn len(&self, c: usize) -> usize {
        self[c].len()
    }
    fn get(&self, c: usize, i: usize) -> u64 {
        self[c][i]
    }
}

/// Columns known to hold no poison.
struct ColumnBits<'a>(&'a [std::rc::Rc<Column>]);

impl Bits for ColumnBits<'_> {
    fn components(&self) -> usize {
        self.0.len()
    }
    fn len(&self, c: usize) -> usize {
        self.0[c].len()
    }
    fn get(&self, c: usize, i: usize) -> u64 {
        match self.0[c].get(i) {
            Elem::Bits(b) => b,
            // Checked before: a column to compare holds no poison.
            Elem::Uninit { .. } => 0,
        }
    }
}

/// Compares a backend's value with the oracle's under the output's own mode; `bounded` without
/// bound data is exact (what a strict backend gets). See [`compare_with`] and [`check_outputs`].
pub fn compare_values(out: &Output, oracle: &Value, actual: &Value) -> Result<OutputDiff, String> {
    compare_with(out, &out.compare, oracle, actual, None)
}

/// Compares a backend's value with the oracle's under `mode` (the output's own, or a backend
/// override). For `bounded`, `bounds` are the oracle-derived bounds of the output's node
/// ([`oracle_bounds`]); None means no deviation is allowed.
pub fn compare_with(
    out: &Output,
    mode: &Compare,
    oracle: &Value,
    actual: &Value,
    bounds: Option<&NodeBounds>,
) -> Result<OutputDiff, String> {
    compare_with_nan(out, mode, out.nan, oracle, actual, bounds)
}

/// [`compare_with`] under NaN policy `nan` (a backend manifest's `nan_bits` may widen the
/// output's own): NaNs that only this widening accepts count as deviating.
pub fn compare_with_nan(
    out: &Output,
    mode: &Compare,
    nan: NanPolicy,
    oracle: &Value,
    actual: &Value,
    bounds: Option<&NodeBounds>,
) -> Result<OutputDiff, String> {
    if oracle.shape != actual.shape || oracle.dtype != actual.dtype {
        return Err(format!(
            "output '{}': the oracle gives {} {:?}, the backend {} {:?}",
            out.name, oracle.dtype, oracle.shape, actual.dtype, actual.shape
        ));
    }
    let (o, a) = (oracle.data.components(), actual.data.components());
    if o.len() != a.len() {
        return Err(format!(
            "output '{}': {} device components from the oracle, {} from the backend",
            out.name,
            o.len(),
            a.len()
        ));
    }
    let reference = bits_of(oracle, &out.name, "is undefined")?;
    let got = bits_of(actual, &out.name, "is undefined")?;
    let multi = multi_of(oracle);
    let mut alts = either::alternatives(out, mode, oracle.dtype, multi)?;
    if matches!(mode, Compare::Either(_) | Compare::EitherOutput(_)) {
        // The case's `expect` is itself one of the allowed values (the oracle matches it in
        // the oracle trial, but a backend is judged against the oracle).
        if let Ok(exp) = expected_bits(out, oracle.dtype, multi) {
            alts.push(
                exp.into_iter()
                    .map(|c| c.into_iter().map(Some).collect())
                    .collect(),
            );
        }
    }
    if let Some(b) = bounds {
        if b.comps.len() != reference.len()
            || b.comps
                .iter()
                .zip(&reference)
                .any(|(x, y)| x.len() != y.len())
        {
            return Err(format!(
                "output '{}': the bounds do not have the value's shape",
                out.name
            ));
        }
    }
    let policy = Policy {
        mode,
        nan,
        own_nan: out.nan,
        bounds: bounds.filter(|_| *mode == Compare::Bounded),
        alts,
    };
    let mut d = diff(
        out,
        oracle.dtype,
        &reference,
        got.as_slice(),
        &policy,
        Reference::Oracle,
    );
    if *mode == Compare::Bounded {
        d.allowances = bounds
            .map(|b| b.notes.iter().cloned().collect())
            .unwrap_or_default();
    }
    Ok(d)
}

/// The oracle-derived bounds of a case's outputs under a backend's tolerances.
pub fn oracle_bounds(
    case: &Case,
    oracle: &OracleRun,
    tol: &Tolerances,
) -> Result<(Bounds, Vec<NodeId>), String> {
    let roots: Vec<NodeId> = case
        .outputs
        .iter()
        .map(|o| oracle.loaded.arena(o.node))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let b = bounds::analyze(
        &oracle.loaded.graph,
        &oracle.verified,
        &oracle.evaluation,
        &roots,
        tol,
    )
    .map_err(|e| format!("bounds: {}", oracle.loaded.file_error(e)))?;
    Ok((b, roots))
}

/// Judges a backend's outputs against the oracle: each output in the mode the backend's
/// manifest gives it ([`Allowances::mode_for`]), `bounded` outputs within the bounds derived
/// from the manifest's allowances. `actual` has one entry per case output (None: the backend
/// produced no value). Ok with every diff when all pass, Err with the report otherwise.
pub fn check_outputs(
    case: &Case,
    case_name: &str,
    oracle: &OracleRun,
    actual: &[Option<Value>],
    allow: &Allowances,
) -> Result<Vec<OutputDiff>, String> {
    let mut report = String::new();
    let mut diffs = vec![];
    for judged in judge_outputs(case, case_name, oracle, actual, allow)? {
        match judged.diff {
            Ok(d) => {
                if !d.passed() {
                    report += &d.report(8);
                }
                diffs.push(d);
            }
            Err(e) => report += &format!("{e}\n"),
        }
    }
    if report.is_empty() {
        Ok(diffs)
    } else {
        Err(report)
    }
}

/// One output of a backend trial, judged ([`judge_outputs`]).
#[derive(Clone, Debug, PartialEq)]
pub struct JudgedOutput {
    /// The comparison, or why there is none (no value, wrong shape, …).
    pub diff: Result<OutputDiff, String>,
    /// ULP distances from the oracle over every element, in any comparison mode (None when
    /// the values cannot be compared element by element).
    pub distances: Option<Histogram>,
}

/// [`check_outputs`] as data: every output's comparison in case order (for reports that draw
/// them). Err only when the outputs cannot be judged at all.
pub fn judge_outputs(
    case: &Case,
    case_name: &str,
    oracle: &OracleRun,
    actual: &[Option<Value>],
    allow: &Allowances,
) -> Result<Vec<JudgedOutput>, String> {
    let values = run::output_values(case, oracle).map_err(|e| e.to_string())?;
    if actual.len() != case.outputs.len() {
        return Err(format!(
            "the backend gave {} outputs for the case's {}",
            actual.len(),
            case.outputs.len()
        ));
    }
    let modes: Vec<_> = case
        .outputs
        .iter()
        .map(|o| allow.mode_for(case_name, o))
        .collect();
    let bounds = if modes.iter().any(|m| m.compare == Compare::Bounded) {
        Some(oracle_bounds(case, oracle, &allow.tolerances())?)
    } else {
        None
    };
    let mut judged = vec![];
    for (k, ((out, ov), mode)) in case.outputs.iter().zip(values).zip(&modes).enumerate() {
        let Some(av) = &actual[k] else {
            judged.push(JudgedOutput {
                diff: Err(format!("output '{}' has no value on the backend", out.name)),
                distances: None,
            });
            continue;
        };
        let nb = bounds.as_ref().and_then(|(b, roots)| b.get(roots[k]));
        let nan = if moves_data_only(case, out.node) {
            out.nan
        } else {
            allow.nan_for(out)
        };
        let diff = compare_with_nan(out, &mode.compare, nan, ov, av, nb).map(|mut d| {
            if d.nan_widened > 0 {
                d.nan_origin = Some(format!("nan_bits any (the {} manifest)", allow.backend));
            }
            d.origin = mode
                .origin
                .map(|o| format!("{} manifest override: {}", allow.backend, o.reason));
            d.manifest = Some(allow.summary());
            d
        });
        let distances = diff.is_ok().then(|| distances(nan, ov, av)).flatten();
        judged.push(JudgedOutput { diff, distances });
    }
    Ok(judged)
}

/// Whether output node `node` is stored bits rather than an operation's result: a BITCAST, a
/// buffer's contents or a constant, through movement ops, copies and layout requests. A
/// manifest's `nan_bits: any` (for hardware that makes its own NaNs) does not apply there: moving
/// or reinterpreting bits must keep them.
fn moves_data_only(case: &Case, node: u64) -> bool {
    use uopkit_interp::ir::Op::*;
    let by_id = |id: u64| case.graph.iter().find(|n| n.id == id);
    let mut cur = by_id(node);
    // Bounded by the graph's size (a malformed cycle cannot loop forever).
    for _ in 0..=case.graph.len() {
        let Some(n) = cur else { return false };
        match n.op {
            BITCAST | BUFFER | CONST => return true,
            RESHAPE | PERMUTE | EXPAND | SHRINK | PAD | FLIP | CONTIGUOUS | DETACH | COPY => {
                cur = n.src.first().and_then(|&s| by_id(s));
            }
            _ => return false,
        }
    }
    false
}

/// The ULP distances between `reference` and `actual` over every element (same bits, or two
/// NaNs under the `any` policy, count as 0; a NaN against a number, or differing NaNs, as a
/// NaN mismatch). None when the shapes, dtypes or components differ or an element is
/// undefined.
pub fn distances(nan: NanPolicy, reference: &Value, actual: &Value) -> Option<Histogram> {
    if reference.dtype != actual.dtype || reference.shape != actual.shape {
        return None;
    }
    let dt = reference.dtype;
    let (r, a) = (reference.data.components(), actual.data.components());
    if r.len() != a.len() {
        return None;
    }
    let mut h = Histogram::default();
    for (rc, ac) in r.iter().zip(a) {
        if rc.len() != ac.len() {
            return None;
        }
        for (re, ae) in rc.iter().zip(ac) {
            let (Elem::Bits(e), Elem::Bits(x)) = (*re, *ae) else {
                return None;
            };
            let same = e == x || (nan == NanPolicy::Any && is_nan(dt, e) && is_nan(dt, x));
            h.add(if same {
                Some(0)
            } else {
                ulp::distance(dt, e, x)
            });
        }
    }
    Some(h)
}

/// The multi-index of flat index `i` in `shape` (row-major).
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for ax in (0..shape.len()).rev() {
        if shape[ax] > 0 {
            idx[ax] = i % shape[ax];
            i /= shape[ax];
        }
    }
    idx
}

/// Per alternative, per component, per element: an allowed value (None: none at that position).
type Alternatives = Vec<Vec<Vec<Option<u64>>>>;

struct Policy<'a> {
    mode: &'a Compare,
    nan: NanPolicy,
    /// The output's own NaN policy: a NaN accepted only under `nan` (a manifest's) deviates.
    own_nan: NanPolicy,
    bounds: Option<&'a NodeBounds>,
    alts: Alternatives,
}

impl Policy<'_> {
    fn same(&self, dt: DType, e: u64, a: u64) -> bool {
        e == a || (self.nan == NanPolicy::Any && is_nan(dt, e) && is_nan(dt, a))
    }

    /// Equal under the output's own NaN policy (not counted as a deviation).
    fn same_own(&self, dt: DType, e: u64, a: u64) -> bool {
        e == a || (self.own_nan == NanPolicy::Any && is_nan(dt, e) && is_nan(dt, a))
    }
}

fn diff(
    out: &Output,
    dt: DType,
    reference: &[Vec<u64>],
    actual: &(impl Bits + ?Sized),
    p: &Policy,
    kind: Reference,
) -> OutputDiff {
    let shape = out.shape.clone();
    let total = reference.iter().map(Vec::len).sum();
    let with_histogram = matches!(p.mode, Compare::Ulp(_) | Compare::Bounded);
    let mut histogram = with_histogram.then(Histogram::default);
    let mut mismatches = vec![];
    let mut deviating = 0;
    let mut nan_widened = 0;
    let mut closest_alternative = None;

    let whole_ok = match p.mode {
        Compare::EitherOutput(_) => {
            let misses = |alt: &[Vec<Option<u64>>]| -> usize {
                reference
                    .iter()
                    .take(actual.components())
                    .enumerate()
                    .zip(alt)
                    .map(|((c, r), x)| {
                        r.iter()
                            .take(actual.len(c))
                            .enumerate()
                            .zip(x)
                            .filter(|((i, r), x)| !p.same(dt, x.unwrap_or(**r), actual.get(c, *i)))
                            .count()
                    })
                    .sum()
            };
            let ref_misses: usize = reference
                .iter()
                .take(actual.components())
                .enumerate()
                .map(|(c, r)| {
                    r.iter()
                        .take(actual.len(c))
                        .enumerate()
                        .filter(|(i, r)| !p.same(dt, **r, actual.get(c, *i)))
                        .count()
                })
                .sum();
            let best = p
                .alts
                .iter()
                .enumerate()
                .map(|(k, alt)| (k, misses(alt)))
                .min_by_key(|&(_, m)| m);
            if ref_misses == 0 || best.is_some_and(|(_, m)| m == 0) {
                Some(true)
            } else {
                closest_alternative = best;
                Some(false)
            }
        }
        _ => None,
    };

    for (c, r) in reference.iter().take(actual.components()).enumerate() {
        for (i, &e) in r.iter().take(actual.len(c)).enumerate() {
            let x = actual.get(c, i);
            let d = ulp::distance(dt, e, x);
            if let Some(h) = histogram.as_mut() {
                h.add(if d.is_none() && p.same(dt, e, x) {
                    Some(0)
                } else {
                    d
                });
            }
            let (ok, limit) = match p.mode {
                Compare::Exact => (p.same(dt, e, x), Limit::Exact),
                Compare::Ulp(n) => (
                    p.same(dt, e, x) || d.is_some_and(|d| d <= *n),
                    Limit::Ulp(*n),
                ),
                Compare::Bounded => match p.bounds.map(|b| b.comps[c][i]) {
                    None | Some(bounds::Bound::Exact) => (p.same(dt, e, x), Limit::Exact),
                    Some(bounds::Bound::Unbounded(w)) => (p.same(dt, e, x), Limit::Unbounded(w)),
                    Some(bounds::Bound::Range(iv)) => {
                        let v = round::to_f64(dt, x);
                        (
                            p.same(dt, e, x) || (!v.is_nan() && iv.contains(v)),
                            Limit::Range {
                                lo: iv.lo,
                                hi: iv.hi,
                            },
                        )
                    }
                },
                Compare::Either(_) => {
                    let mut others: Vec<u64> = p
                        .alts
                        .iter()
                        .filter_map(|alt| alt[c][i])
                        .filter(|&o| o != e)
                        .collect();
                    others.sort_unstable();
                    others.dedup();
                    let ok = p.same(dt, e, x) || others.iter().any(|&o| p.same(dt, o, x));
                    (ok, Limit::OneOf(others.len()))
                }
                Compare::EitherOutput(_) => (
                    whole_ok == Some(true) || p.same(dt, e, x),
                    Limit::Outputs(p.alts.len()),
                ),
            };
            if ok && p.same(dt, e, x) && !p.same_own(dt, e, x) {
                nan_widened += 1;
            }
            if ok && !p.same_own(dt, e, x) {
                deviating += 1;
            }
            if !ok {
                mismatches.push(Mismatch {
                    component: c,
                    index: unravel(i, &shape),
                    expected: e,
                    actual: x,
                    ulp: d,
                    limit,
                });
            }
        }
    }
    OutputDiff {
        name: out.name.clone(),
        dtype: dt,
        shape,
        total,
        components: reference.len(),
        mismatches,
        mode: p.mode.clone(),
        nan: p.nan,
        reference: kind,
        origin: None,
        allowances: vec![],
        manifest: None,
        histogram,
        closest_alternative,
        deviating,
        nan_widened,
        nan_origin: None,
    }
}
