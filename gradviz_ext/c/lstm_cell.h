/* One time step of an LSTM layer, forward and backward, elementwise, float32, in one pass each.
 *
 * Forward (Note [LSTM forward kernel] in gradviz/ops/_lstm_layer.py): from the step's product
 * r = h_prev w_hh^T, the hidden bias b and the projected input p (x_t w_ih^T + b_ih),
 *
 *     z      = (r + b) + p                      (r + p without a bias)
 *     gates  = 1 / (1 + exp(-z))                (all four blocks; i, f and o are used)
 *     g      = tanh(z[:, 2 hidden:3 hidden])
 *     c      = f * c_prev + i * g
 *     tanh_c = tanh(c),   h = o * tanh_c
 *
 * the numpy code's operations in its order, each rounded to float32, so its bits: exp and tanh
 * are numpy's own loops (ufunc_loops.h), run once over the step's whole array each, and the
 * rest three passes over the step. The product comes in either order (Note [LSTM forward
 * kernel]): entry (b, j) of r is at b * recurrent_row + j * recurrent_col.
 *
 * Backward (Note [LSTM step kernel] in gradviz/ops/_lstm_layer.py): the fast rule's backward
 * through time made about fifteen numpy calls per step on (batch, hidden) arrays, and a
 * concatenation, most of an LSTM training step's time after its products. This computes
 * the same float32 operations in the same order for each entry, so the same bits:
 *
 *     dh'    = dh + dh_add                      (dh when there is no dh_add)
 *     d_cell = (dh' * o) * (1 - tanh_c * tanh_c)
 *     dc'    = dc + d_cell                      (d_cell when there is no dc)
 *     dz     = [((dc' * g) * i) * (1 - i), ((dc' * c_prev) * f) * (1 - f),
 *               (dc' * i) * (1 - g * g), ((dh' * tanh_c) * o) * (1 - o)]
 *     dc_out = dc' * f
 *
 * Every operand is (batch, hidden) with contiguous rows and a row stride of its own (i, f and
 * o are column blocks of the step's (batch, 4 hidden) gate activations).
 * A multiply and an add stay two roundings (no fused multiply-add), as in numpy.
 */
#ifndef GRADVIZ_LSTM_CELL_H
#define GRADVIZ_LSTM_CELL_H

#include "exact_arithmetic.h"
#include "ufunc_loops.h"

GRADVIZ_EXACT_BEGIN

typedef struct {
    Py_ssize_t batch, hidden;
    const float *i, *f, *g, *o, *c_prev, *tanh_c, *dh, *dh_add, *dc;  /* dh_add, dc: or NULL */
    Py_ssize_t i_row, f_row, g_row, o_row, c_prev_row, tanh_c_row, dh_row, dh_add_row, dc_row;
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
        const float *dh_add = s->dh_add == NULL ? NULL : s->dh_add + b * s->dh_add_row;
        const float *dc = s->dc == NULL ? NULL : s->dc + b * s->dc_row;
        float *dz = s->dz + b * 4 * hidden, *dc_out = s->dc_out + b * hidden;
        for (j = 0; j < hidden; j++) {
            const float i = in[j], f = forget[j], o = out[j], gj = g[j], t = tanh_c[j];
            const float d = dh_add == NULL ? dh[j] : dh[j] + dh_add[j];
            const float d_cell = (d * o) * (1.0f - t * t);
            const float c = dc == NULL ? d_cell : dc[j] + d_cell;
            dz[j] = ((c * gj) * i) * (1.0f - i);
            dz[hidden + j] = ((c * c_prev[j]) * f) * (1.0f - f);
            dz[2 * hidden + j] = (c * i) * (1.0f - gj * gj);
            dz[3 * hidden + j] = ((d * t) * o) * (1.0f - o);
            dc_out[j] = c * f;
        }
    }
}


/* numpy's float32 exp and tanh loops (gradviz_lstm_enable); the forward runs only with both */
static gradviz_ufunc_loop gradviz_lstm_exp_f32, gradviz_lstm_tanh_f32;

