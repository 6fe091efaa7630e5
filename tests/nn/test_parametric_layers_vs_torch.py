"""nn.PReLU / F.prelu, nn.RMSNorm / F.rms_norm, nn.Bilinear / F.bilinear and F.gumbel_softmax
against torch: values, gradients of inputs and parameters (torch's weights loaded through
state_dict), second order, node names, init, repr, errors; gradcheck and gradgradcheck."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from layer_compare import close, compare_layer, same_error

import gradviz


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("num,shape", [(1, (2, 3, 4)), (3, (2, 3, 4)), (3, (5, 3)), (1, (7,)),
                                       (2, (2, 2, 3, 3)), (1, ())])
def test_prelu(num, shape, dtype):
    x = np.random.default_rng(0).standard_normal(shape)
    make = lambda nn: _prelu_with(nn, num)  # noqa: E731
    outs, touts = compare_layer(make, [x], dtype)
    assert outs[0].grad_fn.name() == "PreluKernelBackward0"
    names = [n.name() if n else None for n, _ in outs[0].grad_fn.next_functions]
    t_names = [n.name() if n else None for n, _ in touts[0].grad_fn.next_functions]
    assert names == t_names


def _prelu_with(nn, num):
    """A PReLU with slopes of both signs (the default 0.25 everywhere would hide a mix-up)."""
    layer = nn.PReLU(num)
    lib = torch if nn is torch.nn else gradviz
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(np.linspace(-0.5, 0.7, num)))
    return layer


def test_prelu_init_repr_second_order_and_errors():
    g, t = gradviz.nn.PReLU(3, init=0.1), torch.nn.PReLU(3, init=0.1)
    assert repr(g) == repr(t) and list(g.state_dict()) == list(t.state_dict())
    close(g.weight, t.weight, "init")
    x = gradviz.tensor(np.random.default_rng(1).standard_normal((2, 3, 2)), requires_grad=True)
    w = gradviz.tensor([0.2, -0.3, 0.5], dtype=gradviz.float64, requires_grad=True)
    f = lambda a, b: gradviz.nn.functional.prelu(a, b) ** 2  # noqa: E731
    assert gradviz.autograd.gradcheck(f, (x, w))
    assert gradviz.autograd.gradgradcheck(f, (x, w))
    F, TF = gradviz.nn.functional, torch.nn.functional
    same_error(lambda: F.prelu(gradviz.zeros(2, 3, 4), gradviz.zeros(4)), lambda: TF.prelu(torch.zeros(2, 3, 4), torch.zeros(4)),
               "Mismatch of parameter numbers and input channel size. Found parameter numbers = 4 and channel size = 3.")
    same_error(lambda: F.prelu(gradviz.zeros(2, 3, 4), gradviz.zeros(1, 3)), lambda: TF.prelu(torch.zeros(2, 3, 4), torch.zeros(1, 3)),
               "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = 2")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,normalized,kw", [((2, 3, 4), 4, {}), ((2, 3, 4), (3, 4), dict(eps=1e-3)),
                                                 ((5, 6), [6], dict(elementwise_affine=False)),
                                                 ((4,), 4, dict(eps=0.5))])
def test_rms_norm(shape, normalized, kw, dtype):
    x = np.random.default_rng(2).standard_normal(shape)

    def make(nn):
        layer = nn.RMSNorm(normalized, **kw)
        if layer.weight is not None:
            lib = torch if nn is torch.nn else gradviz
            with lib.no_grad():
                layer.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, layer.weight.numel()).reshape(tuple(layer.weight.shape))))
        return layer

    outs, touts = compare_layer(make, [x], dtype)
    assert outs[0].grad_fn.name() == touts[0].grad_fn.name() == "MulBackward0"


def test_rms_norm_tiny_values_use_machine_epsilon():
    for dtype in ("float32", "float64"):
        x = np.full((2, 3), 1e-9)
        a = gradviz.nn.functional.rms_norm(gradviz.tensor(x, dtype=getattr(gradviz, dtype)), (3,))
        b = torch.nn.functional.rms_norm(torch.tensor(x, dtype=getattr(torch, dtype)), (3,))
        close(a, b, f"rms_norm {dtype}")


def test_rms_norm_graph_repr_gradgradcheck_errors():
    g, t = gradviz.nn.RMSNorm([3, 4], eps=1e-3, elementwise_affine=False), torch.nn.RMSNorm([3, 4], eps=1e-3, elementwise_affine=False)
    assert repr(g) == repr(t) and repr(gradviz.nn.RMSNorm(4)) == repr(torch.nn.RMSNorm(4))
    assert list(gradviz.nn.RMSNorm(4).state_dict()) == list(torch.nn.RMSNorm(4).state_dict()) == ["weight"]

    def chain(lib):
        x = lib.tensor(np.ones((2, 3)), requires_grad=True)
        node, names = lib.nn.functional.rms_norm(x, (3,), lib.ones(3, dtype=lib.float64, requires_grad=True)).grad_fn, []
        while node is not None and "AccumulateGrad" not in node.name():
            names.append(node.name())
            nexts = [n for n, _ in node.next_functions if n is not None and "AccumulateGrad" not in n.name()]
            node = nexts[-1] if nexts else None
        return names

    assert chain(gradviz) == chain(torch)
    x = gradviz.tensor(np.random.default_rng(3).standard_normal((2, 3)), requires_grad=True)
    w = gradviz.tensor(np.random.default_rng(4).standard_normal(3), requires_grad=True)
    f = lambda a, b: gradviz.nn.functional.rms_norm(a, (3,), b, eps=1e-2)  # noqa: E731
    assert gradviz.autograd.gradcheck(f, (x, w))
    assert gradviz.autograd.gradgradcheck(f, (x, w))
    F, TF = gradviz.nn.functional, torch.nn.functional
    same_error(lambda: F.rms_norm(gradviz.zeros(2, 3), (4,)), lambda: TF.rms_norm(torch.zeros(2, 3), (4,)),
               "Given normalized_shape=[4], expected input with shape [*4], but got input of size[2, 3]")
    same_error(lambda: F.rms_norm(gradviz.zeros(2, 3), (2, 3, 4)), lambda: TF.rms_norm(torch.zeros(2, 3), (2, 3, 4)),
               "Input tensor must have at least 3 dimensions, but got 2")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch,bias", [((4,), True), ((2, 3), False), ((), True)])
def test_bilinear(batch, bias, dtype):
    rng = np.random.default_rng(5)
    x1, x2 = rng.standard_normal(batch + (3,)), rng.standard_normal(batch + (4,))
    outs, touts = compare_layer(lambda nn: nn.Bilinear(3, 4, 5, bias=bias), [x1, x2], dtype)
    node, tnode = outs[0].grad_fn, touts[0].grad_fn
    assert node.name() == tnode.name()
    inner = node if not bias else node.next_functions[0][0]
    assert inner.name() == "ViewBackward0" and inner.next_functions[0][0].name() == "TrilinearBackward0"


def test_bilinear_init_repr_gradgradcheck_errors():
    g, t = gradviz.nn.Bilinear(20, 30, 40), torch.nn.Bilinear(20, 30, 40)
    assert repr(g) == repr(t) and list(g.state_dict()) == list(t.state_dict())
    bound = 1 / np.sqrt(20)
    w = g.weight.detach().numpy()
    assert tuple(g.weight.shape) == tuple(t.weight.shape) and np.abs(w).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.03 * bound
    rng = np.random.default_rng(6)
    args = tuple(gradviz.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 2), (2, 3), (2, 2, 3), (2,)])
    f = gradviz.nn.functional.bilinear
    assert gradviz.autograd.gradcheck(f, args)
    assert gradviz.autograd.gradgradcheck(f, args)
    F, TF = gradviz.nn.functional, torch.nn.functional

    def both(shapes, phrase):
        same_error(lambda: F.bilinear(*[gradviz.zeros(*s) for s in shapes]),
                   lambda: TF.bilinear(*[torch.zeros(*s) for s in shapes]), phrase)

    both([(2, 3), (3, 4), (5, 3, 4)], "bilinear(): input batch dimensions do not match at dim 0: got 2 and 3")
    both([(2, 3), (2, 4), (5, 4, 4)], "bilinear(): input1 size does not match weight size: got 3 but expected 4")
    both([(2, 3), (2, 5), (5, 3, 4)], "bilinear(): input2 size does not match weight size: got 5 but expected 4")
    both([(2, 3), (2, 1, 4), (5, 3, 4)], "bilinear(): input dimensions do not match: got 2 and 3")
    both([(2, 3), (2, 4), (5, 3, 4), (4,)], "bilinear(): bias size does not match weight size: got 4 but expected 5")


# ---- gumbel_softmax: random, so compared with a fixed noise and by its properties -------------

def _noise_like(logits, seed):
    """The noise gradviz's gumbel_softmax draws after ``manual_seed(seed)``."""
    from gradviz.nn._functional_layers import _gumbel_noise

    gradviz.manual_seed(seed)
    return _gumbel_noise(logits).numpy()


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("tau,dim", [(1.0, -1), (0.5, 0)])
def test_gumbel_softmax_against_torch_formula_with_the_same_noise(hard, tau, dim):
    logits = np.random.default_rng(7).standard_normal((4, 5))
    g_logits = gradviz.tensor(logits, requires_grad=True)
    noise = _noise_like(g_logits, 3)
    gradviz.manual_seed(3)
    out = gradviz.nn.functional.gumbel_softmax(g_logits, tau=tau, hard=hard, dim=dim)
    # torch's own code path (torch/nn/functional.py) with that noise in place of exponential_()
    t_logits = torch.tensor(logits, requires_grad=True)
    y_soft = ((t_logits + torch.tensor(noise)) / tau).softmax(dim)
    if hard:
        index = y_soft.max(dim, keepdim=True)[1]
        expected = torch.zeros_like(t_logits).scatter_(dim, index, 1.0) - y_soft.detach() + y_soft
    else:
        expected = y_soft
    probe = np.random.default_rng(8).standard_normal((4, 5))
    (out * gradviz.tensor(probe)).sum().backward()
    (expected * torch.tensor(probe)).sum().backward()
    close(out, expected, "sample")
    close(g_logits.grad, t_logits.grad, "gradient")
    assert out.grad_fn.name() == expected.grad_fn.name()


