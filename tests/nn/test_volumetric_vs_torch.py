"""The 3-D layers against torch 2.13: conv3d (stride, padding including 'same', dilation,
groups, bias, padding modes), max/avg/adaptive-avg pooling 3-D (padding, dilation, ceil_mode,
count_include_pad, divisor_override, return_indices, integer inputs), BatchNorm3d,
InstanceNorm3d, the 3-D padding modules and 3-D up-sampling: values, gradients of the input
and of every parameter, second derivatives, reprs and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close, compare_layer, same_error

import gradviz


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def compare(fn, arrays, dtype="float64", grads=True, second=False):
    """``fn(lib, *tensors)`` in both libraries on the same values: the outputs, and the
    gradients of ``sum(out * probe)`` for every tensor (and, with ``second``, the gradients of
    the squared first gradients, through their graph)."""
    results = {}
    for lib in (gradviz, torch):
        xs = [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=grads) for a in arrays]
        out = fn(lib, *xs)
        outs = out if isinstance(out, tuple) else (out,)
        entry = [outs]
        if grads:
            probe = lib.tensor(rand(*outs[0].shape, seed=7), dtype=outs[0].dtype)
            first = lib.autograd.grad((outs[0] * probe).sum(), xs, create_graph=second)
            entry.append(first)
            if second:
                total = sum((g * g).sum() for g in first)
                entry.append(lib.autograd.grad(total, xs, allow_unused=True))
        results[lib] = entry
    for part, (ours, theirs) in enumerate(zip(results[gradviz], results[torch])):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if b is not None:
                b = torch.from_numpy(b.detach().numpy().copy())
            close(a, b, f"{['output', 'gradient', 'second-order gradient'][part]} {i}")


CONV_CASES = [
    ((2, 4, 5, 6, 5), (6, 4, 3, 3, 3), dict()),
    ((2, 4, 5, 6, 5), (6, 4, 3, 2, 3), dict(stride=2, padding=1)),
    ((1, 4, 7, 6, 5), (6, 2, 3, 3, 2), dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1),
                                            groups=2)),
    ((2, 6, 5, 5, 5), (6, 1, 2, 3, 3), dict(groups=6, padding=1)),
    ((1, 3, 5, 6, 4), (4, 3, 3, 2, 3), dict(padding="same", dilation=(1, 2, 1))),
    ((1, 3, 5, 6, 4), (4, 3, 3, 3, 3), dict(padding="valid")),
    ((3, 5, 6, 4), (4, 3, 2, 2, 2), dict(stride=2)),  # unbatched
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv3d(case, bias):
    x_shape, w_shape, kwargs = case
    arrays = [rand(*x_shape), rand(*w_shape, seed=1)] + ([rand(w_shape[0], seed=2)] if bias else [])
    compare(lambda lib, x, w, *b: lib.nn.functional.conv3d(x, w, *b, **kwargs), arrays)


def test_conv3d_float32_and_second_order():
    arrays = [rand(1, 2, 4, 4, 4), rand(3, 2, 2, 3, 2, seed=1), rand(3, seed=2)]
    conv = lambda lib, x, w, b: lib.nn.functional.conv3d(x, w, b, stride=(2, 1, 1), padding=1)  # noqa: E731
    compare(conv, arrays, dtype="float32")
    compare(lambda lib, x, w, b: conv(lib, x, w, b).tanh(), arrays, second=True)


def test_conv3d_integers():
    for lib in (gradviz, torch):
        x = lib.tensor(np.arange(2 * 2 * 4 * 4 * 4).reshape(2, 2, 4, 4, 4) % 7 - 3)
        w = lib.tensor(np.arange(3 * 2 * 2 * 2 * 2).reshape(3, 2, 2, 2, 2) % 5 - 2)
        if lib is gradviz:
            ours = lib.nn.functional.conv3d(x, w, stride=2)
        else:
            close(ours, lib.nn.functional.conv3d(x, w, stride=2), "int64 conv3d")


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (1, 2, 0), "same"])
def test_conv3d_module(padding, padding_mode):
    make = lambda nn: nn.Conv3d(4, 6, (3, 2, 3), padding=padding, groups=2,  # noqa: E731
                                padding_mode=padding_mode)
    compare_layer(make, [rand(2, 4, 5, 4, 5)])
    assert repr(make(gradviz.nn)) == repr(make(torch.nn))


POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 2), stride=(1, 2, 2), padding=(1, 0, 1)),
    dict(kernel_size=2, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("dilation", [1, (2, 1, 1)])
@pytest.mark.parametrize("kwargs", POOL_CASES, ids=str)
def test_max_pool3d(kwargs, dilation):
    def pool(lib, x):
        out, indices = lib.nn.functional.max_pool3d(x, dilation=dilation, return_indices=True,
                                                    **kwargs)
        return out, indices
    compare(pool, [rand(2, 3, 5, 6, 7)])
    compare(lambda lib, x: lib.nn.functional.max_pool3d(x, **kwargs), [rand(3, 5, 6, 5)])


def test_max_pool3d_ties_send_the_gradient_to_the_first_maximum():
    values = np.ones((1, 1, 4, 4, 4))
    compare(lambda lib, x: lib.nn.functional.max_pool3d(x, 2, return_indices=True), [values])


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("kwargs", POOL_CASES + [dict(kernel_size=2, divisor_override=3),
                                                 dict(kernel_size=3, padding=1,
                                                      divisor_override=5)], ids=str)
def test_avg_pool3d(kwargs, count_include_pad):
    pool = lambda lib, x: lib.nn.functional.avg_pool3d(  # noqa: E731
        x, count_include_pad=count_include_pad, **kwargs)
    compare(pool, [rand(2, 3, 5, 6, 7)])
    compare(pool, [rand(3, 5, 6, 5)], dtype="float32")


@pytest.mark.parametrize("kwargs", POOL_CASES + [dict(kernel_size=3, padding=1,
                                                      count_include_pad=False)], ids=str)
def test_avg_pool3d_int64_truncates_as_torch(kwargs):
    values = np.random.default_rng(0).integers(-20, 20, (2, 2, 5, 6, 5))
    compare(lambda lib, x: lib.nn.functional.avg_pool3d(x, **kwargs), [values], "int64",
            grads=False)
    if "count_include_pad" not in kwargs:
        compare(lambda lib, x: lib.nn.functional.max_pool3d(x, **kwargs), [values], "int64",
                grads=False)


@pytest.mark.parametrize("output_size", [2, (3, 1, 4), (None, 2, 3), (5, 6, 7), (1, 1, 1)],
                         ids=str)
def test_adaptive_avg_pool3d(output_size):
    pool = lambda lib, x: lib.nn.functional.adaptive_avg_pool3d(x, output_size)  # noqa: E731
    compare(pool, [rand(2, 3, 5, 6, 7)])
    compare(pool, [rand(3, 5, 6, 7)], dtype="float32")
    compare(lambda lib, x: pool(lib, x).sin(), [rand(1, 2, 5, 6, 7)], second=True)


def test_interpolate_area_on_volumes():
    compare(lambda lib, x: lib.nn.functional.interpolate(x, size=(2, 3, 4), mode="area"),
            [rand(2, 3, 5, 6, 7)])


@pytest.mark.parametrize("mode,kwargs", [("nearest", dict(scale_factor=2)),
                                         ("nearest", dict(size=(3, 5, 4))),
                                         ("trilinear", dict(scale_factor=(2, 1.5, 1))),
                                         ("trilinear", dict(size=(4, 5, 6), align_corners=True)),
                                         ("nearest-exact", dict(size=(4, 5, 6)))], ids=str)
def test_upsample_3d(mode, kwargs):
    compare_layer(lambda nn: nn.Upsample(mode=mode, **kwargs), [rand(2, 3, 3, 4, 5)])


def test_pool_modules_and_reprs():
    for make in (lambda nn: nn.MaxPool3d(3, 2, 1), lambda nn: nn.MaxPool3d((3, 2, 1)),
                 lambda nn: nn.AvgPool3d(3, 2, 1),
                 lambda nn: nn.AvgPool3d((3, 2, 1), count_include_pad=False, divisor_override=2),
                 lambda nn: nn.AdaptiveAvgPool3d((2, None, 3)), lambda nn: nn.AdaptiveAvgPool3d(1)):
        assert repr(make(gradviz.nn)) == repr(make(torch.nn))
        compare_layer(make, [rand(2, 3, 5, 6, 7)])


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("make", [lambda nn: nn.BatchNorm3d(3),
                                  lambda nn: nn.BatchNorm3d(3, affine=False, momentum=None),
                                  lambda nn: nn.InstanceNorm3d(3),
                                  lambda nn: nn.InstanceNorm3d(3, affine=True,
                                                               track_running_stats=True)])
def test_norms_3d(make, training):
    def run(nn):
        module = make(nn)
        module.train(training)
        return module
    compare_layer(run, [rand(2, 3, 3, 4, 5)])
    assert repr(make(gradviz.nn)) == repr(make(torch.nn))


@pytest.mark.parametrize("make", [lambda nn: nn.ConstantPad3d(1, 2.5),
                                  lambda nn: nn.ConstantPad3d((1, 2, 0, 1, 2, 0), -1.0),
                                  lambda nn: nn.ZeroPad3d((1, 2, 0, 1, 2, 0)),
                                  lambda nn: nn.ReflectionPad3d(1),
                                  lambda nn: nn.ReflectionPad3d((1, 2, 0, 1, 2, 0)),
                                  lambda nn: nn.ReplicationPad3d((3, 2, 0, 1, 2, 4)),
                                  lambda nn: nn.CircularPad3d((1, 2, 0, 1, 2, 0))])
@pytest.mark.parametrize("shape", [(2, 3, 3, 4, 5), (3, 3, 4, 5)], ids=str)
def test_padding_modules_3d(make, shape):
    compare_layer(make, [rand(*shape)])
    assert repr(make(gradviz.nn)) == repr(make(torch.nn))


def both(fn):
    return (lambda: fn(gradviz)), (lambda: fn(torch))


ERRORS = [
    (lambda lib: lib.nn.functional.conv3d(lib.ones(4, 5, 5), lib.ones(6, 4, 3, 3, 3)),
     "Expected 4D (unbatched) or 5D (batched) input to conv3d"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(6, 3, 3, 3, 3)),
     "Given groups=1, weight of size [6, 3, 3, 3, 3], expected input[2, 4, 5, 5, 5] to have 3 "
     "channels, but got 4 channels instead"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(5, 2, 3, 3, 3),
                                          groups=2),
     "Given groups=2, expected weight to be divisible by 2 at dimension 0"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(1, 2, 3, 3, 3),
                                          groups=2),
     "Given groups=2, expected weight to be at least 2 at dimension 0, but got weight of size "
     "[1, 2, 3, 3, 3] instead"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(0, 4, 3, 3, 3)),
     "Given groups=1, expected weight to be at least 1 at dimension 0"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(6, 4, 6, 6, 6)),
     "Calculated padded input size per channel: (5 x 5 x 5). Kernel size: (6 x 6 x 6)."),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(6, 4, 3, 3, 3),
                                          lib.ones(5)),
     "expected bias to be 1-dimensional with 6 elements, but got bias of size [5] instead"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(6, 4, 3, 3, 3),
                                          padding="same", stride=2),
     "padding='same' is not supported for strided convolutions"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(6, 4, 3, 3, 3),
                                          padding=-1), "negative padding is not supported"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5), lib.ones(6, 4, 3, 3, 3),
                                          stride=0), "non-positive stride is not supported"),
    (lambda lib: lib.nn.functional.conv3d(lib.ones(2, 4, 5, 5, 5, dtype=lib.float64),
                                          lib.ones(6, 4, 3, 3, 3)),
     "expected scalar type Double but found Float"),
    (lambda lib: lib.nn.Conv3d(4, 6, 3, padding_mode="foo"), "padding_mode must be one of"),
    (lambda lib: lib.nn.Conv3d(4, 6, 3, groups=4), "out_channels must be divisible by groups"),
    (lambda lib: lib.nn.functional.max_pool3d(lib.ones(4, 5, 5), 2),
     "non-empty 4D or 5D (batch mode) tensor expected for input"),
    (lambda lib: lib.nn.functional.max_pool3d(lib.ones(2, 4, 5, 5, 5), 3, padding=2),
     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=3"),
    (lambda lib: lib.nn.functional.max_pool3d(lib.ones(2, 4, 5, 5, 5), 6),
     "Given input size: (4x5x5x5). Calculated output size: (4x0x0x0). Output size is too small"),
    (lambda lib: lib.nn.functional.max_pool3d(lib.ones(2, 4, 5, 5, 5), 2, stride=0),
     "stride should not be zero"),
    (lambda lib: lib.nn.functional.avg_pool3d(lib.ones(2, 4, 5, 5, 5), 6),
     "input image (T: 5 H: 5 W: 5) smaller than kernel size (kT: 6 kH: 6 kW: 6)"),
    (lambda lib: lib.nn.functional.avg_pool3d(lib.ones(2, 4, 5, 5, 5, dtype=lib.int32), 2),
     "\"avg_pool3d_out_frame\" not implemented for 'Int'"),
    (lambda lib: lib.nn.functional.avg_pool3d(lib.ones(2, 4, 5, 5, 5), 2, divisor_override=0),
     "divisor must be not zero"),
    (lambda lib: lib.nn.functional.adaptive_avg_pool3d(lib.ones(2, 4, 5, 5, 5,
                                                                dtype=lib.int64), 2),
     "\"adaptive_avg_pool3d_cpu\" not implemented for 'Long'"),
    (lambda lib: lib.nn.functional.adaptive_avg_pool3d(lib.ones(4, 5, 5), 2),
     "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got [4, 5, 5]"),
    (lambda lib: lib.nn.functional.adaptive_avg_pool3d(lib.ones(2, 4, 5, 5, 5), (2, 2)),
     "adaptive_avg_pool3d: output_size must be 3"),
    (lambda lib: lib.nn.BatchNorm3d(4)(lib.ones(4, 5, 5, 5)), "expected 5D input (got 4D input)"),
    (lambda lib: lib.nn.InstanceNorm3d(4)(lib.ones(4, 5, 5)),
     "expected 4D or 5D input (got 3D input)"),
    (lambda lib: lib.nn.ReflectionPad3d(1)(lib.ones(4, 5, 5)),
     "Padding size 6 is not supported for 3D input tensor."),
    (lambda lib: lib.nn.CircularPad3d(1)(lib.ones(4, 5, 5)), "expected 4D or 5D input (got 3D input)"),
    (lambda lib: lib.nn.ReflectionPad3d((1, 1, 1, 1, 5, 5))(lib.ones(2, 4, 5, 5, 5)),
     "Argument #8: Padding size should be less than the corresponding input dimension"),
]


@pytest.mark.parametrize("fn,phrase", ERRORS, ids=lambda v: v if isinstance(v, str) else "")
def test_errors(fn, phrase):
    same_error(*both(fn), phrase)
