"""The losses PyTorch computes as one fused op, with PyTorch's node names: ``mse_loss``
(``MseLossBackward0``), ``nll_loss`` (``NllLossBackward0``), ``smooth_l1_loss``,
``huber_loss``, ``binary_cross_entropy`` and ``binary_cross_entropy_with_logits``.

So ``print(loss)`` shows the ``grad_fn`` a PyTorch user expects. Each backward rule is written
with gradviz ops (Note [Backward rules are differentiable]), so gradient penalties and other
higher-order uses work; the argument checks and reductions live in
:mod:`gradviz.nn.functional`.
"""

from __future__ import annotations

import numpy as np

from gradviz_ext import engine

from .._tensor import _wrap
from ._pointwise import clamp, exp, gt, log, lt, sigmoid, where
from ._registry import Op, apply, promote_float, saves_inputs
from ._saved import NOT_NLL_TARGET, OTHER, SELF, Attr, Computed, optional_input, reduction_enum
from ._shape import unsqueeze

__all__ = ["mse_loss", "nll_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits"]

def _mean(values):
    """``np.mean``: for float32/float64, its own two steps (a sum, then a division by the
    count) without its dispatch."""
    if type(values) is np.ndarray and values.dtype.kind == "f" and values.dtype.itemsize >= 4:
        return np.true_divide(np.add.reduce(values, axis=None), values.size)
    return np.mean(values)


_REDUCE = {"none": lambda a: a, "mean": _mean, "sum": np.sum}


def _reduced(values, reduction, dtype):
    return np.asarray(_REDUCE[reduction](values), dtype=dtype)


def _scale(ctx, g):
    """The incoming gradient spread over the elements: ``g / n`` for a mean, ``g`` otherwise
    (a 0-d ``g`` broadcasts against the elementwise terms)."""
    if ctx.reduction == "mean":
        return g / ctx.count
    return g


def _elementwise_backward(derivative):
    """Backward of ``reduce(f(input - target))`` from ``derivative(diff) = f'(diff)``."""

    def backward(ctx, g):
        diff = ctx.input(0) - ctx.input(1)
        grad = _scale(ctx, g) * derivative(ctx, diff)
        return (grad if ctx.needs_input_grad[0] else None,
                -grad if ctx.needs_input_grad[1] else None)

    return backward


def _count(input, target):
    shape = input._data.shape
    if shape == target._data.shape:
        return input._data.size
    return int(np.prod(np.broadcast_shapes(shape, target._data.shape)))


# ---- mse ---------------------------------------------------------------------------------

def _mse_norm(ctx):
    if ctx.reduction != "mean":
        return 2.0
    # torch's 2. / numel() in C++ double: inf for an empty input (whose gradient is empty)
    return 2.0 / ctx.count if ctx.count else float("inf")


def _mse_backward(ctx, g):
    # PyTorch's mse_loss_backward, in its order: norm * (input - target) * grad
    grad = (ctx.input(0) - ctx.input(1)) * _mse_norm(ctx) * g
    return (grad if ctx.needs_input_grad[0] else None,
            -grad if ctx.needs_input_grad[1] else None)


def _mse_fast(ctx, g):
    grad = np.asarray(np.subtract(ctx.data(0), ctx.data(1)))  # 0-d inputs give a numpy scalar
    np.multiply(grad, _mse_norm(ctx), out=grad)
    if not (g.ndim == 0 and g == 1):  # times 1 changes no bit: one pass less for loss.backward()
        grad = np.multiply(grad, g, out=grad if g.shape == () else None)
    return (grad if ctx.needs_input_grad[0] else None,
            -grad if ctx.needs_input_grad[1] else None)


MSE_LOSS = Op("mse_loss", "MseLossBackward0",
              forward=lambda a, b, reduction, count: _reduced((a - b) ** 2, reduction, a.dtype),
              backward=_mse_backward, fast_backward=_mse_fast,
              saves=saves_inputs(0, 1), dtype=promote_float,
              saved={"self": SELF, "target": OTHER, "reduction": Computed(reduction_enum)})


def mse_loss(input, target, reduction="mean"):
    return apply(MSE_LOSS, input, target, reduction=reduction, count=_count(input, target))


# ---- smooth L1 and Huber -------------------------------------------------------------------

def _smooth_l1_forward(a, b, reduction, count, beta):
    diff = np.abs(a - b)
    values = np.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta) if beta else diff
    return _reduced(values.astype(a.dtype), reduction, a.dtype)


def _smooth_l1_derivative(ctx, diff):
    beta = ctx.beta
    if beta == 0:
        return diff.sign()
    # x / beta inside (-beta, beta), its sign outside
    return where(gt(diff, beta), 1.0, where(lt(diff, -beta), -1.0, diff / beta))


