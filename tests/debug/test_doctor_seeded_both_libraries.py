"""Seeded bugs for the gradient doctor, in both libraries: each custom Function is written once, for
both libraries (``family(T)`` with ``T`` gradviz or torch), so every case runs on gradviz
graphs and on real PyTorch graphs (``doctor(torch_loss)``).

New styles beyond ``test_doctor_seeded`` / ``_arguments_and_views`` / ``test_doctor_torch``: bugs on part of
the domain (negative inputs, large inputs, float32 overflow), several inputs of different
shapes (a reduction over the wrong axis, a lost keepdim, a dim argument ignored), batched
matmuls, integer-index Functions with duplicate indices (assignment where accumulation is
needed), hand-written softmax / log-softmax / layer norm / attention / conv / cumsum / cumprod
/ sort / topk backwards, multi-output Functions (outputs swapped, one ignored, None handling),
``setup_context``, ``mark_dirty``, ``once_differentiable``, a wrong Function inside another's
backward (double backward), graphs of several Functions with one or two wrong, and correct
Functions that are hard for finite differences (random masks, straight-through estimators,
ties, large magnitudes, float32).

For every case and library: the correct twin's gradients equal PyTorch's built-ins and the
doctor finds nothing in it; the seeded bug is real (the gradients differ from PyTorch's); the
doctor names exactly the wrong Function(s), the input and the kind, and the hint where the bug
has a recognisable shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
import torch as real_torch

import gradviz

SEEDS = (0, 1)
LIBRARIES = ("gradviz", "torch")
# torch's per-operation overhead makes its re-runs several times slower: one seed there
RUNS = [(0, "gradviz"), (1, "gradviz"), (0, "torch")]


# ---- the Functions, written once for both libraries --------------------------------------------

def family(T):
    """Every Function of this file for the library ``T`` (gradviz or torch): the correct one
    first, then its buggy twins (named after the bug)."""
    Function = T.autograd.Function
    once_differentiable = T.autograd.function.once_differentiable
    ns = {}

    def add(cls):
        ns[cls.__name__] = cls
        return cls

    # -- part of the domain ----------------------------------------------------------------
    @add
    class LeakyRelu(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return T.where(x > 0, x, 0.1 * x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.where(x > 0, T.ones_like(x), T.full_like(x, 0.1))

    @add
    class LeakyReluForgetsLeak(LeakyRelu):
        """relu's derivative: zero where x < 0."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x > 0).to(grad.dtype)

    @add
    class Elu(Function):
        @staticmethod
        def forward(ctx, x):
            y = T.where(x > 0, x, x.exp() - 1)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * T.where(x > 0, T.ones_like(x), y + 1)

    @add
    class EluUsesOutput(Elu):
        """exp(x) - 1 (the output) where exp(x) is the derivative."""

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * T.where(x > 0, T.ones_like(x), y)

    @add
    class Sigmoid(Function):
        @staticmethod
        def forward(ctx, x):
            y = T.sigmoid(x)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y * (1 - y)

    @add
    class SigmoidOverflows(Sigmoid):
        """exp(-x) / (1 + exp(-x))^2: inf / inf = NaN for x below -88 in float32."""

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            e = (-x).exp()
            return grad * e / (1 + e) ** 2

    @add
    class Softplus(Function):
        """log(1 + exp(x)), linear beyond 20 (as torch's threshold)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return T.where(x > 20, x, (x.clamp(max=20)).exp().log1p())

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.where(x > 20, T.ones_like(x), T.sigmoid(x))

    @add
    class SoftplusEarlyThreshold(Softplus):
        """The linear branch's derivative from 2 on: wrong for 2 < x < 20 only."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.where(x > 2, T.ones_like(x), T.sigmoid(x))

    @add
    class SignedLog(Function):
        """sign(x) log(1 + |x|); backward in plain numbers (@once_differentiable)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sign() * x.abs().log1p()

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad / (1 + x.abs())

    @add
    class SignedLogForgetsAbs(SignedLog):
        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad / (1 + x)

    # -- several inputs of different shapes --------------------------------------------------
    @add
    class ColumnScale(Function):
        """x [n, m] * w [n, 1]."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad * w, (grad * x).sum(1, keepdim=True)

    @add
    class ColumnScaleWrongAxis(ColumnScale):
        """Sums over the rows and transposes: the right shape, the wrong axis."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad * w, (grad * x).sum(0, keepdim=True).t()

    @add
    class Softmax(Function):
        @staticmethod
        def forward(ctx, x, dim):
            y = x.softmax(dim)
            ctx.save_for_backward(y)
            ctx.dim = dim
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return y * (grad - (grad * y).sum(ctx.dim, keepdim=True)), None

    @add
    class SoftmaxNoKeepdim(Softmax):
        """The row sums without keepdim broadcast along the wrong axis (a square input)."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return y * (grad - (grad * y).sum(ctx.dim)), None

    @add
    class SoftmaxIgnoresDim(Softmax):
        """Sums over the last dim whatever dim forward used."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return y * (grad - (grad * y).sum(-1, keepdim=True)), None

    @add
    class LogSoftmax(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.log_softmax(-1)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad - y.exp() * grad.sum(-1, keepdim=True)

    @add
    class LogSoftmaxUsesLogProbs(LogSoftmax):
        """The log-probabilities where the probabilities are needed."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad - y * grad.sum(-1, keepdim=True)

    @add
    class LayerNorm(Function):
        """(x - mean) / sqrt(var + eps) over the last dim, no affine."""

        @staticmethod
        def forward(ctx, x):
            mean = x.mean(-1, keepdim=True)
            var = ((x - mean) ** 2).mean(-1, keepdim=True)
            rstd = (var + 1e-5).rsqrt()
            xhat = (x - mean) * rstd
            ctx.save_for_backward(xhat, rstd)
            return xhat

        @staticmethod
        def backward(ctx, grad):
            xhat, rstd = ctx.saved_tensors
            return rstd * (grad - grad.mean(-1, keepdim=True)
                           - xhat * (grad * xhat).mean(-1, keepdim=True))

    @add
    class LayerNormDropsVarianceTerm(LayerNorm):
        @staticmethod
        def backward(ctx, grad):
            xhat, rstd = ctx.saved_tensors
            return rstd * (grad - grad.mean(-1, keepdim=True))

    @add
    class Attention(Function):
        """softmax(q k^T / sqrt(d)) v, one head."""

        @staticmethod
        def forward(ctx, q, k, v):
            scale = q.shape[-1] ** -0.5
            p = (q @ k.transpose(-1, -2) * scale).softmax(-1)
            ctx.save_for_backward(q, k, v, p)
            ctx.scale = scale
            return p @ v

        @staticmethod
        def backward(ctx, grad):
            q, k, v, p = ctx.saved_tensors
            dv = p.transpose(-1, -2) @ grad
            dp = grad @ v.transpose(-1, -2)
            ds = p * (dp - (dp * p).sum(-1, keepdim=True))
            return ds @ k * ctx.scale, ds.transpose(-1, -2) @ q * ctx.scale, dv

    @add
    class AttentionForgetsScale(Attention):
        @staticmethod
        def backward(ctx, grad):
            q, k, v, p = ctx.saved_tensors
            dv = p.transpose(-1, -2) @ grad
            dp = grad @ v.transpose(-1, -2)
            ds = p * (dp - (dp * p).sum(-1, keepdim=True))
            return ds @ k, ds.transpose(-1, -2) @ q, dv

    @add
    class Bmm(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad @ b.transpose(1, 2), a.transpose(1, 2) @ grad

    @add
    class BmmSecondGradTransposed(Bmm):
        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad @ b.transpose(1, 2), grad.transpose(1, 2) @ a

    @add
    class Conv1d(Function):
        """Valid cross-correlation of x [L] with w [K]."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            n = x.shape[0] - w.shape[0] + 1
            return sum(x[k:k + n] * w[k] for k in range(w.shape[0]))

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            size = w.shape[0]
            n = grad.shape[0]
            dx = sum(T.cat([T.zeros(k, dtype=grad.dtype), grad * w[k],
                            T.zeros(size - 1 - k, dtype=grad.dtype)]) for k in range(size))
            dw = T.stack([(grad * x[k:k + n]).sum() for k in range(size)])
            return dx, dw

    @add
    class Conv1dKernelFlipped(Conv1d):
        """The input's gradient with the kernel flipped (a convolution where forward correlates)."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            size = w.shape[0]
            n = grad.shape[0]
            dx = sum(T.cat([T.zeros(k, dtype=grad.dtype), grad * w[size - 1 - k],
                            T.zeros(size - 1 - k, dtype=grad.dtype)]) for k in range(size))
            dw = T.stack([(grad * x[k:k + n]).sum() for k in range(size)])
            return dx, dw

    @add
    class Fma(Function):
        """a * b + c, three inputs of one shape."""

        @staticmethod
        def forward(ctx, a, b, c):
            ctx.save_for_backward(a, b)
            return a * b + c

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b, grad * a, grad

    @add
    class FmaWrongInputGradient(Fma):
        """c's gradient is a's."""

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b, grad * a, grad * b

    @add
    class RowSum(Function):
        """x.sum(1, keepdim) for a square x."""

        @staticmethod
        def forward(ctx, x, keepdim):
            ctx.keepdim = keepdim
            ctx.shape = x.shape
            return x.sum(1, keepdim=keepdim)

        @staticmethod
        def backward(ctx, grad):
            if not ctx.keepdim:
                grad = grad.unsqueeze(1)
            return grad.expand(ctx.shape), None

    @add
    class RowSumExpandsWithoutUnsqueeze(RowSum):
        @staticmethod
        def backward(ctx, grad):
            return grad.expand(ctx.shape), None

    @add
    class ScaledSoftplus(Function):
        """log(1 + exp(beta x)) / beta with a number beta."""

        @staticmethod
        def forward(ctx, x, beta):
            ctx.save_for_backward(x)
            ctx.beta = beta
            return (x * beta).exp().log1p() / beta

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.sigmoid(x * ctx.beta), None

    @add
    class ScaledSoftplusForgetsBeta(ScaledSoftplus):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.sigmoid(x), None

    @add
    class MaskedScale(Function):
        """x * 3 where the bool mask is set, x elsewhere."""

        @staticmethod
        def forward(ctx, x, mask):
            ctx.save_for_backward(mask)
            return T.where(mask, x * 3, x)

        @staticmethod
        def backward(ctx, grad):
            (mask,) = ctx.saved_tensors
            return T.where(mask, grad * 3, grad), None

    @add
    class MaskedScaleMaskInverted(MaskedScale):
        @staticmethod
        def backward(ctx, grad):
            (mask,) = ctx.saved_tensors
            return T.where(mask, grad, grad * 3), None

    # -- integer-index arguments -----------------------------------------------------------
    @add
    class Embedding(Function):
        @staticmethod
        def forward(ctx, weight, index):
            ctx.save_for_backward(index)
            ctx.rows = weight.shape[0]
            return weight[index]

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            out = T.zeros(ctx.rows, grad.shape[1], dtype=grad.dtype)
            return out.index_add_(0, index, grad), None

    @add
    class EmbeddingAssigns(Embedding):
        """grad_weight[index] = grad: a row looked up twice keeps one of its gradients."""

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            out = T.zeros(ctx.rows, grad.shape[1], dtype=grad.dtype)
            out[index] = grad
            return out, None

    @add
    class Gather(Function):
        """x.gather(1, index)."""

        @staticmethod
        def forward(ctx, x, index):
            ctx.save_for_backward(index)
            ctx.shape = x.shape
            return x.gather(1, index)

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            return T.zeros(ctx.shape, dtype=grad.dtype).scatter_add(1, index, grad), None

    @add
    class GatherScatters(Gather):
        """scatter where scatter_add is needed (duplicate indices in a row)."""

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            return T.zeros(ctx.shape, dtype=grad.dtype).scatter(1, index, grad), None

    @add
    class IndexAdd(Function):
        """zeros(rows, d).index_add(0, index, src): src's rows summed into place."""

        @staticmethod
        def forward(ctx, src, index, rows):
            ctx.save_for_backward(index)
            return T.zeros(rows, src.shape[1], dtype=src.dtype).index_add(0, index, src)

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            return grad[index], None, None

    @add
    class IndexAddRoutesInOrder(IndexAdd):
        """The first rows of grad, ignoring the index."""

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            return grad[:index.shape[0]], None, None

    # -- scans, sorting ----------------------------------------------------------------------
    @add
    class Cumsum(Function):
        @staticmethod
        def forward(ctx, x):
            return x.cumsum(-1)

        @staticmethod
        def backward(ctx, grad):
            return grad.flip(-1).cumsum(-1).flip(-1)

    @add
    class CumsumForwardScan(Cumsum):
        """Scans grad forward where the reversed scan is needed."""

        @staticmethod
        def backward(ctx, grad):
            return grad.cumsum(-1)

    @add
    class Cumprod(Function):
        """cumprod of positive x."""

        @staticmethod
        def forward(ctx, x):
            y = x.cumprod(-1)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return (grad * y).flip(-1).cumsum(-1).flip(-1) / x

    @add
    class CumprodForwardScan(Cumprod):
        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return (grad * y).cumsum(-1) / x

    @add
    class Sort(Function):
        """Sorted values and their (non-differentiable) indices."""

        @staticmethod
        def forward(ctx, x):
            values, index = x.sort(-1)
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index)
            return values, index

        @staticmethod
        def backward(ctx, grad, _):
            (index,) = ctx.saved_tensors
            return T.zeros_like(grad).scatter(-1, index, grad)

    @add
    class SortGathers(Sort):
        """gather where scatter is needed: the inverse permutation."""

        @staticmethod
        def backward(ctx, grad, _):
            (index,) = ctx.saved_tensors
            return grad.gather(-1, index)

    @add
    class TopK(Function):
        @staticmethod
        def forward(ctx, x, k):
            values, index = x.topk(k, -1)
            ctx.save_for_backward(index)
            ctx.shape = x.shape
            return values

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            return T.zeros(ctx.shape, dtype=grad.dtype).scatter(-1, index, grad), None

    @add
    class TopKFirstPlaces(TopK):
        """Puts the gradients in the first k places."""

        @staticmethod
        def backward(ctx, grad):
            out = T.zeros(ctx.shape, dtype=grad.dtype)
            out[..., :grad.shape[-1]] = grad
            return out, None

    # -- several outputs -----------------------------------------------------------------------
    @add
    class SinCube(Function):
        """(sin x, x^3)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x ** 3

        @staticmethod
        def backward(ctx, g0, g1):
            (x,) = ctx.saved_tensors
            return g0 * x.cos() + g1 * 3 * x ** 2

    @add
    class SinCubeOutputsSwapped(SinCube):
        @staticmethod
        def backward(ctx, g0, g1):
            (x,) = ctx.saved_tensors
            return g1 * x.cos() + g0 * 3 * x ** 2

    @add
    class TwiceExp(Function):
        """(2x, exp x)."""

        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return x * 2, y

        @staticmethod
        def backward(ctx, g0, g1):
            (y,) = ctx.saved_tensors
            return g0 * 2 + g1 * y

    @add
    class TwiceExpIgnoresSecond(TwiceExp):
        @staticmethod
        def backward(ctx, g0, g1):
            return g0 * 2

    @add
    class TwiceSquare(Function):
        """(2x, x^2) with materialize_grads off."""

        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * 2, x * x

        @staticmethod
        def backward(ctx, g0, g1):
            (x,) = ctx.saved_tensors
            total = None
            if g0 is not None:
                total = g0 * 2
            if g1 is not None:
                total = g1 * 2 * x if total is None else total + g1 * 2 * x
            return total

    @add
    class TwiceSquareFirstOnly(TwiceSquare):
        """Returns the first non-None part: wrong when both outputs are used."""

        @staticmethod
        def backward(ctx, g0, g1):
            (x,) = ctx.saved_tensors
            if g0 is not None:
                return g0 * 2
            return g1 * 2 * x

    # -- setup_context, mark_dirty -------------------------------------------------------------
    @add
    class Cube(Function):
        """setup_context style, saving the output."""

        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output)

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * 3 * x ** 2

    @add
    class CubeUsesOutput(Cube):
        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * 3 * y ** 2

    @add
    class TanhInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.tanh_()
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * (1 - y * y)

    @add
    class TanhInPlaceTreatsOutputAsInput(TanhInPlace):
        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * (1 - y.tanh() ** 2)

    # -- a Function inside another's backward (double backward) ---------------------------------
    @add
    class TanhGrad(Function):
        """grad * (1 - y^2) as a Function of (grad, y)."""

        @staticmethod
        def forward(ctx, grad, y):
            ctx.save_for_backward(grad, y)
            return grad * (1 - y * y)

        @staticmethod
        def backward(ctx, gg):
            grad, y = ctx.saved_tensors
            return gg * (1 - y * y), -2 * gg * grad * y

    @add
    class TanhGradSignFlipped(TanhGrad):
        @staticmethod
        def backward(ctx, gg):
            grad, y = ctx.saved_tensors
            return gg * (1 - y * y), 2 * gg * grad * y

    @add
    class Tanh2(Function):
        """tanh whose backward is the TanhGrad Function (differentiable again)."""

        @staticmethod
        def forward(ctx, x):
            y = x.tanh()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return TanhGrad.apply(grad, y)

    @add
    class Tanh2BadInner(Tanh2):
        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return TanhGradSignFlipped.apply(grad, y)

    @add
    class Silu(Function):
        """x sigmoid(x), its backward written with tensor operations."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * T.sigmoid(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            s = T.sigmoid(x)
            return grad * (s + x * s * (1 - s))

    @add
    class SiluDetachedSigmoid(Silu):
        """Right first derivative; sigmoid from a detached x: create_graph loses terms."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            s = T.sigmoid(x.detach())
            return grad * (s + x * s * (1 - s))

    # -- randomness and surrogate gradients ---------------------------------------------------
    @add
    class Dropout(Function):
        """Inverted dropout with the mask drawn in forward and saved."""

        @staticmethod
        def forward(ctx, x, p):
            mask = (T.rand(x.shape, dtype=x.dtype) >= p).to(x.dtype) / (1 - p)
            ctx.save_for_backward(mask)
            return x * mask

        @staticmethod
        def backward(ctx, grad):
            (mask,) = ctx.saved_tensors
            return grad * mask, None

    @add
    class DropoutForgetsRescale(Dropout):
        @staticmethod
        def backward(ctx, grad):
            (mask,) = ctx.saved_tensors
            return grad * (mask != 0).to(grad.dtype), None

    @add
    class RoundSTE(Function):
        """round(x) forward, the identity backward: a straight-through estimator."""

        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, grad):
            return grad

    @add
    class SignClippedSTE(Function):
        """sign(x) forward, grad * (|x| <= 1) backward (BinaryConnect's estimator)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sign()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x.abs() <= 1).to(grad.dtype)

    @add
    class RowMax(Function):
        """Row maxima, routed to the first maximum (ties included)."""

        @staticmethod
        def forward(ctx, x):
            values, index = x.max(1, keepdim=True)
            ctx.save_for_backward(index)
            ctx.shape = x.shape
            return values

        @staticmethod
        def backward(ctx, grad):
            (index,) = ctx.saved_tensors
            return T.zeros(ctx.shape, dtype=grad.dtype).scatter(1, index, grad)

    @add
    class Quartic(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 4

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 4 * x ** 3

    # -- layers for graphs of several Functions ------------------------------------------------
    @add
    class Linear(Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return x @ w.t() + b

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w, grad.t() @ x, grad.sum(0)

    @add
    class Tanh(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.tanh()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * (1 - y * y)

    @add
    class NllLoss(Function):
        """-mean(logp[i, target_i])."""

        @staticmethod
        def forward(ctx, logp, target):
            ctx.save_for_backward(target)
            ctx.shape = logp.shape
            return -logp.gather(1, target.unsqueeze(1)).mean()

        @staticmethod
        def backward(ctx, grad):
            (target,) = ctx.saved_tensors
            out = T.zeros(ctx.shape, dtype=grad.dtype)
            out = out.scatter(1, target.unsqueeze(1), -1.0 / ctx.shape[0])
            return out * grad, None

    @add
    class RmsNorm(Function):
        """x / rms(x) * g over the last dim."""

        @staticmethod
        def forward(ctx, x, g):
            rstd = ((x * x).mean(-1, keepdim=True) + 1e-6).rsqrt()
            ctx.save_for_backward(x, g, rstd)
            return x * rstd * g

        @staticmethod
        def backward(ctx, grad):
            x, g, rstd = ctx.saved_tensors
            xhat = x * rstd
            gx = grad * g
            dx = rstd * (gx - xhat * (gx * xhat).mean(-1, keepdim=True))
            return dx, (grad * xhat).reshape(-1, g.shape[0]).sum(0)

    @add
    class RmsNormGainNotReduced(RmsNorm):
        """The gain's gradient from the first row only."""

        @staticmethod
        def backward(ctx, grad):
            x, g, rstd = ctx.saved_tensors
            xhat = x * rstd
            gx = grad * g
            dx = rstd * (gx - xhat * (gx * xhat).mean(-1, keepdim=True))
            return dx, (grad * xhat)[0]

    return SimpleNamespace(**ns)


FAMILIES = {"gradviz": family(gradviz), "torch": family(real_torch)}
LIB = {"gradviz": gradviz, "torch": real_torch}


# ---- the cases ---------------------------------------------------------------------------------

@dataclass
class Case:
    """One seeded bug. ``fixed`` and ``buggy`` map Function names of the family to the names
    used in the run (``program(ns, T, *tensors)`` reads its Functions from ``ns``);
    ``reference(T, *tensors)`` is the same loss with torch's built-ins. ``expect`` is the set of
    ``(kind, input_index)`` the doctor must report, each naming one of ``blamed`` (default: the
    buggy Functions); ``hint`` must appear in the findings' hints, ``phrases`` in the report."""

    name: str
    buggy: dict
    program: Callable
    reference: Callable
    inputs: Callable
    expect: set
    hint: str | None = None
    phrases: tuple = ()
    blamed: tuple | None = None
    changes_gradient: bool = True
    libraries: tuple = LIBRARIES
    options: dict = field(default_factory=dict)
    rtol: float = 1e-10


def normal(*shape, scale=1.0, offset=0.0):
    return lambda rng: rng.standard_normal(shape) * scale + offset


def uniform(low, high, *shape):
    return lambda rng: rng.uniform(low, high, shape)


def const(values, dtype=np.int64):
    return lambda rng: np.array(values, dtype=dtype)


def arrays(*pairs):
    return lambda rng: [(make(rng), grad) for make, grad in pairs]


def _mixed_sign_log(rng):
    return np.concatenate([rng.uniform(0.2, 3.0, 4), rng.uniform(-3.0, -1.5, 4)])


def _attention_ref(T, q, k, v):
    return ((q @ k.t() * q.shape[-1] ** -0.5).softmax(-1) @ v)


def _conv_ref(T, x, w):
    return T.nn.functional.conv1d(x.reshape(1, 1, -1), w.reshape(1, 1, -1)).reshape(-1)


def _mlp(ns, T, x, w1, b1, w2, b2, target):
    h = ns.Tanh.apply(ns.Linear.apply(x, w1, b1))
    logits = ns.Linear.apply(h, w2, b2)
    return ns.NllLoss.apply(ns.LogSoftmax.apply(logits), target)


def _mlp_ref(T, x, w1, b1, w2, b2, target):
    logits = (x @ w1.t() + b1).tanh() @ w2.t() + b2
    return T.nn.functional.cross_entropy(logits, target)


def _mlp_inputs(rng):
    return [(rng.standard_normal((6, 5)), False), (rng.standard_normal((4, 5)) * 0.5, True),
            (rng.standard_normal(4) * 0.1, True), (rng.standard_normal((3, 4)) * 0.5, True),
            (rng.standard_normal(3) * 0.1, True), (rng.integers(0, 3, 6), False)]


def _penalty(ns, T, x, w):
    """A gradient penalty: the loss is built from d(out)/dx (create_graph=True)."""
    y = ns.Tanh2.apply(x @ w)
    (gx,) = T.autograd.grad((y * y).sum(), x, create_graph=True)
    return (gx ** 2).sum()


def _penalty_ref(T, x, w):
    y = (x @ w).tanh()
    (gx,) = T.autograd.grad((y * y).sum(), x, create_graph=True)
    return (gx ** 2).sum()


def _silu_penalty(ns, T, x, w):
    """The task loss plus a gradient penalty built from its gradient (create_graph=True)."""
    task = (ns.Silu.apply(x) * w).sum()
    (gx,) = T.autograd.grad(task, x, create_graph=True)
    return task + (gx * w).sum()


def _silu_penalty_ref(T, x, w):
    task = (T.nn.functional.silu(x) * w).sum()
    (gx,) = T.autograd.grad(task, x, create_graph=True)
    return task + (gx * w).sum()


def _dropout_program(ns, T, x, w):
    T.manual_seed(3)
    return (ns.Dropout.apply(x, 0.25) * w).sum()


def _dropout_ref(T, x, w):
    return None  # the mask is random: compared with an explicit mask in its own test


CASES = [
    # part of the domain
    Case("leaky relu forgets the leak for negatives", {"LeakyRelu": "LeakyReluForgetsLeak"},
         lambda ns, T, x, w: (ns.LeakyRelu.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.leaky_relu(x, 0.1) * w).sum(),
         arrays((normal(8, scale=2.0), True), (normal(8), False)),
         {("wrong_gradient", 0)}, hint="only where input 0 is negative"),
    Case("elu uses its output, recorded inputs all positive", {"Elu": "EluUsesOutput"},
         lambda ns, T, x, w: (ns.Elu.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.elu(x) * w).sum(),
         arrays((uniform(0.2, 1.5, 6), True), (normal(6), False)),
         {("wrong_gradient", 0)}, phrases=("scaled by -1",), changes_gradient=False),
    Case("sigmoid backward overflows in float32", {"Sigmoid": "SigmoidOverflows"},
         lambda ns, T, x, w: (ns.Sigmoid.apply(x) * w).sum(),
         lambda T, x, w: (T.sigmoid(x) * w).sum(),
         lambda rng: [(rng.uniform(-120, 60, 10).astype(np.float32), True),
                      (rng.standard_normal(10).astype(np.float32), False)],
         {("nonfinite", 0)}, phrases=("non-finite",), rtol=1e-5),
    Case("softplus threshold too early, recorded inputs small", {"Softplus": "SoftplusEarlyThreshold"},
         lambda ns, T, x, w: (ns.Softplus.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.softplus(x) * w).sum(),
         arrays((uniform(-1.5, 1.5, 8), True), (normal(8), False)),
         {("wrong_gradient", 0)}, phrases=("scaled by 3",), hint="above",
         changes_gradient=False),
    Case("softplus threshold too early, some inputs large", {"Softplus": "SoftplusEarlyThreshold"},
         lambda ns, T, x, w: (ns.Softplus.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.softplus(x) * w).sum(),
         arrays((lambda rng: np.concatenate([rng.uniform(-3, 1.5, 6), [2.5, 4.0, 7.0]]), True),
                (normal(9), False)),
         {("wrong_gradient", 0)}, hint="a wrong branch of backward"),
    Case("once_differentiable signed log, wrong for negatives", {"SignedLog": "SignedLogForgetsAbs"},
         lambda ns, T, x: (ns.SignedLog.apply(x) ** 2).sum(),
         lambda T, x: ((x.sign() * x.abs().log1p()) ** 2).sum(),
         arrays((_mixed_sign_log, True)),
         {("wrong_gradient", 0)}, hint="only where input 0 is negative"),
    # several inputs, shapes
    Case("column scale reduced over the wrong axis", {"ColumnScale": "ColumnScaleWrongAxis"},
         lambda ns, T, x, w: (ns.ColumnScale.apply(x, w) ** 2).sum(),
         lambda T, x, w: ((x * w) ** 2).sum(),
         arrays((normal(4, 4), True), (normal(4, 1), True)),
         {("wrong_gradient", 1)}),
    Case("softmax row sums without keepdim", {"Softmax": "SoftmaxNoKeepdim"},
         lambda ns, T, x, w: (ns.Softmax.apply(x, -1) * w).sum(),
         lambda T, x, w: (x.softmax(-1) * w).sum(),
         arrays((normal(4, 4), True), (normal(4, 4), False)),
         {("wrong_gradient", 0)}),
    Case("softmax dim argument ignored in backward", {"Softmax": "SoftmaxIgnoresDim"},
         lambda ns, T, x, w: (ns.Softmax.apply(x, 0) * w).sum(),
         lambda T, x, w: (x.softmax(0) * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 5), False)),
         {("wrong_gradient", 0)}),
    Case("log-softmax uses log-probabilities", {"LogSoftmax": "LogSoftmaxUsesLogProbs"},
         lambda ns, T, x, w: (ns.LogSoftmax.apply(x) * w).sum(),
         lambda T, x, w: (x.log_softmax(-1) * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 5), False)),
         {("wrong_gradient", 0)}),
    Case("layer norm drops the variance term", {"LayerNorm": "LayerNormDropsVarianceTerm"},
         lambda ns, T, x, w: (ns.LayerNorm.apply(x) * w).sum(),
         lambda T, x, w: (T.nn.functional.layer_norm(x, (6,)) * w).sum(),
         arrays((normal(3, 6, scale=2.0, offset=1.0), True), (normal(3, 6), False)),
         {("wrong_gradient", 0)}),
    Case("attention forgets the 1/sqrt(d) scale", {"Attention": "AttentionForgetsScale"},
         lambda ns, T, q, k, v: (ns.Attention.apply(q, k, v) ** 2).sum(),
         lambda T, q, k, v: (_attention_ref(T, q, k, v) ** 2).sum(),
         arrays((normal(5, 4), True), (normal(6, 4), True), (normal(6, 3), True)),
         {("wrong_gradient", 0), ("wrong_gradient", 1)}, hint="analytic = 2 x numeric"),
    Case("bmm second gradient transposed", {"Bmm": "BmmSecondGradTransposed"},
         lambda ns, T, a, b: (ns.Bmm.apply(a, b).tanh()).sum(),
         lambda T, a, b: ((a @ b).tanh()).sum(),
         arrays((normal(2, 3, 3), True), (normal(2, 3, 3), True)),
         {("wrong_gradient", 1)}, hint="transposed"),
    Case("conv1d input gradient with the kernel flipped", {"Conv1d": "Conv1dKernelFlipped"},
         lambda ns, T, x, w: (ns.Conv1d.apply(x, w) ** 2).sum(),
         lambda T, x, w: (_conv_ref(T, x, w) ** 2).sum(),
         arrays((normal(8), True), (normal(3), True)),
         {("wrong_gradient", 0)}, hint="a kernel runs the wrong way"),
    Case("gradient of the wrong input", {"Fma": "FmaWrongInputGradient"},
         lambda ns, T, a, b, c: (ns.Fma.apply(a, b, c) ** 2).sum(),
         lambda T, a, b, c: ((a * b + c) ** 2).sum(),
         arrays((normal(5), True), (normal(5), True), (normal(5), True)),
         {("wrong_gradient", 2)}, hint="gradient of the wrong input"),
    Case("keepdim=False sum expanded without unsqueeze", {"RowSum": "RowSumExpandsWithoutUnsqueeze"},
         lambda ns, T, x, w: (ns.RowSum.apply(x, False) * w).sum(),
         lambda T, x, w: (x.sum(1) * w).sum(),
         arrays((normal(4, 4), True), (normal(4), False)),
         {("wrong_gradient", 0)}, hint="transposed"),
    Case("scale factor beta forgotten", {"ScaledSoftplus": "ScaledSoftplusForgetsBeta"},
         lambda ns, T, x: (ns.ScaledSoftplus.apply(x, 3.0) ** 2).sum(),
         lambda T, x: (T.nn.functional.softplus(x, beta=3.0) ** 2).sum(),
         arrays((normal(6), True)),
         {("wrong_gradient", 0)}),
    Case("bool mask inverted in backward", {"MaskedScale": "MaskedScaleMaskInverted"},
         lambda ns, T, x, m: (ns.MaskedScale.apply(x, m) ** 2).sum(),
         lambda T, x, m: (T.where(m, x * 3, x) ** 2).sum(),
         arrays((normal(8), True), (const([1, 0, 0, 1, 1, 0, 1, 0], bool), False)),
         {("wrong_gradient", 0)}),
    # integer indices
    Case("embedding gradient assigned, duplicate indices", {"Embedding": "EmbeddingAssigns"},
         lambda ns, T, w, i: (ns.Embedding.apply(w, i) ** 2).sum(),
         lambda T, w, i: (w[i] ** 2).sum(),
         arrays((normal(5, 3), True), (const([0, 2, 2, 4, 1, 2]), False)),
         {("wrong_gradient", 0)}, hint="repeat"),
    Case("gather backward scatters, duplicate indices", {"Gather": "GatherScatters"},
         lambda ns, T, x, i: (ns.Gather.apply(x, i) ** 2).sum(),
         lambda T, x, i: (x.gather(1, i) ** 2).sum(),
         arrays((normal(3, 5), True), (const([[0, 1, 1, 4], [2, 3, 4, 0], [3, 3, 3, 1]]), False)),
         {("wrong_gradient", 0)}, hint="repeat"),
    Case("index_add backward ignores the index", {"IndexAdd": "IndexAddRoutesInOrder"},
         lambda ns, T, s, i: (ns.IndexAdd.apply(s, i, 4) ** 2).sum(),
         lambda T, s, i: (T.zeros(4, 3, dtype=s.dtype).index_add(0, i, s) ** 2).sum(),
         arrays((normal(3, 3), True), (const([3, 0, 3]), False)),
         {("wrong_gradient", 0)}),
    # scans, sorting
    Case("cumsum backward scans forward", {"Cumsum": "CumsumForwardScan"},
         lambda ns, T, x, w: (ns.Cumsum.apply(x) * w).sum(),
         lambda T, x, w: (x.cumsum(-1) * w).sum(),
         arrays((normal(2, 5), True), (normal(2, 5), False)),
         {("wrong_gradient", 0)}, hint="a scan or a kernel runs the wrong way"),
    Case("cumprod backward scans forward", {"Cumprod": "CumprodForwardScan"},
         lambda ns, T, x, w: (ns.Cumprod.apply(x) * w).sum(),
         lambda T, x, w: (x.cumprod(-1) * w).sum(),
         arrays((uniform(0.5, 1.5, 2, 5), True), (normal(2, 5), False)),
         {("wrong_gradient", 0)}),
    Case("sort backward gathers (inverse permutation)", {"Sort": "SortGathers"},
         lambda ns, T, x, w: (ns.Sort.apply(x)[0] * w).sum(),
         lambda T, x, w: (x.sort(-1)[0] * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 5), False)),
         {("wrong_gradient", 0)}, hint="the index routes them the wrong way"),
    Case("topk gradients in the first k places", {"TopK": "TopKFirstPlaces"},
         lambda ns, T, x, w: (ns.TopK.apply(x, 2) * w).sum(),
         lambda T, x, w: (x.topk(2, -1)[0] * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 2), False)),
         {("wrong_gradient", 0)}, hint="an index that routes them wrongly"),
    # several outputs
    Case("two outputs' gradients swapped", {"SinCube": "SinCubeOutputsSwapped"},
         lambda ns, T, x: (lambda s, c: (s * 2 + c).sum())(*ns.SinCube.apply(x)),
         lambda T, x: (x.sin() * 2 + x ** 3).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="outputs 0 and 1 swapped"),
    Case("second output's gradient ignored", {"TwiceExp": "TwiceExpIgnoresSecond"},
         lambda ns, T, x: (lambda a, b: (a * b).sum())(*ns.TwiceExp.apply(x)),
         lambda T, x: (x * 2 * x.exp()).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="backward ignores the gradient of output 1"),
    Case("materialize_grads off, first non-None part only", {"TwiceSquare": "TwiceSquareFirstOnly"},
         lambda ns, T, x: (lambda a, b: (a * b).sum())(*ns.TwiceSquare.apply(x)),
         lambda T, x: (x * 2 * x * x).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="only the part from output 1"),
    # setup_context, mark_dirty
    Case("setup_context, derivative from the saved output", {"Cube": "CubeUsesOutput"},
         lambda ns, T, x: (ns.Cube.apply(x) * 0.5).sum(),
         lambda T, x: (x ** 3 * 0.5).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}),
    Case("mark_dirty tanh_, saved output taken for the input", {"TanhInPlace": "TanhInPlaceTreatsOutputAsInput"},
         lambda ns, T, x: (ns.TanhInPlace.apply(x * 1.0) ** 2).sum(),
         lambda T, x: (x.tanh() ** 2).sum(),
         arrays((normal(5, scale=1.5), True)),
         {("wrong_gradient", 0)}),
    # second order
    Case("a wrong Function inside another's backward (gradient penalty)",
         {"Tanh2": "Tanh2BadInner"}, _penalty, _penalty_ref,
         arrays((normal(3, 4), True), (normal(4, 2), True)),
         {("wrong_gradient", 1)}, blamed=("TanhGradSignFlipped",), hint="sign flipped"),
    Case("backward right, double backward wrong (detached sigmoid)", {"Silu": "SiluDetachedSigmoid"},
         _silu_penalty, _silu_penalty_ref,
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_double_backward", 0)}, options={"double_backward": True}),
    # graphs of several Functions
    Case("MLP of six Functions, log-softmax wrong", {"LogSoftmax": "LogSoftmaxUsesLogProbs"},
         _mlp, _mlp_ref, _mlp_inputs, {("wrong_gradient", 0)}),
    Case("MLP, two wrong Functions feeding each other",
         {"LogSoftmax": "LogSoftmaxUsesLogProbs", "LayerNorm": "LayerNormDropsVarianceTerm"},
         lambda ns, T, x, w1, b1, w2, b2, t: ns.NllLoss.apply(ns.LogSoftmax.apply(ns.LayerNorm.apply(
             ns.Linear.apply(ns.Tanh.apply(ns.Linear.apply(x, w1, b1)), w2, b2))), t),
         lambda T, x, w1, b1, w2, b2, t: T.nn.functional.cross_entropy(
             T.nn.functional.layer_norm((x @ w1.t() + b1).tanh() @ w2.t() + b2, (3,)), t),
         _mlp_inputs, {("wrong_gradient", 0)}),
    Case("a wrong Function used in two layers", {"ColumnScale": "ColumnScaleWrongAxis"},
         lambda ns, T, x, w1, w2: (ns.ColumnScale.apply(ns.ColumnScale.apply(x, w1).tanh(), w2) ** 2).sum(),
         lambda T, x, w1, w2: (((x * w1).tanh() * w2) ** 2).sum(),
         arrays((normal(4, 4), False), (normal(4, 1), True), (normal(4, 1), True)),
         {("wrong_gradient", 1)}),
    Case("rms norm gain gradient not reduced over the batch", {"RmsNorm": "RmsNormGainNotReduced"},
         lambda ns, T, x, g, w, b: ns.Tanh.apply(ns.Linear.apply(ns.RmsNorm.apply(x, g), w, b)).sum(),
         lambda T, x, g, w, b: ((x * ((x * x).mean(-1, keepdim=True) + 1e-6).rsqrt() * g)
                                @ w.t() + b).tanh().sum(),
         arrays((normal(4, 5), True), (normal(5, offset=1.0), True), (normal(3, 5), True),
                (normal(3), True)),
         {("wrong_gradient", 1)}),
    Case("dropout forgets the 1/(1-p) rescale", {"Dropout": "DropoutForgetsRescale"},
         _dropout_program, _dropout_ref,
         arrays((normal(4, 6), True), (normal(4, 6), False)),
         {("wrong_gradient", 0)}, hint="analytic = 0.75 x numeric"),
]


