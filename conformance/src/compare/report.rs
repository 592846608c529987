//! Failure reports: the mode and where it came from, how many elements (and what share) are not
//! allowed, the worst few by multi-index with both values, their bits, their ULP distance and
//! what was allowed (the bound, and which allowances made it), and a ULP histogram for `ulp` and
//! `bounded` outputs.

use uopkit_interp::bounds::ulp;
use uopkit_interp::ir::DType;
use uopkit_interp::scalar::{literal, round};

use super::{Limit, Mismatch, OutputDiff, Reference};
use crate::case::Compare;

/// ULP distances in power-of-two buckets: 0, 1, 2, 3–4, 5–8, 9–16, …; plus elements where a NaN
/// stands against a number (or NaNs differ under the canonical policy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub buckets: Vec<u64>,
    pub nan: u64,
}

impl Histogram {
    pub fn bucket(d: u64) -> usize {
        match d {
            0 => 0,
            1 => 1,
            d => 1 + (64 - (d - 1).leading_zeros()) as usize,
        }
    }

    /// The distances bucket `k` holds, as text.
    pub fn label(k: usize) -> String {
        match k {
            0 => "0".into(),
            1 => "1".into(),
            2 => "2".into(),
            k if k >= 65 => format!(">{}", 1u128 << 63),
            k => format!("{}–{}", (1u128 << (k - 2)) + 1, 1u128 << (k - 1)),
        }
    }

    pub fn add(&mut self, d: Option<u64>) {
        match d {
            Some(d) => {
                let k = Self::bucket(d);
                if self.buckets.len() <= k {
                    self.buckets.resize(k + 1, 0);
                }
                self.buckets[k] += 1;
            }
            None => self.nan += 1,
        }
    }

    /// The highest non-empty bucket's distances in words (`3–4 ULP`), None when all are 0.
    pub fn worst_label(&self) -> Option<String> {
        let k = self
            .buckets
            .iter()
            .rposition(|&n| n > 0)
            .filter(|&k| k > 0)?;
        Some(format!("{} ULP", Self::label(k)))
    }

    /// How many elements were counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.nan
    }

    pub fn render(&self) -> String {
        let mut parts: Vec<String> = self
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{}: {n}", Self::label(k)))
            .collect();
        if self.nan > 0 {
            parts.push(format!("NaN mismatch: {}", self.nan));
        }
        parts.join(" | ")
    }
}

/// A named pattern of a mismatch, for triage.
pub fn classify(dt: DType, e: u64, a: u64) -> Option<&'static str> {
    if !dt.is_float() {
        return None;
    }
    let (en, an) = (round::is_nan(dt, e), round::is_nan(dt, a));
    let (ev, av) = (round::to_f64(dt, e), round::to_f64(dt, a));
    if en && an {
        Some("NaN payload or sign differs")
    } else if en || an {
        Some("NaN vs number")
    } else if ev == 0.0 && av == 0.0 {
        Some("signed zero")
    } else if ulp::is_subnormal(dt, e) && av == 0.0 {
        Some("subnormal flushed to zero")
    } else if ev.is_infinite() != av.is_infinite() {
        Some("infinity vs finite")
    } else {
        None
    }
}

fn value(dt: DType, bits: u64) -> String {
    let w = (dt.bits() as usize).div_ceil(4);
    format!("{} (0x{:0w$x})", literal::display(dt, bits), bits, w = w)
}

/// The dtype values inside [lo, hi], as text, and how far `a` lies outside them (in ULP).
fn range_text(dt: DType, lo: f64, hi: f64, a: u64) -> String {
    let (l, h) = (ulp::round_up(dt, lo), ulp::round_down(dt, hi));
    let show = |x: f64| {
        if x.is_infinite() && dt.float_format().is_some_and(|f| !f.has_inf) {
            format!("{x}")
        } else {
            literal::display(dt, round::from_f64(dt, x))
        }
    };
    let mut s = format!("allowed [{}, {}]", show(l), show(h));
    let av = round::to_f64(dt, a);
    if !av.is_nan() {
        let edge = if av < l { l } else { h };
        if edge.is_finite() {
            if let Some(d) = ulp::distance(dt, a, round::from_f64(dt, edge)) {
                s += &format!(", {d} ulp beyond");
            }
        }
    }
    s
}

impl OutputDiff {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// For a passing output some of whose elements differ from the reference: what allowed
    /// them, in words (`output 'y': 3 of 16 elements differ from the oracle, allowed by …`).
    /// None when every element is bit-identical or the output fails.
    pub fn allowance(&self) -> Option<String> {
        if !self.passed() || self.deviating == 0 {
            return None;
        }
        let by = match &self.mode {
            Compare::Bounded if !self.allowances.is_empty() => {
                format!("the bound from {}", self.allowances.join("; "))
            }
            Compare::Ulp(n) => {
                let worst = self
                    .histogram
                    .as_ref()
                    .and_then(Histogram::worst_label)
                    .map(|w| format!(", worst {w}"))
                    .unwrap_or_default();
                format!("ulp({n}){worst}")
            }
            m => m.label(),
        };
        let source = match &self.origin {
            Some(o) => format!(" ({o})"),
            None => " (the case's comparison mode)".into(),
        };
        let (by, source) = match &self.nan_origin {
            Some(n) if self.nan_widened == self.deviating => (n.clone(), String::new()),
            Some(n) => (
                format!(
                    "{by}{source}, {} of them NaNs with other bits by {n}",
                    self.nan_widened
                ),
                String::new(),
            ),
            None => (by, source),
        };
        Some(format!(
            "output '{}': {} of {} elements differ from the {}, allowed by {by}{source}",
            self.name,
            self.deviating,
            self.total,
            match self.reference {
                Reference::Expected => "expected values",
                Reference::Oracle => "oracle",
            }
        ))
    }

