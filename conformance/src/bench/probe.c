/* uopkit bench: STREAM-like bandwidth probes and peak arithmetic probes.
 * Compiled by the kernel runtime's C compiler (same compiler, same flags as the kernels:
 * -O2 -march=native -ffp-contract=off), so a mul+add here is two instructions, as in a
 * kernel, and the FMA probe asks for FMA explicitly. Threads: pthreads; thread 0 is the
 * caller. Every probe splits its range into contiguous blocks, one per thread. */
#include <pthread.h>
#include <string.h>
#if defined(__FMA__)
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
};

static void copy_range(struct job *j) {
    long i = j->lo;
    for (; i + 8 <= j->hi; i += 8) *(v8 *)(j->a + i) = *(const v8 *)(j->b + i);
    for (; i < j->hi; i++) j->a[i] = j->b[i];
}

static void triad_range(struct job *j) {
    long i = j->lo;
    v8 s = {j->s, j->s, j->s, j->s, j->s, j->s, j->s, j->s};
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

/* 12 independent chains of x = x*m + a (a MUL and an ADD per lane and step). */
static void muladd_range(struct job *j) {
    v8 x[12], m, a;
    for (int l = 0; l < 8; l++) { m[l] = 0.999999f; a[l] = 1e-6f; }
    for (int k = 0; k < 12; k++)
        for (int l = 0; l < 8; l++) x[k][l] = (float)(k + l) * 0.01f;
    for (long it = 0; it < j->iters; it++)
        for (int k = 0; k < 12; k++) x[k] = x[k] * m + a;
    float t = 0;
    for (int k = 0; k < 12; k++)
        for (int l = 0; l < 8; l++) t += x[k][l];
    j->out = t;
}

/* The same chains with one fused multiply-add each (-1: no FMA on this target). */
static void fma_range(struct job *j) {
#if defined(__FMA__)
    __m256 x[12], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
    for (int k = 0; k < 12; k++) x[k] = _mm256_set1_ps((float)k * 0.01f);
    for (long it = 0; it < j->iters; it++)
        for (int k = 0; k < 12; k++) x[k] = _mm256_fmadd_ps(x[k], m, a);
    float t = 0, lanes[8];
    for (int k = 0; k < 12; k++) {
        _mm256_storeu_ps(lanes, x[k]);
        for (int l = 0; l < 8; l++) t += lanes[l];
    }
    j->out = t;
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

float uopkit_probe_copy(float *dst, const float *src, long n, int threads) {
    struct job j = {COPY, dst, src, 0, 0, 0, 0, 0, 0};
    return dispatch(j, n, threads);
}

float uopkit_probe_triad(float *a, const float *b, const float *c, float s, long n, int threads) {
    struct job j = {TRIAD, a, b, c, s, 0, 0, 0, 0};
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