def test_gumbel_softmax_properties():
    gradviz.manual_seed(0)
    logits = gradviz.tensor([[2.0, 0.0, -1.0]]).expand(20000, 3)
    soft = gradviz.nn.functional.gumbel_softmax(logits, tau=0.7)
    assert soft.shape == (20000, 3) and soft.dtype == gradviz.float32
    np.testing.assert_allclose(soft.sum(-1).numpy(), 1.0, rtol=1e-5)
    hard = gradviz.nn.functional.gumbel_softmax(logits, hard=True).numpy()
    assert set(np.unique(hard)) == {0.0, 1.0} and (hard.sum(-1) == 1).all()
    # the Gumbel-max trick: argmax frequencies are softmax(logits)
    np.testing.assert_allclose(hard.mean(0), torch.softmax(torch.tensor([2.0, 0.0, -1.0]), 0).numpy(), atol=0.015)
    noise = _noise_like(gradviz.zeros(200000), 1)
    assert abs(noise.mean() - 0.5772) < 0.01 and abs(noise.var() - np.pi ** 2 / 6) < 0.03
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gradviz.nn.functional.gumbel_softmax(gradviz.zeros(2, 3), eps=1e-3)
    assert [str(w.message) for w in caught] == ["`eps` parameter is deprecated and has no effect."]
