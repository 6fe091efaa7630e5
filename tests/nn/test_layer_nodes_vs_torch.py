"""One backward node per layer, named as torch names it: grouped/depthwise convolutions, the
3-D convolution and pools, ``embedding_bag``, ``grid_sample``, bicubic ``interpolate`` and
``pack_padded_sequence``
against torch 2.13: ``y.grad_fn.name()``, the set of node names in the whole backward graph,
the values and the first gradients, and ``gradgradcheck`` where torch's passes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_compare import close

import gradviz


def rand(*shape, seed=0, low=None, high=None):
    rng = np.random.default_rng(seed)
    if low is not None:
        return rng.uniform(low, high, shape)
    return rng.standard_normal(shape)


def node_names(out):
    """The names of every node reachable from ``out.grad_fn`` (torch's ``AccumulateGrad`` is
    ``torch::autograd::AccumulateGrad``: the namespace is dropped)."""
    names, seen, stack = set(), set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.name().split("::")[-1])
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def run(lib, fn, arrays, grads, dtype):
    xs = [lib.tensor(a, dtype=getattr(lib, dtype) if np.asarray(a).dtype.kind == "f" else None,
                     requires_grad=bool(g)) for a, g in zip(arrays, grads)]
    return xs, fn(lib, *xs)


F = lambda lib: lib.nn.functional  # noqa: E731

BAG_INDICES = np.array([1, 2, 4, 5, 4, 3, 2, 9])
BAG_OFFSETS = np.array([0, 2, 2, 5])

CASES = {
    "depthwise conv2d": (lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=1, groups=4),
                         [rand(2, 4, 6, 6), rand(4, 1, 3, 3, seed=1), rand(4, seed=2)]),
    "depthwise strided conv2d, no bias": (
        lambda lib, x, w: F(lib).conv2d(x, w, stride=2, padding=1, groups=6),
        [rand(2, 6, 7, 5), rand(12, 1, 3, 3, seed=1)]),
    "grouped dilated conv2d": (
        lambda lib, x, w, b: F(lib).conv2d(x, w, b, padding=(2, 1), dilation=(2, 1), groups=2),
        [rand(1, 4, 6, 5), rand(6, 2, 3, 2, seed=1), rand(6, seed=2)]),
    "unbatched grouped conv2d": (lambda lib, x, w: F(lib).conv2d(x, w, groups=3),
                                 [rand(3, 5, 5), rand(6, 1, 2, 2, seed=1)]),
    "grouped conv1d": (lambda lib, x, w, b: F(lib).conv1d(x, w, b, stride=2, groups=3),
                       [rand(2, 6, 9), rand(3, 2, 3, seed=1), rand(3, seed=2)]),
    "conv3d": (lambda lib, x, w, b: F(lib).conv3d(x, w, b, stride=(1, 2, 1), padding=1),
               [rand(2, 3, 4, 5, 4), rand(4, 3, 2, 3, 3, seed=1), rand(4, seed=2)]),
    "grouped conv3d": (lambda lib, x, w: F(lib).conv3d(x, w, dilation=(1, 1, 2), groups=2),
                       [rand(1, 4, 4, 4, 5), rand(2, 2, 2, 2, 2, seed=1)]),
    "conv3d uneven same": (lambda lib, x, w: F(lib).conv3d(x, w, padding="same"),
                           [rand(1, 2, 4, 4, 4), rand(3, 2, 2, 3, 2, seed=1)]),
    "max_pool3d": (lambda lib, x: F(lib).max_pool3d(x, 2, stride=(1, 2, 2), padding=1),
                   [rand(2, 3, 4, 5, 6)]),
    "max_pool3d ceil_mode dilation": (
        lambda lib, x: F(lib).max_pool3d(x, 2, stride=2, dilation=(1, 2, 1), ceil_mode=True),
        [rand(1, 2, 5, 6, 5)]),
    "max_pool3d indices": (lambda lib, x: F(lib).max_pool3d(x, 3, 2, 1, return_indices=True)[0],
                           [rand(3, 5, 5, 5)]),
    "avg_pool3d": (lambda lib, x: F(lib).avg_pool3d(x, 3, stride=2, padding=1,
                                                    count_include_pad=False),
                   [rand(2, 2, 5, 6, 5)]),
    "unbatched avg_pool3d": (lambda lib, x: F(lib).avg_pool3d(x, 2, stride=1),
                             [rand(2, 3, 4, 3)]),
    "unbatched max_pool2d and avg_pool2d": (
        lambda lib, x: F(lib).max_pool2d(x, 2) + F(lib).avg_pool2d(x, 2)
        + F(lib).adaptive_avg_pool2d(x, (2, 3)), [rand(3, 4, 6)]),
    "avg_pool3d ceil_mode divisor": (
        lambda lib, x: F(lib).avg_pool3d(x, 2, ceil_mode=True, divisor_override=3),
        [rand(1, 2, 5, 4, 3)]),
    "adaptive_avg_pool3d": (lambda lib, x: F(lib).adaptive_avg_pool3d(x, (3, 2, 4)),
                            [rand(2, 2, 5, 5, 6)]),
    "global average pools (torch's mean)": (
        lambda lib, x: F(lib).adaptive_avg_pool3d(x, 1).sum() + F(lib).adaptive_avg_pool2d(
            x[0], (1, 1)).sum() + F(lib).adaptive_avg_pool1d(x[0, 0], 1).sum(),
        [rand(2, 3, 4, 4, 4)]),
    "embedding_bag mean": (
        lambda lib, w: F(lib).embedding_bag(lib.tensor(BAG_INDICES), w, lib.tensor(BAG_OFFSETS)),
        [rand(10, 3)]),
    "embedding_bag max padding_idx": (
        lambda lib, w: F(lib).embedding_bag(lib.tensor(BAG_INDICES), w, lib.tensor(BAG_OFFSETS),
                                            mode="max", padding_idx=4),
        [rand(10, 3)]),
    "embedding_bag weighted sum": (
        lambda lib, w, p: F(lib).embedding_bag(lib.tensor(BAG_INDICES), w,
                                               lib.tensor(BAG_OFFSETS), mode="sum",
                                               per_sample_weights=p),
        [rand(10, 3), rand(8, seed=1)]),
    "embedding_bag 2-D input": (
        lambda lib, w: F(lib).embedding_bag(lib.tensor(BAG_INDICES.reshape(2, 4)), w,
                                            mode="sum"),
        [rand(10, 3)]),
    "grid_sample bilinear": (
        lambda lib, x, g: F(lib).grid_sample(x, g, align_corners=False),
        [rand(2, 3, 5, 6), rand(2, 4, 3, 2, seed=1, low=-1.3, high=1.3)]),
    "grid_sample reflection": (
        lambda lib, x, g: F(lib).grid_sample(x, g, padding_mode="reflection", align_corners=True),
        [rand(1, 2, 4, 5), rand(1, 3, 3, 2, seed=1, low=-1.6, high=1.6)]),
    "grid_sample nearest border": (
        lambda lib, x, g: F(lib).grid_sample(x, g, mode="nearest", padding_mode="border",
                                             align_corners=False),
        [rand(1, 2, 4, 5), rand(1, 3, 3, 2, seed=1, low=-1.3, high=1.3)]),
    "bicubic interpolate": (
        lambda lib, x: F(lib).interpolate(x, scale_factor=(2, 1.5), mode="bicubic"),
        [rand(2, 3, 4, 5)]),
    "bicubic interpolate align_corners": (
        lambda lib, x: F(lib).interpolate(x, size=(3, 7), mode="bicubic", align_corners=True),
        [rand(1, 2, 5, 4)]),
    "pack_padded_sequence": (
        lambda lib, x: lib.nn.utils.rnn.pack_padded_sequence(x, [4, 2, 1]).data,
        [rand(4, 3, 2)]),
    "pack_padded_sequence batch_first": (
        lambda lib, x: lib.nn.utils.rnn.pack_padded_sequence(x, [3, 3, 1], batch_first=True).data,
        [rand(3, 4, 2)]),
    "pack_padded_sequence unsorted": (
        lambda lib, x: lib.nn.utils.rnn.pack_padded_sequence(x, [1, 4, 2],
                                                             enforce_sorted=False).data,
        [rand(4, 3)]),
}

MODULES = {
    "MobileNet block": lambda nn: nn.Sequential(
        nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
        nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6()),
    "Conv3d": lambda nn: nn.Conv3d(4, 6, (3, 2, 3), stride=2, padding=1, groups=2),
    "MaxPool3d": lambda nn: nn.MaxPool3d(2),
    "AvgPool3d": lambda nn: nn.AvgPool3d(3, stride=1, padding=1),
    "AdaptiveAvgPool3d": lambda nn: nn.AdaptiveAvgPool3d((None, 2, 3)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(CASES))
def test_one_node_with_torchs_name(name, dtype):
    fn, arrays = CASES[name]
    results = {}
    for lib in (gradviz, torch):
        xs, out = run(lib, fn, arrays, [True] * len(arrays), dtype)
        probe = lib.tensor(rand(*out.shape, seed=9), dtype=out.dtype)
        results[lib] = (out, node_names(out), lib.autograd.grad((out * probe).sum(), xs))
    (ours, our_names, our_grads), (theirs, their_names, their_grads) = (results[gradviz],
                                                                      results[torch])
    assert ours.grad_fn.name() == theirs.grad_fn.name()
    assert our_names == their_names, f"gradviz {sorted(our_names)} vs torch {sorted(their_names)}"
    close(ours, theirs, "output")
    for i, (a, b) in enumerate(zip(our_grads, their_grads)):
        close(a, b, f"gradient {i}")


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_show_torchs_nodes(name):
    torch.manual_seed(0)
    th_module = MODULES[name](torch.nn)
    gv_module = MODULES[name](gradviz.nn)
    gv_module.load_state_dict({k: gradviz.tensor(v.numpy().copy())
                               for k, v in th_module.state_dict().items()})
    shape = (2, 8, 6, 6) if name == "MobileNet block" else (2, 4, 5, 6, 5)
    x = rand(*shape)
    outs = [module(lib.tensor(x, dtype=lib.float32, requires_grad=True))
            for module, lib in ((gv_module, gradviz), (th_module, torch))]
    assert outs[0].grad_fn.name() == outs[1].grad_fn.name()
    assert node_names(outs[0]) == node_names(outs[1])
    close(outs[0], outs[1], "output")


GRADGRAD = {  # small inputs keep the finite differences cheap
    "depthwise conv2d": (lambda lib, x, w: F(lib).conv2d(x, w, padding=1, groups=2),
                         [rand(1, 2, 2, 3), rand(2, 1, 2, 2, seed=1)]),
    "grouped conv1d": (lambda lib, x, w, b: F(lib).conv1d(x, w, b, stride=2, groups=2),
                       [rand(1, 4, 4), rand(2, 2, 2, seed=1), rand(2, seed=2)]),
    "grouped conv3d": (lambda lib, x, w, b: F(lib).conv3d(x, w, b, stride=(1, 2, 1), groups=2),
                       [rand(1, 4, 3, 3, 2), rand(2, 2, 2, 1, 2, seed=1), rand(2, seed=2)]),
    "max_pool3d": (lambda lib, x: F(lib).max_pool3d(x, 2, ceil_mode=True),
                   [rand(1, 2, 3, 3, 2)]),
    "avg_pool3d": (lambda lib, x: F(lib).avg_pool3d(x, 2, padding=1, count_include_pad=False),
                   [rand(1, 2, 3, 3, 2)]),
    "adaptive_avg_pool3d": (lambda lib, x: F(lib).adaptive_avg_pool3d(x, (2, 1, 2)),
                            [rand(1, 2, 3, 3, 3)]),
    "grid_sample bilinear": (
        lambda lib, x, g: F(lib).grid_sample(x, g, padding_mode="border", align_corners=False),
        [rand(1, 2, 3, 4), rand(1, 2, 2, 2, seed=1, low=-1.3, high=1.3)]),
    "bicubic interpolate": (lambda lib, x: F(lib).interpolate(x, size=(3, 2), mode="bicubic"),
                            [rand(1, 2, 2, 3)]),
    "pack_padded_sequence": (
        lambda lib, x: lib.nn.utils.rnn.pack_padded_sequence(x, [3, 2, 1], batch_first=True).data,
        [rand(3, 3, 2)]),
}


@pytest.mark.parametrize("name", list(GRADGRAD))
def test_gradgradcheck(name):
    fn, arrays = GRADGRAD[name]
    verdicts = []
    for lib in (gradviz, torch):
        xs = [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays]
        verdicts.append(lib.autograd.gradgradcheck(lambda *t: fn(lib, *t), xs))
    assert verdicts == [True, True]


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_embedding_bag_second_derivatives(mode):
    # torch has no derivative of its embedding_bag backward (NotImplementedError); gradviz's
    # backward is made of differentiable ops, checked here against finite differences
    indices, offsets = np.array([1, 2, 4, 0, 4, 3]), np.array([0, 2, 2])
    weights = [rand(5, 2), rand(6, seed=1)]
    with pytest.raises(NotImplementedError, match="_embedding_bag_backward"):
        xs = [torch.tensor(a, requires_grad=True) for a in weights]
        torch.autograd.gradgradcheck(lambda w, p: F(torch).embedding_bag(
            torch.tensor(indices), w, torch.tensor(offsets), mode="sum", per_sample_weights=p),
            xs)
    xs = [gradviz.tensor(a, requires_grad=True) for a in weights]
    if mode == "max":
        assert gradviz.autograd.gradgradcheck(lambda w: F(gradviz).embedding_bag(
            gradviz.tensor(indices), w, gradviz.tensor(offsets), mode="max"), xs[:1])
    else:
        assert gradviz.autograd.gradgradcheck(lambda w, p: F(gradviz).embedding_bag(
            gradviz.tensor(indices), w, gradviz.tensor(offsets), mode="sum",
            per_sample_weights=p), xs)


def test_create_graph_requires_grad_as_torch():
    # torch's backward kernels take the forward's inputs: a first gradient requires grad
    # whenever they do, even where it is constant in them
    cases = [lambda lib, x: F(lib).max_pool3d(x, 2) * 3,
             lambda lib, x: F(lib).avg_pool3d(x, 2) * 3,
             lambda lib, x: F(lib).adaptive_avg_pool3d(x, 1) * 3,
             lambda lib, x: F(lib).interpolate(x[0], scale_factor=2, mode="bicubic") * 3]
    for fn in cases:
        flags = []
        for lib in (gradviz, torch):
            x = lib.tensor(rand(1, 2, 4, 4, 4), requires_grad=True)
            first, = lib.autograd.grad(fn(lib, x).sum(), x, create_graph=True)
            flags.append(first.requires_grad)
        assert flags[0] == flags[1]
