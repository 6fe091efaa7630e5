/* The exact GELU of float32 arrays, forward and backward, in one vectorized pass each, in
 * float32 arithmetic (sixteen values per AVX-512 instruction).
 *
 * Note [GELU kernels] in gradviz/ops/_activation.py says why and how accurate: each result is
 * within a few units in the last place of the exact value (the test sweeps the float32 line).
 * For a = |x| the upper tail Q(a) = 1 - Phi(a) is written as
 *
 *     Q(a) = exp(-a^2 / 2) * R(a),   R(a) = 0.5 erfcx(a / sqrt 2),
 *
 * R smooth and slowly varying; with t = 4 / (4 + a), which maps [0, 14.5] onto [4 / 18.5, 1],
 * and u = t - 0.6081081, R(a) = P_R(u), a degree-10 polynomial fitted to scipy's erfcx for
 * relative error (5e-8 in float64, float32 coefficients). The gradient's Phi(x) + x phi(x)
 * crosses zero at x = -a0 = -0.75179...; a phi(a) - Q(a) = exp(-a^2/2) (a - a0) P_D(u), P_D
 * of degree 9 fitted the same way (3e-8), so the gradient keeps its relative accuracy there:
 * a - a0 is exact near a0, with a0 a float32 pair. Then
 *
 *     x < 0:  x Phi(x) = x Q(a),       Phi(x) + x phi(x) = -(a phi(a) - Q(a))
 *     x >= 0: x Phi(x) = x - x Q(a),   Phi(x) + x phi(x) = 1 + (a phi(a) - Q(a))
 *
 * exp(-a^2 / 2) comes from a^2 split exactly in two floats (a fused multiply-add gives the
 * low part), n = round(y / ln 2) by the 1.5 * 2^23 rounding trick, the rest reduced in two
 * parts (|r| <= 0.35), a degree-7 Taylor polynomial for exp(r), and 2^n as two powers of two
 * that are normal numbers, multiplied in last so that a subnormal result is rounded once.
 * Beyond a = 14.5, x Q(a) and x phi(x) round to zero in float32 for every x: Q and the
 * density are 0 there, x = -inf gives -inf * 0 = NaN, +inf a gradient of NaN (inf * 0, as
 * torch) and a NaN stays NaN.
 *
 * The loops are compiled twice, for AVX2 with FMA (eight floats per instruction) and for
 * AVX-512 (sixteen), and gradviz_gelu_enable picks the widest the CPU has; without AVX2 and
 * FMA the caller keeps scipy's ndtr. Contraction is off (exact_arithmetic.h): the only fused
 * multiply-adds are the fmaf calls written here, so both compilations give the same bits (a
 * test compares them).
 */
#ifndef GRADVIZ_GELU_H
#define GRADVIZ_GELU_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "exact_arithmetic.h"

#if defined(__GNUC__)
#define GRADVIZ_GELU_UNUSED __attribute__((unused))
#define GRADVIZ_GELU_INLINE inline __attribute__((always_inline))
#else
#define GRADVIZ_GELU_UNUSED
#define GRADVIZ_GELU_INLINE inline
#endif

GRADVIZ_EXACT_BEGIN  /* fused multiply-adds only where written: fmaf */

#define GRADVIZ_GELU_TAIL 14.5f  /* beyond it Q(a) and the density are 0 */
#define GRADVIZ_GELU_CENTER 0.6081081f  /* the middle of t's range [4 / 18.5, 1] */

/* P_R and P_D, their coefficients highest power of u first */
#define GRADVIZ_GELU_R(u)                                                                   \
    gradviz_horner11(u, 1.382727921e-02f, 3.817025572e-02f, -1.493652444e-02f,               \
                     -1.088231206e-01f, -4.158721864e-02f, 2.698298693e-01f, 6.423879862e-01f, \
                     8.193646669e-01f, 7.216715217e-01f, 4.711637497e-01f, 1.378643811e-01f)
#define GRADVIZ_GELU_D(u)                                                                   \
    gradviz_horner10(u, 8.521408774e-03f, 4.707578104e-03f, -2.326679789e-02f,               \
                     -2.822373994e-02f, 4.481413960e-02f, 1.801964194e-01f, 2.967528403e-01f, \
                     3.260764182e-01f, 2.677078843e-01f, 4.876926839e-01f)
/* the zero of Q(a) - a phi(a), as a float32 pair */
#define GRADVIZ_GELU_ZERO_HI 0.7517915368080139f
#define GRADVIZ_GELU_ZERO_LO -1.211444988769017e-08f

