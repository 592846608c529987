//! TEMPORARY minimal FP control state access (replaced by the cache/fpenv work).
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpState(pub u64);

#[cfg(target_arch = "x86_64")]
pub fn current() -> FpState {
    let mut v: u32 = 0;
    // SAFETY: stmxcsr writes 4 bytes to the given address.
    unsafe { core::arch::asm!("stmxcsr [{}]", in(reg) &mut v as *mut u32, options(nostack)) };
    FpState((v & 0xFFC0) as u64)
}
#[cfg(target_arch = "x86_64")]
pub fn set(s: FpState) {
    let v = s.0 as u32;
    // SAFETY: ldmxcsr reads 4 bytes from the given address.
    unsafe { core::arch::asm!("ldmxcsr [{}]", in(reg) &v as *const u32, options(nostack)) };
}
#[cfg(not(target_arch = "x86_64"))]
pub fn current() -> FpState { FpState(0) }
#[cfg(not(target_arch = "x86_64"))]
pub fn set(_s: FpState) {}

static TAMPER: Mutex<Option<String>> = Mutex::new(None);
pub fn take_tampering() -> Option<String> {
    TAMPER.lock().unwrap_or_else(|e| e.into_inner()).take()
}