SMOOTH_L1_LOSS = Op("smooth_l1_loss", "SmoothL1LossBackward0", forward=_smooth_l1_forward,
                    backward=_elementwise_backward(_smooth_l1_derivative),
                    saves=saves_inputs(0, 1), dtype=promote_float,
                    saved={"self": SELF, "target": OTHER, "reduction": Computed(reduction_enum),
                           "beta": Attr("beta", float)})


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    return apply(SMOOTH_L1_LOSS, input, target, reduction=reduction, count=_count(input, target),
                 beta=beta)


def _huber_forward(a, b, reduction, count, delta):
    diff = np.abs(a - b)
    values = np.where(diff < delta, 0.5 * diff * diff, delta * (diff - 0.5 * delta))
    return _reduced(values.astype(a.dtype), reduction, a.dtype)


def _huber_derivative(ctx, diff):
    delta = ctx.delta
    return where(gt(diff, delta), delta, where(lt(diff, -delta), -delta, diff))


HUBER_LOSS = Op("huber_loss", "HuberLossBackward0", forward=_huber_forward,
                backward=_elementwise_backward(_huber_derivative),
                saves=saves_inputs(0, 1), dtype=promote_float,
                saved={"self": SELF, "target": OTHER, "reduction": Computed(reduction_enum),
                       "delta": Attr("delta", float)})


def huber_loss(input, target, reduction="mean", delta=1.0):
    return apply(HUBER_LOSS, input, target, reduction=reduction, count=_count(input, target),
                 delta=delta)


# ---- binary cross-entropy ------------------------------------------------------------------

_EPSILON = 1e-12  # PyTorch's guard in the BCE gradient's denominator


# Note [Loss weights as inputs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's binary cross-entropy nodes have an edge for the input and the target only (a weight
# cannot require grad there). gradviz passes a weight (and pos_weight) as an input only when
# one is given, so without them the node's next_functions are torch's; with one, its edge is
# one more than torch's (None unless it requires grad, which torch refuses).

def _weights(ctx, *names):
    """The optional weights given after the input and the target, in order (None if not)."""
    found, index = [], 2
    for name in names:
        if ctx.attrs["has_" + name]:
            found.append(ctx.input(index))
            index += 1
        else:
            found.append(None)
    return found


def _bce_forward(x, t, *weights, reduction, count, has_weight):
    w = weights[0] if has_weight else None
    with np.errstate(divide="ignore"):
        log_x = np.maximum(np.log(x), -100)
        log_1mx = np.maximum(np.log(1 - x), -100)
    values = -(t * log_x + (1 - t) * log_1mx)
    if w is not None:
        values = values * w
    return _reduced(values.astype(x.dtype), reduction, x.dtype)


def _bce_backward(ctx, g):
    x, t = ctx.input(0), ctx.input(1)
    (w,) = _weights(ctx, "weight")
    g = _scale(ctx, g)
    if w is not None:
        g = g * w
    grad_x = grad_t = None
    if ctx.needs_input_grad[0]:
        grad_x = g * (x - t) / clamp((1 - x) * x, min=_EPSILON)
    if ctx.needs_input_grad[1]:
        grad_t = g * (clamp(log(1 - x), min=-100) - clamp(log(x), min=-100))
    return (grad_x, grad_t) + (None,) * (len(ctx.needs_input_grad) - 2)


BCE = Op("binary_cross_entropy", "BinaryCrossEntropyBackward0", forward=_bce_forward,
         backward=_bce_backward, saves=lambda needs: (tuple(range(len(needs))), False),
         saved={"self": SELF, "target": OTHER, "weight": optional_input("weight", 2),
             "reduction": Computed(reduction_enum)})


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    weights = () if weight is None else (weight,)  # Note [Loss weights as inputs]
    return apply(BCE, input, target, *weights, reduction=reduction, count=input.numel(),
                 has_weight=weight is not None)


def _softplus_negative(x):
    """``-log(sigmoid(x)) = log(1 + exp(-x))``, stable for large ``|x|``."""
    m = clamp(-x, min=0)
    return m + log(exp(-m) + exp(-x - m))


def _bce_logits_forward(x, t, *weights, reduction, count, has_weight, has_pos_weight):
    w = weights[0] if has_weight else None
    pos_weight = weights[-1] if has_pos_weight else None
    m = np.maximum(-x, 0)
    softplus_negative = m + np.log(np.exp(-m) + np.exp(-x - m))
    if pos_weight is not None:
        values = (1 - t) * x + ((pos_weight - 1) * t + 1) * softplus_negative
    else:
        values = (1 - t) * x + softplus_negative
    if w is not None:
        values = values * w
    return _reduced(values.astype(x.dtype), reduction, x.dtype)


def _bce_logits_backward(ctx, g):
    x, t = ctx.input(0), ctx.input(1)
    w, pos_weight = _weights(ctx, "weight", "pos_weight")
    g = _scale(ctx, g)
    if w is not None:
        g = g * w
    grad_x = grad_t = None
    if ctx.needs_input_grad[0]:
        if pos_weight is None:
            grad_x = g * (sigmoid(x) - t)
        else:
            grad_x = g * (sigmoid(x) * ((pos_weight - 1) * t + 1) - pos_weight * t)
    if ctx.needs_input_grad[1]:
        grad_t = -x if pos_weight is None else -x + (pos_weight - 1) * _softplus_negative(x)
        grad_t = g * grad_t
    return (grad_x, grad_t) + (None,) * (len(ctx.needs_input_grad) - 2)


