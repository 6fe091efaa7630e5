"""Spatial sampling against torch 2.13: ``affine_grid`` (2-D and 3-D, align_corners),
``grid_sample`` (bilinear and nearest, zeros/border/reflection padding, align_corners, grid
positions inside, on and outside the input) with gradients for the input, the grid and theta
(and second derivatives), bicubic ``interpolate``, and torch's errors and warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from layer_compare import close, same_error

import gradviz


def rand(*shape, seed=0, low=None, high=None):
    rng = np.random.default_rng(seed)
    if low is not None:
        return rng.uniform(low, high, shape)
    return rng.standard_normal(shape)


def compare(fn, arrays, dtype="float64", second=False, grad_positions=None):
    """``fn(lib, *tensors)`` in both libraries: the output, the gradients of
    ``sum(out * probe)`` for the tensors at ``grad_positions`` (default all), and with
    ``second`` the gradients of their squared sum through the first gradients' graph."""
    positions = range(len(arrays)) if grad_positions is None else grad_positions
    results = {}
    for lib in (gradviz, torch):
        xs = [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=i in positions)
              for i, a in enumerate(arrays)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(lib, *xs)
        probe = lib.tensor(rand(*out.shape, seed=7), dtype=out.dtype)
        wrt = [xs[i] for i in positions]
        first = lib.autograd.grad((out * probe).sum(), wrt, create_graph=second)
        entry = [[out], first]
        if second:
            total = sum((g * g).sum() for g in first)
            entry.append(lib.autograd.grad(total, wrt, allow_unused=True))
        results[lib] = entry
    for part, (ours, theirs) in enumerate(zip(results[gradviz], results[torch])):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            if b is not None:
                b = torch.from_numpy(b.detach().numpy().copy())
            close(a, b, f"{['output', 'gradient', 'second-order gradient'][part]} {i}")


THETA_2D = [[[1.0, 0.2, 0.1], [-0.1, 0.9, 0.05]], [[0.7, -0.3, -0.2], [0.4, 1.2, 0.3]]]


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (2, 2, 5, 1)], ids=str)
def test_affine_grid_2d(size, align_corners):
    compare(lambda lib, t: lib.nn.functional.affine_grid(t, size, align_corners=align_corners),
            [np.array(THETA_2D)])


@pytest.mark.parametrize("align_corners", [True, False])
def test_affine_grid_3d(align_corners):
    theta = rand(2, 3, 4) * 0.3 + np.eye(3, 4)
    compare(lambda lib, t: lib.nn.functional.affine_grid(t, (2, 1, 3, 4, 5),
                                                         align_corners=align_corners), [theta])


