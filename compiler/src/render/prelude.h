/* ---- uopkit C prelude: exact scalar semantics (mirrors uopkit_interp::scalar) ---- */
#include <stdint.h>
#include <string.h>
#include <math.h>

/* Kernel params are restrict unless the unit is compiled for aliasing buffers. */
#ifndef UK_RESTRICT
#define UK_RESTRICT restrict
#endif

/* Streaming stores for large elementwise loops (render/stream.rs): a block of values, one
   64-byte line of the output, written past the caches when it is a whole aligned line and
   the target has AVX, else copied. UK_STREAMING is 0 in units compiled for aliasing buffers
   (the loop then stores each element directly, in order). */
#ifndef UK_STREAMING
#define UK_STREAMING 1
#endif
static inline int64_t uk_line_end(int64_t b, int64_t hi, int64_t n) {
  int64_t e = (b / n + 1) * n;
  return e < hi ? e : hi;
}
#if defined(__x86_64__) && defined(__AVX__)
typedef float uk_v8f __attribute__((vector_size(32), may_alias));
static inline void uk_stream_put(void *dst, const void *src, int64_t bytes) {
  if (bytes == 64 && ((uintptr_t)dst & 63) == 0) {
    __builtin_ia32_movntps256((float *)dst, ((const uk_v8f *)src)[0]);
    __builtin_ia32_movntps256((float *)dst + 8, ((const uk_v8f *)src)[1]);
  } else {
    memcpy(dst, src, (size_t)bytes);
  }
}
/* Streaming stores are weakly ordered: fenced before the loop's function returns. */
static inline void uk_stream_fence(void) { __builtin_ia32_sfence(); }
#else
static inline void uk_stream_put(void *dst, const void *src, int64_t bytes) {
  memcpy(dst, src, (size_t)bytes);
}
static inline void uk_stream_fence(void) {}
#endif

/* Narrow float formats as (exponent bits, mantissa bits, has infinities). */
#define UK_F16 5, 10, 1
#define UK_BF16 8, 7, 1
#define UK_E4M3 4, 3, 0
#define UK_E5M2 5, 2, 1
#define UK_FMT int E, int M, int INF
#define UK_F E, M, INF

static inline uint32_t uk_bits_f32(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float uk_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline uint64_t uk_bits_f64(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline double uk_f64(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* A NaN produced by arithmetic is the canonical quiet NaN with the sign clear. */
static inline float uk_canon_f32(float x) { return x != x ? uk_f32(0x7fc00000u) : x; }
static inline double uk_canon_f64(double x) { return x != x ? uk_f64(0x7ff8000000000000ull) : x; }
/* A NaN produced by a cast is the canonical quiet NaN keeping its sign. */
static inline float uk_to_f32(double x) {
  return x != x ? uk_f32((uint32_t)(uk_bits_f64(x) >> 32 & 0x80000000u) | 0x7fc00000u) : (float)x;
}
static inline double uk_to_f64(double x) {
  return x != x ? uk_f64((uk_bits_f64(x) & 0x8000000000000000ull) | 0x7ff8000000000000ull) : x;
}
/* NEG is a sign-bit flip (NaN included). */
static inline float uk_neg_f32(float x) { return uk_f32(uk_bits_f32(x) ^ 0x80000000u); }
static inline double uk_neg_f64(double x) { return uk_f64(uk_bits_f64(x) ^ 0x8000000000000000ull); }

/* libm through volatile pointers: the C compiler must not constant-fold or narrow these
   (its folding is correctly rounded, glibc's functions are not always). */
static double (*volatile uk_exp2_p)(double) = exp2;
static double (*volatile uk_log2_p)(double) = log2;
static double (*volatile uk_sin_p)(double) = sin;
static double (*volatile uk_pow_p)(double, double) = pow;
static inline double uk_exp2(double x) { return uk_exp2_p(x); }
static inline double uk_log2(double x) { return uk_log2_p(x); }
static inline double uk_sin(double x) { return uk_sin_p(x); }
static inline double uk_pow(double x, double y) { return uk_pow_p(x, y); }

/* Integer floor division and modulo (Python semantics; operands are never UB here). */
#define UK_FLOOR(S, T)                                                                    \
  static inline T uk_floordiv_##S(T a, T b) {                                              \
    T q = (T)(a / b), r = (T)(a % b);                                                      \
    return (T)(q - (r != 0 && ((r < 0) != (b < 0))));                                      \
  }                                                                                        \
  static inline T uk_floormod_##S(T a, T b) {                                              \
    T r = (T)(a % b);                                                                      \
    return (T)(r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0));                            \
  }
