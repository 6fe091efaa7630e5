"""gradcheck's and gradgradcheck's options against torch 2.13: check_batched_grad and
check_batched_forward_grad (vmap over a batch of cotangents / tangents), check_forward_ad,
check_fwd_over_rev / check_rev_over_rev, nondet_tol (the reentrancy check), atol/rtol,
fast_mode and masked, and torch's argument errors. Each case runs in both libraries: the
same answer, or the same exception type and key phrase."""

from __future__ import annotations

import warnings

import pytest
import torch

import gradviz


def functions(lib):
    """Teaching-style functions to check, built with ``lib``."""

    class Sine(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a.sin()

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * a.cos()

    class WrongSine(Sine):  # the derivative of sin is not sin
        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * a.sin()

    class NoisyBackward(lib.autograd.Function):  # right up to noise, and random
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2 + lib.rand_like(g) * 1e-7

    class SineWithJvp(Sine):
        @staticmethod
        def forward(a):
            return a.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def jvp(ctx, t):
            a, = ctx.saved_tensors
            return t * a.cos()

    return {
        "polynomial": lambda t: (t * t).sin(),
        "matmul": lambda w, t: w @ t,
        "two_outputs": lambda t: (t.sin(), t.exp().sum()),
        "tanh_layer": lambda w, t: (w @ t).tanh(),
        "Sine": Sine.apply,
        "SineWithJvp": SineWithJvp.apply,
        "WrongSine": WrongSine.apply,
        "NoisyBackward": NoisyBackward.apply,
    }


def inputs(lib, name):
    x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], dtype=lib.float64, requires_grad=True)
    return (w, x) if name in ("matmul", "tanh_layer") else (x,)


def outcome(lib, check, name, kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(lib.autograd, check)(functions(lib)[name], inputs(lib, name), **kwargs)
    except Exception as error:  # noqa: BLE001 - compared with torch's below
        return error


def agree(check, name, phrase=None, **kwargs):
    """The same result, or the same exception type holding ``phrase`` (default: torch's first
    line) in both libraries."""
    got, want = outcome(gradviz, check, name, kwargs), outcome(torch, check, name, kwargs)
    if not isinstance(want, Exception):
        assert got == want, f"gradviz {got!r}, torch {want!r}"
        return
    assert isinstance(got, Exception), f"gradviz returned {got!r}, torch raised {want!r}"
    assert type(got).__name__ == type(want).__name__, (got, want)
    phrase = phrase or str(want).split("\n")[0]
    assert phrase in str(want), (phrase, str(want))
    assert phrase in str(got), (phrase, str(got))


RIGHT = ["polynomial", "matmul", "two_outputs", "tanh_layer", "Sine"]


@pytest.mark.parametrize("name", RIGHT)
def test_batched_grad_passes_for_right_gradients(name):
    agree("gradcheck", name, check_batched_grad=True)


@pytest.mark.parametrize("name", ["polynomial", "tanh_layer", "Sine"])
def test_gradgradcheck_batched_grad(name):
    agree("gradgradcheck", name, check_batched_grad=True)


@pytest.mark.parametrize("raise_exception", [True, False])
def test_batched_grad_on_a_wrong_backward_reports_the_jacobian(raise_exception):
    agree("gradcheck", "WrongSine", check_batched_grad=True, raise_exception=raise_exception)


def test_random_backward_fails_under_vmap():
    # torch's vmap refuses random operations; so does gradviz's in its default randomness
    agree("gradcheck", "NoisyBackward", "While computing batched gradients, got: vmap:",
          nondet_tol=1e-5, check_batched_grad=True)
    agree("gradcheck", "NoisyBackward", nondet_tol=1e-5, check_batched_grad=True,
          raise_exception=False)


def test_nondeterministic_backward_is_not_reentrant():
    agree("gradcheck", "NoisyBackward", "Backward is not reentrant")
    # within nondet_tol the next check speaks: the noise survives a zero grad_output
    agree("gradcheck", "NoisyBackward", nondet_tol=1e-5)


@pytest.mark.parametrize("name", ["polynomial", "matmul", "two_outputs", "SineWithJvp"])
def test_forward_ad_and_batched_forward_grad(name):
    agree("gradcheck", name, check_forward_ad=True)
    agree("gradcheck", name, check_forward_ad=True, check_batched_forward_grad=True)
    agree("gradcheck", name, check_forward_ad=True, check_backward_ad=False,
          check_batched_forward_grad=True)


def test_forward_ad_needs_a_jvp():
    agree("gradcheck", "Sine", check_forward_ad=True)
    agree("gradcheck", "Sine", check_forward_ad=True, check_backward_ad=False)


@pytest.mark.parametrize("name", ["polynomial", "tanh_layer"])
def test_gradgradcheck_forward_over_reverse(name):
    agree("gradgradcheck", name, check_fwd_over_rev=True)
    agree("gradgradcheck", name, check_fwd_over_rev=True, check_rev_over_rev=False,
          check_undefined_grad=False)


@pytest.mark.parametrize("check,kwargs", [
    ("gradcheck", dict(check_forward_ad=False, check_backward_ad=False)),
    ("gradcheck", dict(check_batched_grad=True, check_backward_ad=False,
                       check_forward_ad=True)),
    ("gradcheck", dict(check_batched_forward_grad=True)),
    ("gradgradcheck", dict(check_fwd_over_rev=False, check_rev_over_rev=False)),
    ("gradgradcheck", dict(check_fwd_over_rev=True, check_rev_over_rev=False)),
    ("gradgradcheck", dict(check_fwd_over_rev=True, check_rev_over_rev=False,
                           check_undefined_grad=False, check_batched_grad=True)),
])
def test_option_errors(check, kwargs):
    agree(check, "polynomial", **kwargs)


@pytest.mark.parametrize("kwargs", [dict(atol=10.0), dict(rtol=10.0), dict(atol=0.1),
                                    dict(fast_mode=True), dict(masked=True),
                                    dict(fast_mode=True, raise_exception=False)])
@pytest.mark.parametrize("name", ["Sine", "WrongSine"])
def test_tolerances_fast_mode_and_masked(name, kwargs):
    # |analytical - numerical| <= atol + rtol * |numerical|, entrywise, in both libraries
    agree("gradcheck", name, "Jacobian mismatch for output 0 with respect to input 0",
          **kwargs)
