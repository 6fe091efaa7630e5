"""gradviz.nn / gradviz.optim against torch.nn / torch.optim on the same weights and data."""

from __future__ import annotations

import copy
import doctest
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import gradviz
from gradviz import nn, optim
from gradviz.nn import _functional_core, _layers, _loss, _module, functional
from gradviz.optim import _optimizer

RTOL, ATOL = 2e-5, 2e-6


def close(gv, th, what="value", rtol=RTOL, atol=ATOL):
    a = gv.detach().numpy() if isinstance(gv, gradviz.Tensor) else np.asarray(gv)
    b = th.detach().numpy()
    assert a.shape == b.shape, f"{what}: {a.shape} != {b.shape}"
    assert a.dtype == b.dtype, f"{what}: {a.dtype} != {b.dtype}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


def mlp(m, hidden=5):
    return m.nn.Sequential(m.nn.Linear(4, hidden), m.nn.Tanh(), m.nn.Linear(hidden, 3))


def make_pair(seed=0):
    torch.manual_seed(seed)
    th = mlp(torch)
    gv = mlp(gradviz)
    gv.load_state_dict({k: gradviz.tensor(v.numpy()) for k, v in th.state_dict().items()})
    return gv, th


def data(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=8)
    return x, y


# ---- Parameter and Module ---------------------------------------------------------------

def test_parameter_is_a_leaf_tensor_and_prints_like_torch():
    p = nn.Parameter(gradviz.tensor([1.0, 2.0]))
    tp = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    assert isinstance(p, nn.Parameter) and isinstance(p, gradviz.Tensor)
    assert p.requires_grad and p.is_leaf
    assert repr(p) == repr(tp)
    frozen = nn.Parameter(gradviz.tensor([1.0, 2.0]), requires_grad=False)
    assert repr(frozen) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0]), requires_grad=False))
    # shares storage with its data
    source = gradviz.zeros(2)
    shared = nn.Parameter(source)
    with gradviz.no_grad():
        shared.add_(1.0)
    assert source.tolist() == [1.0, 1.0]
    assert not isinstance(p * 2, nn.Parameter)


def test_parameter_survives_deepcopy_and_pickle():
    net = nn.Linear(3, 2)
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert isinstance(clone.weight, nn.Parameter)
        assert clone.weight is not net.weight
        np.testing.assert_array_equal(clone.weight.detach().numpy(), net.weight.detach().numpy())


