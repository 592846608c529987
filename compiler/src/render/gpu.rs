//! The CUDA and HIP dialects of the C-style base ([`super::c::CStyle`]): what differs from C.
//!
//! * Kernel: `extern "C" __global__ void k_<name>(T *p0, T *p1, …)`, param `i` is `p<i>`
//!   (element pointer of its dtype's storage type; the launch passes one device pointer per
//!   param, in slot order). Symbols as in C ([`super::c_symbol`]).
//! * SPECIAL `gidxN` → `blockIdx.{x,y,z}`, `lidxN` → `threadIdx.{x,y,z}`, `idxN` →
//!   `blockIdx.N * blockDim.N + threadIdx.N` (N = 0, 1, 2), as int64. The launch must use the
//!   SPECIALs' extents as grid and block sizes (no bounds guard is rendered).
//! * BARRIER → `__syncthreads();`; a `Local(n)` BUFFER → `__shared__ T vK[n];`.
//! * Prelude: the C prelude's exact helpers, derived from `prelude.h` text so the two stay
//!   one definition: `static inline` becomes `UK_FN` (`static __device__ inline`), the
//!   standard headers are replaced by builtin typedefs (no CUDA or system headers are
//!   needed), `__builtin_clzll` becomes `UK_CLZLL` (`__clzll` on CUDA), and libm goes to
//!   the device's double functions directly (glibc's volatile pointers have no device
//!   equivalent; how far the device's `exp2`/`log2`/`sin`/`pow` may be from the oracle is
//!   for the GPU backend's allowances).

use uopkit_interp::ir::{DType, Op};
use uopkit_interp::kernel::{KArg, Program};

use super::c::{c_symbol, ctype, PRELUDE};
use super::Lang;

/// The device prelude for `lang` (CUDA or HIP): definitions, then the C prelude adapted.
pub fn prelude(lang: Lang) -> String {
    let mut out = String::with_capacity(PRELUDE.len() + 1024);
    out.push_str(&format!(
        "/* ---- uopkit {lang} prelude: builtin types, then the C prelude's exact helpers as device functions ---- */\n"
    ));
    out.push_str(
        "typedef signed char int8_t;\n\
         typedef unsigned char uint8_t;\n\
         typedef short int16_t;\n\
         typedef unsigned short uint16_t;\n\
         typedef int int32_t;\n\
         typedef unsigned int uint32_t;\n\
         typedef long long int64_t;\n\
         typedef unsigned long long uint64_t;\n\
         #define INT8_MIN (-127 - 1)\n\
         #define INT16_MIN (-32767 - 1)\n\
         #define INT32_MIN (-2147483647 - 1)\n\
         #define INT64_MIN (-9223372036854775807ll - 1)\n\
         #define UK_FN static __device__ inline\n",
    );
    out.push_str(match lang {
        Lang::Cuda => "#define UK_CLZLL(x) __clzll((long long)(x))\n",
        _ => "#define UK_CLZLL(x) __builtin_clzll(x)\n",
    });
    if lang == Lang::Hip {
        // hiprtc (ROCm 5.2, seen in its disassembly) compiles `sqrtf` to the bare
        // `v_sqrt_f32`, which may be 1 ulp off, whatever the flags; the double square root is
        // a refined sequence. The square root of the exact double, rounded once to float, is
        // the correctly rounded float32 root (53 >= 2*24 + 2: double rounding is innocuous).
        out.push_str(
            "UK_FN float uk_sqrt_f32(float x) { return (float)sqrt((double)x); }\n\
             #define sqrtf(x) uk_sqrt_f32(x)\n",
        );
    }
    let mut in_libm_comment = false;
    for line in PRELUDE.lines() {
        if line.starts_with("#include") || line.contains("(*volatile uk_") {
            continue;
        }
        if line.starts_with("/* libm through volatile pointers") {
            in_libm_comment = !line.ends_with("*/");
            out.push_str("/* libm: the device's double functions. */\n");
            continue;
        }
        if in_libm_comment {
            in_libm_comment = !line.ends_with("*/");
            continue;
        }
        let line = if line.starts_with("/* ---- uopkit C prelude") {
            "/* ---- exact scalar semantics (mirrors uopkit_interp::scalar) ---- */".to_string()
        } else {
            line.replace("static inline ", "UK_FN ")
                .replace("__builtin_clzll(", "UK_CLZLL(")
                .replace("uk_exp2_p(", "exp2(")
                .replace("uk_log2_p(", "log2(")
                .replace("uk_sin_p(", "sin(")
                .replace("uk_pow_p(", "pow(")
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `extern "C" __global__ void k_<name>(T *p0, …)`.
pub fn signature(p: &Program) -> String {
    let params: Vec<String> = p
        .params
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{} *p{i}", ctype(d.dtype)))
        .collect();
    format!(
        "extern \"C\" __global__ void {}({})",
        c_symbol(&p.name),
        params.join(", ")
    )
}

/// The dialect's own rendering of instruction `i`, or None where the C-style base renders
/// it (always None for C, whose base renders SPECIAL and BARRIER as `#error` lines).
pub fn inst(lang: Lang, p: &Program, i: usize) -> Option<Result<String, String>> {
    if lang == Lang::C {
        return None;
    }
    let inst = &p.insts[i];
    let name = format!("v{i}");
    let t = ctype(inst.dtype);
    Some(match (inst.op, &inst.arg) {
        (Op::PARAM, KArg::Param(slot)) if (*slot as usize) < p.params.len() => {
            Ok(format!("{t} *{name} = p{slot};"))
        }
        (Op::BUFFER, KArg::Local(n)) => Ok(format!("__shared__ {t} {name}[{}];", (*n).max(1))),
        (Op::BARRIER, _) => Ok("__syncthreads();".to_string()),
        (Op::SPECIAL, KArg::Special(dim)) => special(dim, inst.dtype).map(|e| {
            let end = match inst.src.first() {
                Some(e) if e.index() < i => format!(" /* {dim} < {e} */"),
                _ => String::new(),
            };
            format!("{t} {name} = ({t})({e});{end}")
        }),
        (Op::SPECIAL, _) => Err("SPECIAL without a dimension name".to_string()),
        _ => return None,
    })
}

/// The launch index expression of a SPECIAL dimension (`gidx0`, `lidx1`, `idx2`).
fn special(dim: &str, dt: DType) -> Result<String, String> {
    if !dt.is_int() {
        return Err(format!("SPECIAL {dim} of dtype {dt}"));
    }
    let axis = |n: &str| match n {
        "0" => Ok("x"),
        "1" => Ok("y"),
        "2" => Ok("z"),
        _ => Err(format!(
            "SPECIAL {dim}: only dimensions 0, 1 and 2 exist on the device"
        )),
    };
    if let Some(n) = dim.strip_prefix("gidx") {
        Ok(format!("blockIdx.{}", axis(n)?))
    } else if let Some(n) = dim.strip_prefix("lidx") {
        Ok(format!("threadIdx.{}", axis(n)?))
    } else if let Some(n) = dim.strip_prefix("idx") {
        let a = axis(n)?;
        Ok(format!(
            "(int64_t)blockIdx.{a} * (int64_t)blockDim.{a} + (int64_t)threadIdx.{a}"
        ))
    } else {
        Err(format!("SPECIAL {dim}: unknown launch dimension"))
    }
}