UK_FLOOR(i8, int8_t)
UK_FLOOR(i16, int16_t)
UK_FLOOR(i32, int32_t)
UK_FLOOR(i64, int64_t)

/* ---- narrow floats (float16, bfloat16, fp8): bits in, bits out, exact via double ---- */
static inline double uk_pow2(int k) { return uk_f64((uint64_t)(k + 1023) << 52); }

static inline uint32_t uk_sf_canon(UK_FMT) {
  uint32_t exp_all = ((1u << E) - 1) << M;
  return INF ? exp_all | (1u << (M - 1)) : exp_all | ((1u << M) - 1);
}
static inline int uk_sf_isnan(uint32_t b, UK_FMT) {
  uint32_t eall = (1u << E) - 1, mall = (1u << M) - 1;
  uint32_t e = (b >> M) & eall, m = b & mall;
  return INF ? (e == eall && m != 0) : (e == eall && m == mall);
}
/* Exact decode (NaN keeps its sign). */
static inline double uk_sf_dec(uint32_t b, UK_FMT) {
  uint32_t eall = (1u << E) - 1;
  uint32_t e = (b >> M) & eall, m = b & ((1u << M) - 1);
  int bias = (1 << (E - 1)) - 1;
  double mag;
  if (uk_sf_isnan(b, UK_F))
    mag = uk_f64(0x7ff8000000000000ull);
  else if (INF && e == eall)
    mag = uk_f64(0x7ff0000000000000ull);
  else if (e == 0)
    mag = (double)m * uk_pow2(1 - bias - M);
  else
    mag = (double)(m | (1u << M)) * uk_pow2((int)e - bias - M);
  return (b >> (E + M)) & 1 ? uk_neg_f64(mag) : mag;
}
/* Round +-(mant + s) * 2^exp once (nearest, ties to even), s in (0,1) iff sticky.
   Subnormals kept; overflow gives inf, or saturates to max finite without infinities. */