def build(m):
    class Block(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = m.nn.Parameter(m.ones(1))
            self.fc = m.nn.Linear(2, 3)
            self.act = m.nn.ReLU()
            self.register_buffer("running", m.zeros(3))
            self.out = m.nn.Linear(3, 1, bias=False)
            self.plain = 5

        def forward(self, x):
            return self.out(self.act(self.fc(x) * self.scale))

    class Top(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = Block()
            self.head = m.nn.Sequential(m.nn.Linear(1, 2), m.nn.Sigmoid())
            self.shared = self.head  # a duplicate: listed once by parameters()/modules()

        def forward(self, x):
            return self.head(self.first(x))

    return Top()


def test_registration_and_order_match_torch():
    gv, th = build(gradviz), build(torch)
    assert [n for n, _ in gv.named_parameters()] == [n for n, _ in th.named_parameters()]
    assert [tuple(p.shape) for p in gv.parameters()] == [tuple(p.shape) for p in th.parameters()]
    assert [n for n, _ in gv.named_buffers()] == [n for n, _ in th.named_buffers()]
    assert [n for n, _ in gv.named_modules()] == [n for n, _ in th.named_modules()]
    assert [type(m).__name__ for m in gv.modules()] == [type(m).__name__ for m in th.modules()]
    assert [n for n, _ in gv.named_children()] == [n for n, _ in th.named_children()]
    assert [type(m).__name__ for m in gv.children()] == [type(m).__name__ for m in th.children()]
    assert list(gv.state_dict()) == list(th.state_dict())
    assert [n for n, _ in gv.first.named_parameters(recurse=False)] == ["scale"]
    assert gv.first.plain == 5 and "plain" not in gv.first._parameters
    assert gv.first.out.bias is None
    assert repr(gv) == repr(th)


def test_setattr_reassignment_and_errors():
    gv = build(gradviz)
    gv.first.scale = None
    assert "first.scale" not in dict(gv.named_parameters())
    with pytest.raises(TypeError):
        gv.first.fc.weight = gradviz.ones(3, 2)  # a plain tensor cannot replace a parameter
    del gv.first.fc
    with pytest.raises(AttributeError):
        gv.first.fc

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(gradviz.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_train_eval_and_call():
    gv = build(gradviz)
    assert all(m.training for m in gv.modules())
    assert gv.eval() is gv and not any(m.training for m in gv.modules())
    gv.train()
    assert all(m.training for m in gv.modules())
    out = gv(gradviz.ones(4, 2))
    assert tuple(out.shape) == (4, 2)
    with pytest.raises(NotImplementedError):
        nn.Module()(1)


def test_zero_grad_set_to_none_and_zero():
    gv, _ = make_pair()
    x, _ = data()
    gv(gradviz.tensor(x)).sum().backward()
    assert all(p.grad is not None for p in gv.parameters())
    gv.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in gv.parameters())
    gv.zero_grad()
    assert all(p.grad is None for p in gv.parameters())


def test_load_state_dict_strict_and_shapes():
    gv, th = make_pair()
    sd = {k: gradviz.tensor(v.numpy()) for k, v in th.state_dict().items()}
    result = gv.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    del sd["0.bias"]
    sd["extra"] = gradviz.zeros(1)
    with pytest.raises(RuntimeError, match="Missing key"):
        gv.load_state_dict(sd)
    result = gv.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["0.bias"] and result.unexpected_keys == ["extra"]
    with pytest.raises(RuntimeError, match="size mismatch"):
        gv.load_state_dict({"0.weight": gradviz.zeros(2, 2)}, strict=False)
    weight = gv[0].weight
    gv.load_state_dict(gv.state_dict())
    assert gv[0].weight is weight  # copied in place


def test_linear_init_bounds_and_shapes():
    layer = nn.Linear(16, 7)
    assert isinstance(layer.weight, nn.Parameter) and isinstance(layer.bias, nn.Parameter)
    assert tuple(layer.weight.shape) == (7, 16) and tuple(layer.bias.shape) == (7,)
    bound = 1 / 4
    assert np.abs(layer.weight.detach().numpy()).max() <= bound
    assert np.abs(layer.bias.detach().numpy()).max() <= bound
    assert layer.weight.dtype == gradviz.float32
    assert repr(layer) == repr(torch.nn.Linear(16, 7))
    assert repr(nn.Linear(2, 3, bias=False)) == repr(torch.nn.Linear(2, 3, bias=False))
    assert nn.Linear(2, 2, dtype=gradviz.float64).weight.dtype == gradviz.float64


def test_sequential_indexing():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert [n for n, _ in seq.named_children()] == ["fc", "act"]
    assert isinstance(seq[0], nn.Linear) and isinstance(seq[-1], nn.ReLU) and len(seq) == 2
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 1
    with pytest.raises(IndexError):
        seq[2]


# ---- forward / loss / gradients -----------------------------------------------------------

@pytest.mark.parametrize("loss_name", ["cross_entropy", "mse"])
def test_mlp_forward_loss_and_gradients(loss_name):
    gv, th = make_pair()
    x, y = data()
    gx, tx = gradviz.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    gout, tout = gv(gx), th(tx)
    close(gout, tout, "forward")
    if loss_name == "cross_entropy":
        gl = nn.CrossEntropyLoss()(gout, gradviz.tensor(y))
        tl = torch.nn.CrossEntropyLoss()(tout, torch.tensor(y))
    else:
        target = np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)
        gl = nn.MSELoss()(gout, gradviz.tensor(target))
        tl = torch.nn.MSELoss()(tout, torch.tensor(target))
    close(gl, tl, "loss")
    gl.backward()
    tl.backward()
    for (name, gp), (_, tp) in zip(gv.named_parameters(), th.named_parameters()):
        close(gp.grad, tp.grad, f"grad of {name}")
    close(gx.grad, tx.grad, "grad of input")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", [False, True])
def test_cross_entropy_and_nll_vs_torch(reduction, ignore):
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((6, 4)).astype(np.float32) * 3
    target = rng.integers(0, 4, size=6)
    if ignore:
        target[[1, 4]] = -100
    for name in ("cross_entropy", "nll_loss"):
        g_in = gradviz.tensor(logits, requires_grad=True)
        t_in = torch.tensor(logits, requires_grad=True)
        g_arg = g_in if name == "cross_entropy" else gradviz.log_softmax(g_in, 1)
        t_arg = t_in if name == "cross_entropy" else torch.log_softmax(t_in, 1)
        gl = getattr(functional, name)(g_arg, gradviz.tensor(target), reduction=reduction)
        tl = getattr(torch.nn.functional, name)(t_arg, torch.tensor(target), reduction=reduction)
        close(gl, tl, f"{name} {reduction}")
        upstream = np.linspace(0.5, 1.5, tl.numel(), dtype=np.float32).reshape(tuple(tl.shape))
        gl.backward(gradviz.tensor(upstream))
        tl.backward(torch.tensor(upstream))
        close(g_in.grad, t_in.grad, f"grad of {name} {reduction}")


def test_cross_entropy_unbatched_and_double():
    logits = np.array([0.3, -1.2, 2.0])
    g_in = gradviz.tensor(logits, requires_grad=True)
    t_in = torch.tensor(logits, requires_grad=True)
    gl = nn.CrossEntropyLoss()(g_in, gradviz.tensor(2))
    tl = torch.nn.CrossEntropyLoss()(t_in, torch.tensor(2))
    close(gl, tl, "unbatched", rtol=1e-12, atol=1e-12)
    gl.backward()
    tl.backward()
    close(g_in.grad, t_in.grad, "unbatched grad", rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_vs_torch(reduction):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 5, 3)).astype(np.float32)
    ga, gb = gradviz.tensor(a, requires_grad=True), gradviz.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    gl = functional.mse_loss(ga, gb, reduction=reduction)
    tl = torch.nn.functional.mse_loss(ta, tb, reduction=reduction)
    close(gl, tl, "mse")
    (gl.sum() if reduction == "none" else gl).backward()
    (tl.sum() if reduction == "none" else tl).backward()
    close(ga.grad, ta.grad, "mse grad input")
    close(gb.grad, tb.grad, "mse grad target")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_of_empty_tensors_vs_torch(reduction):
    """An empty input: the mean is NaN and the gradient empty (torch's 2 / numel is inf in C++;
    gradviz raised ZeroDivisionError in backward; found by the op fuzzer, seed 3017)."""
    results = []
    for lib in (gradviz, torch):
        a = lib.zeros(0, 3, requires_grad=True)
        b = lib.zeros(0, 3, requires_grad=True)
        loss = lib.nn.functional.mse_loss(a, b, reduction=reduction)
        grads = lib.autograd.grad(loss.sum(), [a, b])
        results.append([np.asarray(loss.tolist())] + [list(g.shape) for g in grads])
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1:] == results[1][1:]


