"""Adam's and SGD's steps on the tensors' arrays (Note [Optimizer steps on arrays] in
gradviz/optim/_optimizer.py): the same bits, version counters and view histories as the
tensor ops they replace, the cases they leave to those ops, and torch's parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import cpu_has

import gradviz
import gradviz_ext
from gradviz.autograd import forward_ad
from gradviz.optim import _optimizer
from gradviz_ext import ops as ext_ops

ADAM = {
    "adam": ("Adam", dict(lr=1e-2)),
    "adam_wd": ("Adam", dict(lr=1e-2, weight_decay=0.1)),
    "adam_amsgrad": ("Adam", dict(lr=1e-2, amsgrad=True)),
    "adam_max_betas": ("Adam", dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, maximize=True)),
    "adam_all": ("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)),
    "adamw": ("AdamW", dict(lr=1e-2)),
    "adamw_wd_amsgrad": ("AdamW", dict(lr=1e-2, weight_decay=0.5, amsgrad=True)),
    "adamw_max": ("AdamW", dict(lr=1e-2, maximize=True)),
    "adam_int_hyperparameters": ("Adam", dict(lr=1, betas=(0, 0), eps=0)),
}
SGD = {
    "sgd_momentum": ("SGD", dict(lr=0.05, momentum=0.9)),
    "sgd_momentum_dampening_wd": ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3,
                                              weight_decay=0.01)),
    "sgd_momentum_max": ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    "sgd_nesterov": ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),  # tensor ops
}
CONFIGS = {**ADAM, **SGD}
SHAPES = [(), (0,), (1,), (7,), (3, 5), (0, 4), (64, 65), (4097,), (2, 3, 11)]


@pytest.fixture
def calls(monkeypatch):
    """Counts of the array steps that ran (True, a parameter group's steps in one call
    counted one per parameter) and declined (False)."""
    counts = {True: 0, False: 0}
    for name in ("_adam_on_arrays", "_momentum_on_arrays"):
        original = getattr(_optimizer, name)

        def counted(*args, _original=original):
            done = _original(*args)
            counts[done] += 1
            return done

        monkeypatch.setattr(_optimizer, name, counted)
    original_group = ext_ops.adam_params

    def counted_group(params, start, *args):
        stop = original_group(params, start, *args)
        counts[True] += stop - start
        return stop

    monkeypatch.setattr(ext_ops, "adam_params", counted_group)
    return counts


def per_parameter_only(monkeypatch):
    """Adam without its parameter group's step in one call: one parameter at a time."""
    monkeypatch.setattr(_optimizer.Adam, "_group_on_arrays", None)


def tensor_ops_only(monkeypatch):
    per_parameter_only(monkeypatch)
    monkeypatch.setattr(_optimizer, "_adam_on_arrays", lambda *args: False)
    monkeypatch.setattr(_optimizer, "_momentum_on_arrays", lambda *args: False)


def gradients(shape, dtype, steps, special, seed=0):
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]
    if special and grads[0].size:
        # NaN, infinities, -0.0 and a tiny value, each in one step: they spread through the
        # moments into the parameter as the tensor ops spread them
        for step, value in zip(range(1, steps), (np.nan, np.inf, -np.inf, -0.0, 1e-30)):
            grads[step].reshape(-1)[(step * 7) % grads[step].size] = value
    return grads


def run(config, shape, dtype, grads, seed=0):
    """The parameters, optimizer state and versions after one step per gradient."""
    cls, kwargs = CONFIGS[config]
    rng = np.random.default_rng(seed + 1)
    params = [gradviz.nn.Parameter(gradviz.tensor(rng.standard_normal(shape).astype(dtype)))
              for _ in range(2)]
    opt = getattr(gradviz.optim, cls)(params, **kwargs)
    for g in grads:
        for i, p in enumerate(params):
            p.grad = gradviz.tensor(g * (i + 1))
        opt.step()
    state = [{k: (v.detach().numpy().copy(), v._version) for k, v in opt.state[p].items()}
             for p in params]
    return [p.detach().numpy().copy() for p in params], [p._version for p in params], state


