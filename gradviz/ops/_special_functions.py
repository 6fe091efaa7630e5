"""The special functions of ``torch.special`` beyond the error and gamma functions: the modified
Bessel functions ``i0``/``i0e``/``i1``/``i1e``, ``erfcx``, ``log_ndtr``, ``ndtri``, the
regularised incomplete gamma functions (``igamma``/``igammac``, ``special.gammainc``/
``gammaincc``), the multivariate log-gamma ``mvlgamma`` (``special.multigammaln``), the Hurwitz
zeta function, and the functions PyTorch does not differentiate: Bessel functions of the first
and second kind, the other modified Bessel functions, Airy's ``Ai``, the spherical ``j0`` and
the orthogonal polynomials (Chebyshev of four kinds and their shifted forms, Hermite, Laguerre,
Legendre).

Note [Special functions from scipy]
-----------------------------------
Every value is one ``scipy.special`` ufunc over the array (a C loop), computed in float64 and
returned in the input's dtype, as PyTorch's float kernels compute inside. The derivatives are
PyTorch's formulas (``tools/autograd/derivatives.yaml``) written with gradviz ops, so they
differentiate again; where PyTorch has no derivative (``igamma``'s first argument, ``zeta``'s
first) backward raises PyTorch's ``NotImplementedError``, and the functions PyTorch leaves
undifferentiated give results that do not require grad.

Note [Orthogonal polynomials]
-----------------------------
PyTorch truncates the degree ``n`` to an integer, gives 0 for ``n < 0`` and 1 for ``n == 0``
(whatever ``x``, NaN included); scipy's ``eval_*``
ufuncs with an integer degree are the same polynomials (a C recurrence). Chebyshev polynomials
of the third and fourth kind are not in scipy: ``V_n = U_n - U_{n-1}`` and
``W_n = U_n + U_{n-1}`` (with ``U_{-1} = 0``); their shifted forms are taken at ``2x - 1``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.special as _scipy_special

from gradviz_ext import engine as _engine

from .._tensor import Tensor, _wrap
from ._pointwise import _broadcasting, _check_operand, exp, log, where
from ._pointwise import abs as _abs
from ._registry import Op, apply, declare, exports, promote_float, saves_inputs
from ._saved import RESULT, SELF, Attr, Input
from ._special import digamma, lgamma, sgn


def _in_float64(function):
    """``function`` over float64 copies of its array arguments, returned in the first array's
    dtype (Note [Special functions from scipy])."""
    def forward(*arrays):
        dtype = next(a.dtype for a in arrays if isinstance(a, np.ndarray))
        with np.errstate(all="ignore"):
            out = function(*(np.asarray(a, dtype=np.float64) for a in arrays))
        return np.asarray(out).astype(dtype, copy=False)

    forward.__name__ = getattr(function, "__name__", "forward")
    return forward


def _unary_op(name, node, function, backward, saves_output=False):
    saves = (lambda needs: ((0,), True)) if saves_output else saves_inputs(0)
    saved = {"self": SELF, "result": RESULT} if saves_output else {"self": SELF}
    return Op(name, node, forward=_in_float64(function), backward=backward, saves=saves,
              dtype=promote_float, saved=saved)


def _tiny_safe(x):
    """PyTorch's ``i1_backward``/``i1e_backward`` guard: ``x`` where ``|x| > eps``, else eps (the
    derivative at 0 is the limit 1/2, taken separately)."""
    eps = float(np.finfo(x._data.dtype).eps)
    not_tiny = _abs(x) > eps
    return not_tiny, where(not_tiny, x, eps)


def _i1_backward(ctx, g):
    not_tiny, safe = _tiny_safe(ctx.input(0))
    derivative = i0(safe) - ctx.output() / safe
    return (g * where(not_tiny, derivative, 0.5),)


def _i1e_backward(ctx, g):
    not_tiny, safe = _tiny_safe(ctx.input(0))
    derivative = special_i0e(safe) - ctx.output() * (sgn(safe) + 1 / safe)
    return (g * where(not_tiny, derivative, 0.5),)


I0 = _unary_op("i0", "I0Backward0", _scipy_special.i0,
               lambda ctx, g: (g * special_i1(ctx.input(0)),))
SPECIAL_I0E = _unary_op("special_i0e", "SpecialI0EBackward0", _scipy_special.i0e,
                        lambda ctx, g: (g * (special_i1e(ctx.input(0)) - sgn(ctx.input(0)) * ctx.output()),),
                        saves_output=True)
SPECIAL_I1 = _unary_op("special_i1", "SpecialI1Backward0", _scipy_special.i1, _i1_backward,
                       saves_output=True)
SPECIAL_I1E = _unary_op("special_i1e", "SpecialI1EBackward0", _scipy_special.i1e, _i1e_backward,
                        saves_output=True)
SPECIAL_ERFCX = _unary_op("special_erfcx", "SpecialErfcxBackward0", _scipy_special.erfcx,
                          lambda ctx, g: ((2.0 * ctx.input(0) * ctx.output() - 2.0 / math.sqrt(math.pi)) * g,),
                          saves_output=True)
SPECIAL_LOG_NDTR = _unary_op(
    "special_log_ndtr", "SpecialLogNdtrBackward0", _scipy_special.log_ndtr,
    lambda ctx, g: (g / math.sqrt(2 * math.pi) * exp(-(ctx.output() + ctx.input(0) ** 2 / 2)),),
    saves_output=True)
SPECIAL_NDTRI = Op("special_ndtri", "SpecialNdtriBackward0", forward=_in_float64(_scipy_special.ndtri),
                   backward=lambda ctx, g: (g * math.sqrt(2 * math.pi) * exp(ctx.output() ** 2 / 2),),
                   saves=lambda needs: ((), True), dtype=promote_float,
                   saved={"result": RESULT})


@declare(method=True, inplace=True)
def i0(input):
    """The modified Bessel function of the first kind of order 0. Mirrors ``torch.i0``."""
    return apply(I0, input)


def special_i0e(input):
    """``i0(x) * exp(-|x|)``, without overflow. Mirrors ``torch.special.i0e``."""
    return apply(SPECIAL_I0E, input)


def special_i1(input):
    """The modified Bessel function of the first kind of order 1. Mirrors ``torch.special.i1``."""
    return apply(SPECIAL_I1, input)


def special_i1e(input):
    """``i1(x) * exp(-|x|)``, without overflow. Mirrors ``torch.special.i1e``."""
    return apply(SPECIAL_I1E, input)


def special_erfcx(input):
    """The scaled complementary error function ``exp(x**2) * erfc(x)``. Mirrors
    ``torch.special.erfcx``."""
    return apply(SPECIAL_ERFCX, input)


def special_log_ndtr(input):
    """The log of the standard normal CDF, accurate far in the lower tail. Mirrors
    ``torch.special.log_ndtr``."""
    return apply(SPECIAL_LOG_NDTR, input)


def special_ndtri(input):
    """The standard normal quantile, the inverse of ``ndtr``. Mirrors ``torch.special.ndtri``."""
    return apply(SPECIAL_NDTRI, input)


# ---- incomplete gamma, multivariate log-gamma, Hurwitz zeta --------------------------------------

def _no_derivative(what):
    def backward(ctx, g):
        raise NotImplementedError(f"the derivative for '{what}' is not implemented.")

    return backward


def _computes_gradient_of(ctx, index):
    """Whether this backward pass wants input ``index``'s gradient, PyTorch's
    ``task_should_compute_output``: ``autograd.grad(y, x)`` does not ask for ``a``'s, so the
    missing derivative in ``a`` raises only when a pass needs it."""
    if not ctx.needs_input_grad[index]:
        return False
    task = _engine.current_graph_task()
    next_node = ctx.next_functions[index][0]
    if task is None or next_node is None:
        return next_node is not None
    # the engine's rule for built-in formulas (``_drop_unneeded`` in gradviz_ext/_task.py)
    return task._exec_info is None or next_node in task._exec_info


def _igamma_backward(sign, name):
    def backward(ctx, g):
        if _computes_gradient_of(ctx, 0):
            _no_derivative(f"{name}: input")(ctx, g)
        a, x = ctx.input(0), ctx.input(1)
        return (None, sign * g * exp((a - 1) * log(x) - x - lgamma(a)))

    return backward


# igamma, igammac and zeta differentiate only in ``other``, for which both are saved
_BOTH_FOR_OTHER = {"self": Input(0, needed_by=1), "other": Input(1, needed_by=1)}
IGAMMA = Op("igamma", "IgammaBackward0", forward=_broadcasting(_in_float64(_scipy_special.gammainc)),
            backward=_igamma_backward(1.0, "igamma"), saves=saves_inputs(0, 1), dtype=promote_float,
            saved=_BOTH_FOR_OTHER)
IGAMMAC = Op("igammac", "IgammacBackward0", forward=_broadcasting(_in_float64(_scipy_special.gammaincc)),
             backward=_igamma_backward(-1.0, "igammac"), saves=saves_inputs(0, 1), dtype=promote_float,
             saved=_BOTH_FOR_OTHER)


def _tensor_pair(name, input, other):
    """Both operands of a binary special function as tensors (a number takes the other's dtype)."""
    input, other = _check_operand(input, name), _check_operand(other, name)
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(other, Tensor):
        other = _wrap(np.asarray(other, dtype=input._data.dtype))
    return input, other


@declare(method=True, inplace=True)
def igamma(input, other):
    """The regularised lower incomplete gamma function ``P(input, other)``; differentiable in
    ``other`` only, as in PyTorch. Mirrors ``torch.igamma`` (``torch.special.gammainc``)."""
    return apply(IGAMMA, *_tensor_pair("igamma", input, other))


@declare(method=True, inplace=True)
def igammac(input, other):
    """The regularised upper incomplete gamma function ``Q(input, other) = 1 - P``.
    Mirrors ``torch.igammac`` (``torch.special.gammaincc``)."""
    return apply(IGAMMAC, *_tensor_pair("igammac", input, other))


def _mvlgamma_forward(a, p):
    with np.errstate(all="ignore"):
        x = a.astype(np.float64)
        out = sum(_scipy_special.gammaln(x - j / 2) for j in range(p)) + p * (p - 1) / 4 * math.log(math.pi)
    return np.asarray(out).astype(a.dtype, copy=False)


def _mvlgamma_backward(ctx, g):
    x = ctx.input(0)
    return (g * sum((digamma(x - j / 2) for j in range(1, ctx.p)), digamma(x)),)


MVLGAMMA = Op("mvlgamma", "MvlgammaBackward0", forward=_mvlgamma_forward, backward=_mvlgamma_backward,
              saves=saves_inputs(0), dtype=promote_float,
              saved={"p": Attr("p"), "self": SELF})


@declare(method=True, inplace=True)
def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension ``p``:
    ``sum_j lgamma(x - j/2) + p (p-1)/4 log(pi)``. Mirrors ``torch.mvlgamma``
    (``torch.special.multigammaln``)."""
    if not isinstance(p, numbers.Integral) or isinstance(p, bool) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return apply(MVLGAMMA, input, p=int(p))


def _zeta_backward_other(ctx, g, x):
    return -g * x * special_zeta(x + 1.0, ctx.input(1))


ZETA = Op("special_zeta", "SpecialZetaBackward0", forward=_broadcasting(_in_float64(_scipy_special.zeta)),
          backward=lambda ctx, g: (_no_derivative("zeta")(ctx, g) if _computes_gradient_of(ctx, 0) else None,
                                   _zeta_backward_other(ctx, g, ctx.input(0)) if ctx.needs_input_grad[1] else None),
          saves=saves_inputs(0, 1), dtype=promote_float,
          saved=_BOTH_FOR_OTHER)
# the number is the node's ``self``, as PyTorch saves it: a float
ZETA_NUMBER_SELF = Op("special_zeta_number_self", "SpecialZetaBackward1",
                      forward=lambda q, x: _in_float64(lambda q, x: _scipy_special.zeta(x, q))(q, np.float64(x)),
                      backward=lambda ctx, g: (-g * ctx.x * special_zeta(ctx.x + 1.0, ctx.input(0)),),
                      saves=saves_inputs(0), dtype=promote_float,
                      saved={"self": Attr("x", float), "other": Input(0)})
ZETA_NUMBER_OTHER = Op("special_zeta_number_other", "SpecialZetaBackward2",
                       forward=lambda x, q: _in_float64(_scipy_special.zeta)(x, np.float64(q)),
                       backward=_no_derivative("zeta"), dtype=promote_float)


def special_zeta(input, other):
    """The Hurwitz zeta function ``sum_k (k + other) ** -input``; differentiable in ``other``
    only, as in PyTorch. Mirrors ``torch.special.zeta``."""
    input, other = _check_operand(input, "special_zeta"), _check_operand(other, "special_zeta")
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        return apply(ZETA, input, other)
    if isinstance(other, Tensor):
        return apply(ZETA_NUMBER_SELF, other, x=input)
    if isinstance(input, Tensor):
        return apply(ZETA_NUMBER_OTHER, input, q=other)
    raise TypeError("special_zeta(): at least one of 'input' and 'other' must be a Tensor")


# ---- functions PyTorch does not differentiate -----------------------------------------------------

def _not_differentiable(name, function):
    op = Op(name, name, forward=_in_float64(function), backward=None, dtype=promote_float)

    def compute(input):
        return apply(op, input)

    compute.__name__ = name
    compute.__doc__ = (f"``torch.special.{name}`` (not differentiable: the result does not require "
                       "grad, as in PyTorch).")
    return compute


def _chebyshev_u_pair(n, x):
    """``U_n(x)`` and ``U_{n-1}(x)`` (``U_{-1} = 0``) for integer ``n >= 0``."""
    previous = np.where(n >= 1, _scipy_special.eval_chebyu(np.maximum(n - 1, 0), x), 0.0)
    return _scipy_special.eval_chebyu(n, x), previous


def _third_kind(n, x):
    u, previous = _chebyshev_u_pair(n, x)
    return u - previous


def _fourth_kind(n, x):
    u, previous = _chebyshev_u_pair(n, x)
    return u + previous


_POLYNOMIALS = {
    "chebyshev_polynomial_t": _scipy_special.eval_chebyt,
    "chebyshev_polynomial_u": _scipy_special.eval_chebyu,
    "chebyshev_polynomial_v": _third_kind,
    "chebyshev_polynomial_w": _fourth_kind,
    "shifted_chebyshev_polynomial_t": _scipy_special.eval_sh_chebyt,
    "shifted_chebyshev_polynomial_u": _scipy_special.eval_sh_chebyu,
    "shifted_chebyshev_polynomial_v": lambda n, x: _third_kind(n, 2 * x - 1),
    "shifted_chebyshev_polynomial_w": lambda n, x: _fourth_kind(n, 2 * x - 1),
    "hermite_polynomial_h": _scipy_special.eval_hermite,
    "hermite_polynomial_he": _scipy_special.eval_hermitenorm,
    "laguerre_polynomial_l": _scipy_special.eval_laguerre,
    "legendre_polynomial_p": _scipy_special.eval_legendre,
}


def _polynomial_forward(evaluate):
    def forward(x, n):
        with np.errstate(all="ignore"):
            degree = np.trunc(np.asarray(n, dtype=np.float64))
            degree = np.where(np.isfinite(degree), degree, -1).astype(np.int64)
            x64, degree = np.broadcast_arrays(np.asarray(x, dtype=np.float64), degree)
            out = np.where(degree > 0, evaluate(np.maximum(degree, 0), x64), np.where(degree == 0, 1.0, 0.0))
        return out.astype(x.dtype if isinstance(x, np.ndarray) else np.result_type(n), copy=False)

    return forward


def _polynomial(name, evaluate):
    op = Op(name, name, forward=_broadcasting(_polynomial_forward(evaluate)), backward=None,
            dtype=promote_float)

    def compute(input, n):
        input, n = _check_operand(input, name), _check_operand(n, name)
        if not isinstance(input, Tensor) and not isinstance(n, Tensor):
            raise TypeError(f"{name}(): at least one of 'input' and 'n' must be a Tensor")
        if not isinstance(input, Tensor):
            input = _wrap(np.asarray(input, dtype=np.result_type(float, n._data.dtype)
                                     if n.dtype.is_floating_point else np.float32))
        if not isinstance(n, Tensor):
            n = _wrap(np.asarray(n, dtype=input._data.dtype))
        return apply(op, input, n)

    compute.__name__ = name
    compute.__doc__ = (f"``torch.special.{name}(input, n)`` (the degree ``n`` truncated to an integer, "
                       "0 for ``n < 0``; not differentiable, as in PyTorch: Note [Orthogonal polynomials]).")
    return compute


def _airy_ai(x):
    return _scipy_special.airy(x)[0]


def _spherical_j0(x):
    return _scipy_special.spherical_jn(0, x)


# The names ``gradviz.special`` adds to the error and gamma functions of ``_special.py``.
SPECIAL_FUNCTIONS = {
    "i0": i0, "i0e": special_i0e, "i1": special_i1, "i1e": special_i1e, "erfcx": special_erfcx,
    "log_ndtr": special_log_ndtr, "ndtri": special_ndtri, "gammainc": igamma, "gammaincc": igammac,
    "multigammaln": mvlgamma, "zeta": special_zeta,
    **{name: _not_differentiable(name, function) for name, function in {
        "airy_ai": _airy_ai, "bessel_j0": _scipy_special.j0, "bessel_j1": _scipy_special.j1,
        "bessel_y0": _scipy_special.y0, "bessel_y1": _scipy_special.y1,
        "modified_bessel_i0": _scipy_special.i0, "modified_bessel_i1": _scipy_special.i1,
        "modified_bessel_k0": _scipy_special.k0, "modified_bessel_k1": _scipy_special.k1,
        "scaled_modified_bessel_k0": _scipy_special.k0e, "scaled_modified_bessel_k1": _scipy_special.k1e,
        "spherical_bessel_j0": _spherical_j0}.items()},
    **{name: _polynomial(name, evaluate) for name, evaluate in _POLYNOMIALS.items()},
}


__all__ = exports(globals())
