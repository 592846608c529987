//! The scoreboard: what works per op × dtype × backend, from one run's verdicts.
//!
//! A case counts for every (op, dtype) its graph computes — each node's op and result dtype,
//! the storage and constant nodes (BUFFER, PARAM, CONST) left out — so a row says how the
//! cases that exercise that op at that dtype fared on each backend. A cell is the worst
//! verdict among them, in this order: `fail` (a failure, an unexpected pass or an invalid
//! case), `xfail` (listed in `manifests/xfail.json`, with the reason), `skip` (with the
//! reason; only when nothing passed), `allowed` (passed, but some elements differ from the
//! oracle's bits within an allowance — which one is the reason), `pass`; with the counts. Rows are sorted by op name, then dtype name; backends
//! keep the run's order: the same run gives the same text.

use std::collections::{BTreeMap, BTreeSet};

use uopkit_interp::ir::{DType, Op};

use super::{Suite, TrialResult, Verdict};

/// The state of one cell, worst first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum CellState {
    Fail,
    XFail,
    Skip,
    /// Passed within an allowance.
    Allowed,
    Pass,
    /// No case of this row ran on the backend.
    #[default]
    None,
}

impl CellState {
    pub fn label(self) -> &'static str {
        match self {
            CellState::Fail => "fail",
            CellState::XFail => "xfail",
            CellState::Skip => "skip",
            CellState::Allowed => "allowed",
            CellState::Pass => "pass",
            CellState::None => "-",
        }
    }
}

/// One backend's verdicts on the cases of one row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    /// Passed bit for bit (or as the case's expectations say).
    pub pass: usize,
    /// Passed within an allowance.
    pub allowed: usize,
    pub fail: usize,
    pub xfail: usize,
    pub skip: usize,
    /// The reason (or first failure line) of the worst verdict, from the first case that had it.
    pub reason: Option<String>,
    /// That case's name.
    pub case: Option<String>,
    /// The first reason (and case) of each state.
    reasons: BTreeMap<CellState, (Option<String>, String)>,
}

impl Cell {
    pub fn state(&self) -> CellState {
        if self.fail > 0 {
            CellState::Fail
        } else if self.xfail > 0 {
            CellState::XFail
        } else if self.skip > 0 && self.pass + self.allowed == 0 {
            CellState::Skip
        } else if self.allowed > 0 {
            CellState::Allowed
        } else if self.pass > 0 {
            CellState::Pass
        } else {
            CellState::None
        }
    }

    /// `pass 12`, `pass 1, skip 3`, `allowed 2/12`, `fail 1/13`, `xfail 1/2`, `skip 4/4`.
    pub fn text(&self) -> String {
        let total = self.pass + self.allowed + self.fail + self.xfail + self.skip;
        match self.state() {
            CellState::Pass if self.skip > 0 => format!("pass {}, skip {}", self.pass, self.skip),
            CellState::Pass => format!("pass {}", self.pass),
            CellState::Allowed if self.skip > 0 => format!(
                "allowed {}/{}, skip {}",
                self.allowed,
                total - self.skip,
                self.skip
            ),
            CellState::None => "-".into(),
            s => {
                let n = match s {
                    CellState::Fail => self.fail,
                    CellState::XFail => self.xfail,
                    CellState::Allowed => self.allowed,
                    _ => self.skip,
                };
                format!("{} {n}/{total}", s.label())
            }
        }
    }

    fn add(&mut self, case: &str, v: &Verdict) {
        let (state, why) = match v {
            Verdict::Pass => (CellState::Pass, None),
            Verdict::Allowed(by) => (CellState::Allowed, Some(by.clone())),
            Verdict::Skip(r) => (CellState::Skip, Some(r.clone())),
            Verdict::XFail { reason, .. } => (CellState::XFail, Some(reason.clone())),
            other => (
                CellState::Fail,
                other
                    .detail()
                    .map(|d| d.lines().next().unwrap_or("").to_string()),
            ),
        };
        match state {
            CellState::Pass => self.pass += 1,
            CellState::Allowed => self.allowed += 1,
            CellState::Skip => self.skip += 1,
            CellState::XFail => self.xfail += 1,
            _ => self.fail += 1,
        }
        if state != CellState::Pass {
            self.reasons
                .entry(state)
                .or_insert_with(|| (why, case.to_string()));
        }
        // The reason shown is the one of the state the cell shows (a passing cell with skips:
        // the skip's).
        let state = self.state();
        let shown = self
            .reasons
            .get(&state)
            .or_else(|| (state == CellState::Pass).then(|| self.reasons.get(&CellState::Skip))?);
        self.reason = shown.and_then(|(r, _)| r.clone());
        self.case = shown.map(|(_, c)| c.clone());
    }
}

/// One op at one dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub op: String,
    pub dtype: String,
    /// How many cases exercise it.
    pub cases: usize,
    /// One per backend, in the run's order.
    pub cells: Vec<Cell>,
}

/// The whole table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scoreboard {
    pub backends: Vec<String>,
    pub rows: Vec<Row>,
}

