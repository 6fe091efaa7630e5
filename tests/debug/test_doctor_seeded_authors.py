"""Seeded bugs for the gradient doctor as a course author or an outside tester would write them,
each with its correct twin, written once for both libraries and run on gradviz graphs and on
real PyTorch graphs (``doctor(torch_loss)``). Forms the other seeded files
(test_doctor_seeded*.py) do not have:

- the input used where the output was meant and the other way round (sqrt, log, a quotient);
- a sign error for negative inputs only (a signed square, soft-shrink's negative branch, with
  recorded inputs all positive: only the doctor's probe points reach it);
- a gradient reshaped where a transpose was meant (rectangular weights: no shape error), and
  a transposed gradient returned for a rectangular weight (both engines raise);
- broadcasting wrong in one argument only: one row taken instead of the sum; a column scale
  whose unsummed gradient the engine sums over the wrong dimension (square shapes);
- a float64 backward computed in float32: with a large offset, so that
  ``torch.autograd.gradcheck`` fails, and benign, so that it passes;
- non-tensor arguments: gradients shifted past an int ``dim``, a gradient for a bool flag, a
  flag that backward ignores;
- ``once_differentiable`` backwards through numpy; an intermediate saved instead of the
  input, and one modified in place after it was saved; ``mark_non_differentiable`` on a
  float output that the loss uses;
- several outputs: a third chunk's gradient dropped, chunks concatenated along the wrong
  dimension, a sort's descending flag ignored in backward;
- the torch 2 style (``setup_context``, ``vmap``/``generate_vmap_rule``) with the inputs
  unpacked in the wrong order or the input saved for the output;
- ``mark_dirty`` in-place clamp and relu whose masks are taken from the output;
- a forward that is wrong while its backward is right for it (not a gradient bug);
- second order only (``double_backward=True``): one factor detached, backward under
  ``no_grad``;
- state outside ``ctx``: a factor kept on the class (the second use overwrites the first's),
  a ``ctx`` attribute set on one branch of forward only.

For every case and library: the correct twin's gradients equal PyTorch's built-ins and the
doctor finds nothing in it; the seeded bug is real; the doctor names exactly the wrong
Function, the input and the kind, and the hint and phrases given.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
    once_differentiable = T.autograd.function.once_differentiable
    ns = {}

    def add(cls):
        ns[cls.__name__] = cls
        return cls

    # -- the input where the output was meant, and the other way round -----------------------
    @add
    class Sqrt(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.sqrt()
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * 0.5 / y

    @add
    class SqrtAtInput(Sqrt):
        """0.5 / x: the input where the output sqrt(x) was meant."""

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * 0.5 / x

    @add
    class Log(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.log()
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad / x

    @add
    class LogAtOutput(Log):
        """1 / log(x): the output where the input was meant."""

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad / y

    @add
    class Div(Function):
        @staticmethod
        def forward(ctx, x, y):
            z = x / y
            ctx.save_for_backward(y, z)
            return z

        @staticmethod
        def backward(ctx, grad):
            y, z = ctx.saved_tensors
            return grad / y, -grad * z / y

    @add
    class DivNumeratorForQuotient(Function):
        """-grad * x / y for the divisor's gradient: the input x where the output x / y was
        meant (off by a factor y)."""

        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x / y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad / y, -grad * x / y

    # -- a sign error for negative inputs only ---------------------------------------------
    @add
    class SignedSquare(Function):
        """x * |x|, whose derivative is 2 |x|."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x.abs()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x.abs()

    @add
    class SignedSquareDropsAbs(SignedSquare):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    @add
    class SoftShrink(Function):
        @staticmethod
        def forward(ctx, x, lam):
            ctx.save_for_backward(x)
            ctx.lam = lam
            return T.where(x > lam, x - lam, T.where(x < -lam, x + lam, T.zeros_like(x)))

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x.abs() > ctx.lam).to(grad.dtype), None

    @add
    class SoftShrinkNegativeBranchFlipped(SoftShrink):
        """-1 below -lam: wrong for negative inputs only (the recorded ones are positive)."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            slope = (x > ctx.lam).to(grad.dtype) - (x < -ctx.lam).to(grad.dtype)
            return grad * slope, None

    # -- matmul gradients of rectangular matrices -------------------------------------------
    @add
    class Linear(Function):
        """x @ w.T for x [N, I] and w [O, I]."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x @ w.t()

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w, grad.t() @ x

    @add
    class LinearReshapesForTranspose(Linear):
        """x.T @ grad is [I, O]; reshaped to w's [O, I] instead of transposed: no error."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w, (x.t() @ grad).reshape(w.shape)

    @add
    class LinearReturnsTransposedWeightGrad(Linear):
        """x.T @ grad, [I, O] for a weight [O, I]: both engines refuse the shape."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad @ w, x.t() @ grad

    # -- broadcasting, wrong in one argument only -------------------------------------------
    @add
    class OuterAdd(Function):
        """a [N, 1] + b [1, M]."""

        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad.sum(1, keepdim=True), grad.sum(0, keepdim=True)

    @add
    class OuterAddTakesFirstRow(OuterAdd):
        """b's gradient is the first row of grad, not its sum over the rows."""

        @staticmethod
        def backward(ctx, grad):
            return grad.sum(1, keepdim=True), grad[:1]

    @add
    class ColumnScale(Function):
        """x [C, N] * s[:, None] for s [C]."""

        @staticmethod
        def forward(ctx, x, s):
            ctx.save_for_backward(x, s)
            return x * s[:, None]

        @staticmethod
        def backward(ctx, grad):
            x, s = ctx.saved_tensors
            return grad * s[:, None], (grad * x).sum(1)

    @add
    class ColumnScaleUnsummed(ColumnScale):
        """(grad * x) [C, N] returned for s [C]: the engine sums it down the trailing
        alignment, over dim 0, which runs when C == N and is wrong."""

        @staticmethod
        def backward(ctx, grad):
            x, s = ctx.saved_tensors
            return grad * s[:, None], grad * x

    # -- float64 backward computed in float32 -----------------------------------------------
    @add
    class Variance(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.var()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * (x - x.mean()) / (x.numel() - 1)

    @add
    class VarianceInFloat32(Variance):
        """x - mean in float32 with |x| ~ 1e5: about 1e-3 relative error, which gradcheck's
        tolerance rejects."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            x32 = x.float()
            return (grad.float() * 2 * (x32 - x32.mean()) / (x.numel() - 1)).double()

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
    class TanhInFloat32(Tanh):
        """Single precision, cast back: 1e-7 relative error, within gradcheck's tolerance."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            y32 = y.float()
            return (grad.float() * (1 - y32 * y32)).double()

    # -- non-tensor arguments ---------------------------------------------------------------
    @add
    class WeightedSum(Function):
        """(x * w).sum(dim) for x [N, C], a plain int dim and w broadcast along it."""

        @staticmethod
        def forward(ctx, x, dim, w):
            ctx.save_for_backward(x, w)
            ctx.dim = dim
            return (x * w).sum(dim)

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            g = grad.unsqueeze(ctx.dim)
            return g * w, None, (g * x).sum(0)

    @add
    class WeightedSumShiftedPastDim(WeightedSum):
        """(gx, gw, None): w's gradient in the int dim's place."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            g = grad.unsqueeze(ctx.dim)
            return g * w, (g * x).sum(0), None

    @add
    class WeightedSumForgetsNone(WeightedSum):
        """(gx, gw): two gradients for three forward arguments (the int dim's None left
        out)."""

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            g = grad.unsqueeze(ctx.dim)
            return g * w, (g * x).sum(0)

    @add
    class Normalize(Function):
        """x / (|x| + eps) along dim 1; a bool flag ``check`` asks forward to refuse NaN."""

        @staticmethod
        def forward(ctx, x, eps, check):
            if check and bool(T.isnan(x).any()):
                raise ValueError("NaN in the input")
            n = (x * x).sum(1, keepdim=True).sqrt()
            ctx.save_for_backward(x, n)
            ctx.eps = eps
            return x / (n + eps)

        @staticmethod
        def backward(ctx, grad):
            x, n = ctx.saved_tensors
            d = n + ctx.eps
            return grad / d - x * (grad * x).sum(1, keepdim=True) / (d * d * n), None, None

    @add
    class NormalizeGradForFlag(Normalize):
        """A zero gradient for the bool flag: the engines accept only None there."""

        @staticmethod
        def backward(ctx, grad):
            x, n = ctx.saved_tensors
            d = n + ctx.eps
            gx = grad / d - x * (grad * x).sum(1, keepdim=True) / (d * d * n)
            return gx, None, T.zeros(())

    @add
    class InvertedDropoutScale(Function):
        """x / (1 - p) in training, x in evaluation (the mask itself left out)."""

        @staticmethod
        def forward(ctx, x, p, training):
            ctx.scale = 1 / (1 - p) if training else 1.0
            return x * ctx.scale

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.scale, None, None

    @add
    class InvertedDropoutScaleIgnoresFlag(InvertedDropoutScale):
        """Rescales in backward also in evaluation mode."""

        @staticmethod
        def forward(ctx, x, p, training):
            ctx.p = p
            return x / (1 - p) if training else x * 1.0

        @staticmethod
        def backward(ctx, grad):
            return grad / (1 - ctx.p), None, None

    # -- once_differentiable, through numpy --------------------------------------------------
    @add
    class Diff(Function):
        """x[1:] - x[:-1], its backward in numpy."""

        @staticmethod
        def forward(ctx, x):
            ctx.dtype = x.dtype
            return x[1:] - x[:-1]

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            g = grad.numpy()
            out = np.zeros(g.size + 1)
            out[1:] += g
            out[:-1] -= g
            return T.tensor(out, dtype=ctx.dtype)

    @add
    class DiffShiftedByOne(Diff):
        """out[2:] += g[:-1] where out[1:] += g was meant: the positive part one place late."""

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            g = grad.numpy()
            out = np.zeros(g.size + 1)
            out[2:] += g[:-1]
            out[:-1] -= g
            return T.tensor(out, dtype=ctx.dtype)

    # -- what is saved ------------------------------------------------------------------------
    @add
    class Softplus(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp().log1p()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.sigmoid(x)

    @add
    class SoftplusSavesExp(Softplus):
        """Saves the intermediate exp(x) and takes it for x in backward."""

        @staticmethod
        def forward(ctx, x):
            e = x.exp()
            ctx.save_for_backward(e)
            return e.log1p()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.sigmoid(x)

    @add
    class TwoTanh(Function):
        """2 tanh(x), saving the intermediate tanh(x)."""

        @staticmethod
        def forward(ctx, x):
            t = x.tanh()
            ctx.save_for_backward(t)
            return 2 * t

        @staticmethod
        def backward(ctx, grad):
            (t,) = ctx.saved_tensors
            return grad * 2 * (1 - t * t)

    @add
    class TwoTanhScalesSavedInPlace(TwoTanh):
        """Saves tanh(x), then doubles it in place and returns it: backward sees 2 tanh(x)."""

        @staticmethod
        def forward(ctx, x):
            t = x.tanh()
            ctx.save_for_backward(t)
            t.mul_(2)
            return t

    # -- several outputs ----------------------------------------------------------------------
    @add
    class MinMax(Function):
        """The smallest and largest entry of each row."""

        @staticmethod
        def forward(ctx, x):
            lo, ilo = x.min(1)
            hi, ihi = x.max(1)
            ctx.save_for_backward(ilo, ihi)
            ctx.shape = x.shape
            return lo, hi

        @staticmethod
        def backward(ctx, glo, ghi):
            ilo, ihi = ctx.saved_tensors
            out = T.zeros(ctx.shape, dtype=glo.dtype)
            out.scatter_add_(1, ilo[:, None], glo[:, None])
            out.scatter_add_(1, ihi[:, None], ghi[:, None])
            return out

    @add
    class MinMaxMarksMaxNonDifferentiable(MinMax):
        @staticmethod
        def forward(ctx, x):
            lo, ilo = x.min(1)
            hi, ihi = x.max(1)
            ctx.save_for_backward(ilo, ihi)
            ctx.shape = x.shape
            ctx.mark_non_differentiable(hi)
            return lo, hi

    @add
    class Split3(Function):
        """x [N, 6] into three [N, 2] chunks (copies)."""

        @staticmethod
        def forward(ctx, x):
            return x[:, :2].clone(), x[:, 2:4].clone(), x[:, 4:].clone()

        @staticmethod
        def backward(ctx, g0, g1, g2):
            return T.cat([g0, g1, g2], 1)

    @add
    class Split3DropsLast(Split3):
        @staticmethod
        def backward(ctx, g0, g1, g2):
            return T.cat([g0, g1, T.zeros_like(g2)], 1)

    @add
    class Split3CatsRows(Split3):
        """Concatenated along dim 0: [3N, 2] for [N, 6], which both engines refuse."""

        @staticmethod
        def backward(ctx, g0, g1, g2):
            return T.cat([g0, g1, g2], 0)

    @add
    class Sort(Function):
        @staticmethod
        def forward(ctx, x, descending):
            values, indices = x.sort(-1, descending=descending)
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, grad, _):
            (indices,) = ctx.saved_tensors
            return T.zeros_like(grad).scatter(-1, indices, grad), None

    @add
    class SortIgnoresDescending(Sort):
        """Recomputes the order in backward, ascending whatever forward was asked."""

        @staticmethod
        def forward(ctx, x, descending):
            values, indices = x.sort(-1, descending=descending)
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(x)
            return values, indices

        @staticmethod
        def backward(ctx, grad, _):
            (x,) = ctx.saved_tensors
            return T.zeros_like(grad).scatter(-1, x.argsort(-1), grad), None

    # -- the torch 2 style: setup_context, vmap -----------------------------------------------
    @add
    class ScaledExp(Function):
        """exp(x) * w, setup_context style."""

        @staticmethod
        def forward(x, w):
            return x.exp() * w

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w = inputs
            ctx.save_for_backward(x, w, output)

        @staticmethod
        def backward(ctx, grad):
            x, w, y = ctx.saved_tensors
            return grad * y, grad * x.exp()

    @add
    class ScaledExpUnpacksSwapped(ScaledExp):
        @staticmethod
        def setup_context(ctx, inputs, output):
            w, x = inputs
            ctx.save_for_backward(x, w, output)

    @add
    class Cube(Function):
        """x ** 3 with a vmap rule."""

        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    @add
    class CubeSavesOutputAsInput(Function):
        """Saves the output and takes it for x: 3 y^2 instead of 3 x^2."""

        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

        @staticmethod
        def vmap(info, in_dims, x):
            return CubeSavesOutputAsInput.apply(x), in_dims[0]

    # -- in place, mark_dirty -----------------------------------------------------------------
    @add
    class ClampInPlace(Function):
        @staticmethod
        def forward(ctx, x, lo, hi):
            x.clamp_(lo, hi)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            ctx.bounds = (lo, hi)
            return x

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            lo, hi = ctx.bounds
            return grad * ((y > lo) & (y < hi)).to(grad.dtype), None, None

    @add
    class ClampInPlaceInclusiveMask(ClampInPlace):
        """>= and <= on the output: every clamped entry equals a bound and passes."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            lo, hi = ctx.bounds
            return grad * ((y >= lo) & (y <= hi)).to(grad.dtype), None, None

    @add
    class ReluInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.clamp_(min=0)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * (y > 0).to(grad.dtype)

    @add
    class ReluInPlaceMaskAtLeastZero(ReluInPlace):
        """y >= 0 holds everywhere once y = relu(x)."""

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * (y >= 0).to(grad.dtype)

    # -- a wrong forward with a backward right for it -----------------------------------------
    @add
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    @add
    class SquareForwardOffByOne(Square):
        """x * x + 1: a wrong value, the derivative unchanged."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x + 1

    @add
    class SquareForwardInFloat32(Square):
        """The forward in single precision, cast back; backward exact."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            x32 = x.float()
            return (x32 * x32).to(x.dtype)

    # -- second order only ----------------------------------------------------------------------
    @add
    class Mul(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y, grad * x

    @add
    class MulDetachesOther(Mul):
        """grad * y.detach(): right once, d(grad_x)/dy lost under create_graph."""

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y.detach(), grad * x

    @add
    class SoftplusBackwardNoGrad(Softplus):
        """Backward under no_grad: no graph for create_graph=True to differentiate."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            with T.no_grad():
                return grad * T.sigmoid(x)

    # -- state outside ctx ----------------------------------------------------------------------
    @add
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None

    @add
    class ScaleOnTheClass(Function):
        """The factor kept on the class: a later call overwrites the earlier one's."""

        factor = 1.0

        @staticmethod
        def forward(ctx, x, factor):
            ScaleOnTheClass.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, grad):
            return grad * ScaleOnTheClass.factor, None

    @add
    class PositivePart(Function):
        """x where the row sum is positive, else 0.5 x."""

        @staticmethod
        def forward(ctx, x):
            ctx.slope = 1.0 if float(x.sum()) > 0 else 0.5
            return x * ctx.slope

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.slope

    @add
    class PositivePartSlopeOnOneBranch(PositivePart):
        """ctx.slope is set only on the positive branch: backward raises on the other."""

        @staticmethod
        def forward(ctx, x):
            if float(x.sum()) > 0:
                ctx.slope = 1.0
                return x * 1.0
            return x * 0.5

    # -- a reduction of grad_output --------------------------------------------------------------
    @add
    class SumsGrad(Square):
        """grad.sum() * 2x: right only when every upstream gradient is equal (loss = y.sum())."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad.sum() * 2 * x / grad.numel()

    @add
    class SafeLog(Function):
        """log(x) where x > 0, else 0 (inputs from a relu: exact zeros)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return T.where(x > 0, x.clamp(min=1e-300).log(), T.zeros_like(x))

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * T.where(x > 0, 1 / x.clamp(min=1e-300), T.zeros_like(x))

    @add
    class SafeLogMasksAfterDividing(SafeLog):
        """grad / x * (x > 0): 0 * inf = NaN at the zeros."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad / x * (x > 0).to(grad.dtype)

    return SimpleNamespace(**ns)


FAMILIES = {"gradviz": family(gradviz), "torch": family(real_torch)}
LIB = {"gradviz": gradviz, "torch": real_torch}


@dataclass
class Case:
    """One seeded bug (as ``test_doctor_seeded_contract_corners.Case``): ``program(ns, T,
    *tensors)`` builds the loss with the family's Functions (``buggy`` maps the correct name to
    the buggy one), ``reference(T, *tensors)`` the same loss with torch's built-ins; the doctor
    must report exactly ``expect`` (``(kind, input_index)`` of the errors), blaming only
    ``blamed`` (default: the buggy Functions), with ``hint`` in a finding's hint and
    ``phrases`` in the report. ``changes_gradient`` is False for a bug that is not in the
    gradient (a wrong forward whose backward is right for it)."""

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
    # the bug shows only at other inputs than these (``test_seeded_bug_is_real`` uses them)
    shows_at: Callable | None = None
    # an in-place (mark_dirty) Function keeps no inputs outside capture() (docs/doctor.md)
    needs_capture: bool = False


def _pos(*shape):
    return uniform(0.5, 2.0, *shape)


def _relu_normal(*shape):
    return lambda rng: np.maximum(rng.standard_normal(shape), 0.0)


def _offset(*shape, offset):
    return lambda rng: rng.standard_normal(shape) + offset


def _weighted(f):
    """``(f(ns, T, x) * w).sum()``: a random upstream gradient."""
    return lambda ns, T, x, w: (f(ns, T, x) * w).sum()


def _ref_weighted(f):
    return lambda T, x, w: (f(T, x) * w).sum()


CASES = [
    # the input where the output was meant, and the other way round
    Case("sqrt's derivative at the input instead of the output", {"Sqrt": "SqrtAtInput"},
         _weighted(lambda ns, T, x: ns.Sqrt.apply(x)), _ref_weighted(lambda T, x: x.sqrt()),
         arrays((_pos(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}),
    Case("log's derivative at the output instead of the input", {"Log": "LogAtOutput"},
         _weighted(lambda ns, T, x: ns.Log.apply(x)), _ref_weighted(lambda T, x: x.log()),
         arrays((uniform(1.5, 4.0, 6), True), (normal(6), False)),
         {("wrong_gradient", 0)}),
    Case("divisor's gradient from the numerator instead of the quotient",
         {"Div": "DivNumeratorForQuotient"},
         lambda ns, T, x, y, w: (ns.Div.apply(x, y) * w).sum(),
         lambda T, x, y, w: (x / y * w).sum(),
         arrays((normal(5), True), (_pos(5), True), (normal(5), False)),
         {("wrong_gradient", 1)}),
    # a sign error for negative inputs only
    Case("signed square's derivative loses the abs", {"SignedSquare": "SignedSquareDropsAbs"},
         _weighted(lambda ns, T, x: ns.SignedSquare.apply(x)),
         _ref_weighted(lambda T, x: x * x.abs()),
         arrays((normal(8), True), (normal(8), False)),
         {("wrong_gradient", 0)}),
    Case("soft-shrink's negative branch flipped, inputs all positive",
         {"SoftShrink": "SoftShrinkNegativeBranchFlipped"},
         _weighted(lambda ns, T, x: ns.SoftShrink.apply(x, 0.5)),
         _ref_weighted(lambda T, x: real_torch.nn.functional.softshrink(x, 0.5)),
         arrays((uniform(0.8, 3.0, 8), True), (normal(8), False)),
         {("wrong_gradient", 0)}, phrases=("scaled by -1",),
         shows_at=arrays((uniform(-3.0, -0.8, 8), True), (normal(8), False))),
    # matmul gradients of rectangular matrices
    Case("weight gradient reshaped where a transpose was meant",
         {"Linear": "LinearReshapesForTranspose"},
         lambda ns, T, x, w, v: (ns.Linear.apply(x, w) * v).sum(),
         lambda T, x, w, v: (x @ w.t() * v).sum(),
         arrays((normal(5, 3), True), (normal(4, 3), True), (normal(5, 4), False)),
         {("wrong_gradient", 1)}),
    Case("weight gradient returned transposed (rectangular: a shape error)",
         {"Linear": "LinearReturnsTransposedWeightGrad"},
         lambda ns, T, x, w, v: (ns.Linear.apply(x, w) * v).sum(),
         lambda T, x, w, v: (x @ w.t() * v).sum(),
         arrays((normal(5, 3), True), (normal(4, 3), True), (normal(5, 4), False)),
         {("backward_error", 1)}, hint="the gradient looks transposed"),
    # broadcasting, wrong in one argument only
    Case("broadcast row's gradient is one row, not the sum", {"OuterAdd": "OuterAddTakesFirstRow"},
         lambda ns, T, a, b, w: (ns.OuterAdd.apply(a, b) * w).sum(),
         lambda T, a, b, w: ((a + b) * w).sum(),
         arrays((normal(4, 1), True), (normal(1, 5), True), (normal(4, 5), False)),
         {("wrong_gradient", 1)}),
    Case("column scale's gradient left unsummed, summed by the engine over the wrong dim",
         {"ColumnScale": "ColumnScaleUnsummed"},
         lambda ns, T, x, s, w: (ns.ColumnScale.apply(x, s) * w).sum(),
         lambda T, x, s, w: (x * s[:, None] * w).sum(),
         arrays((normal(4, 4), True), (normal(4), True), (normal(4, 4), False)),
         {("coerced_gradient", 1)}),
    # float64 backward computed in float32
    Case("variance's backward in float32 at |x| ~ 1e5 (gradcheck fails)",
         {"Variance": "VarianceInFloat32"},
         lambda ns, T, x: ns.Variance.apply(x) * 3.0,
         lambda T, x: x.var() * 3.0,
         arrays((_offset(6, offset=1e5), True)),
         {("wrong_gradient", 0)}),
    Case("tanh's backward in float32 (gradcheck passes)", {"Tanh": "TanhInFloat32"},
         _weighted(lambda ns, T, x: ns.Tanh.apply(x)), _ref_weighted(lambda T, x: x.tanh()),
         arrays((normal(6), True), (normal(6), False)),
         set()),
    # non-tensor arguments
    Case("weight gradient returned in the int dim's place",
         {"WeightedSum": "WeightedSumShiftedPastDim"},
         lambda ns, T, x, w, v: (ns.WeightedSum.apply(x, 1, w) * v).sum(),
         lambda T, x, w, v: ((x * w).sum(1) * v).sum(),
         arrays((normal(4, 3), True), (normal(3), True), (normal(4), False)),
         {("backward_error", 1)}),
    Case("two gradients returned for three arguments (the int's None left out)",
         {"WeightedSum": "WeightedSumForgetsNone"},
         lambda ns, T, x, w, v: (ns.WeightedSum.apply(x, 1, w) * v).sum(),
         lambda T, x, w, v: ((x * w).sum(1) * v).sum(),
         arrays((normal(4, 3), True), (normal(3), True), (normal(4), False)),
         {("backward_error", None)}, hint="one value per forward argument"),
    Case("a gradient returned for a bool flag", {"Normalize": "NormalizeGradForFlag"},
         lambda ns, T, x, w: (ns.Normalize.apply(x, 1e-3, True) * w).sum(),
         lambda T, x, w: (x / (x.norm(dim=1, keepdim=True) + 1e-3) * w).sum(),
         arrays((normal(3, 4), True), (normal(3, 4), False)),
         {("backward_error", 2)}, hint="return None in its place"),
    Case("evaluation flag ignored in backward",
         {"InvertedDropoutScale": "InvertedDropoutScaleIgnoresFlag"},
         lambda ns, T, x, w: (ns.InvertedDropoutScale.apply(x, 0.2, False) * w).sum(),
         lambda T, x, w: (x * w).sum(),
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}, hint="analytic = 1.25 x numeric"),
    # once_differentiable through numpy
    Case("numpy backward shifted by one place", {"Diff": "DiffShiftedByOne"},
         _weighted(lambda ns, T, x: ns.Diff.apply(x)), _ref_weighted(lambda T, x: x.diff()),
         arrays((normal(6), True), (normal(5), False)),
         {("wrong_gradient", 0)}),
    # what is saved
    Case("saved intermediate exp(x) taken for x", {"Softplus": "SoftplusSavesExp"},
         _weighted(lambda ns, T, x: ns.Softplus.apply(x)),
         _ref_weighted(lambda T, x: real_torch.nn.functional.softplus(x)),
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}),
    Case("saved intermediate doubled in place before forward returns it",
         {"TwoTanh": "TwoTanhScalesSavedInPlace"},
         _weighted(lambda ns, T, x: ns.TwoTanh.apply(x)),
         _ref_weighted(lambda T, x: 2 * x.tanh()),
         arrays((normal(6), True), (normal(6), False)),
         {("mutated_saved", 0)}, phrases=("modified saved tensor 0 (its output 0) in place",)),
    # several outputs
    Case("a used float output marked non-differentiable",
         {"MinMax": "MinMaxMarksMaxNonDifferentiable"},
         lambda ns, T, x, w: (lambda lo, hi: (lo * w).sum() + (hi * hi).sum())(*ns.MinMax.apply(x)),
         lambda T, x, w: (x.min(1)[0] * w).sum() + (x.max(1)[0] ** 2).sum(),
         arrays((normal(4, 5), True), (normal(4), False)),
         set(), phrases=("marked non-differentiable",)),
    Case("third chunk's gradient dropped", {"Split3": "Split3DropsLast"},
         lambda ns, T, x, w: sum((c * w).sum() for c in ns.Split3.apply(x)),
         lambda T, x, w: sum((c * w).sum() for c in x.split(2, 1)),
         arrays((normal(3, 6), True), (normal(3, 2), False)),
         {("wrong_gradient", 0)}, hint="backward ignores the gradient of output 2"),
    Case("chunks' gradients concatenated along the wrong dim", {"Split3": "Split3CatsRows"},
         lambda ns, T, x, w: sum((c * w).sum() for c in ns.Split3.apply(x)),
         lambda T, x, w: sum((c * w).sum() for c in x.split(2, 1)),
         arrays((normal(3, 6), True), (normal(3, 2), False)),
         {("backward_error", 0)}),
    Case("sort's descending flag ignored in backward", {"Sort": "SortIgnoresDescending"},
         lambda ns, T, x, w: (ns.Sort.apply(x, True)[0] * w).sum(),
         lambda T, x, w: (x.sort(-1, descending=True)[0] * w).sum(),
         arrays((normal(3, 5), True), (normal(3, 5), False)),
         {("wrong_gradient", 0)}),
    # the torch 2 style
    Case("setup_context unpacks the inputs in the wrong order",
         {"ScaledExp": "ScaledExpUnpacksSwapped"},
         lambda ns, T, x, w, v: (ns.ScaledExp.apply(x, w) * v).sum(),
         lambda T, x, w, v: (x.exp() * w * v).sum(),
         arrays((normal(5), True), (normal(5), True), (normal(5), False)),
         {("wrong_gradient", 1)}, hint="with inputs 0 and 1 exchanged"),
    Case("setup_context saves the output for the input (with a vmap rule)",
         {"Cube": "CubeSavesOutputAsInput"},
         _weighted(lambda ns, T, x: ns.Cube.apply(x)), _ref_weighted(lambda T, x: x ** 3),
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}),
    # in place, mark_dirty
    Case("in-place clamp's mask from the output with inclusive bounds",
         {"ClampInPlace": "ClampInPlaceInclusiveMask"},
         lambda ns, T, x, w: (ns.ClampInPlace.apply(x * 1.0, -0.5, 0.5) * w).sum(),
         lambda T, x, w: (x.clamp(-0.5, 0.5) * w).sum(),
         arrays((normal(8), True), (normal(8), False)),
         {("wrong_gradient", 0)}, needs_capture=True),
    Case("in-place relu's mask y >= 0 passes everything",
         {"ReluInPlace": "ReluInPlaceMaskAtLeastZero"},
         lambda ns, T, x, w: (ns.ReluInPlace.apply(x * 1.0) * w).sum(),
         lambda T, x, w: (x.relu() * w).sum(),
         arrays((normal(8), True), (normal(8), False)),
         {("wrong_gradient", 0)}, needs_capture=True),
    # a wrong forward with a backward right for it: not a gradient bug
    Case("forward off by a constant, backward right", {"Square": "SquareForwardOffByOne"},
         _weighted(lambda ns, T, x: ns.Square.apply(x)), _ref_weighted(lambda T, x: x * x),
         arrays((normal(6), True), (normal(6), False)),
         set(), changes_gradient=False),
    Case("forward in float32, backward right", {"Square": "SquareForwardInFloat32"},
         _weighted(lambda ns, T, x: ns.Square.apply(x)), _ref_weighted(lambda T, x: x * x),
         arrays((normal(6, scale=3.0), True), (normal(6), False)),
         set(), changes_gradient=False),
    # second order only
    Case("one factor detached in backward (second order)", {"Mul": "MulDetachesOther"},
         lambda ns, T, x, y, w: (ns.Mul.apply(x, y) * w).sum(),
         lambda T, x, y, w: (x * y * w).sum(),
         arrays((normal(5), True), (normal(5), True), (normal(5), False)),
         {("wrong_double_backward", 1)}, changes_gradient=False,
         options={"double_backward": True}),
    Case("backward under no_grad (second order)", {"Softplus": "SoftplusBackwardNoGrad"},
         _weighted(lambda ns, T, x: ns.Softplus.apply(x)),
         _ref_weighted(lambda T, x: real_torch.nn.functional.softplus(x)),
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_double_backward", 0)}, changes_gradient=False,
         options={"double_backward": True}),
    # state outside ctx
    Case("factor kept on the class, overwritten by a second use", {"Scale": "ScaleOnTheClass"},
         lambda ns, T, x, w: (ns.Scale.apply(x, 2.0) * w).sum() + ns.Scale.apply(x, 3.0).sum(),
         lambda T, x, w: (x * 2.0 * w).sum() + (x * 3.0).sum(),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 0)}),
    Case("ctx attribute set on one branch of forward only",
         {"PositivePart": "PositivePartSlopeOnOneBranch"},
         _weighted(lambda ns, T, x: ns.PositivePart.apply(x)),
         _ref_weighted(lambda T, x: x * 1.0),
         arrays((_pos(5), True), (normal(5), False)),
         {("backward_error", None)}, changes_gradient=False),
    # a reduction of grad_output; a mask after a division
    Case("grad_output averaged in backward", {"Square": "SumsGrad"},
         _weighted(lambda ns, T, x: ns.Square.apply(x)), _ref_weighted(lambda T, x: x * x),
         arrays((normal(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}),
    Case("mask applied after dividing by zero", {"SafeLog": "SafeLogMasksAfterDividing"},
         _weighted(lambda ns, T, x: ns.SafeLog.apply(x)),
         _ref_weighted(lambda T, x: real_torch.where(x > 0, x.clamp(min=1e-300).log(), 0.0)),
         arrays((_relu_normal(8), True), (normal(8), False)),
         {("nonfinite", 0)}),
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


def _unrecorded(report):
    """The report skipped a torch node whose plain arguments PyTorch does not keep."""
    return any("PyTorch keeps no record" in reason for _, reason in report.skipped)


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
    if case.expect:
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
    for capture in (True, False) if seed == 0 and not case.needs_capture else (True,):
        loss, _ = _loss(case, lib, seed, buggy=False, capture=capture)
        report = gradviz.debug.doctor(loss, seed=seed, **case.options)
        assert report.ok and not report.findings, str(report)
        if capture or not _unrecorded(report):
            assert report.checked and not report.skipped, str(report)


@pytest.mark.parametrize("case, seed, lib", [r for r in _runs() if r.values[1] == 0])
def test_seeded_bug_is_real(case, seed, lib):
    if case.shows_at is not None:
        case = dataclasses.replace(case, inputs=case.shows_at)
    try:
        got = _grads(*_loss(case, lib, seed, buggy=True, capture=False))
    except (RuntimeError, TypeError, AttributeError) as exc:  # the engine refuses, or backward
        assert {kind for kind, _ in case.expect} == {"backward_error"}, repr(exc)
        return
    right = _grads(*_loss(case, lib, seed, buggy=False, capture=False))
    same = all(np.allclose(g, r, rtol=1e-12, atol=1e-14, equal_nan=False)
               for g, r in zip(got, right))
    assert same != case.changes_gradient, f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("case, seed, lib", _runs())
def test_seeded_bug_is_diagnosed(case, seed, lib):
    for capture in (True, False) if seed == 0 and not case.needs_capture else (True,):
        loss, _ = _loss(case, lib, seed, buggy=True, capture=capture)
        report = gradviz.debug.doctor(loss, seed=seed, **case.options)
        if not capture and _unrecorded(report):
            continue  # a torch graph keeps no plain arguments outside capture() (docs/doctor.md)
        found = problems(case, lib, report)
        assert not found, f"capture={capture}\n" + "\n".join(found)


# ---- what the cases above rest on ------------------------------------------------------------

@pytest.mark.parametrize("name, offset, passes", [("VarianceInFloat32", 1e5, False),
                                                  ("TanhInFloat32", 0.0, True)])
def test_float32_backwards_are_judged_as_torch_gradcheck_judges_them(name, offset, passes):
    """The two float32 backwards: gradcheck rejects the one the doctor reports and accepts the
    one it leaves alone."""
    fn = getattr(FAMILIES["torch"], name)
    for seed in (0, 1):
        x = real_torch.tensor(np.random.default_rng(seed).standard_normal(6) + offset,
                              requires_grad=True)
        assert real_torch.autograd.gradcheck(fn.apply, (x,), raise_exception=False) is passes


def _refuses_negatives(T):
    class Sqrt(T.autograd.Function):
        """A backward that refuses negative inputs (its forward gives NaN there, but runs)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.abs().sqrt()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            if bool((x < 0).any()):
                raise ValueError("Sqrt: negative input")
            return grad * 0.5 / x.sqrt()

    return Sqrt