static GRADVIZ_GELU_INLINE float gradviz_horner10(float u, float c9, float c8, float c7,
                                                  float c6, float c5, float c4, float c3,
                                                  float c2, float c1, float c0) {
    float p = fmaf(c9, u, c8);
    p = fmaf(p, u, c7);
    p = fmaf(p, u, c6);
    p = fmaf(p, u, c5);
    p = fmaf(p, u, c4);
    p = fmaf(p, u, c3);
    p = fmaf(p, u, c2);
    p = fmaf(p, u, c1);
    return fmaf(p, u, c0);
}
static GRADVIZ_GELU_INLINE float gradviz_horner11(float u, float c10, float c9, float c8,
                                                  float c7, float c6, float c5, float c4,
                                                  float c3, float c2, float c1, float c0) {
    return fmaf(u, gradviz_horner10(u, c10, c9, c8, c7, c6, c5, c4, c3, c2, c1), c0);
}

static GRADVIZ_GELU_INLINE int32_t gradviz_float_bits(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i;
}
static GRADVIZ_GELU_INLINE float gradviz_bits_float(int32_t i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}

/* mask ? a : b for a mask of all ones or zeros, in integer operations: GCC vectorizes no
   conditional floating-point expression under -ftrapping-math (the default), and would move
   the arithmetic of a ternary's arms into the condition */
static GRADVIZ_GELU_INLINE float gradviz_select(int32_t mask, float a, float b) {
    return gradviz_bits_float((gradviz_float_bits(a) & mask) | (gradviz_float_bits(b) & ~mask));
}

/* exp(-b^2 / 2) for b in [0, 14.5], as p * scale_a * scale_b with p in [0.7, 1.5] and two
   powers of two that are normal numbers (their product need not be) */
static GRADVIZ_GELU_INLINE float gradviz_half_gauss(float b, float *scale_a, float *scale_b) {
    const float magic = 12582912.0f;  /* 1.5 * 2^23: adding it rounds to an integer */
    const float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187e-06f;
    float square = b * b, square_lo = fmaf(b, b, -square);  /* b^2 = square + square_lo */
    float y = -0.5f * square;                                /* exact */
    float k = fmaf(y, 1.44269504088896341f, magic), n = k - magic, r, p;
    int32_t whole, half;
    r = fmaf(n, -ln2_hi, y);
    r = fmaf(n, -ln2_lo, r);
    r = fmaf(-0.5f, square_lo, r);  /* |r| <= 0.35 */
    p = fmaf(1.0f / 5040.0f, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    whole = gradviz_float_bits(k) - gradviz_float_bits(magic);  /* n, in [-152, 0] */
    half = whole >> 1;
    *scale_a = gradviz_bits_float((half + 127) << 23);
    *scale_b = gradviz_bits_float((whole - half + 127) << 23);
    return p;
}

/* u = 4 / (4 + b) - GRADVIZ_GELU_CENTER, rounded once: P_R and P_D change by up to 3.2 times
   u's error relative to their value, so 4 + b and the quotient carry their rounding errors */
static GRADVIZ_GELU_INLINE float gradviz_gelu_u(float b) {
    float sum = 4.0f + b, sum_lo = b - (sum - 4.0f);  /* 4 + b = sum + sum_lo, exactly */
    float t = 4.0f / sum;
    float residual = fmaf(-t, sum_lo, fmaf(-t, sum, 4.0f));  /* 4 - t (4 + b) */
    return fmaf(residual, t * 0.25f, t - GRADVIZ_GELU_CENTER);
}

/* x Phi(x) for one float32 x (see above); +inf gives NaN when posinf_is_nan is all ones */
static GRADVIZ_GELU_INLINE float gradviz_gelu_value(float x, int32_t posinf_is_nan) {
    float a = fabsf(x), b, scale_a, scale_b, e, q, upper, lower;
    int32_t near = -(int32_t)(a <= GRADVIZ_GELU_TAIL);  /* all ones, or 0 (also for NaN) */
    int32_t negative = gradviz_float_bits(x) >> 31;     /* -0.0 included */
    b = gradviz_select(near, a, GRADVIZ_GELU_TAIL);
    e = gradviz_half_gauss(b, &scale_a, &scale_b);
    q = e * GRADVIZ_GELU_R(gradviz_gelu_u(b));  /* Q(a) / 2^n */
    /* x < 0: x Q(a), rounded once when it is subnormal; beyond the tail x 0 (NaN at -inf) */
    lower = gradviz_select(near, ((x * q) * scale_a) * scale_b, x * 0.0f);
    /* x >= 0: x - x Q(a); beyond the tail x */
    upper = gradviz_select(near, fmaf(-x, (q * scale_a) * scale_b, x), x);
    upper = gradviz_select(posinf_is_nan & -(int32_t)(x == INFINITY), NAN, upper);
    return gradviz_select(negative, lower, upper);
}

/* g (Phi(x) + x phi(x)) for one float32 x and g (see above) */
static GRADVIZ_GELU_INLINE float gradviz_gelu_gradient(float x, float g) {
    float a = fabsf(x), b, scale_a, scale_b, e, v, upper, lower;
    int32_t near = -(int32_t)(a <= GRADVIZ_GELU_TAIL);
    int32_t negative = gradviz_float_bits(x) >> 31;
    b = gradviz_select(near, a, GRADVIZ_GELU_TAIL);
    e = gradviz_half_gauss(b, &scale_a, &scale_b);
    /* (a - a0) P_D(u) = a phi(a) - Q(a), over exp(-a^2/2) and 2^n; a - a0 exact near a0 */
    v = e * (((b - GRADVIZ_GELU_ZERO_HI) - GRADVIZ_GELU_ZERO_LO)
             * GRADVIZ_GELU_D(gradviz_gelu_u(b)));
    /* x < 0: g (Q(a) - a phi(a)), scaled last to keep its bits where it is subnormal */
    lower = gradviz_select(near, ((-g * v) * scale_a) * scale_b, g * (x * 0.0f));
    /* x >= 0: g (1 - Q(a) + a phi(a)) */
    upper = g * gradviz_select(near, 1.0f + (v * scale_a) * scale_b, 1.0f + x * 0.0f);
    return gradviz_select(negative, lower, upper);
}

/* x Phi(x) for n contiguous float32 values of x (out may be x); +inf gives NaN when
   posinf_is_nan (torch's vectorized float32 kernel does) */
#define GRADVIZ_GELU_FORWARD_LOOP(x, out, n, posinf_is_nan)                       \
    do {                                                                          \
        Py_ssize_t k_;                                                            \
        int32_t flag_ = -(int32_t)((posinf_is_nan) != 0);                         \
        for (k_ = 0; k_ < (n); k_++)                                              \
            (out)[k_] = gradviz_gelu_value((x)[k_], flag_);                       \
    } while (0)

/* g (Phi(x) + x phi(x)), the derivative of x Phi(x) times g, for n contiguous float32
   values of x and g (out may be g) */
#define GRADVIZ_GELU_BACKWARD_LOOP(x, g, out, n)                                  \
    do {                                                                          \
        Py_ssize_t k_;                                                            \
        for (k_ = 0; k_ < (n); k_++)                                              \
            (out)[k_] = gradviz_gelu_gradient((x)[k_], (g)[k_]);                  \
    } while (0)

/* The instruction set the loops run with: 0 none (the caller keeps ndtr), 1 AVX2 with FMA,
   2 AVX-512 (F, DQ, VL and BW, as GCC may use any of them for these loops) */
#define GRADVIZ_GELU_AVX2 1
#define GRADVIZ_GELU_AVX512 2
static int gradviz_gelu_level = 0;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define GRADVIZ_GELU_LOOPS(suffix, isa)                                                 \
    __attribute__((target(isa)))                                                       \
    static inline void gradviz_gelu_forward_##suffix(const float *x, float *out,        \
                                                     Py_ssize_t n, int posinf_is_nan) { \
        GRADVIZ_GELU_FORWARD_LOOP(x, out, n, posinf_is_nan);                            \
    }                                                                                  \
    __attribute__((target(isa)))                                                       \
    static inline void gradviz_gelu_backward_##suffix(const float *x, const float *g,   \
                                                      float *out, Py_ssize_t n) {       \
        GRADVIZ_GELU_BACKWARD_LOOP(x, g, out, n);                                       \
    }
