//! Renderers: kernel-level [`Program`]s → source text for a backend's compiler, as a
//! [`Unit`] (the text plus each kernel's symbol and parameters) that a runtime compiles.
//!
//! * [`Renderer`]: the interface (`lang`, `render`); [`renderer`] gives the one for a
//!   [`Lang`]. A runtime's device says which language it compiles (`Device::lang`), and
//!   `exec` asks for that renderer.
//! * [`c`]: the C-style base ([`c::CStyle`], like tinygrad's `CStyleLanguage`) and its three
//!   dialects: C (one translation unit, bit-exact with the oracle's scalar semantics
//!   (`uopkit_interp::scalar`) when compiled with `-ffp-contract=off`), CUDA C and HIP C
//!   (`__global__` kernels, launch indices, barriers, shared memory; [`gpu`]: their prelude).

pub mod c;
pub mod gpu;

use uopkit_interp::ir::Op;
use uopkit_interp::scalar::cast::to_i128;
use uopkit_interp::kernel::{KArg, ParamDecl, Program};

pub use c::{c_symbol, c_unit, render_c, CStyle};

/// The source language of a [`Unit`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lang {
    /// C99 with `<stdint.h>`/`<math.h>`; kernels are `void sym(void **args)`.
    C,
    /// CUDA C++ for NVRTC (no headers: builtin types only); kernels are
    /// `extern "C" __global__ void sym(T *p0, …)`.
    Cuda,
    /// HIP C++ for hipRTC, the same text form as [`Lang::Cuda`].
    Hip,
}

impl Lang {
    /// `"C"`, `"CUDA"`, `"HIP"`.
    pub fn name(self) -> &'static str {
        match self {
            Lang::C => "C",
            Lang::Cuda => "CUDA",
            Lang::Hip => "HIP",
        }
    }
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One kernel of a unit: the program's name (what `launch` takes), its symbol in the
/// compiled object, its parameters (checked against the buffers at launch) and its launch
/// dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSig {
    pub name: String,
    pub symbol: String,
    pub params: Vec<ParamDecl>,
    /// The grid and workgroup sizes the kernel's SPECIALs assume ([`Launch::of`]); all ones
    /// for a program without SPECIALs (every C kernel).
    pub launch: Launch,
}

/// Launch dimensions of one kernel: `grid[N]` workgroups along axis N (the extent of
/// `gidxN` or `idxN`), `block[N]` work items per workgroup (the extent of `lidxN`). A GPU
/// runtime launches exactly this (the rendered code has no bounds guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
}

impl Default for Launch {
    fn default() -> Self {
        Launch {
            grid: [1; 3],
            block: [1; 3],
        }
    }
}

impl Launch {
    /// The launch the SPECIALs of `p` declare. Errors name the instruction: an extent that is
    /// not a CONST, a dimension other than 0, 1, 2, an extent over `u32`, or an empty one.
    pub fn of(p: &Program) -> Result<Launch, String> {
        let mut l = Launch::default();
        for (i, inst) in p.insts.iter().enumerate() {
            if inst.op != Op::SPECIAL {
                continue;
            }
            let KArg::Special(dim) = &inst.arg else {
                return Err(format!("v{i}: SPECIAL without a dimension name"));
            };
            let extent = inst
                .src
                .first()
                .and_then(|e| p.insts.get(e.index()))
                .and_then(|e| match (&e.op, &e.arg) {
                    (Op::CONST, KArg::Const(c)) if e.dtype.is_int() => Some(to_i128(e.dtype, *c)),
                    _ => None,
                })
                .ok_or_else(|| format!("v{i}: SPECIAL {dim} has no constant extent"))?;
            let extent = u32::try_from(extent)
                .ok()
                .filter(|&e| e > 0)
                .ok_or_else(|| format!("v{i}: SPECIAL {dim} extent {extent} is not in 1..2^32"))?;
            let (slot, n) = if let Some(n) = dim.strip_prefix("lidx") {
                (&mut l.block, n)
            } else if let Some(n) = dim.strip_prefix("gidx").or_else(|| dim.strip_prefix("idx")) {
                (&mut l.grid, n)
            } else {
                return Err(format!("v{i}: SPECIAL {dim}: unknown launch dimension"));
            };
            let axis = match n {
                "0" => 0,
                "1" => 1,
                "2" => 2,
                _ => return Err(format!("v{i}: SPECIAL {dim}: only dimensions 0, 1 and 2 exist")),
            };
            slot[axis] = extent;
        }
        Ok(l)
    }

    /// Work items in all (checked: None when it overflows `u64`, which cannot happen for
    /// three `u32` factors of each kind but is kept honest).
    pub fn items(&self) -> Option<u64> {
        self.grid
            .iter()
            .chain(self.block.iter())
            .try_fold(1u64, |n, &d| n.checked_mul(u64::from(d)))
    }
}

/// A rendered translation unit: the input of a runtime's `Device::compile`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub lang: Lang,
    pub source: String,
    pub kernels: Vec<KernelSig>,
}

impl Unit {
    /// Renders `programs` as one C unit (see [`c`]).
    pub fn c(programs: &[Program]) -> Unit {
        c_unit(programs)
    }

    pub fn kernel(&self, name: &str) -> Option<&KernelSig> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

/// Why programs could not be rendered. (Constructs a language cannot express are not
/// errors here: they render as `#error` lines, so the backend's compiler names them.)
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// Two kernels of one unit would have the same symbol.
    #[error(
        "{lang} renderer: kernels '{first}' and '{second}' both render to the symbol {symbol}"
    )]
    DuplicateSymbol {
        lang: Lang,
        symbol: String,
        first: String,
        second: String,
    },
    /// A GPU kernel's SPECIALs do not describe a launch ([`Launch::of`]).
    #[error("{lang} renderer: kernel '{kernel}': {reason}")]
    Launch {
        lang: Lang,
        kernel: String,
        reason: String,
    },
}

/// A renderer: one language's text for a list of programs (one unit, deterministic).
pub trait Renderer: Send + Sync {
    /// The language it writes.
    fn lang(&self) -> Lang;
    /// One unit for `programs`, kernels in order.
    fn render(&self, programs: &[Program]) -> Result<Unit, RenderError>;
}

/// The renderer for `lang`.
pub fn renderer(lang: Lang) -> &'static dyn Renderer {
    match lang {
        Lang::C => &CStyle::C,
        Lang::Cuda => &CStyle::CUDA,
        Lang::Hip => &CStyle::HIP,
    }
}
