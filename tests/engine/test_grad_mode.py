"""``no_grad``, ``enable_grad`` and ``set_grad_enabled`` as context managers, decorators and a
plain call, compared with torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


def leaf(m):
    return m.tensor(np.array([1.0, 2.0]), requires_grad=True)


def records(m, x):
    y = x * 2.0
    return y.requires_grad, y.grad_fn is not None


def both(run):
    gv, th = run(gradviz), run(torch)
    assert gv == th
    assert gradviz.is_grad_enabled() and torch.is_grad_enabled(), "grad mode leaked out of the test"
    return gv


def test_no_grad_context():
    def run(m):
        x = leaf(m)
        with m.no_grad():
            inside = records(m, x), m.is_grad_enabled()
        return inside, records(m, x), m.is_grad_enabled()

    assert both(run) == (((False, False), False), (True, True), True)


def test_enable_grad_inside_no_grad():
    def run(m):
        x = leaf(m)
        with m.no_grad():
            with m.enable_grad():
                inner = records(m, x)
            after = records(m, x)
        return inner, after

    both(run)


def test_no_grad_decorator():
    def run(m):
        x = leaf(m)

        @m.no_grad()
        def f(t):
            return records(m, t), m.is_grad_enabled()

        return f(x), records(m, x)

    both(run)


def test_enable_grad_decorator_inside_no_grad():
    def run(m):
        x = leaf(m)

        @m.enable_grad()
        def f(t):
            return records(m, t)

        with m.no_grad():
            return f(x), records(m, x)

    both(run)


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_context(mode):
    def run(m):
        x = leaf(m)
        with m.set_grad_enabled(mode):
            inside = records(m, x), m.is_grad_enabled()
        return inside, m.is_grad_enabled()

    both(run)


def test_set_grad_enabled_as_a_function():
    def run(m):
        x = leaf(m)
        m.set_grad_enabled(False)
        try:
            off = records(m, x), m.is_grad_enabled()
        finally:
            m.set_grad_enabled(True)
        return off, records(m, x)

    both(run)


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_decorator(mode):
    def run(m):
        x = leaf(m)

        @m.set_grad_enabled(mode)
        def f(t):
            return records(m, t)

        enabled_after_decorating = m.is_grad_enabled()
        return enabled_after_decorating, f(x), m.is_grad_enabled()

    both(run)


def test_no_grad_restores_mode_after_an_exception():
    def run(m):
        x = leaf(m)
        try:
            with m.no_grad():
                raise ValueError("boom")
        except ValueError:
            pass
        return records(m, x), m.is_grad_enabled()

    both(run)


def test_nested_no_grad_and_set_grad_enabled():
    def run(m):
        x = leaf(m)
        out = []
        with m.no_grad():
            with m.set_grad_enabled(True):
                out.append(records(m, x))
                with m.no_grad():
                    out.append(records(m, x))
                out.append(records(m, x))
            out.append(records(m, x))
        out.append(records(m, x))
        return out

    both(run)


def test_autograd_namespace_has_the_same_modes():
    def run(m):
        x = leaf(m)
        with m.autograd.no_grad():
            a = records(m, x)
        with m.autograd.set_grad_enabled(False):
            b = records(m, x)
        return a, b, m.autograd.grad_mode.no_grad is m.no_grad

    both(run)


def test_backward_of_graph_built_before_no_grad():
    def run(m):
        x = leaf(m)
        y = (x * x).sum()
        with m.no_grad():
            y.backward()
        return x.grad.tolist()

    both(run)


def test_backward_under_no_grad_with_create_graph_still_records():
    def run(m):
        x = leaf(m)
        y = (x ** 3).sum()
        with m.no_grad():
            (g,) = m.autograd.grad(y, x, create_graph=True)
        return g.requires_grad

    both(run)


def test_grad_mode_is_off_inside_backward_without_create_graph():
    def run(m):
        seen = []
        x = leaf(m)
        y = x * x
        y.register_hook(lambda g: seen.append(m.is_grad_enabled()))
        y.sum().backward()
        return seen

    both(run)


def test_grad_mode_is_on_inside_backward_with_create_graph():
    def run(m):
        seen = []
        x = leaf(m)
        y = x * x
        y.register_hook(lambda g: seen.append((m.is_grad_enabled(), g.requires_grad)))
        y.sum().backward(create_graph=True)
        x.grad = None
        return seen

    both(run)


def test_grad_mode_is_per_thread_like_torch():
    # A new thread starts with grad mode on whatever the starting thread's mode is, and
    # switching it there leaves the starting thread's mode alone (torch: thread-local).
    import threading

    def run(m):
        seen = {}

        def worker():
            x = leaf(m)
            seen["start"] = m.is_grad_enabled(), records(m, x)
            with m.no_grad():
                seen["inner"] = m.is_grad_enabled(), records(m, x)
                started.set()
                resume.wait(10)
            seen["after"] = m.is_grad_enabled()

        started, resume = threading.Event(), threading.Event()
        with m.no_grad():
            thread = threading.Thread(target=worker)
            thread.start()
            started.wait(10)
            # the worker is inside its own no_grad; ours is independent of it
            seen["main_in_no_grad"] = m.is_grad_enabled()
        seen["main_after"] = m.is_grad_enabled(), records(m, leaf(m))
        resume.set()
        thread.join(10)
        return seen

    assert both(run) == {
        "start": (True, (True, True)),
        "inner": (False, (False, False)),
        "after": True,
        "main_in_no_grad": False,
        "main_after": (True, (True, True)),
    }


def test_a_thread_that_restores_grad_mode_leaves_no_state_behind():
    import threading

    from gradviz_ext import engine

    def worker():
        with gradviz.no_grad():
            with gradviz.enable_grad():
                assert gradviz.is_grad_enabled()
            assert not gradviz.is_grad_enabled()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert engine.threads_with_grad_disabled() == []
