/* One time step of an LSTM layer's backward, elementwise, float32, in one pass.
 *
 * Note [LSTM step kernel] in gradviz/ops/_lstm_layer.py says why: the fast rule's backward
 * through time made about fifteen numpy calls per step on (batch, hidden) arrays, and a
 * concatenation, most of an LSTM training step's time after its products. This computes
 * the same float32 operations in the same order for each entry, so the same bits:
 *
 *     d_cell = (dh * o) * (1 - tanh_c * tanh_c)
 *     dc'    = dc + d_cell                      (d_cell when there is no dc)
 *     dz     = [((dc' * g) * i) * (1 - i), ((dc' * c_prev) * f) * (1 - f),
 *               (dc' * i) * (1 - g * g), ((dh * tanh_c) * o) * (1 - o)]
 *     dc_out = dc' * f
 *
 * Every operand is (batch, hidden) with contiguous rows and a row stride of its own (i, f and
 * o are column blocks of the step's (batch, 4 hidden) gate activations).
 * A multiply and an add stay two roundings (no fused multiply-add), as in numpy.
 */
#ifndef GRADVIZ_LSTM_CELL_H
#define GRADVIZ_LSTM_CELL_H

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

typedef struct {
    Py_ssize_t batch, hidden;
    const float *i, *f, *g, *o, *c_prev, *tanh_c, *dh, *dc;  /* dc may be NULL */
    Py_ssize_t i_row, f_row, g_row, o_row, c_prev_row, tanh_c_row, dh_row, dc_row;
    float *dz, *dc_out;  /* (batch, 4 hidden) and (batch, hidden), C-contiguous */
} gradviz_lstm_step;

static inline void gradviz_lstm_step_backward_f32(const gradviz_lstm_step *s) {
    const Py_ssize_t hidden = s->hidden;
    Py_ssize_t b, j;
    for (b = 0; b < s->batch; b++) {
        const float *in = s->i + b * s->i_row, *forget = s->f + b * s->f_row;
        const float *out = s->o + b * s->o_row;
        const float *g = s->g + b * s->g_row, *c_prev = s->c_prev + b * s->c_prev_row;
        const float *tanh_c = s->tanh_c + b * s->tanh_c_row, *dh = s->dh + b * s->dh_row;
        const float *dc = s->dc == NULL ? NULL : s->dc + b * s->dc_row;
        float *dz = s->dz + b * 4 * hidden, *dc_out = s->dc_out + b * hidden;
        for (j = 0; j < hidden; j++) {
            const float i = in[j], f = forget[j], o = out[j], gj = g[j], t = tanh_c[j];
            const float d_cell = (dh[j] * o) * (1.0f - t * t);
            const float c = dc == NULL ? d_cell : dc[j] + d_cell;
            dz[j] = ((c * gj) * i) * (1.0f - i);
            dz[hidden + j] = ((c * c_prev[j]) * f) * (1.0f - f);
            dz[2 * hidden + j] = (c * i) * (1.0f - gj * gj);
            dz[3 * hidden + j] = ((dh[j] * t) * o) * (1.0f - o);
            dc_out[j] = c * f;
        }
    }
}

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_LSTM_CELL_H */
