"""Seeded bugs for the gradient doctor, the corners of the Function contract that the other
seeded files (test_doctor_seeded*.py) do not reach, each with its correct twin, on gradviz graphs and (for most) on real
PyTorch graphs (``doctor(torch_loss)``).

- several outputs: the bug in the second output's part only, grads returned in the order of
  the outputs instead of the inputs, an output marked non-differentiable;
- plain and optional arguments: an optional bias given as None, a tuple of options, a varargs
  list of tensors, an int dim and a bool keepdim;
- ``ctx.needs_input_grad`` read at the wrong index (None where a gradient is needed);
- ``set_materialize_grads(False)``: a None gradient used, or returned as the whole gradient;
- ``mark_dirty`` in-place Functions, a Function returning a view of its input, the output
  saved for backward;
- second order: a backward built from a custom Function with a wrong backward, a backward
  detached from the graph (``double_backward=True``);
- broadcasting: a bias reduced over the wrong dim (a shape error) or averaged (silently
  wrong), a gradient returned in float32 for a float64 input;
- one Function used at several call sites, wrong only at one; inside an ``nn.Module``; in the
  time loop of an RNN.

For every case and library: the correct twin's gradients equal PyTorch's built-ins and the
doctor finds nothing in it; the seeded bug is real; the doctor names exactly the wrong
Function, the input and the kind, and the hint (where given) is in its findings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
import torch as real_torch
from test_doctor_seeded_both_libraries import _Names, arrays, normal, uniform

import gradviz

LIBRARIES = ("gradviz", "torch")
RUNS = [(0, "gradviz"), (1, "gradviz"), (0, "torch")]


def family(T):
    """Every Function of this file for the library ``T``: the correct one, then its buggy
    twin(s), named after the bug."""
    Function = T.autograd.Function
    ns = {}

    def add(cls):
        ns[cls.__name__] = cls
        return cls

    # -- several outputs ---------------------------------------------------------------------
    @add
    class MulDiv(Function):
        """(x * y, x / y)."""

        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y, x / y

        @staticmethod
        def backward(ctx, gp, gq):
            x, y = ctx.saved_tensors
            return gp * y + gq / y, gp * x - gq * x / (y * y)

    @add
    class MulDivQuotientSign(MulDiv):
        """d(x/y)/dy with the sign lost: only the second output's part of input 1 is wrong."""

        @staticmethod
        def backward(ctx, gp, gq):
            x, y = ctx.saved_tensors
            return gp * y + gq / y, gp * x + gq * x / (y * y)

    @add
    class Halves(Function):
        """x [2n] split into (x[:n] * 2, x[n:] * 3)."""

        @staticmethod
        def forward(ctx, x):
            n = x.shape[0] // 2
            return x[:n] * 2, x[n:] * 3

        @staticmethod
        def backward(ctx, g0, g1):
            return T.cat([g0 * 2, g1 * 3])

    @add
    class HalvesConcatSwapped(Halves):
        """The parts concatenated in the wrong order."""

        @staticmethod
        def backward(ctx, g0, g1):
            return T.cat([g1 * 3, g0 * 2])

    @add
    class NormAndLength(Function):
        """(x / |x|, |x|) of a vector; the length is differentiable."""

        @staticmethod
        def forward(ctx, x):
            n = (x * x).sum().sqrt()
            u = x / n
            ctx.save_for_backward(u, n)
            return u, n

        @staticmethod
        def backward(ctx, gu, gn):
            u, n = ctx.saved_tensors
            return (gu - u * (gu * u).sum()) / n + gn * u

    @add
    class NormAndLengthIgnoresLength(NormAndLength):
        """Backward drops the length's gradient (as if it were marked non-differentiable)."""

        @staticmethod
        def backward(ctx, gu, gn):
            u, n = ctx.saved_tensors
            return (gu - u * (gu * u).sum()) / n

    @add
    class MaxWithIndex(Function):
        """(row maxima, their indices); the indices marked non-differentiable."""

        @staticmethod
        def forward(ctx, x):
            values, index = x.max(1)
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index)
            ctx.shape = x.shape
            return values, index

        @staticmethod
        def backward(ctx, gv, gi):
            (index,) = ctx.saved_tensors
            out = T.zeros(ctx.shape, dtype=gv.dtype)
            return out.scatter(1, index.unsqueeze(1), gv.unsqueeze(1))

    @add
    class MaxWithIndexWrongDim(MaxWithIndex):
        """The gradient scattered along dim 0 (the indices are column numbers)."""

        @staticmethod
        def backward(ctx, gv, gi):
            (index,) = ctx.saved_tensors
            out = T.zeros(ctx.shape, dtype=gv.dtype)
            return out.scatter(0, index.unsqueeze(0), gv.unsqueeze(0))

    # -- plain and optional arguments ---------------------------------------------------------
    @add
    class Affine(Function):
        """x @ w + b, with b optional (None)."""

        @staticmethod
        def forward(ctx, x, w, b=None):
            ctx.save_for_backward(x, w)
            ctx.has_bias = b is not None
            out = x @ w
            return out + b if b is not None else out

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            gb = grad.sum(0) if ctx.has_bias else None
            return grad @ w.t(), x.t() @ grad, gb

    @add
    class AffineBiasAlways(Affine):
        """A bias gradient returned even when no bias was given."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w.t(), x.t() @ grad, grad.sum(0)

    @add
    class AffineBiasMean(Affine):
        """The bias gradient averaged over the batch instead of summed."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            gb = grad.mean(0) if ctx.has_bias else None
            return grad @ w.t(), x.t() @ grad, gb

    @add
    class Gate(Function):
        """x * m with an optional float gate m (no gradient needed for it)."""

        @staticmethod
        def forward(ctx, x, m=None):
            ctx.save_for_backward(m)
            return x * m if m is not None else x * 1

        @staticmethod
        def backward(ctx, grad):
            (m,) = ctx.saved_tensors
            return (grad * m if m is not None else grad), None

    @add
    class GateForgetsGate(Gate):
        """The gate left out of the gradient."""

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    @add
    class AffineUnreduced(Affine):
        """Correct too: the bias gradient left as [n, k] for the engine to sum down."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w.t(), x.t() @ grad, grad if ctx.has_bias else None

    @add
    class RowBias(Function):
        """x [n, m] + b [n, 1]."""

        @staticmethod
        def forward(ctx, x, b):
            return x + b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad.sum(1, keepdim=True)

    @add
    class RowBiasReducedOverRows(RowBias):
        """Reduced over dim 0: shape [m] for a [n, 1] bias (the engine refuses it)."""

        @staticmethod
        def backward(ctx, grad):
            return grad, grad.sum(0)

    @add
    class SinScale(Function):
        """sin(x) * opts[0] + opts[1], the options a tuple of numbers."""

        @staticmethod
        def forward(ctx, x, opts):
            ctx.save_for_backward(x)
            ctx.opts = opts
            return T.sin(x) * opts[0] + opts[1]

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * ctx.opts[0] * T.cos(x), None

    @add
    class SinScaleUsesShift(SinScale):
        """The shift taken for the scale."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * ctx.opts[1] * T.cos(x), None

    @add
    class Product(Function):
        """The elementwise product of any number of tensors (varargs)."""

        @staticmethod
        def forward(ctx, *xs):
            ctx.save_for_backward(*xs)
            out = xs[0]
            for x in xs[1:]:
                out = out * x
            return out

        @staticmethod
        def backward(ctx, grad):
            xs = ctx.saved_tensors
            grads = []
            for i in range(len(xs)):
                g = grad
                for j, x in enumerate(xs):
                    if j != i:
                        g = g * x
                grads.append(g)
            return tuple(grads)

    @add
    class ProductSkipsLast(Product):
        """Each gradient leaves out the last factor (range(len - 1))."""

        @staticmethod
        def backward(ctx, grad):
            xs = ctx.saved_tensors
            grads = []
            for i in range(len(xs)):
                g = grad
                for j in range(len(xs) - 1):
                    if j != i:
                        g = g * xs[j]
                grads.append(g)
            return tuple(grads)

    @add
    class LogSumExp(Function):
        """logsumexp(x, dim, keepdim) with an int and a bool argument."""

        @staticmethod
        def forward(ctx, x, dim, keepdim):
            out = x.logsumexp(dim, keepdim=True)
            ctx.save_for_backward(x, out)
            ctx.dim = dim
            return out if keepdim else out.squeeze(dim)

        @staticmethod
        def backward(ctx, grad, *_):
            x, out = ctx.saved_tensors
            if grad.dim() < x.dim():
                grad = grad.unsqueeze(ctx.dim)
            return grad * (x - out).exp(), None, None

    @add
    class LogSumExpNoUnsqueeze(LogSumExp):
        """keepdim=False's gradient not unsqueezed: broadcast along the wrong dim."""

        @staticmethod
        def backward(ctx, grad, *_):
            x, out = ctx.saved_tensors
            return grad * (x - out).exp(), None, None

    # -- needs_input_grad ------------------------------------------------------------------------
    @add
    class Bilinear(Function):
        """sum_k x[:, k] w[k] y[:, k] (x [n, m], w [m], y [n, m])."""

        @staticmethod
        def forward(ctx, x, w, y):
            ctx.save_for_backward(x, w, y)
            return x * w * y

        @staticmethod
        def backward(ctx, grad):
            x, w, y = ctx.saved_tensors
            gx = gw = gy = None
            if ctx.needs_input_grad[0]:
                gx = grad * w * y
            if ctx.needs_input_grad[1]:
                gw = (grad * x * y).sum(0)
            if ctx.needs_input_grad[2]:
                gy = grad * x * w
            return gx, gw, gy

    @add
    class BilinearWrongFlag(Bilinear):
        """The weight's gradient guarded by the first input's flag."""

        @staticmethod
        def backward(ctx, grad):
            x, w, y = ctx.saved_tensors
            gx = gw = gy = None
            if ctx.needs_input_grad[0]:
                gx = grad * w * y
                gw = (grad * x * y).sum(0)
            if ctx.needs_input_grad[2]:
                gy = grad * x * w
            return gx, gw, gy

    @add
    class BilinearGradsShifted(Bilinear):
        """The gradients of x and y returned in each other's slot."""

        @staticmethod
        def backward(ctx, grad):
            x, w, y = ctx.saved_tensors
            return grad * x * w, (grad * x * y).sum(0), grad * w * y

    # -- materialize_grads off ----------------------------------------------------------------------
    @add
    class SquareAndCube(Function):
        """(x^2, x^3) with materialize_grads off."""

        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * x, x * x * x

        @staticmethod
        def backward(ctx, g2, g3):
            (x,) = ctx.saved_tensors
            out = T.zeros_like(x)
            if g2 is not None:
                out = out + g2 * 2 * x
            if g3 is not None:
                out = out + g3 * 3 * x * x
            return out

    @add
    class SquareAndCubeUsesNone(SquareAndCube):
        """Both grads used without checking for None."""

        @staticmethod
        def backward(ctx, g2, g3):
            (x,) = ctx.saved_tensors
            return g2 * 2 * x + g3 * 3 * x * x

    @add
    class SquareAndCubeNoneIfFirstNone(SquareAndCube):
        """Returns None when the first output is unused (the second's part is lost)."""

        @staticmethod
        def backward(ctx, g2, g3):
            (x,) = ctx.saved_tensors
            if g2 is None:
                return None
            out = g2 * 2 * x
            return out if g3 is None else out + g3 * 3 * x * x

    # -- mark_dirty, views, a saved output -----------------------------------------------------
    @add
    class MulInPlace(Function):
        """x.mul_(s) with a 0-d tensor s; s's gradient needs the old x = out / s."""

        @staticmethod
        def forward(ctx, x, s):
            x.mul_(s)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x, s)
            return x

        @staticmethod
        def backward(ctx, grad):
            out, s = ctx.saved_tensors
            return grad * s, (grad * out / s).sum()

    @add
    class MulInPlaceUsesOutput(MulInPlace):
        """The scale's gradient from the output (the input was overwritten)."""

        @staticmethod
        def backward(ctx, grad):
            out, s = ctx.saved_tensors
            return grad * s, (grad * out).sum()

    @add
    class Transpose(Function):
        """x.t(): the output is a view of the input."""

        @staticmethod
        def forward(ctx, x):
            return x.t()

        @staticmethod
        def backward(ctx, grad):
            return grad.t()

    @add
    class TransposeForgetsTranspose(Transpose):
        @staticmethod
        def backward(ctx, grad):
            return grad

    @add
    class Reciprocal(Function):
        """1 / x, saving the output."""

        @staticmethod
        def forward(ctx, x):
            y = 1 / x
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return -grad * y * y

    @add
    class ReciprocalAtOutput(Reciprocal):
        """-1/x^2 evaluated at the saved output instead of the input."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return -grad / (y * y)

    # -- second order --------------------------------------------------------------------------------
    @add
    class TwiceProduct(Function):
        """2 * g * x as a Function of (g, x): the backward of Square."""

        @staticmethod
        def forward(ctx, g, x):
            ctx.save_for_backward(g, x)
            return 2 * g * x

        @staticmethod
        def backward(ctx, gg):
            g, x = ctx.saved_tensors
            return 2 * gg * x, 2 * gg * g

    @add
    class TwiceProductHalfFactor(TwiceProduct):
        """The factor 2 lost in the gradient with respect to x."""

        @staticmethod
        def backward(ctx, gg):
            g, x = ctx.saved_tensors
            return 2 * gg * x, gg * g

    @add
    class Square(Function):
        """x^2 whose backward is the TwiceProduct Function."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return TwiceProduct.apply(grad, x)

    @add
    class SquareBadInner(Square):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return TwiceProductHalfFactor.apply(grad, x)

    @add
    class SinFn(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.cos()

    @add
    class SinFnDetachedCos(SinFn):
        """cos from a detached x: right once, wrong with create_graph=True."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.detach().cos()

    # -- dtype ---------------------------------------------------------------------------------------
    @add
    class Exp64(Function):
        """exp of a float64 input."""

        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    @add
    class Exp64InFloat32(Exp64):
        """The gradient computed in float32 (a cast forgotten): 1e-7 relative error."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad.float() * y.float()

    # -- call sites, modules, loops ------------------------------------------------------------------
    @add
    class PowN(Function):
        """x ** n with a number n."""

        @staticmethod
        def forward(ctx, x, n):
            ctx.save_for_backward(x)
            ctx.n = n
            return x ** n

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * ctx.n * x ** (ctx.n - 1), None

    @add
    class PowNSquareRule(PowN):
        """2 x whatever n is: right only at the call site with n = 2."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x, None

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
    class LinearWeightNotTransposed(Linear):
        """x^T grad where grad^T x is needed (square weight: the shape is right)."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w, x.t() @ grad, grad.sum(0)

    @add
    class TanhCell(Function):
        """tanh(a + b): an RNN cell's nonlinearity, h = tanh(x W + h W_h)."""

        @staticmethod
        def forward(ctx, a, b):
            y = (a + b).tanh()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            g = grad * (1 - y * y)
            return g, g

    @add
    class TanhCellDropsRecurrent(TanhCell):
        """No gradient to the recurrent input (truncated by mistake)."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            g = grad * (1 - y * y)
            return g, T.zeros_like(g)

    return SimpleNamespace(**ns)


FAMILIES = {"gradviz": family(gradviz), "torch": family(real_torch)}
LIB = {"gradviz": gradviz, "torch": real_torch}


@dataclass
class Case:
    """One seeded bug (as ``test_doctor_seeded_both_libraries.Case``): ``program(ns, T, *tensors)`` builds the loss
    with the family's Functions (``buggy`` maps the correct name to the buggy one), and
    ``reference(T, *tensors)`` the same loss with torch's built-ins; the doctor must report
    exactly ``expect`` (``(kind, input_index)`` of the errors), blaming only ``blamed`` (default:
    the buggy Functions), with ``hint`` in a finding's hint and ``phrases`` in the report."""

    name: str
    buggy: dict
    program: Callable
    reference: Callable
    inputs: Callable
    expect: set
    hint: str | None = None
    phrases: tuple = ()
    blamed: tuple | None = None
    libraries: tuple = LIBRARIES
    options: dict = field(default_factory=dict)


def _module(ns, T, x, w1, b1, w2, b2):
    class Mlp(T.nn.Module):
        # the leaves as they are (a Parameter would be a new leaf, whose .grad the test
        # could not compare)
        def __init__(self):
            super().__init__()
            self.w1, self.b1, self.w2, self.b2 = w1, b1, w2, b2

        def forward(self, x):
            return ns.Linear.apply(ns.Linear.apply(x, self.w1, self.b1).tanh(), self.w2, self.b2)

    return (Mlp()(x) ** 2).sum()


def _module_ref(T, x, w1, b1, w2, b2):
    return ((((x @ w1.t() + b1).tanh()) @ w2.t() + b2) ** 2).sum()


def _rnn(ns, T, xs, wx, wh):
    h = T.zeros(xs.shape[1], wh.shape[0], dtype=xs.dtype)
    for t in range(xs.shape[0]):
        h = ns.TanhCell.apply(xs[t] @ wx, h @ wh)
    return (h ** 2).sum()


def _rnn_ref(T, xs, wx, wh):
    h = T.zeros(xs.shape[1], wh.shape[0], dtype=xs.dtype)
    for t in range(xs.shape[0]):
        h = (xs[t] @ wx + h @ wh).tanh()
    return (h ** 2).sum()


def _square_penalty(ns, T, x, w):
    """A task term and a gradient penalty through Square's backward (create_graph=True)."""
    task = (ns.Square.apply(x) * w).sum()
    (gx,) = T.autograd.grad(task, x, create_graph=True)
    return task + (gx * gx).sum()


def _sin_penalty(ns, T, x, w):
    task = (ns.SinFn.apply(x) * w).sum()
    (gx,) = T.autograd.grad(task, x, create_graph=True)
    return task + (gx * gx).sum()


def _penalty_ref(f):
    def reference(T, x, w):
        task = (f(x) * w).sum()
        (gx,) = T.autograd.grad(task, x, create_graph=True)
        return task + (gx * gx).sum()
    return reference


def _pos(*shape):
    return uniform(0.5, 2.0, *shape)


SWAPPED_INPUTS = "gradients for inputs 0 and 2 swapped in backward?"
CASES = [
    # several outputs
    Case("second output's part of the second input has its sign lost",
         {"MulDiv": "MulDivQuotientSign"},
         lambda ns, T, x, y, w: (lambda p, q: (p * w + q).sum())(*ns.MulDiv.apply(x, y)),
         lambda T, x, y, w: (x * y * w + x / y).sum(),
         arrays((normal(5), True), (_pos(5), True), (normal(5), False)),
         {("wrong_gradient", 1)}),
    Case("split halves concatenated in the wrong order", {"Halves": "HalvesConcatSwapped"},
         lambda ns, T, x, w: (lambda a, b: (a * w[:3]).sum() + (b * b).sum())(*ns.Halves.apply(x)),
         lambda T, x, w: (x[:3] * 2 * w[:3]).sum() + ((x[3:] * 3) ** 2).sum(),
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}),
    Case("differentiable length output's gradient dropped",
         {"NormAndLength": "NormAndLengthIgnoresLength"},
         lambda ns, T, x, w: (lambda u, n: (u * w).sum() + n * n)(*ns.NormAndLength.apply(x)),
         lambda T, x, w: (x / x.norm() * w).sum() + x.norm() ** 2,
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 0)}, hint="backward ignores the gradient of output 1"),
    Case("max with non-differentiable index, scattered along the wrong dim",
         {"MaxWithIndex": "MaxWithIndexWrongDim"},
         lambda ns, T, x, w: (lambda v, i: (v * w).sum())(*ns.MaxWithIndex.apply(x)),
         lambda T, x, w: (x.max(1)[0] * w).sum(),
         arrays((normal(4, 4), True), (normal(4), False)),
         {("wrong_gradient", 0)}),
    # plain and optional arguments
    Case("bias gradient returned for a bias given as None", {"Affine": "AffineBiasAlways"},
         lambda ns, T, x, w: (ns.Affine.apply(x, w, None) ** 2).sum(),
         lambda T, x, w: ((x @ w) ** 2).sum(),
         arrays((normal(4, 3), True), (normal(3, 2), True)),
         {("backward_error", 2)}, hint="backward must return None in its place"),
    Case("bias gradient averaged over the batch", {"Affine": "AffineBiasMean"},
         lambda ns, T, x, w, b: (ns.Affine.apply(x, w, b) ** 2).sum(),
         lambda T, x, w, b: ((x @ w + b) ** 2).sum(),
         arrays((normal(4, 3), True), (normal(3, 2), True), (normal(2), True)),
         {("wrong_gradient", 2)}, hint="analytic = 0.25 x numeric"),
    Case("optional float gate left out of the gradient", {"Gate": "GateForgetsGate"},
         lambda ns, T, x, m: (ns.Gate.apply(x, m) ** 2).sum() + ns.Gate.apply(x, None).sum(),
         lambda T, x, m: ((x * m) ** 2).sum() + x.sum(),
         arrays((normal(2, 3), True), (uniform(0.1, 0.9, 2, 3), False)),
         {("wrong_gradient", 0)}, hint="with input 1 set to ones",
         phrases=("[use 1 of 2 of GateForgetsGate",)),
    Case("row bias reduced over the wrong dim", {"RowBias": "RowBiasReducedOverRows"},
         lambda ns, T, x, b: (ns.RowBias.apply(x, b) ** 2).sum(),
         lambda T, x, b: ((x + b) ** 2).sum(),
         arrays((normal(4, 3), True), (normal(4, 1), True)),
         {("backward_error", 1)}),
    Case("tuple of options: the shift taken for the scale", {"SinScale": "SinScaleUsesShift"},
         lambda ns, T, x: (ns.SinScale.apply(x, (3.0, 0.5)) ** 2).sum(),
         lambda T, x: ((x.sin() * 3.0 + 0.5) ** 2).sum(),
         arrays((normal(6), True)),
         {("wrong_gradient", 0)}, hint="argument 1[0] set to 0.5 (it is 3)"),
    Case("varargs product leaves out the last factor", {"Product": "ProductSkipsLast"},
         lambda ns, T, a, b, c, d: (ns.Product.apply(a, b, c, d) ** 2).sum(),
         lambda T, a, b, c, d: ((a * b * c * d) ** 2).sum(),
         arrays((normal(4), True), (normal(4), False), (normal(4), True), (_pos(4), True)),
         {("wrong_gradient", 0), ("wrong_gradient", 2)},
         hint="with input 3 set to ones: backward leaves out the factor from input 3"),
    Case("logsumexp keepdim=False gradient not unsqueezed", {"LogSumExp": "LogSumExpNoUnsqueeze"},
         lambda ns, T, x, w: (ns.LogSumExp.apply(x, 1, False) * w).sum(),
         lambda T, x, w: (x.logsumexp(1) * w).sum(),
         arrays((normal(4, 4), True), (normal(4), False)),
         {("wrong_gradient", 0)}),
    # needs_input_grad
    Case("weight gradient guarded by the input's flag", {"Bilinear": "BilinearWrongFlag"},
         lambda ns, T, x, w, y: (ns.Bilinear.apply(x, w, y) ** 2).sum(),
         lambda T, x, w, y: ((x * w * y) ** 2).sum(),
         arrays((normal(3, 4), False), (normal(4), True), (normal(3, 4), True)),
         {("wrong_gradient", 1)}, phrases=("backward returned None",)),
    Case("first and last inputs' gradients exchanged", {"Bilinear": "BilinearGradsShifted"},
         lambda ns, T, x, w, y: (ns.Bilinear.apply(x, w, y) ** 2).sum(),
         lambda T, x, w, y: ((x * w * y) ** 2).sum(),
         arrays((normal(3, 4), True), (normal(4), True), (normal(3, 4), True)),
         {("wrong_gradient", 0), ("wrong_gradient", 2)}, hint=SWAPPED_INPUTS),
    # materialize_grads off
    Case("materialize_grads off, None gradient used", {"SquareAndCube": "SquareAndCubeUsesNone"},
         lambda ns, T, x: ns.SquareAndCube.apply(x)[0].sum(),
         lambda T, x: (x * x).sum(),
         arrays((normal(5), True)),
         {("backward_error", None)}, hint="check for None before using it"),
    Case("materialize_grads off, None returned when the first output is unused",
         {"SquareAndCube": "SquareAndCubeNoneIfFirstNone"},
         lambda ns, T, x: ns.SquareAndCube.apply(x)[1].sum(),
         lambda T, x: (x * x * x).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, phrases=("backward returned None",)),
    # mark_dirty, views, a saved output
    Case("in-place scale, the scale's gradient from the output", {"MulInPlace": "MulInPlaceUsesOutput"},
         lambda ns, T, x, s: (ns.MulInPlace.apply(x * 1.0, s) ** 2).sum(),
         lambda T, x, s: ((x * s) ** 2).sum(),
         arrays((normal(5), True), (lambda rng: np.array(rng.uniform(1.5, 3.0)), True)),
         {("wrong_gradient", 1)}, hint="input 0's values replaced by the output's"),
    Case("transpose view, gradient not transposed back", {"Transpose": "TransposeForgetsTranspose"},
         lambda ns, T, x, w: (ns.Transpose.apply(x) * w).sum(),
         lambda T, x, w: (x.t() * w).sum(),
         arrays((normal(3, 3), True), (normal(3, 3), False)),
         {("wrong_gradient", 0)}),
    Case("reciprocal's derivative at the saved output", {"Reciprocal": "ReciprocalAtOutput"},
         lambda ns, T, x, w: (ns.Reciprocal.apply(x) * w).sum(),
         lambda T, x, w: ((1 / x) * w).sum(),
         arrays((uniform(0.5, 3.0, 5), True), (normal(5), False)),
         {("wrong_gradient", 0)}, hint="computed at the output's values"),
    # second order
    Case("backward built from a Function whose own backward is wrong",
         {"Square": "SquareBadInner"}, _square_penalty, _penalty_ref(lambda x: x * x),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 1)}, blamed=("TwiceProductHalfFactor",), hint="0.5 x numeric"),
    Case("backward detached from the graph, found with double_backward",
         {"SinFn": "SinFnDetachedCos"}, _sin_penalty, _penalty_ref(lambda x: x.sin()),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_double_backward", 0)}, options={"double_backward": True}),
    # dtype
    Case("float64 input, gradient computed in float32", {"Exp64": "Exp64InFloat32"},
         lambda ns, T, x, w: (ns.Exp64.apply(x) * w).sum(),
         lambda T, x, w: (x.exp() * w).sum(),
         arrays((normal(6), True), (normal(6), False)),
         set(), hint="return the gradient in the input's dtype (float64)",
         phrases=("float32 gradient for a float64 input",)),
    # call sites, modules, loops
    Case("one Function at two call sites, wrong at the second only", {"PowN": "PowNSquareRule"},
         lambda ns, T, x, w: (ns.PowN.apply(x, 2) * w).sum() + ns.PowN.apply(x, 3).sum(),
         lambda T, x, w: (x ** 2 * w).sum() + (x ** 3).sum(),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 0)}, phrases=("[use 2 of 2 of PowNSquareRule",),
         hint="number argument 1 set to 2 (it is 3)"),
    Case("custom Linear inside an nn.Module", {"Linear": "LinearWeightNotTransposed"},
         _module, _module_ref,
         arrays((normal(5, 3), False), (normal(3, 3), True), (normal(3), True),
                (normal(3, 3), True), (normal(3), True)),
         {("wrong_gradient", 1)}),
    Case("RNN cell drops the recurrent gradient", {"TanhCell": "TanhCellDropsRecurrent"},
         _rnn, _rnn_ref,
         arrays((normal(4, 2, 3), False), (normal(3, 3, scale=0.5), True),
                (normal(3, 3, scale=0.5), True)),
         {("wrong_gradient", 1)}),
]


