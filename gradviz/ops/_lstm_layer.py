"""``lstm_layer``: one layer and direction of a float32 ``nn.LSTM`` as one node,
``MkldnnRnnLayerBackward0``, as torch records it on the CPU.

Note [One node per LSTM layer]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
For float32 ``nn.LSTM`` without ``proj_size``, torch runs each layer and direction as one oneDNN
call and records one ``MkldnnRnnLayerBackward0`` node for it, with edges to the input, the
four weights and biases (None without bias) and the initial ``h`` and ``c``, and three
outputs a user can reach: the output sequence, the last ``h`` and the last ``c``
(``h_n``/``c_n`` are ``StackBackward0`` over the layers' outputs 1 and 2). Its float64 LSTM,
and every GRU and RNN, are recorded step by step instead, as gradviz's ``_rnn.py`` writes them.

gradviz records the same node, so a debugger shows the graph torch shows, and the layer runs as
torch's does: one product for the input's share of every gate over the whole sequence, one
product per step for the hidden state's, and backward through time in one loop whose weight
gradients are one product each over all steps (one node where the step-by-step graph had about
ten per step: most of an LSTM training step's cost).

The layer is written once (:func:`_forward` and :func:`_backward`) over a small namespace of
array operations, run on numpy arrays by the forward and the fast rule, and on Tensors by the
differentiable rule, which recomputes the gates from the saved inputs so that gradients of
any order are right. Both namespaces reach the same numpy kernels in the same order, so the
fast rule's gradients equal the differentiable rule's bit for bit (tests/ops/test_fast_backward.py).
The forward keeps the gate activations in the node's ``workspace`` attribute (torch's
``result3``) for the fast rule.
"""

from __future__ import annotations

import numpy as np

from gradviz_ext import ops as _ext_ops

from ._layout import product as _product
from ._linalg import matmul
from ._pointwise import _sigmoid_forward, sigmoid, tanh
from ._registry import Op, apply, saves_inputs
from ._saved import Attr, Computed, Input
from ._shape import cat, reshape, stack, transpose

__all__ = ["lstm_layer"]

# Note [LSTM step kernel]
# ~~~~~~~~~~~~~~~~~~~~~~~
# The backward through time of the fast rule spends, per time step, one product (``dz @
# w_hh``) and about fifteen numpy calls on (batch, hidden) arrays plus a concatenation for the
# step's elementwise rule (:func:`_step_grads`): 21 us a step for batch 16 and hidden 64, more
# than the product. On numpy arrays of float32 that rule is one compiled pass
# (gradviz_ext/c/lstm_cell.h, ``lstm_step_backward``, 5.7 us) doing the same float32
# operations in the same order for each entry, so the same bits: the fast rule still equals
# the differentiable one (tests/ops/test_fast_backward.py), and tests/ops/test_lstm_step_kernel.py
# compares the kernel with :func:`_step_grads` bit for bit (column blocks, strided rows, no
# cell gradient, NaN and infinities). After the compiled forward (Note [LSTM forward
# kernel]) the whole loop through time is compiled too (``lstm_layer_backward``): the pass
# reads the step's arrays in place, adds the output's gradient on the way (``dh + g_out[t]``,
# the same float32 add), writes the step's ``dz`` into one (T, B, 4 H) array (the stack
# :func:`_backward` made) and runs the product into a buffer (``out=``, the same bits): 15 us
# a step before, 8 us after, most of it the product. Other dtypes, layouts and the
# interpreted engine keep the numpy rule.

