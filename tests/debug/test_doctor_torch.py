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
from collections.abc import Callable
from dataclasses import dataclass

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


# ---- programs beyond one Function ----------------------------------------------------------

class CustomLinear(torch.nn.Module):
    """A layer whose forward is a custom Function (as people wrap their own kernels)."""

    def __init__(self, fan_in, fan_out, generator):
        super().__init__()
        self.weight = torch.nn.Parameter(
            torch.randn(fan_out, fan_in, generator=generator) / fan_in ** 0.5)
        self.bias = torch.nn.Parameter(torch.randn(fan_out, generator=generator) * 0.1)

    def forward(self, x):
        return Linear.apply(x, self.weight, self.bias)


class Net(torch.nn.Module):
    def __init__(self, activation, seed=0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.first = CustomLinear(6, 8, generator)
        self.second = CustomLinear(8, 3, generator)
        self.activation = activation

    def forward(self, x):
        return self.second(self.activation.apply(self.first(x)))


def _net_loss(net, x, target):
    return torch.nn.functional.cross_entropy(net(x), target)


def _net_data():
    generator = torch.Generator().manual_seed(7)
    return torch.randn(10, 6, generator=generator), torch.randint(0, 3, (10,), generator=generator)


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
def test_module_around_custom_functions(capture):
    x, target = _net_data()
    net = Net(Tanh)
    with _captured(capture):
        loss = _net_loss(net, x, target)
    report = gradviz.debug.doctor(loss)
    assert report.findings == [] and len(report.checked) == 3 and not report.skipped, str(report)
    assert all(p.grad is None for p in net.parameters()), "the doctor wrote .grad"
    # the network is right: its float32 gradients are those of torch's built-in layers
    loss.backward()
    reference = torch.nn.functional.cross_entropy(
        torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(
            x, net.first.weight, net.first.bias)), net.second.weight, net.second.bias), target)
    expected = torch.autograd.grad(reference, list(net.parameters()))
    for p, want in zip(net.parameters(), expected):
        assert p.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, want, rtol=1e-5, atol=1e-6)

    buggy = Net(TanhUsesInput)
    with _captured(capture):
        loss = _net_loss(buggy, x, target)
    report = gradviz.debug.doctor(loss)
    (finding,) = report.findings
    assert (finding.kind, finding.function, finding.input_index) \
        == ("wrong_gradient", TanhUsesInput, 0), str(report)
    assert finding.message.startswith("TanhUsesInputBackward input 0: gradient disagrees")
    assert len(report.checked) == 3 and all(p.grad is None for p in buggy.parameters())


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
def test_a_buggy_function_used_twice_is_reported_at_both_uses(capture):
    rng = np.random.default_rng(3)
    x = torch.tensor(rng.standard_normal(4), requires_grad=True)
    y = torch.tensor(rng.standard_normal(4), requires_grad=True)

    def build(fn):
        with _captured(capture):
            return (fn.apply(x) * fn.apply(y * 2.0)).sum()

    report = gradviz.debug.doctor(build(SquareMissingTwo))
    wrong = report.by_kind("wrong_gradient")
    assert len(wrong) == 2 and len({f.node for f in wrong}) == 2, str(report)
    assert all((f.function, f.input_index) == (SquareMissingTwo, 0) for f in wrong)
    assert all("analytic = 0.5 x numeric" in f.message for f in wrong)
    ids = [finding["node"] for finding in report.to_dict()["findings"]]
    assert len(set(ids)) == 2 and all(isinstance(i, int) for i in ids)
    assert {f"[use {n} of 2 of SquareMissingTwo in forward order, node {i}]"
            for n, i in ((f.details["use"], i) for f, i in zip(report.findings, ids))} \
        == {m[m.index("[use"):] for m in (f.message for f in report.findings)}
    report = gradviz.debug.doctor(build(Square))
    assert report.findings == [] and len(report.checked) == 2, str(report)
    assert x.grad is None and y.grad is None


