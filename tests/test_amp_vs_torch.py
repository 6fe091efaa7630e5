"""``torch.amp`` in gradviz: GradScaler step for step against torch's (scales, skipped steps,
growth, errors, state dicts), autocast's switches and warnings, and the flags training scripts
set for accelerators (Note [Mixed precision without an accelerator] in gradviz/amp/_autocast.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gradviz

LIBRARIES = {"gradviz": gradviz, "torch": torch}
rng = np.random.default_rng(5)
W0 = rng.standard_normal((3, 4)).astype(np.float32)
X = rng.standard_normal((8, 4)).astype(np.float32)


def train(lib, poison_steps=(), unscale_first=False, growth_interval=3, clip=None):
    """SGD with momentum under a CPU GradScaler; the steps in ``poison_steps`` get an infinite
    gradient. Returns the weights, the scales and step results seen, and the state dict."""
    w = lib.tensor(W0.copy(), requires_grad=True)
    optimizer = lib.optim.SGD([w], lr=0.05, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=growth_interval)
    scales, results = [], []
    for step in range(8):
        x = lib.tensor(X)
        loss = (x @ w.T).tanh().pow(2).mean()
        if step in poison_steps:
            loss = loss * lib.tensor(float("inf"))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        if unscale_first:
            scaler.unscale_(optimizer)
            if clip is not None:
                lib.nn.utils.clip_grad_norm_([w], clip)
        results.append(scaler.step(optimizer))
        scaler.update()
        scales.append(scaler.get_scale())
    return w.detach().numpy(), scales, results, scaler.state_dict()


@pytest.mark.parametrize("poison_steps", [(), (2,), (0, 1, 5)], ids=str)
@pytest.mark.parametrize("unscale_first,clip", [(False, None), (True, None), (True, 0.01)],
                         ids=["step unscales", "unscale_ first", "unscale_ and clip"])
def test_grad_scaler_training_matches_torch(poison_steps, unscale_first, clip):
    ours = train(gradviz, poison_steps, unscale_first, clip=clip)
    theirs = train(torch, poison_steps, unscale_first, clip=clip)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert ours[1:] == theirs[1:]


def test_scaled_gradients_and_scaled_outputs_match_torch():
    def run(lib):
        w = lib.tensor(W0.copy(), requires_grad=True)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0)
        a, b = scaler.scale([(w * 2).sum(), ((w * 3).sum(),)])
        a.backward()
        return w.grad.numpy().copy(), type(b).__name__, float(b[0].detach())

    ours, theirs = run(gradviz), run(torch)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1]
    assert ours[2] == pytest.approx(theirs[2], rel=1e-6)


def _error(call):
    try:
        call()
    except Exception as error:  # the type and the message, compared with torch's
        return type(error).__name__, str(error)
    return None


@pytest.mark.parametrize("misuse", ["unscale twice", "unscale after step", "step twice", "closure",
                                    "no scale", "fp16 grads", "growth factor", "backoff factor",
                                    "empty state", "outputs"])
def test_grad_scaler_misuse_raises_what_torch_raises(misuse):
    def run(lib):
        w = lib.ones(2, requires_grad=True)
        optimizer = lib.optim.SGD([w], lr=0.1)
        if misuse == "growth factor":
            return _error(lambda: lib.amp.GradScaler("cpu", growth_factor=1.0))
        if misuse == "backoff factor":
            return _error(lambda: lib.amp.GradScaler("cpu", backoff_factor=1.0))
        scaler = lib.amp.GradScaler("cpu")
        if misuse == "no scale":
            return _error(lambda: scaler.step(optimizer))
        if misuse == "empty state":
            return _error(lambda: scaler.load_state_dict({}))
        if misuse == "outputs":
            return _error(lambda: scaler.scale([1.0]))
        if misuse == "fp16 grads":
            half = lib.ones(2, dtype=lib.float16, requires_grad=True)
            half.grad = lib.ones(2, dtype=lib.float16)
            optimizer = lib.optim.SGD([half], lr=0.1)
            scaler.scale(w.sum())
            return _error(lambda: scaler.unscale_(optimizer))
        scaler.scale((w * 2).sum()).backward()
        if misuse == "closure":
            return _error(lambda: scaler.step(optimizer, closure=lambda: None))
        if misuse == "unscale twice":
            scaler.unscale_(optimizer)
            return _error(lambda: scaler.unscale_(optimizer))
        scaler.step(optimizer)
        if misuse == "unscale after step":
            return _error(lambda: scaler.unscale_(optimizer))
        return _error(lambda: scaler.step(optimizer))

    ours, theirs = run(gradviz), run(torch)
    assert ours is not None and ours == theirs


def test_state_dict_round_trip_matches_torch():
    def run(lib):
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0, growth_interval=7)
        other = lib.amp.GradScaler("cpu")
        other.load_state_dict(scaler.state_dict())
        w = lib.ones(2, requires_grad=True)
        other.scale(w.sum()).backward()
        return other.state_dict(), w.grad.tolist(), other.get_growth_interval()

    assert run(gradviz) == run(torch)


def _warned(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = call()
    return value, [(w.category.__name__, str(w.message)) for w in caught]


def test_cuda_scalers_disable_themselves_with_torch_warnings():
    for make in (lambda lib: lib.amp.GradScaler(), lambda lib: lib.cuda.amp.GradScaler(),
                 lambda lib: lib.amp.GradScaler("cuda", enabled=False)):
        ours, theirs = _warned(lambda: make(gradviz)), _warned(lambda: make(torch))
        assert ours[1] == theirs[1]
        assert ours[0].is_enabled() is theirs[0].is_enabled() is False
        w = gradviz.ones(2, requires_grad=True)
        optimizer = gradviz.optim.SGD([w], lr=0.5)
        loss = (w * 2).sum()
        assert ours[0].scale(loss) is loss and ours[0].get_scale() == 1.0 and ours[0].state_dict() == {}
        loss.backward()
        ours[0].step(optimizer)
        ours[0].update()
        assert w.tolist() == [0.0, 0.0]


def test_autocast_switches_and_warnings_match_torch():
    for device, dtype in (("cuda", None), ("cpu", "float32"), ("cpu", "float16")):
        def run(lib):
            options = {} if dtype is None else {"dtype": getattr(lib, dtype)}
            block = lib.autocast(device, **options)
            with block:
                inside = lib.is_autocast_enabled(device)
            return inside, lib.is_autocast_enabled(device)

        ours, ours_warnings = _warned(lambda: run(gradviz))
        theirs, theirs_warnings = _warned(lambda: run(torch))
        assert ours == theirs, (device, dtype)
        if (device, dtype) == ("cpu", "float16"):   # torch computes in float16; gradviz says it does not
            assert theirs_warnings == [] and "gradviz computes in float32" in ours_warnings[0][1]
        else:
            assert ours_warnings == theirs_warnings


def test_inside_cpu_autocast_gradviz_computes_in_float32_as_torch_does_outside():
    a = rng.standard_normal((4, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gradviz.autocast("cpu", dtype=gradviz.float16):
            ours = gradviz.nn.functional.linear(gradviz.tensor(a), gradviz.tensor(a))

        @gradviz.autocast("cpu", dtype=gradviz.float16)
        def decorated(x):
            return gradviz.is_autocast_enabled("cpu"), x @ x

    enabled, product = decorated(gradviz.tensor(a))
    assert ours.dtype is gradviz.float32 and enabled and not gradviz.is_autocast_enabled("cpu")
    np.testing.assert_allclose(ours.numpy(), torch.nn.functional.linear(torch.tensor(a), torch.tensor(a)).numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(product.numpy(), a @ a, rtol=1e-5)


def test_bad_autocast_devices_raise_what_torch_raises():
    for device in (3, "tpu9"):
        assert _error(lambda: gradviz.autocast(device)) == _error(lambda: torch.autocast(device))


def test_flags_training_scripts_set_are_accepted():
    for lib in LIBRARIES.values():
        lib.backends.cuda.matmul.allow_tf32 = True
        lib.backends.cudnn.allow_tf32 = True
        assert lib.cuda.is_bf16_supported() is False
    previous = gradviz.get_float32_matmul_precision()
    try:
        gradviz.set_float32_matmul_precision("high")
        assert gradviz.get_float32_matmul_precision() == "high"
        _, said = _warned(lambda: gradviz.set_float32_matmul_precision("fast"))
        assert "is not one of 'highest', 'high', or 'medium'" in said[0][1]
        assert gradviz.get_float32_matmul_precision() == "high"
    finally:
        gradviz.set_float32_matmul_precision(previous)
    with pytest.raises(AttributeError, match="no bfloat16"):
        gradviz.bfloat16  # noqa: B018