def same_bits(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")), what


def same_bits_but_nan_signs(a, b, what):
    """The same bits, but for the sign of a NaN: where two NaNs of different signs meet in an
    add or a multiply, even numpy gives either one, depending on the element's position (of
    np.add on 30 float32 NaNs and 30 negated NaNs, 14 results are negative)."""
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert np.array_equal(np.isnan(a), np.isnan(b)), what
    same_bits(np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b), what)


@pytest.mark.parametrize("path", ["group", "kernel", "numpy"])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf_zero"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_steps_on_arrays_give_the_tensor_ops_bits(config, dtype, special, path, calls,
                                                  monkeypatch):
    # group: Adam's steps of a parameter group in one call; kernel: its one-pass loop where it
    # applies (gradviz_ext/c/adam_step.h), one parameter at a time; numpy: the numpy calls it
    # replaces
    if path != "group":
        per_parameter_only(monkeypatch)
    if path == "numpy":
        monkeypatch.setattr(ext_ops, "adam_step", lambda *args: False)
    for shape in SHAPES:
        grads = gradients(shape, dtype, 6, special)
        got = run(config, shape, dtype, grads)
        with monkeypatch.context() as m:
            tensor_ops_only(m)
            expected = run(config, shape, dtype, grads)
        for a, b in zip(got[0], expected[0]):
            same_bits(a, b, f"{config} {shape} parameter")
        assert got[1] == expected[1], f"{config} {shape} parameter versions"
        for mine, theirs in zip(got[2], expected[2]):
            assert list(mine) == list(theirs)
            for key in mine:
                same_bits(mine[key][0], theirs[key][0], f"{config} {shape} state {key!r}")
                assert mine[key][1] == theirs[key][1], f"{config} {shape} version of {key!r}"
    if config == "sgd_nesterov":
        assert calls[True] == 0
    else:
        assert calls[True] > 0 and calls[False] == 0


@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf_zero"])
@pytest.mark.parametrize("shape,dtype", [((16, 9), np.float32), ((), np.float32),
                                         ((0,), np.float32), ((1027,), np.float32),
                                         ((16, 9), np.float64), ((3, 37), np.float64)])
@pytest.mark.parametrize("config", [c for c in CONFIGS if c != "adam_int_hyperparameters"])
def test_steps_on_arrays_match_torch(config, shape, dtype, special, calls):
    cls, kwargs = CONFIGS[config]
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(shape).astype(dtype)
    grads = gradients(shape, dtype, 6, special, seed=4)
    results = []
    for lib in (gradviz, torch):
        w = lib.nn.Parameter(lib.tensor(w0))
        opt = getattr(lib.optim, cls)([w], **kwargs)
        for g in grads:
            w.grad = lib.tensor(g)
            opt.step()
        state = {k: (v.detach().numpy(), v._version) for k, v in opt.state[w].items()}
        results.append((w.detach().numpy(), w._version, state))
    (gw, gversion, gstate), (tw, tversion, tstate) = results
    assert gw.dtype == tw.dtype == dtype
    np.testing.assert_allclose(gw, tw, rtol=2e-5, atol=2e-6)  # NaNs where torch has them
    assert gversion == tversion  # in-place updates, counted as torch counts them
    assert list(gstate) == list(tstate)
    for key in tstate:
        np.testing.assert_allclose(gstate[key][0], tstate[key][0], rtol=2e-5, atol=2e-6)
        assert gstate[key][1] == tstate[key][1], key
    assert calls[True] > 0 or config == "sgd_nesterov"