MODES = [(mode, padding) for mode in ("bilinear", "nearest")
         for padding in ("zeros", "border", "reflection")]


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("mode,padding_mode", MODES)
def test_grid_sample(mode, padding_mode, align_corners):
    # positions inside and outside [-1, 1] (padding matters), fixed seeds
    image, grid = rand(2, 3, 5, 6), rand(2, 4, 7, 2, seed=1, low=-1.4, high=1.4)
    sample = lambda lib, x, g: lib.nn.functional.grid_sample(  # noqa: E731
        x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    compare(sample, [image, grid])
    compare(sample, [image, grid], dtype="float32")


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_second_order(padding_mode):
    image, grid = rand(1, 2, 4, 5), rand(1, 3, 3, 2, seed=1, low=-1.2, high=1.2)
    compare(lambda lib, x, g: lib.nn.functional.grid_sample(
        x, g, padding_mode=padding_mode, align_corners=False).tanh(), [image, grid], second=True)


def test_spatial_transformer_through_theta():
    # the spatial-transformer pattern: theta -> affine_grid -> grid_sample, gradient of theta
    def transform(lib, theta, image):
        grid = lib.nn.functional.affine_grid(theta, (2, 3, 4, 5), align_corners=False)
        return lib.nn.functional.grid_sample(image, grid, align_corners=False)
    compare(transform, [np.array(THETA_2D), rand(2, 3, 6, 7)])


def test_default_align_corners_warns_as_torch():
    for lib in (gradviz, torch):
        theta = lib.tensor(THETA_2D)
        with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior"):
            grid = lib.nn.functional.affine_grid(theta, (2, 1, 3, 3))
        with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior"):
            lib.nn.functional.grid_sample(lib.ones(2, 1, 3, 3), grid)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("kwargs", [dict(scale_factor=2), dict(size=(7, 3)),
                                    dict(scale_factor=(1.5, 0.5)), dict(size=(4, 9))], ids=str)
def test_bicubic(kwargs, align_corners):
    resize = lambda lib, x: lib.nn.functional.interpolate(  # noqa: E731
        x, mode="bicubic", align_corners=align_corners, **kwargs)
    compare(resize, [rand(2, 3, 5, 6)])
    compare(resize, [rand(2, 3, 5, 6)], dtype="float32")
    compare(lambda lib, x: resize(lib, x).sin(), [rand(1, 2, 4, 5)], second=True)


def test_upsample_bicubic_module():
    compare(lambda lib, x: lib.nn.Upsample(scale_factor=3, mode="bicubic")(x), [rand(1, 2, 3, 4)])


def both(fn):
    return (lambda: fn(gradviz)), (lambda: fn(torch))


def theta(lib, shape=(1, 2, 3), dtype=None):
    return lib.ones(*shape, dtype=dtype or lib.float32)


ERRORS = [
    (lambda lib: lib.nn.functional.affine_grid(theta(lib), (1, 2, 3, 4, 5), align_corners=False),
     "Expected a batch of 3D affine matrices of shape Nx3x4 for size (1, 2, 3, 4, 5)."),
    (lambda lib: lib.nn.functional.affine_grid(theta(lib, (2, 3)), (1, 2, 3, 4),
                                               align_corners=False),
     "Expected a batch of 2D affine matrices of shape Nx2x3 for size (1, 2, 3, 4)."),
    (lambda lib: lib.nn.functional.affine_grid(theta(lib), (2, 2, 3, 4), align_corners=False),
     "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [1, 3]."),
    (lambda lib: lib.nn.functional.affine_grid(theta(lib, dtype=lib.int64), (1, 2, 3, 4),
                                               align_corners=False),
     "Expected theta to have floating point type, but got"),
    (lambda lib: lib.nn.functional.affine_grid(theta(lib), (1, 2, 3), align_corners=False),
     "affine_grid only supports 4D and 5D sizes"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4), lib.zeros(1, 2, 2, 2),
                                               mode="foo", align_corners=False),
     "expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'foo'"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4), lib.zeros(1, 2, 2, 2),
                                               padding_mode="foo", align_corners=False),
     "expected padding_mode to be 'zeros', 'border', or 'reflection', but got: 'foo'"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4), lib.zeros(1, 2, 2, 1),
                                               align_corners=False),
     "grid_sampler(): expected grid to have size 2 in last dimension"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4), lib.zeros(2, 2, 2, 2),
                                               align_corners=False),
     "grid_sampler(): expected grid and input to have same batch size"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4),
                                               lib.zeros(1, 2, 2, 2, dtype=lib.float64),
                                               align_corners=False),
     "expected scalar type Float but found Double"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4, dtype=lib.int64),
                                               lib.zeros(1, 2, 2, 2), align_corners=False),
     "\"grid_sampler_2d_cpu_kernel_impl\" not implemented for 'Long'"),
    (lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 2, 3, 4, 5), lib.zeros(1, 2, 2, 2, 3),
                                               mode="bicubic", align_corners=False),
     "grid_sampler(): bicubic interpolation only supports 4D input"),
    (lambda lib: lib.nn.functional.interpolate(lib.ones(1, 2, 3, dtype=lib.float32),
                                               scale_factor=2, mode="bicubic"),
     "Input Error: Only 3D, 4D and 5D input Tensors supported (got 3D)"),
    (lambda lib: lib.nn.functional.interpolate(lib.ones(1, 2, 3, 4, dtype=lib.int64),
                                               scale_factor=2, mode="bicubic"),
     "\"compute_indices_weights_cubic\" not implemented for 'Long'"),
]


@pytest.mark.parametrize("fn,phrase", ERRORS, ids=lambda v: v if isinstance(v, str) else "")
def test_errors(fn, phrase):
    same_error(*both(fn), phrase)
