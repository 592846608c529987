//! The floating-point control state of the calling thread, and protection against kernel
//! code that changes it.
//!
//! A kernel library built with `-ffast-math` (e.g. `UOPKIT_CC` pointing at a wrapper that
//! adds it) links `crtfastmath.o`, whose constructor switches on flush-to-zero and
//! denormals-are-zero when the library is loaded: from then on every float operation of the
//! loading thread (the oracle's included) computes differently. The CPU runtime therefore
//! runs every `dlopen` and every kernel launch inside an [`FpGuard`]; a change is undone
//! and recorded, and [`take_tampering`] hands the records to the caller (a conformance
//! worker reports the case as a failure of that backend).
//!
//! The state is the *control* part only, never the sticky exception flags (which ordinary
//! arithmetic sets):
//!
//! * x86_64: MXCSR without its flag bits 0–5 (DAZ, exception masks, rounding, FZ) in the
//!   low 32 bits and the x87 control word in bits 32–47;
//! * aarch64: FPCR (the flags live in FPSR, which is not touched);
//! * elsewhere: nothing (always `FpState(0)`, [`set`] does nothing).
//!
//! The state is per thread; so is a guard (it is neither `Send` nor `Sync`).
//!
//! Rust code is compiled for the default environment; [`set`] is meant for restoring a
//! saved state (and for tests), not for running Rust code in another mode.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Mutex;

/// A thread's floating-point control state (layout per architecture: see the module doc).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct FpState(pub u64);

/// MXCSR's sticky exception flags (IE, DE, ZE, OE, UE, PE): status, not control.
#[cfg(target_arch = "x86_64")]
const MXCSR_FLAGS: u32 = 0x3f;

impl FpState {
    /// MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6): what `crtfastmath.o`
    /// sets. FPCR.FZ (bit 24) on aarch64; 0 elsewhere.
    pub const FTZ_DAZ: u64 = if cfg!(target_arch = "x86_64") {
        0x8040
    } else if cfg!(target_arch = "aarch64") {
        1 << 24
    } else {
        0
    };

    /// Each control register with its value: `[("MXCSR", 0x1f80), ("x87 CW", 0x37f)]`.
    pub fn registers(self) -> Vec<(&'static str, u64)> {
        if cfg!(target_arch = "x86_64") {
            vec![("MXCSR", self.0 & 0xffff_ffff), ("x87 CW", self.0 >> 32)]
        } else if cfg!(target_arch = "aarch64") {
            vec![("FPCR", self.0)]
        } else {
            vec![]
        }
    }
}

impl fmt::Display for FpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let regs = self.registers();
        if regs.is_empty() {
            return write!(f, "(no FP control state on this architecture)");
        }
        for (i, (name, v)) in regs.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{name} {v:#x}")?;
        }
        Ok(())
    }
}

/// The calling thread's FP control state.
pub fn current() -> FpState {
    imp::current()
}

