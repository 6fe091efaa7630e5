"""Max pooling with NaN in a window, against torch: the value is NaN and the gradient goes
to the window's last NaN (torch's kernel takes an entry when it is larger or NaN), and with
ties to the first maximum."""

import numpy as np
import pytest
import torch

import gradviz


def _case(seed, shape):
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal(shape), 0).astype(np.float32)  # ties
    x[rng.random(shape) < 0.15] = np.nan
    return x


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kernel, stride, padding, dilation", [
    (2, 2, 0, 1), (3, 2, 1, 1), ((2, 3), 1, 0, (2, 1))])
def test_max_pool2d_with_nan_matches_torch(seed, kernel, stride, padding, dilation):
    x = _case(seed, (2, 3, 8, 9))
    results = []
    for m in (gradviz, torch):
        t = m.tensor(x, requires_grad=True)
        out, indices = m.nn.functional.max_pool2d(t, kernel, stride, padding, dilation,
                                                  return_indices=True)
        (out * m.tensor(np.arange(out.numel(), dtype=np.float32).reshape(out.shape))).sum().backward()
        results.append((out.detach().numpy(), indices.numpy(), t.grad.numpy()))
    (out_g, idx_g, grad_g), (out_t, idx_t, grad_t) = results
    np.testing.assert_array_equal(out_g, out_t)
    np.testing.assert_array_equal(idx_g, idx_t)
    np.testing.assert_array_equal(grad_g, grad_t)


def test_max_pool3d_with_nan_matches_torch():
    x = _case(7, (1, 2, 4, 6, 6))
    results = []
    for m in (gradviz, torch):
        t = m.tensor(x, requires_grad=True)
        out = m.nn.functional.max_pool3d(t, 2)
        out.sum().backward()
        results.append((out.detach().numpy(), t.grad.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