@pytest.mark.parametrize("config", list(ADAM))
def test_the_adam_kernel_runs_where_it_should(config, monkeypatch):
    """Compiled, on a CPU with FMA, every Adam and AdamW update is the one-pass loop (maximize,
    weight decay and AMSGrad folded in); on float32 arrays it declines an overflowing scalar,
    overlapping or strided arrays: the numpy calls."""
    cls, kwargs = ADAM[config]
    done = []
    original = ext_ops.adam_step

    def spy(*args):
        done.append(original(*args))
        return done[-1]

    monkeypatch.setattr(ext_ops, "adam_step", spy)
    p = gradviz.nn.Parameter(gradviz.ones(5))
    opt = getattr(gradviz.optim, cls)([p], **kwargs)
    p.grad = gradviz.full((5,), 0.5)
    opt.step()
    expected = gradviz_ext.COMPILED and cpu_has("avx2", "fma")
    assert done == [expected]
    x = np.ones(6, np.float32)
    arrays = [x.copy() for _ in range(4)]
    scalars = (0.1, 0.999, 0.001, 0.5, 1e-8, -0.01)
    assert original(*arrays, None, *scalars) == expected
    assert original(*arrays, x.copy(), *scalars, True, 0.5, None) == expected
    assert not original(*arrays[:3], arrays[0], None, *scalars)  # v is p
    assert not original(*arrays, arrays[1], *scalars)  # the maximum is g
    assert not original(x[::2].copy(), x[::2], x[::2].copy(), x[::2].copy(), None, *scalars)
    assert not original(*arrays, None, *scalars[:5], -1e39)  # beyond float32
    assert not original(*arrays, None, *scalars, False, 1e39, None)
    assert not original(*arrays, None, *scalars, False, None, -1e39)
    assert not original(*[a.astype(np.float16) for a in arrays], None, *scalars)
    assert not original(*arrays[:3], np.ones(5, np.float32), None, *scalars)
    assert not original(*arrays, np.ones(5, np.float32), *scalars)


def numpy_adam(p, g, m, v, largest, c1, beta2, c2, correction2, eps, rate, negate, decay,
               shrink):
    """The numpy calls of _adam_on_arrays that the kernel replaces, on the arrays in place;
    the fused adds are gradviz's add with an alpha (Note [Whole-array kernels])."""
    with np.errstate(all="ignore"):
        if negate:
            g = np.negative(g)
        if shrink is not None:
            np.multiply(p, shrink, out=p)
        if decay is not None:
            g = ext_ops.fused_add(g, p, decay)
        scratch = np.subtract(g, m)
        np.multiply(scratch, c1, out=scratch)
        np.add(m, scratch, out=m)
        np.multiply(v, beta2, out=v)
        ext_ops.fused_add(v, np.multiply(g, g), c2, True)
        second = v
        if largest is not None:
            np.maximum(largest, v, out=largest)
            second = largest
        np.sqrt(second, out=scratch)
        np.divide(scratch, correction2, out=scratch)
        np.add(scratch, eps, out=scratch)
        np.divide(m, scratch, out=scratch)
        ext_ops.fused_add(p, scratch, rate, True)


@pytest.mark.skipif(not (gradviz_ext.COMPILED and cpu_has("avx2", "fma")), reason="no kernel")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("negate,decay,shrink", [(False, None, None), (True, 0.1, None),
                                                 (False, None, 0.995), (True, None, 0.9)])
def test_the_adam_kernel_gives_the_numpy_calls_bits(dtype, amsgrad, negate, decay, shrink):
    # every size from 0 to 40 (the vector loop and the elements after it), large ones, and
    # NaN of either sign, infinities, -0.0 and ties in every array; a NaN alone (not meeting
    # another) keeps its sign, as test_steps_on_arrays_give_the_tensor_ops_bits checks
    rng = np.random.default_rng(7)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30], dtype)
    scalars = (0.1, 0.999, 0.001, 0.3, 1e-8, -0.01)
    for n in [*range(41), 1000, 4099]:
        arrays = [rng.standard_normal(n).astype(dtype) for _ in range(5)]
        arrays[3] = np.abs(arrays[3])
        arrays[4] = np.where(rng.random(n) < 0.3, arrays[3], np.abs(arrays[4]))
        for a in arrays:
            where = rng.random(n) < 0.15
            a[where] = rng.choice(special, where.sum())
        expected = [a.copy() for a in arrays]
        numpy_adam(*expected[:4], expected[4] if amsgrad else None, *scalars, negate, decay,
                   shrink)
        got = [a.copy() for a in arrays]
        assert ext_ops.adam_step(*got[:4], got[4] if amsgrad else None, *scalars, negate,
                                 decay, shrink)
        for a, b, name in zip(got, expected, "pgmvl"):
            same_bits_but_nan_signs(a, b, f"{name} of {n} {np.dtype(dtype).name}")


