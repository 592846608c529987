//! The HIP runtime (placeholder until the HIP backend lands): every device is unavailable.

use std::sync::Arc;

use super::{Device, Error, Result};

/// A HIP device.
#[derive(Debug)]
pub struct HipDevice;

impl HipDevice {
    /// The process-wide `HIP:ordinal`.
    pub fn get(_ordinal: usize) -> Result<Arc<dyn Device>> {
        Err(Error::Unavailable {
            what: "HIP runtime",
            reason: "not built yet".into(),
        })
    }
}

/// Whether hiprtc can be used here: Ok, or why not (library absent, symbol missing).
pub fn hiprtc_available() -> std::result::Result<(), String> {
    Err("hiprtc: not built yet".into())
}

/// Compiles `unit` (a [`super::Lang::Hip`] unit) with hiprtc for the architecture
/// [`hip_arch`] names; returns the code object.
pub fn hiprtc_compile(_unit: &super::Unit) -> Result<Vec<u8>> {
    Err(Error::Unavailable {
        what: "hiprtc",
        reason: "not built yet".into(),
    })
}

/// The offload architecture hiprtc compiles for: `UOPKIT_HIP_ARCH`, else the device's own
/// when one is present, else `gfx90a`.
pub fn hip_arch() -> String {
    std::env::var("UOPKIT_HIP_ARCH").unwrap_or_else(|_| "gfx90a".into())
}

/// How many HIP devices there are, or why none can be used.
pub fn device_count() -> Result<usize> {
    Err(Error::Unavailable {
        what: "HIP runtime",
        reason: "not built yet".into(),
    })
}
