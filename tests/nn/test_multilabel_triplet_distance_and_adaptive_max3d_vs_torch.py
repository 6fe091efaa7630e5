"""``multilabel_margin_loss``/``MultiLabelMarginLoss``, ``triplet_margin_with_distance_loss``/
``TripletMarginWithDistanceLoss`` and ``adaptive_max_pool3d``/``AdaptiveMaxPool3d`` against
torch: values, first and second derivatives (float64, against torch's), indices, and torch's
errors (type and words). torch has no second derivative of ``multilabel_margin_loss`` (its
backward is not differentiable there; gradviz's composite gives the true one, zero), so that
loss is compared to first order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

RNG = np.random.default_rng(2026)


def _both(make_inputs, call, grad_of=(0,), double_backward=True):
    """Run ``call(lib, *inputs)`` in gradviz and torch on the same float64 inputs; compare the
    value, the gradients of the inputs in ``grad_of`` (weighted sum of the output) and, with
    ``double_backward``, the gradient of the gradients' squared norm."""
    arrays = make_inputs()
    results = []
    for lib in (gradviz, torch):
        inputs = [lib.tensor(a, requires_grad=(i in grad_of)) if a.dtype.kind == "f" else lib.tensor(a)
                  for i, a in enumerate(arrays)]
        out = call(lib, *inputs)
        weights = lib.tensor(np.linspace(-1.0, 2.0, out.numel()).reshape(tuple(out.shape)))
        leaves = [inputs[i] for i in grad_of]
        grads = lib.autograd.grad((out * weights).sum(), leaves, create_graph=double_backward)
        second = None
        if double_backward:
            penalty = sum((g * g).sum() for g in grads)
            second = lib.autograd.grad(penalty, leaves, allow_unused=True)
        results.append((out.detach().numpy(), [g.detach().numpy() for g in grads],
                        None if second is None else [None if s is None else (s + 0).detach().numpy() for s in second]))
    (value, grads, second), (value_t, grads_t, second_t) = results
    np.testing.assert_allclose(value, value_t, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, grads_t):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if second is not None:
        for got, want in zip(second, second_t):
            if want is None or got is None:
                assert got is None or not np.any(got), "torch has no second derivative here"
            else:
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    return value


def _labels(rows, classes):
    """Rows of distinct target classes, padded with -1 at a random place, some with entries
    after the first -1 (which do not count), one with every class and one with none."""
    target = np.full((rows, classes), -1, dtype=np.int64)
    for r in range(rows):
        count = classes if r == 0 else 0 if r == 1 else int(RNG.integers(1, classes + 1))
        target[r, :count] = RNG.permutation(classes)[:count]
        if r == 2 and count + 1 < classes:
            target[r, count + 1] = 0  # after the first -1: ignored
    return target


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("rows, classes", [(6, 5), (4, 1), (0, 3)])
def test_multilabel_margin_loss_matches_torch(reduction, rows, classes):
    if rows == 0 and reduction == "mean":
        return  # torch returns uninitialized memory for the mean over no samples (gradviz: nan)
    def inputs():
        return RNG.standard_normal((rows, classes)), _labels(rows, classes) if rows else np.zeros((0, classes), np.int64)

    _both(inputs, lambda lib, x, y: lib.nn.functional.multilabel_margin_loss(x, y, reduction=reduction),
          double_backward=False)
    _both(inputs, lambda lib, x, y: lib.nn.MultiLabelMarginLoss(reduction=reduction)(x, y),
          double_backward=False)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_multilabel_margin_loss_of_one_sample_and_of_a_scalar(reduction):
    _both(lambda: (RNG.standard_normal(7), np.array([3, 0, 5, -1, 1, 1, 2])),
          lambda lib, x, y: lib.nn.functional.multilabel_margin_loss(x, y, reduction=reduction),
          double_backward=False)
    _both(lambda: (np.array(0.25), np.array([0])),
          lambda lib, x, y: lib.nn.functional.multilabel_margin_loss(x, y, reduction=reduction),
          double_backward=False)


def test_multilabel_margin_loss_legacy_reduction_arguments():
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        _both(lambda: (RNG.standard_normal((3, 4)), _labels(3, 4)),
              lambda lib, x, y: lib.nn.functional.multilabel_margin_loss(x, y, size_average=False),
              double_backward=False)


def _error(lib, call):
    with pytest.raises(Exception) as caught:
        call(lib)
    return caught.type, str(caught.value)


@pytest.mark.parametrize("case", [
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 5), lib.full((3, 5), 5)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 5), lib.full((3, 5), -2)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 5), lib.zeros(3, 3, dtype=lib.long)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 5), lib.zeros(3, 5)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(1, 3, 5), lib.zeros(1, 3, 5, dtype=lib.long)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 0), lib.zeros(3, 0, dtype=lib.long)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(0), lib.zeros(0, dtype=lib.long)),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(2, 3), lib.zeros(2, 3, dtype=lib.long),
                                                         reduction="avg"),
], ids=["class too large", "below -1", "target shape", "float target", "3-D input", "no classes",
        "empty vector", "bad reduction"])
