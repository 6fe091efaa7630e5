"""Tensors of no elements have PyTorch's strides (Note [Empty tensors' strides] in
gradviz_ext/_ops.py): numpy gives every new empty array all-zero strides, PyTorch the
contiguous strides of the shape. Products with an empty dimension (mm, bmm, matmul in all its
cases, baddbmm, addmm, addbmm, F.linear), forward and the gradients that reach the leaves, and
a range of other ops, factories and views; a conversion from a numpy array keeps the array's
strides, as PyTorch's does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

PRODUCTS = {
    "mm": (lambda m, a, b: m.mm(a, b),
           [((0, 3), (3, 4)), ((3, 0), (0, 4)), ((3, 4), (4, 0)), ((0, 0), (0, 0))]),
    "bmm": (lambda m, a, b: m.bmm(a, b),
            [((2, 0, 3), (2, 3, 4)), ((0, 2, 3), (0, 3, 4)), ((2, 2, 0), (2, 0, 4)),
             ((2, 2, 3), (2, 3, 0))]),
    "matmul": (lambda m, a, b: m.matmul(a, b),
               [((2, 0, 3), (2, 3, 4)), ((0, 2, 3), (0, 3, 4)), ((2, 2, 0), (2, 0, 4)),
                ((2, 1, 0, 3), (3, 3, 4)), ((0, 1, 2, 3), (4, 3, 2)), ((1, 0, 3), (5, 3, 2)),
                ((0, 3), (3,)), ((3,), (3, 0)), ((0,), (0,)), ((2, 0, 3), (3,)),
                ((3,), (2, 3, 0)), ((0, 3), (3, 4)), ((2, 0, 3), (3, 4)), ((4, 0), (2, 0, 5))]),
    "baddbmm": (lambda m, c, a, b: m.baddbmm(c, a, b),
                [((2, 0, 4), (2, 0, 3), (2, 3, 4)), ((0, 2, 4), (0, 2, 3), (0, 3, 4)),
                 ((2, 2, 4), (2, 2, 0), (2, 0, 4)), ((1,), (2, 0, 3), (2, 3, 4))]),
    "addmm": (lambda m, c, a, b: m.addmm(c, a, b),
              [((4,), (0, 3), (3, 4)), ((0, 4), (0, 3), (3, 4)), ((3, 4), (3, 0), (0, 4)),
               ((0,), (3, 4), (4, 0))]),
    "addbmm": (lambda m, c, a, b: m.addbmm(c, a, b),
               [((0, 4), (2, 0, 3), (2, 3, 4)), ((2, 4), (0, 2, 3), (0, 3, 4))]),
    "linear": (lambda m, x, w, b: m.nn.functional.linear(x, w, b),
               [((0, 3), (4, 3), (4,)), ((2, 0, 3), (4, 3), (4,)), ((2, 3), (0, 3), (0,)),
                ((5, 0), (4, 0), (4,))]),
}
PRODUCT_CASES = [(name, shapes) for name, (_, cases) in PRODUCTS.items() for shapes in cases]


def _layout(t):
    return tuple(t.shape), t.stride(), t.is_contiguous()


def _run(module, program, shapes, dtype):
    rng = np.random.default_rng(0)
    # from a list, reshaped: PyTorch keeps a numpy array's strides (numpy's all-zero ones of
    # an empty array too), a list's are contiguous
    leaves = [module.tensor(rng.standard_normal(shape).astype(dtype).ravel().tolist(),
                            dtype=getattr(module, np.dtype(dtype).name)).reshape(shape)
              .detach().requires_grad_() for shape in shapes]
    out = program(module, *leaves)
    out.backward(module.ones_like(out))
    return out, leaves


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,shapes", PRODUCT_CASES)
def test_empty_products_have_torchs_strides(name, shapes, dtype):
    program = PRODUCTS[name][0]
    out, leaves = _run(gradviz, program, shapes, dtype)
    reference, reference_leaves = _run(torch, program, shapes, dtype)
    assert _layout(out) == _layout(reference)
    assert type(out.grad_fn).__name__ == type(reference.grad_fn).__name__
    assert np.array_equal(out.detach().numpy(), reference.detach().numpy())
    for leaf, reference_leaf in zip(leaves, reference_leaves):
        assert _layout(leaf.grad) == _layout(reference_leaf.grad)
        assert np.array_equal(leaf.grad.numpy(), reference_leaf.grad.numpy())


def test_empty_batched_matmul_gave_zero_strides():
    """The case that was noticed: numpy's matmul of empty operands has strides (0, 0, 0)."""
    for first, second, strides in (((2, 0, 3), (2, 3, 4), (4, 4, 1)),
                                   ((0, 2, 3), (0, 3, 4), (8, 4, 1))):
        out = gradviz.bmm(gradviz.ones(*first), gradviz.ones(*second))
        assert out.stride() == strides == torch.bmm(torch.ones(*first),
                                                    torch.ones(*second)).stride()


