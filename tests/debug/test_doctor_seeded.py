"""A corpus of seeded bugs for the gradient doctor (``gradviz.debug.doctor``).

Each case is a small program around one custom ``autograd.Function`` written twice: correctly,
and with one bug of a kind people really make in a backward (a sign, a factor, the wrong saved
tensor, a transposed product, swapped or unreduced gradients, an index off by one, an ignored
or modified ``grad_output``, a tensor modified after saving, a NaN, ...). For every case:

- the correct program's gradients equal PyTorch's for the same computation written with
  built-in ops, and the doctor finds nothing in it (no false alarms);
- the buggy program's gradients differ from PyTorch's (the bug is real), and the doctor names
  the buggy Function, the input slot and the kind of problem, says where the worst entries
  are (expected vs got) and, where the bug has a recognisable shape, what it probably is.

Graphs are built inside ``gradviz.debug.capture()`` (what the doctor needs to re-run any
Function) and, where every forward argument can be recovered from the graph, without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch as real_torch

import gradviz
from gradviz.autograd.function import once_differentiable

Function = gradviz.autograd.Function
SEEDS = (0, 1, 2)


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


class SigmoidUsesInput(Function):
    """Saves x and uses it where the derivative needs y = sigmoid(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 1 / (1 + (-x).exp())

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x * (1 - x)


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

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


class MatMulInputGradNotTransposed(MatMul):
    """grad @ W instead of grad @ W.T (only runs when W is square)."""

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w, x.t() @ grad


class MatMulWeightGradTransposed(MatMul):
    """grad.T @ x: the weight's gradient comes out transposed."""

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), grad.t() @ x


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class MulSwapped(Mul):
    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * a, grad * b


class Hypot(Function):
    """sqrt(a^2 + b^2), two inputs of one shape."""

    @staticmethod
    def forward(ctx, a, b):
        r = (a * a + b * b).sqrt()
        ctx.save_for_backward(a, b, r)
        return r

    @staticmethod
    def backward(ctx, grad):
        a, b, r = ctx.saved_tensors
        return grad * a / r, grad * b / r


class HypotSwapped(Hypot):
    @staticmethod
    def backward(ctx, grad):
        a, b, r = ctx.saved_tensors
        return grad * b / r, grad * a / r


class AddBias(Function):
    """x [n, k] + b [k]; b's gradient summed over the batch."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(0)


class AddBiasUnreduced(AddBias):
    """Returns b's gradient in the broadcast shape: PyTorch sums it down (still right)."""

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class AddColumnBias(Function):
    """x [n, k] + b [n, 1]."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(1, keepdim=True)


class AddColumnBiasDropsDim(AddColumnBias):
    """grad.sum(1) has shape [n], which [n, 1] cannot be broadcast to: the engine raises."""

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(1)


class Gather(Function):
    """x[index] along dim 0, with an index tensor and a scale after it."""

    @staticmethod
    def forward(ctx, x, index, scale):
        ctx.save_for_backward(index)
        ctx.size = x.shape[0]
        ctx.scale = scale
        return x[index] * scale

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        dx = gradviz.zeros(ctx.size, dtype=grad.dtype).index_add(0, index, grad * ctx.scale)
        return dx, None, None


class GatherOffByOne(Gather):
    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        shifted = (index + 1).clamp(max=ctx.size - 1)
        dx = gradviz.zeros(ctx.size, dtype=grad.dtype).index_add(0, shifted, grad * ctx.scale)
        return dx, None, None


class Scale(Function):
    """x * 3; backward scales grad_output in place and returns it."""

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
        safe = gradviz.where(n == 0, gradviz.ones_like(n), n)
        return grad * gradviz.where(n == 0, gradviz.zeros_like(x), x / safe)


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
        return gradviz.zeros(ctx.shape, dtype=grad_values.dtype).scatter(
            1, indices.unsqueeze(1), grad_values.unsqueeze(1))


class MaxWithIndexWrongDim(MaxWithIndex):
    """Scatters into the wrong column (the index of the row)."""

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        rows = gradviz.arange(ctx.shape[0]).unsqueeze(1)
        return gradviz.zeros(ctx.shape, dtype=grad_values.dtype).scatter(
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
    """x ** p with a Python number p after the tensor."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x)
        ctx.p = p
        return x ** p

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
    """Returns one gradient for two forward arguments (extra trailing Nones would be fine)."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.p * x ** (ctx.p - 1)


# ---- the cases -----------------------------------------------------------------------------

@dataclass
class Case:
    """One seeded bug: a program, the buggy Function and the correct one, what must be found.

    ``program(Fn, *inputs)`` returns the loss using the Function ``Fn``; ``reference`` is the
    same loss with PyTorch built-ins (``T`` is ``torch``). ``inputs(rng)`` gives the numpy
    arrays and which of them require grad. ``expect`` is the set of ``(kind, input_index)``
    the doctor must report for ``buggy`` (all naming it); ``phrases`` must appear in the
    report's text; ``hint`` in the findings' hints.
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
    # the bug changes the gradients of the program (False: it makes backward raise instead)
    changes_gradient: bool = True
    # ``(TypeName, phrase)`` the program's own backward() raises, as torch would
    raises: tuple | None = None
    options: dict = field(default_factory=dict)