@pytest.mark.parametrize("lib", LIBRARIES)
def test_a_backward_refusing_other_inputs_is_a_warning(lib):
    """Note [Where the doctor evaluates]: at a probe point a backward that raises anything but
    an AttributeError or NameError may refuse inputs it was not meant for: a warning."""
    T = LIB[lib]
    x = T.tensor(np.random.default_rng(0).uniform(0.5, 2.0, 5), requires_grad=True)
    loss = _refuses_negatives(T).apply(x).sum()
    report = gradviz.debug.doctor(loss)
    assert report.ok, str(report)
    (finding,) = report.findings
    assert finding.kind == "backward_error" and finding.severity == "warning", str(report)
    assert "scaled by -1" in finding.message and "ValueError" in finding.message


def _mask_and_stat(T):
    class ReluWithMask(T.autograd.Function):
        """relu(x), its mask as floats and the batch mean (a statistic for a running average),
        both marked non-differentiable."""

        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).to(x.dtype)
            ctx.save_for_backward(mask)
            mean = x.mean(0)
            ctx.mark_non_differentiable(mask, mean)
            return x * mask, mask, mean

        @staticmethod
        def backward(ctx, grad, _mask, _mean):
            (mask,) = ctx.saved_tensors
            return grad * mask

    return ReluWithMask


