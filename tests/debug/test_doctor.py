"""The gradient doctor (``gradviz.debug.doctor``) against deliberately wrong custom Functions.

Every wrong Function must be found with the right ``kind``, ``function`` and
``input_index``; every correct one must give no finding at all, over many random seeds and
inputs placed on and near kinks (the doctor's oracle is central finite differences, so the
correct Functions here are checked against torch as well, to make sure they are correct).
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch as real_torch

import gradviz
import gradviz as torch
from gradviz.debug import _capture, _doctor, _report
from gradviz_ext import engine as _engine

Function = torch.autograd.Function
SEEDS = range(12)


def diagnose(build, **options):
    """Build the graph inside capture() and run the doctor on the loss."""
    with torch.debug.capture():
        loss = build()
    return torch.debug.doctor(loss, **options)


def only(report, kind):
    found = report.by_kind(kind)
    assert len(found) == 1, f"expected one {kind} finding:\n{report}"
    return found[0]


def leaf(array, dtype=np.float64):
    return torch.tensor(np.asarray(array, dtype=dtype), requires_grad=True)


# ---- deliberately wrong Functions --------------------------------------------------------

class MulBad(Function):
    """Wrong sign in the gradient of b."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, -(grad * a)


class MulSwapped(Function):
    """The gradients of a and b exchanged."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * a, grad * b


class SquareForgotFactor(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # should be 2 * x


class SquareIgnoresGrad(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x  # forgot grad_output


class BiasAddWrongDim(Function):
    """x [n, n] + b [n] (b broadcast over rows); backward reduces over the wrong dimension."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.sum(1)  # should be grad.sum(0)


class StackedGrad(Function):
    """Returns the gradient with an extra leading dimension; the engine sums it: doubled."""

    @staticmethod
    def forward(ctx, x):
        return x * 3.0

    @staticmethod
    def backward(ctx, grad):
        return torch.stack([grad * 3.0, grad * 3.0])


class DoubleGradForFloat(Function):
    """Correct values, but the gradient comes back as float64 for a float32 input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (2 * x * grad).to(torch.float64)


class PowTwoViaLog(Function):
    """x ** 2 whose backward goes through log(x): NaN for x < 0, though the gradient is finite."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * torch.exp(torch.log(x))


