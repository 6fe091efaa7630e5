"""nn.ConvTranspose1d/2d and F.conv_transpose1d/2d against torch: values, gradients of the input,
weight and bias (torch's weights loaded through state_dict), second-order gradients, node
name, init distribution, repr, output_size, errors; gradcheck and gradgradcheck in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close, compare_layer, same_error

import gradviz

CASES_2D = [
    dict(),
    dict(stride=2),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2)),
    dict(stride=2, dilation=2, output_padding=1),
    dict(dilation=3, padding=2, output_padding=2),  # output_padding >= stride (< dilation)
    dict(groups=2),
    dict(groups=2, stride=2, padding=1, output_padding=1, dilation=2),
    dict(bias=False, stride=3),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", CASES_2D, ids=[str(c) for c in CASES_2D])
def test_conv_transpose2d_module(kw, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 4))
    outs, _ = compare_layer(lambda nn: nn.ConvTranspose2d(4, 6, 3, **kw), [x], dtype)
    assert outs[0].grad_fn.name() == "ConvolutionBackward0"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1),
                                dict(groups=3, dilation=2), dict(bias=False, stride=3, padding=2)])
def test_conv_transpose1d_module(kw, dtype):
    x = np.random.default_rng(1).standard_normal((3, 6, 7))
    outs, _ = compare_layer(lambda nn: nn.ConvTranspose1d(6, 3, 4, **kw), [x], dtype)
    assert outs[0].grad_fn.name() == "ConvolutionBackward0"


def test_unbatched_inputs():
    compare_layer(lambda nn: nn.ConvTranspose2d(2, 3, 2, stride=2),
                  [np.random.default_rng(2).standard_normal((2, 3, 3))])
    compare_layer(lambda nn: nn.ConvTranspose1d(2, 3, 2, stride=2),
                  [np.random.default_rng(2).standard_normal((2, 5))])


@pytest.mark.parametrize("size", [(11, 11), [12, 12], (2, 3, 12, 11)])
def test_output_size(size):
    x = np.random.default_rng(3).standard_normal((2, 4, 5, 5))
    outs, _ = compare_layer(lambda nn: nn.ConvTranspose2d(4, 3, 3, stride=2), [x],
                            forward=lambda layer, t: layer(t, output_size=size))
    assert tuple(outs[0].shape[2:]) == tuple(size[-2:])


def _second_order(lib, x, w, b, kw):
    tx, tw, tb = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
    out = lib.nn.functional.conv_transpose2d(tx, tw, tb, **kw)
    gx, gw = lib.autograd.grad((out ** 2).sum(), (tx, tw), create_graph=True)
    return lib.autograd.grad((gx ** 3).sum() + (gw ** 2).sum(), (tx, tw, tb), allow_unused=True)


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(groups=2)])
def test_second_order_gradients(kw):
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 4, 3, 3)), rng.standard_normal((4, 3, 2, 2)), rng.standard_normal(6 if kw.get("groups") else 3)
    for a, t in zip(_second_order(gradviz, x, w, b, kw), _second_order(torch, x, w, b, kw)):
        if t is None:
            assert a is None or not a.detach().numpy().any()
        else:
            close(a, t, "second-order gradient")


@pytest.mark.parametrize("fn,shapes,kw", [
    ("conv_transpose2d", [(1, 2, 3, 2), (2, 2, 2, 3), (4,)], dict(stride=2, groups=2, output_padding=1)),
    ("conv_transpose2d", [(2, 1, 2, 3), (1, 2, 3, 2), (2,)], dict(padding=1, dilation=2)),
    ("conv_transpose1d", [(2, 2, 4), (2, 3, 3), (3,)], dict(stride=2, padding=1, output_padding=1)),
])
def test_gradcheck_and_gradgradcheck(fn, shapes, kw):
    rng = np.random.default_rng(5)
    inputs = tuple(gradviz.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes)
    f = lambda x, w, b: getattr(gradviz.nn.functional, fn)(x, w, b, **kw)  # noqa: E731
    assert gradviz.autograd.gradcheck(f, inputs)
    assert gradviz.autograd.gradgradcheck(f, inputs)


def test_init_shapes_distribution_state_dict_repr():
    gradviz.manual_seed(0)
    for kw in [dict(), dict(groups=2, stride=2, padding=1, output_padding=1, dilation=2, bias=False)]:
        g, t = gradviz.nn.ConvTranspose2d(4, 6, 3, **kw), torch.nn.ConvTranspose2d(4, 6, 3, **kw)
        assert repr(g) == repr(t)
        assert list(g.state_dict()) == list(t.state_dict())
        for (name, p), (_, q) in zip(g.named_parameters(), t.named_parameters()):
            assert tuple(p.shape) == tuple(q.shape), name
    # kaiming-uniform(a=sqrt(5)): U(-b, b) with b = 1/sqrt(fan_in), fan_in = (out/groups) * k * k
    big = gradviz.nn.ConvTranspose2d(64, 32, 3, groups=2)
    bound = 1 / np.sqrt(16 * 9)
    w = big.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.02 * bound
    assert repr(gradviz.nn.ConvTranspose1d(4, 6, 3)) == repr(torch.nn.ConvTranspose1d(4, 6, 3))


def test_errors():
    F, TF = gradviz.nn.functional, torch.nn.functional
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 4, 5, 5)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def both(call, phrase, **kw):
        same_error(lambda: call(gradviz, F, **kw), lambda: call(torch, TF, **kw), phrase)

    both(lambda m, f: f.conv_transpose2d(m.tensor(x[:, :3]), m.tensor(w)), "to have 4 channels, but got 3 channels instead")
    both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), stride=2, output_padding=2),
         "output padding must be smaller than either stride or dilation")
    both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), groups=3), "expected weight to be divisible by 3 at dimension 0")
    both(lambda m, f: f.conv_transpose2d(m.tensor(x[0, 0]), m.tensor(w)),
         "Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, but got input of size: [5, 5]")
    both(lambda m, f: f.conv_transpose1d(m.tensor(x), m.tensor(w[:, :, 0])),
         "Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d")
    both(lambda m, f: f.conv_transpose2d(m.tensor(x), m.tensor(w), m.tensor(x[0, :, 0, 0])),
         "expected bias to be 1-dimensional with 3 elements, but got bias of size [4]")
    both(lambda m, f: m.nn.ConvTranspose2d(4, 3, 3, padding_mode="reflect"),
         'Only "zeros" padding mode is supported for ConvTranspose2d')
    both(lambda m, f: m.nn.ConvTranspose2d(4, 3, 3, groups=3), "in_channels must be divisible by groups")
    both(lambda m, f: m.nn.ConvTranspose2d(4, 3, 3, groups=2), "out_channels must be divisible by groups")
    both(lambda m, f: m.nn.ConvTranspose2d(4, 3, 3, stride=2)(m.tensor(x), output_size=[20, 20]),
         "requested an output size of [20, 20], but valid sizes range from [11, 11] to [12, 12]")
    # an output too small to exist: torch's oneDNN message differs, so the type only
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.conv_transpose2d(gradviz.tensor(x), gradviz.tensor(w), padding=5)
    with pytest.raises(RuntimeError):
        TF.conv_transpose2d(torch.tensor(x), torch.tensor(w), padding=5)