# Note [LSTM forward kernel]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# The forward on numpy arrays (:func:`_forward`) made, per time step, the product ``h @
# w_hh.T``, the two bias adds, sigmoid's four ufunc calls, two tanh and five products and
# sums, each a ufunc call on a (batch, hidden) array, and kept a record of seven arrays. Two
# changes, each keeping the numpy code's bits:
#
# * the elementwise part of a step is three compiled passes around numpy's exp and tanh
#   (``lstm_layer_forward``, gradviz_ext/c/lstm_cell.h), writing the step's gates, cell, tanh
#   and output straight into arrays over the whole sequence. exp and tanh are numpy's own
#   float32 loops called from C (gradviz_ext/c/ufunc_loops.h; a C library's expf and tanhf
#   give other bits), over the same entries as the numpy code; the rest is the same float32
#   operations in the same order;
# * the product runs in the order OpenBLAS is faster at: ``w_hh @ h.T`` (w_hh row-major, the
#   kernel reading the result transposed) took 6.8 us where ``h @ w_hh.T`` took 12.9 (batch
#   16, hidden 64; 0.5-0.9x for batches 16 to 256 and hidden 64 to 512, never slower). The two
#   orders are one dot product per entry, but a BLAS may accumulate them in another order for
#   some shapes (as it does for a row-major copy of ``w_hh.T``: batch 1, or hidden 33 or 65),
#   so :func:`_swapped_is_exact` compares both orders once per shape on random operands and
#   the kernel swaps only where their bits agree (Note [Product layout]).
#
# Measured per step (batch 16, hidden 64, ten steps, one thread, medians): the numpy code 57
# us, the kernel 12 us, about half of it the product. tests/ops/test_lstm_step_kernel.py
# compares the kernel's arrays with :func:`_forward` bit for bit (shapes, no biases, both
# directions and product orders, strided and column-major states, NaN, infinities and -0.0),
# checks that numpy's loops give each entry's bits whatever the run, and compares nn.LSTM
# with torch. Other dtypes (a float64 LSTM is recorded step by step, Note [One node per LSTM
# layer]), layouts and the interpreted engine keep :func:`_forward`.

_EXACT_SWAPS: dict = {}   # (batch, hidden) -> whether w_hh @ h.T gives h @ w_hh.T's bits
_MAX_SHAPES = 1024        # shapes remembered; past this, new shapes keep the written order


def _swapped_is_exact(batch, hidden):
    """Whether ``w_hh @ h.T`` gives the bits of ``h @ w_hh.T`` (transposed) for float32
    ``h`` (batch, hidden) and ``w_hh`` (4 hidden, hidden), both row-major (Note [LSTM forward
    kernel]); checked once per shape."""
    key = (batch, hidden)
    exact = _EXACT_SWAPS.get(key)
    if exact is None:
        if len(_EXACT_SWAPS) >= _MAX_SHAPES:
            return False
        rng = np.random.default_rng(batch * 4099 + hidden)
        h = rng.standard_normal((batch, hidden), dtype=np.float32)
        w_hh = rng.standard_normal((4 * hidden, hidden), dtype=np.float32)
        exact = bool(np.array_equal(np.matmul(h, w_hh.T), np.matmul(w_hh, h.T).T))
        _EXACT_SWAPS[key] = exact
    return exact


class _Arrays:
    """The operations of :func:`_forward` and :func:`_backward` on numpy arrays."""

    matmul = staticmethod(_product)
    sigmoid = staticmethod(_sigmoid_forward)
    tanh = staticmethod(np.tanh)

    @staticmethod
    def t(a):
        return a.T

    @staticmethod
    def reshape(a, shape):
        return a.reshape(shape)

    @staticmethod
    def stack(items):
        return np.stack(items)

    @staticmethod
    def cat(items):
        return np.concatenate(items, axis=1)

    @staticmethod
    def column_sum(a):
        return a.sum(0)

    @staticmethod
    def step_grads(record, c_prev, dh, dc):
        i, f, g, o, _, tanh_c, _ = record
        found = _ext_ops.lstm_step_backward(i, f, g, o, c_prev, tanh_c, dh, dc)
        if found is not None:  # Note [LSTM step kernel]
            return found
        return _step_grads(_Arrays, record, c_prev, dh, dc)


class _Tensors:
    """The same operations on Tensors, recorded (the differentiable rule)."""

    matmul = staticmethod(matmul)
    sigmoid = staticmethod(sigmoid)
    tanh = staticmethod(tanh)

    @staticmethod
    def t(a):
        return transpose(a, 0, 1)

    @staticmethod
    def reshape(a, shape):
        return reshape(a, shape)

    @staticmethod
    def stack(items):
        return stack(items, 0)

    @staticmethod
    def cat(items):
        return cat(items, 1)

    @staticmethod
    def column_sum(a):
        return a.sum(0)

    @staticmethod
    def step_grads(record, c_prev, dh, dc):
        return _step_grads(_Tensors, record, c_prev, dh, dc)


def _steps(length, reverse):
    return range(length - 1, -1, -1) if reverse else range(length)


def _projected(k, x, w_ih, b_ih):
    """The input's share of every gate, ``x @ w_ih.T + b_ih``, over the whole sequence:
    (T, B, 4 H)."""
    length, batch = x.shape[0], x.shape[1]
    projected = k.matmul(k.reshape(x, (length * batch, x.shape[2])), k.t(w_ih))
    if b_ih is not None:
        projected = projected + b_ih
    return k.reshape(projected, (length, batch, w_ih.shape[0]))