def weights(rng, *shape):
    return rng.standard_normal(shape)


def arrays(*pairs):
    return lambda rng: [(make(rng), grad) for make, grad in pairs]


def normal(*shape, scale=1.0, offset=0.0):
    return lambda rng: rng.standard_normal(shape) * scale + offset


def positive(*shape):
    return lambda rng: rng.random(shape) + 0.5


def constant(array, dtype=np.float64):
    return lambda rng: np.array(array, dtype=dtype)


CASES = [
    Case("sigmoid sign flipped", Sigmoid, SigmoidSignFlipped,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (T.sigmoid(x) * w).sum(),
         arrays((normal(3, 4), True), (normal(3, 4), False)),
         {("wrong_gradient", 0)}, hint="sign flipped"),
    Case("square missing factor 2", Square, SquareMissingTwo,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (x * x * w).sum(),
         arrays((normal(5), True), (normal(5), False)),
         {("wrong_gradient", 0)}, hint="factor (analytic = 0.5 x numeric)"),
    Case("square ignores grad_output", Square, SquareDerivativeOnly,
         lambda F, x: F.apply(x).sum(),  # all-ones upstream: the doctor must use random ones
         lambda T, x: (x * x).sum(),
         arrays((normal(2, 3), True)),
         {("wrong_gradient", 0)}, hint="incoming gradient ignored",
         changes_gradient=False),
    Case("exp derivative from the input", Exp, ExpUsesInput,
         lambda F, x: (F.apply(x) * 0.5).sum(),
         lambda T, x: (x.exp() * 0.5).sum(),
         arrays((normal(6), True)),
         {("wrong_gradient", 0)}),
    Case("tanh derivative from the input", Tanh, TanhUsesInput,
         lambda F, x, w: (F.apply(x @ w) ** 2).sum(),
         lambda T, x, w: ((x @ w).tanh() ** 2).sum(),
         arrays((normal(3, 4), True), (normal(4, 2), True)),
         {("wrong_gradient", 0)}),
    Case("sigmoid derivative from the input", Sigmoid, SigmoidUsesInput,
         lambda F, x: F.apply(x).log().sum(),
         lambda T, x: T.sigmoid(x).log().sum(),
         arrays((normal(4), True)),
         {("wrong_gradient", 0)}),
    Case("matmul input gradient not transposed (square)", MatMul, MatMulInputGradNotTransposed,
         lambda F, x, w: (F.apply(x, w).tanh()).sum(),
         lambda T, x, w: ((x @ w).tanh()).sum(),
         arrays((normal(3, 4), True), (normal(4, 4), True)),
         {("wrong_gradient", 0)}),
    Case("matmul weight gradient transposed (square)", MatMul, MatMulWeightGradTransposed,
         lambda F, x, w: (F.apply(x, w) ** 2).sum(),
         lambda T, x, w: ((x @ w) ** 2).sum(),
         arrays((normal(4, 4), True), (normal(4, 4), True)),
         {("wrong_gradient", 1)}, hint="transposed"),
    Case("matmul weight gradient transposed (non-square)", MatMul, MatMulWeightGradTransposed,
         lambda F, x, w: (F.apply(x, w) ** 2).sum(),
         lambda T, x, w: ((x @ w) ** 2).sum(),
         arrays((normal(2, 3), True), (normal(3, 5), True)),
         {("backward_error", 1)},
         phrases=("MatMulWeightGradTransposedBackward returned an invalid gradient at index 1 - "
                  "got [5, 3] but expected shape compatible with [3, 5]",),
         raises=("RuntimeError", "returned an invalid gradient at index 1"),
         changes_gradient=False),
    Case("mul gradients swapped", Mul, MulSwapped,
         lambda F, a, b: (F.apply(a, b) * a).sum(),
         lambda T, a, b: (a * b * a).sum(),
         arrays((normal(2, 3), True), (normal(2, 3), True)),
         {("wrong_gradient", 0), ("wrong_gradient", 1)}, hint="inputs 0 and 1 swapped"),
    Case("hypot gradients swapped", Hypot, HypotSwapped,
         lambda F, a, b: F.apply(a, b).sum(),
         lambda T, a, b: (a * a + b * b).sqrt().sum(),
         arrays((positive(5), True), (normal(5, offset=2.0), True)),
         {("wrong_gradient", 0), ("wrong_gradient", 1)}, hint="inputs 0 and 1 swapped"),
    Case("column bias reduced to the wrong shape", AddColumnBias, AddColumnBiasDropsDim,
         lambda F, x, b: (F.apply(x, b) ** 2).sum(),
         lambda T, x, b: ((x + b) ** 2).sum(),
         arrays((normal(3, 4), True), (normal(3, 1), True)),
         {("backward_error", 1)},
         phrases=("returned an invalid gradient at index 1 - got [3] but expected shape "
                  "compatible with [3, 1]",),
         raises=("RuntimeError", "returned an invalid gradient at index 1"),
         changes_gradient=False),
    Case("gather index off by one", Gather, GatherOffByOne,
         lambda F, x, i: (F.apply(x, i, 2.0) ** 2).sum(),
         lambda T, x, i: ((x[i] * 2.0) ** 2).sum(),
         arrays((normal(6), True), (constant([0, 2, 3, 3, 1], np.int64), False)),
         {("wrong_gradient", 0)}, hint="index off by one"),
    Case("grad_output scaled in place", Scale, ScaleInPlace,
         # AddBackward0 hands one gradient to both branches; Scale runs first and changes it
         lambda F, x, b, w: ((b * 2 + F.apply(x)) * w).sum(),
         lambda T, x, b, w: ((b * 2 + x * 3) * w).sum(),
         arrays((normal(4), True), (normal(4), True), (normal(4), False)),
         {("mutated_grad_output", None)}, phrases=("in place",)),
    Case("saved input modified in forward", Cube, CubeMutatesSaved,
         lambda F, x: (F.apply(x * 1.0) * 0.5).sum(),
         lambda T, x: (x * x * x * 0.5).sum(),
         arrays((normal(5), True)),
         {("mutated_saved", 0)}, phrases=("in place",)),
    Case("norm NaN at zero", Norm, NormNaNAtZero,
         lambda F, x: Square.apply(F.apply(Tanh.apply(x)) - 1).sum(),
         lambda T, x: ((x.tanh().norm(dim=-1, keepdim=True) - 1) ** 2).sum(),
         arrays((lambda rng: np.concatenate([rng.standard_normal((2, 3)), np.zeros((1, 3))]),
                 True)),
         {("nonfinite", 0)}, phrases=("first non-finite gradient", "from finite incoming")),
    Case("second output's gradient wrong", SinCos, SinCosBadCos,
         lambda F, x: (lambda s, c: (s * 2 + c * c).sum())(*F.apply(x)),
         lambda T, x: (x.sin() * 2 + x.cos() * x.cos()).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="output 1"),
    Case("needs_input_grad checked at the wrong index", Linear, LinearWrongNeedsIndex,
         lambda F, x, w, b: F.apply(x, w, b).tanh().sum(),
         lambda T, x, w, b: (x @ w.t() + b).tanh().sum(),
         arrays((normal(3, 4), False), (normal(2, 4), False), (normal(2), True)),
         {("wrong_gradient", 2)}, phrases=("returned None",)),
    Case("linear bias sign flipped", Linear, LinearBiasSignFlipped,
         lambda F, x, w, b: F.apply(x, w, b).tanh().sum(),
         lambda T, x, w, b: (x @ w.t() + b).tanh().sum(),
         arrays((normal(3, 4), True), (normal(2, 4), True), (normal(2), True)),
         {("wrong_gradient", 2)}, hint="sign flipped"),
    Case("non-tensor arguments around the tensor", Clamp, ClampPassesEverything,
         lambda F, x: (F.apply(-0.5, x, 0.5, None) * 3).sum(),
         lambda T, x: (x.clamp(-0.5, 0.5) * 3).sum(),
         arrays((normal(8, scale=2.0), True)),
         {("wrong_gradient", 1)}),
    Case("once_differentiable backward wrong", OnceSoftplus, OnceSoftplusWrong,
         lambda F, x: (F.apply(x) ** 2).sum(),
         lambda T, x: (real_torch.nn.functional.softplus(x) ** 2).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}),
    Case("non-differentiable indices output, values scattered wrong", MaxWithIndex,
         MaxWithIndexWrongDim,
         lambda F, x: (F.apply(x)[0] ** 2).sum(),
         lambda T, x: (x.max(1)[0] ** 2).sum(),
         arrays((normal(3, 4), True)),
         {("wrong_gradient", 0)}),
    Case("materialize_grads off, None not handled", SplitScale, SplitScaleForgetsNone,
         lambda F, x: F.apply(x)[0].sum(),
         lambda T, x: (x * 2).sum(),
         arrays((normal(4), True)),
         {("backward_error", None)}, phrases=("TypeError",),
         raises=("TypeError", "NoneType"), changes_gradient=False),
    Case("materialize_grads off, wrong factor", SplitScale, SplitScaleWrongFactor,
         lambda F, x: (F.apply(x)[1] * 2).sum(),
         lambda T, x: (x * 3 * 2).sum(),
         arrays((normal(4), True)),
         {("wrong_gradient", 0)}),
    Case("gradient for a non-tensor argument", Power, PowerExtraGradient,
         lambda F, x: F.apply(x, 3).sum(),
         lambda T, x: (x ** 3).sum(),
         arrays((positive(4), True)),
         {("backward_error", 1)},
         phrases=("returned a gradient different than None at position 2, but the "
                  "corresponding forward input was not a Variable",),
         raises=("RuntimeError", "returned a gradient different than None at position 2"),
         changes_gradient=False),
    Case("too few gradients", Power, PowerTooFewGradients,
         lambda F, x: F.apply(x, 2).sum(),
         lambda T, x: (x ** 2).sum(),
         arrays((positive(4), True)),
         {("backward_error", None)},
         phrases=("returned an incorrect number of gradients (expected 2, got 1)",),
         raises=("RuntimeError", "returned an incorrect number of gradients (expected 2, got 1)"),
         changes_gradient=False),
]


