/* A 2-D convolution's forward (cross-correlation) and its weight's gradient, float32 and
 * float64, computed directly: no im2col columns, no matrix product. (The input's gradient of a
 * stride-1 convolution is the forward itself, of the output gradient with the weight
 * transposed and flipped: Note [Direct convolution backward] in gradviz/ops/_conv.py; the
 * weight's gradient is the section at the end.)
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
typedef int gradviz_conv_v16i __attribute__((vector_size(64)));       /* lane masks */
typedef long long gradviz_conv_v8l __attribute__((vector_size(64)));

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

/* The taps' places in the scratch for output 0, in (c, ky, kx) order (C * kh * kw entries),
   and for each kx the output columns [first, last) whose input column lies inside the input
   (GRADVIZ_CONV_MAX_KERNEL entries each). */
static inline void gradviz_conv2d_taps(const gradviz_conv2d *p, Py_ssize_t *taps,
                                       Py_ssize_t *first, Py_ssize_t *last) {
    const Py_ssize_t kh = p->kernel_h, kw = p->kernel_w, ow = p->out_width;
    const int sh = p->stride_h;
    Py_ssize_t phase, shift, channel, c, ky, kx;
    gradviz_conv2d_layout(p, &phase, &shift, &channel);
    for (kx = 0; kx < kw; kx++)
        gradviz_conv2d_inside(ow, p->stride_w, p->pad_w, kx, p->dilation_w, p->width,
                              &first[kx], &last[kx]);
    for (c = 0; c < p->channels; c++)
        for (ky = 0; ky < kh; ky++)
            for (kx = 0; kx < kw; kx++) {
                const Py_ssize_t row = ky * p->dilation_h;
                taps[(c * kh + ky) * kw + kx] = c * channel + kx * shift + (row % sh) * phase
                                                + row / sh * ow;
            }
}

/* One sample's input rows into each column shift's copy in the scratch (first and last from
   gradviz_conv2d_taps); the padding is not written, so it stays zero. */
#define GRADVIZ_CONV_FILL(name, type)                                                          \
    static inline void name(const type *sample, const gradviz_conv2d *p,                       \
                            const Py_ssize_t *first, const Py_ssize_t *last, type *scratch) {  \
        const Py_ssize_t H = p->height, W = p->width, ow = p->out_width;                       \
        const int sh = p->stride_h, sw = p->stride_w;                                          \
        Py_ssize_t phase, shift, channel, c, kx, iy, ix;                                       \
        gradviz_conv2d_layout(p, &phase, &shift, &channel);                                    \
        for (c = 0; c < p->channels; c++)                                                      \
            for (kx = 0; kx < p->kernel_w; kx++)                                               \
                for (iy = 0; iy < H; iy++) {                                                   \
                    const Py_ssize_t j = iy + p->pad_h;                                        \
                    const type *from = sample + (c * H + iy) * W + kx * p->dilation_w          \
                                       - p->pad_w;                                             \
                    type *to = scratch + c * channel + kx * shift + (j % sh) * phase           \
                               + j / sh * ow;                                                  \
                    /* a loop, not memcpy: rows are short, a call costs more */                \
                    if (sw == 1)                                                               \
                        for (ix = first[kx]; ix < last[kx]; ix++) to[ix] = from[ix];           \
                    else                                                                       \
                        for (ix = first[kx]; ix < last[kx]; ix++) to[ix] = from[ix * sw];      \
                }                                                                              \
    }

/* x (N, C, H, W), w (O, C, kh, kw), bias (O) or NULL, out (N, O, oh, ow), all C-contiguous;
   scratch: gradviz_conv2d_scratch entries; packed: gradviz_conv2d_packed entries; taps:
   C * kh * kw entries. Returns 0 (doing nothing) for kernels wider than
   GRADVIZ_CONV_MAX_KERNEL. */
