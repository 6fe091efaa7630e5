"""The NN kernels' numpy paths against torch: batch norm (train and eval, running statistics),
layer norm, group norm, softmax, log_softmax, max pooling and GELU (exact and tanh).

Each forward and each backward without ``create_graph`` runs numpy kernels (Note
[Normalization kernels], Note [Softmax kernels], Note [GELU kernels]); with ``create_graph``
the differentiable rules run. Both are compared with torch: values, first derivatives
(plain ``backward``) and second derivatives (``create_graph=True``), in float32 and float64,
with odd shapes, non-contiguous inputs, affine on and off, and NaN in max pooling.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

TOL = {np.float32: dict(rtol=2e-4, atol=2e-5), np.float64: dict(rtol=1e-9, atol=1e-10)}
DTYPES = [np.float32, np.float64]


def close(ours, theirs, what):
    ours = ours.detach().numpy() if isinstance(ours, gradviz.Tensor) else ours
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (
        f"{what}: {ours.shape}/{ours.dtype} vs {theirs.shape}/{theirs.dtype}")
    np.testing.assert_allclose(ours, theirs, err_msg=what, equal_nan=True,
                               **TOL[theirs.dtype.type])


def run(m, fn, arrays, transpose, probe, second):
    """``fn``'s values and gradients (``create_graph`` when ``second``, then also the gradients
    of the squared first gradients' sum) in framework ``m``."""
    tensors = [None if a is None else m.tensor(a, requires_grad=True) for a in arrays]
    inputs = [t for t in tensors if t is not None]
    x = tensors[0].transpose(-1, -2) if transpose else tensors[0]
    out = fn(m, x, *tensors[1:])
    grads = m.autograd.grad(out, inputs, m.tensor(probe), create_graph=second)
    results = [out] + list(grads)
    if second:
        total = sum((g * g).sum() for g in grads)
        results += list(m.autograd.grad(total, inputs, allow_unused=True))
    return results


def compare(fn, arrays, probe_shape, what, transpose=False, second=True):
    rng = np.random.default_rng(7)
    probe = rng.standard_normal(probe_shape).astype(arrays[0].dtype)
    if transpose:  # stored transposed, so the op sees ``arrays[0]`` as a non-contiguous view
        arrays = [np.ascontiguousarray(np.swapaxes(arrays[0], -1, -2))] + list(arrays[1:])
    for create_graph in (False, True) if second else (False,):
        ours = run(gradviz, fn, arrays, transpose, probe, create_graph)
        theirs = run(torch, fn, arrays, transpose, probe, create_graph)
        for k, (a, b) in enumerate(zip(ours, theirs)):
            if b is None:
                assert a is None, f"{what}: result {k} should be None"
                continue
            close(a, b, f"{what} (create_graph={create_graph}) result {k}")


def normal(shape, dtype, seed=0, scale=2.0, shift=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + shift).astype(dtype)


