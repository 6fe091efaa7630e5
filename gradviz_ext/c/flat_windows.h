/* A stride-1 2-D convolution's wide columns (im2col) and their adjoint (col2im), float32 and
 * float64, each in one pass.
 *
 * Note [Flat windows] in gradviz/ops/_flat_windows.py describes the layout: kernel offset k's
 * columns of plane (n, c) are the slice [start_k, start_k + length) of the plane's flattened
 * padded input (padded_h + 1 rows of padded_w entries, zeros outside the input). numpy builds
 * them with a zero-filled padded copy of the whole batch and a strided copy; here one plane at
 * a time is padded into a scratch plane that stays in cache, and each offset's slice is one
 * copy out of it, the same values. (Writing each slice straight from the input, segment by
 * segment, made one small copy per output row and offset, and was twice as slow as numpy.) The adjoint adds each offset's columns into a zeroed
 * padded plane in offset order, as numpy's slice-adds do, so the same sums in the same order
 * (the same bits), in a scratch plane that stays in cache, and copies the interior out.
 */
#ifndef GRADVIZ_FLAT_WINDOWS_H
#define GRADVIZ_FLAT_WINDOWS_H

#include <string.h>

typedef struct {
    Py_ssize_t planes;             /* N * C */
    Py_ssize_t height, width;      /* the input's spatial size */
    Py_ssize_t pad_h, pad_w;
    Py_ssize_t padded_w;           /* width + 2 pad_w */
    Py_ssize_t flat;               /* (padded height + 1) * padded_w */
    Py_ssize_t length;             /* wide columns per offset */
    Py_ssize_t kernels;            /* offsets: kernel_h * kernel_w */
    const Py_ssize_t *starts;      /* each offset's first flat entry */
} gradviz_flat_windows;

/* scratch: w->flat entries; its padding stays zero from plane to plane */
#define GRADVIZ_UNFOLD_WIDE(name, type)                                                    \
    static inline void name(const type *x, const gradviz_flat_windows *w, type *cols,      \
                            type *scratch) {                                               \
        const Py_ssize_t height = w->height, width = w->width, pw = w->padded_w;           \
        Py_ssize_t plane, k, y;                                                            \
        memset(scratch, 0, (size_t)w->flat * sizeof(type));                               \
        for (plane = 0; plane < w->planes; plane++) {                                      \
            const type *in = x + plane * height * width;                                   \
            for (y = 0; y < height; y++)                                                   \
                memcpy(scratch + (y + w->pad_h) * pw + w->pad_w, in + y * width,           \
                       (size_t)width * sizeof(type));                                      \
            for (k = 0; k < w->kernels; k++)                                               \
                memcpy(cols + (plane * w->kernels + k) * w->length, scratch + w->starts[k],\
                       (size_t)w->length * sizeof(type));                                  \
        }                                                                                  \
    }

/* scratch: w->flat entries */
#define GRADVIZ_FOLD_WIDE(name, type)                                                      \
    static inline void name(const type *cols, const gradviz_flat_windows *w, type *out,    \
                            type *scratch) {                                               \
        const Py_ssize_t height = w->height, width = w->width, pw = w->padded_w;           \
        const Py_ssize_t length = w->length;                                               \
        Py_ssize_t plane, k, j, y;                                                         \
        for (plane = 0; plane < w->planes; plane++) {                                      \
            memset(scratch, 0, (size_t)w->flat * sizeof(type));                            \
            for (k = 0; k < w->kernels; k++) {                                             \
                const type *col = cols + (plane * w->kernels + k) * length;                \
                type *to = scratch + w->starts[k];                                         \
                for (j = 0; j < length; j++) to[j] = to[j] + col[j];                       \
            }                                                                              \
            for (y = 0; y < height; y++)                                                   \
                memcpy(out + (plane * height + y) * width,                                 \
                       scratch + (y + w->pad_h) * pw + w->pad_w, (size_t)width * sizeof(type)); \
        }                                                                                  \
    }

GRADVIZ_UNFOLD_WIDE(gradviz_unfold_wide_f32, float)
GRADVIZ_UNFOLD_WIDE(gradviz_unfold_wide_f64, double)
GRADVIZ_FOLD_WIDE(gradviz_fold_wide_f32, float)
GRADVIZ_FOLD_WIDE(gradviz_fold_wide_f64, double)

#endif  /* GRADVIZ_FLAT_WINDOWS_H */