def _forward(k, x, w_ih, w_hh, b_ih, b_hh, h, c, reverse):
    """The layer over (T, B, I) ``x`` from state ``(h, c)``: per time index the gates
    ``(i, f, g, o)``, the cell, its tanh and the output ``h``."""
    length, hidden = x.shape[0], w_hh.shape[1]
    projected = _projected(k, x, w_ih, b_ih)
    w_hh_t = k.t(w_hh)
    records = [None] * length
    for t in _steps(length, reverse):
        recurrent = k.matmul(h, w_hh_t)
        if b_hh is not None:
            recurrent = recurrent + b_hh
        z = recurrent + projected[t]
        gates = k.sigmoid(z)  # one call for i, f and o (g's columns are left unused)
        i, f, o = gates[:, :hidden], gates[:, hidden:2 * hidden], gates[:, 3 * hidden:]
        g = k.tanh(z[:, 2 * hidden:3 * hidden])
        c = f * c + i * g
        tanh_c = k.tanh(c)
        h = o * tanh_c
        records[t] = (i, f, g, o, c, tanh_c, h)
    return records


def _step_grads(k, record, c_prev, dh, dc):
    """One time step's ``(dz, dc)``: the gradients of its gate inputs (B, 4 H) and of the
    previous cell, from those of its output ``dh`` and its cell ``dc`` (None: none)."""
    i, f, g, o, _, tanh_c, _ = record
    d_cell = dh * o * (1 - tanh_c * tanh_c)
    dc = d_cell if dc is None else dc + d_cell
    dz = k.cat([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                dh * tanh_c * o * (1 - o)])
    return dz, dc * f


def _backward(k, records, x, w_ih, w_hh, h0, c0, reverse, g_out, g_hy, g_cy, needs):
    """Backward through time: the gradients of (x, w_ih, w_hh, b_ih, b_hh, h0, c0), None where
    ``needs`` says no; ``g_out`` (T, B, H), ``g_hy`` and ``g_cy`` may be None (no gradient)."""
    length = x.shape[0]
    order = list(_steps(length, reverse))
    previous = {t: order[n - 1] for n, t in enumerate(order) if n}
    dh, dc = g_hy, g_cy
    dz_by_step = [None] * length
    for t in reversed(order):
        i, f, g, o, c, tanh_c, _ = records[t]
        c_prev = records[previous[t]][4] if t in previous else c0
        if g_out is not None:
            dh = g_out[t] if dh is None else dh + g_out[t]
        if dh is None:  # nothing reached this step's h: only the cell carries a gradient
            dh = tanh_c * 0
        dz, dc = k.step_grads(records[t], c_prev, dh, dc)
        dz_by_step[t] = dz
        dh = k.matmul(dz, w_hh)
    hidden_before = None
    if needs[2]:
        hidden_before = k.stack([records[previous[t]][6] if t in previous else h0
                                 for t in range(length)])
    return _gradients(k, k.stack(dz_by_step), x, w_ih, hidden_before, dh, dc, needs)


def _gradients(k, dz, x, w_ih, hidden_before, dh, dc, needs):
    """The layer's gradients (as :func:`_backward`) from those of every step's gate inputs
    ``dz`` (T, B, 4 H), the hidden state before each step (T, B, H; None unless ``needs[2]``)
    and those of the initial state ``dh`` and ``dc``."""
    length, batch = x.shape[0], x.shape[1]
    gates = k.reshape(dz, (length * batch, dz.shape[-1]))  # explicit: the batch may be empty
    grads = [None] * 7
    if needs[0]:
        grads[0] = k.reshape(k.matmul(gates, w_ih), tuple(x.shape))
    if needs[1]:
        grads[1] = k.matmul(k.t(gates), k.reshape(x, (length * batch, x.shape[2])))
    if needs[2]:
        grads[2] = k.matmul(k.t(gates), k.reshape(hidden_before,
                                                  (length * batch, hidden_before.shape[-1])))
    if needs[3] or needs[4]:
        bias = k.column_sum(gates)
        grads[3] = bias if needs[3] else None
        grads[4] = (bias * 1 if needs[3] else bias) if needs[4] else None  # never one array twice
    grads[5] = dh if needs[5] else None
    grads[6] = dc if needs[6] else None
    return tuple(grads)


class Workspace:
    """What the forward keeps for the fast rule (torch keeps its oneDNN workspace as the
    node's ``result3``): the arrays of the compiled forward, ``(gates, g, cells, tanh_cells,
    hs)`` (Note [LSTM forward kernel]), or else the per-step records of :func:`_forward`."""

    __slots__ = ("arrays", "records")

    def __init__(self):
        self.arrays = None
        self.records = None


