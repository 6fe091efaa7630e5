"""Anomaly mode (``detect_anomaly``, ``set_detect_anomaly``) against torch: the NaN check and
its message, the forward traceback reported for a failing node, and the flags."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch_compare import assert_same_error

import gradviz
from gradviz_ext import engine as _engine


def leaf(m, values):
    return m.tensor(values, dtype=m.float64, requires_grad=True)


def bad_function(m, nan_slot):
    class Bad(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            grads = [g, g]
            grads[nan_slot] = g * float("nan")
            return tuple(grads)

    return Bad


@pytest.fixture(autouse=True)
def quiet_and_restored():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    assert not _engine.is_anomaly_enabled(), "a test left anomaly mode on"


@pytest.mark.parametrize("slot", [0, 1])
def test_nan_from_a_custom_backward(slot):
    def run(m):
        with m.autograd.detect_anomaly():
            bad_function(m, slot).apply(leaf(m, [1.0, 2.0]), leaf(m, [3.0, 4.0])).sum().backward()

    assert_same_error(run, f"Function 'BadBackward' returned nan values in its {slot}th output.")


def test_nan_from_a_built_in_backward():
    def run(m):
        x = leaf(m, [0.0, 2.0])
        with m.autograd.detect_anomaly():
            y = x * x
            (y / y).sum().backward()

    assert_same_error(run, "Function 'DivBackward0' returned nan values in its 1th output.")


def test_without_anomaly_mode_or_with_check_nan_false_nan_passes_silently():
    def run(m, check_nan):
        x, w = leaf(m, [1.0, 2.0]), leaf(m, [3.0, 4.0])
        if check_nan is None:
            bad_function(m, 0).apply(x, w).sum().backward()
        else:
            with m.autograd.detect_anomaly(check_nan=check_nan):
                bad_function(m, 0).apply(x, w).sum().backward()
        return x.grad

    for check_nan in (None, False):
        assert np.isnan(run(torch, check_nan).numpy()).all()
        assert np.isnan(run(gradviz, check_nan).numpy()).all()


def test_error_carries_the_forward_traceback_of_the_failing_node():
    Bad = bad_function(gradviz, 0)
    x, w = leaf(gradviz, [1.0, 2.0]), leaf(gradviz, [3.0, 4.0])
    with gradviz.autograd.detect_anomaly():
        y = Bad.apply(x, w)  # THE FORWARD LINE
        with pytest.warns(UserWarning) as record:
            with pytest.raises(RuntimeError) as info:
                y.sum().backward()
    messages = [str(w.message) for w in record]
    report = next(m for m in messages if m.startswith("Error detected in BadBackward."))
    assert "Traceback of forward call that caused the error:" in report
    assert "y = Bad.apply(x, w)  # THE FORWARD LINE" in report
    assert __file__ in report and "test_error_carries_the_forward_traceback" in report
    assert "gradviz/autograd" not in report and "gradviz_ext" not in report  # our frames left out
    assert report in info.value.__notes__


def test_any_exception_in_backward_is_reported_like_torch():
    def run(m):
        class Boom(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                raise ValueError("boom")

        x = leaf(m, [1.0])
        with m.autograd.detect_anomaly():
            y = Boom.apply(x)
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                try:
                    y.sum().backward()
                except ValueError as error:
                    return str(error), [str(w.message).split(" Traceback")[0] for w in record
                                        if "Error detected" in str(w.message)]

    assert run(gradviz) == run(torch) == ("boom", ["Error detected in BoomBackward."])


def test_node_created_outside_anomaly_mode_has_no_forward_information():
    x = leaf(gradviz, [0.0])
    y = x * 0.0
    z = y / y  # created before anomaly mode
    with gradviz.autograd.detect_anomaly():
        with pytest.warns(UserWarning, match="No forward pass information available"):
            with pytest.raises(RuntimeError, match="returned nan values"):
                z.sum().backward()


def test_double_backward_reports_the_node_that_induced_the_calculation():
    """A node created by a backward under create_graph also names the node whose backward
    created it, and that node's forward line (PyTorch's "Previous calculation was induced
    by"; torch 2.13 prints only the first part here)."""
    x = leaf(gradviz, [1.0, 4.0])
    with gradviz.autograd.detect_anomaly():
        y = x.sqrt().sum()  # FIRST ORDER
        (g,) = gradviz.autograd.grad(y, x, create_graph=True)  # SECOND ORDER
        with pytest.raises(RuntimeError, match="returned nan values") as info:
            g.backward(gradviz.tensor([float("nan"), 1.0], dtype=gradviz.float64))
    (report,) = info.value.__notes__
    assert "(g,) = gradviz.autograd.grad(y, x, create_graph=True)  # SECOND ORDER" in report
    assert "Previous calculation was induced by SqrtBackward0." in report
    assert "y = x.sqrt().sum()  # FIRST ORDER" in report


def test_sites_are_recorded_only_in_anomaly_mode():
    x = leaf(gradviz, [1.0])
    assert (x * 2).grad_fn._forward_site is None
    with gradviz.autograd.detect_anomaly():
        site = (x * 2).grad_fn._forward_site
    assert site.frames[-1][2] == "test_sites_are_recorded_only_in_anomaly_mode"
    assert site.frames[-1][3] == "site = (x * 2).grad_fn._forward_site"


def test_flags_context_managers_and_decorator():
    def flags(m):
        return m.is_anomaly_enabled(), m.is_anomaly_check_nan_enabled()

    for m in (gradviz, torch):
        assert flags(m) == (False, True)
        with m.autograd.detect_anomaly(check_nan=False):
            assert flags(m) == (True, False)
        assert flags(m) == (False, True)
        m.autograd.set_detect_anomaly(True)
        assert flags(m) == (True, True)
        m.autograd.set_detect_anomaly(False)
        with m.autograd.set_detect_anomaly(True, check_nan=False):
            assert flags(m) == (True, False)
        assert flags(m) == (False, True)
    assert gradviz.autograd.is_anomaly_enabled is gradviz.is_anomaly_enabled

    @gradviz.autograd.detect_anomaly()  # a gradviz extension: torch's is not callable
    def inside():
        return gradviz.autograd.is_anomaly_enabled()

    assert inside() is True and not gradviz.autograd.is_anomaly_enabled()


@pytest.mark.parametrize("module", [gradviz, torch], ids=["gradviz", "torch"])
def test_enabling_warns_about_the_cost(module):
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with module.autograd.detect_anomaly():
            pass