def test_mse_loss_of_0d_tensors_vs_torch():
    """0-d input and target: loss.backward() gave gradviz's fast backward a numpy scalar to
    write into (TypeError; found by the op fuzzer, seed 1891)."""
    results = []
    for lib in (gradviz, torch):
        a, b = lib.tensor(0.7, requires_grad=True), lib.tensor(0.2, requires_grad=True)
        lib.nn.functional.mse_loss(a.exp(), b).backward()
        results.append([a.grad.item(), b.grad.item(), list(a.grad.shape)])
    np.testing.assert_allclose(results[0][:2], results[1][:2], rtol=1e-6)
    assert results[0][2] == results[1][2]


def test_functional_linear_vs_torch():
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (2, 4), (2,)))
    gv = [gradviz.tensor(v, requires_grad=True) for v in (x, w, b)]
    th = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    close(functional.linear(*gv), torch.nn.functional.linear(*th))
    close(functional.linear(gv[0], gv[1]), torch.nn.functional.linear(th[0], th[1]))
    functional.linear(*gv).sum().backward()
    torch.nn.functional.linear(*th).sum().backward()
    for g, t in zip(gv, th):
        close(g.grad, t.grad)


def test_unsupported_options_raise():
    with pytest.raises(ValueError):
        functional.mse_loss(gradviz.ones(2), gradviz.ones(2), reduction="avg")