def declined_case(case):
    """A parameter, a gradient and the optimizer arguments the array steps leave to the
    tensor ops."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((6, 4)).astype(np.float32)
    grad = gradviz.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    kwargs = {}
    if case == "float16":
        data, grad = data.astype(np.float16), grad.to(gradviz.float16)
    elif case == "strided parameter":
        data = np.asfortranarray(data)
    elif case == "strided gradient":
        grad = gradviz.tensor(np.asfortranarray(grad.numpy()))
    elif case == "float64 gradient":
        grad = grad.to(gradviz.float64)
    elif case == "tensor lr":
        kwargs = {"lr": gradviz.tensor(0.01)}
    p = gradviz.nn.Parameter(gradviz.tensor(data))
    if case == "strided parameter":
        assert not p._data.flags.c_contiguous
    return p, grad, kwargs


@pytest.mark.parametrize("case", ["float16", "strided parameter", "strided gradient",
                                  "float64 gradient", "tensor lr"])
@pytest.mark.parametrize("cls", ["Adam", "SGD"])
def test_what_the_array_steps_decline_takes_the_tensor_ops(cls, case, calls, monkeypatch):
    outcomes = []
    for arrays in (True, False):
        with monkeypatch.context() as m:
            if not arrays:
                tensor_ops_only(m)
            p, grad, kwargs = declined_case(case)
            if cls == "SGD":
                kwargs["momentum"] = 0.9
            opt = getattr(gradviz.optim, cls)([p], **kwargs)
            try:
                for _ in range(3):
                    p.grad = grad
                    opt.step()
                outcomes.append((p.detach().numpy().copy(), p._version))
            except (RuntimeError, TypeError) as error:  # the same error either way
                outcomes.append((type(error), str(error)))
    assert calls[True] == 0
    if isinstance(outcomes[0][0], np.ndarray):
        same_bits(outcomes[0][0], outcomes[1][0], case)
        assert outcomes[0][1] == outcomes[1][1]
    else:
        assert outcomes[0] == outcomes[1]


def test_a_forward_ad_level_takes_the_tensor_ops(calls):
    p = gradviz.nn.Parameter(gradviz.ones(3))
    opt = gradviz.optim.Adam([p], lr=0.1)
    p.grad = gradviz.full((3,), 0.5)
    with forward_ad.dual_level():
        opt.step()
    assert calls == {True: 0, False: 1}
    p.grad = gradviz.full((3,), 0.5)
    opt.step()
    assert calls == {True: 1, False: 1}


@pytest.mark.parametrize("config", ["adam", "adamw_wd_amsgrad", "sgd_momentum"])
def test_live_views_of_a_parameter_see_the_step_and_get_a_new_history(config, calls,
                                                                      monkeypatch):
    cls, kwargs = CONFIGS[config]
    outcomes = []
    for arrays in (True, False):
        with monkeypatch.context() as m:
            if not arrays:
                tensor_ops_only(m)
            p = gradviz.nn.Parameter(gradviz.tensor(np.arange(6.0, dtype=np.float32)))
            opt = getattr(gradviz.optim, cls)([p], **kwargs)
            for _ in range(2):
                p.grad = gradviz.full((6,), 0.25)
                opt.step()
            view = p.view(2, 3)  # recorded: p requires grad
            before = view.grad_fn
            p.grad = gradviz.full((6,), 0.25)
            opt.step()
            assert view.grad_fn is not before
            (view * view).sum().backward()
            outcomes.append((view.detach().numpy().copy(), view.grad_fn.name(),
                             p.grad.numpy().copy(), p._version))
    assert calls[True] > 0
    same_bits(outcomes[0][0], outcomes[1][0], "view")
    assert outcomes[0][1] == outcomes[1][1] == "AsStridedBackward0"
    same_bits(outcomes[0][2], outcomes[1][2], "gradient through the view")
    assert outcomes[0][3] == outcomes[1][3]


def test_gpt_like_training_matches_with_and_without_the_array_steps(monkeypatch, calls):
    # a model whose linear weights have views (their transposes) when the optimizer runs
    def train():
        gradviz.manual_seed(0)
        model = gradviz.nn.Sequential(gradviz.nn.Linear(8, 16), gradviz.nn.GELU(),
                                      gradviz.nn.Linear(16, 4))
        opt = gradviz.optim.Adam(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(0)
        for _ in range(5):
            x = gradviz.tensor(rng.standard_normal((10, 8)).astype(np.float32))
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
        return [p.detach().numpy().copy() for p in model.parameters()]

    got = train()
    with monkeypatch.context() as m:
        tensor_ops_only(m)
        expected = train()
    for a, b in zip(got, expected):
        same_bits(a, b, "parameter")
    assert calls[True] == 5 * 4 and calls[False] == 0


# ---- Adam's parameter group in one call (Note [Adam's parameter group in one call]) --------

def mixed_group(amsgrad, maximize):
    """Parameters the one call takes and leaves in one group: float32 and float64, one
    without a gradient in some steps, one whose state is made late, float16 and strided ones
    (the per-parameter rule's), a parameter listed twice."""
    rng = np.random.default_rng(11)
    shapes = [((3, 5), np.float32), ((7,), np.float64), ((4, 4), np.float32), ((2, 3), np.float16),
              ((6, 2), np.float32), ((), np.float32), ((33,), np.float32)]
    params = [gradviz.nn.Parameter(gradviz.tensor(rng.standard_normal(shape).astype(dtype)))
              for shape, dtype in shapes]
    params[4] = gradviz.nn.Parameter(gradviz.tensor(
        np.asfortranarray(rng.standard_normal((6, 2)).astype(np.float32))))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        opt = gradviz.optim.Adam(params + [params[0]], lr=1e-2, amsgrad=amsgrad,
                                 maximize=maximize, weight_decay=0.05)
    return params, opt


def run_mixed(amsgrad, maximize, steps=5):
    params, opt = mixed_group(amsgrad, maximize)
    rng = np.random.default_rng(12)
    for step in range(steps):
        for i, p in enumerate(params):
            missing = (i == 2 and step % 2 == 1) or (i == 6 and step < 2)
            p.grad = None if missing else gradviz.tensor(
                rng.standard_normal(p.shape).astype(p.detach().numpy().dtype))
        opt.step()
    state = [{k: (v.detach().numpy().copy(), v._version) for k, v in opt.state[p].items()}
             for p in params]
    return [p.detach().numpy().copy() for p in params], [p._version for p in params], state


@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, True)])
def test_the_group_in_one_call_gives_the_per_parameter_bits(amsgrad, maximize, calls,
                                                          monkeypatch):
    got = run_mixed(amsgrad, maximize)
    done = calls[True]
    for reference in (per_parameter_only, tensor_ops_only):
        with monkeypatch.context() as m:
            reference(m)
            expected = run_mixed(amsgrad, maximize)
        for i, (a, b) in enumerate(zip(got[0], expected[0])):
            same_bits(a, b, f"parameter {i}")
        assert got[1] == expected[1]
        for mine, theirs in zip(got[2], expected[2]):
            assert list(mine) == list(theirs)
            for key in mine:
                same_bits(mine[key][0], theirs[key][0], f"state {key!r}")
                assert mine[key][1] == theirs[key][1], key
    if gradviz_ext.COMPILED and cpu_has("avx2", "fma"):
        # steps 2 to 5 of parameters 0, 1, 5 and the repeat of 0, 3 and 4 of parameter 6, 2
        # of parameter 2: in the one call (the others' counted by the per-parameter rule)
        assert done >= 4 * 4 + 3 + 2