class Twice(Function):
    """Saves nothing: outside capture() its input must come from elsewhere in the graph."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class TwiceWrong(Twice):
    @staticmethod
    def backward(ctx, grad):
        return grad * 3


def test_outside_capture_an_input_is_recomputed_from_the_custom_function_that_made_it():
    rng = np.random.default_rng(8)
    x = torch.tensor(rng.standard_normal(5), requires_grad=True)
    w = torch.tensor(rng.standard_normal(5))
    # Scale's output is saved nowhere; Scale's own input is the leaf x: re-run Scale
    report = gradviz.debug.doctor((TwiceWrong.apply(Scale.apply(x)) * w).sum())
    assert [n.name() for n in report.checked] == ["TwiceWrongBackward", "ScaleBackward"]
    (finding,) = report.findings
    assert (finding.kind, finding.function, finding.input_index) \
        == ("wrong_gradient", TwiceWrong, 0), str(report)
    assert "analytic = 1.5 x numeric" in finding.message
    # x * 1.0 keeps nothing (MulBackward0 saves no tensor for a number): skipped, and why
    report = gradviz.debug.doctor((TwiceWrong.apply(x * 1.0) * w).sum())
    (node, reason), = report.skipped
    assert reason == ("input 0 (from MulBackward0) was not saved for backward and cannot be "
                      "recomputed (build the graph inside gradviz.debug.capture() to record "
                      "them)"), reason
    assert report.findings == [] and x.grad is None
    with gradviz.debug.capture():
        loss = (TwiceWrong.apply(x * 1.0) * w).sum()
    assert {(f.kind, f.function) for f in gradviz.debug.doctor(loss).findings} \
        == {("wrong_gradient", TwiceWrong)}


def test_gradients_and_saved_tensors_of_the_users_graph_are_left_alone():
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = torch.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    h = x @ w
    h.retain_grad()
    loss = (Tanh.apply(h) ** 2).sum()
    loss.backward(retain_graph=True)
    expected = [t.grad.clone() for t in (x, w, h)]
    before = [t.grad for t in (x, w, h)]
    report = gradviz.debug.doctor(loss)
    assert report.ok and report.checked, str(report)
    # .grad: the same tensors, with the same values (a retain_grad() non-leaf's too)
    for t, grad, want in zip((x, w, h), before, expected):
        assert t.grad is grad
        torch.testing.assert_close(t.grad, want, rtol=0, atol=0)
    # a non-leaf that retains its gradient and has none yet keeps none
    h2 = x @ w
    h2.retain_grad()
    loss2 = Tanh.apply(h2).sum()
    gradviz.debug.doctor(loss2)
    assert h2.grad is None
    # retain_graph semantics unchanged: one more backward works, accumulating as torch does,
    # and a backward after a backward without retain_graph raises as it would have
    loss.backward()
    for t, want in zip((x, w, h), expected):
        torch.testing.assert_close(t.grad, 2 * want)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()


def test_a_graph_without_custom_functions_is_ok_with_a_note():
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    report = gradviz.debug.doctor((x.exp() * x).sum())
    assert report.ok and report.findings == [] and report.checked == [] and not report.skipped
    (note,) = report.notes
    assert "no custom torch.autograd.Function" in note, note
    assert "note: the graph has no custom torch.autograd.Function" in str(report)
    assert x.grad is None


def test_nan_from_a_built_in_node_is_found_in_a_torch_graph():
    x = torch.tensor([4.0, 0.0, 1.0], requires_grad=True)
    loss = (Square.apply(x).sqrt() * 0 + x).sum()  # sqrt at 0: inf, times 0: nan
    torch_grad, = torch.autograd.grad(loss, x, retain_graph=True)
    assert torch.isnan(torch_grad).any()
    report = gradviz.debug.doctor(loss)
    finding, origin = report.findings  # the pass's finding, and the model-level origin
    assert finding.kind == "nonfinite" and finding.function is None, str(report)
    assert origin.kind == "nonfinite_origin" and origin.node.name() == "SqrtBackward0"
    # sqrt's derivative at 0 is inf; times the zero gradient from "* 0": NaN
    assert finding.node.name() == "SqrtBackward0"
    assert finding.message.startswith(
        "SqrtBackward0 produced the first non-finite gradient of the backward pass (input 0: "
        "1 NaN, 0 Inf, the first at [1]), from finite incoming gradients"), finding.message
    assert report.checked and x.grad is None


def test_saved_tensors_modified_in_place_after_forward():
    x = torch.tensor(np.random.default_rng(2).standard_normal(5), requires_grad=True)
    a = x * 1.0
    with gradviz.debug.capture():
        b = a.exp()
        loss = (Cube.apply(a) + b.sin()).sum()
    a.mul_(2)   # Cube saved a
    b.add_(1)   # SinBackward0 saved b
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, x, retain_graph=True)
    report = gradviz.debug.doctor(loss)
    saved = {f.node.name(): f for f in report.by_kind("mutated_saved")}
    assert set(saved) == {"CubeBackward", "SinBackward0"}, str(report)
    assert saved["CubeBackward"].function is Cube and saved["SinBackward0"].function is None
    assert saved["CubeBackward"].message.startswith(
        "CubeBackward: saved tensor 0 ([torch.DoubleTensor [5]], output 0 of Mul) was changed "
        "after it was saved; an in-place operation moved its version from 0 to 1, so backward "
        "will raise"), saved["CubeBackward"].message
    assert saved["SinBackward0"].message.startswith("SinBackward0: its saved self (")
    assert all(f.hint == "clone the tensor before modifying it in place" for f in saved.values())
    # inside capture() Cube's arguments were recorded before forward: it is still checked
    assert [n.name() for n in report.checked] == ["CubeBackward"] and not report.skipped
    # outside capture the arguments are gone with the saved tensor
    a = x * 1.0
    loss = Cube.apply(a).sum()
    a.mul_(2)
    report = gradviz.debug.doctor(loss)
    (node, reason), = report.skipped
    assert "modified in place after forward" in reason and "capture()" in reason, reason


def test_a_graph_freed_by_backward():
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss = Cube.apply(x * 1.0).sum()
    loss.backward()
    report = gradviz.debug.doctor(loss)
    (node, reason), = report.skipped
    assert "freed" in reason and "retain_graph=True" in reason and "capture()" in reason, reason
    assert any("already freed" in note for note in report.notes), str(report)
    # inside capture the Function is still checked (its arguments were recorded)
    with gradviz.debug.capture():
        loss = CubeMutatesSaved.apply(x * 1.0).sum()
    loss.backward()
    report = gradviz.debug.doctor(loss)
    assert report.checked and {f.kind for f in report.findings} == {"mutated_saved"}, str(report)


def test_without_torch_the_doctor_says_so(monkeypatch):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = Square.apply(x).sum()
    for name in ("gradviz.debug._torch_graph", "gradviz.debug._torch_rerun"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"doctor: loss\[0\] is a PyTorch Tensor, but torch "
                                          r"cannot be imported .*repair the torch installation"):
        gradviz.debug.doctor(loss)


def test_mixed_roots_and_roots_without_grad():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"loss\[1\] is a gradviz Tensor but loss\[0\] is a "
                                        r"PyTorch tensor"):
        gradviz.debug.doctor([x.sum(), gradviz.tensor([1.0], requires_grad=True).sum()])
    with pytest.raises(RuntimeError) as ours:
        gradviz.debug.doctor(torch.tensor(1.0))
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.grad(torch.tensor(1.0), x)
    assert "does not require grad and does not have a grad_fn" in str(ours.value)
    assert "does not require grad and does not have a grad_fn" in str(theirs.value)


def test_node_ids_are_those_of_record_torch():
    x = torch.tensor(np.random.default_rng(1).standard_normal(4), requires_grad=True)
    loss = (SquareMissingTwo.apply(x.exp()) * 2).sum()
    data = gradviz.debug.doctor(loss).to_dict()
    (finding,) = data["findings"]
    trace = gradviz.debug.record_torch(loss)
    names = {node["id"]: node["name"] for node in trace.graph["nodes"]}
    assert names[finding["node"]] == finding["node_name"] == "SquareMissingTwoBackward"
    assert [names[i] for i in data["checked"]] == ["SquareMissingTwoBackward"]


# ---- capture() and torch's Function.apply ------------------------------------------------------

def _apply():
    return torch.autograd.Function.__dict__["apply"]


def test_capture_wraps_function_apply_only_inside_and_restores_it():
    original = _apply()
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with gradviz.debug.capture():
        assert _apply() is not original
        with gradviz.debug.capture():
            inner = Power.apply(x)
        outer = Power.apply(x, 2)
        assert _apply() is not original
        with torch.no_grad():
            untracked = Power.apply(x)
    assert _apply() is original
    after = Power.apply(x)
    assert inner.grad_fn._gradviz_forward_args.args[1] == 3   # the default, bound as torch does
    assert outer.grad_fn._gradviz_forward_args.args[1] == 2
    assert untracked.grad_fn is None and not hasattr(after.grad_fn, "_gradviz_forward_args")
    with pytest.raises(ValueError, match="inside"):
        with gradviz.debug.capture():
            raise ValueError("raised inside capture()")
    assert _apply() is original
    # a forward that raises inside capture: torch's error, and apply restored
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        with gradviz.debug.capture():
            PowerTooFewGradients.apply(x).sum().backward()
    assert _apply() is original


def test_capture_in_threads_restores_apply_after_the_last_one():
    original = _apply()
    entered, release = threading.Barrier(3), threading.Event()
    results = {}
    x = torch.tensor([1.0, 2.0], requires_grad=True)

    def work(name):
        with gradviz.debug.capture():
            entered.wait()
            release.wait(10)
            results[name] = Square.apply(x * 1.0)

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    entered.wait()
    assert _apply() is not original
    release.set()
    for t in threads:
        t.join()
    assert _apply() is original
    assert all(hasattr(r.grad_fn, "_gradviz_forward_args") for r in results.values())


# ---- second order ----------------------------------------------------------------------------

class CubeThroughNumpy(Cube):
    """Right first derivative, computed in numpy: create_graph=True cannot differentiate it."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.from_numpy(3 * x.detach().numpy() ** 2)