def test_cross_entropy_weight_and_label_smoothing_match_torch():
    logits = [[1.0, 2.0, 3.0], [1.0, 0.0, 2.0], [0.5, 0.1, -1.0]]
    for kwargs in ({"label_smoothing": 0.1}, {"weight": [1.0, 2.0, 0.5]},
                   {"weight": [1.0, 2.0, 0.5], "label_smoothing": 0.2, "ignore_index": 1}):
        results = []
        for m in (gradviz, torch):
            x = m.tensor(logits, requires_grad=True)
            options = {k: (m.tensor(v) if k == "weight" else v) for k, v in kwargs.items()}
            loss = m.nn.CrossEntropyLoss(**options)(x, m.tensor([2, 0, 1]))
            loss.backward()
            results.append((loss, x.grad))
        close(results[0][0], results[1][0], f"loss {kwargs}")
        close(results[0][1], results[1][1], f"grad {kwargs}")


# ---- optimizers ---------------------------------------------------------------------------

OPTIMIZERS = {
    "sgd": lambda m, p: m.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda m, p: m.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd_momentum_wd_dampening": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.8,
                                                          dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda m, p: m.optim.Adam(p, lr=0.01),
    "adam_betas_wd": lambda m, p: m.optim.Adam(p, lr=0.02, betas=(0.8, 0.99), eps=1e-6,
                                               weight_decay=0.05),
    "adam_amsgrad": lambda m, p: m.optim.Adam(p, lr=0.01, amsgrad=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_five_training_steps_match_torch(name):
    gv, th = make_pair()
    g_opt, t_opt = OPTIMIZERS[name](gradviz, gv.parameters()), OPTIMIZERS[name](torch, th.parameters())
    x, y = data()
    for step in range(5):
        g_opt.zero_grad()
        t_opt.zero_grad()
        gl = nn.CrossEntropyLoss()(gv(gradviz.tensor(x)), gradviz.tensor(y))
        tl = torch.nn.CrossEntropyLoss()(th(torch.tensor(x)), torch.tensor(y))
        close(gl, tl, f"loss at step {step}")
        gl.backward()
        tl.backward()
        g_opt.step()
        t_opt.step()
        for (pname, gp), (_, tp) in zip(gv.named_parameters(), th.named_parameters()):
            close(gp, tp, f"{pname} after step {step}")
            assert isinstance(gp, nn.Parameter) and gp.is_leaf and gp.grad_fn is None


def test_optimizer_param_groups_and_zero_grad():
    a = nn.Parameter(gradviz.tensor([1.0, 2.0]))
    b = nn.Parameter(gradviz.tensor([3.0]))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    ((a * a).sum() + (b * b).sum()).backward()
    version = a._version
    opt.step()
    assert a._version > version  # in-place, like torch
    np.testing.assert_allclose(a.detach().numpy(), [0.8, 1.6], rtol=1e-6)
    np.testing.assert_allclose(b.detach().numpy(), [0.0], atol=1e-6)
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and not a.grad.numpy().any()
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    opt.step()  # no grads: nothing happens
    with pytest.raises(ValueError):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError):
        optim.Adam([a], betas=(1.0, 0.9))
    with pytest.raises(TypeError):
        optim.SGD(a, lr=0.1)


def test_closure_is_evaluated_with_grad():
    w = nn.Parameter(gradviz.tensor([2.0]))
    opt = optim.Adam([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 4.0
    np.testing.assert_allclose(w.detach().numpy(), [1.9], rtol=1e-6)


# ---- docstrings ---------------------------------------------------------------------------

@pytest.mark.parametrize("module", [_module, _layers, _loss, _functional_core, _optimizer],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, globs={"gradviz": gradviz}) if t.examples]
    assert tests
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