/// Sets the calling thread's FP control state (the exception flags are kept as they are).
pub fn set(state: FpState) {
    imp::set(state)
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{FpState, MXCSR_FLAGS};
    use std::arch::asm;

    fn mxcsr() -> u32 {
        let mut m: u32 = 0;
        // SAFETY: stmxcsr stores 4 bytes to the given address, which is `m`.
        unsafe { asm!("stmxcsr [{}]", in(reg) &mut m, options(nostack, preserves_flags)) };
        m
    }

    pub fn current() -> FpState {
        let mut cw: u16 = 0;
        // SAFETY: fnstcw stores 2 bytes to the given address, which is `cw`.
        unsafe { asm!("fnstcw [{}]", in(reg) &mut cw, options(nostack, preserves_flags)) };
        FpState((mxcsr() & !MXCSR_FLAGS) as u64 | (cw as u64) << 32)
    }

    pub fn set(state: FpState) {
        // Bits 16–31 of MXCSR are reserved (setting one faults), so only 0–15 are taken.
        let m = (mxcsr() & MXCSR_FLAGS) | (state.0 as u32 & !MXCSR_FLAGS & 0xffff);
        let cw = (state.0 >> 32) as u16;
        // SAFETY: ldmxcsr/fldcw read 4/2 bytes from `m`/`cw`; no reserved bit is set.
        unsafe {
            asm!("ldmxcsr [{}]", in(reg) &m, options(nostack, preserves_flags, readonly));
            asm!("fldcw [{}]", in(reg) &cw, options(nostack, preserves_flags, readonly));
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod imp {
    use super::FpState;
    use std::arch::asm;

    pub fn current() -> FpState {
        let v: u64;
        // SAFETY: reads a system register into a general one.
        unsafe { asm!("mrs {}, fpcr", out(reg) v, options(nomem, nostack, preserves_flags)) };
        FpState(v)
    }

    pub fn set(state: FpState) {
        // SAFETY: writes FPCR; the value comes from `current` (or a test's chosen bits).
        unsafe { asm!("msr fpcr, {}", in(reg) state.0, options(nomem, nostack, preserves_flags)) };
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod imp {
    use super::FpState;

    pub fn current() -> FpState {
        FpState(0)
    }

    pub fn set(_: FpState) {}
}

/// A change of the FP control state seen by an [`FpGuard`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FpChange {
    pub before: FpState,
    pub after: FpState,
}

impl fmt::Display for FpChange {
    /// The registers that differ: `MXCSR 0x1f80 -> 0x9fc0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (b, a) = (self.before.registers(), self.after.registers());
        let mut first = true;
        for ((name, x), (_, y)) in b.iter().zip(&a) {
            if x != y {
                if !first {
                    write!(f, ", ")?;
                }
                first = false;
                write!(f, "{name} {x:#x} -> {y:#x}")?;
            }
        }
        if first {
            write!(f, "{:#x} -> {:#x}", self.before.0, self.after.0)?;
        }
        Ok(())
    }
}

/// Saves the calling thread's FP control state when made and restores it when finished
/// ([`FpGuard::restore`], [`FpGuard::restore_and_record`]) or dropped, telling whether the
/// state was changed in between.
#[derive(Debug)]
pub struct FpGuard {
    saved: FpState,
    done: bool,
    /// The state belongs to one thread.
    _thread: PhantomData<*const ()>,
}

impl FpGuard {
    pub fn new() -> Self {
        FpGuard {
            saved: current(),
            done: false,
            _thread: PhantomData,
        }
    }

    /// The state saved when the guard was made.
    pub fn saved(&self) -> FpState {
        self.saved
    }

    /// Restores the saved state if it was changed; returns the change.
    pub fn restore(mut self) -> Option<FpChange> {
        self.done = true;
        self.restore_now()
    }

    /// Like [`FpGuard::restore`], and a change is also recorded for [`take_tampering`] as
    /// "the kernel library changed the FP control state (MXCSR a -> b) during {what};
    /// restored" (`what` is only called when there was a change).
    pub fn restore_and_record(mut self, what: impl FnOnce() -> String) -> Option<FpChange> {
        self.done = true;
        let change = self.restore_now();
        if let Some(c) = change {
            record(format!(
                "the kernel library changed the FP control state ({c}) during {}; restored",
                what()
            ));
        }
        change
    }

    fn restore_now(&self) -> Option<FpChange> {
        let now = current();
        if now == self.saved {
            return None;
        }
        set(self.saved);
        Some(FpChange {
            before: self.saved,
            after: now,
        })
    }
}

impl Default for FpGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for FpGuard {
    /// An unfinished guard restores and records as well (context unknown).
    fn drop(&mut self) {
        if !self.done {
            if let Some(c) = self.restore_now() {
                record(format!(
                    "the FP control state was changed ({c}) inside an FP guard; restored"
                ));
            }
        }
    }
}

/// At most this many messages are kept between two [`take_tampering`] calls.
const MAX_RECORDS: usize = 32;

struct Records {
    messages: Vec<String>,
    dropped: usize,
}

static RECORDS: Mutex<Records> = Mutex::new(Records {
    messages: Vec::new(),
    dropped: 0,
});

/// Records a tampering message (process-wide) for [`take_tampering`].
pub fn record(message: String) {
    let mut r = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    if r.messages.len() < MAX_RECORDS {
        r.messages.push(message);
    } else {
        r.dropped += 1;
    }
}

/// Every change of the FP control state recorded (by any thread) since the last call, one
/// message per line, or `None` if there was none. Clears the record.
pub fn take_tampering() -> Option<String> {
    let mut r = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    if r.messages.is_empty() {
        return None;
    }
    let mut text = std::mem::take(&mut r.messages).join("\n");
    if r.dropped > 0 {
        text.push_str(&format!("\n(and {} more)", r.dropped));
        r.dropped = 0;
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_current_round_trip_and_guard_restores() {
        let before = current();
        if FpState::FTZ_DAZ == 0 {
            return; // nothing to control on this architecture
        }
        assert_eq!(before.0 & FpState::FTZ_DAZ, 0, "default state has FTZ off");
        let g = FpGuard::new();
        set(FpState(before.0 | FpState::FTZ_DAZ));
        assert_eq!(current().0, before.0 | FpState::FTZ_DAZ);
        // Denormals are flushed while it is on (black_box keeps it a run-time operation).
        let tiny = std::hint::black_box(f32::from_bits(1));
        let flushed = std::hint::black_box(tiny * std::hint::black_box(1.0f32));
        let change = g
            .restore_and_record(|| "a unit test".into())
            .expect("change seen");
        assert_eq!(flushed, 0.0);
        assert_eq!(current(), before);
        assert_eq!(change.before, before);
        let msg = take_tampering().expect("recorded");
        assert!(msg.contains("during a unit test; restored"), "{msg}");
        #[cfg(target_arch = "x86_64")]
        assert!(msg.contains("MXCSR 0x1f80 -> 0x9fc0"), "{msg}");
        assert_eq!(take_tampering(), None);
        // No change: nothing recorded, and a dropped guard restores too.
        assert_eq!(FpGuard::new().restore_and_record(|| "x".into()), None);
        {
            let _g = FpGuard::new();
            set(FpState(before.0 | FpState::FTZ_DAZ));
        }
        assert_eq!(current(), before);
        assert!(take_tampering().is_some());
    }
}
