"""Conformance sweep, programs that use randomness: only structure and finite differences are compared.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, registry

program = registry()


# ---- randomness-dependent programs: only the structure and finite differences --------------------

def _finite_difference_check(torch, f, x, eps=1e-6):
    x = x.detach().double().requires_grad_()
    (g,) = torch.autograd.grad(f(x), x)
    numeric = torch.zeros_like(x)
    flat = x.detach().view(-1)
    for i in range(flat.numel()):
        plus = flat.clone()
        minus = flat.clone()
        plus[i] += eps
        minus[i] -= eps
        numeric.view(-1)[i] = (f(plus.view(x.shape)) - f(minus.view(x.shape))).item() / (2 * eps)
    return bool(torch.allclose(g, numeric, rtol=1e-5, atol=1e-7))


@program
def randn_shapes_and_fd_gradients(torch, o):
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    o("shape", x.shape)
    o("dtype", x.dtype)
    o("flags", [x.requires_grad, x.is_leaf])
    y = (x ** 2).sum()
    y.backward()
    o("grad is 2x", torch.allclose(x.grad, 2 * x.detach()))
    o("fd tanh", _finite_difference_check(torch, lambda t: torch.tanh(t).pow(3).sum(), torch.randn(5)))
    o("fd softmax", _finite_difference_check(
        torch, lambda t: (torch.softmax(t, dim=1) * torch.arange(4.0, dtype=torch.float64)).sum(),
        torch.randn(2, 4)))
    w = torch.randn(4, 2, dtype=torch.float64)
    o("fd matmul", _finite_difference_check(torch, lambda t: torch.sigmoid(t @ w).sum(), torch.randn(3, 4)))


@program
def rand_functions_run(torch, o):
    torch.manual_seed(42)
    a = torch.rand(2, 3)
    o("rand", [a.shape, a.dtype, bool(((a >= 0) & (a < 1)).all())])
    b = torch.randn(5)
    o("randn", [b.shape, b.dtype])
    c = torch.randint(0, 10, (3,))
    o("randint", [c.shape, c.dtype, bool(((c >= 0) & (c < 10)).all())])
    d = torch.randn_like(a)
    o("randn_like", [d.shape, d.dtype])
    e = torch.rand_like(torch.zeros(2, dtype=torch.float64))
    o("rand_like", [e.shape, e.dtype])
    f = torch.randn(2, 2, dtype=torch.float64)
    o("randn f64", f.dtype)
    torch.manual_seed(1)
    g1 = torch.randn(3)
    torch.manual_seed(1)
    g2 = torch.randn(3)
    o("reproducible", torch.equal(g1, g2))
    o("randint high only", torch.randint(5, (2, 2)).shape)


@program
def random_init_training_reduces_loss(torch, o):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.linspace(-1, 1, 20).view(10, 2)
    y = (x[:, :1] * 2 - x[:, 1:]).detach()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    first = None
    for _ in range(100):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        if first is None:
            first = loss.item()
        loss.backward()
        opt.step()
    o("reduced", loss.item() < first * 0.2)
    o("param shapes", [p.shape for p in model.parameters()])
    o("grad shapes", [p.grad.shape for p in model.parameters()])


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
