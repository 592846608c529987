//! `uopkit check --format html`: one self-contained page for people (no external resources,
//! no JavaScript; CSS and SVG inline), the same bytes for the same run.
//!
//! It has the run's settings, the per-backend counts, then one section per failing trial
//! (FAIL, XPASS, BAD): the case, the failure message, and — for the first [`DRAWN`] of them —
//! the case's graph and schedule drawn by Graphviz with the first diverging node in red
//! ([`evidence`]), a ULP-distance histogram of every output that differs ([`chart`]) and its
//! worst elements. Skipped and expected-failure trials follow as collapsed lists.

mod chart;
mod evidence;
mod picture;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::dot::What;
use crate::harness::{self, FailKind, Suite, TrialResult, Verdict};

pub use chart::histogram_svg;
pub use evidence::{Divergence, Element, Evidence, OutputEvidence};
pub use picture::inline_svg;

/// How many failing trials get pictures, histograms and a `uopkit diff` run (each re-runs the
/// trial and the compiler's stages); the others show their message only.
pub const DRAWN: usize = 20;

/// The run's command settings, as the page shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// The command line (`uopkit check …`).
    pub command: Vec<String>,
    /// `UOPKIT_*` environment variables that were set, sorted by name.
    pub env: Vec<(String, String)>,
    /// The backends as the command named them (`exec:…` where the run's trials say the
    /// backend's own name), in run order; empty when unknown.
    pub backend_specs: Vec<String>,
}

impl RunInfo {
    /// This process's command line (the program as `uopkit`) and `UOPKIT_*` variables.
    pub fn from_process() -> RunInfo {
        let mut command: Vec<String> = std::env::args().collect();
        if let Some(first) = command.first_mut() {
            *first = "uopkit".into();
        }
        let mut env: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| k.starts_with("UOPKIT_"))
            .collect();
        env.sort();
        let backend_specs = backend_arg(&command)
            .or_else(|| std::env::var("UOPKIT_BACKENDS").ok())
            .unwrap_or_else(|| harness::DEFAULT_BACKENDS.to_string());
        RunInfo {
            backend_specs: harness::split_backends(&backend_specs),
            command,
            env,
        }
    }
}

/// The value of the last `--backend X` / `--backend=X` on a command line.
fn backend_arg(args: &[String]) -> Option<String> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--backend" {
            found = it.next().cloned();
        } else if let Some(v) = a.strip_prefix("--backend=") {
            found = Some(v.to_string());
        }
    }
    found
}

/// `s` escaped for HTML text and double-quoted attributes (characters XML forbids dropped).
pub(crate) fn esc(s: &str) -> String {
    crate::report::attr(s)
        .replace("&#10;", "\n")
        .replace("&#9;", "\t")
}

/// `s` escaped, with `backquoted` spans as `<code>`.
fn prose(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            out += &format!("<code>{}</code>", esc(part));
        } else {
            out += &esc(part);
        }
    }
    out
}

const STYLE: &str = "\
body{font-family:sans-serif;margin:1.5em;max-width:1200px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.3em;margin-top:1.6em;border-bottom:1px solid #ccc}\
h3{font-size:1.05em;margin-bottom:.3em}\
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:left;vertical-align:top}\
td.n{text-align:right}\
.pass{background:#d9f2d9}.allowed{background:#d6ebf5}.fail{background:#f7c6c6}.xfail{background:#f7e3b5}.skip{background:#e6e6e6}\
.verdict{display:inline-block;padding:0 .4em;border-radius:3px;font-weight:bold}\
.trial{border:1px solid #ddd;border-left:6px solid #c00;padding:.2em 1em 1em;margin:1.2em 0;background:#fff}\
pre{background:#f6f6f6;border:1px solid #ddd;padding:.5em;overflow:auto;max-height:32em;font-size:12px;white-space:pre-wrap}\
pre.dot{max-height:20em}\
code{background:#f2f2f2;padding:0 .2em}\
.note{color:#555;font-style:italic}\
.pic{overflow:auto;border:1px solid #eee;max-height:50em}.pic svg{max-width:100%;height:auto}\
svg.histogram .bar.exact rect{fill:#6aa84f}svg.histogram .bar.off rect{fill:#e06666}svg.histogram .bar.nan rect{fill:#8e7cc3}\
svg.histogram text{font-size:11px;font-family:sans-serif}svg.histogram .axis{stroke:#444}\
svg.histogram .axis-title{fill:#444}svg.histogram .gap text{font-size:16px;fill:#888}\
.chart{overflow-x:auto}.chart svg{max-width:100%;height:auto}\
details{margin:.4em 0}summary{cursor:pointer;font-weight:bold}\
";