    /// The mismatches, worst first: NaN-vs-number first, then by descending ULP distance, then in
    /// index order.
    pub fn worst(&self) -> Vec<&Mismatch> {
        let mut v: Vec<&Mismatch> = self.mismatches.iter().collect();
        v.sort_by(|a, b| {
            let key = |m: &Mismatch| std::cmp::Reverse(m.ulp.map_or(u128::MAX, u128::from));
            key(a)
                .cmp(&key(b))
                .then_with(|| (a.component, &a.index).cmp(&(b.component, &b.index)))
        });
        v
    }

    /// The failure text (empty lines are never produced; each line ends with a newline).
    pub fn report(&self, limit: usize) -> String {
        let against = match self.reference {
            Reference::Expected => "expected",
            Reference::Oracle => "oracle",
        };
        let mode = match (&self.mode, self.reference) {
            (Compare::Bounded, Reference::Expected) => {
                "bounded: exact against the literals".to_string()
            }
            (m, Reference::Oracle) => format!("{} vs the oracle", m.label()),
            (m, _) => m.label(),
        };
        let share = if self.total > 0 {
            100.0 * self.mismatches.len() as f64 / self.total as f64
        } else {
            0.0
        };
        let mut s = format!(
            "output '{}' ({} {:?}, {mode}): {} of {} elements differ ({share:.2}%)\n",
            self.name,
            self.dtype,
            self.shape,
            self.mismatches.len(),
            self.total
        );
        if let Some(o) = &self.origin {
            s += &format!("  mode from {o}\n");
        }
        match (&self.mode, self.reference) {
            (Compare::Bounded, Reference::Oracle) if !self.allowances.is_empty() => {
                s += &format!("  bound from: {}\n", self.allowances.join("; "));
            }
            (Compare::Bounded, Reference::Oracle) => {
                let m = self
                    .manifest
                    .clone()
                    .unwrap_or_else(|| "no allowances were given".into());
                s += &format!("  no allowance widens this output ({m}): compared exactly\n");
            }
            (Compare::Exact, Reference::Oracle) => {
                if let Some(m) = &self.manifest {
                    s += &format!("  exact output: no allowance applies ({m})\n");
                }
            }
            _ => {}
        }
        if let Some((k, m)) = self.closest_alternative {
            s += &format!("  matches neither the reference nor any alternative (closest: alternative {k}, {m} element(s) off)\n");
        }
        let worst = self.worst();
        if !worst.is_empty() {
            s += &format!("  worst {} by ULP distance:\n", worst.len().min(limit));
        }
        for m in worst.iter().take(limit) {
            s += &format!(
                "  {}{:?}: {against} {}, got {}",
                if self.components > 1 {
                    format!("device {} ", m.component)
                } else {
                    String::new()
                },
                m.index,
                value(self.dtype, m.expected),
                value(self.dtype, m.actual),
            );
            if let Some(d) = m.ulp {
                s += &format!(", {d} ulp");
            }
            match &m.limit {
                Limit::Exact => {}
                Limit::Ulp(n) => s += &format!("; allowed {n} ulp"),
                Limit::Range { lo, hi } => {
                    s += &format!("; {}", range_text(self.dtype, *lo, *hi, m.actual))
                }
                Limit::Unbounded(w) => {
                    s += &format!("; no bound ({}): compared exactly", w.describe())
                }
                Limit::OneOf(n) => s += &format!("; allowed: the {against} value or {n} other(s)"),
                Limit::Outputs(n) => s += &format!("; {n} alternative output(s)"),
            }
            if let Some(c) = classify(self.dtype, m.expected, m.actual) {
                s += &format!(" [{c}]");
            }
            s += "\n";
        }
        if self.mismatches.len() > limit {
            s += &format!("  … and {} more\n", self.mismatches.len() - limit);
        }
        if let Some(h) = &self.histogram {
            s += &format!("  ULP histogram ({} elements): {}\n", h.count(), h.render());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        let b: Vec<usize> = [0u64, 1, 2, 3, 4, 5, 8, 9, 16, 17]
            .iter()
            .map(|&d| Histogram::bucket(d))
            .collect();
        assert_eq!(b, vec![0, 1, 2, 3, 3, 4, 4, 5, 5, 6]);
        assert_eq!(Histogram::label(3), "3–4");
        assert_eq!(Histogram::label(5), "9–16");
        assert_eq!(Histogram::bucket(u64::MAX), 65);
    }
}