def test_multilabel_margin_loss_errors_match_torch(case):
    ours, theirs = _error(gradviz, case), _error(torch, case)
    assert issubclass(ours[0], theirs[0]) and ours[1] == theirs[1], (ours, theirs)


def _triplet_inputs(shape):
    return lambda: tuple(RNG.standard_normal(shape) for _ in range(3))


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(5, 4), (4,)])
def test_triplet_margin_with_distance_loss_default_distance(swap, reduction, shape):
    _both(_triplet_inputs(shape),
          lambda lib, a, p, n: lib.nn.functional.triplet_margin_with_distance_loss(
              a, p, n, margin=1.5, swap=swap, reduction=reduction), grad_of=(0, 1, 2))
    _both(_triplet_inputs(shape),
          lambda lib, a, p, n: lib.nn.TripletMarginWithDistanceLoss(
              margin=1.5, swap=swap, reduction=reduction)(a, p, n), grad_of=(0, 1, 2))


@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss_custom_distances(swap):
    def cosine(lib):
        return lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y)

    _both(_triplet_inputs((6, 3)),
          lambda lib, a, p, n: lib.nn.functional.triplet_margin_with_distance_loss(
              a, p, n, distance_function=cosine(lib), margin=0.4, swap=swap), grad_of=(0, 1, 2))
    _both(_triplet_inputs((6, 3)),
          lambda lib, a, p, n: lib.nn.TripletMarginWithDistanceLoss(
              distance_function=lib.nn.PairwiseDistance(p=1.0), swap=swap, reduction="sum")(a, p, n),
          grad_of=(0, 1, 2))


def test_triplet_margin_with_distance_loss_module_defaults_and_repr():
    ours, theirs = gradviz.nn.TripletMarginWithDistanceLoss(), torch.nn.TripletMarginWithDistanceLoss()
    assert repr(ours) == repr(theirs)
    assert (ours.margin, ours.swap, ours.reduction) == (theirs.margin, theirs.swap, theirs.reduction)


@pytest.mark.parametrize("case", [
    lambda lib: lib.nn.TripletMarginWithDistanceLoss(margin=0.0),
    lambda lib: lib.nn.functional.triplet_margin_with_distance_loss(
        lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3), margin=-1.0),
    lambda lib: lib.nn.functional.triplet_margin_with_distance_loss(
        lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3), reduction="avg"),
    lambda lib: lib.nn.functional.triplet_margin_with_distance_loss(lib.zeros(2, 3), lib.zeros(3), lib.zeros(2, 3)),
], ids=["module margin", "margin", "reduction", "dims"])
def test_triplet_margin_with_distance_loss_errors_match_torch(case):
    ours, theirs = _error(gradviz, case), _error(torch, case)
    assert issubclass(ours[0], theirs[0]) and ours[1] == theirs[1], (ours, theirs)


@pytest.mark.parametrize("shape, output_size", [
    ((2, 3, 4, 6, 8), (2, 3, 4)),       # even windows
    ((2, 2, 5, 7, 6), (3, 4, 4)),       # overlapping near-equal windows
    ((3, 5, 6, 7), (2, None, 3)),       # unbatched, None keeps a size
    ((1, 2, 3, 3, 3), 1),               # one window: the global max
])
def test_adaptive_max_pool3d_matches_torch(shape, output_size):
    value = _both(lambda: (RNG.standard_normal(shape),),
                  lambda lib, x: lib.nn.functional.adaptive_max_pool3d(x, output_size), double_backward=False)
    x = RNG.standard_normal(shape)
    ours = gradviz.nn.AdaptiveMaxPool3d(output_size, return_indices=True)(gradviz.tensor(x))
    theirs = torch.nn.AdaptiveMaxPool3d(output_size, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    assert ours[1].dtype == gradviz.int64 and value.shape == tuple(theirs[0].shape)
    with_indices = gradviz.nn.functional.adaptive_max_pool3d_with_indices(gradviz.tensor(x), output_size)
    np.testing.assert_array_equal(with_indices[1].numpy(), theirs[1].numpy())
    assert repr(gradviz.nn.AdaptiveMaxPool3d(output_size)) == repr(torch.nn.AdaptiveMaxPool3d(output_size))


def test_adaptive_max_pool3d_ties_pick_torchs_element():
    x = np.zeros((1, 1, 4, 4, 4))
    x[0, 0, 1:3, 1:3, 1:3] = 1.0
    ours = gradviz.nn.functional.adaptive_max_pool3d(gradviz.tensor(x), 2, return_indices=True)
    theirs = torch.nn.functional.adaptive_max_pool3d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


@pytest.mark.parametrize("case", [
    lambda lib: lib.nn.functional.adaptive_max_pool3d(lib.zeros(2, 3, 4), 2),
    lambda lib: lib.nn.functional.adaptive_max_pool3d(lib.zeros(2, 3, 4, 4), (2, 2)),
    lambda lib: lib.nn.functional.adaptive_max_pool3d(lib.zeros(1, 2, 0, 3, 3), 2),
], ids=["3-D input", "two sizes", "empty dim"])
def test_adaptive_max_pool3d_errors_match_torch(case):
    ours, theirs = _error(gradviz, case), _error(torch, case)
    assert issubclass(ours[0], theirs[0]) and ours[1] == theirs[1], (ours, theirs)