/// The HTML page of a `check` run.
pub fn check_html(suite: &Suite, results: &[TrialResult], info: &RunInfo) -> String {
    let failing: Vec<&TrialResult> = results.iter().filter(|r| r.verdict.is_failure()).collect();
    let title = if failing.is_empty() {
        "uopkit check: passed".to_string()
    } else {
        format!("uopkit check: {} failing trial(s)", failing.len())
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title>\n<style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    settings(&mut h, suite, results, info);
    summary(&mut h, suite, results);
    if !failing.is_empty() {
        let _ = writeln!(
            h,
            "<h2 id=\"failing\">Failing trials ({})</h2>",
            failing.len()
        );
        h.push_str("<ul class=\"index\">\n");
        for (i, r) in failing.iter().enumerate() {
            let _ = writeln!(
                h,
                "<li><a href=\"#t{}\"><span class=\"verdict fail\">{}</span> {}</a></li>",
                i + 1,
                r.verdict.label(),
                esc(&suite.trial_name(r.case, r.backend))
            );
        }
        h.push_str("</ul>\n");
        // `uopkit diff`'s stages once per case with a backend mismatch among the drawn ones.
        let mut diffs: BTreeMap<usize, Divergence> = BTreeMap::new();
        for (i, r) in failing.iter().enumerate() {
            let drawn = i < DRAWN;
            let mismatch = matches!(
                r.verdict,
                Verdict::Fail {
                    kind: FailKind::Mismatch,
                    ..
                }
            ) && suite.backends[r.backend].backend.role()
                != crate::backends::Role::Reference;
            let divergence = match (&suite.cases[r.case].case, drawn && mismatch) {
                (Ok(c), true) => Some(
                    diffs
                        .entry(r.case)
                        .or_insert_with(|| evidence::divergence(c.clone()))
                        .clone(),
                ),
                _ => None,
            };
            let spec = info
                .backend_specs
                .get(r.backend)
                .filter(|_| info.backend_specs.len() == suite.backends.len())
                .map_or(suite.backends[r.backend].backend.name(), String::as_str);
            trial(&mut h, suite, r, i + 1, drawn, divergence.as_ref(), spec);
        }
        if failing.len() > DRAWN {
            let _ = writeln!(
                h,
                "<p class=\"note\">{} more failing trial(s) not drawn (only the first {DRAWN} get pictures and histograms).</p>",
                failing.len() - DRAWN
            );
        }
    }
    quiet_lists(&mut h, suite, results);
    h.push_str("</body></html>\n");
    h
}

fn settings(h: &mut String, suite: &Suite, results: &[TrialResult], info: &RunInfo) {
    h.push_str("<h2>Run</h2>\n<table class=\"settings\">\n");
    let row = |h: &mut String, k: &str, v: &str| {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    };
    if !info.command.is_empty() {
        let cmd = shell_words::join(&info.command);
        let _ = writeln!(
            h,
            "<tr><th>command</th><td><code>{}</code></td></tr>",
            esc(&cmd)
        );
    }
    row(h, "corpus", &suite.corpus.display().to_string());
    let backends: Vec<&str> = suite.backends.iter().map(|s| s.backend.name()).collect();
    row(h, "backends", &backends.join(", "));
    let invalid = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Invalid(_)))
        .map(|r| r.case)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    row(
        h,
        "cases",
        &format!(
            "{} selected, {} unreadable or invalid; {} trial(s)",
            suite.cases.len(),
            invalid,
            results.len()
        ),
    );
    for (k, v) in &info.env {
        row(h, k, v);
    }
    for w in &suite.warnings {
        row(h, "warning", w);
    }
    h.push_str("</table>\n");
}

fn summary(h: &mut String, suite: &Suite, results: &[TrialResult]) {
    h.push_str(
        "<h2>Summary</h2>\n<table class=\"summary\">\n<tr><th>backend</th><th>passed</th><th>of which allowed</th>\
         <th>failed</th><th>xfail</th><th>skipped</th><th>XPASS</th><th>invalid</th></tr>\n",
    );
    for (slot, t) in suite.backends.iter().zip(harness::tallies(suite, results)) {
        let cell = |n: usize, class: &str| {
            if n > 0 {
                format!("<td class=\"n {class}\">{n}</td>")
            } else {
                "<td class=\"n\">0</td>".to_string()
            }
        };
        let _ = writeln!(
            h,
            "<tr><th>{}</th>{}{}{}{}{}{}{}</tr>",
            esc(slot.backend.name()),
            cell(t.passed, "pass"),
            cell(t.allowed, "allowed"),
            cell(t.failed, "fail"),
            cell(t.xfail, "xfail"),
            cell(t.skipped, "skip"),
            cell(t.xpass, "fail"),
            cell(t.invalid, "fail"),
        );
    }
    h.push_str("</table>\n");
}

