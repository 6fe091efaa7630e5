"""Adamax, NAdam, RAdam and Adadelta against torch.optim: parameters after several training
steps, state_dict layout and round trip, repr, argument errors."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch

import gradviz
from gradviz import nn, optim
from gradviz.optim import _optimizer

RTOL, ATOL = 2e-5, 2e-6


def close(gv, th, what="value"):
    a = gv.detach().numpy() if isinstance(gv, gradviz.Tensor) else np.asarray(gv)
    b = th.detach().numpy()
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=what)


def mlp(m):
    return m.nn.Sequential(m.nn.Linear(4, 6), m.nn.Tanh(), m.nn.Linear(6, 3))


def make_pair(seed=0):
    torch.manual_seed(seed)
    th = mlp(torch)
    gv = mlp(gradviz)
    gv.load_state_dict({k: gradviz.tensor(v.numpy()) for k, v in th.state_dict().items()})
    return gv, th


def batch(step):
    rng = np.random.default_rng(step)
    return rng.standard_normal((8, 4)).astype(np.float32), rng.integers(0, 3, size=8)


def train(m, model, opt, steps, start=0):
    for step in range(start, start + steps):
        x, y = batch(step)
        opt.zero_grad()
        loss = m.nn.CrossEntropyLoss()(model(m.tensor(x)), m.tensor(y))
        loss.backward()
        opt.step()


OPTIMIZERS = {
    "adamax": lambda m, p: m.optim.Adamax(p),
    "adamax_wd_max": lambda m, p: m.optim.Adamax(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6,
                                                 weight_decay=0.1, maximize=True),
    "nadam": lambda m, p: m.optim.NAdam(p),
    "nadam_lr_wd": lambda m, p: m.optim.NAdam(p, lr=0.05, weight_decay=0.1, momentum_decay=0.01),
    "nadamw_max": lambda m, p: m.optim.NAdam(p, lr=0.05, weight_decay=0.1,
                                             decoupled_weight_decay=True, maximize=True),
    "radam": lambda m, p: m.optim.RAdam(p),
    "radam_lr_wd": lambda m, p: m.optim.RAdam(p, lr=0.05, weight_decay=0.1),
    "radamw_max": lambda m, p: m.optim.RAdam(p, lr=0.05, betas=(0.9, 0.9), weight_decay=0.1,
                                             decoupled_weight_decay=True, maximize=True),
    "adadelta": lambda m, p: m.optim.Adadelta(p),
    "adadelta_wd_max": lambda m, p: m.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5,
                                                     weight_decay=0.1, maximize=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_training_steps_match_torch(name):
    # 8 steps: RAdam with betas=(0.9, 0.9) leaves its un-rectified phase (rho_t <= 5) on the way
    gv, th = make_pair()
    g_opt, t_opt = OPTIMIZERS[name](gradviz, gv.parameters()), OPTIMIZERS[name](torch, th.parameters())
    for step in range(8):
        train(gradviz, gv, g_opt, 1, step)
        train(torch, th, t_opt, 1, step)
        for (pname, gp), (_, tp) in zip(gv.named_parameters(), th.named_parameters()):
            close(gp, tp, f"{pname} after step {step}")


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_state_dict_layout_and_round_trip(name):
    gv, th = make_pair()
    g_opt, t_opt = OPTIMIZERS[name](gradviz, gv.parameters()), OPTIMIZERS[name](torch, th.parameters())
    train(gradviz, gv, g_opt, 3)
    train(torch, th, t_opt, 3)
    g_sd, t_sd = g_opt.state_dict(), t_opt.state_dict()
    assert g_sd["param_groups"] == t_sd["param_groups"]
    assert list(g_sd["state"]) == list(t_sd["state"])
    for i in t_sd["state"]:
        assert list(g_sd["state"][i]) == list(t_sd["state"][i])
        for key, value in t_sd["state"][i].items():
            close(g_sd["state"][i][key], value, f"state[{i}][{key!r}]")
    # a fresh optimizer loaded from the saved state continues exactly like the original
    g_new = OPTIMIZERS[name](gradviz, gv.parameters())
    t_new = OPTIMIZERS[name](torch, th.parameters())
    g_new.load_state_dict(g_sd)
    t_new.load_state_dict(t_sd)
    train(gradviz, gv, g_new, 3, start=3)
    train(torch, th, t_new, 3, start=3)
    for (pname, gp), (_, tp) in zip(gv.named_parameters(), th.named_parameters()):
        close(gp, tp, f"{pname} after reloading and 3 more steps")


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_repr_matches_torch(name):
    g_opt = OPTIMIZERS[name](gradviz, [nn.Parameter(gradviz.ones(2))])
    t_opt = OPTIMIZERS[name](torch, [torch.nn.Parameter(torch.ones(2))])
    assert repr(g_opt) == repr(t_opt)


BAD_ARGUMENTS = [
    ("Adamax", dict(lr=-1.0), "Invalid learning rate"),
    ("Adamax", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
    ("NAdam", dict(betas=(0.9, 1.5)), "Invalid beta parameter at index 1"),
    ("NAdam", dict(momentum_decay=-0.1), "Invalid momentum_decay value"),
    ("RAdam", dict(eps=-1.0), "Invalid epsilon value"),
    ("RAdam", dict(weight_decay=-0.1), "Invalid weight_decay value"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value"),
    ("Adadelta", dict(lr=-0.5), "Invalid learning rate"),
]


@pytest.mark.parametrize("name,kwargs,phrase", BAD_ARGUMENTS)
def test_bad_arguments_raise_like_torch(name, kwargs, phrase):
    with pytest.raises(ValueError, match=phrase):
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kwargs)
    with pytest.raises(ValueError, match=phrase):
        getattr(optim, name)([nn.Parameter(gradviz.ones(2))], **kwargs)


def test_parameters_without_grad_are_skipped_and_get_no_state():
    for m in (gradviz, torch):
        a, b = m.nn.Parameter(m.ones(2)), m.nn.Parameter(m.ones(2))
        for cls in ("Adamax", "NAdam", "RAdam", "Adadelta"):
            opt = getattr(m.optim, cls)([a, b])
            (a * a).sum().backward()
            opt.step()
            assert list(opt.state_dict()["state"]) == [0]
            assert b.detach().numpy().tolist() == [1.0, 1.0]
            a.grad = None


def test_docstring_examples():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    names = {"Adamax", "NAdam", "RAdam", "Adadelta"}
    tests = [t for t in finder.find(_optimizer, globs={"gradviz": gradviz})
             if t.examples and t.name.split(".")[-1] in names]
    assert len(tests) == 4
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
