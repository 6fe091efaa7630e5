"""The gamma function family's special pieces, as op-table rows like the built-in ops:

* ``gammainc``, the regularized lower incomplete gamma function ``P(a, x)`` behind
  ``Gamma.cdf``: torch's ``igamma`` of ``gradviz/ops/_special_functions.py``;
* reparameterized gamma draws ``x ~ Gamma(alpha, 1)`` with ``dx/dalpha`` by implicit
  differentiation of the CDF, ``dx/dalpha = -(dP(alpha, x)/dalpha) / p(x; alpha)``, the
  derivative torch's ``_standard_gamma_grad`` approximates. The draw's node is
  ``StandardGammaBackward0``; that derivative has no derivative of its own (as in torch).

That derivative differentiates the series ``P(a, x) = sum_n x^(a+n) e^-x / Gamma(a+n+1)``
term by term (it converges for every ``x``), summed until the terms are negligible (``n`` past
``x + 10 sqrt(x)``): scipy has ``P`` but not its derivative in ``a``.
"""

import numpy as np

from gradviz.ops._creation import _rng
from gradviz.ops._registry import Op, apply
from gradviz.ops._special import _digamma_array
from gradviz.ops._special import _lgamma_array as _lgamma
from gradviz.ops._special_functions import igamma


def _series_length(x):
    largest = float(np.max(x, initial=0.0))
    return int(largest + 10 * np.sqrt(largest) + 40)


def gammainc(input, other):  # noqa: A002 - torch's argument names
    """The regularized lower incomplete gamma function ``P(input, other)`` (``torch.igamma``,
    computed by scipy: ``gradviz/ops/_special_functions.py``)."""
    return igamma(input, other)


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