# ---- normalization ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (3, 5, 4, 3), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize("transpose", [False, True])
def test_batch_norm_train_matches_torch(dtype, affine, shape, transpose):
    x = normal(shape, dtype)
    channels = shape[1]
    w = normal((channels,), dtype, 1) if affine else None
    b = normal((channels,), dtype, 2) if affine else None
    compare(lambda m, x, w, b: m.nn.functional.batch_norm(x, None, None, w, b, True),
            [x, w, b], shape, f"batch_norm train {shape}", transpose=transpose)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_eval_matches_torch(dtype, affine):
    shape = (4, 3, 5, 3)
    x, w, b = normal(shape, dtype), normal((3,), dtype, 1), normal((3,), dtype, 2)
    mean, var = normal((3,), dtype, 3), np.abs(normal((3,), dtype, 4)) + 0.5

    def fn(m, x, *params):
        w, b = params if affine else (None, None)
        return m.nn.functional.batch_norm(x, m.tensor(mean), m.tensor(var), w, b, False)

    compare(fn, [x, w, b] if affine else [x], shape, "batch_norm eval", second=False)
    compare(fn, [x, w, b] if affine else [x], shape, "batch_norm eval first derivatives",
            second=False, transpose=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum", [0.1, 0.5])
def test_batch_norm_running_statistics_match_torch(dtype, momentum):
    results = {}
    for m in (gradviz, torch):
        layer = m.nn.BatchNorm2d(3, momentum=momentum).to(getattr(m, np.dtype(dtype).name))
        for seed in range(3):
            x = m.tensor(normal((4, 3, 5, 3), dtype, seed))
            layer(x).sum().backward()
        layer.eval()
        out = layer(m.tensor(normal((2, 3, 5, 3), dtype, 9)))
        results[m.__name__] = (layer.running_mean, layer.running_var, out,
                               layer.weight.grad, layer.bias.grad)
    for k, (a, b) in enumerate(zip(results["gradviz"], results["torch"])):
        close(a, b, f"BatchNorm2d state {k}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape, normalized", [((5, 7), (7,)), ((3, 4, 6), (4, 6)),
                                               ((2, 3, 5), (5,))])
def test_layer_norm_matches_torch(dtype, affine, shape, normalized):
    x = normal(shape, dtype)
    w = normal(normalized, dtype, 1) if affine else None
    b = normal(normalized, dtype, 2) if affine else None
    compare(lambda m, x, w, b: m.nn.functional.layer_norm(x, normalized, w, b),
            [x, w, b], shape, f"layer_norm {shape}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_torch(dtype, affine):
    shape = (3, 6, 5, 3)
    x = normal(shape, dtype)
    w = normal((6,), dtype, 1) if affine else None
    b = normal((6,), dtype, 2) if affine else None
    compare(lambda m, x, w, b: m.nn.functional.group_norm(x, 3, w, b), [x, w, b], shape,
            "group_norm")
    compare(lambda m, x, w, b: m.nn.functional.group_norm(x, 3, w, b), [x, w, b], shape,
            "group_norm non-contiguous", transpose=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_instance_norm_matches_torch(dtype):
    shape = (3, 4, 5, 3)
    compare(lambda m, x: m.nn.functional.instance_norm(x), [normal(shape, dtype)], shape,
            "instance_norm")


# ---- softmax ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((5, 7), -1), ((3, 4, 5), 1), ((6,), 0), ((3, 1), 1)])
def test_softmax_matches_torch(dtype, name, shape, dim):
    x = normal(shape, dtype, scale=4.0)
    compare(lambda m, x: getattr(m, name)(x, dim), [x], shape, f"{name} {shape} dim {dim}")
    if len(shape) > 1:
        compare(lambda m, x: getattr(m, name)(x, dim), [x],
                shape, f"{name} non-contiguous", transpose=True)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_zero_dim_matches_torch(name):
    compare(lambda m, x: getattr(m, name)(x, 0), [np.array(1.5)], (), f"{name} 0-d")


# ---- max pooling --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 0), (3, 2, 1), (3, 1, 0), (2, 3, 1)])
@pytest.mark.parametrize("nan", [False, True])
def test_max_pool2d_matches_torch(dtype, kernel, stride, padding, nan):
    x = normal((2, 3, 7, 8), dtype)
    if nan:
        x[0, 1, 2, 3] = x[1, 2, 5, 5] = x[1, 2, 5, 6] = np.nan
    probe_shape = torch.nn.functional.max_pool2d(torch.tensor(x), kernel, stride, padding).shape
    compare(lambda m, x: m.nn.functional.max_pool2d(x, kernel, stride, padding), [x],
            tuple(probe_shape), f"max_pool2d {kernel} {stride} {padding}", second=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_ties_non_contiguous_and_second_derivative_match_torch(dtype):
    x = np.round(normal((2, 3, 8, 6), dtype)).astype(dtype)  # many ties: the first maximum wins
    probe_shape = (2, 3, 4, 3)
    compare(lambda m, x: m.nn.functional.max_pool2d(x, 2) ** 2, [x], probe_shape,
            "max_pool2d ties, transposed", transpose=True)
    compare(lambda m, x: m.nn.functional.max_pool1d(x, 3, 2) ** 2, [normal((2, 3, 9), dtype)],
            (2, 3, 4), "max_pool1d")


# ---- GELU ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5, 4)])
def test_gelu_matches_torch(dtype, approximate, shape):
    x = normal(shape, dtype, scale=3.0, shift=0.0)
    compare(lambda m, x: m.nn.functional.gelu(x, approximate=approximate), [x], shape,
            f"gelu {approximate} {shape}")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_over_a_wide_range_matches_torch(approximate):
    x = np.linspace(-12, 12, 4001).astype(np.float32)
    x[::7] *= -1e-3
    compare(lambda m, x: m.nn.functional.gelu(x, approximate=approximate), [x], x.shape,
            f"gelu {approximate} range", second=False)
    compare(lambda m, x: m.nn.functional.gelu(x, approximate=approximate),
            [x.reshape(1, 4001).repeat(2, 0).T],
            (4001, 2), f"gelu {approximate} non-contiguous", transpose=True, second=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (5, 3, 4, 2)])
def test_batch_norm_module_steps_match_torch(dtype, shape):
    """Batch statistics computed once per forward (Note [Normalization statistics once]): two
    forwards of one module before one backward, three steps, running statistics, parameter
    gradients and input gradients against torch."""
    layer = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d"}[len(shape)]
    results = []
    for m in (gradviz, torch):
        module = getattr(m.nn, layer)(shape[1], momentum=0.3).to(getattr(m, np.dtype(dtype).name))
        trace = []
        for step in range(3):
            a = m.tensor(normal(shape, dtype, seed=step), requires_grad=True)
            b = m.tensor(normal(shape, dtype, seed=10 + step, scale=0.5), requires_grad=True)
            ya, yb = module(a), module(b)
            ((ya * ya).sum() + (ya * yb).sum()).backward()
            trace += [ya, yb, a.grad, b.grad, module.weight.grad, module.bias.grad,
                      module.running_mean, module.running_var]
            module.zero_grad()
        results.append(trace)
    for k, (ours, theirs) in enumerate(zip(*results)):
        close(ours, theirs, f"batch norm module {shape} result {k}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_module_reused_before_backward_matches_torch(dtype):
    """Each forward keeps its own statistics (Note [Normalization statistics once]): one
    LayerNorm applied to two inputs and to its own output before one backward."""
    results = []
    for m in (gradviz, torch):
        module = m.nn.LayerNorm((5, 6)).to(getattr(m, np.dtype(dtype).name))
        a = m.tensor(normal((4, 5, 6), dtype, seed=1), requires_grad=True)
        b = m.tensor(normal((4, 5, 6), dtype, seed=2, scale=0.3), requires_grad=True)
        ya, yb = module(a), module(b)
        yc = module(ya * yb)
        ((ya * yb).sum() + (yc * yc * a).sum()).backward()
        results.append([ya, yb, yc, a.grad, b.grad, module.weight.grad, module.bias.grad])
    for k, (ours, theirs) in enumerate(zip(*results)):
        close(ours, theirs, f"layer norm module result {k}")
