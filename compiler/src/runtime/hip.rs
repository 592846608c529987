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
