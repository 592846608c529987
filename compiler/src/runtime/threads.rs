//! Threads for the CPU runtime: how many, and running a kernel's parallel loop in chunks.
//!
//! A kernel whose outermost loop the `cpu_threads` pass marked parallel has an entry
//! `par_k_<name>(args, lo, hi)` over iterations `[lo, hi)` (see `render::par`). A launch
//! splits the loop into at most [`cpu_threads`] contiguous chunks of equal size (± 1), one
//! per scoped thread (the calling thread runs the first), each at least
//! [`MIN_WORK_PER_THREAD`] estimated instructions: small kernels stay on one thread. The
//! iterations touch disjoint elements (the pass's proof), so the chunks give the bits one
//! thread gives.
//!
//! `UOPKIT_CPU_THREADS=n` (n ≥ 1) sets the number of threads; unset, it is
//! `std::thread::available_parallelism()`. It is read once per process ([`cpu_threads`]).

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::OnceLock;

use super::fpenv::FpGuard;
use super::{Error, Result};

/// The environment variable that sets the number of threads.
pub const THREADS_VAR: &str = "UOPKIT_CPU_THREADS";

/// The least estimated work (instructions) a thread is given.
pub const MIN_WORK_PER_THREAD: u64 = 1 << 16;

/// The stack of a chunk's thread: the usual size of a process's main thread's stack, so a
/// kernel frame (its register arrays are automatic arrays) that fits the thread launching it
/// also fits a chunk's thread; `RUST_MIN_STACK` does not change it.
pub const CHUNK_STACK_BYTES: usize = 8 << 20;

/// The entry over part of a parallel loop.
pub type ParFn = unsafe extern "C" fn(*mut *mut c_void, i64, i64);

/// The number of threads a launch may use: `UOPKIT_CPU_THREADS`, else every core. The
/// variable is read once, at the first call in the process (launches are hot: no environment
/// lookup and no parsing per launch); a bad value is an error at every call.
pub fn cpu_threads() -> Result<usize> {
    static SETTING: OnceLock<std::result::Result<usize, BadThreads>> = OnceLock::new();
    SETTING
        .get_or_init(|| threads_from(std::env::var(THREADS_VAR)))
        .clone()
        .map_err(|b| Error::BadSetting {
            name: THREADS_VAR.into(),
            value: b.value,
            message: b.message.into(),
        })
}

/// A value of [`THREADS_VAR`] that is not a number of threads, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadThreads {
    pub value: String,
    pub message: &'static str,
}

/// The number of threads that a lookup of [`THREADS_VAR`] asks for: its value (n ≥ 1),
/// or every core when it is unset.
pub fn threads_from(
    var: std::result::Result<String, std::env::VarError>,
) -> std::result::Result<usize, BadThreads> {
    match var {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(BadThreads {
                value: v,
                message: "expected a number of threads, at least 1",
            }),
        },
        Err(std::env::VarError::NotPresent) => Ok(std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)),
        Err(std::env::VarError::NotUnicode(v)) => Err(BadThreads {
            value: v.to_string_lossy().into_owned(),
            message: "not UTF-8",
        }),
    }
}