def _case_id(case):
    return case.name.replace(" ", "-")


class _Names:
    """The family's Functions with the case's substitutions."""

    def __init__(self, fns, swap):
        self._fns, self._swap = fns, swap

    def __getattr__(self, name):
        return getattr(self._fns, self._swap.get(name, name))


def _tensors(case, seed, lib):
    T = LIB[lib]
    made = case.inputs(np.random.default_rng(seed))
    return [T.tensor(a, requires_grad=g) for a, g in made]


def _loss(case, lib, seed, buggy, capture=True):
    T = LIB[lib]
    ns = _Names(FAMILIES[lib], case.buggy if buggy else {})
    tensors = _tensors(case, seed, lib)
    with gradviz.debug.capture() if capture else contextlib.nullcontext():
        loss = case.program(ns, T, *tensors)
    return loss, tensors


def _grads(loss, tensors, lib):
    loss.backward()
    return [(t.grad.numpy() if t.grad is not None else np.zeros(t.shape)).astype(np.float64)
            for t in tensors if t.requires_grad]


def _reference(case, seed):
    tensors = _tensors(case, seed, "torch")
    loss = case.reference(real_torch, *tensors)
    return None if loss is None else _grads(loss, tensors, "torch")


def _found(report):
    return {(f.kind, f.input_index) for f in report.findings if f.severity == "error"}


