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
pub mod nan;
pub mod par;
pub mod stream;

use uopkit_interp::ir::Op;
use uopkit_interp::kernel::{KArg, ParamDecl, Program};
use uopkit_interp::scalar::cast::to_i128;

use crate::optimize::gpu::{grid_limit, MAX_WORKGROUP_DIMS, MAX_WORKGROUP_ITEMS};

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
    /// not a CONST, over `u32`, or empty; or the axis of a launch past a GPU's limits
    /// ([`Launch::check_limits`]). A SPECIAL the dialects cannot express (a dimension
    /// other than 0, 1, 2, an unknown name) is left out: it renders as an `#error` line, so
    /// the backend's compiler names it.
    pub fn of(p: &Program) -> Result<Launch, String> {
        let mut l = Launch::default();
        let mut global = [false; 3];
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
                continue;
            };
            if let Some(axis) = ["0", "1", "2"].iter().position(|a| *a == n) {
                slot[axis] = extent;
                if dim.starts_with("idx") {
                    global[axis] = true;
                }
            }
        }
        // `idxN` renders as blockIdx·blockDim + threadIdx: with work items on its axis it
        // would range over extent × block.
        if let Some(axis) = (0..3).find(|&a| global[a] && l.block[a] > 1) {
            return Err(format!(
                "idx{axis} (one item per workgroup) and lidx{axis} in one kernel"
            ));
        }
        l.check_limits()?;
        Ok(l)
    }

    /// Whether a GPU launches it: at most [`grid_limit`] workgroups along each axis and
    /// [`MAX_WORKGROUP_ITEMS`] work items a workgroup ([`MAX_WORKGROUP_DIMS`]
    /// along each axis): CUDA's limits, which the GPU pass keeps to for HIP too. A launch past
    /// them fails on a CUDA device, so the renderers refuse it with the axis and the limit.
    pub fn check_limits(&self) -> Result<(), String> {
        for (axis, &n) in self.grid.iter().enumerate() {
            let most = grid_limit(axis);
            if i128::from(n) > most {
                return Err(format!(
                    "{n} workgroups along axis {axis} (gidx{axis}): a GPU launches at most {most}"
                ));
            }
        }
        for (axis, (&n, &most)) in self.block.iter().zip(&MAX_WORKGROUP_DIMS).enumerate() {
            if n > most {
                return Err(format!(
                    "{n} work items along axis {axis} (lidx{axis}): a GPU workgroup has at most {most}"
                ));
            }
        }
        let items = self.block.iter().map(|&d| u64::from(d)).product::<u64>();
        if items > MAX_WORKGROUP_ITEMS {
            return Err(format!(
                "{items} work items in a workgroup: a GPU workgroup has at most {MAX_WORKGROUP_ITEMS}"
            ));
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use uopkit_interp::ir::DType;

    fn special(p: &mut Program, extent: u64, dim: &str) {
        let n = p.push(Op::CONST, DType::Int64, vec![], KArg::Const(extent));
        p.push(
            Op::SPECIAL,
            DType::Int64,
            vec![n],
            KArg::Special(dim.into()),
        );
    }

    #[test]
    fn launch_follows_the_specials() {
        let mut p = Program::new("k", vec![]);
        assert_eq!(Launch::of(&p), Ok(Launch::default()));
        special(&mut p, 7, "gidx0");
        special(&mut p, 3, "gidx2");
        special(&mut p, 8, "lidx0");
        special(&mut p, 5, "idx1");
        let l = Launch::of(&p).unwrap();
        assert_eq!(l.grid, [7, 5, 3]);
        assert_eq!(l.block, [8, 1, 1]);
        assert_eq!(l.items(), Some(7 * 5 * 3 * 8));
        // Dimensions no dialect can express are left to the #error line.
        special(&mut p, 9, "gidx3");
        assert_eq!(Launch::of(&p).unwrap(), l);
        // A global index beside work items on its axis has no launch.
        special(&mut p, 2, "lidx1");
        assert!(Launch::of(&p).unwrap_err().contains("idx1"));
    }

    #[test]
    fn launch_errors_name_the_instruction() {
        let mut p = Program::new("k", vec![]);
        special(&mut p, 0, "gidx0");
        assert!(Launch::of(&p)
            .unwrap_err()
            .contains("v1: SPECIAL gidx0 extent 0"));
        let mut p = Program::new("k", vec![]);
        special(&mut p, 1 << 33, "gidx0");
        assert!(Launch::of(&p).unwrap_err().contains("is not in 1..2^32"));
        let mut p = Program::new("k", vec![]);
        let x = p.push(Op::CONST, DType::Float32, vec![], KArg::Const(0x4000_0000));
        p.push(
            Op::SPECIAL,
            DType::Int64,
            vec![x],
            KArg::Special("lidx0".into()),
        );
        assert!(Launch::of(&p).unwrap_err().contains("no constant extent"));
    }

    #[test]
    fn a_launch_past_the_gpu_limits_is_refused_at_the_limit_plus_one() {
        let launch = |dims: &[(&str, u64)]| {
            let mut p = Program::new("k", vec![]);
            for &(dim, n) in dims {
                special(&mut p, n, dim);
            }
            Launch::of(&p)
        };
        assert!(launch(&[("gidx0", (1 << 31) - 1), ("gidx1", 65535), ("gidx2", 65535)]).is_ok());
        assert!(launch(&[("gidx0", 1 << 31)])
            .unwrap_err()
            .contains("axis 0 (gidx0)"));
        assert!(launch(&[("gidx1", 65536)])
            .unwrap_err()
            .contains("at most 65535"));
        assert!(launch(&[("gidx2", 65536)])
            .unwrap_err()
            .contains("axis 2 (gidx2)"));
        assert!(launch(&[("idx1", 65536)]).is_err());
        assert!(launch(&[("lidx0", 1024)]).is_ok());
        assert!(launch(&[("lidx0", 1025)]).unwrap_err().contains("lidx0"));
        assert!(launch(&[("lidx2", 64)]).is_ok());
        assert!(launch(&[("lidx2", 65)]).unwrap_err().contains("at most 64"));
        assert!(launch(&[("lidx0", 32), ("lidx1", 32)]).is_ok());
        assert!(launch(&[("lidx0", 32), ("lidx1", 33)])
            .unwrap_err()
            .contains("1056 work items in a workgroup"));
    }
}
