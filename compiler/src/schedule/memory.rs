//! Memory planning: intermediate buffers whose lifetimes (first write to last read, in run
//! order) do not overlap share one storage on their device. Graph buffers and outputs keep
//! their own storage.

use std::collections::BTreeSet;

use super::realize::PlannedStep;
use super::{BufId, BufferDecl, BufferKind};

/// Assigns `storage` for every buffer; returns the number of storages.
pub fn plan(buffers: &mut [BufferDecl], steps: &[&PlannedStep], keep: &BTreeSet<BufId>) -> u32 {
    let n = buffers.len();
    let (mut first, mut last) = (vec![usize::MAX; n], vec![0usize; n]);
    for (i, s) in steps.iter().enumerate() {
        let touched = s
            .reads
            .iter()
            .map(|r| r.0)
            .chain(std::iter::once(s.write.0));
        for b in touched {
            let b = b.0 as usize;
            first[b] = first[b].min(i);
            last[b] = last[b].max(i);
        }
    }
    // (storage id, device, bytes, busy until step)
    let mut pool: Vec<(u32, uopkit_interp::ir::Device, usize, usize)> = vec![];
    let mut next_storage = 0u32;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&b| (first[b], b));
    for b in order {
        let shareable = buffers[b].kind == BufferKind::Intermediate
            && !keep.contains(&BufId(b as u32))
            && first[b] != usize::MAX;
        let bytes = buffers[b].size * buffers[b].dtype.itemsize();
        if shareable {
            if let Some(slot) = pool
                .iter_mut()
                .find(|(_, d, _, busy)| *d == buffers[b].device && *busy < first[b])
            {
                slot.2 = slot.2.max(bytes);
                slot.3 = last[b];
                buffers[b].storage = slot.0;
                continue;
            }
        }
        buffers[b].storage = next_storage;
        if shareable {
            pool.push((next_storage, buffers[b].device, bytes, last[b]));
        }
        next_storage += 1;
    }
    next_storage
}
