/* 2-D max pooling of C-contiguous float32 and float64 planes, forward and backward, one pass.
 *
 * Note [Max pool kernels] in gradviz/ops/_conv.py says why: numpy needed three passes and two
 * temporary arrays per kernel offset (a comparison, a maximum, a masked copy), most of a small
 * CNN's pooling time. The forward follows torch's CPU kernel: each window scans its in-bounds
 * elements in row-major order from -inf, and an element wins when it is larger or NaN (so the
 * first maximum, or the last NaN); padding never wins. It writes the maximum and the winning
 * kernel offset's row-major number. The backward adds each output's gradient to its winner,
 * offset by offset (all outputs won by offset 0, then offset 1, ...), the order of gradviz's
 * differentiable rule (Note [Scatter by offsets]), so both give the same bits.
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

#define GRADVIZ_MAX_POOL_FORWARD(name, type)                                               \
    static inline void name(const type *x, const gradviz_pool2d *p, type *values,                 \
                     long long *positions) {                                                 \
        Py_ssize_t plane, oy, ox, plane_size = p->height * p->width;                       \
        Py_ssize_t out_size = p->out_height * p->out_width;                                \
        int ky, kx;                                                                        \
        for (plane = 0; plane < p->planes; plane++) {                                      \
            const type *in = x + plane * plane_size;                                       \
            type *value = values + plane * out_size;                                       \
            long long *position = positions + plane * out_size;                              \
            for (oy = 0; oy < p->out_height; oy++) {                                       \
                for (ox = 0; ox < p->out_width; ox++) {                                    \
                    type best = -INFINITY;                                                 \
                    long long best_k = -1;                                                   \
                    for (ky = 0; ky < p->kernel_h; ky++) {                                 \
                        Py_ssize_t iy = oy * p->stride_h - p->pad_h + ky * p->dilation_h;  \
                        if (iy < 0 || iy >= p->height) continue;                           \
                        for (kx = 0; kx < p->kernel_w; kx++) {                             \
                            Py_ssize_t ix = ox * p->stride_w - p->pad_w + kx * p->dilation_w; \
                            type v;                                                        \
                            if (ix < 0 || ix >= p->width) continue;                        \
                            v = in[iy * p->width + ix];                                    \
                            if (best_k < 0 || v > best || isnan(v)) {                      \
                                best = v;                                                  \
                                best_k = (long long)ky * p->kernel_w + kx;                   \
                            }                                                              \
                        }                                                                  \
                    }                                                                      \
                    value[oy * p->out_width + ox] = best;                                  \
                    position[oy * p->out_width + ox] = best_k;                             \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }

#define GRADVIZ_MAX_POOL_BACKWARD(name, type)                                              \
    static inline void name(const type *g, const long long *positions, const gradviz_pool2d *p,     \
                     type *grad) {                                                         \
        Py_ssize_t plane, o, plane_size = p->height * p->width;                            \
        Py_ssize_t out_size = p->out_height * p->out_width;                                \
        long long k, kernel = (long long)p->kernel_h * p->kernel_w;                            \
        memset(grad, 0, (size_t)(p->planes * plane_size) * sizeof(type));                  \
        for (plane = 0; plane < p->planes; plane++) {                                      \
            const type *gradient = g + plane * out_size;                                   \
            const long long *position = positions + plane * out_size;                        \
            type *out = grad + plane * plane_size;                                         \
            for (k = 0; k < kernel; k++) {                                                 \
                Py_ssize_t ky = (Py_ssize_t)(k / p->kernel_w), kx = (Py_ssize_t)(k % p->kernel_w); \
                for (o = 0; o < out_size; o++) {                                           \
                    Py_ssize_t oy, ox;                                                     \
                    if (position[o] != k) continue;                                        \
                    oy = o / p->out_width;                                                 \
                    ox = o % p->out_width;                                                 \
                    out[(oy * p->stride_h - p->pad_h + ky * p->dilation_h) * p->width      \
                        + ox * p->stride_w - p->pad_w + kx * p->dilation_w] += gradient[o]; \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }

GRADVIZ_MAX_POOL_FORWARD(gradviz_max_pool2d_f32, float)
GRADVIZ_MAX_POOL_FORWARD(gradviz_max_pool2d_f64, double)
GRADVIZ_MAX_POOL_BACKWARD(gradviz_max_pool2d_backward_f32, float)
GRADVIZ_MAX_POOL_BACKWARD(gradviz_max_pool2d_backward_f64, double)

#endif  /* GRADVIZ_MAX_POOL_H */