def _case_id(case):
    return case.name.replace(" ", "-")


def _runs():
    return [pytest.param(case, seed, lib, id=f"{_case_id(case)}-{lib}-{seed}")
            for case in CASES for seed, lib in RUNS if lib in case.libraries]


def _tensors(case, seed, lib):
    T = LIB[lib]
    return [T.tensor(a, requires_grad=g) for a, g in case.inputs(np.random.default_rng(seed))]


def _loss(case, lib, seed, buggy, capture=True):
    T = LIB[lib]
    ns = _Names(FAMILIES[lib], case.buggy if buggy else {})
    tensors = _tensors(case, seed, lib)
    with gradviz.debug.capture() if capture else contextlib.nullcontext():
        loss = case.program(ns, T, *tensors)
    return loss, tensors


def _grads(loss, tensors):
    loss.backward()
    return [(t.grad.numpy() if t.grad is not None else np.zeros(t.shape)).astype(np.float64)
            for t in tensors if t.requires_grad]


def _found(report):
    return {(f.kind, f.input_index) for f in report.findings if f.severity == "error"}


def problems(case, lib, report):
    """What is wrong with the report on the seeded bug (empty when the doctor got it right)."""
    out = []
    if _found(report) != case.expect:
        out.append(f"found {_found(report)} expected {case.expect}")
    names = case.blamed or tuple(v for k, v in case.buggy.items() if k != v)
    blamed = {getattr(FAMILIES[lib], n) for n in names}
    for finding in report.findings:
        if finding.function not in blamed:
            out.append(f"blamed {finding!r}")
    for function in blamed - {f.function for f in report.findings}:
        out.append(f"{function.__name__} not named")
    if case.hint is not None:
        hints = " | ".join(str(f.hint) for f in report.findings)
        if case.hint not in hints:
            out.append(f"hint {case.hint!r} not in {hints!r}")
    text = str(report)
    for phrase in case.phrases:
        if phrase not in text:
            out.append(f"phrase {phrase!r} missing")
    if out:
        out.append(text)
    return out