def _case_id(case):
    return case.name.replace(" ", "-")


# ---- running a case ------------------------------------------------------------------------

def _leaves(case, seed):
    rng = np.random.default_rng(seed)
    made = case.inputs(rng)
    return made, [gradviz.tensor(a, requires_grad=g) for a, g in made]


def _build(case, fn, tensors, capture=True):
    if capture:
        with gradviz.debug.capture():
            return case.program(fn, *tensors)
    return case.program(fn, *tensors)


def _gradients(case, fn, seed):
    """The program's gradients with gradviz (or the exception its backward raises)."""
    _, tensors = _leaves(case, seed)
    loss = case.program(fn, *tensors)
    loss.backward()
    return [t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
            for t in tensors if t.requires_grad]


def _torch_gradients(case, seed):
    made, _ = _leaves(case, seed)
    tensors = [real_torch.tensor(a, requires_grad=g) for a, g in made]
    case.reference(real_torch, *tensors).backward()
    return [t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
            for t in tensors if t.requires_grad]


def _found(report):
    return {(f.kind, f.input_index) for f in report.findings if f.severity == "error"}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_program_matches_torch_and_is_clean(case, seed):
    expected = _torch_gradients(case, seed)
    for got, want in zip(_gradients(case, case.fixed, seed), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    _, tensors = _leaves(case, seed)
    report = gradviz.debug.doctor(_build(case, case.fixed, tensors), seed=seed, **case.options)
    assert report.findings == [] and report.ok, f"{case.name}, seed {seed}:\n{report}"
    assert report.checked and not report.skipped, str(report)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_real(case, seed):
    if case.raises is not None:
        kind, phrase = case.raises
        with pytest.raises(Exception) as info:
            _gradients(case, case.buggy, seed)
        assert type(info.value).__name__ == kind and phrase in str(info.value)
        return
    expected = _torch_gradients(case, seed)
    got = _gradients(case, case.buggy, seed)
    same = all(np.allclose(g, w, rtol=1e-6, atol=1e-9) for g, w in zip(got, expected))
    assert same != case.changes_gradient, f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_diagnosed(case, seed):
    _, tensors = _leaves(case, seed)
    report = gradviz.debug.doctor(_build(case, case.buggy, tensors), seed=seed, **case.options)
    _assert_diagnosis(case, report, seed)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_diagnosed_without_capture(case):
    _, tensors = _leaves(case, 0)
    report = gradviz.debug.doctor(_build(case, case.buggy, tensors, capture=False))
    _assert_diagnosis(case, report, 0)
    _, tensors = _leaves(case, 0)
    report = gradviz.debug.doctor(_build(case, case.fixed, tensors, capture=False))
    assert report.ok and report.findings == [], f"{case.name}:\n{report}"


def _assert_diagnosis(case, report, seed):
    text = str(report)
    assert not report.ok, f"{case.name}, seed {seed}: not found\n{text}"
    assert _found(report) == case.expect, f"{case.name}, seed {seed}:\n{text}"
    for finding in report.findings:
        assert finding.function is case.buggy, f"{case.name}: blamed {finding!r}\n{text}"
        assert finding.node.name() == f"{case.buggy.__name__}Backward"
        assert finding.message.startswith(f"{case.buggy.__name__}Backward"), finding.message
        if finding.kind in ("wrong_gradient", "coerced_gradient") and "returned None" not in finding.message:
            # where: the worst entry, with both values, in the message too
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

def test_unreduced_broadcast_gradient_is_summed_as_torch_does_and_not_reported():
    """A bias gradient returned in the broadcast shape: PyTorch sums it to the bias's shape
    (right), so the doctor must not call it a bug."""
    rng = np.random.default_rng(5)
    x_np, b_np = rng.standard_normal((3, 4)), rng.standard_normal(4)
    x_t, b_t = (real_torch.tensor(a, requires_grad=True) for a in (x_np, b_np))
    ((x_t + b_t) ** 2).sum().backward()
    for fn in (AddBias, AddBiasUnreduced):
        x, b = (gradviz.tensor(a, requires_grad=True) for a in (x_np, b_np))
        with gradviz.debug.capture():
            loss = (fn.apply(x, b) ** 2).sum()
        report = gradviz.debug.doctor(loss)
        assert report.findings == [] and report.checked, str(report)
        loss.backward()
        np.testing.assert_allclose(b.grad.numpy(), b_t.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
def test_a_buggy_function_used_twice_is_reported_at_both_uses(capture):
    rng = np.random.default_rng(3)
    x = gradviz.tensor(rng.standard_normal(4), requires_grad=True)
    y = gradviz.tensor(rng.standard_normal(4), requires_grad=True)

    def build(fn):
        return (fn.apply(x) * fn.apply(y * 2.0)).sum()

    report = gradviz.debug.doctor(_maybe_captured(lambda: build(SquareMissingTwo), capture))
    wrong = report.by_kind("wrong_gradient")
    assert len(wrong) == 2 and len({f.node for f in wrong}) == 2, str(report)
    assert all((f.function, f.input_index) == (SquareMissingTwo, 0) for f in wrong)
    assert all("analytic = 0.5 x numeric" in f.message for f in wrong)
    assert len(report.findings) == 2
    report = gradviz.debug.doctor(_maybe_captured(lambda: build(Square), capture))
    assert report.findings == [] and len(report.checked) == 2, str(report)


def _maybe_captured(build, capture):
    if capture:
        with gradviz.debug.capture():
            return build()
    return build()


class Linear32(Linear):
    """The Linear above, on float32 only (as many real layers are written)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        if weight.dtype != gradviz.float32:
            raise TypeError("Linear32 expects float32 parameters")
        return Linear.forward(ctx, x, weight, bias)


class SoftmaxCrossEntropy(Function):
    """Mean cross-entropy of logits against integer targets, with a stable softmax."""

    @staticmethod
    def forward(ctx, logits, target):
        shifted = logits - logits.max(1, keepdim=True)[0]
        log_p = shifted - shifted.exp().sum(1, keepdim=True).log()
        ctx.save_for_backward(log_p, target)
        return -log_p.gather(1, target.unsqueeze(1)).mean()

    @staticmethod
    def backward(ctx, grad):
        log_p, target = ctx.saved_tensors
        one_hot = gradviz.zeros_like(log_p).scatter(1, target.unsqueeze(1), 1.0)
        return grad * (log_p.exp() - one_hot) / log_p.shape[0], None


class SoftmaxCrossEntropyNoMean(SoftmaxCrossEntropy):
    """Forgets the 1/batch of the mean."""

    @staticmethod
    def backward(ctx, grad):
        log_p, target = ctx.saved_tensors
        one_hot = gradviz.zeros_like(log_p).scatter(1, target.unsqueeze(1), 1.0)
        return grad * (log_p.exp() - one_hot), None


def _mlp(module, rng, linear, tanh, sigmoid, loss_fn, dtype):
    """A 4-layer float32 network built from custom Functions (or torch's built-ins)."""
    width = [6, 12, 12, 8, 3]
    x = module.tensor(rng.standard_normal((10, width[0])).astype(dtype))
    target = module.tensor(rng.integers(0, 3, size=10))
    params = []
    h = x
    for layer, (fan_in, fan_out) in enumerate(zip(width[:-1], width[1:])):
        w = module.tensor((rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(dtype),
                          requires_grad=True)
        b = module.tensor((rng.standard_normal(fan_out) * 0.1).astype(dtype), requires_grad=True)
        params += [w, b]
        h = linear(h, w, b)
        if layer < len(width) - 2:
            h = tanh(h) if layer % 2 == 0 else sigmoid(h) * 2 - 1
    return loss_fn(h, target), params


def _custom_mlp(rng, tanh=Tanh, loss=SoftmaxCrossEntropy):
    return _mlp(gradviz, rng, Linear32.apply, tanh.apply, Sigmoid.apply, loss.apply, np.float32)


@pytest.mark.parametrize("seed", range(4))
def test_deep_float32_network_of_correct_functions_is_clean(seed):
    with gradviz.debug.capture():
        loss, params = _custom_mlp(np.random.default_rng(seed))
    report = gradviz.debug.doctor(loss, seed=seed)
    assert report.findings == [], str(report)
    assert len(report.checked) == 4 + 3 + 1 and not report.skipped, str(report)
    # the network itself is right: its float32 gradients are torch's
    loss.backward()
    ref_loss, ref_params = _mlp(real_torch, np.random.default_rng(seed), real_torch.nn.functional.linear,
                                real_torch.tanh, real_torch.sigmoid,
                                real_torch.nn.functional.cross_entropy, np.float32)
    ref_loss.backward()
    for p, q in zip(params, ref_params):
        assert p.grad.dtype == gradviz.float32
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
def test_deep_float32_network_with_one_buggy_function(capture):
    rng = np.random.default_rng(11)
    loss, _ = _maybe_captured(lambda: _custom_mlp(rng, tanh=TanhUsesInput), capture)
    report = gradviz.debug.doctor(loss)
    assert {(f.kind, f.function, f.input_index) for f in report.findings} \
        == {("wrong_gradient", TanhUsesInput, 0)}, str(report)
    assert len(report.by_kind("wrong_gradient")) == 2  # the two tanh layers
    loss, _ = _maybe_captured(lambda: _custom_mlp(np.random.default_rng(11),
                                                  loss=SoftmaxCrossEntropyNoMean), capture)
    report = gradviz.debug.doctor(loss)
    (finding,) = report.findings
    assert (finding.kind, finding.function, finding.input_index) \
        == ("wrong_gradient", SoftmaxCrossEntropyNoMean, 0), str(report)
    assert "analytic = 10 x numeric" in finding.message


# ---- second order ----------------------------------------------------------------------------

class CubeThroughNumpy(Cube):
    """Right first derivative, computed in numpy: create_graph=True cannot differentiate it."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * gradviz.from_numpy(3 * x.detach().numpy() ** 2)


class CubeSecondOrderWrong(Cube):
    """Differentiable, but 3 * x.detach() * x: half the second derivative is lost."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x.detach() * x


def _double_backward_program(module, fn, x_np, w_np):
    """A gradient penalty: the loss uses d(loss)/dx, so backward runs under create_graph."""
    x = module.tensor(x_np, requires_grad=True)
    w = module.tensor(w_np)
    inner = (fn(x) * w).sum()
    (gx,) = module.autograd.grad(inner, x, create_graph=True)
    return (gx ** 2).sum(), inner, x


@pytest.mark.parametrize("buggy, factor", [(CubeThroughNumpy, None), (CubeSecondOrderWrong, 0.5)])
def test_double_backward_bugs(buggy, factor):
    rng = np.random.default_rng(4)
    x_np, w_np = rng.standard_normal(5), rng.standard_normal(5)
    ref, _, x_ref = _double_backward_program(real_torch, lambda t: t ** 3, x_np, w_np)
    ref.backward()
    # the correct Function: torch's second-order gradient, and a clean report (the doctor
    # looks at the graph backward ran on with create_graph=True: the inner loss)
    with gradviz.debug.capture():
        loss, inner, x = _double_backward_program(gradviz, Cube.apply, x_np, w_np)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-10)
    report = gradviz.debug.doctor(inner, double_backward=True)
    assert report.findings == [] and report.checked, str(report)
    # the buggy one: first order right (only double_backward=True finds it), second order wrong
    with gradviz.debug.capture():
        loss, inner, x = _double_backward_program(gradviz, buggy.apply, x_np, w_np)
    if loss.requires_grad:
        loss.backward()
        assert not np.allclose(x.grad.numpy(), x_ref.grad.numpy())
    assert gradviz.debug.doctor(inner).findings == []
    report = gradviz.debug.doctor(inner, double_backward=True)
    (finding,) = report.findings
    assert (finding.kind, finding.function, finding.input_index) \
        == ("wrong_double_backward", buggy, 0), str(report)
    assert "create_graph=True" in finding.message and finding.worst
    if factor is None:
        assert "cannot differentiate" in finding.hint
    else:
        assert f"analytic = {factor:g} x numeric" in finding.hint


def test_double_backward_of_once_differentiable_is_a_note_not_a_finding():
    x = gradviz.tensor(np.random.default_rng(2).standard_normal(4), requires_grad=True)
    with gradviz.debug.capture():
        loss = (OnceSoftplus.apply(x) ** 2).sum()
    report = gradviz.debug.doctor(loss, double_backward=True)
    assert report.findings == [] and report.checked, str(report)
    assert any("once_differentiable" in note for note in report.notes), str(report)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_programs_have_right_double_backwards(case):
    """Every correct Function above builds its gradient with tensor operations: its double
    backward is right too (the once_differentiable one is only noted)."""
    _, tensors = _leaves(case, 0)
    report = gradviz.debug.doctor(_build(case, case.fixed, tensors), double_backward=True)
    assert report.findings == [], f"{case.name}:\n{report}"
    expected = ["once_differentiable" in n for n in report.notes]
    assert all(expected) and len(expected) == (case.fixed is OnceSoftplus), str(report)


def test_constants_kept_for_the_doctor_are_plain_values_only():
    """With keep_forward_inputs(False), a node keeps its forward's plain constant arguments
    (numbers, None, strings, tuples of them) for the doctor, and nothing else: other objects
    are not kept alive by the graph."""
    import weakref

    class Holder:
        pass

    class Scaled(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, a, x, scale, label, shape, obj):
            ctx.scale = scale
            return x * scale

        @staticmethod
        def backward(ctx, grad):
            return None, grad * ctx.scale, None, None, None, None

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    obj = Holder()
    alive = weakref.ref(obj)
    with gradviz.debug.keep_forward_inputs(False):
        y = Scaled.apply(None, x, 2.5, "name", (2, 3), obj)
    assert y.grad_fn._forward_inputs is None
    assert y.grad_fn._forward_constants == ((0, None), (2, 2.5), (3, "name"), (4, (2, 3)))
    del obj
    assert alive() is None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.5, 2.5])
