//! The CUDA runtime (placeholder).

use std::sync::Arc;

use super::{Device, Error, Result};

/// A CUDA device.
#[derive(Debug)]
pub struct CudaDevice;

impl CudaDevice {
    /// The process-wide `CUDA:ordinal`.
    pub fn get(_ordinal: usize) -> Result<Arc<dyn Device>> {
        Err(Error::Unavailable {
            what: "CUDA driver",
            reason: "not built yet".into(),
        })
    }
}