def _blamed(case, lib):
    names = case.blamed or tuple(v for k, v in case.buggy.items() if k != v)
    return {getattr(FAMILIES[lib], n) for n in names}


def diagnose(case, lib, seed, buggy, capture=True):
    loss, _ = _loss(case, lib, seed, buggy, capture)
    return gradviz.debug.doctor(loss, seed=seed, **case.options)


def problems(case, lib, seed, report, buggy):
    """What is wrong with ``report`` (empty when the doctor got it right)."""
    text = str(report)
    if not buggy:
        return [] if report.ok and not report.findings else [f"false alarm:\n{text}"]
    out = []
    if _found(report) != case.expect:
        out.append(f"found {_found(report)} expected {case.expect}")
    blamed = _blamed(case, lib)
    for finding in report.findings:
        if finding.function not in blamed:
            out.append(f"blamed {finding!r}")
    for function in blamed - {f.function for f in report.findings}:
        out.append(f"{function.__name__} not named")
    if case.hint is not None:
        hints = " | ".join(str(f.hint) for f in report.findings)
        if case.hint not in hints:
            out.append(f"hint {case.hint!r} not in {hints!r}")
    for phrase in case.phrases:
        if phrase not in text:
            out.append(f"phrase {phrase!r} missing")
    if out:
        out.append(text)
    return out