fn trial(
    h: &mut String,
    suite: &Suite,
    r: &TrialResult,
    n: usize,
    drawn: bool,
    divergence: Option<&Divergence>,
    spec: &str,
) {
    let entry = &suite.cases[r.case];
    let slot = &suite.backends[r.backend];
    let file = entry.file.display().to_string();
    let _ = writeln!(
        h,
        "<section class=\"trial\" id=\"t{n}\">\n<h2><span class=\"verdict fail\">{}</span> {}</h2>",
        r.verdict.label(),
        esc(&suite.trial_name(r.case, r.backend))
    );
    h.push_str("<table class=\"facts\">\n");
    let _ = writeln!(
        h,
        "<tr><th>case</th><td><code>{}</code></td></tr>",
        esc(&file)
    );
    if let Ok(c) = &entry.case {
        let _ = writeln!(
            h,
            "<tr><th>description</th><td>{}</td></tr>",
            esc(&c.description)
        );
    }
    let _ = writeln!(
        h,
        "<tr><th>backend</th><td>{}</td></tr>",
        esc(slot.backend.name())
    );
    let verdict = match &r.verdict {
        Verdict::Fail { kind, .. } => format!("FAIL ({})", kind_word(*kind)),
        Verdict::XPass(_) => "XPASS: listed in the xfail manifest, but it passed".into(),
        Verdict::Invalid(_) => "BAD: the case cannot be read or its graph is invalid".into(),
        v => v.label().to_string(),
    };
    let _ = writeln!(h, "<tr><th>verdict</th><td>{}</td></tr>", esc(&verdict));
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<h3>Failure</h3>\n<pre class=\"message\">{}</pre>",
        esc(r.verdict.detail().unwrap_or("").trim_end())
    );
    let Ok(case) = &entry.case else {
        h.push_str("</section>\n");
        return;
    };
    if !drawn {
        h.push_str("<p class=\"note\">Not drawn (see the note after the last drawn trial).</p>\n</section>\n");
        return;
    }
    let mut ev = evidence::gather(
        case.clone(),
        &entry.name,
        slot.backend.clone(),
        slot.allow.clone(),
        &r.verdict,
    );
    let stages = match divergence {
        Some(Divergence::At {
            stage,
            node: Some(node),
        }) => {
            ev.highlight = Some(*node);
            ev.highlight_why = Some(format!(
                "node {node}, the first diverging node `uopkit diff` finds ({stage})"
            ));
            None
        }
        Some(Divergence::At { stage, node: None }) => Some(format!(
            "`uopkit diff`: {stage} (not pinned to one node)"
        )),
        Some(Divergence::Agrees) => Some(
            "`uopkit diff`: every interpreted compiler stage agrees with the oracle, so the backend's own code or runtime differs"
                .to_string(),
        ),
        Some(Divergence::Unknown(why)) => Some(format!("`uopkit diff` could not run: {why}")),
        None => None,
    };
    if let Some(s) = &stages {
        let _ = writeln!(h, "<p>{}.</p>", prose(s));
    }
    if let Some(note) = &ev.note {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(note));
    }
    for (k, o) in ev.outputs.iter().enumerate() {
        output(h, o, &format!("t{n}-o{k}"));
    }
    let prefix = format!("t{n}-");
    h.push_str("<h3>Graph</h3>\n");
    if let Some(why) = &ev.highlight_why {
        let _ = writeln!(h, "<p>In red: {}.</p>", prose(why));
    }
    h.push_str(&picture::picture(
        case,
        What::Graph,
        ev.highlight,
        &format!("{prefix}g-"),
        &file,
    ));
    if slot.backend.role() != crate::backends::Role::Reference {
        h.push_str("<h3>Schedule</h3>\n");
        h.push_str(&picture::picture(
            case,
            What::Schedule,
            ev.highlight,
            &format!("{prefix}s-"),
            &file,
        ));
        let _ = writeln!(
            h,
            "<p>To pin it to a compiler stage: <code>{}</code></p>",
            esc(&format!(
                "uopkit diff {} --backend {}",
                shell_words::quote(&file),
                shell_words::quote(spec)
            ))
        );
    }
    h.push_str("</section>\n");
}

