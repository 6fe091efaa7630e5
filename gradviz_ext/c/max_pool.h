/* 2-D max pooling of C-contiguous float32 and float64 planes, forward and backward, one pass.
 *
 * Note [Max pool kernels] in gradviz/ops/_conv.py says why: numpy needed three passes and two
 * temporary arrays per kernel offset (a comparison, a maximum, a masked copy), most of a small
 * CNN's pooling time. The forward follows torch's CPU kernel: each window scans its in-bounds
 * elements in row-major order from -inf, and an element wins when it is larger or NaN (so the
 * first maximum, or the last NaN); padding never wins. It writes the maximum and the winning
 * kernel offset's row-major number, choosing without a branch on the data (a comparison of
 * random values is mispredicted half the time; a scan window by window, as torch's, was no
 * faster: each window's comparisons form one chain). The backward adds each output's gradient
 * to its winner, found from the winning offset through a small table (no division per
 * output); where windows can overlap, offset by offset (all outputs won by offset 0, then
 * offset 1, ...), the order of gradviz's differentiable rule (Note [Scatter by offsets]), so
 * both give the same bits; where they cannot (a tiling 2x2 pool), each input gets one gradient
 * at most and one pass in output order gives the same bits.
 */
#ifndef GRADVIZ_MAX_POOL_H
#define GRADVIZ_MAX_POOL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t planes, height, width, out_height, out_width;
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
} gradviz_pool2d;

/* The outputs [*first, *last) along one dim whose window element at kernel offset `k`
   lands inside [0, size): start + o * stride + k * dilation. */
static inline void gradviz_outputs_inside(Py_ssize_t outputs, int stride, int pad, int k,
                                          int dilation, Py_ssize_t size, Py_ssize_t *first,
                                          Py_ssize_t *last) {
    Py_ssize_t lo = 0, hi = outputs, offset = (Py_ssize_t)k * dilation - pad;
    while (lo < hi && lo * stride + offset < 0) lo++;
    while (hi > lo && (hi - 1) * stride + offset >= size) hi--;
    *first = lo;
    *last = hi;
}

/* Offset by offset over all outputs of a plane (the plane's outputs stay in cache), so the
   inner loop over a row of outputs has no branch and vectorizes; an output takes the element
   when it has none yet, or the element is larger or NaN: torch's scan order and rule. */