BCE_WITH_LOGITS = Op("binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0",
                     forward=_bce_logits_forward, backward=_bce_logits_backward,
                     saves=lambda needs: (tuple(range(len(needs))), False),
                     saved={
                         "self": SELF, "target": OTHER, "weight": optional_input("weight", 2),
                         "pos_weight": optional_input("pos_weight", 2, ("weight",)),
                         "reduction": Computed(reduction_enum)})


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction="mean"):
    weights = tuple(w for w in (weight, pos_weight) if w is not None)  # Note [Loss weights as inputs]
    return apply(BCE_WITH_LOGITS, input, target, *weights, reduction=reduction,
                 count=input.numel(), has_weight=weight is not None,
                 has_pos_weight=pos_weight is not None)


# ---- negative log likelihood ---------------------------------------------------------------

# Note [Picked log-probabilities]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The loss is sum(logp * coefficients, -1), reduced, with only the picked entries entering (a
# -inf log-probability elsewhere, a masked logit, must not make 0 * -inf = NaN): numpy made the
# whole product, a zeroed copy of it where the coefficients are not 0, and the row sums. When
# every target counts with weight 1 (cross_entropy's usual case), each row has one nonzero
# coefficient, the same in every row, at its target: the row's sum is then 0 + (its picked
# product) exactly (numpy adds the row's zeros and that product pairwise, from the identity
# +0.0: the product, or +0.0 for either zero), so ``picks`` (the rows, their targets and the
# coefficient) computes just those products and adds them to 0, the same bits
# (tests/nn/test_nll_coefficients.py). On the GPT's (512, 65) float32 log-probabilities: 35
# -> 6 us.
def _nll_forward(logp, coefficients, reduction, no_weight=False, picks=None):
    # coefficients[n, c] = -weight[c] / denominator at c = target[n] (0 elsewhere)
    if picks is not None:
        rows, labels, coefficient = picks
        picked = logp[rows, labels]  # a new array: the products go into it
        np.multiply(picked, coefficient, out=picked)
        np.add(0.0, picked, out=picked)
    else:
        with np.errstate(invalid="ignore"):
            products = logp * coefficients
        terms = np.zeros(products.shape, products.dtype)  # np.where(picked, products, 0), quicker
        np.copyto(terms, products, where=coefficients != 0)
        picked = np.sum(terms, axis=-1)
    if reduction == "none":
        return picked.astype(logp.dtype)
    if no_weight:  # a mean over no weight (every target ignored, or none): 0 / 0, as in torch
        return np.asarray(np.nan, dtype=logp.dtype)
    return np.asarray(np.add.reduce(picked, axis=None), dtype=logp.dtype)  # np.sum's own call


def _nll_backward(ctx, g):
    coefficients = _wrap(ctx.coefficients.astype(g._data.dtype))
    if ctx.reduction == "none":
        g = unsqueeze(g, -1)
    grad = g * coefficients
    if engine.is_grad_enabled():
        # under create_graph, PyTorch's gradient is a function of the input too (with a zero
        # derivative): it requires grad, and differentiating it again gives zeros, not None
        grad = grad + ctx.input(0) * 0
    return (grad,)


def _nll_fast(ctx, g):
    if ctx.reduction == "none":
        g = g[..., None]
    return (np.multiply(g, ctx.coefficients.astype(g.dtype, copy=False)),)


NLL_LOSS = Op("nll_loss", "NllLossBackward0", forward=_nll_forward, backward=_nll_backward,
              fast_backward=_nll_fast, saves=saves_inputs(0),
              saved={
                  "self": SELF, "reduction": Computed(reduction_enum),
                  "target": NOT_NLL_TARGET, "weight": NOT_NLL_TARGET, "ignore_index": NOT_NLL_TARGET,
                  "total_weight": NOT_NLL_TARGET,
              })


def nll_loss(log_probs, coefficients, reduction, no_weight=False, picks=None):
    """``sum(log_probs * coefficients, -1)``, reduced by summing unless ``"none"``: the caller
    builds ``coefficients`` from the targets, weights, ``ignore_index`` and the mean's
    denominator. ``no_weight``: a mean whose denominator is 0 (NaN, with zero gradients, as
    torch's ``nll_loss`` gives). ``picks``: (rows, targets, coefficient) of 2-D log-probabilities
    whose every row has the one nonzero ``coefficient`` at its target (Note [Picked
    log-probabilities])."""
    return apply(NLL_LOSS, log_probs, coefficients=coefficients, reduction=reduction,
                 no_weight=no_weight, picks=picks)