static inline uint32_t uk_sf_round(int neg, uint64_t mant, int exp, int sticky, UK_FMT) {
  uint32_t sign = neg ? 1u << (E + M) : 0u;
  if (mant == 0) return sign;
  int bias = (1 << (E - 1)) - 1, emin = 1 - bias;
  int lead = exp + (63 - __builtin_clzll(mant));
  int q = (lead > emin ? lead : emin) - M;
  int shift = q - exp;
  uint64_t r;
  int round, rest;
  if (shift <= 0) {
    r = mant << (-shift);
    round = 0;
    rest = sticky;
  } else if (shift > 64) {
    r = 0;
    round = 0;
    rest = 1;
  } else {
    int s = shift;
    r = s == 64 ? 0 : mant >> s;
    round = (int)((mant >> (s - 1)) & 1);
    uint64_t below = s == 1 ? 0 : mant & ((1ull << (s - 1)) - 1);
    rest = sticky || below != 0;
  }
  if (round && (rest || (r & 1))) {
    r += 1;
    if (r >> (M + 1)) {
      r >>= 1;
      q += 1;
    }
  }
  if (r == 0) return sign;
  uint64_t man_mask = (1ull << M) - 1;
  int64_t biased;
  uint64_t frac;
  if ((r >> M) == 0) {
    biased = 0;
    frac = r;
  } else {
    biased = (int64_t)q + M + bias;
    frac = r & man_mask;
  }
  int64_t exp_all = (1 << E) - 1;
  if (INF) {
    if (biased >= exp_all) return sign | ((uint32_t)exp_all << M);
  } else if (biased > exp_all || (biased == exp_all && frac == man_mask)) {
    return sign | ((uint32_t)exp_all << M) | (uint32_t)(man_mask - 1);
  }
  return sign | ((uint32_t)biased << M) | (uint32_t)frac;
}
static inline void uk_decompose(double x, int *neg, uint64_t *mant, int *exp) {
  uint64_t b = uk_bits_f64(x);
  int e = (int)((b >> 52) & 0x7ff);
  uint64_t f = b & ((1ull << 52) - 1);
  *neg = (int)(b >> 63);
  if (e == 0) {
    *mant = f;
    *exp = -1074;
  } else {
    *mant = f | (1ull << 52);
    *exp = e - 1075;
  }
}
/* Round a double once; NaN -> canonical NaN keeping the sign; inf -> inf (or NaN for e4m3). */
static inline uint32_t uk_sf_from_f64(double x, UK_FMT) {
  uint32_t sbit = 1u << (E + M);
  int neg = (int)(uk_bits_f64(x) >> 63);
  if (x != x) return (neg ? sbit : 0u) | uk_sf_canon(UK_F);
  if (isinf(x)) return (neg ? sbit : 0u) | (INF ? ((1u << E) - 1) << M : uk_sf_canon(UK_F));
  if (x == 0.0) return neg ? sbit : 0u;
  uint64_t mant;
  int exp;
  uk_decompose(x, &neg, &mant, &exp);
  return uk_sf_round(neg, mant, exp, 0, UK_F);
}
/* Round the exact value hi + lo once (TwoSum, then the error term as a sticky bit). */
static inline uint32_t uk_sf_from_pair(double hi, double lo, UK_FMT) {
  if (!isfinite(hi) || !isfinite(lo)) return uk_sf_from_f64(hi + lo, UK_F);
  double s = hi + lo;
  double bb = s - hi;
  double t = (hi - (s - bb)) + (lo - bb);
  if (!isfinite(s) || t == 0.0) return uk_sf_from_f64(s, UK_F);
  int neg, exp;
  uint64_t mant;
  uk_decompose(s, &neg, &mant, &exp);
  if ((t < 0.0) == neg) return uk_sf_round(neg, mant, exp, 1, UK_F);
  return uk_sf_round(neg, mant - 1, exp, 1, UK_F);
}
static inline uint32_t uk_sf_from_u64(uint64_t v, UK_FMT) { return uk_sf_round(0, v, 0, 0, UK_F); }
static inline uint32_t uk_sf_from_i64(int64_t v, UK_FMT) {
  int neg = v < 0;
  return uk_sf_round(neg, neg ? 0 - (uint64_t)v : (uint64_t)v, 0, 0, UK_F);
}
/* Arithmetic results: NaN becomes the canonical NaN, sign clear. */
static inline uint32_t uk_sf_fin(uint32_t r, UK_FMT) { return uk_sf_isnan(r, UK_F) ? uk_sf_canon(UK_F) : r; }
static inline uint32_t uk_sf_div_d(double x, double y, UK_FMT) {
  double q = x / y;
  if (!isfinite(q) || q == 0.0 || !isfinite(x) || !isfinite(y)) return uk_sf_from_f64(q, UK_F);
  double r = fma(-q, y, x); /* exact remainder */
  return uk_sf_from_pair(q, r / y, UK_F);
}
static inline uint32_t uk_sf_sqrt_d(double x, UK_FMT) {
  double q = sqrt(x);
  if (!(x > 0.0) || isinf(x)) return uk_sf_from_f64(q, UK_F);
  double r = fma(-q, q, x); /* exact */
  return uk_sf_from_pair(q, r / (2.0 * q), UK_F);
}
/* A libm result: f64 overflow with finite operands saturates (matters without infinities). */
static inline uint32_t uk_sf_libm(double r, int finite, UK_FMT) {
  if (isinf(r) && finite) return uk_sf_from_f64(r < 0 ? -uk_f64(0x7fefffffffffffffull) : uk_f64(0x7fefffffffffffffull), UK_F);
  return uk_sf_from_f64(r, UK_F);
}
#define UK_D(a) uk_sf_dec((a), UK_F)
static inline uint32_t uk_sf_add(uint32_t a, uint32_t b, UK_FMT) { return uk_sf_fin(uk_sf_from_pair(UK_D(a), UK_D(b), UK_F), UK_F); }
static inline uint32_t uk_sf_sub(uint32_t a, uint32_t b, UK_FMT) { return uk_sf_fin(uk_sf_from_pair(UK_D(a), -UK_D(b), UK_F), UK_F); }
static inline uint32_t uk_sf_mul(uint32_t a, uint32_t b, UK_FMT) { return uk_sf_fin(uk_sf_from_f64(UK_D(a) * UK_D(b), UK_F), UK_F); }
static inline uint32_t uk_sf_mulacc(uint32_t a, uint32_t b, uint32_t c, UK_FMT) {
  return uk_sf_fin(uk_sf_from_pair(UK_D(a) * UK_D(b), UK_D(c), UK_F), UK_F); /* product exact */
}
static inline uint32_t uk_sf_fdiv(uint32_t a, uint32_t b, UK_FMT) { return uk_sf_fin(uk_sf_div_d(UK_D(a), UK_D(b), UK_F), UK_F); }
static inline uint32_t uk_sf_recip(uint32_t a, UK_FMT) { return uk_sf_fin(uk_sf_div_d(1.0, UK_D(a), UK_F), UK_F); }
static inline uint32_t uk_sf_sqrt(uint32_t a, UK_FMT) { return uk_sf_fin(uk_sf_sqrt_d(UK_D(a), UK_F), UK_F); }
/* float16 +, -, ×, ÷, 1/x and √: the renderer calls these uk_h_* directly (render::c's
   F16_DIRECT), not uk_sf_*(…, UK_F16), so the compiler has no generic format path to inline
   and fold away in every float16 kernel (a few ms of gcc's time per unit, within a VM's noise).
   Where the target has F16C they go through float32: a float16 converts to float32 exactly;
   for these operations on float16 operands the float32 result (24 bits ≥ 2·11 + 2, and no
   float16 operation reaches float32's subnormals or overflow) rounded again to float16 (F16C's
   round to nearest even) is the exact result rounded once: double rounding is innocuous at
   that precision (S. A. Figueroa, "When is double rounding innocuous?", 1995). NaNs still
   become the canonical NaN (uk_sf_fin). Elsewhere they are the exact uk_sf_* path. The other
   formats, and MULACC (whose float32 sum has a 22-bit operand), always take that path. The
   conversions are the compiler's _Float16 ones (vcvtph2ps / vcvtps2ph under F16C, rounding as
   MXCSR says: to nearest even, the state every float32 operation here assumes too), not
   <immintrin.h>'s intrinsics: that header alone costs a C compile about 0.2 s. */