#define GRADVIZ_MAX_POOL_FORWARD(name, type)                                               \
    static inline void name(const type *x, const gradviz_pool2d *p, type *values,          \
                            long long *positions) {                                        \
        const Py_ssize_t planes = p->planes, height = p->height, width = p->width;         \
        const Py_ssize_t out_h = p->out_height, out_w = p->out_width;                      \
        const int kh = p->kernel_h, kw = p->kernel_w, sh = p->stride_h, sw = p->stride_w;  \
        Py_ssize_t plane, oy, ox, i;                                                       \
        int ky, kx;                                                                        \
        if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && p->pad_h == 0 && p->pad_w == 0     \
            && p->dilation_h == 1 && p->dilation_w == 1 && 2 * out_h <= height               \
            && 2 * out_w <= width) {                                                       \
            /* 2x2 windows that tile the plane (the usual nn.MaxPool2d(2)): each output    \
               reads its four elements in the scan order, two input rows at a time */      \
            for (plane = 0; plane < planes; plane++) {                                     \
                const type *in = x + plane * height * width;                               \
                for (oy = 0; oy < out_h; oy++) {                                           \
                    const type *top = in + 2 * oy * width, *bottom = top + width;          \
                    type *best = values + (plane * out_h + oy) * out_w;                    \
                    long long *won = positions + (plane * out_h + oy) * out_w;             \
                    for (ox = 0; ox < out_w; ox++) {                                       \
                        type m = top[2 * ox], v;                                           \
                        long long k = 0;                                                   \
                        int take;                                                          \
                        v = top[2 * ox + 1];                                               \
                        take = (v > m) | (v != v);                                         \
                        m = take ? v : m;                                                  \
                        k = take ? 1 : k;                                                  \
                        v = bottom[2 * ox];                                                \
                        take = (v > m) | (v != v);                                         \
                        m = take ? v : m;                                                  \
                        k = take ? 2 : k;                                                  \
                        v = bottom[2 * ox + 1];                                            \
                        take = (v > m) | (v != v);                                         \
                        best[ox] = take ? v : m;                                           \
                        won[ox] = take ? 3 : k;                                            \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
            return;                                                                        \
        }                                                                                  \
        for (i = 0; i < planes * out_h * out_w; i++) {                                     \
            values[i] = -INFINITY;                                                         \
            positions[i] = -1;                                                             \
        }                                                                                  \
        for (plane = 0; plane < planes; plane++) {                                         \
            const type *in = x + plane * height * width;                                   \
            type *value = values + plane * out_h * out_w;                                  \
            long long *position = positions + plane * out_h * out_w;                       \
            for (ky = 0; ky < kh; ky++) {                                                  \
                Py_ssize_t oy0, oy1;                                                       \
                gradviz_outputs_inside(out_h, sh, p->pad_h, ky, p->dilation_h, height,     \
                                       &oy0, &oy1);                                        \
                for (kx = 0; kx < kw; kx++) {                                              \
                    Py_ssize_t ox0, ox1;                                                   \
                    const long long k = (long long)ky * kw + kx;                           \
                    gradviz_outputs_inside(out_w, sw, p->pad_w, kx, p->dilation_w, width,  \
                                           &ox0, &ox1);                                    \
                    for (oy = oy0; oy < oy1; oy++) {                                       \
                        const type *row = in + (oy * sh - p->pad_h + ky * p->dilation_h) * width \
                                          - p->pad_w + kx * p->dilation_w;                 \
                        type *best = value + oy * out_w;                                   \
                        long long *won = position + oy * out_w;                            \
                        for (ox = ox0; ox < ox1; ox++) {                                   \
                            type v = row[ox * sw];                                         \
                            int take = (won[ox] < 0) | (v > best[ox]) | (v != v);          \
                            best[ox] = take ? v : best[ox];                                \
                            won[ox] = take ? k : won[ox];                                  \
                        }                                                                  \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }

/* Each winner's place relative to its window's first element, by kernel offset: no division
   per output. Kernels of more than GRADVIZ_MAX_POOL_OFFSETS elements are not handled (the
   caller keeps numpy's scatter-back). */
#define GRADVIZ_MAX_POOL_OFFSETS 256

#define GRADVIZ_MAX_POOL_BACKWARD(name, type)                                              \
    static inline int name(const type *g, const long long *positions,                      \
                           const gradviz_pool2d *p, type *grad) {                          \
        const Py_ssize_t width = p->width, plane_size = p->height * p->width;              \
        const Py_ssize_t out_h = p->out_height, out_w = p->out_width;                      \
        const Py_ssize_t out_size = out_h * out_w;                                         \
        const long long kernel = (long long)p->kernel_h * p->kernel_w;                     \
        Py_ssize_t place[GRADVIZ_MAX_POOL_OFFSETS];                                        \
        Py_ssize_t plane, oy, ox;                                                          \
        long long k;                                                                       \
        /* windows that cannot overlap give each input at most one gradient: one pass */   \
        const int apart = p->stride_h > (p->kernel_h - 1) * p->dilation_h                  \
                          && p->stride_w > (p->kernel_w - 1) * p->dilation_w;              \
        if (kernel > GRADVIZ_MAX_POOL_OFFSETS) return 0;                                   \
        for (k = 0; k < kernel; k++)                                                       \
            place[k] = (Py_ssize_t)(k / p->kernel_w) * p->dilation_h * width               \
                       + (Py_ssize_t)(k % p->kernel_w) * p->dilation_w;                    \
        memset(grad, 0, (size_t)(p->planes * plane_size) * sizeof(type));                  \
        for (plane = 0; plane < p->planes; plane++) {                                      \
            const type *gradient = g + plane * out_size;                                   \
            const long long *position = positions + plane * out_size;                      \
            type *out = grad + plane * plane_size;                                         \
            for (k = apart ? -1 : 0; k < (apart ? 0 : kernel); k++) {                      \
                for (oy = 0; oy < out_h; oy++) {                                           \
                    type *start = out + (oy * p->stride_h - p->pad_h) * width - p->pad_w;  \
                    for (ox = 0; ox < out_w; ox++) {                                       \
                        const long long won = position[oy * out_w + ox];                   \
                        if (won < 0 || (k >= 0 && won != k)) continue;                     \
                        start[ox * p->stride_w + place[won]] += gradient[oy * out_w + ox]; \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        return 1;                                                                          \
    }

GRADVIZ_MAX_POOL_FORWARD(gradviz_max_pool2d_f32, float)
GRADVIZ_MAX_POOL_FORWARD(gradviz_max_pool2d_f64, double)
GRADVIZ_MAX_POOL_BACKWARD(gradviz_max_pool2d_backward_f32, float)
GRADVIZ_MAX_POOL_BACKWARD(gradviz_max_pool2d_backward_f64, double)

#endif  /* GRADVIZ_MAX_POOL_H */
