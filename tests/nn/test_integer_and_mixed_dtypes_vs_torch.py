"""Conformance gaps with torch 2.13 closed one by one: the dtype rules of the fused losses
(mixed float32/float64 operands, integer operands), average pooling and dropout on integer
tensors. Each case runs in both libraries: result dtype and values, gradients where torch has
them, and torch's error type and key phrase where it refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close

import gradviz

F32, F64 = "float32", "float64"


def run(lib, fn):
    """``fn(lib)``, or the exception it raised."""
    try:
        return fn(lib)
    except Exception as error:  # noqa: BLE001 - compared with torch's below
        return error


def agree(fn, grads=False, rtol=None):
    """``fn(lib, leaves)`` in gradviz and torch: the same exception type with torch's message,
    or the same result (dtype, shape, values; within ``rtol`` when the two compute in
    different precisions); with ``grads``, the gradients of ``result.sum()`` for the tensors
    ``fn`` appended to ``leaves`` too."""
    leaves = {gradviz: [], torch: []}
    got, want = (run(lib, lambda lib: fn(lib, leaves[lib])) for lib in (gradviz, torch))
    if isinstance(want, Exception):
        assert type(got) is type(want), f"gradviz {got!r}, torch raised {want!r}"
        assert str(want).split("\n")[0] in str(got), (str(got), str(want))
        return
    assert not isinstance(got, Exception), f"gradviz raised {got!r}, torch gave {want}"
    compare(got, want, "result", rtol)
    if grads and want.requires_grad:
        pairs = zip(*[lib.autograd.grad(result.sum(), leaves[lib]) for lib, result in
                      ((gradviz, got), (torch, want))])
        for i, (a, b) in enumerate(pairs):
            compare(a, b, f"gradient {i}", rtol)


def compare(a, b, what, rtol=None):
    if rtol is None:
        return close(a, b, what)
    assert a.dtype == getattr(gradviz, str(b.dtype).split(".")[1]), (a.dtype, b.dtype)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=rtol,
                               err_msg=what)


def tensor(lib, values, dtype, requires_grad=False):
    return lib.tensor(np.asarray(values), dtype=getattr(lib, dtype), requires_grad=requires_grad)


INPUT = [0.5, -1.0, 2.0, 3.5, -0.25, 1.5]
TARGET = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
LOSSES = {
    "mse": lambda lib, a, b, r: lib.nn.functional.mse_loss(a, b, reduction=r),
    "l1": lambda lib, a, b, r: lib.nn.functional.l1_loss(a, b, reduction=r),
    "smooth_l1": lambda lib, a, b, r: lib.nn.functional.smooth_l1_loss(a, b, reduction=r, beta=0.8),
    "smooth_l1_beta0": lambda lib, a, b, r: lib.nn.functional.smooth_l1_loss(a, b, reduction=r,
                                                                               beta=0.0),
    "huber": lambda lib, a, b, r: lib.nn.functional.huber_loss(a, b, reduction=r, delta=0.7),
    "HuberLoss": lambda lib, a, b, r: lib.nn.HuberLoss(reduction=r)(a, b),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtypes", [(F32, F64), (F64, F32), (F32, "float16"), ("float16", F32)])
@pytest.mark.parametrize("loss", LOSSES)
def test_regression_losses_mixed_floats(loss, dtypes, reduction):
    # torch: huber's result has the input's dtype (its kernel writes into an input-like
    # tensor), the others promote
    def fn(lib, leaves):
        return LOSSES[loss](lib, tensor(lib, INPUT, dtypes[0]),
                            tensor(lib, TARGET, dtypes[1]), reduction)
    agree(fn, rtol=1e-3 if "float16" in dtypes else 1e-6)


@pytest.mark.parametrize("loss", ["mse", "l1", "smooth_l1", "huber"])
def test_regression_loss_gradient_with_a_float64_target(loss):
    # same dtypes: the gradient through the fused node; a float64 target into a float32
    # prediction: the float32 prediction's gradient (torch's huber refuses that backward,
    # see test_huber_mixed_dtype_backward_is_a_known_difference)
    def fn(lib, leaves):
        x = tensor(lib, INPUT, F32, requires_grad=True)
        leaves.append(x)
        return LOSSES[loss](lib, x, tensor(lib, TARGET, F32), "mean")
    agree(fn, grads=True)


@pytest.mark.parametrize("target_dtype,word", [(F64, "Double"), ("int64", "Long")])
def test_huber_mixed_dtype_backward_is_a_known_difference(target_dtype, word):
    """torch 2.13 computes huber_loss forward with a target of another dtype but its backward
    kernel refuses it ("Found dtype Double but expected Float"); gradviz differentiates it
    (the target is cast to the input's dtype), with the gradient of the same-dtype loss."""
    x = torch.tensor(INPUT, requires_grad=True)
    with pytest.raises(RuntimeError, match=f"Found dtype {word} but expected Float"):
        torch.nn.functional.huber_loss(x, tensor(torch, TARGET, target_dtype)).backward()
    xg = gradviz.tensor(INPUT, requires_grad=True)
    gradviz.nn.functional.huber_loss(xg, tensor(gradviz, TARGET, target_dtype)).backward()
    x.grad = None
    torch.nn.functional.huber_loss(x, torch.tensor(TARGET)).backward()
    close(xg.grad, x.grad, "huber gradient")


INTEGER_OPERANDS = [("int64", "int64"), ("int32", "int32"), ("int32", "int64"), ("bool", "bool"),
                    ("bool", "int64"), (F32, "int64"), ("int64", F32), (F64, "bool"),
                    ("int64", F64)]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtypes", INTEGER_OPERANDS)
@pytest.mark.parametrize("loss", LOSSES)
def test_regression_losses_integer_operands(loss, dtypes, reduction):
    # torch: mse/smooth_l1/huber have floating kernels only ("mse_cpu" not implemented for
    # 'Long'); l1 is composite (int64 sums, no integer mean); huber casts into the input
    def fn(lib, leaves):
        return LOSSES[loss](lib, tensor(lib, [1, 0, 3, 1], dtypes[0]),
                            tensor(lib, [1, 1, 0, 1], dtypes[1]), reduction)
    agree(fn)


@pytest.mark.parametrize("loss,target_dtype", [
    (loss, dtype) for loss in ("mse", "l1", "smooth_l1", "huber") for dtype in (F32, "int64")
    if (loss, dtype) != ("huber", "int64")])  # torch's huber backward refuses, see below
def test_regression_loss_gradient_with_integer_target(loss, target_dtype):
    def fn(lib, leaves):
        x = tensor(lib, INPUT[:4], F32, requires_grad=True)
        leaves.append(x)
        return LOSSES[loss](lib, x, tensor(lib, [1, 0, 3, 1], target_dtype), "mean")
    agree(fn, grads=True)


BCE_DTYPES = [(F32, F64, None, None), (F64, F32, None, None), ("float16", F32, None, None),
              (F32, F32, F64, None), (F32, F32, None, F64), (F64, F64, F32, F32),
              (F32, F64, F64, F32), (F64, F32, None, F64), (F32, F32, "int64", "int64"),
              (F32, "int64", None, None), (F64, "int32", None, None), ("int64", F32, None, None),
              ("int64", "int64", None, None), (F32, "bool", None, None)]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtypes", BCE_DTYPES)
def test_bce_with_logits_dtypes(dtypes, reduction):
    # torch: the loss is written into a target-dtype tensor ((1 - target).mul_(input)...)
    input_dtype, target_dtype, weight_dtype, pos_weight_dtype = dtypes

    def fn(lib, leaves):
        floating = input_dtype.startswith("float")
        x = tensor(lib, INPUT if floating else [1, 0, 2, 1, 0, 1], input_dtype,
                   requires_grad=floating)
        leaves.append(x)
        weight = None if weight_dtype is None else tensor(lib, [1, 2, 3, 1, 2, 3], weight_dtype)
        pos_weight = (None if pos_weight_dtype is None
                      else tensor(lib, [2, 1, 3, 1, 1, 2], pos_weight_dtype))
        return lib.nn.functional.binary_cross_entropy_with_logits(
            x, tensor(lib, TARGET, target_dtype), weight, reduction=reduction,
            pos_weight=pos_weight)
    # torch takes log_sigmoid in the input's dtype, then the rest in the target's: mixed
    # precisions agree to float32's precision
    agree(fn, grads=True, rtol=1e-3 if "float16" in dtypes else 1e-6)


def test_bce_with_logits_module_pos_weight_of_another_dtype():
    def fn(lib, leaves):
        x = tensor(lib, INPUT, F32, requires_grad=True)
        leaves.append(x)
        loss = lib.nn.BCEWithLogitsLoss(pos_weight=tensor(lib, [2, 1, 3, 1, 1, 2], F64))
        return loss(x, tensor(lib, TARGET, F32))
    agree(fn, grads=True)


# ---- average pooling on integer tensors -------------------------------------------------

POOL_CASES = [
    ("avg_pool2d", (1, 2, 4, 4), dict(kernel_size=2)),
    ("avg_pool2d", (2, 2, 5, 5), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d", (2, 2, 5, 5), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("avg_pool2d", (1, 3, 5, 4), dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1),
                                      count_include_pad=False)),
    ("avg_pool2d", (1, 2, 4, 4), dict(kernel_size=2, divisor_override=3)),
    ("avg_pool2d", (2, 4, 4), dict(kernel_size=3, padding=1, divisor_override=5)),
    ("avg_pool1d", (1, 2, 7), dict(kernel_size=3)),
    ("avg_pool1d", (2, 2, 7), dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool1d", (2, 7), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
]


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "bool", F32, F64])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: f"{c[0]}-{c[2]}")
def test_avg_pool_dtypes(case, dtype):
    # torch: int64 averages truncated toward zero; other integer types have no kernel
    name, shape, kwargs = case
    values = np.random.default_rng(0).integers(-9, 10, shape)
    if dtype in ("uint8", "bool"):
        values = np.abs(values) % (2 if dtype == "bool" else 10)

    def fn(lib, leaves):
        x = tensor(lib, values, dtype, requires_grad=dtype.startswith("float"))
        leaves.append(x)
        return getattr(lib.nn.functional, name)(x, **kwargs)
    agree(fn, grads=True)