class CubeSecondOrderWrong(Cube):
    """Differentiable, but 3 * x.detach() * x: half the second derivative is lost."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x.detach() * x


def _penalty(fn, x_np, w_np):
    """A gradient penalty: the loss uses d(inner)/dx, so backward runs under create_graph."""
    x = torch.tensor(x_np, requires_grad=True)
    inner = (fn(x) * torch.tensor(w_np)).sum()
    (gx,) = torch.autograd.grad(inner, x, create_graph=True)
    return (gx ** 2).sum(), inner, x


@pytest.mark.parametrize("buggy, factor", [(CubeThroughNumpy, None), (CubeSecondOrderWrong, 0.5)])
def test_double_backward_bugs(buggy, factor):
    rng = np.random.default_rng(4)
    x_np, w_np = rng.standard_normal(5), rng.standard_normal(5)
    ref, _, x_ref = _penalty(lambda t: t ** 3, x_np, w_np)
    ref.backward()
    with gradviz.debug.capture():
        loss, inner, x = _penalty(Cube.apply, x_np, w_np)
    loss.backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    report = gradviz.debug.doctor(inner, double_backward=True)
    assert report.findings == [] and report.checked, str(report)
    with gradviz.debug.capture():
        loss, inner, x = _penalty(buggy.apply, x_np, w_np)
    if loss.requires_grad:
        loss.backward()
        assert not torch.allclose(x.grad, x_ref.grad)
    assert gradviz.debug.doctor(inner).findings == []
    report = gradviz.debug.doctor(inner, double_backward=True)
    (finding,) = report.findings
    assert (finding.kind, finding.function, finding.input_index) \
        == ("wrong_double_backward", buggy, 0), str(report)
    if factor is None:
        assert "cannot differentiate" in finding.hint
    else:
        assert f"analytic = {factor:g} x numeric" in finding.hint


def test_double_backward_of_once_differentiable_is_a_note_not_a_finding():
    x = torch.tensor(np.random.default_rng(2).standard_normal(4), requires_grad=True)
    report = gradviz.debug.doctor((OnceSoftplus.apply(x) ** 2).sum(), double_backward=True)
    assert report.findings == [] and report.checked, str(report)
    assert any("once_differentiable" in note for note in report.notes), str(report)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_programs_have_right_double_backwards(case):
    """Every correct Function above builds its gradient with tensor operations: its double
    backward is right too (the once_differentiable one is only noted)."""
    report = gradviz.debug.doctor(_build(case, case.fixed, _leaves(case, 0)), double_backward=True)
    assert report.findings == [], f"{case.name}:\n{report}"
    noted = ["once_differentiable" in n for n in report.notes]
    assert all(noted) and len(noted) == (case.fixed is OnceSoftplus), str(report)
