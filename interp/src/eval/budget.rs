//! The oracle's memory budget: a limit in bytes, checked against a conservative estimate of
//! the evaluation's peak **before** anything large is allocated.
//!
//! The limit is `UOPKIT_MEMORY_LIMIT` (bytes, with an optional `K`/`M`/`G`/`T` suffix, powers of
//! 1024), else half of `MemAvailable` in `/proc/meminfo`, else 4 GiB. The estimate adds up,
//! node by node in evaluation order, the bytes the evaluator keeps for each value (every value
//! is kept: [`super::Evaluation`] can return any node's value), the buffer versions STOREs
//! make, the index maps of views, and the temporaries of reductions; the outputs' public
//! [`super::Value`] form is counted too (callers read outputs through it).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::ir::{Arg, DType, Graph, NodeId, Op, ReduceOrder};
use crate::verify::{storage_view, Verified};

/// The environment variable that sets the limit.
pub const ENV: &str = "UOPKIT_MEMORY_LIMIT";

/// The limit when neither the variable nor `/proc/meminfo` says otherwise.
pub const FALLBACK_LIMIT: u64 = 4 << 30;

/// Parses a byte count: digits with an optional `K`, `M`, `G` or `T` suffix (powers of 1024;
/// a trailing `B`/`iB` is accepted: `512M`, `512MiB`, `1G`).
pub fn parse_limit(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix("ib"))
        .or_else(|| t.strip_suffix('B'))
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        Some('t' | 'T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{s:?} is not a byte count (digits with an optional K, M, G or T suffix)"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is too large a byte count"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large a byte count"))
}

/// Half of `MemAvailable` from `/proc/meminfo`, if it can be read.
fn half_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut it = line.split_whitespace().skip(1);
    let kb: u64 = it.next()?.parse().ok()?;
    Some(kb.saturating_mul(1024) / 2)
}

/// The default limit (read once per process, so one process judges every graph alike).
pub fn default_limit() -> u64 {
    static DEFAULT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| half_available().unwrap_or(FALLBACK_LIMIT))
}

/// The limit in force: `UOPKIT_MEMORY_LIMIT` when set, else [`default_limit`]. A value that is
/// not a byte count is an error naming the variable.
pub fn limit_from_env() -> std::result::Result<u64, String> {
    match std::env::var(ENV) {
        Ok(s) => parse_limit(&s).map_err(|r| format!("{ENV}: {r}")),
        Err(std::env::VarError::NotPresent) => Ok(default_limit()),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{ENV}: the value is not UTF-8")),
    }
}

/// Bytes per element of a value of `dt` in the evaluator's columns, given whether it may
/// hold poison (then each element also has an 8-byte poison word).
pub(super) fn elem_bytes(dt: DType, may_poison: bool) -> u64 {
    let bits = if dt.bits() <= 32 { 4 } else { 8 };
    bits + if may_poison { 8 } else { 0 }
}

/// Bytes of one element of the public [`super::Value`] form.
const PUBLIC_ELEM: u64 = std::mem::size_of::<super::Elem>() as u64;

/// Bytes of one entry of a view's index map.
const INDEX: u64 = 4;

