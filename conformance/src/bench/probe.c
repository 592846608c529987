/* uopkit bench: STREAM-like bandwidth probes and peak arithmetic probes.
 * Compiled by the kernel runtime's C compiler (same compiler, same flags as the kernels:
 * -O2 -march=native -ffp-contract=off, and -mno-red-zone on x86-64), so a mul+add here is two instructions, as in a
 * kernel, and the FMA probe asks for FMA explicitly. Threads: pthreads; thread 0 is the
 * caller. Every probe splits its range into contiguous blocks, one per thread. */
#include <pthread.h>
#include <string.h>
#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#define MAX_THREADS 256
typedef float v8 __attribute__((vector_size(32), aligned(4)));

enum { COPY, TRIAD, READ, MULADD, FMA };

struct job {
    int kind;
    float *a;
    const float *b, *c;
    float s;
    long lo, hi, iters;
    float out;
    int nt; /* copy, triad: streaming stores (x86 with AVX), as the kernels' large loops use */
};

#if defined(__x86_64__) && defined(__AVX__)
#define PROBE_NT 1
typedef float v8a __attribute__((vector_size(32)));
#endif

static void copy_range(struct job *j) {
    long i = j->lo;
#ifdef PROBE_NT
    if (j->nt) {
        for (; i < j->hi && ((unsigned long)(j->a + i) & 31); i++) j->a[i] = j->b[i];
        for (; i + 8 <= j->hi; i += 8) __builtin_ia32_movntps256(j->a + i, (v8a)*(const v8 *)(j->b + i));
        __builtin_ia32_sfence();
    }
#endif
    for (; i + 8 <= j->hi; i += 8) *(v8 *)(j->a + i) = *(const v8 *)(j->b + i);
    for (; i < j->hi; i++) j->a[i] = j->b[i];
}

static void triad_range(struct job *j) {
    long i = j->lo;
    v8 s = {j->s, j->s, j->s, j->s, j->s, j->s, j->s, j->s};
#ifdef PROBE_NT
    if (j->nt) {
        for (; i < j->hi && ((unsigned long)(j->a + i) & 31); i++) j->a[i] = j->b[i] + j->s * j->c[i];
        for (; i + 8 <= j->hi; i += 8)
            __builtin_ia32_movntps256(j->a + i, (v8a)(*(const v8 *)(j->b + i) + s * *(const v8 *)(j->c + i)));
        __builtin_ia32_sfence();
    }
#endif
    for (; i + 8 <= j->hi; i += 8)
        *(v8 *)(j->a + i) = *(const v8 *)(j->b + i) + s * *(const v8 *)(j->c + i);
    for (; i < j->hi; i++) j->a[i] = j->b[i] + j->s * j->c[i];
}

static void read_range(struct job *j) {
    v8 acc[8];
    memset(acc, 0, sizeof acc);
    long i = j->lo;
    for (; i + 64 <= j->hi; i += 64)
        for (int k = 0; k < 8; k++) acc[k] += *(const v8 *)(j->b + i + 8 * k);
    float t = 0;
    for (; i < j->hi; i++) t += j->b[i];
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 8; l++) t += acc[k][l];
    j->out = t;
}

/* Peak arithmetic: CHAINS independent chains of x = x*m + a on the widest vectors the target
 * has (64-byte with AVX-512, else 32-byte), fully unrolled so that every chain lives in a
 * register (an array indexed in a loop lives in memory, and the store-to-load forwarding on
 * each step turns a throughput probe into a latency probe). CHAINS covers the latency of a
 * MUL followed by an ADD (or of one FMA) times two pipes on current x86 cores, and leaves two
 * vector registers for m and a. */
#if defined(__AVX512F__)
#define LANES 16
#define CHAINS 24
#else
#define LANES 8
#define CHAINS 12
#endif
typedef float vw __attribute__((vector_size(LANES * 4)));

/* Flops one step of one thread does: a MUL and an ADD (or one FMA) per lane and chain. */
long uopkit_probe_flops_per_step(void) { return 2L * LANES * CHAINS; }

static float lanes_sum(const vw *x) {
    float t = 0;
    for (int k = 0; k < CHAINS; k++)
        for (int l = 0; l < LANES; l++) t += x[k][l];
    return t;
}