@pytest.mark.parametrize("dtype", ["int64", F32])
def test_avg_pool_modules_on_integers(dtype):
    values = np.arange(-20, 28).reshape(1, 3, 4, 4)
    agree(lambda lib, leaves: lib.nn.AvgPool2d(3, 1, 1, count_include_pad=False)(tensor(lib, values, dtype)))
    agree(lambda lib, leaves: lib.nn.AvgPool1d(2)(tensor(lib, values[0], dtype)))


@pytest.mark.parametrize("name", ["adaptive_avg_pool1d", "adaptive_avg_pool2d"])
@pytest.mark.parametrize("dtype", ["int64", "int32", F32])
def test_adaptive_avg_pool_integers(name, dtype):
    shape = (1, 2, 8) if name.endswith("1d") else (1, 2, 4, 4)
    agree(lambda lib, leaves: getattr(lib.nn.functional, name)(
        tensor(lib, np.arange(np.prod(shape)).reshape(shape), dtype), 2))


# ---- dropout on integer tensors -----------------------------------------------------------

DROPOUTS = {
    "dropout": lambda lib, x, p, t: lib.nn.functional.dropout(x, p, training=t),
    "dropout_inplace": lambda lib, x, p, t: lib.nn.functional.dropout(x.clone(), p, t, True),
    "Dropout": lambda lib, x, p, t: lib.nn.Dropout(p).train(t)(x),
    "dropout1d": lambda lib, x, p, t: lib.nn.functional.dropout1d(x[0], p, training=t),
    "dropout2d": lambda lib, x, p, t: lib.nn.functional.dropout2d(x, p, training=t),
    "Dropout2d": lambda lib, x, p, t: lib.nn.Dropout2d(p).train(t)(x),
    "dropout3d": lambda lib, x, p, t: lib.nn.functional.dropout3d(x, p, training=t),
    "alpha_dropout": lambda lib, x, p, t: lib.nn.functional.alpha_dropout(x, p, training=t),
}


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool", "uint8"])
@pytest.mark.parametrize("name", DROPOUTS)
def test_dropout_on_integers(name, dtype, p, training):
    # torch: p of 0 (and eval) is the identity, p of 1 gives zeros of the input's dtype,
    # otherwise the float scaling cannot be cast back ("result type Float can't be cast")
    values = np.arange(24).reshape(1, 2, 3, 4) % 5

    def fn(lib, leaves):
        out = DROPOUTS[name](lib, tensor(lib, values, dtype), p, training)
        return out
    agree(fn)


def test_dropout_module_inplace_writes_into_its_input():
    # torch's nn.Dropout(inplace=True) scales its input in place (gradviz ignored the flag)
    for lib in (gradviz, torch):
        x = lib.ones(4, 5)
        y = lib.nn.Dropout(0.5, inplace=True)(x)
        assert y is x or y.data_ptr() == x.data_ptr() if lib is torch else y is x
        assert set(np.unique(x.numpy())) <= {0.0, 2.0}, x


# ---- node classes ---------------------------------------------------------------------------

def test_node_class_modules_as_torch():
    # torch's built-in nodes are C types named without a dot (module ``builtins``); a custom
    # Function's node class lives in the autograd.function module of its library
    modules = {}
    for lib in (gradviz, torch):
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        x = lib.ones(2, requires_grad=True)
        y = (x * 2).sum()
        nodes = [y.grad_fn, y.grad_fn.next_functions[0][0], Double.apply(x).grad_fn]
        modules[lib] = [(type(n).__name__, type(n).__module__.replace(lib.__name__, "LIB"),
                         repr(type(n)).replace(lib.__name__, "LIB")) for n in nodes]
        assert all(isinstance(n, lib.autograd.graph.Node) for n in nodes)
    assert modules[gradviz] == modules[torch]