#if defined(__F16C__) && defined(__FLT16_MANT_DIG__)
static inline float uk_h2f(uint32_t a) { uint16_t u = (uint16_t)a; _Float16 h; memcpy(&h, &u, 2); return (float)h; }
static inline uint32_t uk_f2h(float x) { _Float16 h = (_Float16)x; uint16_t u; memcpy(&u, &h, 2); return u; }
static inline uint32_t uk_h_add(uint32_t a, uint32_t b) { return uk_sf_fin(uk_f2h(uk_h2f(a) + uk_h2f(b)), UK_F16); }
static inline uint32_t uk_h_sub(uint32_t a, uint32_t b) { return uk_sf_fin(uk_f2h(uk_h2f(a) - uk_h2f(b)), UK_F16); }
static inline uint32_t uk_h_mul(uint32_t a, uint32_t b) { return uk_sf_fin(uk_f2h(uk_h2f(a) * uk_h2f(b)), UK_F16); }
static inline uint32_t uk_h_fdiv(uint32_t a, uint32_t b) { return uk_sf_fin(uk_f2h(uk_h2f(a) / uk_h2f(b)), UK_F16); }
static inline uint32_t uk_h_recip(uint32_t a) { return uk_sf_fin(uk_f2h(1.0f / uk_h2f(a)), UK_F16); }
static inline uint32_t uk_h_sqrt(uint32_t a) { return uk_sf_fin(uk_f2h(sqrtf(uk_h2f(a))), UK_F16); }
#else
static inline uint32_t uk_h_add(uint32_t a, uint32_t b) { return uk_sf_add(a, b, UK_F16); }
static inline uint32_t uk_h_sub(uint32_t a, uint32_t b) { return uk_sf_sub(a, b, UK_F16); }
static inline uint32_t uk_h_mul(uint32_t a, uint32_t b) { return uk_sf_mul(a, b, UK_F16); }
static inline uint32_t uk_h_fdiv(uint32_t a, uint32_t b) { return uk_sf_fdiv(a, b, UK_F16); }
static inline uint32_t uk_h_recip(uint32_t a) { return uk_sf_recip(a, UK_F16); }
static inline uint32_t uk_h_sqrt(uint32_t a) { return uk_sf_sqrt(a, UK_F16); }
#endif
static inline uint32_t uk_sf_trunc(uint32_t a, UK_FMT) { return uk_sf_fin(uk_sf_from_f64(trunc(UK_D(a)), UK_F), UK_F); }
static inline uint32_t uk_sf_exp2(uint32_t a, UK_FMT) {
  double x = UK_D(a);
  return uk_sf_fin(uk_sf_libm(uk_exp2(x), isfinite(x), UK_F), UK_F);
}
static inline uint32_t uk_sf_log2(uint32_t a, UK_FMT) { return uk_sf_fin(uk_sf_from_f64(uk_log2(UK_D(a)), UK_F), UK_F); }
static inline uint32_t uk_sf_sin(uint32_t a, UK_FMT) { return uk_sf_fin(uk_sf_from_f64(uk_sin(UK_D(a)), UK_F), UK_F); }
static inline uint32_t uk_sf_pow(uint32_t a, uint32_t b, UK_FMT) {
  double x = UK_D(a), y = UK_D(b);
  return uk_sf_fin(uk_sf_libm(uk_pow(x, y), isfinite(x) && x != 0.0 && isfinite(y), UK_F), UK_F);
}
static inline uint32_t uk_sf_neg(uint32_t a, UK_FMT) { return a ^ (1u << (E + M)); }
/* ---- end of prelude ---- */