@pytest.mark.parametrize("case, seed, lib", _runs())
def test_correct_twin_matches_torch_and_is_clean(case, seed, lib):
    tensors = _tensors(case, seed, "torch")
    expected = _grads(case.reference(real_torch, *tensors), tensors)
    loss, tensors = _loss(case, lib, seed, buggy=False, capture=False)
    for got, want in zip(_grads(loss, tensors), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    loss, _ = _loss(case, lib, seed, buggy=False)
    report = gradviz.debug.doctor(loss, seed=seed, **case.options)
    assert report.ok and not report.findings and report.checked and not report.skipped, \
        str(report)


@pytest.mark.parametrize("case, seed, lib", [r for r in _runs() if r.values[1] == 0])
def test_seeded_bug_is_real(case, seed, lib):
    try:
        got = _grads(*_loss(case, lib, seed, buggy=True, capture=False))
    except (RuntimeError, TypeError) as exc:  # the engine refuses what backward returned
        assert case.expect <= {("backward_error", i) for i in (None, 0, 1, 2)}, repr(exc)
        return
    right = _grads(*_loss(case, lib, seed, buggy=False, capture=False))
    assert not all(np.allclose(g, r, rtol=1e-12, atol=1e-14) for g, r in zip(got, right)), \
        f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("case, seed, lib", _runs())
def test_seeded_bug_is_diagnosed(case, seed, lib):
    loss, _ = _loss(case, lib, seed, buggy=True)
    found = problems(case, lib, gradviz.debug.doctor(loss, seed=seed, **case.options))
    assert not found, "\n".join(found)


# ---- a loss built only from gradients (a gradient penalty), on a torch graph ---------------

def _torch_penalty(name, capture=True):
    """The penalty-only loss of test_doctor_seeded_hints with the torch Silu Functions of
    test_doctor_seeded_both_libraries."""
    import test_doctor_seeded_both_libraries as both_libraries

    T = real_torch
    x = T.tensor(np.random.default_rng(0).standard_normal(6), requires_grad=True)
    w = T.tensor(np.random.default_rng(1).standard_normal(6))
    fn = getattr(both_libraries.FAMILIES["torch"], name)
    with gradviz.debug.capture() if capture else contextlib.nullcontext():
        task = (fn.apply(x) * w).sum()
        (gx,) = T.autograd.grad(task, x, create_graph=True)
        penalty = (gx * gx).sum()
    return task, penalty


@pytest.mark.parametrize("name", ["Silu", "SiluDetachedSigmoid"])
def test_torch_penalty_only_loss_names_the_custom_function_behind_it(name):
    task, penalty = _torch_penalty(name)
    report = gradviz.debug.doctor(penalty)
    assert not report.checked and not report.findings
    text = str(report)
    assert f"{name}Backward was used in building this graph's backward" in text, text
    assert "not in the loss's graph" in text and "double_backward=True" in text, text
    full = gradviz.debug.doctor(task + penalty, double_backward=True)
    assert [f.kind for f in full.findings] == (
        [] if name == "Silu" else ["wrong_double_backward"]), str(full)
    assert not any("not in the loss's graph" in n for n in full.notes), str(full)


def test_torch_penalty_note_needs_capture_and_the_hooks_change_no_gradient():
    _, penalty = _torch_penalty("Silu", capture=False)
    assert not any("building this graph's backward" in n
                   for n in gradviz.debug.doctor(penalty).notes)
    # the hooks capture() puts on a torch custom node leave its gradients as they were
    grads = []
    for capture in (False, True):
        task, penalty = _torch_penalty("Silu", capture=capture)
        x = task.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0].variable
        grads.append(real_torch.autograd.grad(task + penalty, x)[0].numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


# ---- correct Functions that rely on what the engine does with a returned gradient -----------

@pytest.mark.parametrize("lib", LIBRARIES)
def test_bias_gradient_left_for_the_engine_to_sum_down_is_clean(lib):
    """A gradient in the output's broadcast shape is summed down to the input's by both
    engines (PyTorch's validate_outputs): not a bug, and the doctor says nothing."""
    T = LIB[lib]
    rng = np.random.default_rng(0)
    x, w, b = (T.tensor(rng.standard_normal(s), requires_grad=True) for s in ((4, 3), (3, 2), (2,)))
    with gradviz.debug.capture():
        loss = (FAMILIES[lib].AffineUnreduced.apply(x, w, b) ** 2).sum()
    report = gradviz.debug.doctor(loss)
    assert report.ok and not report.findings and report.checked, str(report)
    loss.backward()
    tx, tw, tb = (real_torch.tensor(t.detach().numpy(), requires_grad=True) for t in (x, w, b))
    ((tx @ tw + tb) ** 2).sum().backward()
    for got, want in zip((x, w, b), (tx, tw, tb)):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-12)
