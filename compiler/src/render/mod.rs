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

use uopkit_interp::kernel::{ParamDecl, Program};

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
/// compiled object, and its parameters (checked against the buffers at launch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSig {
    pub name: String,
    pub symbol: String,
    pub params: Vec<ParamDecl>,
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
