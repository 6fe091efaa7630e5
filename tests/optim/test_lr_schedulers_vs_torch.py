"""LR schedulers against torch.optim.lr_scheduler: the rates (and cycled momenta) at every
step, explicit epochs, state_dict round trips, argument errors."""

from __future__ import annotations

import warnings

import pytest
import torch

import gradviz


def optimizer(m, kind="sgd", groups=1):
    params = [m.nn.Parameter(m.ones(2)) for _ in range(groups)]
    spec = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "sgd":
        return m.optim.SGD(spec, lr=0.1, momentum=0.9)
    return m.optim.Adam(spec, lr=0.1, betas=(0.9, 0.99))


SCHEDULERS = {
    "linear": (lambda S, o: S.LinearLR(o), 8),
    "linear_down": (lambda S, o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=4), 8),
    "constant": (lambda S, o: S.ConstantLR(o), 8),
    "constant_half": (lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=3), 6),
    "polynomial": (lambda S, o: S.PolynomialLR(o), 8),
    "polynomial_pow2": (lambda S, o: S.PolynomialLR(o, total_iters=6, power=2.0), 9),
    "warm_restarts": (lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3), 10),
    "warm_restarts_mult": (lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2,
                                                                      eta_min=0.01), 16),
    "onecycle_cos": (lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=10), 10),
    "onecycle_linear": (lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=12,
                                                  anneal_strategy="linear", pct_start=0.25), 12),
    "onecycle_three_phase": (lambda S, o: S.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=4,
                                                       three_phase=True, div_factor=10.0), 12),
    "onecycle_no_momentum": (lambda S, o: S.OneCycleLR(o, max_lr=0.5, total_steps=6,
                                                       cycle_momentum=False), 6),
    "sequential": (lambda S, o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3),
                                                   S.ExponentialLR(o, gamma=0.9)],
                                               milestones=[3]), 9),
    "sequential_three": (lambda S, o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.5, total_iters=2),
                                                         S.CosineAnnealingLR(o, T_max=3),
                                                         S.StepLR(o, step_size=2, gamma=0.5)],
                                                     milestones=[2, 5]), 10),
    "chained": (lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=2),
                                                 S.ExponentialLR(o, gamma=0.9)]), 6),
    "chained_with_warmup": (lambda S, o: S.ChainedScheduler([S.LinearLR(o, total_iters=3),
                                                             S.MultiStepLR(o, milestones=[2, 4])],
                                                            optimizer=o), 7),
    "lambda": (lambda S, o: S.LambdaLR(o, lambda e: 0.9 ** e), 5),
    "multiplicative": (lambda S, o: S.MultiplicativeLR(o, lambda e: 0.8), 5),
}


def rates(m, name, kind, groups=2):
    make, steps = SCHEDULERS[name]
    opt = optimizer(m, kind, groups)
    sched = make(m.optim.lr_scheduler, opt)
    seen = [(sched.get_last_lr(), [g.get("momentum") for g in opt.param_groups],
             [g.get("betas") for g in opt.param_groups])]
    for _ in range(steps):
        opt.step()
        sched.step()
        seen.append((sched.get_last_lr(), [g.get("momentum") for g in opt.param_groups],
                     [g.get("betas") for g in opt.param_groups]))
    return seen, opt, sched


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_rates_and_momenta_match_torch(name, kind):
    g_seen, g_opt, _ = rates(gradviz, name, kind)
    t_seen, t_opt, _ = rates(torch, name, kind)
    assert g_seen == t_seen  # the same formulas in the same order: equal to the last bit
    keys = [sorted(k for k in g if k != "params") for g in t_opt.param_groups]
    assert [sorted(k for k in g if k != "params") for g in g_opt.param_groups] == keys


@pytest.mark.parametrize("name", ["linear", "warm_restarts_mult", "onecycle_three_phase",
                                  "sequential", "chained"])
def test_state_dict_round_trip_matches_torch(name):
    results = []
    for m in (gradviz, torch):
        make, steps = SCHEDULERS[name]
        opt = optimizer(m)
        sched = make(m.optim.lr_scheduler, opt)
        for _ in range(3):
            opt.step()
            sched.step()
        saved = sched.state_dict()
        opt2 = optimizer(m)
        opt2.load_state_dict(opt.state_dict())
        sched2 = make(m.optim.lr_scheduler, opt2)
        sched2.load_state_dict(saved)
        seq = []
        for _ in range(steps - 3):
            opt2.step()
            sched2.step()
            seq.append(sched2.get_last_lr())
        results.append((sorted(k for k in saved if k != "_schedulers"), seq))
    assert results[0] == results[1]


@pytest.mark.parametrize("name,epochs", [("linear", [2, 7, 1]), ("constant", [4, 6]),
                                         ("polynomial", [3, 9]), ("warm_restarts_mult", [5, 1.5, 9])])
def test_explicit_epoch_uses_the_closed_form_and_warns(name, epochs):
    results = []
    for m in (gradviz, torch):
        make, _ = SCHEDULERS[name]
        opt = optimizer(m)
        sched = make(m.optim.lr_scheduler, opt)
        opt.step()
        seq = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for epoch in epochs:
                sched.step(epoch)
                seq.append(sched.get_last_lr())
        results.append((seq, sorted({str(w.message)[:40] for w in caught})))
    assert results[0] == results[1]


BAD = [
    (lambda S, o: S.LinearLR(o, start_factor=0.0), ValueError, "Starting multiplicative factor"),
    (lambda S, o: S.LinearLR(o, end_factor=1.5), ValueError, "Ending multiplicative factor"),
    (lambda S, o: S.ConstantLR(o, factor=2.0), ValueError, "Constant multiplicative factor"),
    (lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "Expected positive integer T_0"),
    (lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), ValueError, "Expected integer T_mult"),
    (lambda S, o: S.OneCycleLR(o, max_lr=1.0), ValueError, "You must define either total_steps"),
    (lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=1), ValueError,
     "Expected float between 0 and 1 pct_start"),
    (lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="exp"), ValueError,
     "anneal_strategy must be one of"),
    (lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 2.0, 3.0], total_steps=5), ValueError,
     "max_lr must have the same length as optimizer.param_groups"),
    (lambda S, o: S.SequentialLR(o, [S.LinearLR(o)], milestones=[2]), ValueError,
     "expects number of schedulers provided to be one more"),
    (lambda S, o: S.SequentialLR(o, [], milestones=[]), ValueError, "expects at least one scheduler"),
    (lambda S, o: S.ChainedScheduler([S.ReduceLROnPlateau(o)]), ValueError,
     "does not support `ReduceLROnPlateau`"),
]


@pytest.mark.parametrize("index", range(len(BAD)))
def test_bad_arguments_raise_like_torch(index):
    make, error, phrase = BAD[index]
    for m in (torch, gradviz):
        with pytest.raises(error, match=phrase.replace("(", r"\(").replace("`", ".")):
            make(m.optim.lr_scheduler, optimizer(m, groups=2))


def test_onecycle_stepping_past_the_end_raises_like_torch():
    for m in (torch, gradviz):
        opt = optimizer(m)
        sched = m.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
        for _ in range(3):
            opt.step()
            sched.step()
        opt.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
            sched.step()


def test_onecycle_without_momentum_in_the_optimizer_raises_like_torch():
    for m in (torch, gradviz):
        opt = m.optim.Adagrad([m.nn.Parameter(m.ones(1))])
        with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
            m.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