@pytest.mark.parametrize("seed, lib", RUNS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_program_matches_torch_and_is_clean(case, seed, lib):
    expected = _reference(case, seed)
    loss, tensors = _loss(case, lib, seed, buggy=False, capture=False)
    got = _grads(loss, tensors, lib)
    if expected is not None:
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.rtol)
    for capture in (True, False) if seed == 0 else (True,):
        report = diagnose(case, lib, seed, buggy=False, capture=capture)
        assert not problems(case, lib, seed, report, False), f"{case.name} ({lib}, {seed})"
        if capture:
            assert report.checked and not report.skipped, str(report)


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_real(case, lib, seed=0):
    loss, tensors = _loss(case, lib, seed, buggy=True, capture=False)
    got = _grads(loss, tensors, lib)
    loss, tensors = _loss(case, lib, seed, buggy=False, capture=False)
    right = _grads(loss, tensors, lib)
    with np.errstate(invalid="ignore"):
        same = all(np.allclose(g, r, rtol=1e-6, atol=1e-9) for g, r in zip(got, right))
    assert same != case.changes_gradient, f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("seed, lib", RUNS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_diagnosed(case, seed, lib):
    report = diagnose(case, lib, seed, buggy=True)
    found = problems(case, lib, seed, report, True)
    assert not found, "\n".join(found)


# ---- correct Functions that are hard for finite differences ------------------------------------

def _f32(*shape, scale=1.0, offset=0.0):
    return lambda rng: (rng.standard_normal(shape) * scale + offset).astype(np.float32)


HARD = {
    "row max with ties (integer-valued inputs)": (
        lambda ns, T, x: (ns.RowMax.apply(x) ** 2).sum(),
        arrays((lambda rng: rng.integers(0, 3, (4, 5)).astype(np.float64), True))),
    "x^4 at |x| ~ 1e3": (
        lambda ns, T, x: ns.Quartic.apply(x).sum(),
        arrays((lambda rng: rng.uniform(500, 2000, 6) * rng.choice([-1.0, 1.0], 6), True))),
    "x^4 at x ~ 100 in float32": (
        lambda ns, T, x: ns.Quartic.apply(x).sum(),
        arrays((lambda rng: rng.uniform(50, 200, 6).astype(np.float32), True))),
    "attention in float32 with large scores": (
        lambda ns, T, q, k, v: (ns.Attention.apply(q, k, v) ** 2).sum(),
        arrays((_f32(5, 8, scale=3.0), True), (_f32(6, 8, scale=3.0), True), (_f32(6, 4), True))),
    "layer norm in float32 with a large offset": (
        lambda ns, T, x, w: (ns.LayerNorm.apply(x) * w).sum(),
        arrays((_f32(4, 16, scale=50.0, offset=200.0), True), (_f32(4, 16), False))),
    "cumprod in float32 over 12 steps": (
        lambda ns, T, x, w: (ns.Cumprod.apply(x) * w).sum(),
        arrays((lambda rng: rng.uniform(0.5, 1.5, (3, 12)).astype(np.float32), True),
               (_f32(3, 12), False))),
    "softplus from -40 to 40, across its threshold": (
        lambda ns, T, x, w: (ns.Softplus.apply(x) * w).sum(),
        arrays((uniform(-40, 40, 12), True), (normal(12), False))),
    "sigmoid in float32 from -120 to 60 (saturated)": (
        lambda ns, T, x, w: (ns.Sigmoid.apply(x) * w).sum(),
        arrays((lambda rng: rng.uniform(-120, 60, 10).astype(np.float32), True),
               (_f32(10), False))),
    "dropout with its mask drawn in forward": (
        lambda ns, T, x, w: (ns.Dropout.apply(x, 0.5) * w).sum(),
        arrays((normal(4, 6), True), (normal(4, 6), False))),
}


@pytest.mark.parametrize("seed, lib", RUNS)
@pytest.mark.parametrize("name", sorted(HARD))
def test_correct_functions_hard_for_finite_differences_are_clean(name, seed, lib):
    program, inputs = HARD[name]
    T = LIB[lib]
    tensors = [T.tensor(a, requires_grad=g) for a, g in inputs(np.random.default_rng(seed))]
    with gradviz.debug.capture():
        loss = program(FAMILIES[lib], T, *tensors)
    report = gradviz.debug.doctor(loss, seed=seed)
    assert report.ok and report.findings == [], f"{name} ({lib}, {seed}):\n{report}"
    assert report.checked and not report.skipped, str(report)


def test_dropout_gradient_is_the_saved_mask_as_in_torch():
    """The correct Dropout's gradient is w times its mask (the mask read off the output)."""
    rng = np.random.default_rng(4)
    x_np, w_np = rng.standard_normal((4, 6)) + 3.0, rng.standard_normal((4, 6))
    for lib in LIBRARIES:
        T = LIB[lib]
        x, w = T.tensor(x_np, requires_grad=True), T.tensor(w_np)
        out = FAMILIES[lib].Dropout.apply(x, 0.25)
        (out * w).sum().backward()
        mask = out.detach().numpy() / x_np
        assert set(np.round(np.unique(mask), 12)) <= {0.0, round(1 / 0.75, 12)}
        np.testing.assert_allclose(x.grad.numpy(), w_np * mask, rtol=1e-12)


# ---- surrogate gradients -------------------------------------------------------------------

STES = {
    "round, identity backward": (
        "RoundSTE", lambda ns, T, x, w: (ns.RoundSTE.apply(x * 3) * w).sum(),
        lambda T, x, w: ((x * 3).round() * w).sum(), 8),
    "sign, clipped identity backward": (
        "SignClippedSTE", lambda ns, T, x, w: (ns.SignClippedSTE.apply(x * 1.5) * w).sum(),
        lambda T, x, w: ((x * 1.5).sign() * w).sum(), 8),
}


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("name", sorted(STES))
def test_straight_through_estimators_are_a_warning_that_asks_not_a_bug(name, lib):
    """Note [Surrogate gradients]: a piecewise-constant forward with a non-zero backward is
    an intended surrogate or a bug; finite differences cannot tell, so the report warns and
    asks (report.ok stays True) instead of claiming a bug."""
    fn_name, program, reference, n = STES[name]
    rng = np.random.default_rng(2)
    x_np, w_np = rng.standard_normal(n), rng.standard_normal(n)
    T = LIB[lib]
    x, w = T.tensor(x_np, requires_grad=True), T.tensor(w_np)
    with gradviz.debug.capture():
        loss = program(FAMILIES[lib], T, x, w)
    report = gradviz.debug.doctor(loss)
    assert report.ok, str(report)
    (finding,) = report.findings
    assert finding.severity == "warning" and finding.kind == "wrong_gradient"
    assert finding.function is getattr(FAMILIES[lib], fn_name)
    assert finding.details["surrogate"] and "straight-through estimator" in finding.message
    assert "exactly zero" in finding.message and "1 warning" in str(report)
    # what it says is what torch computes: the built-in forward's gradient is zero
    xt, wt = real_torch.tensor(x_np, requires_grad=True), real_torch.tensor(w_np)
    reference(real_torch, xt, wt).backward()
    assert not xt.grad.any()


class _SaturatedClamp(gradviz.autograd.Function):
    """clamp(x, -0.5, 0.5) whose backward passes everything: at inputs all beyond the bounds
    it is flat there, like an estimator, but it moves at smaller inputs: a plain bug."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-0.5, 0.5)

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_a_saturated_continuous_forward_is_not_taken_for_a_surrogate():
    x = gradviz.tensor([-3.0, -2.0, 1.5, 2.5, 4.0], requires_grad=True)
    with gradviz.debug.capture():
        loss = (_SaturatedClamp.apply(x) * gradviz.tensor([1.0, -2.0, 0.5, 3.0, 1.0])).sum()
    report = gradviz.debug.doctor(loss)
    assert not report.ok, str(report)
    (finding,) = report.findings
    assert finding.severity == "error" and "surrogate" not in finding.details


# ---- a Function inside a module, in a training loop --------------------------------------------

def _train(lib, rms, steps=3):
    T = LIB[lib]
    fns = FAMILIES[lib]
    rng = np.random.default_rng(11)
    data = rng.standard_normal((8, 5))
    targets = rng.integers(0, 3, 8)

    class Block(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = T.nn.Parameter(T.tensor(rng.uniform(0.5, 1.5, 5)))
            self.weight = T.nn.Parameter(T.tensor(rng.standard_normal((3, 5)) * 0.3))
            self.bias = T.nn.Parameter(T.tensor(np.zeros(3)))

        def forward(self, x):
            return fns.Linear.apply(rms.apply(x, self.gain), self.weight, self.bias)

    block = Block()
    optimizer = T.optim.SGD(block.parameters(), lr=0.1)
    x, t = T.tensor(data), T.tensor(targets)
    for _ in range(steps):
        optimizer.zero_grad()
        fns.NllLoss.apply(fns.LogSoftmax.apply(block(x)), t).backward()
        optimizer.step()
    with gradviz.debug.capture():  # the next step's loss, the one the doctor examines
        return fns.NllLoss.apply(fns.LogSoftmax.apply(block(x)), t)


@pytest.mark.parametrize("lib", LIBRARIES)
def test_wrong_function_inside_a_module_in_a_training_loop(lib):
    fns = FAMILIES[lib]
    report = gradviz.debug.doctor(_train(lib, fns.RmsNormGainNotReduced))
    assert _found(report) == {("wrong_gradient", 1)}, str(report)
    assert {f.function for f in report.findings} == {fns.RmsNormGainNotReduced}
    report = gradviz.debug.doctor(_train(lib, fns.RmsNorm))
    assert report.ok and report.findings == [] and len(report.checked) == 4, str(report)


@pytest.mark.parametrize("lib", LIBRARIES)
def test_the_doctor_leaves_the_random_streams_where_they_were(lib):
    """Note [Random forwards]: the re-runs draw from a fixed state, then the library's,
    numpy's and Python's generators are put back."""
    import random

    T = LIB[lib]
    x = T.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    with gradviz.debug.capture():
        loss = (FAMILIES[lib].Dropout.apply(x, 0.5) * 2.0).sum()
    T.manual_seed(9)
    np.random.seed(9)
    random.seed(9)
    expected = (T.rand(4).numpy(), np.random.random(4), random.random())
    T.manual_seed(9)
    np.random.seed(9)
    random.seed(9)
    report = gradviz.debug.doctor(loss)
    assert report.ok and report.checked, str(report)
    np.testing.assert_array_equal(T.rand(4).numpy(), expected[0])
    np.testing.assert_array_equal(np.random.random(4), expected[1])
    assert random.random() == expected[2]
