//! The renderers behind the `Renderer` trait: C, CUDA C and HIP C from one C-style base.
//! (No nvcc, hipcc or NVRTC is available here: the GPU texts are checked as text; compiling
//! them is the GPU runtime's job.)

use uopkit_compiler::render::{renderer, CStyle, Lang, RenderError};
use uopkit_interp::ir::{DType, Op};
use uopkit_interp::kernel::{KArg, ParamDecl, Program};

/// out[g*4 + l] = in[g*4 + (3 - l)] through a 4-element shared buffer and a barrier:
/// gidx0 in 0..2 (workgroups), lidx0 in 0..4 (items), idx1 in 0..1.
fn reverse_in_groups() -> Program {
    let decl = |written| ParamDecl {
        dtype: DType::Float32,
        size: 8,
        written,
    };
    let mut p = Program::new("rev", vec![decl(true), decl(false)]);
    let out = p.push(Op::PARAM, DType::Float32, vec![], KArg::Param(0));
    let inp = p.push(Op::PARAM, DType::Float32, vec![], KArg::Param(1));
    let sh = p.push(Op::BUFFER, DType::Float32, vec![], KArg::Local(4));
    let two = p.push(Op::CONST, DType::Int32, vec![], KArg::Const(2));
    let four = p.push(Op::CONST, DType::Int32, vec![], KArg::Const(4));
    let one = p.push(Op::CONST, DType::Int32, vec![], KArg::Const(1));
    let g = p.push(
        Op::SPECIAL,
        DType::Int32,
        vec![two],
        KArg::Special("gidx0".into()),
    );
    let l = p.push(
        Op::SPECIAL,
        DType::Int32,
        vec![four],
        KArg::Special("lidx0".into()),
    );
    let i = p.push(
        Op::SPECIAL,
        DType::Int32,
        vec![one],
        KArg::Special("idx1".into()),
    );
    let base = p.push(Op::MUL, DType::Int32, vec![g, four], KArg::None);
    let at = p.push(Op::ADD, DType::Int32, vec![base, l], KArg::None);
    let at = p.push(Op::ADD, DType::Int32, vec![at, i], KArg::None);
    let at64 = p.push(Op::CAST, DType::Int64, vec![at], KArg::None);
    let l64 = p.push(Op::CAST, DType::Int64, vec![l], KArg::None);
    let src = p.push(Op::INDEX, DType::Float32, vec![inp, at64], KArg::None);
    let x = p.push(Op::LOAD, DType::Float32, vec![src], KArg::None);
    let slot = p.push(Op::INDEX, DType::Float32, vec![sh, l64], KArg::None);
    let st = p.push(Op::STORE, DType::Void, vec![slot, x], KArg::None);
    p.push(Op::BARRIER, DType::Void, vec![st], KArg::None);
    let three = p.push(Op::CONST, DType::Int32, vec![], KArg::Const(3));
    let r = p.push(Op::SUB, DType::Int32, vec![three, l], KArg::None);
    let r64 = p.push(Op::CAST, DType::Int64, vec![r], KArg::None);
    let back = p.push(Op::INDEX, DType::Float32, vec![sh, r64], KArg::None);
    let y = p.push(Op::LOAD, DType::Float32, vec![back], KArg::None);
    let dst = p.push(Op::INDEX, DType::Float32, vec![out, at64], KArg::None);
    p.push(Op::STORE, DType::Void, vec![dst, y], KArg::None);
    p
}

/// The text after the prelude: the kernels.
fn kernels(source: &str) -> &str {
    &source[source.find("/* kernel ").expect("a kernel")..]
}

