"""``index_reduce`` / ``Tensor.index_reduce_`` against torch: values, first and second
derivatives for every reduction with and without ``include_self`` (ties, zeros), integer
``mean``, the node and its saved names, and torch's errors (Note [index_reduce as
scatter_reduce] in ``gradviz/ops/_index_reduce.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz
import gradviz._tensor as gradviz_core

pytestmark = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")

CASES = [(0, (4, 3), (5, 3), [0, 2, 2, 0, 3]), (1, (2, 4), (2, 3), [3, 3, 1]),
         (-1, (2, 3, 2), (2, 3, 3), [1, 0, 1])]


def _derivatives(lib, reduce, include_self, case, zeros):
    dim, self_shape, source_shape, index = case
    rng = np.random.default_rng(len(index) + 7 * zeros)
    x_array = rng.standard_normal(self_shape).round(1)
    source_array = rng.standard_normal(source_shape).round(1)
    if zeros:
        x_array.flat[::3] = 0
        source_array.flat[::2] = 0
    if reduce in ("amax", "amin"):  # whole numbers: ties between self and source, and in source
        x_array, source_array = x_array.round(), source_array.round()
    x = lib.tensor(x_array, requires_grad=True)
    source = lib.tensor(source_array, requires_grad=True)
    y = x.index_reduce(dim, lib.tensor(index), source, reduce, include_self=include_self)
    weights = lib.tensor(np.linspace(-1.0, 1.0, y.numel()).reshape(tuple(y.shape)))
    grad_x, grad_source = lib.autograd.grad((y * weights).sum(), (x, source), create_graph=True)
    results = [y, grad_x, grad_source]
    try:
        second = lib.autograd.grad((grad_x * grad_x).sum() + (grad_source * grad_source).sum(),
                                   (x, source), allow_unused=True)
        results += [np.zeros(1) if g is None else g for g in second]
    except RuntimeError as error:
        results.append(str(error))
    node = y.grad_fn.name()
    return node, [r if isinstance(r, str) else np.asarray(r.detach().numpy() if hasattr(r, "detach") else r)
                  for r in results]


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_values_and_derivatives_match_torch(reduce, include_self, case, zeros):
    ours = _derivatives(gradviz, reduce, include_self, CASES[case], zeros)
    theirs = _derivatives(torch, reduce, include_self, CASES[case], zeros)
    assert ours[0] == theirs[0] == "IndexReduceBackward0"
    assert len(ours[1]) == len(theirs[1])
    for mine, reference in zip(ours[1], theirs[1]):
        if isinstance(reference, str):
            assert mine == reference  # torch's double-backward error for two zeros meeting
        else:
            np.testing.assert_allclose(np.asarray(mine, dtype=float), reference, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_integer_tensors_match_torch(reduce, include_self):
    def run(lib):
        x = lib.tensor([[5, 7], [1, -2], [3, 3]])
        source = lib.tensor([[2, 3], [4, -9], [-5, 6]])
        return x.index_reduce(0, lib.tensor([0, 0, 2], dtype=lib.int32), source, reduce,
                              include_self=include_self).numpy().tolist()

    assert run(gradviz) == run(torch)


def test_in_place_form_records_the_node_and_bumps_the_version():
    def run(lib):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        y = x * 1.0
        returned = y.index_reduce_(1, lib.tensor([0, 0]), lib.tensor([[2.0, 3.0], [4.0, 5.0]]), "mean")
        y.sum().backward()
        return returned is y, y._version, y.grad_fn.name(), y.detach().numpy().tolist(), x.grad.numpy().tolist()

    assert run(gradviz) == run(torch)
    for lib in (gradviz, torch):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            lib.ones(2, requires_grad=True).index_reduce_(0, lib.tensor([0]), lib.ones(1), "prod")


def test_saved_attributes_match_torch():
    def run(lib):
        x = lib.ones(3, 2, requires_grad=True)
        y = lib.index_reduce(x, 0, lib.tensor([2]), lib.full((1, 2), 2.0), "amax", include_self=False)
        node = y.grad_fn
        return (node._saved_dim, node._saved_include_self, node._saved_reduce,
                node._saved_index.numpy().tolist(), node._saved_self.detach().numpy().tolist(),
                node._saved_source.numpy().tolist(), node._saved_result.detach().numpy().tolist())

    assert run(gradviz) == run(torch)


@pytest.mark.parametrize("bad,error,phrase", [
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0, 2]), s, "sum"), RuntimeError,
     "Expected reduce to be one of prod, mean, amax or amin but got sum"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0.0, 2.0]), s, "amax"), RuntimeError,
     "Expected dtype int32/int64 for index but got: Float"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([[0, 2]]), s, "amax"), IndexError,
     "Index is supposed to be a vector"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0, 7]), s, "amax"), IndexError, "index out of range in self"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0, -1]), s, "amax"), IndexError, "index out of range in self"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0, 1, 2]), s, "amax"), RuntimeError,
     "Number of indices \\(3\\) should be equal to source.size\\(dim\\): \\(2\\), for dim: 0"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0, 1]), lib.ones(2, 4), "amax"), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension"),
    (lambda lib, x, s: x.index_reduce(0, lib.tensor([0, 1]), s.double(), "amax"), RuntimeError,
     "self \\(Float\\) and source \\(Double\\) must have the same scalar type"),
    (lambda lib, x, s: x.index_reduce(2, lib.tensor([0, 1]), s, "amax"), IndexError, "Dimension out of range"),
])
def test_bad_calls_raise_torchs_errors(bad, error, phrase):
    for lib in (gradviz, torch):
        with pytest.raises(error, match=phrase):
            bad(lib, lib.ones(4, 3), lib.ones(2, 3))


def test_scatter_reduce_double_backward_error_is_reached_from_the_inputs():
    # the Error node keeps its edges: torch raises on the way to the inputs
    for lib in (gradviz, torch):
        x = lib.ones(2, requires_grad=True)
        source = lib.tensor([0.0, 0.0, 2.0], requires_grad=True)
        y = x.scatter_reduce(0, lib.tensor([0, 0, 1]), source, "prod")
        (grad_source,) = lib.autograd.grad(y.sum(), source, create_graph=True)
        with pytest.raises(RuntimeError, match="Double backward is unsupported for src when >1 zeros"):
            lib.autograd.grad(grad_source.sum(), (x, source))


def test_warns_once_that_it_is_in_beta():
    # PyTorch's TORCH_WARN_ONCE: at most once per process, so only the wording is checked here
    gradviz_core._WARNED.discard("index_reduce beta")
    with pytest.warns(UserWarning, match="index_reduce\\(\\) is in beta and the API may change at any time"):
        gradviz.ones(2).index_reduce(0, gradviz.tensor([0]), gradviz.ones(1), "prod")
