"""F.interpolate / nn.Upsample (nearest, nearest-exact, linear, bilinear, trilinear, area;
align_corners; size and scale_factor), F.pixel_shuffle / nn.PixelShuffle and PixelUnshuffle
against torch: values, gradients, second-order gradients, node names, repr, errors; gradcheck
and gradgradcheck in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close, compare_layer, same_error

import gradviz

INTERPOLATE_CASES = [
    ((2, 3, 5), dict(scale_factor=2, mode="nearest"), "UpsampleNearest1DBackward0"),
    ((2, 3, 5), dict(size=7, mode="nearest"), "UpsampleNearest1DBackward0"),
    ((2, 3, 5), dict(scale_factor=1.7, mode="nearest"), "UpsampleNearest1DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="nearest"), "UpsampleNearest2DBackward0"),
    ((2, 3, 4, 5), dict(size=(3, 9), mode="nearest"), "UpsampleNearest2DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=(1.5, 0.5), mode="nearest"), "UpsampleNearest2DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=2.5, mode="nearest-exact"), "UpsampleNearestExact2DBackward0"),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="nearest"), "UpsampleNearest3DBackward0"),
    ((2, 3, 5), dict(scale_factor=2, mode="linear"), "UpsampleLinear1DBackward0"),
    ((2, 3, 5), dict(size=8, mode="linear", align_corners=True), "UpsampleLinear1DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="bilinear"), "UpsampleBilinear2DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="bilinear", align_corners=True), "UpsampleBilinear2DBackward0"),
    ((2, 3, 4, 5), dict(size=(7, 3), mode="bilinear"), "UpsampleBilinear2DBackward0"),
    ((2, 3, 4, 5), dict(size=(1, 9), mode="bilinear", align_corners=True), "UpsampleBilinear2DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=1.3, mode="bilinear"), "UpsampleBilinear2DBackward0"),
    ((2, 3, 4, 5), dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=True), "UpsampleBilinear2DBackward0"),
    ((1, 2, 3, 4, 2), dict(scale_factor=2, mode="trilinear"), "UpsampleTrilinear3DBackward0"),
    ((2, 3, 4, 6), dict(size=(2, 3), mode="area"), "AdaptiveAvgPool2DBackward0"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,kw,node", INTERPOLATE_CASES,
                         ids=[f"{s}-{k}" for s, k, _ in INTERPOLATE_CASES])
def test_interpolate(shape, kw, node, dtype):
    x = np.random.default_rng(0).standard_normal(shape)
    outs, _ = compare_layer(lambda nn: nn.Upsample(**kw), [x], dtype)
    assert outs[0].grad_fn.name() == node
    outs, _ = compare_layer(lambda nn: nn.Identity(), [x], dtype,
                            forward=lambda layer, t: (gradviz if isinstance(t, gradviz.Tensor) else torch)
                            .nn.functional.interpolate(t, **kw))


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="bilinear", align_corners=False),
                                dict(size=(5, 2), mode="nearest"),
                                dict(scale_factor=1.5, mode="linear")])
def test_second_order_gradients(kw):
    shape = (2, 2, 3, 4) if kw["mode"] != "linear" else (2, 2, 4)
    x = np.random.default_rng(1).standard_normal(shape)
    probe = None
    results = []
    for lib in (gradviz, torch):
        t = lib.tensor(x, requires_grad=True)
        out = lib.nn.functional.interpolate(t, **kw)
        probe = np.random.default_rng(2).standard_normal(tuple(out.shape)) if probe is None else probe
        g, = lib.autograd.grad((out * lib.tensor(probe)).sum() + (out ** 2).sum(), t, create_graph=True)
        results.append((g, g.grad_fn.name(), lib.autograd.grad((g ** 2).sum(), t)[0]))
    (g1, n1, s1), (g2, n2, s2) = results
    assert n1 == n2  # Upsample...BackwardBackward0
    close(g1, g2, "gradient")
    close(s1, s2, "second-order gradient")


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="bilinear"), dict(size=(5, 3), mode="bilinear", align_corners=True),
                                dict(scale_factor=1.5, mode="nearest"), dict(scale_factor=2, mode="nearest-exact")])
def test_gradcheck_and_gradgradcheck(kw):
    x = gradviz.tensor(np.random.default_rng(3).standard_normal((1, 2, 3, 2)), requires_grad=True)
    f = lambda t: gradviz.nn.functional.interpolate(t, **kw)  # noqa: E731
    assert gradviz.autograd.gradcheck(f, (x,))
    assert gradviz.autograd.gradgradcheck(f, (x,))


def test_upsample_repr_and_old_names():
    for kw in [dict(scale_factor=2), dict(size=(3, 4), mode="bilinear", align_corners=True),
               dict(scale_factor=(2, 3))]:
        assert repr(gradviz.nn.Upsample(**kw)) == repr(torch.nn.Upsample(**kw))
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 3))
    compare_layer(lambda nn: nn.UpsamplingBilinear2d(scale_factor=2), [x])
    compare_layer(lambda nn: nn.UpsamplingNearest2d(size=5), [x])
    assert repr(gradviz.nn.UpsamplingBilinear2d(scale_factor=2)) == repr(torch.nn.UpsamplingBilinear2d(scale_factor=2))


def test_interpolate_errors():
    def both(call, phrase, shape=(1, 1, 3, 3)):
        x = np.zeros(shape, dtype=np.float32)
        same_error(lambda: call(gradviz.nn.functional, gradviz.tensor(x)),
                   lambda: call(torch.nn.functional, torch.tensor(x)), phrase)

    both(lambda F, x: F.interpolate(x), "either size or scale_factor should be defined")
    both(lambda F, x: F.interpolate(x, size=4, scale_factor=2), "only one of size or scale_factor should be defined")
    both(lambda F, x: F.interpolate(x, scale_factor=2, align_corners=True),
         "align_corners option can only be set with the interpolating modes")
    both(lambda F, x: F.interpolate(x, size=(2,)), "Input and output must have the same number of spatial dimensions")
    both(lambda F, x: F.interpolate(x, scale_factor=(2, 2, 2)), "Input and scale_factor must have the same number")
    both(lambda F, x: F.interpolate(x, scale_factor=0.2, mode="bilinear"),
         "Input and output sizes should be greater than 0, but got input (H: 3, W: 3) output (H: 0, W: 0)")
    both(lambda F, x: F.interpolate(x, scale_factor=0.1), "Input and output sizes should be greater than 0",
         shape=(1, 1, 3))
    both(lambda F, x: F.interpolate(x, scale_factor=2, mode="linear"), "Got 4D input, but linear mode needs 3D input")
    both(lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear"), "Got 3D input, but bilinear mode needs 4D input",
         shape=(1, 1, 3))
    both(lambda F, x: F.interpolate(x, size=4, recompute_scale_factor=True),
         "recompute_scale_factor is not meaningful with an explicit size.")
    both(lambda F, x: F.interpolate(x, scale_factor=2), "Input Error: Only 3D, 4D and 5D input Tensors supported",
         shape=(3, 3))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,factor", [((2, 8, 3, 2), 2), ((12, 2, 3), 2), ((2, 2, 9, 3, 1), 3)])
def test_pixel_shuffle_and_unshuffle(shape, factor, dtype):
    x = np.random.default_rng(5).standard_normal(shape)
    outs, _ = compare_layer(lambda nn: nn.PixelShuffle(factor), [x], dtype)
    assert outs[0].grad_fn.name() == "PixelShuffleBackward0"
    shuffled = outs[0].detach().numpy()
    outs, _ = compare_layer(lambda nn: nn.PixelUnshuffle(factor), [shuffled], dtype)
    assert outs[0].grad_fn.name() == "PixelUnshuffleBackward0"
    np.testing.assert_array_equal(outs[0].detach().numpy(), x.astype(dtype))
    assert repr(gradviz.nn.PixelShuffle(factor)) == repr(torch.nn.PixelShuffle(factor))
    assert repr(gradviz.nn.PixelUnshuffle(factor)) == repr(torch.nn.PixelUnshuffle(factor))


def test_pixel_shuffle_gradgradcheck_and_errors():
    x = gradviz.tensor(np.random.default_rng(6).standard_normal((1, 4, 2, 2)), requires_grad=True)
    assert gradviz.autograd.gradgradcheck(lambda t: gradviz.nn.functional.pixel_shuffle(t, 2) ** 2, (x,))
    F, TF = gradviz.nn.functional, torch.nn.functional
    same_error(lambda: F.pixel_shuffle(gradviz.zeros(1, 5, 2, 2), 2), lambda: TF.pixel_shuffle(torch.zeros(1, 5, 2, 2), 2),
               "input.size(-3)=5 is not divisible by 4")
    same_error(lambda: F.pixel_shuffle(gradviz.zeros(5, 2), 2), lambda: TF.pixel_shuffle(torch.zeros(5, 2), 2),
               "pixel_shuffle expects input to have at least 3 dimensions, but got input with 2 dimension(s)")
    same_error(lambda: F.pixel_unshuffle(gradviz.zeros(1, 1, 3, 4), 2), lambda: TF.pixel_unshuffle(torch.zeros(1, 1, 3, 4), 2),
               "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=3")