#[test]
fn cuda_renders_launch_indices_barriers_and_shared_memory() {
    let u = renderer(Lang::Cuda)
        .render(&[reverse_in_groups()])
        .expect("renders");
    assert_eq!(u.lang, Lang::Cuda);
    assert_eq!(u.kernels[0].symbol, "k_rev");
    assert_eq!(
        kernels(&u.source),
        r#"/* kernel rev */
extern "C" __global__ void k_rev(float *p0, float *p1) {
  float *v0 = p0;
  float *v1 = p1;
  __shared__ float v2[4];
  int32_t v3 = (int32_t)(2ll);
  int32_t v4 = (int32_t)(4ll);
  int32_t v5 = (int32_t)(1ll);
  int32_t v6 = (int32_t)(blockIdx.x); /* gidx0 < v3 */
  int32_t v7 = (int32_t)(threadIdx.x); /* lidx0 < v4 */
  int32_t v8 = (int32_t)((int64_t)blockIdx.y * (int64_t)blockDim.y + (int64_t)threadIdx.y); /* idx1 < v5 */
  int32_t v9 = (int32_t)((uint32_t)v6 * (uint32_t)v4);
  int32_t v10 = (int32_t)((uint32_t)v9 + (uint32_t)v7);
  int32_t v11 = (int32_t)((uint32_t)v10 + (uint32_t)v8);
  int64_t v12 = (int64_t)v11;
  int64_t v13 = (int64_t)v7;
  float *v14 = v1 + v12;
  float v15 = *v14;
  float *v16 = v2 + v13;
  *v16 = v15;
  __syncthreads();
  int32_t v19 = (int32_t)(3ll);
  int32_t v20 = (int32_t)((uint32_t)v19 - (uint32_t)v7);
  int64_t v21 = (int64_t)v20;
  float *v22 = v2 + v21;
  float v23 = *v22;
  float *v24 = v0 + v12;
  *v24 = v23;
}
"#
    );
    // The prelude: the C helpers as device functions, builtin types only.
    let prelude = &u.source[..u.source.find("/* kernel ").expect("a kernel")];
    for absent in ["#include", "static inline", "volatile", "__builtin_clzll"] {
        assert!(!prelude.contains(absent), "{absent} in the CUDA prelude");
    }
    for present in [
        "#define UK_FN static __device__ inline",
        "typedef long long int64_t;",
        "UK_FN uint32_t uk_sf_add(uint32_t a, uint32_t b, UK_FMT)",
        "UK_FN double uk_exp2(double x) { return exp2(x); }",
        "#define UK_CLZLL(x) __clzll((long long)(x))",
    ] {
        assert!(prelude.contains(present), "{present} missing:\n{prelude}");
    }
}

#[test]
fn hip_is_the_same_dialect_with_its_own_name() {
    let p = [reverse_in_groups()];
    let cuda = renderer(Lang::Cuda).render(&p).expect("renders");
    let hip = renderer(Lang::Hip).render(&p).expect("renders");
    assert_eq!(hip.lang, Lang::Hip);
    assert_eq!(kernels(&hip.source), kernels(&cuda.source));
    assert!(hip.source.starts_with("/* generated by uopkit (HIP)"));
    assert!(hip
        .source
        .contains("#define UK_CLZLL(x) __builtin_clzll(x)"));
}

#[test]
fn c_keeps_rendering_gpu_constructs_as_errors() {
    let u = renderer(Lang::C)
        .render(&[reverse_in_groups()])
        .expect("renders");
    assert_eq!(u, uopkit_compiler::render::c_unit(&[reverse_in_groups()]));
    assert_eq!(u.source, CStyle::C.source(&[reverse_in_groups()]));
    for line in [
        "#error \"uopkit C renderer: v2: BUFFER without a Reg size\"",
        "#error \"uopkit C renderer: v6: op SPECIAL is not supported by the C backend\"",
        "#error \"uopkit C renderer: v18: op BARRIER is not supported by the C backend\"",
    ] {
        assert!(u.source.contains(line), "{line} missing:\n{}", u.source);
    }
}

#[test]
fn unknown_launch_dimensions_are_error_lines() {
    let mut p = Program::new("bad", vec![]);
    let n = p.push(Op::CONST, DType::Int32, vec![], KArg::Const(2));
    p.push(
        Op::SPECIAL,
        DType::Int32,
        vec![n],
        KArg::Special("gidx3".into()),
    );
    p.push(
        Op::SPECIAL,
        DType::Int32,
        vec![n],
        KArg::Special("warp0".into()),
    );
    let src = renderer(Lang::Cuda).render(&[p]).expect("renders").source;
    assert!(
        src.contains("#error \"uopkit CUDA renderer: v1: SPECIAL gidx3: only dimensions 0, 1 and 2 exist on the device\""),
        "{src}"
    );
    assert!(
        src.contains(
            "#error \"uopkit CUDA renderer: v2: SPECIAL warp0: unknown launch dimension\""
        ),
        "{src}"
    );
}

#[test]
fn kernels_with_one_symbol_are_refused() {
    let a = Program::new("x/y", vec![]);
    let b = Program::new("x_y", vec![]);
    for lang in [Lang::C, Lang::Cuda, Lang::Hip] {
        let r = renderer(lang);
        assert_eq!(r.lang(), lang);
        assert_eq!(
            r.render(&[a.clone(), b.clone()]),
            Err(RenderError::DuplicateSymbol {
                lang,
                symbol: "k_x_y".into(),
                first: "x/y".into(),
                second: "x_y".into(),
            })
        );
    }
}