class SavesInput(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class SavesOutput(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Raises(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("boom")


# ---- correct Functions -------------------------------------------------------------------

class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


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


class ClippedReLU(Function):
    """clamp(x, 0, 6), gradient 1 strictly inside, 0 outside (and at the kinks)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(0.0, 6.0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inside = ((x > 0) & (x < 6)).to(grad.dtype)
        return grad * inside


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.abs()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign()


class BroadcastMatMul(Function):
    """a [B, n, k] @ b [k, m]; b's gradient is reduced over the batch by backward itself."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.t(), (a.transpose(-1, -2) @ grad).sum(0)


class BroadcastMatMulEngineSums(Function):
    """As above, but returns b's gradient per batch and lets the engine sum it (legal)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.t(), a.transpose(-1, -2) @ grad


class BiasAdd(Function):
    """The bias gradient of the broadcast shape, summed by the engine: fine."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class MixedArgs(Function):
    """Tensor, int tensor, bool tensor, float and str arguments; only x is differentiable."""

    @staticmethod
    def forward(ctx, x, index, mask, scale, mode):
        assert mode == "gather"
        ctx.save_for_backward(x, index, mask)
        ctx.scale = scale
        picked = x[index]
        return torch.where(mask, picked * scale, picked * picked)

    @staticmethod
    def backward(ctx, grad):
        x, index, mask = ctx.saved_tensors
        picked = x[index]
        local = torch.where(mask, torch.full_like(picked, ctx.scale), 2 * picked)
        result = torch.zeros_like(x).index_add(0, index, grad * local)
        return result, None, None, None, None


class SortValues(Function):
    """Sorted values and (non-differentiable) indices."""

    @staticmethod
    def forward(ctx, x):
        values, indices = torch.sort(x)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        return torch.zeros_like(grad_values).scatter(0, indices, grad_values)


class TwoOutputs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2, x.exp()

    @staticmethod
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_tensors
        return g1 * 2 + g2 * x.exp()


class IgnoresSecond(Function):
    """y does not affect the output; backward returns None for it (its gradient is zero)."""

    @staticmethod
    def forward(ctx, x, y):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2, None


class NoneButNeeded(Function):
    """y does affect the output, but backward returns None for it: wrong."""

    @staticmethod
    def forward(ctx, x, y):
        return x * 2 + y

    @staticmethod
    def backward(ctx, grad):
        return grad * 2, None


class Float32Only(Function):
    """Refuses float64: the doctor must check it in float32 with float32 tolerances."""

    @staticmethod
    def forward(ctx, x):
        if x.dtype != torch.float32:
            raise TypeError("Float32Only works in float32 only")
        ctx.save_for_backward(x)
        return torch.tanh(x) * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        t = torch.tanh(x)
        return grad * (t + x * (1 - t * t))


class Float32OnlyWrong(Float32Only):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.tanh(x)


# ---- the wrong ones are found ------------------------------------------------------------

def test_wrong_sign_is_found_and_reads_like_a_diagnosis():
    a, b = leaf([[1.0, -2.0], [0.5, 3.0]]), leaf([[0.3, 1.0], [-1.2, 2.0]])
    report = diagnose(lambda: MulBad.apply(a, b).sum())
    assert not report.ok
    finding = only(report, "wrong_gradient")
    assert finding.function is MulBad
    assert finding.input_index == 1
    assert finding.node.name() == "MulBadBackward"
    assert finding.max_abs_error == pytest.approx(6.0, rel=1e-4)
    assert finding.worst[0].index == (1, 1)
    assert finding.worst[0].analytic == pytest.approx(-3.0)
    assert finding.worst[0].numeric == pytest.approx(3.0, rel=1e-5)
    text = str(report)
    assert "MulBadBackward input 1: gradient disagrees with finite differences" in text
    assert "sign flipped?" in text
    assert "at [1, 1]: analytic -3" in text


def test_swapped_inputs_are_named():
    a, b = leaf([1.0, 2.0, 3.0]), leaf([-0.5, 4.0, 0.25])
    report = diagnose(lambda: MulSwapped.apply(a, b).sum())
    findings = report.by_kind("wrong_gradient")
    assert [f.input_index for f in findings] == [0, 1]
    assert all(f.function is MulSwapped for f in findings)
    assert "inputs 0 and 1 swapped" in findings[0].message


def test_forgotten_factor():
    x = leaf([1.0, -2.0, 0.5])
    finding = only(diagnose(lambda: SquareForgotFactor.apply(x).sum()), "wrong_gradient")
    assert (finding.function, finding.input_index) == (SquareForgotFactor, 0)
    assert "constant factor (analytic = 0.5 x numeric)" in finding.message


def test_ignored_incoming_gradient():
    x = leaf([1.0, -2.0, 0.5])
    # a non-trivial grad_output: the loss weights the outputs
    weights = torch.tensor([3.0, -1.0, 2.0])
    finding = only(diagnose(lambda: (SquareIgnoresGrad.apply(x) * weights).sum()), "wrong_gradient")
    assert (finding.function, finding.input_index) == (SquareIgnoresGrad, 0)
    assert "incoming gradient ignored" in finding.message


def test_reduction_over_the_wrong_dimension():
    x, b = leaf(np.arange(9.0).reshape(3, 3)), leaf([0.1, 0.2, 0.3])
    report = diagnose(lambda: BiasAddWrongDim.apply(x, b).pow(2).sum())
    finding = only(report, "wrong_gradient")
    assert (finding.function, finding.input_index) == (BiasAddWrongDim, 1)


def test_shape_coerced_gradient():
    x = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    report = diagnose(lambda: StackedGrad.apply(x).sum())
    finding = only(report, "coerced_gradient")
    assert (finding.function, finding.input_index, finding.severity) == (StackedGrad, 0, "error")
    assert "shape [2, 2, 3] for an input of shape [2, 3]" in finding.message
    assert "constant factor (analytic = 2 x numeric)" in finding.message
    assert not report.by_kind("wrong_gradient")


def test_dtype_coerced_gradient_is_a_warning():
    x = leaf([1.0, -2.0, 0.5], dtype=np.float32)
    report = diagnose(lambda: DoubleGradForFloat.apply(x).sum())
    finding = only(report, "coerced_gradient")
    assert (finding.function, finding.input_index, finding.severity) == (DoubleGradForFloat, 0, "warning")
    assert "float64 gradient for a float32 input" in finding.message
    assert report.ok and len(report.findings) == 1


def test_nonfinite_backward_is_the_first_node():
    x = leaf([1.0, -2.0, 0.5])
    report = diagnose(lambda: (PowTwoViaLog.apply(x) * 3).exp().sum())
    finding = only(report, "nonfinite")
    assert (finding.function, finding.input_index) == (PowTwoViaLog, 0)
    assert finding.details["inputs_nonfinite"] is False
    assert "from finite incoming gradients" in finding.message
    assert finding.worst and finding.worst[0].index == (1,)
    assert not report.by_kind("wrong_gradient")  # the finite entries are right


def test_nonfinite_in_a_builtin_node():
    x = leaf([0.0, 4.0])
    report = torch.debug.doctor(torch.sqrt(x).sum())
    finding = only(report, "nonfinite")
    assert finding.function is None and finding.node.name() == "SqrtBackward0"
    assert finding.input_index == 0


def test_nonfinite_incoming_gradient_is_said():
    x = leaf([1.0, 2.0])
    report = torch.debug.doctor(Square.apply(x), gradient=torch.tensor([np.nan, 1.0]))
    finding = only(report, "nonfinite")
    assert finding.details["inputs_nonfinite"] is True
    assert "already non-finite" in finding.message


def test_saved_input_written_through_numpy():
    a, b = leaf([1.0, 2.0, 3.0]), leaf([4.0, 5.0, 6.0])
    with torch.debug.capture():
        loss = SavesInput.apply(a, b).sum()
    b.detach().numpy()[1] = 50.0  # invisible to the version counter
    report = torch.debug.doctor(loss)
    finding = only(report, "mutated_saved")
    assert (finding.function, finding.input_index) == (SavesInput, 1)
    assert finding.worst[0] == _doctor.Entry((1,), 5.0, 50.0)
    assert "bypassed the version counter" in finding.message
    assert not report.by_kind("wrong_gradient")  # the Function itself is right


def test_saved_output_written_through_data():
    x = leaf([0.5, 1.0])
    with torch.debug.capture():
        y = SavesOutput.apply(x)
        loss = y.sum()
    y.data.numpy()[0] = -1.0
    finding = only(torch.debug.doctor(loss), "mutated_saved")
    assert (finding.function, finding.input_index) == (SavesOutput, None)
    assert "saved tensor 0 (output 0)" in finding.message


def test_saved_tensor_modified_in_place_without_capture():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    c = b * 1.0
    loss = SavesInput.apply(a, c).sum()
    c.mul_(2.0)
    report = torch.debug.doctor(loss)
    finding = only(report, "mutated_saved")
    assert (finding.function, finding.input_index) == (SavesInput, 1)
    assert "version from 0 to 1" in finding.message
    assert not report.by_kind("backward_error")


def test_none_where_the_gradient_is_not_zero():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    finding = only(diagnose(lambda: NoneButNeeded.apply(x, y).sum()), "wrong_gradient")
    assert (finding.function, finding.input_index) == (NoneButNeeded, 1)
    assert "returned None, but the gradient is not zero" in finding.message


def test_float32_only_function_wrong():
    x = leaf([0.3, -1.2, 2.0, 0.7], dtype=np.float32)
    finding = only(diagnose(lambda: Float32OnlyWrong.apply(x).sum()), "wrong_gradient")
    assert (finding.function, finding.input_index) == (Float32OnlyWrong, 0)
    assert finding.details["dtype"] == "float32"


def test_backward_that_raises():
    x = leaf([1.0, 2.0])
    report = diagnose(lambda: Raises.apply(x).sum())
    finding = only(report, "backward_error")
    assert finding.function is Raises and "ValueError: boom" in finding.message


def test_only_the_wrong_function_is_reported_in_a_larger_graph():
    a, b = leaf([[0.5, -1.0], [2.0, 0.1]]), leaf([[1.5, 0.2], [-0.3, 0.8]])

    def build():
        h = ClippedReLU.apply(Square.apply(a) - 1.0)
        return (Exp.apply(MulBad.apply(h, b) * 0.1) + SquareForgotFactor.apply(b)).sum()

    report = diagnose(build)
    found = {(f.kind, f.function, f.input_index) for f in report.findings}
    assert found == {("wrong_gradient", MulBad, 1), ("wrong_gradient", SquareForgotFactor, 0)}
    assert len(report.checked) == 5 and not report.skipped


# ---- the correct ones are not reported ---------------------------------------------------

NEAR_KINKS = [0.0, 6.0, 1e-9, -1e-9, 6 + 1e-9, 6 - 1e-9, 3e-7, -3e-7, 6 + 2e-6, -2e-6]


def _torch_grad(fn_torch, arrays, upstream):
    inputs = [real_torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn_torch(*inputs)
    return [g.numpy() for g in real_torch.autograd.grad(out, inputs, real_torch.tensor(upstream))]


@pytest.mark.parametrize("seed", SEEDS)
def test_correct_elementwise_functions_have_no_findings(seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.standard_normal(14) * 4, NEAR_KINKS])
    for cls in (Square, Exp, ClippedReLU, Abs):
        x = leaf(values)
        report = diagnose(lambda: (cls.apply(x) * torch.tensor(rng.standard_normal(values.size))).sum(),
                          seed=seed)
        assert report.findings == [], f"{cls.__name__}, seed {seed}:\n{report}"
        assert report.checked and not report.skipped


@pytest.mark.parametrize("seed", SEEDS)
def test_correct_broadcast_matmul_has_no_findings(seed):
    rng = np.random.default_rng(seed)
    a_np, b_np = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    upstream = rng.standard_normal((2, 3, 5))
    expected = _torch_grad(lambda a, b: a @ b, [a_np, b_np], upstream)
    for cls in (BroadcastMatMul, BroadcastMatMulEngineSums):
        a, b = leaf(a_np), leaf(b_np)
        torch.autograd.backward(cls.apply(a, b), torch.tensor(upstream))
        np.testing.assert_allclose(a.grad.numpy(), expected[0], rtol=1e-10)
        np.testing.assert_allclose(b.grad.numpy(), expected[1], rtol=1e-10)
        report = diagnose(lambda: (cls.apply(a, b) * torch.tensor(upstream)).sum(), seed=seed)
        assert report.findings == [], f"{cls.__name__}, seed {seed}:\n{report}"


@pytest.mark.parametrize("seed", SEEDS)
def test_correct_special_signatures_have_no_findings(seed):
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal(6)
    index = torch.tensor(rng.integers(0, 6, size=8))
    mask = torch.tensor(rng.random(8) < 0.5)
    cases = {
        MixedArgs: lambda x: MixedArgs.apply(x, index, mask, 1.5, "gather").sum(),
        SortValues: lambda x: (SortValues.apply(x)[0] * torch.arange(6.0)).sum(),
        TwoOutputs: lambda x: TwoOutputs.apply(x)[0].sum(),  # second output unused
        IgnoresSecond: lambda x: IgnoresSecond.apply(x, leaf(rng.standard_normal(6))).sum(),
        BiasAdd: lambda x: (BiasAdd.apply(x.reshape(2, 3), x[:3]) ** 2).sum(),
    }
    for cls, build in cases.items():
        x = leaf(x_np)
        report = diagnose(lambda: build(x), seed=seed)
        assert report.findings == [], f"{cls.__name__}, seed {seed}:\n{report}"
        assert not report.skipped, f"{cls.__name__}: {report}"


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_only_function_is_checked_in_float32(seed):
    rng = np.random.default_rng(seed)
    x = leaf(rng.standard_normal(12) * 2, dtype=np.float32)
    report = diagnose(lambda: Float32Only.apply(x).sum(), seed=seed)
    assert report.findings == [], str(report)
    assert report.checked


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_graph_of_correct_functions(seed):
    rng = np.random.default_rng(seed)
    x = leaf(np.concatenate([rng.standard_normal(10), NEAR_KINKS]), dtype=np.float32)
    report = diagnose(lambda: Exp.apply(ClippedReLU.apply(Square.apply(x) * 0.5)).sum(), seed=seed)
    assert report.findings == [], str(report)


def test_setup_context_style_function():
    class SetupSquare(Function):
        @staticmethod
        def forward(x, scale):
            return x * x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, scale = inputs
            ctx.save_for_backward(x)
            ctx.scale = scale

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x * ctx.scale, None

    x = leaf([1.0, -2.0])
    report = diagnose(lambda: SetupSquare.apply(x, 3.0).sum())
    assert report.findings == [] and len(report.checked) == 1, str(report)


# ---- outside capture, graph state, progress, sessions ------------------------------------

def test_outside_capture_saved_inputs_are_enough():
    a, b = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    report = torch.debug.doctor(MulBad.apply(a, b).sum())
    assert only(report, "wrong_gradient").input_index == 1


def test_outside_capture_constant_arguments_are_kept_and_checked():
    x = leaf([1.0, 2.0])
    report = torch.debug.doctor(MixedArgs.apply(x, torch.tensor([0, 1]), torch.tensor([True, False]),
                                                2.0, "gather").sum())
    assert report.findings == [] and not report.skipped
    assert [node.name() for node in report.checked] == ["MixedArgsBackward"]


class WithOptions(Function):
    """An argument that is not a plain constant (a dict): nodes do not keep it."""

    @staticmethod
    def forward(ctx, x, options):
        ctx.scale = options["scale"]
        return x * options["scale"]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def test_outside_capture_other_arguments_are_kept_by_default():
    report = torch.debug.doctor(WithOptions.apply(leaf([1.0, 2.0]), {"scale": 3.0}).sum())
    assert report.findings == [] and len(report.checked) == 1 and not report.skipped


def test_outside_capture_unrecorded_arguments_are_skipped_with_a_reason():
    x = leaf([1.0, 2.0])
    with torch.debug.keep_forward_inputs(False):
        report = torch.debug.doctor(WithOptions.apply(x, {"scale": 3.0}).sum())
    assert report.findings == [] and not report.checked
    (node, reason), = report.skipped
    assert node.name() == "WithOptionsBackward"
    assert "gradviz.debug.capture()" in reason and "non-tensors" in reason
    assert "keep_forward_inputs on" in reason
    assert "skipped: WithOptionsBackward" in str(report)
    with torch.debug.capture():
        loss = WithOptions.apply(leaf([1.0, 2.0]), {"scale": 3.0}).sum()
    captured = torch.debug.doctor(loss)
    assert captured.findings == [] and len(captured.checked) == 1 and not captured.skipped


def test_doctor_leaves_grads_and_saved_tensors_alone():
    a, b = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    with torch.debug.capture():
        loss = (MulBad.apply(a, b) * Square.apply(a)).sum()
    loss.backward(retain_graph=True)
    grads = (a.grad, b.grad, a.grad.numpy().copy(), b.grad.numpy().copy())
    torch.debug.doctor(loss)
    assert a.grad is grads[0] and b.grad is grads[1]
    np.testing.assert_array_equal(a.grad.numpy(), grads[2])
    np.testing.assert_array_equal(b.grad.numpy(), grads[3])
    loss.backward()  # saved tensors are still there
    np.testing.assert_array_equal(a.grad.numpy(), 2 * grads[2])


def test_leaves_without_grad_stay_without_grad():
    x = leaf([1.0, 2.0])
    torch.debug.doctor(Square.apply(x).sum())
    assert x.grad is None


def test_progress_callback():
    calls = []
    x = leaf([1.0, 2.0])
    diagnose(lambda: Exp.apply(Square.apply(x)).sum(), progress=lambda *a: calls.append(a))
    assert [c[:2] for c in calls] == [(1, 3), (2, 3), (3, 3)]
    assert calls[0][2] == "backward pass" and calls[1][2] == "ExpBackward"


def test_capture_nests_and_restores_the_previous_observer():
    class Watcher(_engine.Observer):
        def __init__(self):
            self.created = 0

        def node_created(self, node):
            self.created += 1

    watcher = Watcher()
    previous = _engine.set_forward_observer(watcher)
    try:
        x = leaf([1.0])
        with torch.debug.capture():
            with torch.debug.capture():
                y = Square.apply(x)
            assert isinstance(_engine.forward_observer(), _capture._CaptureObserver)
        assert _engine.forward_observer() is watcher
        assert watcher.created == 1
        assert y.grad_fn._forward_args is not None
        assert _capture.fingerprints_of(y.grad_fn)
    finally:
        _engine.set_forward_observer(previous)
    assert _engine.forward_observer() is previous


def test_doctor_does_not_record_its_reruns():
    class Watcher(_engine.Observer):
        created = 0

        def node_created(self, node):
            Watcher.created += 1

    x = leaf([1.0, 2.0])
    loss = Square.apply(x).sum()
    previous = _engine.set_forward_observer(Watcher())
    try:
        torch.debug.doctor(loss)
    finally:
        _engine.set_forward_observer(previous)
    assert Watcher.created == 0


def test_large_inputs_are_sampled():
    x = leaf(np.linspace(-2, 2, 2000))
    finding = only(diagnose(lambda: SquareForgotFactor.apply(x).sum(), max_entries=50), "wrong_gradient")
    assert finding.details["checked"] == 50 and finding.details["sampled"]


def test_random_forward_is_checked_with_one_draw_and_the_global_streams_are_left_alone():
    """Note [Random forwards]: every re-run starts the global generators from one state, so
    a backward that ignores what forward drew is found; the user's streams do not move."""
    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.c = float(np.random.random()) + 0.5
            return x * ctx.c

        @staticmethod
        def backward(ctx, grad):
            return grad  # forgets the factor drawn in forward

    x = leaf([1.0, 2.0])
    with torch.debug.capture():
        loss = Noisy.apply(x).sum()
    numpy_before = np.random.get_state()[1].copy()
    torch.manual_seed(5)
    expected = torch.rand(3).numpy()
    torch.manual_seed(5)
    report = torch.debug.doctor(loss)
    finding = only(report, "wrong_gradient")
    assert "off by a constant factor" in finding.message and not report.skipped, str(report)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_before)
    np.testing.assert_array_equal(torch.rand(3).numpy(), expected)


def test_forward_drawing_from_its_own_generator_is_skipped():
    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * float(np.random.default_rng().random())

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = leaf([1.0, 2.0])
    report = diagnose(lambda: Noisy.apply(x).sum())
    (node, reason), = report.skipped
    assert "not deterministic" in reason and report.findings == []


def test_debug_session_doctor():
    a, b = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    with torch.debug.capture():
        loss = MulBad.apply(a, b).sum()
    session = torch.debug.backward(loss)
    report = session.doctor()
    assert only(report, "wrong_gradient").input_index == 1
    assert session.status == "paused"
    session.continue_()
    assert a.grad is not None


def test_loss_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.debug.doctor(torch.tensor([1.0]))


@pytest.mark.parametrize("module", [_doctor, _report, _capture], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, globs={"gradviz": gradviz}) if t.examples]
    assert tests
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_wrong_functions_are_found_at_random_inputs(seed):
    rng = np.random.default_rng(100 + seed)
    a_np, b_np = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    cases = [
        (MulBad, lambda a, b: MulBad.apply(a, b), {1}),
        (MulSwapped, lambda a, b: MulSwapped.apply(a, b), {0, 1}),
        (SquareForgotFactor, lambda a, b: SquareForgotFactor.apply(a) * b, {0}),
        (SquareIgnoresGrad, lambda a, b: SquareIgnoresGrad.apply(a) * b, {0}),
        (BiasAddWrongDim, lambda a, b: BiasAddWrongDim.apply(a, b[0]) * b, {1}),
        (NoneButNeeded, lambda a, b: NoneButNeeded.apply(a, b), {1}),
    ]
    for cls, build, slots in cases:
        a, b = leaf(a_np), leaf(b_np)
        report = diagnose(lambda: (build(a, b) * torch.tensor(rng.standard_normal((3, 3)))).sum(),
                          seed=seed)
        found = {(f.kind, f.function, f.input_index) for f in report.findings}
        assert found == {("wrong_gradient", cls, s) for s in slots}, f"seed {seed}:\n{report}"


def test_after_the_graph_was_freed_the_recorded_inputs_still_serve():
    a, b = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    with torch.debug.capture():
        loss = (MulBad.apply(a, b) * Square.apply(a)).sum()
    loss.backward()
    report = torch.debug.doctor(loss)
    assert [(f.kind, f.input_index) for f in report.findings] == [("wrong_gradient", 1)]
    assert "already freed" in report.notes[0]
