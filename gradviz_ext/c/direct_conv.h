/* A 2-D convolution's forward (cross-correlation), float32 and float64, computed directly:
 * no im2col columns, no matrix product.
 *
 * Note [Direct convolution] in gradviz/ops/_conv.py says why and when: the small convolutions
 * of LeNet-like models spent their forward building im2col columns and in BLAS products
 * whose shapes (6 to 32 rows) are its weak case. Here
 *
 *     out[n, o, y, x] = bias[o] + sum over (c, ky, kx) of
 *                       w[o, c, ky, kx] * x[n, c, y * sh + ky * dh - ph, x * sw + kx * dw - pw]
 *
 * with consecutive output pixels of a plane (row after row) as the lanes of one AVX-512
 * vector (16 floats or 8 doubles), and a register block of R output channels times V pixel
 * vectors (8 x 3, 6 x 4 or 16 x 1) summed together. One step of the inner loop, one tap
 * (c, ky, kx), loads the block's V pixel vectors and adds each times each of the block's R
 * weights, broadcast: 24 multiply-adds for 3 loads and 8 broadcasts with 8 x 3. The weights
 * are repacked once per call so that a tap's R weights are consecutive (zeros past the last
 * channel); lanes past the last output or channel are computed and not stored.
 *
 * For consecutive output pixels to read consecutive input, each sample is first copied into a
 * scratch that stays in cache: per input channel, kw copies of the padded input, copy kx
 * holding the columns x * sw + kx * dw of each padded row for the ow output columns x (so a
 * row is ow long, as an output row), and the padded rows split into sh phases (row j at phase
 * j % sh, place j / sh). Output (y, x) of tap (c, ky, kx) then reads copy kx of channel c at
 * phase (ky dh) % sh, row y + (ky dh) / sh, column x: the whole plane's pixels as one strided-
 * free run, whatever the stride, dilation and padding, with no bounds tests. The scratch is
 * zeroed once per call; the copies write only the input's places, so padding stays zero from
 * sample to sample and is multiplied like any input (a padded zero times an infinite weight
 * is NaN, as in the column product).
 *
 * Every output is the same sum in the same order, whatever block or lane it falls in: from
 * +0.0 the taps in (c, ky, kx) order, each one fused multiply-add, then the bias added. That
 * is within rounding of the column product, not its bits (no BLAS order is specified either).
 */
#ifndef GRADVIZ_DIRECT_CONV_H
#define GRADVIZ_DIRECT_CONV_H

#include <string.h>

typedef struct {
    Py_ssize_t batch, channels, height, width;
    Py_ssize_t out_channels, out_height, out_width;
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
} gradviz_conv2d;

#define GRADVIZ_CONV_MAX_CHANNELS 16  /* the most output channels of a register block */
#define GRADVIZ_CONV_MAX_KERNEL 64    /* wider kernels take the column product */

typedef float gradviz_conv_v16f __attribute__((vector_size(64)));
typedef double gradviz_conv_v8d __attribute__((vector_size(64)));

/* The register blocks need AVX-512's 32 vector registers: with AVX2's 16 (or SSE's) they
   spill, and ran 20 to 50 times slower than the column product. So they are compiled for
   AVX-512F and used only on a CPU that has it (gradviz_direct_conv_enable); elsewhere the
   caller keeps the column product. */
#if defined(__GNUC__) && defined(__x86_64__)
#define GRADVIZ_CONV_TARGET __attribute__((target("avx512f")))
static inline int gradviz_direct_conv_enable(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}
#else
#define GRADVIZ_CONV_TARGET
static inline int gradviz_direct_conv_enable(void) { return 0; }
#endif

/* The scratch layout of one sample (see above): entries per row phase, per column shift,
   per input channel. */
static inline void gradviz_conv2d_layout(const gradviz_conv2d *p, Py_ssize_t *phase,
                                         Py_ssize_t *shift, Py_ssize_t *channel) {
    const Py_ssize_t padded_h = p->height + 2 * (Py_ssize_t)p->pad_h;
    *phase = (padded_h + p->stride_h - 1) / p->stride_h * p->out_width;
    *shift = *phase * p->stride_h;
    *channel = *shift * p->kernel_w;
}

/* Entries of the scratch the caller gives: one sample's shifted copies, and one vector of
   slack that the lanes past the last output read. */
static inline Py_ssize_t gradviz_conv2d_scratch(const gradviz_conv2d *p, Py_ssize_t lanes) {
    Py_ssize_t phase, shift, channel;
    gradviz_conv2d_layout(p, &phase, &shift, &channel);
    return p->channels * channel + lanes;
}

