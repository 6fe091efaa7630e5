"""``x[idx]`` with one integer tensor: Note [Rows by an index tensor] (gradviz/ops/_shape.py)
takes the rows with ``take`` and lets ``take`` check the bounds. Everything a user sees must
stay PyTorch's: values, shapes, strides, the node and its saved indices, gradients, and the
errors of every index the fast path hands to the general one."""

import numpy as np
import pytest
import torch

import gradviz

RNG = np.random.default_rng(3)
BASE = RNG.standard_normal((5, 4, 3))
INDICES = [[0, 2, -1], [[1, 0], [2, -2]], [2], [-3, 2, 0, 0], [[[2]]]]  # every view has 3+ rows
VIEWS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 1),
    "strided": lambda t: t[:, ::2],
    "permuted": lambda t: t.permute(2, 0, 1),
}


def _lookup(lib, view, index, dtype):
    x = lib.tensor(BASE, requires_grad=True)
    y = VIEWS[view](x)[lib.tensor(index, dtype=getattr(lib, dtype))]
    upstream = lib.tensor(np.random.default_rng(len(y.shape)).standard_normal(tuple(y.shape)))
    y.backward(upstream, retain_graph=True)  # the saved indices stay readable
    return y, x.grad


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("index", INDICES, ids=str)
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_rows_match_torch(view, index, dtype):
    got, got_grad = _lookup(gradviz, view, index, dtype)
    want, want_grad = _lookup(torch, view, index, dtype)
    assert tuple(got.shape) == tuple(want.shape)
    assert got.stride() == want.stride()
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(got_grad.numpy(), want_grad.numpy())
    assert got.grad_fn.name() == want.grad_fn.name() == "IndexBackward0"
    saved_got, saved_want = got.grad_fn._saved_indices, want.grad_fn._saved_indices
    assert len(saved_got) == len(saved_want) == 1
    np.testing.assert_array_equal(saved_got[0].numpy(), saved_want[0].numpy())


def _error(lib, shape, index, dtype="int64"):
    x = lib.zeros(shape, requires_grad=True)
    try:
        x[lib.tensor(index, dtype=getattr(lib, dtype))]
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        return type(error), str(error).split("\n")[0]
    return None


@pytest.mark.parametrize("shape,index,dtype", [
    ((3, 2), [0, 5], "int64"),
    ((3, 2), [-4], "int64"),
    ((3, 2), [[0, 1], [3, 0]], "int32"),
    ((3,), [0, 1], "int8"),
    ((3,), [0, 1], "int16"),
    ((3, 2), [1, 0], "uint8"),
    ((3, 2), [True, False], "bool"),
    ((), [0], "int64"),
    ((), [True], "bool"),
], ids=str)
def test_errors_match_torch(shape, index, dtype):
    assert _error(gradviz, shape, index, dtype) == _error(torch, shape, index, dtype)


@pytest.mark.parametrize("shape,key", [
    ((3,), lambda lib: (lib.tensor([0]), 0)),
    ((3, 2), lambda lib: (lib.tensor([0]), 0, 1)),
    ((3,), lambda lib: (lib.tensor([True, False, True]), 0)),
    ((3, 2), lambda lib: (lib.tensor([[True, False], [True, True], [False, False]]), 0)),
], ids=["index-and-int", "index-and-two-ints", "mask-and-int", "2d-mask-and-int"])
def test_too_many_indices_is_torchs_error(shape, key):
    errors = []
    for lib in (gradviz, torch):
        with pytest.raises(IndexError) as error:
            lib.zeros(shape)[key(lib)]
        errors.append(str(error.value))
    assert errors[0] == errors[1]


def test_masks_and_empty_indices_take_the_general_path_as_torch():
    for lib_index in ([True, False, True], [], [1, 0, 1]):
        results = []
        for lib in (gradviz, torch):
            x = lib.tensor(BASE[:3], requires_grad=True)
            dtype = (lib.bool if lib_index and isinstance(lib_index[0], bool)
                     else lib.uint8 if lib_index == [1, 0, 1] else lib.int64)
            with pytest.warns(UserWarning) if dtype is lib.uint8 else _no_warning():
                y = x[lib.tensor(lib_index, dtype=dtype)]
            y.sum().backward()
            results.append((tuple(y.shape), y.grad_fn.name(), x.grad.numpy()))
        assert results[0][:2] == results[1][:2]
        np.testing.assert_array_equal(results[0][2], results[1][2])


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_an_out_of_bounds_lookup_records_nothing():
    x = gradviz.tensor(BASE, requires_grad=True)
    version = x._version
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
        x[gradviz.tensor([0, 7])]
    assert x._version == version and x.grad is None
    y = x[gradviz.tensor([1, 1])]  # the next lookup works and its gradient is right
    y.sum().backward()
    expected = np.zeros_like(BASE)
    expected[1] = 2
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_an_inference_index_of_an_input_that_requires_grad_is_torchs_error():
    with gradviz.inference_mode():
        index = gradviz.tensor([0, 1])
    x = gradviz.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        x[index]
    with gradviz.no_grad():
        assert x[index].tolist() == [0.0, 0.0]