/// The scoreboard of a run.
pub fn scoreboard(suite: &Suite, results: &[TrialResult]) -> Scoreboard {
    let backends: Vec<String> = suite
        .backends
        .iter()
        .map(|s| s.backend.name().to_string())
        .collect();
    // (op, dtype) → the cases that compute it.
    let mut keys: BTreeMap<(String, String), BTreeSet<usize>> = BTreeMap::new();
    for (i, entry) in suite.cases.iter().enumerate() {
        let Ok(case) = &entry.case else { continue };
        for n in &case.graph {
            if matches!(n.op, Op::BUFFER | Op::PARAM | Op::CONST) {
                continue;
            }
            let dt = if n.dtype == DType::Void {
                "void".to_string()
            } else {
                n.dtype.name().to_string()
            };
            keys.entry((n.op.name().to_string(), dt))
                .or_default()
                .insert(i);
        }
    }
    // (case, backend) → verdict.
    let verdicts: BTreeMap<(usize, usize), &Verdict> = results
        .iter()
        .map(|r| ((r.case, r.backend), &r.verdict))
        .collect();
    let rows = keys
        .into_iter()
        .map(|((op, dtype), cases)| {
            let cells = (0..backends.len())
                .map(|b| {
                    let mut cell = Cell::default();
                    for &c in &cases {
                        if let Some(v) = verdicts.get(&(c, b)) {
                            cell.add(&suite.cases[c].name, v);
                        }
                    }
                    cell
                })
                .collect();
            Row {
                op,
                dtype,
                cases: cases.len(),
                cells,
            }
        })
        .collect();
    Scoreboard { backends, rows }
}

impl Scoreboard {
    /// A plain-text table for a terminal.
    pub fn text(&self) -> String {
        let mut head = vec!["op".to_string(), "dtype".to_string(), "cases".to_string()];
        head.extend(self.backends.iter().cloned());
        let body: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut v = vec![r.op.clone(), r.dtype.clone(), r.cases.to_string()];
                v.extend(r.cells.iter().map(Cell::text));
                v
            })
            .collect();
        let widths: Vec<usize> = (0..head.len())
            .map(|i| {
                std::iter::once(&head[i])
                    .chain(body.iter().map(|r| &r[i]))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cols: &[String]| {
            let cells: Vec<String> = cols
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = line(&head);
        for r in &body {
            out += &line(r);
        }
        out
    }

    /// A Markdown table; the reasons of non-passing cells as footnotes.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "| op | dtype | cases | {} |\n|---|---|---|{}\n",
            self.backends.join(" | "),
            "---|".repeat(self.backends.len())
        );
        let mut notes: Vec<String> = vec![];
        for r in &self.rows {
            let cells: Vec<String> = r
                .cells
                .iter()
                .map(|c| match (&c.reason, &c.case) {
                    (Some(why), Some(case)) if c.state() != CellState::Pass => {
                        notes.push(format!("{case}: {why}"));
                        format!("{} [{}]", c.text(), notes.len())
                    }
                    _ => c.text(),
                })
                .collect();
            out += &format!(
                "| {} | {} | {} | {} |\n",
                md(&r.op),
                md(&r.dtype),
                r.cases,
                cells.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | ")
            );
        }
        if !notes.is_empty() {
            out += "\n";
            for (i, n) in notes.iter().enumerate() {
                out += &format!("{}. {}\n", i + 1, md(n));
            }
        }
        out
    }

    /// A standalone HTML page: the table, cells coloured by state, reasons as tooltips.
    pub fn html(&self) -> String {
        let mut out = String::from(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>uopkit scoreboard</title>\n<style>\
             body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}\
             .pass{background:#d9f2d9}.allowed{background:#d6ebf5}.fail{background:#f7c6c6}.xfail{background:#f7e3b5}.skip{background:#e6e6e6}\
             </style></head><body>\n<h1>uopkit scoreboard</h1>\n<table>\n<tr><th>op</th><th>dtype</th><th>cases</th>",
        );
        for b in &self.backends {
            out += &format!("<th>{}</th>", esc(b));
        }
        out += "</tr>\n";
        for r in &self.rows {
            out += &format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td>",
                esc(&r.op),
                esc(&r.dtype),
                r.cases
            );
            for c in &r.cells {
                let title = match (&c.case, &c.reason) {
                    (Some(case), Some(why)) => format!(" title=\"{}: {}\"", esc(case), esc(why)),
                    _ => String::new(),
                };
                out += &format!(
                    "<td class=\"{}\"{title}>{}</td>",
                    c.state().label(),
                    esc(&c.text())
                );
            }
            out += "</tr>\n";
        }
        out += "</table>\n</body></html>\n";
        out
    }
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(vs: &[Verdict]) -> Cell {
        let mut c = Cell::default();
        for (i, v) in vs.iter().enumerate() {
            c.add(&format!("case{i}"), v);
        }
        c
    }

    #[test]
    fn an_allowed_trial_makes_the_cell_allowed_with_its_allowance_as_the_reason() {
        let by = Verdict::Allowed("output 'y': 1 of 4 elements differ, allowed by ulp(2)".into());
        let c = cell(&[Verdict::Pass, Verdict::Skip("no GPU".into()), by.clone()]);
        assert_eq!(c.state(), CellState::Allowed);
        assert_eq!(c.text(), "allowed 1/2, skip 1");
        assert_eq!(c.reason.as_deref(), by.detail());
        assert_eq!(c.case.as_deref(), Some("case2"));
        // A failure still wins, with its own reason.
        let f = cell(&[
            by,
            Verdict::fail(super::super::FailKind::Mismatch, "bits differ"),
        ]);
        assert_eq!(f.state(), CellState::Fail);
        assert_eq!(f.reason.as_deref(), Some("bits differ"));
        assert_eq!(cell(&[Verdict::Pass]).text(), "pass 1");
        let mixed = cell(&[Verdict::Pass, Verdict::Skip("no GPU".into())]);
        assert_eq!(mixed.text(), "pass 1, skip 1");
        assert_eq!(mixed.reason.as_deref(), Some("no GPU"));
    }
}