/* Entries of the repacked weights the caller gives: enough for any block shape. */
static inline Py_ssize_t gradviz_conv2d_packed(const gradviz_conv2d *p) {
    return (p->out_channels + GRADVIZ_CONV_MAX_CHANNELS - 1) * p->channels * p->kernel_h
           * p->kernel_w;
}

/* The output columns [*first, *last) whose input column x * stride + k * dilation - pad lies
   in [0, size). */
static inline void gradviz_conv2d_inside(Py_ssize_t outputs, int stride, int pad, Py_ssize_t k,
                                         int dilation, Py_ssize_t size, Py_ssize_t *first,
                                         Py_ssize_t *last) {
    Py_ssize_t lo = 0, hi = outputs, offset = k * dilation - pad;
    while (lo < hi && lo * stride + offset < 0) lo++;
    while (hi > lo && (hi - 1) * stride + offset >= size) hi--;
    *first = lo;
    *last = hi;
}

/* The register block shapes, output channels x pixel vectors: 24 or 16 accumulators of the
   32 AVX-512 registers. A step of a block costs about the larger of its multiply-adds, R V,
   and its loads, R + V (two of either per cycle), and the lanes it computes that no output
   needs (channels past the last, pixels past the last) cost the same as the others: a call
   takes the shape of least total cost, the first on a tie. */
static const int gradviz_conv_shapes[3][2] = {{8, 3}, {6, 4}, {16, 1}};

static inline int gradviz_conv2d_shape(Py_ssize_t out_channels, Py_ssize_t vectors) {
    int s, best = 0;
    double least = -1.0;
    for (s = 0; s < 3; s++) {
        const Py_ssize_t r = gradviz_conv_shapes[s][0], v = gradviz_conv_shapes[s][1];
        const double step = (double)(r * v > r + v ? r * v : r + v) / (double)(r * v);
        const double cost = step * (double)((out_channels + r - 1) / r * r)
                            * (double)((vectors + v - 1) / v * v);
        if (least < 0 || cost < least) {
            least = cost;
            best = s;
        }
    }
    return best;
}

/* One sample's output, (O, size), from its scratch, in blocks of R channels x V pixel
   vectors; packed: the weights in blocks of R channels, each tap's R weights consecutive. */
