//! The on-disk entry: the compiler's object followed by a checksum trailer, its name from
//! the key and its kind, and the checks made before anything is loaded or returned.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const TRAILER_MAGIC: &[u8; 8] = b"UOPKSUM1";
/// magic ‖ object length ‖ inputs digest ‖ checksum.
const TRAILER_LEN: usize = 8 + 8 + 32 + 32;
const ENTRY_TAG: &[u8] = b"uopkit-entry-1";

pub(super) fn key_of(inputs: &[u8; 32]) -> u128 {
    let mut k = [0u8; 16];
    k.copy_from_slice(&inputs[..16]);
    u128::from_be_bytes(k)
}

/// What an entry holds; the file name's extension says which, and which check its payload
/// must pass.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// `k_<key>.so`: a C compiler's ELF shared object ([`check_elf`]).
    SharedObject,
    /// `k_<key>.gpu`: a GPU compiler's image: a CUBIN or AMDGPU code object (ELF), a clang
    /// offload bundle, or NUL-terminated PTX text ([`check_gpu_image`]).
    GpuImage,
}

impl Kind {
    pub(super) const ALL: [Kind; 2] = [Kind::SharedObject, Kind::GpuImage];

    /// The file name's extension, without the dot.
    pub(super) fn ext(self) -> &'static str {
        match self {
            Kind::SharedObject => "so",
            Kind::GpuImage => "gpu",
        }
    }

    fn check(self, payload: &[u8]) -> std::result::Result<(), String> {
        match self {
            Kind::SharedObject => {
                check_elf(payload).map_err(|why| format!("is not a usable shared object ({why})"))
            }
            Kind::GpuImage => {
                check_gpu_image(payload).map_err(|why| format!("is not a GPU image ({why})"))
            }
        }
    }
}

pub(super) fn entry_path(dir: &Path, key: u128, kind: Kind) -> PathBuf {
    dir.join(format!("k_{key:032x}.{}", kind.ext()))
}

fn checksum(inputs: &[u8; 32], object: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(ENTRY_TAG);
    h.update(inputs);
    h.update(object);
    h.finalize().into()
}

pub(super) fn trailer(inputs: &[u8; 32], object: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER_LEN);
    t.extend_from_slice(TRAILER_MAGIC);
    t.extend_from_slice(&(object.len() as u64).to_le_bytes());
    t.extend_from_slice(inputs);
    t.extend_from_slice(&checksum(inputs, object));
    t
}

/// Checks a whole entry file of `kind`; returns the object's length, or what is wrong.
/// `inputs`, when known, must equal the trailer's digest; the file's key must be the digest's
/// prefix; the payload must pass its kind's check.
pub(super) fn check_entry(
    bytes: &[u8],
    inputs: Option<&[u8; 32]>,
    key: u128,
    kind: Kind,
) -> std::result::Result<usize, String> {
    if bytes.is_empty() {
        return Err("is empty".into());
    }
    let Some(obj_len) = bytes.len().checked_sub(TRAILER_LEN) else {
        return Err(format!(
            "is too short ({} bytes) to hold a checksum trailer",
            bytes.len()
        ));
    };
    let (object, t) = bytes.split_at(obj_len);
    if &t[..8] != TRAILER_MAGIC {
        return Err("has no checksum trailer (truncated, or not written by this uopkit)".into());
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&t[8..16]);
    if u64::from_le_bytes(len) != obj_len as u64 {
        return Err("has the wrong length for its trailer (truncated or extended)".into());
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&t[16..48]);
    if t[48..] != checksum(&digest, object) {
        return Err("fails its checksum (corrupted)".into());
    }
    if key_of(&digest) != key || inputs.is_some_and(|i| *i != digest) {
        return Err("holds the kernel of another unit (swapped or copied)".into());
    }
    kind.check(object)?;
    Ok(obj_len)
}

/// A sanity check of a GPU compiler's image: an ELF file (CUBIN, AMDGPU code object) whose
/// headers lie inside it, a clang offload bundle, or PTX text ending in its NUL.
pub(super) fn check_gpu_image(b: &[u8]) -> std::result::Result<(), String> {
    const BUNDLE: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
    if b.starts_with(b"\x7fELF") {
        return check_elf_layout(b, false);
    }
    if b.starts_with(BUNDLE) {
        return if b.len() > BUNDLE.len() + 8 {
            Ok(())
        } else {
            Err("a truncated offload bundle".into())
        };
    }
    match b.split_last() {
        Some((0, text)) if std::str::from_utf8(text).is_ok_and(|t| t.contains(".target")) => Ok(()),
        Some(_) => Err("neither ELF, an offload bundle, nor NUL-terminated PTX".into()),
        None => Err("empty".into()),
    }
}

