"""The array cache (Note [Array cache] in gradviz_ext/_ops.py): while gradviz's ops run on large
inputs and while backward runs, numpy allocates through a handler that keeps freed large blocks
for the next array of the same size. It must change no value, stay inside its limits, leave
numpy's handler as it was (also after errors, in threads and in nested backward), and be
switchable off. Compiled engine only (interpreted, numpy's allocator is used), so this file is
not run again interpreted."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import gradviz as gv
from gradviz_ext import _ops

try:
    from numpy._core._multiarray_umath import get_handler_name
except ImportError:  # numpy 1.x
    from numpy.core._multiarray_umath import get_handler_name

CACHE = "gradviz_array_cache"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_large_op_results_use_the_cache_and_numpy_is_left_as_it_was():
    assert _ops.array_cache_info()["enabled"]
    default = get_handler_name()
    assert default != CACHE
    x = gv.ones(128, 128)  # 16,384 elements: large
    assert get_handler_name((x * 2)._data) == CACHE
    assert get_handler_name(gv.ones(4, 4).mul(2)._data) != CACHE  # small inputs: numpy's own
    assert get_handler_name(np.empty(1 << 16)) == default == get_handler_name()


def test_backward_allocates_through_the_cache_and_restores_the_handler():
    seen = []
    w = gv.ones(256, 64, requires_grad=True)
    y = (w * 3).sum()
    w.register_hook(lambda g: seen.append((get_handler_name(), get_handler_name(g._data))))
    y.backward()
    assert seen == [(CACHE, CACHE)]  # inside backward, numpy allocates through the cache
    assert get_handler_name() != CACHE
    np.testing.assert_array_equal(w.grad.numpy(), np.full((256, 64), 3.0, np.float32))


def test_the_handler_is_restored_after_errors():
    big = gv.ones(100, 100)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        big @ gv.ones(3, 3)
    assert get_handler_name() != CACHE
    w = gv.ones(100, 100, requires_grad=True)

    def boom(grad):
        raise ValueError("hook failed")

    w.register_hook(boom)
    with pytest.raises(ValueError, match="hook failed"):
        (w * 2).sum().backward()
    assert get_handler_name() != CACHE


def test_other_threads_are_not_affected():
    names = []
    started, release = threading.Event(), threading.Event()

    def other():
        started.set()
        release.wait(10)
        names.append(get_handler_name(np.empty(1 << 16)))

    thread = threading.Thread(target=other)
    thread.start()
    started.wait(10)
    w = gv.ones(200, 200, requires_grad=True)

    def hook(grad):
        release.set()
        thread.join(10)
        return grad

    w.register_hook(hook)
    (w * 2).sum().backward()  # the other thread allocates while this backward runs
    assert names and names[0] != CACHE


def test_training_keeps_a_bounded_cache_and_clear_empties_it():
    _ops.array_cache_clear()
    model = gv.nn.Sequential(gv.nn.Linear(256, 256), gv.nn.ReLU(), gv.nn.Linear(256, 256))
    opt = gv.optim.SGD(model.parameters(), lr=0.01)
    x, y = gv.ones(64, 256), gv.zeros(64, 256)
    for _ in range(10):
        opt.zero_grad()
        gv.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    info = _ops.array_cache_info()
    assert info["hits"] > 0
    assert 0 < info["blocks"] <= 64 and info["bytes"] <= info["limit"]
    _ops.array_cache_clear()
    info = _ops.array_cache_info()
    assert info["blocks"] == 0 and info["bytes"] == 0


def test_a_limit_bounds_what_is_kept():
    before = _ops.array_cache_info()["limit"]
    try:
        _ops.array_cache_clear(limit=300_000)  # room for two 128 KB blocks, not three
        arrays = [gv.ones(256, 128) * 2 for _ in range(4)]
        del arrays
        info = _ops.array_cache_info()
        assert info["blocks"] == 2 and info["bytes"] <= 300_000
        _ops.array_cache_clear(limit=0)
        big = gv.ones(256, 128) * 2
        del big
        assert _ops.array_cache_info()["blocks"] == 0
    finally:
        _ops.array_cache_clear(limit=before)
    with pytest.raises(ValueError, match="number of bytes"):
        _ops.array_cache_clear(limit=-1)


STEP_PROGRAM = """
import hashlib, numpy as np, gradviz as gv
from gradviz_ext import _ops
gv.manual_seed(0)
model = gv.nn.Sequential(gv.nn.Linear(128, 128), gv.nn.Tanh(), gv.nn.Linear(128, 128))
opt = gv.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = gv.linspace(-1, 1, 64 * 128).reshape(64, 128)
for _ in range(5):
    opt.zero_grad()
    (model(x) ** 2).mean().backward()
    opt.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
print(_ops.array_cache_info()["enabled"], digest.hexdigest())
"""


def _run(env_value):
    env = dict(os.environ)
    env.pop("GRADVIZ_ARRAY_CACHE_MB", None)
    if env_value is not None:
        env["GRADVIZ_ARRAY_CACHE_MB"] = env_value
    result = subprocess.run([sys.executable, "-c", STEP_PROGRAM], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=300, check=True)
    return result.stdout.split(), result.stderr


def test_same_values_with_the_cache_off_and_the_switch_works():
    (on, with_cache), _ = _run(None)
    (off, without), _ = _run("0")
    assert (on, off) == ("True", "False")
    assert with_cache == without
    (on_small, _), _ = _run("1.5")
    assert on_small == "True"
    (on_bad, _), stderr = _run("lots")
    assert on_bad == "True" and "GRADVIZ_ARRAY_CACHE_MB='lots' is not a number" in stderr