thread_local! {
    /// The chunk count [`with_forced_chunks`] set for launches from this thread.
    static FORCED: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Runs `f` with every launch that `f` makes from this thread and that has a parallel loop
/// split into `n` chunks (at most the loop's extent), each on its own thread, whatever the
/// loop's size and the thread setting, so that small kernels, which the work threshold keeps
/// on one thread, can be run through the threaded entry (`par_k_*`) too. The previous setting
/// is back when `f` returns or unwinds.
pub fn with_forced_chunks<R>(n: usize, f: impl FnOnce() -> R) -> R {
    crate::scoped::with_cell(&FORCED, Some(n.max(1)), f)
}

/// The chunks a launch from this thread splits a parallel loop of `extent` iterations of
/// `work` instructions each into, with at most `threads` threads: [`chunks`], unless
/// [`with_forced_chunks`] set a count.
pub fn launch_chunks(extent: i64, work: u64, threads: usize) -> usize {
    match FORCED.with(Cell::get) {
        Some(n) => (n as u64).min(u64::try_from(extent).unwrap_or(0)).max(1) as usize,
        None => chunks(extent, work, threads),
    }
}

/// How many chunks a loop of `extent` iterations of `work` instructions each is split into,
/// with at most `threads` threads.
pub fn chunks(extent: i64, work: u64, threads: usize) -> usize {
    let extent = u64::try_from(extent).unwrap_or(0);
    let total = extent.saturating_mul(work.max(1));
    let by_work = total / MIN_WORK_PER_THREAD;
    (threads as u64).min(extent).min(by_work).max(1) as usize
}

/// The argument array of a launch, shared read-only by the chunks' threads.
struct Args(*mut *mut c_void);

// SAFETY: the kernels only read the array; the buffers it points to are touched by the
// chunks at disjoint elements (the `cpu_threads` pass's proof), and the device lock held by
// the launching thread keeps every other access out until all chunks have returned.
unsafe impl Send for Args {}
unsafe impl Sync for Args {}

impl Args {
    /// The pointer (a method, so that closures capture the whole `Args`).
    fn get(&self) -> *mut *mut c_void {
        self.0
    }
}

/// Runs iterations `[0, extent)` of `f` in `n` chunks on scoped threads (the calling thread
/// runs the first). Each thread's FP control state is guarded as a launch's is; `what`
/// names the launch in a tampering record.
///
/// # Safety
/// `f` must be the `par_` entry of a kernel whose buffers `args` holds (as for the kernel's
/// whole-loop entry), and no two of those buffers may alias.
pub unsafe fn run_chunks(
    f: ParFn,
    args: *mut *mut c_void,
    extent: i64,
    n: usize,
    what: &(dyn Fn() -> String + Sync),
) {
    let n = n.max(1) as i64;
    let bounds = |c: i64| -> (i64, i64) {
        let (q, r) = (extent / n, extent % n);
        let lo = c * q + c.min(r);
        (lo, lo + q + i64::from(c < r))
    };
    let args = Args(args);
    let run = |c: i64| {
        let (lo, hi) = bounds(c);
        let fp = FpGuard::new();
        // SAFETY: the caller's contract; chunk c runs its own iterations only.
        unsafe { f(args.get(), lo, hi) };
        fp.restore_and_record(|| format!("{} (chunk {c})", what()));
    };
    std::thread::scope(|s| {
        // A chunk whose thread cannot be started runs here, after the first (the chunks
        // touch disjoint elements, so the order of chunks is not observable).
        let mut here = vec![];
        for c in 1..n {
            let run = &run;
            let started = std::thread::Builder::new()
                .stack_size(CHUNK_STACK_BYTES)
                .spawn_scoped(s, move || run(c));
            if started.is_err() {
                here.push(c);
            }
        }
        run(0);
        for c in here {
            run(c);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_loops_stay_on_one_thread() {
        assert_eq!(chunks(16, 4, 8), 1);
        assert_eq!(chunks(1, u64::MAX, 8), 1);
        assert_eq!(chunks(1 << 24, 4, 8), 8);
        assert_eq!(chunks(1 << 24, 4, 1), 1);
        // Two threads' worth of work, and no more.
        assert_eq!(chunks(2, MIN_WORK_PER_THREAD, 8), 2);
    }

    #[test]
    fn forced_chunks_apply_inside_the_closure_only_and_stop_at_the_extent() {
        assert_eq!(launch_chunks(16, 4, 8), 1);
        with_forced_chunks(3, || {
            assert_eq!(launch_chunks(16, 4, 1), 3);
            assert_eq!(launch_chunks(2, 4, 8), 2);
            assert_eq!(launch_chunks(0, 4, 8), 1);
            with_forced_chunks(5, || assert_eq!(launch_chunks(16, 4, 1), 5));
            assert_eq!(launch_chunks(16, 4, 1), 3);
        });
        assert_eq!(launch_chunks(16, 4, 8), 1);
        // Another thread is not affected.
        with_forced_chunks(3, || {
            std::thread::spawn(|| assert_eq!(launch_chunks(16, 4, 8), 1))
                .join()
                .unwrap()
        });
    }

    #[test]
    fn the_setting_is_a_number_of_threads_or_every_core() {
        assert_eq!(threads_from(Ok("3".into())), Ok(3));
        assert_eq!(threads_from(Ok(" 12 ".into())), Ok(12));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(threads_from(Err(std::env::VarError::NotPresent)), Ok(cores));
        for bad in ["0", "-1", "two", ""] {
            let e = threads_from(Ok(bad.into())).expect_err(bad);
            assert_eq!(e.value, bad);
            assert!(e.message.contains("at least 1"), "{e:?}");
        }
    }
}