def test_the_group_call_stops_at_a_parameter_it_leaves_and_resumes_after_it(monkeypatch):
    if not (gradviz_ext.COMPILED and cpu_has("avx2", "fma")):
        pytest.skip("no kernel")
    stops = []
    original = ext_ops.adam_params

    def spy(params, start, *args):
        stops.append((start, original(params, start, *args)))
        return stops[-1][1]

    params = [gradviz.nn.Parameter(gradviz.ones(3)) for _ in range(4)]
    params[1] = gradviz.nn.Parameter(gradviz.ones(3, dtype=gradviz.float16))
    opt = gradviz.optim.Adam(params, lr=0.1)
    for p in params:
        p.grad = gradviz.full(p.shape, 0.5, dtype=p.dtype)
    opt.step()  # no state yet: each parameter by its rule
    monkeypatch.setattr(ext_ops, "adam_params", spy)
    opt.step()
    assert stops == [(0, 1), (2, 4)]


def counter_case(case):
    """One Adam step of a parameter whose state was changed as a user could change it; the
    outcome (the parameter and its versions, or the error)."""
    p = gradviz.nn.Parameter(gradviz.tensor(np.linspace(-1, 1, 5, dtype=np.float32)))
    opt = gradviz.optim.Adam([p], lr=0.1)
    p.grad = gradviz.full((5,), 0.5)
    opt.step()
    state = opt.state[p]
    if case == "float64 counter":
        state["step"] = gradviz.tensor(3.0, dtype=gradviz.float64)
    elif case == "counter at 2**24":
        state["step"] = gradviz.tensor(2.0 ** 24)
    elif case == "counter at -1":
        state["step"] = gradviz.tensor(-1.0)  # t = 0: 1 - beta1 ** 0 divides by zero
    elif case == "counter NaN":
        state["step"] = gradviz.tensor(float("nan"))
    elif case == "counter 0-d view":
        state["step"] = gradviz.tensor([4.0, 5.0])[1]
    elif case == "beta2 of 1":
        opt.param_groups[0]["betas"] = (0.9, 1.0)
    elif case == "beta1 of 0":
        opt.param_groups[0]["betas"] = (0, 0.999)
    elif case == "int lr":
        opt.param_groups[0]["lr"] = 1
    elif case == "inference moment":
        with gradviz.inference_mode():
            state["exp_avg"] = gradviz.zeros(5)
    elif case == "missing moment":
        del state["exp_avg_sq"]
    try:
        for _ in range(2):
            p.grad = gradviz.full((5,), -0.25)
            opt.step()
    except (RuntimeError, ZeroDivisionError, KeyError, ValueError) as error:
        return type(error), str(error)
    return (p.detach().numpy().copy(), p._version,
            {k: (v.detach().numpy().copy(), v._version) for k, v in state.items()})


@pytest.mark.parametrize("case", ["float64 counter", "counter at 2**24", "counter at -1",
                                  "counter NaN", "counter 0-d view", "beta2 of 1", "beta1 of 0",
                                  "int lr", "inference moment", "missing moment"])
def test_the_group_call_with_unusual_state_gives_the_per_parameter_outcome(case, monkeypatch):
    got = counter_case(case)
    with monkeypatch.context() as m:
        per_parameter_only(m)
        expected = counter_case(case)
    if not isinstance(expected[0], np.ndarray):
        assert got == expected
        return
    same_bits_but_nan_signs(got[0], expected[0], case)
    assert got[1] == expected[1]
    assert list(got[2]) == list(expected[2])
    for key in got[2]:
        same_bits_but_nan_signs(got[2][key][0], expected[2][key][0], key)
        assert got[2][key][1] == expected[2][key][1], key
