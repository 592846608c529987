//! The benchmark's results: a table for people, JSON (`uopkit-bench/1`) for programs.
//!
//! JSON: `{"format": "uopkit-bench/1", "quick", "rounds", "threads", "cc", "probes": [...],
//! "workloads": [...]}`; each workload has `name`, `size`, `value`, `unit`, `ceiling`,
//! `ceiling_probe`, `ratio_to_ceiling`, `exact` (bool), `exact_by`, `mismatch` (only when not
//! exact), `best_ms`, `median_ms`, `median_value`, `kernels`, `compile_ms` (= `schedule_ms` +
//! `cc_ms`, a cold compile), and `numpy` / `tinygrad` / `tinygrad_first_ms` only when those
//! figures exist (absent, never zero or null, otherwise). `peer_notes` (only when there are
//! any): why a peer or one of its figures is missing, one line each; the table prints them
//! under "peers:".

use serde_json::{json, Map, Value};

use super::probe::ProbeKind;

#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub name: &'static str,
    pub kind: ProbeKind,
    pub threads: usize,
    pub unit: &'static str,
    /// From the best run.
    pub value: f64,
    pub median_value: f64,
}

#[derive(Clone, Debug)]
pub struct WorkloadResult {
    pub name: &'static str,
    pub size: String,
    pub unit: &'static str,
    /// From the best run.
    pub value: f64,
    pub median_value: f64,
    pub best_ms: f64,
    pub median_ms: f64,
    pub ceiling_probe: &'static str,
    pub ceiling: Option<f64>,
    pub ratio_to_ceiling: Option<f64>,
    pub exact: bool,
    pub exact_by: String,
    pub mismatch: Option<String>,
    pub kernels: usize,
    pub schedule_ms: f64,
    pub cc_ms: f64,
    pub numpy: Option<f64>,
    pub tinygrad: Option<f64>,
    pub tinygrad_first_ms: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub quick: bool,
    pub rounds: usize,
    pub threads: usize,
    pub cc: String,
    pub probes: Vec<ProbeResult>,
    pub workloads: Vec<WorkloadResult>,
    /// Why a peer (numpy, tinygrad) or one of its figures is missing.
    pub peer_notes: Vec<String>,
}

impl Report {
    /// Whether every workload's result was exact.
    pub fn all_exact(&self) -> bool {
        self.workloads.iter().all(|w| w.exact)
    }

    pub fn to_json(&self) -> Value {
        let probes: Vec<Value> = self
            .probes
            .iter()
            .map(|p| {
                json!({"name": p.name, "threads": p.threads, "unit": p.unit,
                       "value": p.value, "median_value": p.median_value})
            })
            .collect();
        let workloads: Vec<Value> = self
            .workloads
            .iter()
            .map(|w| {
                let mut m = Map::new();
                m.insert("name".into(), w.name.into());
                m.insert("size".into(), w.size.clone().into());
                m.insert("value".into(), w.value.into());
                m.insert("unit".into(), w.unit.into());
                m.insert("ceiling_probe".into(), w.ceiling_probe.into());
                if let Some(c) = w.ceiling {
                    m.insert("ceiling".into(), c.into());
                }
                if let Some(r) = w.ratio_to_ceiling {
                    m.insert("ratio_to_ceiling".into(), r.into());
                }
                m.insert("exact".into(), w.exact.into());
                m.insert("exact_by".into(), w.exact_by.clone().into());
                if let Some(d) = &w.mismatch {
                    m.insert("mismatch".into(), d.clone().into());
                }
                m.insert("best_ms".into(), w.best_ms.into());
                m.insert("median_ms".into(), w.median_ms.into());
                m.insert("median_value".into(), w.median_value.into());
                m.insert("kernels".into(), w.kernels.into());
                m.insert("compile_ms".into(), (w.schedule_ms + w.cc_ms).into());
                m.insert("schedule_ms".into(), w.schedule_ms.into());
                m.insert("cc_ms".into(), w.cc_ms.into());
                for (k, v) in [
                    ("numpy", w.numpy),
                    ("tinygrad", w.tinygrad),
                    ("tinygrad_first_ms", w.tinygrad_first_ms),
                ] {
                    if let Some(v) = v {
                        m.insert(k.into(), v.into());
                    }
                }
                Value::Object(m)
            })
            .collect();
        let mut v = json!({
            "format": "uopkit-bench/1",
            "quick": self.quick,
            "rounds": self.rounds,
            "threads": self.threads,
            "cc": self.cc,
            "probes": probes,
            "workloads": workloads,
        });
        if !self.peer_notes.is_empty() {
            v["peer_notes"] = self.peer_notes.clone().into();
        }
        v
    }

    /// The human table.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        s.push_str(&format!(
            "uopkit bench{}: {} timed round(s) after a warm-up, best (median); probes on {} thread(s) and on 1\n\n",
            if self.quick { " --quick (tiny sizes: figures mean nothing)" } else { "" },
            self.rounds,
            self.threads
        ));
        s.push_str(&format!(
            "{:<10} {:>8} {:>18}\n",
            "probe", "threads", "value"
        ));
        for p in &self.probes {
            s.push_str(&format!(
                "{:<10} {:>8} {:>10.2} {:<7} ({:.2})\n",
                p.name, p.threads, p.value, p.unit, p.median_value
            ));
        }
        s.push('\n');
        s.push_str(&format!(
            "{:<16} {:>18} {:>9} {:>6} {:>8} {:>8} {:>6} {:>17} {:>16}\n",
            "workload",
            "value",
            "ceiling",
            "ratio",
            "numpy",
            "tinygrad",
            "exact",
            "run ms",
            "compile ms (k)"
        ));
        for w in &self.workloads {
            s.push_str(&format!(
                "{:<16} {:>10.2} {:<7} {:>9} {:>6} {:>8} {:>8} {:>6} {:>8.3} ({:>6.3}) {:>10.1} ({})\n",
                w.name,
                w.value,
                w.unit,
                f(w.ceiling),
                f(w.ratio_to_ceiling),
                f(w.numpy),
                f(w.tinygrad),
                if w.exact { "yes" } else { "NO" },
                w.best_ms,
                w.median_ms,
                w.schedule_ms + w.cc_ms,
                w.kernels,
            ));
        }
        s.push('\n');
        for w in &self.workloads {
            s.push_str(&format!(
                "  {:<16} {}; ceiling: {}; exact by {}{}\n",
                w.name,
                w.size,
                w.ceiling_probe,
                w.exact_by,
                w.mismatch
                    .as_ref()
                    .map_or(String::new(), |d| format!("; MISMATCH: {d}"))
            ));
        }
        if !self.peer_notes.is_empty() {
            s.push_str("\npeers:\n");
            for n in &self.peer_notes {
                s.push_str(&format!("  {n}\n"));
            }
        }
        s
    }
}