GRADVIZ_GELU_LOOPS(avx2, "avx2,fma")
GRADVIZ_GELU_LOOPS(avx512, "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")

/* the widest instruction set the CPU has (and the OS saves the registers of), at most
   `limit` (tests compare the two compilations by lowering it); it stays in use */
static inline int gradviz_gelu_enable_up_to(int limit) {
    int level = 0;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        level = GRADVIZ_GELU_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
                && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
            level = GRADVIZ_GELU_AVX512;
    }
    gradviz_gelu_level = level < limit ? level : limit;
    return gradviz_gelu_level;
}
static inline void gradviz_gelu_forward_f32(const float *x, float *out, Py_ssize_t n,
                                     int posinf_is_nan) {
    if (gradviz_gelu_level == GRADVIZ_GELU_AVX512)
        gradviz_gelu_forward_avx512(x, out, n, posinf_is_nan);
    else
        gradviz_gelu_forward_avx2(x, out, n, posinf_is_nan);
}
static inline void gradviz_gelu_backward_f32(const float *x, const float *g, float *out,
                                      Py_ssize_t n) {
    if (gradviz_gelu_level == GRADVIZ_GELU_AVX512)
        gradviz_gelu_backward_avx512(x, g, out, n);
    else
        gradviz_gelu_backward_avx2(x, g, out, n);
}
#else
static inline int gradviz_gelu_enable_up_to(int limit) { return 0; }
static inline void gradviz_gelu_forward_f32(const float *x, float *out, Py_ssize_t n,
                                     int posinf_is_nan) {}
static inline void gradviz_gelu_backward_f32(const float *x, const float *g, float *out,
                                      Py_ssize_t n) {}
#endif

GRADVIZ_EXACT_END

#endif