#define GRADVIZ_DIRECT_CONV(name, fill, type, vector, lanes)                                   \
    GRADVIZ_CONV_BLOCKS(name##_8x3, type, vector, lanes, 8, 3)                                 \
    GRADVIZ_CONV_BLOCKS(name##_6x4, type, vector, lanes, 6, 4)                                 \
    GRADVIZ_CONV_BLOCKS(name##_16x1, type, vector, lanes, 16, 1)                               \
    static inline int name(const type *x, const type *w, const type *bias, type *out,          \
                    const gradviz_conv2d *p, type *scratch, type *packed, Py_ssize_t *taps) {  \
        const Py_ssize_t C = p->channels, O = p->out_channels;                                 \
        const Py_ssize_t count = C * p->kernel_h * p->kernel_w;                                \
        const Py_ssize_t size = p->out_height * p->out_width;                                  \
        const int shape = gradviz_conv2d_shape(O, (size + lanes - 1) / lanes);                 \
        const Py_ssize_t R = gradviz_conv_shapes[shape][0];                                    \
        Py_ssize_t n, i, b, r;                                                                 \
        Py_ssize_t first[GRADVIZ_CONV_MAX_KERNEL], last[GRADVIZ_CONV_MAX_KERNEL];              \
        if (p->kernel_w > GRADVIZ_CONV_MAX_KERNEL) return 0;                                   \
        memset(scratch, 0, (size_t)gradviz_conv2d_scratch(p, lanes) * sizeof(type));           \
        gradviz_conv2d_taps(p, taps, first, last);                                             \
        for (b = 0; b < O; b += R)                                                             \
            for (i = 0; i < count; i++)                                                        \
                for (r = 0; r < R; r++)                                                        \
                    packed[b * count + i * R + r] =                                            \
                        b + r < O ? w[(b + r) * count + i] : (type)0;                          \
        for (n = 0; n < p->batch; n++) {                                                       \
            fill(x + n * C * p->height * p->width, p, first, last, scratch);                   \
            if (shape == 0)                                                                    \
                name##_8x3(scratch, taps, count, packed, bias, out + n * O * size, O, size);   \
            else if (shape == 1)                                                               \
                name##_6x4(scratch, taps, count, packed, bias, out + n * O * size, O, size);   \
            else                                                                               \
                name##_16x1(scratch, taps, count, packed, bias, out + n * O * size, O, size);  \
        }                                                                                      \
        return 1;                                                                              \
    }

/* ---- the weight's gradient ----

   grad_w[o, c, ky, kx] = sum over n, y, x of g[n, o, y, x] * x[n, c, y * sh + ky * dh - ph, ...]:
   for each sample, the dot products of its (O, size) output gradient rows with the scratch's
   tap runs above (the same copies, the same taps). A register block of R output channels x V
   taps keeps R x V vectors of per-lane sums; one step over a vector of pixels loads R gradient
   and V input vectors for R V multiply-adds (24 for 10 loads with 4 x 6). The per-lane sums
   stay in a partial array across the samples (a few samples a call, gradviz_conv2d_group);
   each output's lanes are added together once, at the end. In a last, partial pixel vector
   the gradient's lanes past the last pixel are zeros (rows copied with zero tails) and the
   input's are masked to zeros, so they add nothing whatever the scratch holds there (keeping
   the accumulators in registers wants every vector whole: variable-length copies put them on
   the stack). Every output is the same sum in the same order whatever its block: per lane,
   from +0.0, the pixels of the lane in sample then pixel order, each one fused multiply-add;
   then the lanes pairwise (halves added, again and again). The padding's zeros are
   multiplied like the input, as the im2col columns' zeros are. */

static const int gradviz_conv_weight_shapes[3][2] = {{4, 6}, {8, 3}, {2, 12}};

/* The partial's rows and columns: the output channels and the taps rounded up to whole blocks
   of any shape (8 channels, 12 taps). */
static inline Py_ssize_t gradviz_conv2d_channels_up(Py_ssize_t out_channels) {
    return (out_channels + 7) / 8 * 8;
}

static inline Py_ssize_t gradviz_conv2d_taps_up(Py_ssize_t count) {
    return (count + 11) / 12 * 12;
}

/* The block shape for O output channels and count taps: the least lanes computed in all
   (each shape's step, 24 multiply-adds, costs alike), the first on a tie. */
static inline int gradviz_conv2d_weight_shape(Py_ssize_t out_channels, Py_ssize_t count) {
    int s, best = 0;
    Py_ssize_t least = -1;
    for (s = 0; s < 3; s++) {
        const Py_ssize_t r = gradviz_conv_weight_shapes[s][0];
        const Py_ssize_t v = gradviz_conv_weight_shapes[s][1];
        const Py_ssize_t cost = (out_channels + r - 1) / r * r * ((count + v - 1) / v * v);
        if (least < 0 || cost < least) {
            least = cost;
            best = s;
        }
    }
    return best;
}

/* The products of a group of samples added into partial ((channels_up, taps_up) vectors of
   lanes entries): rows their (samples, O, stride) output gradient, each row's size entries
   followed by zeros up to a whole vector; scratch their copies, copies entries apart, whose
   lanes past size are masked off (each copy's slack keeps those reads inside it). */
#define GRADVIZ_CONV_WEIGHT_BLOCKS(name, type, vector, mask, lanes, R, V)                      \
    GRADVIZ_CONV_TARGET static void name(const type *scratch, const Py_ssize_t *taps,          \
                                         Py_ssize_t count, Py_ssize_t copies,                  \
                                         const type *rows, Py_ssize_t stride,                  \
                                         Py_ssize_t samples, type *partial, Py_ssize_t O,      \
                                         Py_ssize_t size) {                                    \
        const Py_ssize_t full = size / lanes * lanes;                                          \
        const Py_ssize_t taps_up = gradviz_conv2d_taps_up(count);                              \
        mask keep;                                                                             \
        Py_ssize_t b, t, j, r, v, k;                                                           \
        for (j = 0; j < lanes; j++) keep[j] = full + j < size ? -1 : 0;                        \
        for (b = 0; b < O; b += R) {                                                           \
            const Py_ssize_t channels = O - b < R ? O - b : R;                                 \
            const type *g[R];                                                                  \
            /* past the last channel: the last again (its sums are not read) */                \
            for (r = 0; r < R; r++) g[r] = rows + (b + (r < channels ? r : channels - 1)) * stride;\
            for (t = 0; t < count; t += V) {                                                   \
                const Py_ssize_t width = count - t < V ? count - t : V;                        \
                const type *runs[V];                                                           \
                vector acc[R][V];                                                              \
                for (v = 0; v < V; v++) runs[v] = scratch + taps[t + (v < width ? v : width - 1)];\
                for (r = 0; r < R; r++)                                                        \
                    for (v = 0; v < V; v++)                                                    \
                        memcpy(&acc[r][v], partial + ((b + r) * taps_up + t + v) * lanes,      \
                               sizeof(vector));                                                \
                for (k = 0; k < samples; k++) {                                                \
                    const Py_ssize_t gk = k * O * stride, sk = k * copies;                     \
                    for (j = 0; j < full; j += lanes) {                                        \
                        vector a[R];                                                           \
                        for (r = 0; r < R; r++) memcpy(&a[r], g[r] + gk + j, sizeof(vector));  \
                        for (v = 0; v < V; v++) {                                              \
                            vector s;                                                          \
                            memcpy(&s, runs[v] + sk + j, sizeof(vector));                      \
                            for (r = 0; r < R; r++) acc[r][v] += a[r] * s;                     \
                        }                                                                      \
                    }                                                                          \
                    if (full < size) {                                                         \
                        vector a[R];                                                           \
                        for (r = 0; r < R; r++)                                                \
                            memcpy(&a[r], g[r] + gk + full, sizeof(vector));                   \
                        for (v = 0; v < V; v++) {                                              \
                            vector s;                                                          \
                            memcpy(&s, runs[v] + sk + full, sizeof(vector));                   \
                            s = (vector)((mask)s & keep);                                      \
                            for (r = 0; r < R; r++) acc[r][v] += a[r] * s;                     \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
                /* all R x V, those past the last channel or tap into the partial's spare  \
                   rows and columns (stores of variable count would keep acc in memory) */     \
                for (r = 0; r < R; r++)                                                        \
                    for (v = 0; v < V; v++)                                                    \
                        memcpy(partial + ((b + r) * taps_up + t + v) * lanes, &acc[r][v],      \
                               sizeof(vector));                                                \
            }                                                                                  \
        }                                                                                      \
    }

/* Samples per call of the blocks, their copies and gradient rows side by side: enough for
   about 1,024 pixels, at most 4. A block loads and stores its R x V sums once per call, which
   a (32, 16, 16, 16) input's 256 pixels did not repay (one sample per call: 580 us, four:
   490 us); with a 1,024-pixel plane one sample is already enough, and four spill out of
   cache (205 us against 220). */
static inline Py_ssize_t gradviz_conv2d_group(const gradviz_conv2d *p) {
    const Py_ssize_t size = p->out_height * p->out_width;
    const Py_ssize_t group = size > 0 ? 1024 / size : 4;
    return group < 1 ? 1 : group > 4 ? 4 : group;
}

/* Entries of the scratch the weight's gradient needs: gradviz_conv2d_group samples' copies,
   each gradviz_conv2d_scratch entries rounded up to whole vectors. */
static inline Py_ssize_t gradviz_conv2d_weight_scratch(const gradviz_conv2d *p,
                                                      Py_ssize_t lanes) {
    return gradviz_conv2d_group(p)
           * ((gradviz_conv2d_scratch(p, lanes) + lanes - 1) / lanes * lanes);
}

/* x (N, C, H, W), g (N, O, oh, ow), grad_w (O, C, kh, kw), all C-contiguous; scratch:
   gradviz_conv2d_weight_scratch entries; partial: gradviz_conv2d_channels_up(O) *
   gradviz_conv2d_taps_up(C * kh * kw) * lanes entries; rows: gradviz_conv2d_group * O *
   stride entries, stride the output size rounded up to whole vectors (unused when that is the
   size); taps: C * kh * kw entries.
   Returns 0 (doing nothing) for kernels wider than GRADVIZ_CONV_MAX_KERNEL. */
#define GRADVIZ_DIRECT_CONV_WEIGHT_GRAD(name, fill, type, vector, mask, lanes)                 \
    GRADVIZ_CONV_WEIGHT_BLOCKS(name##_4x6, type, vector, mask, lanes, 4, 6)                    \
    GRADVIZ_CONV_WEIGHT_BLOCKS(name##_8x3, type, vector, mask, lanes, 8, 3)                    \
    GRADVIZ_CONV_WEIGHT_BLOCKS(name##_2x12, type, vector, mask, lanes, 2, 12)                  \
    static inline int name(const type *x, const type *g, type *grad_w, const gradviz_conv2d *p,\
                           type *scratch, type *partial, type *rows, Py_ssize_t *taps) {       \
        const Py_ssize_t C = p->channels, O = p->out_channels;                                 \
        const Py_ssize_t count = C * p->kernel_h * p->kernel_w;                                \
        const Py_ssize_t size = p->out_height * p->out_width;                                  \
        const Py_ssize_t stride = (size + lanes - 1) / lanes * lanes;                          \
        const Py_ssize_t group = gradviz_conv2d_group(p);                                      \
        const Py_ssize_t copies = gradviz_conv2d_weight_scratch(p, lanes) / group;             \
        const Py_ssize_t taps_up = gradviz_conv2d_taps_up(count);                              \
        const int shape = gradviz_conv2d_weight_shape(O, count);                               \
        Py_ssize_t n, k, o, i, half, l;                                                        \
        Py_ssize_t first[GRADVIZ_CONV_MAX_KERNEL], last[GRADVIZ_CONV_MAX_KERNEL];              \
        if (p->kernel_w > GRADVIZ_CONV_MAX_KERNEL) return 0;                                   \
        memset(scratch, 0, (size_t)(group * copies) * sizeof(type));                           \
        memset(partial, 0, (size_t)(gradviz_conv2d_channels_up(O) * taps_up * lanes)           \
                           * sizeof(type));                                                    \
        if (stride != size) memset(rows, 0, (size_t)(group * O * stride) * sizeof(type));      \
        gradviz_conv2d_taps(p, taps, first, last);                                             \
        for (n = 0; n < p->batch; n += group) {                                                \
            const Py_ssize_t samples = p->batch - n < group ? p->batch - n : group;            \
            /* whole vectors per row: the gradient as it is, else copied into zero tails */    \
            const type *from = stride == size ? g + n * O * size : rows;                       \
            for (k = 0; k < samples; k++) {                                                    \
                fill(x + (n + k) * C * p->height * p->width, p, first, last,                   \
                     scratch + k * copies);                                                    \
                for (i = 0; stride != size && i < O; i++)                                      \
                    memcpy(rows + (k * O + i) * stride, g + ((n + k) * O + i) * size,          \
                           (size_t)size * sizeof(type));                                       \
            }                                                                                  \
            if (shape == 0)                                                                    \
                name##_4x6(scratch, taps, count, copies, from, stride, samples, partial, O,    \
                           size);                                                              \
            else if (shape == 1)                                                               \
                name##_8x3(scratch, taps, count, copies, from, stride, samples, partial, O,    \
                           size);                                                              \
            else                                                                               \
                name##_2x12(scratch, taps, count, copies, from, stride, samples, partial, O,   \
                            size);                                                             \
        }                                                                                      \
        for (o = 0; o < O; o++)                                                                \
            for (i = 0; i < count; i++) {                                                      \
                type *sums = partial + (o * taps_up + i) * lanes;                              \
                for (half = lanes / 2; half > 0; half /= 2)                                    \
                    for (l = 0; l < half; l++) sums[l] = sums[l] + sums[l + half];             \
                grad_w[o * count + i] = sums[0];                                               \
            }                                                                                  \
        return 1;                                                                              \
    }

GRADVIZ_CONV_FILL(gradviz_conv2d_fill_f32, float)
GRADVIZ_CONV_FILL(gradviz_conv2d_fill_f64, double)
GRADVIZ_DIRECT_CONV(gradviz_direct_conv2d_f32, gradviz_conv2d_fill_f32, float, gradviz_conv_v16f,
                    16)
GRADVIZ_DIRECT_CONV(gradviz_direct_conv2d_f64, gradviz_conv2d_fill_f64, double, gradviz_conv_v8d,
                    8)
GRADVIZ_DIRECT_CONV_WEIGHT_GRAD(gradviz_direct_conv2d_weight_grad_f32, gradviz_conv2d_fill_f32,
                                float, gradviz_conv_v16f, gradviz_conv_v16i, 16)
GRADVIZ_DIRECT_CONV_WEIGHT_GRAD(gradviz_direct_conv2d_weight_grad_f64, gradviz_conv2d_fill_f64,
                                double, gradviz_conv_v8d, gradviz_conv_v8l, 8)

#endif  /* GRADVIZ_DIRECT_CONV_H */