def _records(arrays):
    """The per-step records of :func:`_forward` as views of the compiled forward's arrays."""
    gates, g, cells, tanh_cells, hs = arrays
    hidden = g.shape[2]
    return [(gates[t, :, :hidden], gates[t, :, hidden:2 * hidden], g[t],
             gates[t, :, 3 * hidden:], cells[t], tanh_cells[t], hs[t])
            for t in range(gates.shape[0])]


def _layer_forward(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse, workspace, **_):
    last = 0 if reverse else -1
    projected = _projected(_Arrays, x, w_ih, b_ih)
    arrays = _ext_ops.lstm_layer_forward(projected, w_hh, b_hh, h0, c0, reverse,
                                         _swapped_is_exact(x.shape[1], w_hh.shape[1]))
    if arrays is not None:  # Note [LSTM forward kernel]
        workspace.arrays = arrays
        hs, cells = arrays[4], arrays[2]
        return hs.copy(), hs[last].copy(), cells[last].copy()
    records = _forward(_Arrays, x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse)
    workspace.records = records
    return np.stack([r[6] for r in records]), records[last][6], records[last][4]


def _layer_backward(ctx, g_out, g_hy, g_cy):
    inputs = [ctx.input(index) for index in range(7)]
    x, w_ih, w_hh, b_ih, b_hh, h0, c0 = inputs
    records = _forward(_Tensors, x, w_ih, w_hh, b_ih, b_hh, h0, c0, ctx.reverse)
    return _backward(_Tensors, records, x, w_ih, w_hh, h0, c0, ctx.reverse, g_out, g_hy, g_cy,
                     ctx.needs_input_grad)


def _layer_fast(ctx, g_out, g_hy, g_cy):
    workspace, needs = ctx.workspace, ctx.needs_input_grad
    x, w_ih, w_hh, h0, c0 = ctx.data(0), ctx.data(1), ctx.data(2), ctx.data(5), ctx.data(6)
    arrays = workspace.arrays
    if arrays is not None:
        found = _ext_ops.lstm_layer_backward(*arrays[:4], c0, w_hh, g_out, g_hy, g_cy,
                                             ctx.reverse)
        if found is not None:  # Note [LSTM step kernel]
            dz, dh, dc = found
            hidden_before = None
            if needs[2]:
                hs = arrays[4]
                hidden_before = (np.concatenate([hs[1:], h0[None]]) if ctx.reverse
                                 else np.concatenate([h0[None], hs[:-1]]))
            return _gradients(_Arrays, dz, x, w_ih, hidden_before, dh, dc, needs)
        workspace.records = _records(arrays)
    return _backward(_Arrays, workspace.records, x, w_ih, w_hh, h0, c0, ctx.reverse, g_out,
                     g_hy, g_cy, needs)


LSTM_LAYER = Op(
    "lstm_layer", "MkldnnRnnLayerBackward0", forward=_layer_forward, backward=_layer_backward,
    fast_backward=_layer_fast, saves=saves_inputs(0, 1, 2, 3, 4, 5, 6), fills_missing=True,
    saved={
        "input": Input(0), "weight0": Input(1), "weight1": Input(2), "weight2": Input(3),
        "weight3": Input(4), "hx_": Input(5), "cx_": Input(6),
        "reverse": Attr("reverse"), "mode": Computed(lambda node: 2),
        "hidden_size": Computed(lambda node: node.attrs["hidden_size"]),
        "num_layers": Computed(lambda node: 1), "has_biases": Attr("has_biases"),
        "bidirectional": Attr("bidirectional"), "batch_first": Computed(lambda node: False),
        "train": Attr("train"), "batch_sizes": Computed(lambda node: ()),
    })


def lstm_layer(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse=False, bidirectional=False,
               train=True):
    """One LSTM layer and direction over (T, B, I) ``x`` from ``(h0, c0)`` (B, H), as one
    ``MkldnnRnnLayerBackward0`` node (Note [One node per LSTM layer]): returns
    ``(output, h_n, c_n)``. Biases may be None; ``train`` is the module's mode, kept as
    torch's ``_saved_train``."""
    return apply(LSTM_LAYER, x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse=bool(reverse),
                 workspace=Workspace(), hidden_size=w_hh.shape[1],
                 has_biases=b_ih is not None, bidirectional=bool(bidirectional),
                 train=bool(train))