/// Checks the estimated peak of evaluating `order` (the reachable nodes, sources first)
/// against `limit`, before anything is allocated. `poisoned(buffer)`: whether a buffer's
/// initial contents may hold unwritten elements. The error names the node at which the
/// running estimate first exceeds the limit and gives the whole estimate.
pub(super) fn check(
    g: &Graph,
    ver: &Verified,
    poisoned: &dyn Fn(NodeId) -> bool,
    order: &[NodeId],
    roots: &[NodeId],
    limit: u64,
) -> Result<u64> {
    let mut may_poison = vec![false; g.len()];
    // Whether some version of a buffer (by storage identity) may hold poison.
    let mut buffer_poison: BTreeMap<NodeId, bool> = BTreeMap::new();
    let mut total: u64 = 0;
    let mut first_over: Option<(NodeId, u64)> = None;
    let comps_of = |id: NodeId| {
        ver.info(id)
            .device
            .as_ref()
            .map_or(1, |d| d.devices().len()) as u64
    };
    // The storage identity (BUFFER/PARAM) of each storage node, memoized so that a chain of
    // AFTERs costs its length.
    let mut ident: Vec<Option<NodeId>> = vec![None; g.len()];
    let identity = |ident: &[Option<NodeId>], id: NodeId| -> Option<NodeId> {
        let (root, _) = storage_view(g, id)?;
        match g.node(root).op {
            Op::AFTER => ident[root.index()],
            _ => Some(root),
        }
    };
    for &id in order {
        let n = g.node(id);
        let info = ver.info(id);
        let ncomp = comps_of(id);
        let target = match n.op {
            Op::STORE | Op::AFTER => identity(&ident, n.src[0]),
            _ => None,
        };
        if n.op == Op::AFTER {
            ident[id.index()] = target;
        }
        let numel = info.numel() as u64;
        let src_poison = n.src.iter().any(|s| may_poison[s.index()]);
        let poison = match n.op {
            Op::BUFFER | Op::PARAM => {
                let p = poisoned(id);
                buffer_poison.insert(id, p);
                p
            }
            Op::CONST => false,
            Op::STORE => {
                if let Some(b) = target {
                    let e = buffer_poison.entry(b).or_insert(true);
                    *e |= src_poison;
                }
                false
            }
            Op::AFTER => match target {
                Some(b) => buffer_poison.get(&b).copied().unwrap_or(true) || src_poison,
                None => src_poison,
            },
            _ => src_poison,
        };
        may_poison[id.index()] = poison;
        let value = ncomp
            .saturating_mul(numel)
            .saturating_mul(elem_bytes(info.dtype, poison));
        let cost = match n.op {
            // Values shared with their source (no element is copied).
            Op::SINK
            | Op::GROUP
            | Op::CONST
            | Op::CONTIGUOUS
            | Op::DETACH
            | Op::RESHAPE
            | Op::MSELECT
            | Op::MSTACK
            | Op::COPY => 0,
            // The initial version; its value shares it.
            Op::BUFFER | Op::PARAM => value,
            // The gathered view and its index map.
            Op::AFTER => value.saturating_add(numel.saturating_mul(INDEX)),
            Op::STORE => {
                // A new version of the whole buffer, the target's index map and its inverse.
                let (buf_elems, buf_comps, dt, pb) = match target {
                    Some(b) => (
                        ver.info(b).numel() as u64,
                        comps_of(b),
                        ver.info(b).dtype,
                        buffer_poison.get(&b).copied().unwrap_or(true),
                    ),
                    None => (0, 1, DType::Void, true),
                };
                let version = buf_comps
                    .saturating_mul(buf_elems)
                    .saturating_mul(elem_bytes(dt, pb));
                version.saturating_add(buf_elems.saturating_mul(2 * INDEX))
            }
            Op::UNSHARD => value.saturating_add(numel.saturating_mul(PUBLIC_ELEM)),
            Op::REDUCE => {
                let split = match &n.arg {
                    Arg::Reduce {
                        order: ReduceOrder::Split(k) | ReduceOrder::ChunksOfSplit(_, k),
                        ..
                    } => (*k as u64).saturating_mul(PUBLIC_ELEM),
                    _ => 0,
                };
                value.saturating_add(split)
            }
            _ => value,
        };
        total = total.saturating_add(cost);
        if total > limit && first_over.is_none() {
            first_over = Some((id, cost));
        }
    }
    // The outputs' public form (callers read outputs through it).
    for &r in roots {
        let info = ver.info(r);
        let cost = (info.numel() as u64)
            .saturating_mul(comps_of(r))
            .saturating_mul(PUBLIC_ELEM);
        total = total.saturating_add(cost);
        if total > limit && first_over.is_none() {
            first_over = Some((r, cost));
        }
    }
    match first_over {
        None => Ok(total),
        Some((node, node_bytes)) => Err(Error::Memory {
            node,
            op: g.node(node).op,
            needed: total,
            node_bytes,
            limit,
        }),
    }
}

/// Bytes, for messages: exact count with a binary-unit approximation.
pub fn human(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (u, s) in UNITS {
        if bytes >= s {
            return format!("{bytes} bytes ({:.2} {u})", bytes as f64 / s as f64);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_byte_counts() {
        assert_eq!(parse_limit("123"), Ok(123));
        assert_eq!(parse_limit("4K"), Ok(4096));
        assert_eq!(parse_limit("512M"), Ok(512 << 20));
        assert_eq!(parse_limit("1G"), Ok(1 << 30));
        assert_eq!(parse_limit("1GiB"), Ok(1 << 30));
        assert_eq!(parse_limit(" 2g "), Ok(2 << 30));
        assert_eq!(parse_limit("3T"), Ok(3 << 40));
        assert!(parse_limit("").is_err());
        assert!(parse_limit("G").is_err());
        assert!(parse_limit("1.5G").is_err());
        assert!(parse_limit("-1").is_err());
        assert!(parse_limit("12X").is_err());
        assert!(parse_limit("99999999999999999999").is_err());
        assert!(parse_limit("99999999999T").is_err());
    }
}
