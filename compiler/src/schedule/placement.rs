//! Placement: every kernel reads and writes only buffers of the device it runs on; data
//! moves between devices only through COPY steps.
//!
//! On CPU devices that share one address space a misplaced kernel still computes the right
//! values, so the corpus alone cannot see the mistake; the harness checks this on every
//! schedule a compiled trial runs ([`misplaced`]) and fails the trial when it does not hold.

use super::{Schedule, Step};

/// One kernel argument on a device other than its kernel's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misplaced {
    /// The step's index in [`Schedule::steps`].
    pub step: usize,
    /// The kernel's program name.
    pub program: String,
    /// The PARAM slot whose buffer is elsewhere.
    pub slot: usize,
    /// The buffer (its index in [`Schedule::buffers`]).
    pub buffer: u32,
    /// Whether the kernel writes that param (else it only reads it).
    pub written: bool,
    pub kernel_device: String,
    pub buffer_device: String,
}

impl std::fmt::Display for Misplaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {} (kernel {} on {}) {} buffer b{} of {} through param {}",
            self.step,
            self.program,
            self.kernel_device,
            if self.written { "writes" } else { "reads" },
            self.buffer,
            self.buffer_device,
            self.slot
        )
    }
}

/// Every kernel argument whose buffer lives on another device than the kernel (or names no
/// buffer of the schedule), in step and slot order (empty for a well-placed schedule).
pub fn misplaced(s: &Schedule) -> Vec<Misplaced> {
    let mut out = vec![];
    for (i, step) in s.steps.iter().enumerate() {
        let Step::Kernel {
            device,
            program,
            args,
            ..
        } = step
        else {
            continue;
        };
        for (slot, b) in args.iter().enumerate() {
            let decl = s.buffers.get(b.0 as usize);
            if decl.is_none_or(|d| d.device != *device) {
                out.push(Misplaced {
                    step: i,
                    program: program.name.clone(),
                    slot,
                    buffer: b.0,
                    written: program.params.get(slot).is_some_and(|p| p.written),
                    kernel_device: device.to_string(),
                    buffer_device: decl.map_or("no device (there is no such buffer)".into(), |d| {
                        d.device.to_string()
                    }),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{BufId, BufferDecl, BufferKind};
    use uopkit_interp::ir::{DType, Device};
    use uopkit_interp::kernel::{ParamDecl, Program};

    fn buffer(device: Device) -> BufferDecl {
        BufferDecl {
            dtype: DType::Float32,
            size: 4,
            device,
            kind: BufferKind::Intermediate,
            storage: 0,
        }
    }

    fn kernel(device: Device, args: &[u32]) -> Step {
        let params = vec![
            ParamDecl {
                dtype: DType::Float32,
                size: 4,
                written: true,
            },
            ParamDecl {
                dtype: DType::Float32,
                size: 4,
                written: false,
            },
        ];
        Step::Kernel {
            device,
            program: Program::new("k0", params),
            args: args.iter().map(|&b| BufId(b)).collect(),
            value: None,
        }
    }

    #[test]
    fn a_kernel_reading_another_devices_buffer_is_reported() {
        let s = Schedule {
            buffers: vec![
                buffer(Device::cpu(0)),
                buffer(Device::cpu(1)),
                buffer(Device::cpu(1)),
            ],
            steps: vec![
                kernel(Device::cpu(1), &[2, 1]),
                Step::Copy {
                    dst: BufId(0),
                    src: BufId(1),
                },
                kernel(Device::cpu(1), &[2, 0]),
            ],
            outputs: vec![],
        };
        let bad = misplaced(&s);
        assert_eq!(bad.len(), 1);
        assert_eq!(
            bad[0].to_string(),
            "step 2 (kernel k0 on CPU:1) reads buffer b0 of CPU:0 through param 1"
        );
    }

    #[test]
    fn writes_are_named_as_writes_and_copies_are_allowed() {
        let s = Schedule {
            buffers: vec![buffer(Device::cpu(0)), buffer(Device::cpu(1))],
            steps: vec![
                Step::Copy {
                    dst: BufId(1),
                    src: BufId(0),
                },
                kernel(Device::cpu(0), &[1, 0]),
            ],
            outputs: vec![],
        };
        let bad = misplaced(&s);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].written);
        assert!(bad[0].to_string().contains("writes buffer b1 of CPU:1"));
        let fine = Schedule {
            steps: vec![Step::Copy {
                dst: BufId(1),
                src: BufId(0),
            }],
            ..s
        };
        assert!(misplaced(&fine).is_empty());
    }
}
