"""The gradient doctor on real PyTorch graphs (``gradviz.debug.doctor(torch_loss)``).

The seeded bugs of ``test_doctor_seeded.py``, written as ``torch.autograd.Function`` s (both
``forward(ctx, ...)`` and ``setup_context`` styles) and run with real PyTorch. For every case:

- the correct twin's gradients equal PyTorch's built-ins for the same computation, and the
  doctor finds nothing in it (no false alarms), with and without ``gradviz.debug.capture()``;
- the seeded bug is real (torch's own backward gives other gradients, or raises);
- the doctor names the buggy Function, the input slot, the kind of problem, the worst entries
  and, where the bug has a recognisable shape, its likely cause, inside ``capture()`` and,
  where torch's graph still holds every forward argument, without it (else the node is
  listed as skipped, with a reason that says to use capture);
- the user's graph is left as it was: no ``.grad`` written, the saved tensors kept.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import torch

import gradviz

Function = torch.autograd.Function
once_differentiable = torch.autograd.function.once_differentiable
SEEDS = (0, 1)


# ---- the Functions: each correct one, then its buggy twin ---------------------------------

class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        y = 1 / (1 + (-x).exp())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


class SigmoidSignFlipped(Sigmoid):
    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (y - 1)


class Square(Function):
    """setup_context style."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class SquareMissingTwo(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return x * grad


class SquareDerivativeOnly(Square):
    """Returns the local derivative and forgets to multiply by grad_output."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y


class ExpUsesInput(Exp):
    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * x


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * (1 - y * y)


class TanhUsesInput(Tanh):
    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * (1 - x * x)


class MatMul(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


class MatMulWeightGradTransposed(MatMul):
    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), grad.t() @ x


class Mul(Function):
    """setup_context style."""

    @staticmethod
    def forward(a, b):
        return a * b

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class MulSwapped(Mul):
    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * a, grad * b


class AddColumnBias(Function):
    """x [n, k] + b [n, 1]."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(1, keepdim=True)


class AddColumnBiasDropsDim(AddColumnBias):
    """grad.sum(1) has shape [n], which [n, 1] cannot be broadcast to: torch raises."""

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(1)


class Gather(Function):
    """x[index] * scale, with an index tensor (no gradient) and a number."""

    @staticmethod
    def forward(ctx, x, index, scale):
        ctx.save_for_backward(index)
        ctx.size = x.shape[0]
        ctx.scale = scale
        return x[index] * scale

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        dx = torch.zeros(ctx.size, dtype=grad.dtype).index_add(0, index, grad * ctx.scale)
        return dx, None, None


class GatherOffByOne(Gather):
    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        shifted = (index + 1).clamp(max=ctx.size - 1)
        dx = torch.zeros(ctx.size, dtype=grad.dtype).index_add(0, shifted, grad * ctx.scale)
        return dx, None, None


class Take(Function):
    """x[index] with the index tensor only (every argument a tensor)."""

    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        ctx.size = x.shape[0]
        return x[index]

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return torch.zeros(ctx.size, dtype=grad.dtype).index_add(0, index, grad), None


class TakeOffByOne(Take):
    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        shifted = (index + 1).clamp(max=ctx.size - 1)
        return torch.zeros(ctx.size, dtype=grad.dtype).index_add(0, shifted, grad), None