@pytest.mark.parametrize("lib", LIBRARIES)
def test_floating_outputs_marked_non_differentiable(lib):
    """A float mask marked non-differentiable does not move with a small change of the input
    and is not reported; a statistic that does is a warning (it may be meant)."""
    T = LIB[lib]
    x = T.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    y, mask, mean = _mask_and_stat(T).apply(x)
    report = gradviz.debug.doctor((y * y).sum())
    assert report.ok, str(report)
    (finding,) = report.findings
    assert finding.severity == "warning" and finding.details["non_differentiable_output"] == 2
    assert "output 2 is marked non-differentiable" in finding.message, str(report)


def _filled_after_saving(T):
    class Square(T.autograd.Function):
        """Saves a buffer, then fills it: backward is written for its final values."""

        @staticmethod
        def forward(ctx, x):
            twice = T.zeros_like(x)
            ctx.save_for_backward(twice)
            twice.copy_(2 * x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (twice,) = ctx.saved_tensors
            return grad * twice

    return Square


@pytest.mark.parametrize("lib", LIBRARIES)
def test_a_buffer_filled_after_saving_for_a_right_backward_is_clean(lib):
    T = LIB[lib]
    x = T.tensor(np.random.default_rng(0).standard_normal(5), requires_grad=True)
    report = gradviz.debug.doctor((_filled_after_saving(T).apply(x) * x).sum())
    assert report.ok and not report.findings and report.checked, str(report)
