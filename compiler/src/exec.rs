//! Running a schedule on real devices: allocate storages, load the graph buffers' initial
//! contents, compile every kernel as one translation unit, run the steps in order and read
//! the outputs back as values the oracle's comparison understands.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;

use uopkit_interp::eval::{budget, BufferInit, Elem, Value};
use uopkit_interp::ir::{DType, NodeId};
use uopkit_interp::kernel::Program;

use crate::render::{self, RenderError, Unit};
use crate::runtime::{self, Buffer, Compiled, Device};
use crate::schedule::{BufferKind, Schedule, Step};

/// Bytes written into memory that nothing initialized, so that a kernel reading it by
/// mistake produces visible garbage instead of plausible zeros.
pub const POISON: u8 = 0xA5;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("runtime: {0}")]
    Runtime(#[from] runtime::Error),
    #[error("render: {0}")]
    Render(#[from] RenderError),
    /// The memory limit's setting (`UOPKIT_MEMORY_LIMIT`) cannot be used.
    #[error("{0}")]
    Limit(String),
    /// A buffer's byte size does not fit in memory addresses.
    #[error("buffer of {size} {dtype} elements: size overflows")]
    SizeOverflow { size: usize, dtype: DType },
    /// The inputs lack a graph buffer component's initial contents.
    #[error("buffer node {} has no initial contents for component {component}", node.0)]
    MissingInput { node: NodeId, component: usize },
    /// A graph buffer with initial contents was planned into a storage it shares.
    #[error("graph buffer node {} shares storage", .0.0)]
    SharedGraphBuffer(NodeId),
    /// An output's view could not be applied to its buffer.
    #[error("{0}")]
    View(String),
    /// The schedule's storages would not fit the memory budget (checked before allocating).
    #[error("the schedule needs an estimated {} of memory for its {storages} storage(s), over the memory limit of {} (set {} to change it)", budget::human(*needed), budget::human(*limit), budget::ENV)]
    Memory {
        needed: u64,
        storages: usize,
        limit: u64,
    },
}

impl From<String> for ExecError {
    fn from(e: String) -> Self {
        ExecError::View(e)
    }
}

/// Runs `s` with the graph buffers' initial contents `inputs`; returns one value per
/// schedule output (None for effects). Memory is budgeted under `UOPKIT_MEMORY_LIMIT`.
pub fn run(
    s: &Schedule,
    inputs: &BTreeMap<NodeId, BufferInit>,
) -> Result<Vec<Option<Value>>, ExecError> {
    let limit = budget::limit_from_env().map_err(ExecError::Limit)?;
    run_with_limit(s, inputs, limit)
}

/// [`run`] under an explicit memory limit in bytes.
pub fn run_with_limit(
    s: &Schedule,
    inputs: &BTreeMap<NodeId, BufferInit>,
    limit: u64,
) -> Result<Vec<Option<Value>>, ExecError> {
    // Devices, by name, in a stable order.
    let mut devices: BTreeMap<String, Arc<dyn Device>> = BTreeMap::new();
    for b in &s.buffers {
        let name = b.device.to_string();
        if !devices.contains_key(&name) {
            devices.insert(name.clone(), runtime::open(&name)?);
        }
    }
    // Storages: the largest occupant decides the size.
    let mut storage_bytes: BTreeMap<u32, (String, usize)> = BTreeMap::new();
    for b in &s.buffers {
        let e = storage_bytes
            .entry(b.storage)
            .or_insert((b.device.to_string(), 0));
        let bytes = b
            .size
            .checked_mul(b.dtype.itemsize())
            .ok_or(ExecError::SizeOverflow {
                size: b.size,
                dtype: b.dtype,
            })?;
        e.1 = e.1.max(bytes);
    }
    // Budget before allocating: every storage, plus one storage-sized staging copy (the poison
    // fill and the input bytes are made one storage at a time).
    let sizes = storage_bytes.values().map(|(_, b)| *b as u64);
    let needed = sizes
        .clone()
        .try_fold(0u64, |n, b| n.checked_add(b))
        .and_then(|total| total.checked_add(sizes.max().unwrap_or(0)))
        .unwrap_or(u64::MAX);
    if needed > limit {
        return Err(ExecError::Memory {
            needed,
            storages: storage_bytes.len(),
            limit,
        });
    }
    let mut storages: BTreeMap<u32, Buffer> = BTreeMap::new();
    for (&id, (dev, bytes)) in &storage_bytes {
        let d = &devices[dev];
        let buf = d.alloc(*bytes)?;
        d.copy_in(&buf, &vec![POISON; *bytes])?;
        storages.insert(id, buf);
    }
    for b in &s.buffers {
        let (node, c) = match b.kind {
            BufferKind::Graph(node) => (node, 0),
            // One component of a multi-device buffer: its own initial contents.
            BufferKind::GraphComponent(node, c) => (node, c),
            BufferKind::Intermediate => continue,
        };
        {
            if let Some(init) = inputs.get(&node) {
                let comp = init
                    .get(c)
                    .ok_or(ExecError::MissingInput { node, component: c })?;
                let bytes = to_bytes(b.dtype, comp);
                let storage = &storages[&b.storage];
                if storage.bytes() != bytes.len() {
                    return Err(ExecError::SharedGraphBuffer(node));
                }
                devices[&b.device.to_string()].copy_in(storage, &bytes)?;
            }
        }
    }
    // One translation unit per runtime ([`programs_by_runtime`]), compiled once per device.
    let programs = programs_by_runtime(s)?;
    let mut units: BTreeMap<&'static str, Unit> = BTreeMap::new();
    let mut compiled: BTreeMap<String, Compiled> = BTreeMap::new();
    for st in &s.steps {
        match st {
            Step::Kernel {
                device,
                program,
                args,
                ..
            } => {
                let name = device.to_string();
                let dev = &devices[&name];
                if !compiled.contains_key(&name) {
                    let rt = dev.runtime();
                    let unit = match units.entry(rt) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => e.insert(
                            render::renderer(dev.lang())
                                .render(programs.get(rt).map_or(&[][..], |p| &p[..]))?,
                        ),
                    };
                    compiled.insert(name.clone(), dev.compile(unit)?);
                }
                let bufs: Vec<&Buffer> = args
                    .iter()
                    .map(|a| &storages[&s.buffers[a.0 as usize].storage])
                    .collect();
                dev.launch(&compiled[&name], &program.name, &bufs)?;
            }
            Step::Copy { dst, src } => {
                let (d, sr) = (&s.buffers[dst.0 as usize], &s.buffers[src.0 as usize]);
                let src_dev = &devices[&sr.device.to_string()];
                let dst_dev = &devices[&d.device.to_string()];
                // Within one runtime a device copy (peer copy on a GPU); across runtimes
                // (a CPU buffer into a GPU buffer) staged through the host.
                runtime::copy_between(
                    src_dev.as_ref(),
                    &storages[&sr.storage],
                    dst_dev.as_ref(),
                    &storages[&d.storage],
                )?;
            }
        }
    }
    for d in devices.values() {
        d.synchronize()?;
    }
    // Outputs: read each buffer back, then apply the view.
    s.output_values(|b| {
        let b = &s.buffers[b.0 as usize];
        let bytes = devices[&b.device.to_string()].copy_out(&storages[&b.storage])?;
        Ok::<_, ExecError>(
            from_bytes(b.dtype, &bytes[..b.size * b.dtype.itemsize()])
                .into_iter()
                .map(Elem::Bits)
                .collect(),
        )
    })
}

