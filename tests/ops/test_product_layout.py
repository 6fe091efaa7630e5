"""The 2-D product's operand order (Note [Product layout] in gradviz/ops/_layout.py).

``mm``/``addmm`` (every Linear layer) may compute ``a @ b`` as ``(b.T @ a.T).T`` when the BLAS
runs that faster, decided per shape by timing real products. The choice must never show: same
bits as ``a @ b`` in both orders, the same values and gradients as PyTorch, a decision that
follows the measured times (checked with a scripted clock), a bounded table, and a switch to
turn it off.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import gradviz as gv
from gradviz.ops import _layout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(7)

# M * K * N at or above _layout.SMALL, so these products are measured
BIG = [(64, 128, 128), (16, 256, 256), (96, 160, 72)]


@pytest.fixture(autouse=True)
def fresh_decisions():
    _layout._reset()
    yield
    _layout._reset()


def _operands(dtype, m, k, n, a_order, b_order):
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    if a_order == "F":
        a = np.asfortranarray(a)
    elif a_order == "strided":
        a = np.repeat(a, 2, axis=1)[:, ::2]
    if b_order == "F":
        b = np.ascontiguousarray(b.T).T  # a transposed weight: w.t()
    elif b_order == "strided":
        b = np.repeat(b, 2, axis=0)[::2]
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", BIG)
@pytest.mark.parametrize("orders", [("C", "F"), ("C", "C"), ("F", "C"), ("strided", "F")])
@pytest.mark.parametrize("bias_shape", [None, "row", "column", "full", "scalar"])
def test_both_orders_give_the_bits_of_numpys_product(dtype, shape, orders, bias_shape):
    m, k, n = shape
    a, b = _operands(dtype, m, k, n, *orders)
    bias = {None: None, "row": (n,), "column": (m, 1), "full": (m, n), "scalar": ()}[bias_shape]
    if bias is not None:
        bias = RNG.standard_normal(bias).astype(dtype)
    expected = np.matmul(a, b) if bias is None else np.add(np.matmul(a, b), bias)
    for layout in (_layout._written, _layout._swapped):
        got = layout(a, b, bias)
        assert got.flags.c_contiguous and got.dtype == dtype and got.shape == (m, n)
        np.testing.assert_array_equal(got, expected)


class ScriptedClock:
    """Stands in for perf_counter: each product takes ``written`` or ``swapped`` seconds."""

    def __init__(self, written, swapped):
        self.costs = {"written": written, "swapped": swapped}
        self.now = 0.0
        self.running = None

    def __call__(self):
        if self.running is not None:
            self.now += self.costs[self.running]
        return self.now


@pytest.fixture
def scripted(monkeypatch):
    def install(written, swapped):
        clock = ScriptedClock(written, swapped)
        for name in ("written", "swapped"):
            original = getattr(_layout, f"_{name}")

            def timed(a, b, bias, original=original, name=name):
                clock.running = name
                try:
                    return original(a, b, bias)
                finally:
                    clock()  # the product's cost is read by the caller's next clock call
                    clock.running = None

            monkeypatch.setattr(_layout, f"_{name}", timed)
        monkeypatch.setattr(_layout, "_clock", lambda: clock.now)
        return clock
    return install


def _run(times, m=64, k=128, n=128):
    a, b = _operands(np.float32, m, k, n, "C", "F")
    for _ in range(times):
        np.testing.assert_array_equal(_layout.product(a, b), np.matmul(a, b))
    return _layout.product_layouts()["shapes"]


@pytest.mark.parametrize("written, swapped, expected", [
    (1.0, 0.5, "swapped"),   # clearly faster: kept
    (1.0, 0.8, "swapped"),
    (1.0, 0.92, "written"),  # within the 10% margin: the written order stays
    (0.5, 1.0, "written"),
])
def test_the_faster_order_is_kept_after_the_trials(scripted, written, swapped, expected):
    scripted(written, swapped)
    calls = 1 + 2 * _layout.TRIALS
    assert _run(calls - 1) == {}  # still measuring
    assert _run(1) == {("float32", 64, 128, 128, "C", "F"): expected}
    assert _run(5) == {("float32", 64, 128, 128, "C", "F"): expected}  # and it stays


def test_different_bits_settle_a_shape_on_the_written_order(monkeypatch):
    monkeypatch.setattr(_layout, "_swapped", lambda a, b, bias: np.matmul(a, b) + 1)
    assert _run(1) == {("float32", 64, 128, 128, "C", "F"): "written"}
    assert _run(20) == {("float32", 64, 128, 128, "C", "F"): "written"}


def test_small_and_huge_products_and_vectors_are_never_measured(monkeypatch):
    monkeypatch.setattr(_layout, "LARGE", 64 * 128 * 128 - 1)
    _run(10)  # "huge" for the test's sake
    _run(10, m=8, k=8, n=8)
    _run(10, m=1, k=2048, n=2048)
    _run(10, m=2048, k=2048, n=1)
    assert _layout.product_layouts()["shapes"] == {}


def test_integer_products_run_as_written():
    a = RNG.integers(-5, 5, (128, 128))
    np.testing.assert_array_equal(_layout.product(a, a.T), a @ a.T)
    assert _layout.product_layouts()["shapes"] == {}


def test_the_table_of_shapes_is_bounded(monkeypatch):
    monkeypatch.setattr(_layout, "MAX_SHAPES", 2)
    for n in (128, 136, 144, 152):
        _run(1 + 2 * _layout.TRIALS, n=n)
    assert len(_layout.product_layouts()["shapes"]) == 2
    a, b = _operands(np.float32, 64, 128, 160, "C", "F")
    np.testing.assert_array_equal(_layout.product(a, b), a @ b)  # past the bound: as written


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["written", "swapped"])
def test_a_linear_layer_matches_torch_in_either_order(dtype, layout, monkeypatch):
    """Forward and every gradient of ``x @ W.t() + b`` and ``x @ W.t()`` against torch, with the
    decision forced, so both code paths are exercised whatever this machine's BLAS prefers."""
    used = {"written": 0, "swapped": 0}
    for name in used:
        def counted(a, b, bias, original=getattr(_layout, f"_{name}"), name=name):  # noqa: B008 - bound per name
            used[name] += 1
            return original(a, b, bias)
        monkeypatch.setattr(_layout, f"_{name}", counted)
    m, k, n = 64, 256, 192
    x0 = RNG.standard_normal((m, k)).astype(dtype)
    w0 = RNG.standard_normal((n, k)).astype(dtype)
    b0 = RNG.standard_normal(n).astype(dtype)
    g0 = RNG.standard_normal((m, n)).astype(dtype)
    for order in (("C", "F"), ("C", "C"), ("F", "C")):  # forward, d input, d weight
        for shape in ((m, k, n), (m, n, k), (n, m, k)):
            _layout._decided[(np.dtype(dtype).char, *shape, *order)] = layout
    results = {}
    for lib in (gv, torch):
        x, w, b = (lib.tensor(v, requires_grad=True) for v in (x0, w0, b0))
        with_bias = lib.nn.functional.linear(x, w, b)
        without = x @ w.t()
        (with_bias * lib.tensor(g0)).sum().backward()
        (without * lib.tensor(g0)).sum().backward()
        results[lib] = [t.detach().numpy() for t in (with_bias, without, x.grad, w.grad, b.grad)]
    tolerance = dict(rtol=1e-4, atol=1e-3) if dtype == "float32" else dict(rtol=1e-10, atol=1e-9)
    for got, want in zip(results[gv], results[torch]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **tolerance)
    other = "written" if layout == "swapped" else "swapped"
    assert used[layout] >= 6 and used[other] == 0  # 2 forwards, 2 input and 2 weight gradients


def _in_subprocess(env_value):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env["GRADVIZ_PRODUCT_LAYOUT"] = env_value
    code = ("import warnings, numpy as np\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    import gradviz as gv\n"
            "from gradviz.ops import _layout\n"
            "x = gv.ones(64, 128); w = gv.ones(128, 128, requires_grad=True)\n"
            "for _ in range(12): (x @ w.t()).sum().backward()\n"
            "info = _layout.product_layouts()\n"
            "print(info['measuring'], len(info['shapes']), [str(w.message) for w in caught])\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_environment_switch_turns_measuring_off():
    assert _in_subprocess("written").startswith("False 0 ")
    measured = _in_subprocess("auto")
    assert measured.startswith("True ") and not measured.startswith("True 0 ")
    warned = _in_subprocess("fastest")
    assert warned.startswith("True ") and "GRADVIZ_PRODUCT_LAYOUT='fastest'" in warned
