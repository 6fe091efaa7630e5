"""The gamma function family's special pieces, as op-table rows like the built-in ops:

* the regularized lower incomplete gamma function ``P(a, x)`` (torch's ``igamma``, behind
  ``special.gammainc`` and ``Gamma.cdf``), differentiable in ``x`` only, as torch's;
* reparameterized gamma draws ``x ~ Gamma(alpha, 1)`` with ``dx/dalpha`` by implicit
  differentiation of the CDF, ``dx/dalpha = -(dP(alpha, x)/dalpha) / p(x; alpha)``, the
  derivative torch's ``_standard_gamma_grad`` approximates. The draw's node is
  ``StandardGammaBackward0``; that derivative has no derivative of its own (as in torch).

Both sum ``P(a, x) = sum_n x^(a+n) e^-x / Gamma(a+n+1)``, which converges for every ``x``,
until its terms are negligible (``n`` past ``x + 10 sqrt(x)``).
"""

import numpy as np

from gradviz.ops._creation import _rng
from gradviz.ops._registry import Op, apply
from gradviz.ops._special import _digamma_array
from gradviz.ops._special import _lgamma_array as _lgamma

from . import _namespace as gradviz  # the names from the layers below (docs/architecture.md)


def _series_length(x):
    largest = float(np.max(x, initial=0.0))
    return int(largest + 10 * np.sqrt(largest) + 40)


def _igamma_array(a, x):
    """``P(a, x)`` (float64 inside; 0 at ``x == 0``)."""
    dtype = np.result_type(a, x)
    a, x = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64))
    positive = x > 0
    safe_x = np.where(positive, x, 1.0)
    term = np.exp(a * np.log(safe_x) - safe_x - _lgamma(a + 1))
    total = term.copy()
    for n in range(1, _series_length(safe_x)):
        term = term * safe_x / (a + n)
        total = total + term
    return np.where(positive, np.minimum(total, 1.0), 0.0).astype(dtype)


def _igamma_backward(ctx, g):
    if ctx.needs_input_grad[0]:
        raise NotImplementedError("the derivative for 'igamma: input' is not implemented.")
    a, x = ctx.input(0), ctx.input(1)
    density = gradviz.exp(gradviz.xlogy(a - 1, x) - x - gradviz.lgamma(a))
    return None, g * density


IGAMMA = Op("igamma", "IgammaBackward0", forward=_igamma_array, backward=_igamma_backward,
            saves=lambda needs: ((0, 1), False))


def gammainc(input, other):  # noqa: A002 - torch's argument names
    """The regularized lower incomplete gamma function ``P(input, other)``."""
    input, other = gradviz.broadcast_tensors(input, other)
    return apply(IGAMMA, input, other)


def _standard_gamma_grad_array(alpha, x):
    """``dx/dalpha`` at draws ``x`` of ``Gamma(alpha, 1)`` (float64 inside): each term of the
    series for ``P`` differentiated in ``alpha`` is ``term_n (log x - digamma(alpha+n+1))``."""
    dtype = np.result_type(alpha, x)
    a = np.asarray(alpha, dtype=np.float64)
    x = np.maximum(np.asarray(x, dtype=np.float64), np.finfo(np.float64).tiny)
    a, x = np.broadcast_arrays(a, x)
    log_x = np.log(x)
    term = np.exp(a * log_x - x - _lgamma(a + 1))  # n = 0
    psi = _digamma_array(a + 1)
    derivative = term * (log_x - psi)
    for n in range(1, _series_length(x)):
        term = term * x / (a + n)
        psi = psi + 1 / (a + n)
        derivative = derivative + term * (log_x - psi)
    density = np.exp((a - 1) * log_x - x - _lgamma(a))
    return (-derivative / density).astype(dtype)


def _no_second_derivative(ctx, grad):
    raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")


STANDARD_GAMMA_GRAD = Op("standard_gamma_grad", "StandardGammaGradBackward0",
                         forward=_standard_gamma_grad_array, backward=_no_second_derivative)


def _draw(alpha):
    draws = _rng(None).standard_gamma(alpha)
    # as torch: never exactly 0 (log_prob and the derivative need x > 0)
    return np.maximum(draws, np.finfo(alpha.dtype).tiny).astype(alpha.dtype)


STANDARD_GAMMA = Op("standard_gamma", "StandardGammaBackward0", forward=_draw,
                    backward=lambda ctx, g: (g * apply(STANDARD_GAMMA_GRAD, ctx.input(0),
                                                       ctx.output()),),
                    saves=lambda needs: ((0,), True))


def standard_gamma(concentration):
    """``Gamma(concentration, 1)`` draws (gradviz's default stream), differentiable in
    ``concentration``."""
    return apply(STANDARD_GAMMA, concentration)


def standard_gamma_grad(concentration, draws):
    """``d draws / d concentration`` (torch's ``_standard_gamma_grad``)."""
    return apply(STANDARD_GAMMA_GRAD, concentration, draws)
