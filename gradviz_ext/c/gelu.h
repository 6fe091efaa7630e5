/* The exact GELU of float32 arrays, forward and backward, in one vectorized pass each.
 *
 * Note [GELU kernels] in gradviz/ops/_activation.py says why; in short: the normal CDF
 * Phi(x) = 0.5 erfc(-x / sqrt 2) is computed in double precision from a fit of our own, with
 * a relative error below 2e-12 everywhere a float32 result can see it, so each float32 result
 * is the exact GELU rounded once (as scipy's float64 ndtr, which this replaces for float32,
 * gave), at the speed of a loop the compiler vectorizes (no libm call per element).
 *
 * For a = |x|, the upper tail Q(a) = 1 - Phi(a) is written as
 *
 *     Q(a) = exp(-a^2 / 2) * R(a),   R(a) = 0.5 erfcx(a / sqrt 2),
 *
 * where R is smooth and slowly varying; with t = 5 / (5 + a), which maps [0, 15] onto
 * [1/4, 1], R(a) = t / 5 * P(u) for u = (8 t - 5) / 3 in [-1, 1] and P the degree-13
 * polynomial below: a least-squares Chebyshev fit of R(a) (5 + a) to scipy.special.erfcx,
 * weighted for relative error, converted to powers of u (max relative error 1.3e-12 over
 * [0, 15], measured against erfcx at 2e6 points). Then Phi(x) = Q(a) for x < 0 and 1 - Q(a)
 * otherwise. Beyond a = 15, x Q(a) and x exp(-a^2/2) are below float32's smallest subnormal
 * for every float32 x (15 Q(15) ~ 5e-50), so Q and the density are exactly 0 there, as they
 * round to in float64: x = -inf gives -inf * 0 = NaN and a NaN stays NaN, as with ndtr.
 *
 * exp(-a^2 / 2) for a <= 15 (an argument in [-112.5, 0], no subnormals) is computed here too:
 * n = round(y / ln 2) by the 1.5 * 2^52 rounding trick, r = y - n ln 2 in two parts
 * (|r| <= ln 2 / 2), a degree-11 Taylor polynomial for exp(r) (truncation error 6e-15), and
 * 2^n built in the exponent bits. a^2 is exact in double for a float32 a.
 *
 * The loops are compiled twice, for AVX2 with FMA (four doubles per instruction) and for
 * AVX-512 (eight), and gradviz_gelu_enable picks the widest the CPU has; without AVX2 and
 * FMA the caller keeps scipy's ndtr, as fast as a scalar loop of this. Both compilations do
 * the same operations per element, fused multiply-adds included, so they give the same bits
 * (a test compares them); FMA contraction changes the double intermediates in their last
 * bits only.
 */
#ifndef GRADVIZ_GELU_H
#define GRADVIZ_GELU_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#if defined(__GNUC__)
#define GRADVIZ_GELU_UNUSED __attribute__((unused))
#define GRADVIZ_GELU_INLINE inline __attribute__((always_inline))
#else
#define GRADVIZ_GELU_UNUSED
#define GRADVIZ_GELU_INLINE inline
#endif

#define GRADVIZ_GELU_TAIL 15.0                 /* beyond it Q(a) and the density are 0 */
#define GRADVIZ_INV_SQRT_2PI 0.39894228040143267794

/* P's coefficients, highest power of u first */
static const double gradviz_gelu_poly[14] GRADVIZ_GELU_UNUSED = {
    -1.58463884823121e-07, -1.8967126180182772e-07, 2.8168973643562136e-06,
    6.6820057643245965e-06, -3.606177363418553e-05, -0.00020391883439478358,
    1.802594824328917e-05, 0.004253499260339843, 0.02450537193314064,
    0.08614600033000772, 0.22300535071743477, 0.45248123005655116,
    0.7377097647486275, 0.9721115868452216};

/* exp(y) for y in [-112.5, 0] (see above) */
static GRADVIZ_GELU_INLINE double gradviz_exp_bounded(double y) {
    const double magic = 6755399441055744.0;  /* 1.5 * 2^52: adding it rounds to an integer */
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double k = y * 1.4426950408889634074 + magic, n = k - magic;
    double r = (y - n * ln2_hi) - n * ln2_lo;
    double p = 1.0 / 39916800.0;
    int64_t bits, magic_bits;
    double scale;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    memcpy(&bits, &k, 8);
    memcpy(&magic_bits, &magic, 8);
    bits = (bits - magic_bits + 1023) << 52;  /* 2^n */
    memcpy(&scale, &bits, 8);
    return p * scale;
}

