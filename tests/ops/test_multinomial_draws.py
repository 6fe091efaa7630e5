"""``multinomial(..., replacement=True)`` draws what numpy's ``Generator.choice(k, size, p=...)``
draws from the same generator state (gradviz computes it as that method does, without its
argument checks), so seeded programs keep their samples; and the draws follow the weights."""

import copy

import numpy as np
import pytest

import gradviz
from gradviz.ops import _creation


@pytest.mark.parametrize("shape,samples", [((27,), 1), ((27,), 40), ((5, 27), 3), ((2, 4), 1000)])
def test_draws_are_numpys_choice_from_the_same_state(shape, samples):
    weights = np.random.default_rng(1).random(shape) * (np.arange(shape[-1]) % 3)
    weights = weights.astype(np.float32)
    generator = gradviz.Generator().manual_seed(2147483647)
    rng = _creation._rng(generator)
    reference = np.random.Generator(type(rng.bit_generator)())
    reference.bit_generator.state = copy.deepcopy(rng.bit_generator.state)
    got = gradviz.multinomial(gradviz.tensor(weights), samples, replacement=True,
                              generator=generator)
    rows = weights.reshape(-1, shape[-1]).astype(np.float64)
    expected = np.stack([reference.choice(shape[-1], size=samples, p=row / row.sum())
                         for row in rows]).reshape(shape[:-1] + (samples,))
    assert got.dtype is gradviz.int64
    np.testing.assert_array_equal(got.numpy(), expected)
    # and the generator is left where numpy's would be
    assert rng.random() == reference.random()


def test_draws_follow_the_weights_and_never_pick_a_zero_weight():
    weights = gradviz.tensor([0.0, 1.0, 3.0, 0.0])
    draws = gradviz.multinomial(weights, 40_000, replacement=True,
                                generator=gradviz.Generator().manual_seed(0)).numpy()
    counts = np.bincount(draws, minlength=4)
    assert counts[0] == counts[3] == 0
    assert abs(counts[2] / counts[1] - 3.0) < 0.1