static void muladd_range(struct job *j) {
    vw x[CHAINS], m, a;
    for (int l = 0; l < LANES; l++) { m[l] = 0.999999f; a[l] = 1e-6f; }
#pragma GCC unroll 64
    for (int k = 0; k < CHAINS; k++)
        for (int l = 0; l < LANES; l++) x[k][l] = (float)(k + l) * 0.01f;
    for (long it = 0; it < j->iters; it++) {
#pragma GCC unroll 64
        for (int k = 0; k < CHAINS; k++) x[k] = x[k] * m + a;
    }
    j->out = lanes_sum(x);
}

/* The same chains with one fused multiply-add each (-1: no FMA on this target). */
static void fma_range(struct job *j) {
#if defined(__FMA__) || defined(__AVX512F__)
    vw x[CHAINS], m, a;
    for (int l = 0; l < LANES; l++) { m[l] = 0.999999f; a[l] = 1e-6f; }
#pragma GCC unroll 64
    for (int k = 0; k < CHAINS; k++)
        for (int l = 0; l < LANES; l++) x[k][l] = (float)(k + l) * 0.01f;
    for (long it = 0; it < j->iters; it++) {
#pragma GCC unroll 64
        for (int k = 0; k < CHAINS; k++) {
#if defined(__AVX512F__)
            x[k] = (vw)_mm512_fmadd_ps((__m512)x[k], (__m512)m, (__m512)a);
#else
            x[k] = (vw)_mm256_fmadd_ps((__m256)x[k], (__m256)m, (__m256)a);
#endif
        }
    }
    j->out = lanes_sum(x);
#else
    j->out = -1.0f;
#endif
}

static void *work(void *p) {
    struct job *j = p;
    switch (j->kind) {
    case COPY: copy_range(j); break;
    case TRIAD: triad_range(j); break;
    case READ: read_range(j); break;
    case MULADD: muladd_range(j); break;
    case FMA: fma_range(j); break;
    }
    return 0;
}

/* Runs `proto` on `threads` threads over [0, n) (blocks of whole 64-byte lines); returns
 * the sum of the threads' results, or -2 if a thread could not be started. */
static float dispatch(struct job proto, long n, int threads) {
    struct job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS];
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    long per = ((n / threads) + 15) / 16 * 16;
    for (int t = 0; t < threads; t++) {
        jobs[t] = proto;
        jobs[t].lo = t * per < n ? t * per : n;
        jobs[t].hi = (t + 1) * per < n ? (t + 1) * per : n;
        if (t == threads - 1) jobs[t].hi = n;
    }
    int ok = 1;
    for (int t = 1; t < threads; t++) {
        started[t] = pthread_create(&tid[t], 0, work, &jobs[t]) == 0;
        ok &= started[t];
    }
    work(&jobs[0]);
    float total = jobs[0].out;
    for (int t = 1; t < threads; t++)
        if (started[t]) {
            pthread_join(tid[t], 0);
            total += jobs[t].out;
        }
    return ok ? total : -2.0f;
}

/* `nt`: streaming stores where the target has them (else the plain stores). */
float uopkit_probe_copy(float *dst, const float *src, long n, int threads, int nt) {
    struct job j = {COPY, dst, src, 0, 0, 0, 0, 0, 0, nt};
    return dispatch(j, n, threads);
}

float uopkit_probe_triad(float *a, const float *b, const float *c, float s, long n, int threads, int nt) {
    struct job j = {TRIAD, a, b, c, s, 0, 0, 0, 0, nt};
    return dispatch(j, n, threads);
}

float uopkit_probe_read(const float *src, long n, int threads) {
    struct job j = {READ, 0, src, 0, 0, 0, 0, 0, 0};
    return dispatch(j, n, threads);
}

/* `iters` steps per thread (n = threads, one "element" per thread). */
float uopkit_probe_muladd(long iters, int threads) {
    struct job j = {MULADD, 0, 0, 0, 0, 0, 0, iters, 0};
    return dispatch(j, threads, threads);
}

float uopkit_probe_fma(long iters, int threads) {
    struct job j = {FMA, 0, 0, 0, 0, 0, 0, iters, 0};
    return dispatch(j, threads, threads);
}