/// A sanity check of an ELF shared object: header, type, and that the program headers,
/// loadable segments and section headers lie inside the file.
pub(super) fn check_elf(b: &[u8]) -> std::result::Result<(), String> {
    check_elf_layout(b, true)
}

/// An ELF file's header, and that its program headers, loadable segments and section
/// headers lie inside it. `shared`: it must be a shared object with program headers (a
/// GPU image may be another type, or have none).
fn check_elf_layout(b: &[u8], shared: bool) -> std::result::Result<(), String> {
    if b.len() < 16 || &b[..4] != b"\x7fELF" {
        return Err("no ELF header".into());
    }
    let is64 = match b[4] {
        1 => false,
        2 => true,
        c => return Err(format!("unknown ELF class {c}")),
    };
    let le = match b[5] {
        1 => true,
        2 => false,
        d => return Err(format!("unknown ELF data encoding {d}")),
    };
    let rd = |off: u64, n: usize| -> Option<u64> {
        let off = usize::try_from(off).ok()?;
        let s = b.get(off..off.checked_add(n)?)?;
        Some(s.iter().enumerate().fold(0u64, |v, (i, &x)| {
            let shift = if le { 8 * i } else { 8 * (n - 1 - i) };
            v | (x as u64) << shift
        }))
    };
    let truncated = || "truncated ELF header".to_string();
    let (w, ehsize, phdr_min) = if is64 { (8, 64, 56) } else { (4, 52, 32) };
    if b.len() < ehsize {
        return Err(truncated());
    }
    // Offsets of e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum.
    let [o_ph, o_sh, o_phe, o_phn, o_she, o_shn] = if is64 {
        [32, 40, 54, 56, 58, 60]
    } else {
        [28, 32, 42, 44, 46, 48]
    };
    let field = |off: u64, n| rd(off, n).ok_or_else(truncated);
    let e_type = field(16, 2)?;
    let (phoff, shoff) = (field(o_ph, w)?, field(o_sh, w)?);
    let (phentsize, phnum) = (field(o_phe, 2)?, field(o_phn, 2)?);
    let (shentsize, shnum) = (field(o_she, 2)?, field(o_shn, 2)?);
    if shared && e_type != 3 {
        return Err(format!("ELF type {e_type}, not a shared object"));
    }
    let len = b.len() as u64;
    let fits = |off: u64, size: u64| off.checked_add(size).is_some_and(|end| end <= len);
    if phnum > 0 && phentsize < phdr_min || shared && phnum == 0 {
        return Err("no program headers".into());
    }
    if !fits(phoff, phentsize * phnum) {
        return Err("program headers past the end of the file (truncated)".into());
    }
    for i in 0..phnum {
        let p = phoff + i * phentsize;
        let bad = || "a program header cannot be read".to_string();
        let p_type = rd(p, 4).ok_or_else(bad)?;
        let (off, filesz) = if is64 {
            (rd(p + 8, 8), rd(p + 32, 8))
        } else {
            (rd(p + 4, 4), rd(p + 16, 4))
        };
        let (off, filesz) = (off.ok_or_else(bad)?, filesz.ok_or_else(bad)?);
        if p_type == 1 && !fits(off, filesz) {
            return Err("a loadable segment extends past the end of the file (truncated)".into());
        }
    }
    if shoff != 0 && !fits(shoff, shentsize * shnum) {
        return Err("section headers past the end of the file (truncated)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_check_rejects_junk() {
        assert!(check_elf(b"").is_err());
        assert!(check_elf(b"hello world, not an elf").is_err());
        let mut hdr = vec![0u8; 64];
        hdr[..4].copy_from_slice(b"\x7fELF");
        hdr[4] = 2;
        hdr[5] = 1;
        hdr[16] = 3;
        assert!(check_elf(&hdr).unwrap_err().contains("program headers"));
        // Program headers past the end.
        hdr[32] = 64; // e_phoff
        hdr[54] = 56; // e_phentsize
        hdr[56] = 1; // e_phnum
        assert!(check_elf(&hdr).unwrap_err().contains("truncated"));
    }
}
