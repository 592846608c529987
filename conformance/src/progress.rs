//! Progress hooks: what a long run (`uopkit check`, `report`, `fuzz`) tells whoever watches
//! it, while it runs. The library only calls these; drawing them (a progress bar on a
//! terminal, or nothing) is the caller's business, so no terminal code lives here.
//!
//! Every method has an empty default, and [`Quiet`] is the watcher that wants nothing.

use crate::fuzz::FuzzReport;
use crate::harness::Verdict;

/// A watcher of a harness run: the set-up phases, then one call per judged trial. Trials
/// run on several threads, so the calls may come from any of them.
pub trait Progress: Sync {
    /// A slow set-up step begins: `what` names it ("loading 367 cases", "starting backend
    /// cpu").
    fn phase(&self, _what: &str) {}
    /// The trials begin: `total` of them (cases × backends).
    fn start(&self, _total: u64) {}
    /// One trial was judged (xfail applied).
    fn trial_done(&self, _verdict: &Verdict) {}
}

/// A watcher of a fuzz run.
pub trait FuzzProgress {
    /// A slow step begins ("shrinking case #12").
    fn phase(&self, _what: &str) {}
    /// One generated case was judged; `so_far` counts the run up to it (its `elapsed` is
    /// the time since the run began).
    fn case_done(&self, _so_far: &FuzzReport) {}
}

/// Wants to know nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {}
impl FuzzProgress for Quiet {}