/* Finds numpy's float32 loops of `exp` and `tanh` (numpy.exp and numpy.tanh; `ufunc_type` is
   numpy.ufunc, `typenum` float32's type number): 1 when both were found, else 0. */
static inline int gradviz_lstm_enable(PyObject *exp, PyObject *tanh, PyObject *ufunc_type,
                                      int typenum) {
    if (gradviz_ufunc_loop_find(exp, ufunc_type, typenum, &gradviz_lstm_exp_f32)
            && gradviz_ufunc_loop_find(tanh, ufunc_type, typenum, &gradviz_lstm_tanh_f32))
        return 1;
    gradviz_lstm_exp_f32.loop = gradviz_lstm_tanh_f32.loop = NULL;
    return 0;
}

typedef struct {
    Py_ssize_t batch, hidden;
    const float *recurrent;        /* h_prev w_hh^T, entry (b, j) at the strides below */
    Py_ssize_t recurrent_row, recurrent_col;
    const float *bias;             /* b_hh (4 hidden), or NULL */
    const float *projected;        /* (batch, 4 hidden), rows projected_row apart */
    const float *c_prev;           /* (batch, hidden), rows c_prev_row apart */
    Py_ssize_t projected_row, c_prev_row;
    float *gates;                  /* (batch, 4 hidden), C-contiguous */
    float *g, *c, *tanh_c, *h;     /* (batch, hidden) each, C-contiguous */
} gradviz_lstm_step_in;

static inline void gradviz_lstm_step_forward_f32(const gradviz_lstm_step_in *s) {
    const Py_ssize_t hidden = s->hidden, width = 4 * hidden, n = s->batch * hidden;
    const Py_ssize_t col = s->recurrent_col;
    Py_ssize_t b, j;
    for (b = 0; b < s->batch; b++) {  /* -z into the gates, z of the cell input into g */
        const float *r = s->recurrent + b * s->recurrent_row;
        const float *p = s->projected + b * s->projected_row;
        float *minus_z = s->gates + b * width, *g = s->g + b * hidden;
        if (s->bias == NULL) {
            for (j = 0; j < width; j++) minus_z[j] = -(r[j * col] + p[j]);
            for (j = 0; j < hidden; j++) g[j] = r[(2 * hidden + j) * col] + p[2 * hidden + j];
        } else {
            const float *bias = s->bias;
            for (j = 0; j < width; j++) minus_z[j] = -((r[j * col] + bias[j]) + p[j]);
            for (j = 0; j < hidden; j++)
                g[j] = (r[(2 * hidden + j) * col] + bias[2 * hidden + j]) + p[2 * hidden + j];
        }
    }
    gradviz_ufunc_loop_run(&gradviz_lstm_exp_f32, s->gates, s->gates, s->batch * width,
                           sizeof(float));
    gradviz_ufunc_loop_run(&gradviz_lstm_tanh_f32, s->g, s->g, n, sizeof(float));
    for (b = 0; b < s->batch; b++) {  /* the sigmoids, then the cell */
        float *gates = s->gates + b * width, *c = s->c + b * hidden;
        const float *g = s->g + b * hidden, *c_prev = s->c_prev + b * s->c_prev_row;
        for (j = 0; j < width; j++) gates[j] = 1.0f / (1.0f + gates[j]);
        for (j = 0; j < hidden; j++) c[j] = gates[hidden + j] * c_prev[j] + gates[j] * g[j];
    }
    gradviz_ufunc_loop_run(&gradviz_lstm_tanh_f32, s->c, s->tanh_c, n, sizeof(float));
    for (b = 0; b < s->batch; b++) {
        const float *o = s->gates + b * width + 3 * hidden, *tanh_c = s->tanh_c + b * hidden;
        float *h = s->h + b * hidden;
        for (j = 0; j < hidden; j++) h[j] = o[j] * tanh_c[j];
    }
}

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_LSTM_CELL_H */