class Scale(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class ScaleInPlace(Scale):
    @staticmethod
    def backward(ctx, grad):
        grad.mul_(3)
        return grad


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


class CubeMutatesSaved(Cube):
    """Saves x, then doubles it in place (no mark_dirty): backward sees the new values."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        y = x * x * x
        x.mul_(2)
        return y


class TripleInPlace(Function):
    """x *= 3 in place, marked dirty (returns x itself)."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(3)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class TripleInPlaceWrongFactor(TripleInPlace):
    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class Norm(Function):
    """||x|| over the last dim; at x = 0 the gradient is 0 (PyTorch's choice)."""

    @staticmethod
    def forward(ctx, x):
        n = (x * x).sum(-1, keepdim=True).sqrt()
        ctx.save_for_backward(x, n)
        return n

    @staticmethod
    def backward(ctx, grad):
        x, n = ctx.saved_tensors
        safe = torch.where(n == 0, torch.ones_like(n), n)
        return grad * torch.where(n == 0, torch.zeros_like(x), x / safe)


class NormNaNAtZero(Norm):
    @staticmethod
    def backward(ctx, grad):
        x, n = ctx.saved_tensors
        return grad * x / n


class SinCos(Function):
    """Two outputs: sin x and cos x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        return grad_sin * x.cos() - grad_cos * x.sin()


class SinCosBadCos(SinCos):
    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        return grad_sin * x.cos() + grad_cos * x.sin()


class Linear(Function):
    """x @ W.T + b, computing only the gradients that are needed."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad @ weight
        if ctx.needs_input_grad[1]:
            grad_w = grad.t() @ x
        if ctx.needs_input_grad[2]:
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b


class LinearWrongNeedsIndex(Linear):
    """Guards the bias gradient with needs_input_grad[1] (the weight's): None when W is frozen."""

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad @ weight
        if ctx.needs_input_grad[1]:
            grad_w = grad.t() @ x
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b


class LinearBiasSignFlipped(Linear):
    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x, -grad.sum(0)


class Clamp(Function):
    """clamp(x, low, high) called as Clamp.apply(low, x, high, None)."""

    @staticmethod
    def forward(ctx, low, x, high, unused):
        ctx.save_for_backward(x)
        ctx.low, ctx.high = low, high
        return x.clamp(low, high)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inside = ((x > ctx.low) & (x < ctx.high)).to(grad.dtype)
        return None, grad * inside, None, None


class ClampPassesEverything(Clamp):
    @staticmethod
    def backward(ctx, grad):
        return None, grad, None, None


class OnceSoftplus(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (1 + x.exp()).log()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1 + (-x).exp())


class OnceSoftplusWrong(OnceSoftplus):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1 + x.exp())


class MaxWithIndex(Function):
    """Row maxima and their (non-differentiable) positions."""

    @staticmethod
    def forward(ctx, x):
        values, indices = x.max(1)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.shape = x.shape
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        return torch.zeros(ctx.shape, dtype=grad_values.dtype).scatter(
            1, indices.unsqueeze(1), grad_values.unsqueeze(1))


class MaxWithIndexWrongDim(MaxWithIndex):
    """Scatters into the wrong column (the index of the row)."""

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        rows = torch.arange(ctx.shape[0]).unsqueeze(1)
        return torch.zeros(ctx.shape, dtype=grad_values.dtype).scatter(
            1, rows, grad_values.unsqueeze(1))


class SplitScale(Function):
    """(2x, 3x) with materialize_grads off: an unused output's gradient is None."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        result = None
        if grad_a is not None:
            result = grad_a * 2
        if grad_b is not None:
            result = grad_b * 3 if result is None else result + grad_b * 3
        return result


class SplitScaleForgetsNone(SplitScale):
    @staticmethod
    def backward(ctx, grad_a, grad_b):
        return grad_a * 2 + grad_b * 3


class SplitScaleWrongFactor(SplitScale):
    @staticmethod
    def backward(ctx, grad_a, grad_b):
        result = None
        if grad_a is not None:
            result = grad_a * 2
        if grad_b is not None:
            result = grad_b * 2 if result is None else result + grad_b * 2
        return result


class Power(Function):
    """x ** p with a Python number p after the tensor; setup_context style, p defaults to 3."""

    @staticmethod
    def forward(x, p=3):
        return x ** p

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, p = inputs
        ctx.save_for_backward(x)
        ctx.p = p

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.p * x ** (ctx.p - 1), None


class PowerExtraGradient(Power):
    """Returns a gradient for the exponent too, which is not a tensor."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.p * x ** (ctx.p - 1), (grad * x ** ctx.p * x.log()).sum()