OPS = {
    "exp": lambda m, x: x.exp(), "mul": lambda m, x: x * x, "sum": lambda m, x: x.sum(1),
    "sum keepdim": lambda m, x: x.sum(0, keepdim=True), "mean": lambda m, x: x.mean(-1),
    "softmax": lambda m, x: m.softmax(x, -1), "clone": lambda m, x: x.clone(),
    "contiguous": lambda m, x: x.contiguous(), "transpose": lambda m, x: x.transpose(0, 2),
    "permute": lambda m, x: x.permute(2, 0, 1), "slice": lambda m, x: x[:, :, 1:],
    "flatten": lambda m, x: x.flatten(), "view": lambda m, x: x.view(-1),
    "cat": lambda m, x: m.cat([x, x], 1), "stack": lambda m, x: m.stack([x, x]),
    "repeat": lambda m, x: x.repeat(2, 1, 1), "cumsum": lambda m, x: x.cumsum(-1),
    "flip": lambda m, x: x.flip(0), "narrow": lambda m, x: x.narrow(0, 0, 0),
    "chunk": lambda m, x: x.chunk(2, -1)[0], "zeros_like": lambda m, x: x + m.zeros_like(x),
    "double": lambda m, x: x.double(), "mT": lambda m, x: x.mT, "sort": lambda m, x: x.sort(-1)[0],
    "layer_norm": lambda m, x: m.nn.functional.layer_norm(x, x.shape[-1:]),
    "pad": lambda m, x: m.nn.functional.pad(x, (1, 1)),
}


@pytest.mark.parametrize("shape", [(2, 0, 3), (0, 2, 3), (2, 3, 0), (0, 0, 3)])
@pytest.mark.parametrize("name", list(OPS))
def test_ops_on_empty_tensors_have_torchs_strides(name, shape):
    results = []
    for module in (gradviz, torch):
        x = module.ones(*shape, requires_grad=True)
        out = OPS[name](module, x)
        out.sum().backward()
        results.append((_layout(out), _layout(x.grad)))
    assert results[0] == results[1]


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3), (2, 0, 4), (0, 2, 4), (2, 3, 0), (1, 0)])
def test_factories_of_empty_tensors(shape):
    for make in (lambda m: m.empty(*shape), lambda m: m.zeros(*shape), lambda m: m.ones(shape),
                 lambda m: m.randn(*shape), lambda m: m.full(shape, 2.0),
                 lambda m: m.zeros(*shape, dtype=m.int64), lambda m: m.Tensor(*shape),
                 lambda m: m.tensor(np.zeros(shape).tolist())):
        assert _layout(make(gradviz)) == _layout(make(torch))
    assert gradviz.Tensor().stride() == torch.Tensor().stride() == (1,)


NUMPY_EMPTIES = {
    "new": lambda: np.empty((0, 3), np.float32),  # numpy's (0, 0): PyTorch keeps them
    "sliced": lambda: np.ones((2, 3), np.float32)[:, :0],
    "transposed": lambda: np.ones((3, 2), np.float32).T[:, :0],
    "float64": lambda: np.ones((2, 0, 3)),
}


@pytest.mark.parametrize("name", list(NUMPY_EMPTIES))
def test_conversions_keep_a_numpy_arrays_strides(name):
    for convert in (lambda m, a: m.tensor(a), lambda m, a: m.from_numpy(a),
                    lambda m, a: m.as_tensor(a), lambda m, a: m.as_tensor(a, dtype=m.float64),
                    lambda m, a: m.tensor(a, dtype=m.float16), lambda m, a: m.asarray(a),
                    lambda m, a: m.Tensor(a), lambda m, a: m.DoubleTensor(a)):
        assert _layout(convert(gradviz, NUMPY_EMPTIES[name]())) == _layout(
            convert(torch, NUMPY_EMPTIES[name]()))


@pytest.mark.filterwarnings("ignore:To copy construct")
@pytest.mark.parametrize("size,stride", [((2, 0, 3), (1, 5, 7)), ((2, 3, 0), (1, 1, 1)),
                                         ((0, 3), (1, 0)), ((3, 0), (1, 3))])
def test_copies_of_an_empty_tensor_keep_its_strides(size, stride):
    """PyTorch counts every empty tensor as dense: clone, the *_like constructors, a conversion
    and the first gradient of a leaf keep its strides, whatever they are."""
    made = []
    for module in (gradviz, torch):
        x = module.empty_strided(size, stride)
        leaf = module.empty_strided(size, stride).requires_grad_()
        leaf.backward(module.empty(size))
        made.append([_layout(t) for t in (
            x, x.clone(), x.clone().clone(), module.empty_like(x), module.zeros_like(x),
            module.ones_like(x, dtype=module.float64), module.tensor(x),
            module.as_tensor(x, dtype=module.float64), module.transpose(x, 0, 1),
            x.contiguous(), leaf.grad)])
    assert made[0] == made[1]
