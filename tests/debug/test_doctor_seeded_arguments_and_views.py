"""More seeded bugs for the gradient doctor: bugs only some inputs show, non-tensor and keyword
arguments, several outputs used one at a time, in-place (``mark_dirty``) Functions, views,
nested Functions, wrong gradient shapes and dtypes, double backward, repeated and mixed
Functions in one graph, a training step, and float32 Functions that must come out clean.

The cases run through the machinery of ``test_doctor_seeded`` (each correct Function matches
PyTorch and is clean; each buggy one is found with the right kind, Function and input).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch as real_torch
from test_doctor_seeded import (
    Case,
    _assert_diagnosis,
    _build,
    _case_id,
    _gradients,
    _leaves,
    _torch_gradients,
    arrays,
    normal,
)

import gradviz

Function = gradviz.autograd.Function
SEEDS = (0, 1, 2)


def positive(*shape, low=0.2, high=1.5):
    return lambda rng: rng.uniform(low, high, shape)


def small(*shape):
    return lambda rng: rng.uniform(-0.6, 0.6, shape)


# ---- bugs only some inputs show --------------------------------------------------------------

class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign()


class AbsForgetsSign(Abs):
    """Right for x > 0 only."""

    @staticmethod
    def backward(ctx, grad):
        return grad


class Relu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0).to(grad.dtype)


class ReluPassesNegatives(Relu):
    """Lets the gradient through where x < 0 as well."""

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


class HardTanh(Function):
    """clamp(x, -1, 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1.0, 1.0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ((x > -1) & (x < 1)).to(grad.dtype)


class HardTanhWrongBoundary(HardTanh):
    """The upper boundary written as 2."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ((x > -1) & (x < 2)).to(grad.dtype)


class Huber(Function):
    """0.5 x^2 for |x| < 1, |x| - 0.5 beyond."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        a = x.abs()
        return gradviz.where(a < 1, 0.5 * x * x, a - 0.5)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * gradviz.where(x.abs() < 1, x, x.sign())


class HuberWrongBranch(Huber):
    """The linear branch's derivative written as 1 (right for x > 1 only)."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * gradviz.where(x.abs() < 1, x, gradviz.ones_like(x))


def _huber(T, x):
    return real_torch.nn.functional.huber_loss(x, real_torch.zeros_like(x), reduction="none",
                                               delta=1.0)


# ---- arguments -------------------------------------------------------------------------------

class WeightedSum(Function):
    """sum over ``dim`` of x * w * scale, with keyword and non-tensor arguments."""

    @staticmethod
    def forward(ctx, x, w, dim, scale=2.0, keepdim=False, shape=None, tag=None):
        ctx.save_for_backward(x, w)
        ctx.dim, ctx.scale, ctx.keepdim = dim, scale, keepdim
        return (x * w * scale).sum(dim, keepdim=keepdim)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        if not ctx.keepdim:
            grad = grad.unsqueeze(ctx.dim)
        return grad * w * ctx.scale, grad * x * ctx.scale, None, None, None, None, None


class WeightedSumForgetsScale(WeightedSum):
    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        if not ctx.keepdim:
            grad = grad.unsqueeze(ctx.dim)
        return grad * w * ctx.scale, grad * x, None, None, None, None, None


# ---- several outputs, one used ---------------------------------------------------------------

class SinExpTwice(Function):
    """(2x, exp x, sin x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2, x.exp(), x.sin()

    @staticmethod
    def backward(ctx, g_twice, g_exp, g_sin):
        (x,) = ctx.saved_tensors
        return g_twice * 2 + g_exp * x.exp() + g_sin * x.cos()


class SinExpTwiceBadSin(SinExpTwice):
    @staticmethod
    def backward(ctx, g_twice, g_exp, g_sin):
        (x,) = ctx.saved_tensors
        return g_twice * 2 + g_exp * x.exp() - g_sin * x.cos()


class TwiceAndSquare(Function):
    """(2x, x^2) with materialize_grads off."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * 2, x * x

    @staticmethod
    def backward(ctx, g_twice, g_square):
        (x,) = ctx.saved_tensors
        result = gradviz.zeros_like(x)
        if g_twice is not None:
            result = result + 2 * g_twice
        if g_square is not None:
            result = result + 2 * x * g_square
        return result


class TwiceAndSquareGivesUpOnNone(TwiceAndSquare):
    """Returns None as soon as one gradient is None: right only when both outputs are used."""

    @staticmethod
    def backward(ctx, g_twice, g_square):
        (x,) = ctx.saved_tensors
        if g_twice is None or g_square is None:
            return None
        return 2 * g_twice + 2 * x * g_square


# ---- in place, views, nesting ----------------------------------------------------------------

class TripleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(3)

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class TripleInPlaceForgetsFactor(TripleInPlace):
    @staticmethod
    def backward(ctx, grad):
        return grad


class ExpInPlace(Function):
    """exp_ in place, saving the result."""

    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        x.exp_()
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class ExpInPlaceSquaresOutput(ExpInPlace):
    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * y


class Transpose(Function):
    """A view of the input: x.t()."""

    @staticmethod
    def forward(ctx, x):
        return x.t()

    @staticmethod
    def backward(ctx, grad):
        return grad.t()


class TransposeByReshape(Transpose):
    """reshape where a transpose is needed: the right values in the wrong places."""

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(grad.shape[1], grad.shape[0])


class DropFirstRow(Function):
    """A view of the input: x[1:]."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x[1:]

    @staticmethod
    def backward(ctx, grad):
        result = gradviz.zeros(ctx.shape, dtype=grad.dtype)
        result[1:] = grad
        return result


class DropFirstRowOffByOne(DropFirstRow):
    @staticmethod
    def backward(ctx, grad):
        result = gradviz.zeros(ctx.shape, dtype=grad.dtype)
        result[:-1] = grad
        return result


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


class SinOfSquare(Function):
    """sin(x^2), calling the Square Function inside its forward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return Square.apply(x).sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x * x).cos() * 2 * x


class SinOfSquareMissingTwo(SinOfSquare):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x * x).cos() * x


# ---- gradient shapes ----------------------------------------------------------------------------

class Triple(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class TripleFlattened(Triple):
    @staticmethod
    def backward(ctx, grad):
        return (grad * 3).reshape(-1)


class TripleTransposed(Triple):
    @staticmethod
    def backward(ctx, grad):
        return (grad * 3).t()


class AddRowBias(Function):
    """x [n, k] + b [1, k]."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(0, keepdim=True)


class AddRowBiasSumsWrongDim(AddRowBias):
    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(1, keepdim=True)


CASES = [
    Case("abs sign lost for negatives", Abs, AbsForgetsSign,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (x.abs() * w).sum(),
         arrays((normal(8, scale=2.0), True), (normal(8), False)),
         {("wrong_gradient", 0)}, hint="only where input 0 is negative"),
    Case("abs sign lost, recorded inputs all positive", Abs, AbsForgetsSign,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (x.abs() * w).sum(),
         arrays((positive(6), True), (normal(6), False)),
         {("wrong_gradient", 0)}, phrases=("scaled by -1", "at the recorded inputs it agrees"),
         hint="sign flipped", changes_gradient=False),
    Case("relu lets negatives through, recorded inputs all positive", Relu, ReluPassesNegatives,
         lambda F, x: (F.apply(x) ** 2).sum(),
         lambda T, x: (x.relu() ** 2).sum(),
         arrays((positive(6), True)),
         {("wrong_gradient", 0)}, phrases=("scaled by -1",), changes_gradient=False),
    Case("hardtanh with the wrong upper boundary", HardTanh, HardTanhWrongBoundary,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (x.clamp(-1.0, 1.0) * w).sum(),
         arrays((lambda rng: np.array([-2.5, -0.5, 0.3, 0.8, 1.3, 1.6, 1.9, 2.5]), True),
                (normal(8), False)),
         {("wrong_gradient", 0)}, hint="only for input 0 between 1.3 and 1.9"),
    Case("hardtanh wrong boundary, recorded inputs all inside", HardTanh, HardTanhWrongBoundary,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (x.clamp(-1.0, 1.0) * w).sum(),
         arrays((small(8), True), (normal(8), False)),
         {("wrong_gradient", 0)}, phrases=("scaled by 3",), hint="boundary",
         changes_gradient=False),
    Case("piecewise function, wrong branch", Huber, HuberWrongBranch,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (_huber(T, x) * w).sum(),
         arrays((lambda rng: np.concatenate([rng.uniform(-0.9, 0.9, 4), [-1.7, -2.4, 1.5]]), True),
                (normal(7), False)),
         {("wrong_gradient", 0)}, hint="only where input 0 is below"),
    Case("piecewise wrong branch, recorded inputs in the other branch", Huber, HuberWrongBranch,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (_huber(T, x) * w).sum(),
         arrays((small(8), True), (normal(8), False)),
         {("wrong_gradient", 0)}, phrases=("at other inputs than the recorded ones",),
         hint="a wrong branch of backward", changes_gradient=False),
    Case("keyword and non-tensor arguments, a factor lost", WeightedSum, WeightedSumForgetsScale,
         lambda F, x, w: (F.apply(x, w, 1, scale=3.0, keepdim=False, shape=(3, 4), tag=None)
                          ** 2).sum(),
         lambda T, x, w: ((x * w * 3.0).sum(1) ** 2).sum(),
         arrays((normal(3, 4), True), (normal(3, 4), True)),
         {("wrong_gradient", 1)}, hint="analytic = 0.3333 x numeric"),
    Case("three outputs, only the third used, its part wrong", SinExpTwice, SinExpTwiceBadSin,
         lambda F, x: (F.apply(x)[2] * 3).sum(),
         lambda T, x: (x.sin() * 3).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="only the part from output 2"),
    Case("three outputs, only the first used, the unused part wrong", SinExpTwice,
         SinExpTwiceBadSin,
         lambda F, x: F.apply(x)[0].sum(),
         lambda T, x: (x * 2).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="only the part from output 2", changes_gradient=False),
    Case("materialize_grads off, backward gives up on None", TwiceAndSquare,
         TwiceAndSquareGivesUpOnNone,
         lambda F, x: (F.apply(x)[1] * 3).sum(),
         lambda T, x: (x * x * 3).sum(),
         arrays((normal(4), True)),
         {("wrong_gradient", 0)}, phrases=("returned None", "when only output 0 is used")),
    Case("mark_dirty in-place Function, factor lost", TripleInPlace, TripleInPlaceForgetsFactor,
         lambda F, x: (F.apply(x * 1.0) ** 2).sum(),
         lambda T, x: ((x * 3) ** 2).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="analytic = 0.3333 x numeric"),
    Case("mark_dirty in-place exp saving its output, squared in backward", ExpInPlace,
         ExpInPlaceSquaresOutput,
         lambda F, x: (F.apply(x * 1.0) * 0.5).sum(),
         lambda T, x: (x.exp() * 0.5).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}),
    Case("view output, reshape where a transpose is needed", Transpose, TransposeByReshape,
         lambda F, x, w: (F.apply(x) * w).sum(),
         lambda T, x, w: (x.t() * w).sum(),
         arrays((normal(3, 4), True), (normal(4, 3), False)),
         {("wrong_gradient", 0)}, hint="a reshape (or view) where a transpose was needed"),
    Case("view output, rows off by one", DropFirstRow, DropFirstRowOffByOne,
         lambda F, x: (F.apply(x * 1.0) ** 2).sum(),
         lambda T, x: (x[1:] ** 2).sum(),
         arrays((normal(4, 3), True)),
         {("wrong_gradient", 0)}, hint="off by one"),
    Case("a Function calling another Function in forward", SinOfSquare, SinOfSquareMissingTwo,
         lambda F, x: (F.apply(x) ** 2).sum(),
         lambda T, x: ((x * x).sin() ** 2).sum(),
         arrays((normal(5), True)),
         {("wrong_gradient", 0)}, hint="analytic = 0.5 x numeric"),
    Case("gradient flattened", Triple, TripleFlattened,
         lambda F, x: (F.apply(x) ** 2).sum(),
         lambda T, x: ((x * 3) ** 2).sum(),
         arrays((normal(3, 4), True)),
         {("backward_error", 0)}, hint="reshape it",
         phrases=("returned an invalid gradient at index 0 - got [12] but expected shape "
                  "compatible with [3, 4]",),
         raises=("RuntimeError", "returned an invalid gradient at index 0"),
         changes_gradient=False),
    Case("gradient transposed", Triple, TripleTransposed,
         lambda F, x: (F.apply(x) ** 2).sum(),
         lambda T, x: ((x * 3) ** 2).sum(),
         arrays((normal(3, 4), True)),
         {("backward_error", 0)}, hint="looks transposed",
         raises=("RuntimeError", "returned an invalid gradient at index 0"),
         changes_gradient=False),
    Case("bias gradient summed over the wrong dimension", AddRowBias, AddRowBiasSumsWrongDim,
         lambda F, x, b: (F.apply(x, b) ** 2).sum(),
         lambda T, x, b: ((x + b) ** 2).sum(),
         arrays((normal(3, 3), True), (normal(1, 3), True)),
         {("backward_error", 1)}, hint="summed over the wrong dimension",
         phrases=("got [3, 1] but expected shape compatible with [1, 3]",),
         raises=("RuntimeError", "returned an invalid gradient at index 1"),
         changes_gradient=False),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_correct_program_matches_torch_and_is_clean(case, seed):
    expected = _torch_gradients(case, seed)
    for got, want in zip(_gradients(case, case.fixed, seed), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    for capture in (True, False):
        _, tensors = _leaves(case, seed)
        report = gradviz.debug.doctor(_build(case, case.fixed, tensors, capture), seed=seed)
        assert report.findings == [] and report.ok, f"{case.name}, seed {seed}:\n{report}"
        if capture:
            assert report.checked and not report.skipped, str(report)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_real(case, seed):
    if case.raises is not None:
        kind, phrase = case.raises
        with pytest.raises(Exception) as info:
            _gradients(case, case.buggy, seed)
        assert type(info.value).__name__ == kind and phrase in str(info.value)
        # torch raises the same for the same backward
        return
    expected = _torch_gradients(case, seed)
    got = _gradients(case, case.buggy, seed)
    same = all(np.allclose(g, w, rtol=1e-6, atol=1e-9) for g, w in zip(got, expected))
    assert same != case.changes_gradient, f"{case.name}: the seeded bug changes nothing"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_seeded_bug_is_diagnosed(case, seed):
    _, tensors = _leaves(case, seed)
    report = gradviz.debug.doctor(_build(case, case.buggy, tensors), seed=seed)
    _assert_diagnosis(case, report, seed)


# ---- programs beyond one Function ----------------------------------------------------------------

@pytest.mark.parametrize("capture", [True, False], ids=["capture", "no-capture"])
def test_repeated_and_mixed_functions_are_each_reported_once(capture):
    """SquareMissingTwo used twice next to two uses of the correct Square: both buggy nodes
    reported (each once, told apart by its use), neither correct one."""
    x_np = np.random.default_rng(8).standard_normal(4)

    def build(module_square, buggy):
        x = gradviz.tensor(x_np, requires_grad=True)
        if capture:
            with gradviz.debug.capture():
                return (buggy.apply(Square.apply(x) + 1) * Square.apply(buggy.apply(x))).sum(), x
        return (buggy.apply(Square.apply(x) + 1) * Square.apply(buggy.apply(x))).sum(), x

    loss, x = build(Square, Square)
    loss.backward(retain_graph=True)
    x_t = real_torch.tensor(x_np, requires_grad=True)
    (((x_t * x_t + 1) ** 2) * (x_t * x_t) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-10)
    report = gradviz.debug.doctor(loss)
    assert report.findings == [] and len(report.checked) == 4, str(report)

    loss, _ = build(Square, SquareMissingTwo)
    report = gradviz.debug.doctor(loss)
    assert len(report.checked) == 4, str(report)
    assert [(f.kind, f.function, f.input_index) for f in report.findings] \
        == [("wrong_gradient", SquareMissingTwo, 0)] * 2, str(report)
    assert len({f.node for f in report.findings}) == 2
    assert sorted(f.details["use"] for f in report.findings) == [1, 2]
    assert all("of 2 of SquareMissingTwo" in f.message for f in report.findings)


class LinearFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x, grad.sum(0)


class LinearFnBiasMean(LinearFn):
    """mean over the batch where the sum is needed."""

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x, grad.mean(0)


def _train(fn, steps=2):
    """A two-layer model whose layers are ``fn`` inside an nn.Module, trained with SGD; the
    doctor runs on the graph of the last step, before its backward."""
    class Layer(gradviz.nn.Module):
        def __init__(self, weight, bias):
            super().__init__()
            self.weight = gradviz.nn.Parameter(gradviz.tensor(weight))
            self.bias = gradviz.nn.Parameter(gradviz.tensor(bias))

        def forward(self, x):
            return fn.apply(x, self.weight, self.bias)

    rng = np.random.default_rng(21)
    shapes = [(8, 4), (2, 8)]
    init = [(rng.standard_normal(s) * 0.5, rng.standard_normal(s[0]) * 0.1) for s in shapes]
    model = gradviz.nn.Sequential(Layer(*init[0]), gradviz.nn.Tanh(), Layer(*init[1]))
    optimizer = gradviz.optim.SGD(model.parameters(), lr=0.1)
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 2))
    report = None
    for step in range(steps):
        optimizer.zero_grad()
        with gradviz.debug.capture():
            loss = gradviz.nn.functional.mse_loss(model(gradviz.tensor(x)), gradviz.tensor(y))
        if step == steps - 1:
            report = gradviz.debug.doctor(loss)
        loss.backward()
        optimizer.step()
    return report, model, init, x, y


def test_buggy_function_inside_a_module_in_a_training_step():
    report, model, init, x, y = _train(LinearFn)
    assert report.findings == [] and len(report.checked) == 2, str(report)
    # the correct model trains as torch does
    ref = real_torch.nn.Sequential(real_torch.nn.Linear(4, 8), real_torch.nn.Tanh(),
                                   real_torch.nn.Linear(8, 2)).double()
    with real_torch.no_grad():
        for layer, (w, b) in zip((ref[0], ref[2]), init):
            layer.weight.copy_(real_torch.tensor(w))
            layer.bias.copy_(real_torch.tensor(b))
    optimizer = real_torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        real_torch.nn.functional.mse_loss(ref(real_torch.tensor(x)), real_torch.tensor(y)).backward()
        optimizer.step()
    for mine, theirs in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(mine.detach().numpy(), theirs.detach().numpy(), rtol=1e-10)

    report, *_ = _train(LinearFnBiasMean)
    assert [(f.kind, f.function, f.input_index) for f in report.findings] \
        == [("wrong_gradient", LinearFnBiasMean, 2)] * 2, str(report)
    assert all("analytic = 0.0625 x numeric" in f.message for f in report.findings)  # 1/16


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


class CubeDetachesGrad(Cube):
    """First derivative right; grad_output detached, so create_graph=True loses d/d(grad)."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad.detach()


def _grad_output_program(module, fn, x_np, w_np):
    """d/dw of sum(d<fn(x), w>/dx): differentiates backward through its grad_output."""
    x = module.tensor(x_np, requires_grad=True)
    w = module.tensor(w_np, requires_grad=True)
    inner = (fn(x) * w).sum()
    (gx,) = module.autograd.grad(inner, x, create_graph=True)
    return gx.sum(), inner, w


def test_double_backward_through_grad_output():
    rng = np.random.default_rng(6)
    x_np, w_np = rng.standard_normal(5), rng.standard_normal(5)
    outer, _, w_ref = _grad_output_program(real_torch, lambda t: t ** 3, x_np, w_np)
    outer.backward()
    with gradviz.debug.capture():
        outer, inner, w = _grad_output_program(gradviz, Cube.apply, x_np, w_np)
    outer.backward()
    np.testing.assert_allclose(w.grad.numpy(), w_ref.grad.numpy(), rtol=1e-10)
    report = gradviz.debug.doctor(inner, double_backward=True)
    assert report.findings == [] and report.checked, str(report)

    with gradviz.debug.capture():
        outer, inner, w = _grad_output_program(gradviz, CubeDetachesGrad.apply, x_np, w_np)
    outer.backward()
    assert w.grad is None and np.any(w_ref.grad.numpy())  # the bug is real: d/dw is lost
    assert gradviz.debug.doctor(inner).findings == []  # first order is right
    report = gradviz.debug.doctor(inner, double_backward=True)
    (finding,) = report.findings
    assert (finding.kind, finding.function, finding.input_index) \
        == ("wrong_double_backward", CubeDetachesGrad, 0), str(report)
    assert "with respect to grad_output" in finding.message
    assert "detaches grad_output" in finding.hint


# ---- dtypes ---------------------------------------------------------------------------------------

class SquareReturnsDouble(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (2 * x * grad).double()


class SquareReturnsDoubleMissingTwo(Square):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (x * grad).double()


def test_float64_gradient_for_float32_input():
    x_np = np.random.default_rng(4).standard_normal(5).astype(np.float32)
    x_t = real_torch.tensor(x_np, requires_grad=True)
    (x_t * x_t).sum().backward()
    x = gradviz.tensor(x_np, requires_grad=True)
    with gradviz.debug.capture():
        loss = SquareReturnsDouble.apply(x).sum()
    report = gradviz.debug.doctor(loss)
    loss.backward()
    assert x.grad.dtype == gradviz.float32  # cast, as torch casts it
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-6)
    (finding,) = report.findings
    assert (finding.kind, finding.severity, finding.input_index) == ("coerced_gradient", "warning", 0)
    assert report.ok
    # wrong as well: the wrong gradient is the problem; the cast stays a warning
    x = gradviz.tensor(x_np, requires_grad=True)
    with gradviz.debug.capture():
        loss = SquareReturnsDoubleMissingTwo.apply(x).sum()
    report = gradviz.debug.doctor(loss)
    assert {(f.kind, f.severity, f.input_index) for f in report.findings} \
        == {("wrong_gradient", "error", 0), ("coerced_gradient", "warning", 0)}, str(report)


# ---- float32: no false alarms -------------------------------------------------------------------

class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Softmax(Function):
    @staticmethod
    def forward(ctx, x):
        e = (x - x.max(-1, keepdim=True)[0]).exp()
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True))


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x):
        m = x.max(-1, keepdim=True)[0]
        out = m + (x - m).exp().sum(-1, keepdim=True).log()
        ctx.save_for_backward(x, out)
        return out.squeeze(-1)

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return grad.unsqueeze(-1) * (x - out).exp()


class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        centered = x - x.mean(-1, keepdim=True)
        rstd = 1 / ((centered * centered).mean(-1, keepdim=True) + eps).sqrt()
        normed = centered * rstd
        ctx.save_for_backward(normed, rstd, weight)
        return normed * weight + bias

    @staticmethod
    def backward(ctx, grad):
        normed, rstd, weight = ctx.saved_tensors
        g = grad * weight
        dx = rstd * (g - g.mean(-1, keepdim=True) - normed * (g * normed).mean(-1, keepdim=True))
        return dx, (grad * normed).sum(0), grad.sum(0), None


FLOAT32 = {  # name: (Function, its extra arguments, torch's version, inputs)
    "exp": (Exp, lambda m: (), lambda x: x.exp(), lambda rng: rng.standard_normal(8) * 2 + 6),
    "softmax": (Softmax, lambda m: (), lambda x: x.softmax(-1),
                lambda rng: rng.standard_normal((3, 7)) * 10),
    "logsumexp": (LogSumExp, lambda m: (), lambda x: x.logsumexp(-1),
                  lambda rng: rng.standard_normal((3, 7)) * 10 + 50),
    "layer norm": (LayerNorm, lambda m: _affine(m, 16),
                   lambda x: real_torch.nn.functional.layer_norm(x, (16,), *_affine(real_torch, 16)),
                   lambda rng: rng.standard_normal((4, 16)) * 20 + 60),
}


def _affine(module, n):
    rng = np.random.default_rng(99)
    weight = (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(n)).astype(np.float32)
    return module.tensor(weight, requires_grad=True), module.tensor(bias, requires_grad=True)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("name", sorted(FLOAT32))
def test_correct_float32_functions_with_large_values_are_clean(name, seed):
    fn, extra, reference, make = FLOAT32[name]
    rng = np.random.default_rng(seed)
    x_np = make(rng).astype(np.float32)
    x = gradviz.tensor(x_np, requires_grad=True)
    with gradviz.debug.capture():
        out = fn.apply(x, *extra(gradviz))
        weights = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        loss = (out * gradviz.tensor(weights)).sum()
    report = gradviz.debug.doctor(loss, seed=seed)
    assert report.findings == [] and report.checked and not report.skipped, f"{name}:\n{report}"
    loss.backward()
    x_t = real_torch.tensor(x_np, requires_grad=True)
    (reference(x_t) * real_torch.tensor(weights)).sum().backward()
    assert x.grad.dtype == gradviz.float32
    scale = float(np.abs(x_t.grad.numpy()).max())
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-3, atol=1e-4 * scale)


# ---- what the doctor does not take ---------------------------------------------------------------

def test_roots_from_gradviz_and_pytorch_together_are_refused_with_the_way_to_go():
    """A PyTorch loss is diagnosed (test_doctor_torch.py); roots from both libraries are not
    one graph."""
    x = real_torch.tensor([1.0, 2.0], requires_grad=True)
    y = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"loss\[1\] is a PyTorch Tensor but loss\[0\] is a "
                                        r"gradviz tensor; the roots must come from one graph"):
        gradviz.debug.doctor([(y * y).sum(), (x * x).sum()])


class ScaleByListSum(Function):
    """A list of tensors is not a tensor argument (as in torch): no gradient flows into it."""

    @staticmethod
    def forward(ctx, x, scales):
        ctx.total = float(sum(s.sum() for s in scales))
        return x * ctx.total

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.total, None


def test_list_of_tensors_argument_gets_no_gradient_as_in_torch_and_is_checked_in_capture():
    x_np, s_np = np.array([1.0, -2.0, 0.5]), np.array([0.5, 1.5])

    class TorchScale(real_torch.autograd.Function):
        forward = staticmethod(lambda ctx, x, scales: ScaleByListSum.forward(ctx, x, scales))
        backward = staticmethod(ScaleByListSum.backward)

    x_t, s_t = real_torch.tensor(x_np, requires_grad=True), real_torch.tensor(s_np, requires_grad=True)
    TorchScale.apply(x_t, [s_t]).sum().backward()
    x, s = gradviz.tensor(x_np, requires_grad=True), gradviz.tensor(s_np, requires_grad=True)
    with gradviz.debug.capture():
        loss = ScaleByListSum.apply(x, [s]).sum()
    report = gradviz.debug.doctor(loss)
    assert report.findings == [] and len(report.checked) == 1, str(report)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy())
    assert s.grad is None and s_t.grad is None
    # outside capture the list is kept by default (Note [Kept forward inputs]): checked
    report = gradviz.debug.doctor(ScaleByListSum.apply(x, [s]).sum())
    assert report.findings == [] and len(report.checked) == 1, str(report)
    # with the switch off it is not kept: skipped, with the reason
    with gradviz.debug.keep_forward_inputs(False):
        loss = ScaleByListSum.apply(x, [s]).sum()
    report = gradviz.debug.doctor(loss)
    (node, reason), = report.skipped
    assert "non-tensors" in reason and "capture()" in reason