/// The programs of the kernels that run on each runtime's devices (`"CPU"`, `"CUDA"`,
/// `"HIP"`), in step order: what one translation unit of that runtime holds. A CPU device's
/// loops and a GPU device's launch-index kernels never share a unit.
pub fn programs_by_runtime(
    s: &Schedule,
) -> Result<BTreeMap<&'static str, Vec<Program>>, ExecError> {
    let mut out: BTreeMap<&'static str, Vec<Program>> = BTreeMap::new();
    for st in &s.steps {
        if let Step::Kernel {
            device, program, ..
        } = st
        {
            let rt = match runtime::parse_device(&device.to_string())?.0 {
                "CUDA" => "CUDA",
                "HIP" => "HIP",
                _ => "CPU",
            };
            out.entry(rt).or_default().push(program.clone());
        }
    }
    Ok(out)
}

/// Little-endian bytes of elements (uninitialized ones become poison).
pub fn to_bytes(dt: DType, elems: &[Option<u64>]) -> Vec<u8> {
    let n = dt.itemsize();
    let mut out = Vec::with_capacity(elems.len() * n);
    for e in elems {
        match e {
            Some(bits) => out.extend_from_slice(&bits.to_le_bytes()[..n]),
            None => out.extend(std::iter::repeat_n(POISON, n)),
        }
    }
    out
}

pub fn from_bytes(dt: DType, bytes: &[u8]) -> Vec<u64> {
    let n = dt.itemsize();
    bytes
        .chunks_exact(n)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}
