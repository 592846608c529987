//! What `uopkit` shows on a terminal while it works, and whether its summaries are in
//! colour.
//!
//! Progress goes to stderr, and only when stderr is a terminal: a spinner naming each slow
//! set-up phase, then a bar of trials done (`check`, `report`) or of the fuzz budget spent
//! (`fuzz`). It is cleared before the summary is printed, and never drawn into a pipe or a
//! file, so piped output is what it always was.
//!
//! Colour follows `anstream`: on a terminal unless `NO_COLOR` is set (non-empty);
//! `CLICOLOR_FORCE` (non-empty) forces it into pipes too, `NO_COLOR` winning over it;
//! `--color always|never` overrides both.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anstream::{AutoStream, ColorChoice};
use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use uopkit_conformance::fuzz::FuzzReport;
use uopkit_conformance::harness::Verdict;
use uopkit_conformance::progress::{FuzzProgress, Progress};
use uopkit_conformance::report::Colour;

/// `--color`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorArg {
    /// On a terminal, unless NO_COLOR is set; CLICOLOR_FORCE forces it.
    #[default]
    Auto,
    Always,
    Never,
}

/// Applies `--color` (for every stream `anstream` decides on) and says which standard
/// streams the summaries are painted on.
pub fn colour(choice: ColorArg) -> Colour {
    match choice {
        ColorArg::Auto => {}
        ColorArg::Always => ColorChoice::Always.write_global(),
        ColorArg::Never => ColorChoice::Never.write_global(),
    }
    Colour {
        stdout: AutoStream::choice(&std::io::stdout()) != ColorChoice::Never,
        stderr: AutoStream::choice(&std::io::stderr()) != ColorChoice::Never,
    }
}

/// A spinner on stderr when it is a terminal, else nothing.
fn spinner() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(style("{spinner} {wide_msg} [{elapsed}]"));
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}

/// `template` with `{left}`: the estimated time left, once there is something to estimate
/// from.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key("left", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            if s.pos() > 0 {
                let _ = write!(w, ", {:#} left", HumanDuration(s.eta()));
            }
        })
}

/// The progress of `check` and `report`: set-up phases, then trials done of the total with
/// the failures so far and the time taken.
pub struct CheckProgress {
    bar: Option<ProgressBar>,
    failed: AtomicU64,
}

impl CheckProgress {
    pub fn new() -> CheckProgress {
        CheckProgress {
            bar: spinner(),
            failed: AtomicU64::new(0),
        }
    }

    /// Runs `f` (which writes to stderr) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }

    /// Removes the bar (before the summary or an error message is printed).
    pub fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for CheckProgress {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Progress for CheckProgress {
    fn phase(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    fn start(&self, total: u64) {
        if let Some(b) = &self.bar {
            b.set_style(
                style("{bar:30} {pos}/{len} trials, {msg} [{elapsed}{left}]").progress_chars("=> "),
            );
            b.set_length(total);
            b.set_position(0);
            b.set_message("0 failed");
        }
    }

    fn trial_done(&self, verdict: &Verdict) {
        if let Some(b) = &self.bar {
            let failed = if verdict.is_failure() {
                self.failed.fetch_add(1, Ordering::Relaxed) + 1
            } else {
                self.failed.load(Ordering::Relaxed)
            };
            b.set_message(format!("{failed} failed"));
            b.inc(1);
        }
    }
}

/// The progress of `fuzz`: cases generated, findings so far, and what is left of the
/// budget (seconds; and cases, with `--cases`).
pub struct FuzzBar {
    bar: Option<ProgressBar>,
    seconds: u64,
    max_cases: Option<u64>,
}

impl FuzzBar {
    pub fn new(seconds: u64, max_cases: Option<u64>) -> FuzzBar {
        let bar = spinner();
        if let Some(b) = &bar {
            // A bar over the cases with --cases, else over the seconds of the budget.
            b.set_style(style("{bar:30} {msg} [{elapsed}]").progress_chars("=> "));
            b.set_length(max_cases.unwrap_or(seconds.saturating_mul(1000)).max(1));
            b.set_message("generating cases");
        }
        FuzzBar {
            bar,
            seconds,
            max_cases,
        }
    }

    /// Removes the bar (before the summary or an error message is printed).
    pub fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for FuzzBar {
    fn drop(&mut self) {
        self.clear();
    }
}

impl FuzzProgress for FuzzBar {
    fn phase(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }

    fn case_done(&self, r: &FuzzReport) {
        let Some(b) = &self.bar else { return };
        let spent = r.elapsed.as_millis().min(u64::MAX as u128) as u64;
        let secs_left = self.seconds.saturating_sub(spent / 1000);
        let findings = r.failures.len();
        let mut msg = format!("{} cases, {findings} findings, {secs_left}s left", r.cases);
        match self.max_cases {
            Some(m) => {
                msg += &format!(" (or {} cases)", m.saturating_sub(r.cases));
                b.set_position(r.cases);
            }
            None => b.set_position(spent),
        }
        b.set_message(msg);
    }
}

/// The progress bar of `uopkit fuzz-rules`: over the cases (or the seconds of the budget,
/// whichever the run has), nothing when stderr is not a terminal.
pub struct RuleBar {
    bar: Option<ProgressBar>,
    cases: u64,
}

impl RuleBar {
    pub fn new(cases: u64) -> RuleBar {
        let bar = spinner();
        if let Some(b) = &bar {
            b.set_style(style("{bar:30} {msg} [{elapsed}]").progress_chars("=> "));
            b.set_length(cases.max(1));
            b.set_message("generating expressions");
        }
        RuleBar { bar, cases }
    }

    /// After a chunk of cases: `done` checked, `fired` rewritten, `secs_left` of the budget.
    pub fn update(&self, done: u64, fired: u64, secs_left: Option<u64>) {
        let Some(b) = &self.bar else { return };
        b.set_position(done.min(self.cases));
        let left = secs_left
            .map(|s| format!(", {s}s left"))
            .unwrap_or_default();
        b.set_message(format!("{done} expressions, {fired} rewritten{left}"));
    }

    pub fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for RuleBar {
    fn drop(&mut self) {
        self.clear();
    }
}