/* mask ? a : b for a mask of all ones or zeros, in integer operations: GCC vectorizes no
   conditional floating-point expression under -ftrapping-math (the default), and would move
   the arithmetic of a ternary's arms into the condition */
static GRADVIZ_GELU_INLINE double gradviz_select(int64_t mask, double a,
                                                                  double b) {
    int64_t x, y;
    memcpy(&x, &a, 8);
    memcpy(&y, &b, 8);
    x = (x & mask) | (y & ~mask);
    memcpy(&a, &x, 8);
    return a;
}

/* Phi(x) into *cdf and the density exp(-x^2/2) / sqrt(2 pi) (0 beyond the tail) into *pdf */
static GRADVIZ_GELU_INLINE void gradviz_normal(double x, double *cdf,
                                                                  double *pdf) {
    double a = fabs(x);
    int64_t near = -(int64_t)(a <= GRADVIZ_GELU_TAIL);  /* all ones, or 0 (also for NaN) */
    double b = gradviz_select(near, a, GRADVIZ_GELU_TAIL);
    double e = gradviz_exp_bounded(-0.5 * (b * b));
    double t = 5.0 / (5.0 + b), u = t * (8.0 / 3.0) - 5.0 / 3.0, p = gradviz_gelu_poly[0];
    double q;
    /* Horner, written out: a loop over the coefficients keeps GCC from vectorizing */
    p = p * u + gradviz_gelu_poly[1];
    p = p * u + gradviz_gelu_poly[2];
    p = p * u + gradviz_gelu_poly[3];
    p = p * u + gradviz_gelu_poly[4];
    p = p * u + gradviz_gelu_poly[5];
    p = p * u + gradviz_gelu_poly[6];
    p = p * u + gradviz_gelu_poly[7];
    p = p * u + gradviz_gelu_poly[8];
    p = p * u + gradviz_gelu_poly[9];
    p = p * u + gradviz_gelu_poly[10];
    p = p * u + gradviz_gelu_poly[11];
    p = p * u + gradviz_gelu_poly[12];
    p = p * u + gradviz_gelu_poly[13];
    q = gradviz_select(near, e * (p * t * 0.2), 0.0);
    *cdf = gradviz_select(-(int64_t)(x < 0), q, 1.0 - q);
    *pdf = gradviz_select(near, e * GRADVIZ_INV_SQRT_2PI, 0.0);
}

/* x Phi(x) for n contiguous float32 values of x (out may be x); +inf gives NaN when
   posinf_is_nan (torch's vectorized float32 kernel does) */
#define GRADVIZ_GELU_FORWARD_LOOP(x, out, n, posinf_is_nan)                       \
    do {                                                                          \
        Py_ssize_t k_;                                                            \
        int64_t flag_ = -(int64_t)((posinf_is_nan) != 0);                         \
        for (k_ = 0; k_ < (n); k_++) {                                            \
            double v_ = (x)[k_], cdf_, pdf_;                                      \
            gradviz_normal(v_, &cdf_, &pdf_);                                     \
            (out)[k_] = (float)gradviz_select(flag_ & -(int64_t)(v_ == INFINITY), \
                                              NAN, v_ * cdf_);                    \
        }                                                                         \
    } while (0)

/* g (Phi(x) + x phi(x)), the derivative of x Phi(x) times g, for n contiguous float32
   values of x and g (out may be g) */
#define GRADVIZ_GELU_BACKWARD_LOOP(x, g, out, n)                                  \
    do {                                                                          \
        Py_ssize_t k_;                                                            \
        for (k_ = 0; k_ < (n); k_++) {                                            \
            double v_ = (x)[k_], cdf_, pdf_;                                      \
            gradviz_normal(v_, &cdf_, &pdf_);                                     \
            (out)[k_] = (float)((double)(g)[k_] * (cdf_ + v_ * pdf_));            \
        }                                                                         \
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

#endif
