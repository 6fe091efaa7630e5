"""``max_unpool1d/2d/3d``, ``MaxUnpool1d/2d/3d``, ``conv_transpose3d`` and ``ConvTranspose3d``
against torch: values, first and second derivatives, node names, saved indices, module
reprs, ``output_size`` and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

RNG = np.random.default_rng(3)


def _name(node):
    return node.name().removeprefix("torch::autograd::")


def _grads(lib, output, inputs):
    """The first derivatives of a weighted sum of ``output`` and the second derivatives of
    the sum of their squares, as numpy arrays."""
    weights = lib.tensor(np.linspace(-1.0, 2.0, output.numel()).reshape(tuple(output.shape)))
    first = lib.autograd.grad((output * weights).sum(), inputs, create_graph=True)
    linked = [g for g in first if g.requires_grad]
    second = (lib.autograd.grad(sum((g * g).sum() for g in linked), inputs, allow_unused=True)
              if linked else [None] * len(inputs))
    return ([g.detach().numpy() for g in first],
            [np.zeros(1) if g is None else g.numpy() for g in second])


UNPOOLS = {
    "1d": (lambda lib, x: lib.nn.functional.max_pool1d(x, 2, return_indices=True),
           lambda lib, o, i: lib.nn.functional.max_unpool1d(o, i, 2), (2, 3, 8)),
    "1d stride padding": (lambda lib, x: lib.nn.functional.max_pool1d(x, 3, 2, 1, return_indices=True),
                          lambda lib, o, i: lib.nn.functional.max_unpool1d(o, i, 3, 2, 1), (2, 3, 9)),
    "2d": (lambda lib, x: lib.nn.functional.max_pool2d(x, 2, return_indices=True),
           lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i, 2), (2, 3, 4, 6)),
    "2d output_size": (lambda lib, x: lib.nn.functional.max_pool2d(x, 2, return_indices=True),
                       lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i, 2, output_size=(5, 7)),
                       (2, 3, 5, 7)),
    "2d unbatched": (lambda lib, x: lib.nn.functional.max_pool2d(x, 2, return_indices=True),
                     lambda lib, o, i: lib.nn.MaxUnpool2d(2)(o, i), (3, 4, 4)),
    "2d module output_size with batch": (
        lambda lib, x: lib.nn.MaxPool2d(3, 2, 1, return_indices=True)(x),
        lambda lib, o, i: lib.nn.MaxUnpool2d(3, 2, 1)(o, i, output_size=[2, 3, 6, 5]), (2, 3, 6, 5)),
    "3d": (lambda lib, x: lib.nn.functional.max_pool3d(x, 2, return_indices=True),
           lambda lib, o, i: lib.nn.functional.max_unpool3d(o, i, 2), (1, 2, 4, 4, 6)),
    "3d module": (lambda lib, x: lib.nn.MaxPool3d((2, 1, 2), return_indices=True)(x),
                  lambda lib, o, i: lib.nn.MaxUnpool3d((2, 1, 2))(o, i), (2, 4, 3, 4)),
}
DATA = {name: RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.1 for name, (_, _, shape) in UNPOOLS.items()}


def _unpool(lib, name):
    pool, unpool, _ = UNPOOLS[name]
    x = lib.tensor(DATA[name], requires_grad=True)
    pooled, indices = pool(lib, x)
    pooled = pooled * 1.5  # a non-leaf
    out = unpool(lib, pooled, indices)
    first, second = _grads(lib, out, (x,))
    return out.detach().numpy(), _name(out.grad_fn), first, second


@pytest.mark.parametrize("name", sorted(UNPOOLS))
def test_max_unpool_matches_torch(name):
    ours, theirs = _unpool(gradviz, name), _unpool(torch, name)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1] == theirs[1]
    for mine, reference in zip(ours[2] + ours[3], theirs[2] + theirs[3]):
        np.testing.assert_allclose(mine, reference, rtol=1e-12, atol=1e-12)


def test_max_unpool_node_keeps_the_indices_as_torch():
    for lib in (gradviz, torch):
        x = lib.tensor(DATA["2d"], requires_grad=True)
        pooled, indices = lib.nn.functional.max_pool2d(x, 2, return_indices=True)
        node = lib.nn.functional.max_unpool2d(pooled, indices, 2).grad_fn
        assert _name(node) == "MaxUnpool2DBackward0" and node._saved_indices is indices
        assert _name(node.next_functions[0][0]) == "MaxPool2DWithIndicesBackward0"


@pytest.mark.parametrize("module,text", [
    (lambda lib: lib.nn.MaxUnpool1d(3), "MaxUnpool1d(kernel_size=(3,), stride=(3,), padding=(0,))"),
    (lambda lib: lib.nn.MaxUnpool2d(2, stride=1, padding=1), None),
    (lambda lib: lib.nn.MaxUnpool3d((2, 2, 2), 1), None),
])
def test_module_reprs_match_torch(module, text):
    assert repr(module(gradviz)) == repr(module(torch))
    assert text is None or repr(module(torch)) == text


@pytest.mark.parametrize("bad,error,phrase", [
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i, 2, output_size=(9, 9)), ValueError,
     'invalid output_size "\\(9, 9\\)" \\(dim 0 must be between 2 and 6\\)'),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i, 2, output_size=(9,)), ValueError,
     "output_size should be a sequence containing 2 or 4 elements, but it has a length of '1'"),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i + 100, 2), RuntimeError,
     "Found an invalid max index: \\d+ \\(output volumes are of size 4x4\\)"),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i.float(), 2), RuntimeError,
     "elements in indices should be type int64 but got: Float"),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i[:, :, :1], 2), RuntimeError,
     "Expected shape of indices to be same as that of the input tensor \\(\\[1, 2, 2, 2\\]\\)"),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o[0, 0], i[0, 0], 2), RuntimeError,
     "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with 2 dimensions."),
    (lambda lib, o, i: lib.nn.functional.max_unpool3d(o[0], i[0], 2), RuntimeError,
     "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with 3 dimensions."),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o.long(), i, 2), NotImplementedError,
     "\"max_unpool2d\" not implemented for 'Long'"),
    (lambda lib, o, i: lib.nn.functional.max_unpool3d(o.bool().unsqueeze(0), i.unsqueeze(0), 2),
     NotImplementedError, "\"max_unpool3d\" not implemented for 'Bool'"),
    (lambda lib, o, i: lib.nn.functional.max_unpool2d(o, i, 3, stride=2, padding=1), RuntimeError,
     "Found an invalid max index"),
])
def test_max_unpool_errors_match_torch(bad, error, phrase):
    for lib in (gradviz, torch):
        pooled, indices = lib.nn.functional.max_pool2d(lib.tensor(DATA["2d"][:1, :2, :, :4]), 2,
                                                       return_indices=True)
        with pytest.raises(error, match=phrase):
            bad(lib, pooled, indices)


TRANSPOSED = [dict(), dict(stride=2), dict(stride=2, padding=1, output_padding=1),
              dict(stride=(1, 2, 3), padding=(0, 1, 2), dilation=(2, 1, 1)), dict(stride=2, groups=2),
              dict(padding=(1, 0, 1), dilation=2)]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("case", range(len(TRANSPOSED)))
def test_conv_transpose3d_matches_torch(case, bias):
    arguments = TRANSPOSED[case]
    arrays = [RNG.standard_normal((2, 4, 3, 2, 3)), RNG.standard_normal((4, 3, 2, 3, 2)),
              RNG.standard_normal(3 * arguments.get("groups", 1))]

    def run(lib):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in arrays)
        out = lib.nn.functional.conv_transpose3d(x, w, b if bias else None, **arguments)
        inputs = (x, w, b) if bias else (x, w)
        first, second = _grads(lib, out, inputs)
        return out.detach().numpy(), _name(out.grad_fn), first, second

    ours, theirs = run(gradviz), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-10)
    assert ours[1] == theirs[1] == "ConvolutionBackward0"
    for mine, reference in zip(ours[2] + ours[3], theirs[2] + theirs[3]):
        np.testing.assert_allclose(mine, reference, rtol=1e-10, atol=1e-9)


def test_conv_transpose3d_module_matches_torch():
    def run(lib):
        lib.manual_seed(0)
        layer = lib.nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        with lib.no_grad():
            layer.weight.copy_(lib.tensor(np.linspace(-1, 1, layer.weight.numel()).reshape(
                tuple(layer.weight.shape))))
            layer.bias.copy_(lib.tensor([0.1, -0.2, 0.3, 0.0]))
        x = lib.tensor(np.linspace(0, 1, 54).reshape(2, 3, 3, 3), dtype=lib.float32)
        unbatched = layer(x)
        sized = layer(x.unsqueeze(0), output_size=(5, 5, 5))
        sized.sum().backward()
        return ((repr(layer), tuple(layer.weight.shape), tuple(sized.shape),
                 sorted(name for name, _ in layer.named_parameters())),
                unbatched.detach().numpy(), layer.weight.grad.numpy())

    ours, theirs = run(gradviz), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad,phrase", [
    (lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(2, 3, 3), lib.ones(2, 1, 2, 2, 2)),
     "Expected 4D \\(unbatched\\) or 5D \\(batched\\) input to conv_transpose3d, but got input of size: \\[2, 3, 3\\]"),
    (lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 3, 3, 3), lib.ones(3, 1, 2, 2, 2)),
     "Given transposed=1, weight of size \\[3, 1, 2, 2, 2\\], expected input\\[1, 2, 3, 3, 3\\] to have 3 channels"),
    (lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 3, 3, 3), lib.ones(2, 1, 2, 2, 2), lib.ones(3)),
     "expected bias to be 1-dimensional with 1 elements, but got bias of size \\[3\\] instead"),
    (lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 3, 3, 3), lib.ones(2, 1, 2, 2, 2), stride=2,
                                                    output_padding=2),
     "output padding must be smaller than either stride or dilation, but got output_padding_depth: 2 "
     "output_padding_height: 2 output_padding_width: 2 stride_depth: 2"),
    (lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 3, 3, 3), lib.ones(2, 1, 2, 2, 2), padding=3),
     "Given input size per channel: \\(3 x 3 x 3\\). Calculated output size per channel: \\(-2 x -2 x -2\\). "
     "Output size is too small"),
])
def test_conv_transpose3d_errors_match_torch(bad, phrase):
    for lib in (gradviz, torch):
        with pytest.raises(RuntimeError, match=phrase):
            bad(lib)


def test_lazy_conv_transpose3d_matches_torch():
    def run(lib):
        layer = lib.nn.LazyConvTranspose3d(4, 2, stride=2, bias=True)
        before = type(layer).__name__
        out = layer(lib.zeros(1, 3, 2, 2, 2))
        return (before, type(layer).__name__, tuple(layer.weight.shape), tuple(layer.bias.shape),
                tuple(out.shape), repr(layer))

    assert run(gradviz) == run(torch)