fn output(h: &mut String, o: &OutputEvidence, id: &str) {
    if let Some(e) = &o.error {
        let _ = writeln!(
            h,
            "<h3>Output '{}' (node {})</h3>\n<pre class=\"message\">{}</pre>",
            esc(&o.name),
            o.node,
            esc(e)
        );
        return;
    }
    if o.differing == 0 {
        return;
    }
    let share = 100.0 * o.differing as f64 / o.total.max(1) as f64;
    let _ = writeln!(
        h,
        "<h3 id=\"{id}\">Output '{}' (node {}, {}, {}): {} of {} elements differ ({share:.2}%)</h3>",
        esc(&o.name),
        o.node,
        esc(&o.what),
        esc(&o.mode),
        o.differing,
        o.total
    );
    match &o.histogram {
        Some(hist) => {
            h.push_str("<div class=\"chart\">");
            h.push_str(&histogram_svg(
                hist,
                &format!(
                    "ULP distances of output '{}' from the {} ({} elements)",
                    o.name,
                    o.against,
                    hist.count()
                ),
            ));
            h.push_str("</div>\n");
        }
        None => h.push_str("<p class=\"note\">No ULP histogram for this comparison mode.</p>\n"),
    }
    if !o.worst.is_empty() {
        let _ = writeln!(
            h,
            "<table class=\"worst\">\n<tr><th>index</th><th>{}</th><th>actual</th><th>ULP</th></tr>",
            o.against
        );
        for e in &o.worst {
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td><code>{}</code></td><td><code>{}</code></td><td class=\"n\">{}</td></tr>",
                esc(&e.index),
                esc(&e.expected),
                esc(&e.actual),
                e.ulp.map_or("NaN".to_string(), |u| u.to_string())
            );
        }
        h.push_str("</table>\n");
        if o.differing > o.worst.len() {
            let _ = writeln!(
                h,
                "<p class=\"note\">the worst {} of {} shown</p>",
                o.worst.len(),
                o.differing
            );
        }
    }
}

fn quiet_lists(h: &mut String, suite: &Suite, results: &[TrialResult]) {
    let xfail: Vec<&TrialResult> = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::XFail { .. }))
        .collect();
    let skipped: Vec<&TrialResult> = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Skip(_)))
        .collect();
    let allowed: Vec<&TrialResult> = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Allowed(_)))
        .collect();
    if xfail.is_empty() && skipped.is_empty() && allowed.is_empty() {
        return;
    }
    h.push_str("<h2>Allowed, expected failures and skipped trials</h2>\n");
    if !allowed.is_empty() {
        let _ = writeln!(
            h,
            "<details class=\"allowed-list\"><summary>allowed ({}): passed within an allowance</summary>\n<ul>",
            allowed.len()
        );
        for r in &allowed {
            let _ = writeln!(
                h,
                "<li><code>{}</code>:<pre>{}</pre></li>",
                esc(&suite.trial_name(r.case, r.backend)),
                esc(r.verdict.detail().unwrap_or("").trim_end())
            );
        }
        h.push_str("</ul></details>\n");
    }
    if !xfail.is_empty() {
        let _ = writeln!(
            h,
            "<details class=\"xfail-list\"><summary>xfail ({})</summary>\n<ul>",
            xfail.len()
        );
        for r in &xfail {
            if let Verdict::XFail { reason, failure } = &r.verdict {
                let _ = writeln!(
                    h,
                    "<li><code>{}</code>: {}<pre>{}</pre></li>",
                    esc(&suite.trial_name(r.case, r.backend)),
                    esc(reason),
                    esc(failure.trim_end())
                );
            }
        }
        h.push_str("</ul></details>\n");
    }
    if !skipped.is_empty() {
        let _ = writeln!(
            h,
            "<details class=\"skip-list\"><summary>skipped ({})</summary>\n<ul>",
            skipped.len()
        );
        for r in &skipped {
            let _ = writeln!(
                h,
                "<li><code>{}</code>: {}</li>",
                esc(&suite.trial_name(r.case, r.backend)),
                esc(r.verdict.detail().unwrap_or(""))
            );
        }
        h.push_str("</ul></details>\n");
    }
}

fn kind_word(k: FailKind) -> &'static str {
    match k {
        FailKind::Mismatch => "outputs differ from the oracle",
        FailKind::Refused => "the compiler refused the graph",
        FailKind::Backend => "the backend reported an error",
        FailKind::Crash => "the backend crashed",
        FailKind::Oracle => "the oracle failed",
        FailKind::Expectation => "the oracle disagrees with the case's expected values",
    }
}