#define GRADVIZ_CONV_BLOCKS(name, type, vector, lanes, R, V)                                   \
    GRADVIZ_CONV_TARGET static void name(const type *scratch, const Py_ssize_t *taps,          \
                                         Py_ssize_t count, const type *packed,                 \
                                         const type *bias, type *result, Py_ssize_t O,         \
                                         Py_ssize_t size) {                                    \
        const Py_ssize_t vectors = (size + lanes - 1) / lanes;                                 \
        Py_ssize_t b, t, i, r, v;                                                              \
        for (b = 0; b < O; b += R) {                                                           \
            const type *weights = packed + b * count;                                          \
            const Py_ssize_t channels = O - b < R ? O - b : R;                                 \
            for (t = 0; t < vectors; t += V) {                                                 \
                Py_ssize_t start[V];                                                           \
                vector acc[R][V];                                                              \
                for (v = 0; v < V; v++) {                                                      \
                    /* past the last vector: the last again, not stored */                     \
                    start[v] = (t + v < vectors ? t + v : vectors - 1) * lanes;                \
                    for (r = 0; r < R; r++) acc[r][v] = (vector){0};                           \
                }                                                                              \
                for (i = 0; i < count; i++) {                                                  \
                    const type *in = scratch + taps[i];                                        \
                    const type *tap = weights + i * R;                                         \
                    vector a[V];                                                               \
                    for (v = 0; v < V; v++) memcpy(&a[v], in + start[v], sizeof(vector));      \
                    for (r = 0; r < R; r++)                                                    \
                        for (v = 0; v < V; v++) acc[r][v] += a[v] * tap[r];                    \
                }                                                                              \
                for (v = 0; v < V && t + v < vectors; v++) {                                   \
                    const Py_ssize_t width = size - start[v];                                  \
                    for (r = 0; r < channels; r++) {                                           \
                        type *to = result + (b + r) * size + start[v];                         \
                        vector sum = acc[r][v];                                                \
                        if (bias) sum += bias[b + r];                                          \
                        if (width >= lanes) /* one store */                                    \
                            memcpy(to, &sum, sizeof(vector));                                  \
                        else                                                                   \
                            memcpy(to, &sum, (size_t)width * sizeof(type));                    \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* x (N, C, H, W), w (O, C, kh, kw), bias (O) or NULL, out (N, O, oh, ow), all C-contiguous;
   scratch: gradviz_conv2d_scratch entries; packed: gradviz_conv2d_packed entries; taps:
   C * kh * kw entries. Returns 0 (doing nothing) for kernels wider than
   GRADVIZ_CONV_MAX_KERNEL. */
#define GRADVIZ_DIRECT_CONV(name, type, vector, lanes)                                         \
    GRADVIZ_CONV_BLOCKS(name##_8x3, type, vector, lanes, 8, 3)                                 \
    GRADVIZ_CONV_BLOCKS(name##_6x4, type, vector, lanes, 6, 4)                                 \
    GRADVIZ_CONV_BLOCKS(name##_16x1, type, vector, lanes, 16, 1)                               \
    static inline int name(const type *x, const type *w, const type *bias, type *out,          \
                    const gradviz_conv2d *p, type *scratch, type *packed, Py_ssize_t *taps) {  \
        const Py_ssize_t C = p->channels, H = p->height, W = p->width, O = p->out_channels;    \
        const Py_ssize_t kh = p->kernel_h, kw = p->kernel_w, count = C * kh * kw;              \
        const Py_ssize_t ow = p->out_width, size = p->out_height * ow;                         \
        const int sh = p->stride_h, sw = p->stride_w;                                          \
        const int shape = gradviz_conv2d_shape(O, (size + lanes - 1) / lanes);                 \
        const Py_ssize_t R = gradviz_conv_shapes[shape][0];                                    \
        Py_ssize_t phase, shift, channel, n, c, i, b, ky, kx, iy, ix, r;                       \
        Py_ssize_t first[GRADVIZ_CONV_MAX_KERNEL], last[GRADVIZ_CONV_MAX_KERNEL];              \
        if (kw > GRADVIZ_CONV_MAX_KERNEL) return 0;                                            \
        gradviz_conv2d_layout(p, &phase, &shift, &channel);                                    \
        memset(scratch, 0, (size_t)gradviz_conv2d_scratch(p, lanes) * sizeof(type));           \
        for (kx = 0; kx < kw; kx++)                                                            \
            gradviz_conv2d_inside(ow, sw, p->pad_w, kx, p->dilation_w, W, &first[kx],          \
                                  &last[kx]);                                                  \
        /* taps in (c, ky, kx) order: where each one's input for output 0 lies */              \
        for (c = 0; c < C; c++)                                                                \
            for (ky = 0; ky < kh; ky++)                                                        \
                for (kx = 0; kx < kw; kx++) {                                                  \
                    const Py_ssize_t row = ky * p->dilation_h;                                 \
                    taps[(c * kh + ky) * kw + kx] = c * channel + kx * shift                   \
                        + (row % sh) * phase + row / sh * ow;                                  \
                }                                                                              \
        for (b = 0; b < O; b += R)                                                             \
            for (i = 0; i < count; i++)                                                        \
                for (r = 0; r < R; r++)                                                        \
                    packed[b * count + i * R + r] =                                            \
                        b + r < O ? w[(b + r) * count + i] : (type)0;                          \
        for (n = 0; n < p->batch; n++) {                                                       \
            const type *sample = x + n * C * H * W;                                            \
            /* the input rows into each column shift's copy; padding stays zero */             \
            for (c = 0; c < C; c++)                                                            \
                for (kx = 0; kx < kw; kx++)                                                    \
                    for (iy = 0; iy < H; iy++) {                                               \
                        const Py_ssize_t j = iy + p->pad_h;                                    \
                        const type *from = sample + (c * H + iy) * W                           \
                                           + kx * p->dilation_w - p->pad_w;                    \
                        type *to = scratch + c * channel + kx * shift + (j % sh) * phase       \
                                   + j / sh * ow;                                              \
                        /* a loop, not memcpy: rows are short, a call costs more */            \
                        if (sw == 1)                                                           \
                            for (ix = first[kx]; ix < last[kx]; ix++) to[ix] = from[ix];       \
                        else                                                                   \
                            for (ix = first[kx]; ix < last[kx]; ix++) to[ix] = from[ix * sw];  \
                    }                                                                          \
            if (shape == 0)                                                                    \
                name##_8x3(scratch, taps, count, packed, bias, out + n * O * size, O, size);   \
            else if (shape == 1)                                                               \
                name##_6x4(scratch, taps, count, packed, bias, out + n * O * size, O, size);   \
            else                                                                               \
                name##_16x1(scratch, taps, count, packed, bias, out + n * O * size, O, size);  \
        }                                                                                      \
        return 1;                                                                              \
    }

GRADVIZ_DIRECT_CONV(gradviz_direct_conv2d_f32, float, gradviz_conv_v16f, 16)
GRADVIZ_DIRECT_CONV(gradviz_direct_conv2d_f64, double, gradviz_conv_v8d, 8)

#endif  /* GRADVIZ_DIRECT_CONV_H */