class PowerTooFewGradients(Power):
    """Returns one gradient for two forward arguments."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.p * x ** (ctx.p - 1)


# ---- the cases -----------------------------------------------------------------------------

@dataclass
class Case:
    """One seeded bug (as in ``test_doctor_seeded.Case``).

    ``program(Fn, *inputs)`` returns the loss using the Function ``Fn``; ``reference(*inputs)``
    the same loss with torch's built-ins. ``inputs(rng)`` gives the numpy arrays and which of
    them require grad. ``expect`` is the set of ``(kind, input_index)`` the doctor must report
    for ``buggy``; ``phrases`` must appear in the report's text, ``hint`` in the findings'
    hints. ``outside_capture``: None when torch's graph still holds every forward argument
    (the doctor rebuilds them outside capture()); else a phrase of the reason the doctor gives
    for skipping the node there (it still reports what the backward pass shows: a backward
    that raises). Torch keeps no record of plain (non-tensor) arguments, nor of an input's
    values before a Function modified it in place.
    """

    name: str
    fixed: type
    buggy: type
    program: Callable
    reference: Callable
    inputs: Callable
    expect: set
    phrases: tuple = ()
    hint: str | None = None
    changes_gradient: bool = True
    raises: tuple | None = None
    outside_capture: str | None = None


def arrays(*pairs):
    return lambda rng: [(make(rng), grad) for make, grad in pairs]


def normal(*shape, scale=1.0, offset=0.0):
    return lambda rng: rng.standard_normal(shape) * scale + offset


def positive(*shape):
    return lambda rng: rng.random(shape) + 0.5


def constant(values, dtype=np.float64):
    return lambda rng: np.array(values, dtype=dtype)


NOT_TENSORS = "forward arguments are not tensors, and PyTorch keeps no record of them"

CASES = [
    Case("sigmoid sign flipped", Sigmoid, SigmoidSignFlipped,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda x, w: (torch.sigmoid(x) * w).sum(),
         arrays((normal(3, 4), True), (normal(3, 4), False)),
         {("wrong_gradient", 0)}, hint="sign flipped"),
    Case("square missing factor 2", Square, SquareMissingTwo,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda x, w: (x * x * w).sum(),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 0)}, hint="factor (analytic = 0.5 x numeric)"),
    Case("square ignores grad_output", Square, SquareDerivativeOnly,
         lambda F, x: F.apply(x).sum(),  # all-ones upstream: the doctor must use random ones
         lambda x: (x * x).sum(),
         arrays((normal(2, 3), True)),
         {("wrong_gradient", 0)}, hint="incoming gradient ignored", changes_gradient=False),
    Case("exp derivative from the input", Exp, ExpUsesInput,
         lambda F, x: (F.apply(x) * 0.5).sum(),
         lambda x: (x.exp() * 0.5).sum(),
         arrays((normal(6), True)),
         {("wrong_gradient", 0)}),
    Case("tanh derivative from the input", Tanh, TanhUsesInput,
         lambda F, x, w: (F.apply(x @ w) ** 2).sum(),
         lambda x, w: ((x @ w).tanh() ** 2).sum(),
         arrays((normal(3, 4), True), (normal(4, 2), True)),
         {("wrong_gradient", 0)}),
    Case("matmul weight gradient transposed (square)", MatMul, MatMulWeightGradTransposed,
         lambda F, x, w: (F.apply(x, w) ** 2).sum(),
         lambda x, w: ((x @ w) ** 2).sum(),
         arrays((normal(4, 4), True), (normal(4, 4), True)),
         {("wrong_gradient", 1)}, hint="transposed"),
    Case("matmul weight gradient transposed (non-square)", MatMul, MatMulWeightGradTransposed,
         lambda F, x, w: (F.apply(x, w) ** 2).sum(),
         lambda x, w: ((x @ w) ** 2).sum(),
         arrays((normal(2, 3), True), (normal(3, 5), True)),
         {("backward_error", 1)},
         phrases=("MatMulWeightGradTransposedBackward returned an invalid gradient at index 1 - "
                  "got [5, 3] but expected shape compatible with [3, 5]",),
         raises=("RuntimeError", "returned an invalid gradient at index 1"),
         changes_gradient=False),
    Case("mul gradients swapped", Mul, MulSwapped,
         lambda F, a, b: (F.apply(a, b) * a).sum(),
         lambda a, b: (a * b * a).sum(),
         arrays((normal(2, 3), True), (normal(2, 3), True)),
         {("wrong_gradient", 0), ("wrong_gradient", 1)}, hint="inputs 0 and 1 swapped"),
    Case("column bias reduced to the wrong shape", AddColumnBias, AddColumnBiasDropsDim,
         lambda F, x, b: (F.apply(x, b) ** 2).sum(),
         lambda x, b: ((x + b) ** 2).sum(),
         arrays((normal(3, 4), True), (normal(3, 1), True)),
         {("backward_error", 1)},
         phrases=("returned an invalid gradient at index 1 - got [3] but expected shape "
                  "compatible with [3, 1]",),
         raises=("RuntimeError", "returned an invalid gradient at index 1"),
         changes_gradient=False),
    Case("take index off by one (an index tensor argument)", Take, TakeOffByOne,
         lambda F, x, i: (F.apply(x, i) ** 2).sum(),
         lambda x, i: (x[i] ** 2).sum(),
         arrays((normal(6), True), (constant([0, 2, 3, 3, 1], np.int64), False)),
         {("wrong_gradient", 0)}, hint="index off by one"),
    Case("gather index off by one (and a number)", Gather, GatherOffByOne,
         lambda F, x, i: (F.apply(x, i, 2.0) ** 2).sum(),
         lambda x, i: ((x[i] * 2.0) ** 2).sum(),
         arrays((normal(6), True), (constant([0, 2, 3, 3, 1], np.int64), False)),
         {("wrong_gradient", 0)}, hint="index off by one", outside_capture=NOT_TENSORS),
    Case("grad_output scaled in place", Scale, ScaleInPlace,
         # AddBackward0 hands one gradient to both branches; Scale changes it in place
         lambda F, x, b, w: ((b * 2 + F.apply(x)) * w).sum(),
         lambda x, b, w: ((b * 2 + x * 3) * w).sum(),
         arrays((normal(4), True), (normal(4), True), (normal(4), False)),
         {("mutated_grad_output", None)}, phrases=("in place",)),
    Case("saved input modified in forward", Cube, CubeMutatesSaved,
         lambda F, x: (F.apply(x * 1.0) * 0.5).sum(),
         lambda x: (x * x * x * 0.5).sum(),
         arrays((normal(5), True)),
         {("mutated_saved", 0)}, phrases=("in place", "without ctx.mark_dirty")),
    Case("mark_dirty in-place function, wrong factor", TripleInPlace, TripleInPlaceWrongFactor,
         lambda F, x, w: (F.apply(x * 1.0) * w).sum(),
         lambda x, w: (x * 3 * w).sum(),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 0)}, hint="analytic = 0.6667 x numeric",
         outside_capture="input 0 (from MulBackward0) was not saved for backward and cannot be "
                         "recomputed"),
    Case("norm NaN at zero", Norm, NormNaNAtZero,
         lambda F, x: Square.apply(F.apply(Tanh.apply(x)) - 1).sum(),
         lambda x: ((x.tanh().norm(dim=-1, keepdim=True) - 1) ** 2).sum(),
         arrays((lambda rng: np.concatenate([rng.standard_normal((2, 3)), np.zeros((1, 3))]),
                 True)),
         {("nonfinite", 0)}, phrases=("first non-finite gradient", "from finite incoming")),
    Case("second output's gradient wrong", SinCos, SinCosBadCos,
         lambda F, x: (lambda s, c: (s * 2 + c * c).sum())(*F.apply(x)),
         lambda x: (x.sin() * 2 + x.cos() * x.cos()).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="output 1"),
    Case("needs_input_grad checked at the wrong index", Linear, LinearWrongNeedsIndex,
         lambda F, x, w, b: F.apply(x, w, b).tanh().sum(),
         lambda x, w, b: (x @ w.t() + b).tanh().sum(),
         arrays((normal(3, 4), False), (normal(2, 4), False), (normal(2), True)),
         {("wrong_gradient", 2)}, phrases=("returned None",)),
    Case("linear bias sign flipped", Linear, LinearBiasSignFlipped,
         lambda F, x, w, b: F.apply(x, w, b).tanh().sum(),
         lambda x, w, b: (x @ w.t() + b).tanh().sum(),
         arrays((normal(3, 4), True), (normal(2, 4), True), (normal(2), True)),
         {("wrong_gradient", 2)}, hint="sign flipped"),
    Case("non-tensor arguments around the tensor", Clamp, ClampPassesEverything,
         lambda F, x: (F.apply(-0.5, x, 0.5, None) * 3).sum(),
         lambda x: (x.clamp(-0.5, 0.5) * 3).sum(),
         arrays((normal(8, scale=2.0), True)),
         {("wrong_gradient", 1)}, outside_capture=NOT_TENSORS),
    Case("once_differentiable backward wrong", OnceSoftplus, OnceSoftplusWrong,
         lambda F, x: (F.apply(x) ** 2).sum(),
         lambda x: (torch.nn.functional.softplus(x) ** 2).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}),
    Case("non-differentiable indices output, values scattered wrong", MaxWithIndex,
         MaxWithIndexWrongDim,
         lambda F, x: (F.apply(x)[0] ** 2).sum(),
         lambda x: (x.max(1)[0] ** 2).sum(),
         arrays((normal(3, 4), True)),
         {("wrong_gradient", 0)}),
    Case("materialize_grads off, None not handled", SplitScale, SplitScaleForgetsNone,
         lambda F, x: F.apply(x)[0].sum(),
         lambda x: (x * 2).sum(),
         arrays((normal(4), True)),
         {("backward_error", None)}, phrases=("TypeError",),
         raises=("TypeError", "NoneType"), changes_gradient=False),
    Case("materialize_grads off, wrong factor", SplitScale, SplitScaleWrongFactor,
         lambda F, x: (F.apply(x)[1] * 2).sum(),
         lambda x: (x * 3 * 2).sum(),
         arrays((normal(4), True)),
         {("wrong_gradient", 0)}),
    Case("gradient for a non-tensor argument", Power, PowerExtraGradient,
         lambda F, x: F.apply(x, 3).sum(),
         lambda x: (x ** 3).sum(),
         arrays((positive(4), True)),
         {("backward_error", 1)},
         phrases=("returned a gradient different than None at position 2, but the "
                  "corresponding forward input was not a Variable",),
         raises=("RuntimeError", "returned a gradient different than None at position 2"),
         changes_gradient=False, outside_capture=NOT_TENSORS),
    Case("too few gradients (exponent left to its default)", Power, PowerTooFewGradients,
         lambda F, x: F.apply(x).sum(),
         lambda x: (x ** 3).sum(),
         arrays((positive(4), True)),
         {("backward_error", None)},
         phrases=("returned an incorrect number of gradients (expected 2, got 1)",),
         raises=("RuntimeError", "returned an incorrect number of gradients (expected 2, got 1)"),
         changes_gradient=False, outside_capture=NOT_TENSORS),
]


def _case_id(case):
    return case.name.replace(" ", "-")


# ---- running a case ------------------------------------------------------------------------

def _leaves(case, seed):
    made = case.inputs(np.random.default_rng(seed))
    return [torch.tensor(a, requires_grad=g) for a, g in made]


def _captured(capture):
    return gradviz.debug.capture() if capture else contextlib.nullcontext()


def _build(case, fn, tensors, capture=True):
    with _captured(capture):
        return case.program(fn, *tensors)


def _grads(tensors):
    return [t.grad.numpy().copy() if t.grad is not None else np.zeros(tuple(t.shape))
            for t in tensors if t.requires_grad]


def _gradients(case, fn, seed):
    """The program's gradients with torch's backward (or the exception it raises)."""
    tensors = _leaves(case, seed)
    case.program(fn, *tensors).backward()
    return _grads(tensors)


def _reference_gradients(case, seed):
    tensors = _leaves(case, seed)
    case.reference(*tensors).backward()
    return _grads(tensors)


def _found(report):
    return {(f.kind, f.input_index) for f in report.findings if f.severity == "error"}


def _doctor_leaves_graph_alone(case, fn, tensors, loss, report_fn):
    """Run the doctor, then check the user's graph: no .grad written, the saved tensors kept
    (torch's own backward still runs, or raises as it would have)."""
    report = report_fn(loss)
    assert all(t.grad is None for t in tensors), "the doctor wrote .grad"
    return report


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_program_matches_torch_and_is_clean(case, seed):
    expected = _reference_gradients(case, seed)
    for got, want in zip(_gradients(case, case.fixed, seed), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    for capture in (True, False):
        tensors = _leaves(case, seed)
        loss = _build(case, case.fixed, tensors, capture)
        report = gradviz.debug.doctor(loss, seed=seed)
        assert report.findings == [] and report.ok, f"{case.name}, seed {seed}:\n{report}"
        if capture or case.outside_capture is None:
            assert report.checked and not report.skipped, str(report)
        else:
            assert not report.checked and len(report.skipped) == 1, str(report)
        # nothing about the graph changed: no .grad, and torch's backward gives its gradients
        assert all(t.grad is None for t in tensors)
        loss.backward()
        for got, want in zip(_grads(tensors), expected):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_real(case):
    if case.raises is not None:
        kind, phrase = case.raises
        with pytest.raises(Exception) as info:
            _gradients(case, case.buggy, 0)
        assert type(info.value).__name__ == kind and phrase in str(info.value)
        return
    got = _gradients(case, case.buggy, 0)
    same = all(np.allclose(g, w, rtol=1e-6, atol=1e-9)
               for g, w in zip(got, _reference_gradients(case, 0)))
    assert same != case.changes_gradient, f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_diagnosed_inside_capture(case, seed):
    tensors = _leaves(case, seed)
    loss = _build(case, case.buggy, tensors)
    report = gradviz.debug.doctor(loss, seed=seed)
    _assert_diagnosis(case, report, seed)
    assert all(t.grad is None for t in tensors), "the doctor wrote .grad"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_without_capture(case):
    tensors = _leaves(case, 0)
    report = gradviz.debug.doctor(_build(case, case.buggy, tensors, capture=False))
    assert all(t.grad is None for t in tensors), "the doctor wrote .grad"
    if case.outside_capture is None:
        _assert_diagnosis(case, report, 0)
        return
    # not rebuilt from torch's graph: skipped, saying why and what to do
    (node, reason), = [(n, r) for n, r in report.skipped if n._forward_cls is case.buggy]
    assert case.outside_capture in reason and "gradviz.debug.capture()" in reason, reason
    assert f"skipped: {case.buggy.__name__}Backward: " in str(report)
    if case.raises is not None:  # the backward pass still shows the error
        assert {f.kind for f in report.findings} == {"backward_error"}, str(report)
        assert _found(report) == case.expect, str(report)
    else:
        assert report.findings == [], str(report)


def _assert_diagnosis(case, report, seed):
    text = str(report)
    assert not report.ok, f"{case.name}, seed {seed}: not found\n{text}"
    assert _found(report) == case.expect, f"{case.name}, seed {seed}:\n{text}"
    name = f"{case.buggy.__name__}Backward"
    for finding in report.findings:
        assert finding.function is case.buggy, f"{case.name}: blamed {finding!r}\n{text}"
        assert finding.node.name() == name and finding.message.startswith(name), finding.message
        if finding.kind == "wrong_gradient" and "returned None" not in finding.message:
            assert finding.worst, text
            first = finding.worst[0]
            assert np.isfinite(first.analytic) and np.isfinite(first.numeric)
            assert abs(first.analytic - first.numeric) > 1e-6
            index = "[" + ", ".join(str(i) for i in first.index) + "]"
            assert f"at {index}: analytic" in finding.message, finding.message
            assert re.search(r"analytic \S+ vs numeric \S+", finding.message)
        if finding.kind == "wrong_gradient":
            assert f"input {finding.input_index}" in finding.message
    for phrase in case.phrases:
        assert phrase in text, f"{case.name}: {phrase!r} not in\n{text}"
    if case.hint is not None:
        hints = " | ".join(str(f.hint) for f in report.findings)
        assert case.hint in hints, f"{case.name}: hint {case.hint!r} not in {hints!r}\n{text}"
        assert case.hint in text
