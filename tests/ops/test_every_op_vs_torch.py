"""Every row of the op table is compared with PyTorch: values, first and second derivatives.

The pattern is tinygrad's ``helper_test_op``: one program, written once against the shared API,
runs on gradviz and on torch with the same inputs. :data:`SPECS` names, per op row, the inputs
(shapes and a domain the op is defined on) and the program; the test checks that the program
reaches that row, then compares in float64

* the values of every output,
* the first derivatives of a weighted sum of the outputs (``create_graph=True``), and
* the second derivatives: the derivatives of a weighted sum of those gradients.

An op row that is not differentiable (``backward=None``) has its values compared only.

``test_every_op_is_covered`` enumerates :data:`gradviz.ops.TABLE` and fails for a row neither
in :data:`SPECS` nor in :data:`EXEMPT` (each entry with its reason), so a new op cannot go
without a torch comparison. A spec that stops before the second derivative says why (PyTorch
has no derivative there, or a wrong one). Fast rules have their own enumeration in
``tests/ops/test_fast_backward.py`` (``test_programs_cover_every_fast_rule``), run here too.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import gradviz as gv
from gradviz.ops import TABLE
from gradviz.ops._registry import OpNode


@dataclass(frozen=True)
class Input:
    """One input: its shape and the domain its values are drawn from (see :func:`_draw`)."""

    shape: tuple
    domain: str = "real"


def _draw(spec, rng):
    shape, domain = spec.shape, spec.domain
    if domain == "real":
        return rng.standard_normal(shape)
    if domain == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "unit":
        return rng.uniform(-0.9, 0.9, shape)
    if domain == "above1":
        return rng.uniform(1.1, 3.0, shape)
    if domain == "probability":
        return rng.uniform(0.05, 0.95, shape)
    if domain == "apart":  # well-separated values: ties and near-ties would make max, sort, ... ambiguous
        return rng.permutation(np.prod(shape, dtype=int)).reshape(shape) * 0.37 - 1.0
    if domain == "spd":  # symmetric positive definite matrices
        a = rng.standard_normal(shape)
        return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    if domain == "bool":
        return rng.random(shape) > 0.5
    if domain.startswith("index"):  # index<N>: int64 in [0, N)
        return rng.integers(0, int(domain[5:]), shape)
    if domain.startswith("int"):  # int<N>: int64 in [1, N]
        return rng.integers(1, int(domain[3:]) + 1, shape)
    raise ValueError(f"unknown domain {domain!r}")


@dataclass(frozen=True)
class Spec:
    """``program(m, *tensors)`` with ``m`` the library (gradviz or torch) on ``inputs``; only
    floating inputs are differentiated, up to ``order`` (2, or fewer where PyTorch has no
    derivative: ``why`` says so). ``rtol``/``atol`` for the comparisons."""

    inputs: tuple
    program: object
    rtol: float = 1e-7
    atol: float = 1e-9
    order: int = 2
    why: str = ""


def S(*inputs, rtol=1e-7, atol=1e-9, order=2, why=""):
    """``S(Input(...), ...)(program)``: a :class:`Spec`; a bare shape is a real-valued input."""
    assert order == 2 or why, "a spec that stops before the second derivative says why"

    def make(program):
        return Spec(tuple(i if isinstance(i, Input) else Input(i) for i in inputs), program, rtol, atol,
                    order, why)
    return make


_NO_TORCH_DERIVATIVE = "PyTorch raises 'derivative for aten::{} is not implemented'"
# torch 2.13's third derivatives of layer_norm and batch_norm fail torch's own gradgradcheck;
# gradviz's pass it (test_norm_third_derivatives_match_finite_differences)
_TORCH_THIRD_DERIVATIVE = "torch's derivative of this row is wrong (fails its gradgradcheck)"


def _unary(name, domain="real", shape=(3, 4)):
    return S(Input(shape, domain))(lambda m, x: getattr(m, name)(x))


def _special_unary(name, domain="real", shape=(3, 4)):
    return S(Input(shape, domain))(lambda m, x: getattr(m.special, name)(x))


def _binary(name, a="real", b="real", shapes=((3, 4), (4,))):
    return S(Input(shapes[0], a), Input(shapes[1], b))(lambda m, x, y: getattr(m, name)(x, y))


def _grad_of(program):
    """The first derivative of ``program`` as a program: reaches the rows that only backward
    rules apply (``threshold_backward``, ...)."""
    def first(m, x, *rest):
        out = program(m, x, *rest)
        return m.autograd.grad((out * out).sum(), x, create_graph=True)[0]
    return first


SPECS: dict[str, Spec] = {
    # ---- arithmetic ----------------------------------------------------------------------
    "add": S((3, 4), (4,))(lambda m, x, y: m.add(x, y, alpha=2.0)),
    "sub": S((3, 4), (4,))(lambda m, x, y: m.sub(x, y, alpha=0.5)),
    "rsub": S((3, 4))(lambda m, x: 2.5 - x),
    "mul": S((3, 4), (3, 1))(lambda m, x, y: x * y),
    "div": S((3, 4), Input((4,), "positive"))(lambda m, x, y: x / y),
    "div_mode": S((3, 4), Input((4,), "positive"))(lambda m, x, y: m.div(x, y, rounding_mode=None)),
    "div_rounded": S((3, 4), Input((4,), "positive"))(lambda m, x, y: m.div(x, y, rounding_mode="floor")),
    "reciprocal": _unary("reciprocal", "positive"),
    "neg": _unary("neg"),
    "pow_scalar": S(Input((3, 4), "positive"))(lambda m, x: x ** 2.5),
    "pow": S(Input((3, 4), "positive"), (4,))(lambda m, x, y: x ** y),
    "pow_base": S((3, 4))(lambda m, x: 1.7 ** x),
    "exp": _unary("exp"),
    "log": _unary("log", "positive"),
    "sin": _unary("sin"),
    "cos": _unary("cos"),
    "tanh": _unary("tanh"),
    "sqrt": _unary("sqrt", "positive"),
    "sigmoid": _unary("sigmoid"),
    "relu": _unary("relu", "apart"),
    "threshold_backward": S(Input((3, 4), "apart"))(_grad_of(lambda m, x: m.relu(x))),
    "abs": _unary("abs", "apart"),
    "sign": _unary("sign", "apart"),
    "clamp": S(Input((3, 4), "apart"))(lambda m, x: m.clamp(x, -0.5, 0.8)),
    "clamp_tensor": S(Input((3, 4), "apart"), Input((4,), "apart"), Input((4,), "apart"))(
        lambda m, x, lo, hi: m.clamp(x, lo - 2.0, hi + 2.0)),
    "clamp_min_tensor": S(Input((3, 4), "apart"), Input((4,), "apart"))(lambda m, x, lo: m.clamp_min(x, lo)),
    "clamp_max_tensor": S(Input((3, 4), "apart"), Input((4,), "apart"))(lambda m, x, hi: m.clamp_max(x, hi)),
    "lt": _binary("lt"), "le": _binary("le"), "gt": _binary("gt"), "ge": _binary("ge"),
    "eq": S(Input((3, 4), "int3"), Input((4,), "int3"))(lambda m, x, y: m.eq(x, y)),
    "ne": S(Input((3, 4), "int3"), Input((4,), "int3"))(lambda m, x, y: m.ne(x, y)),
    "logical_and": _binary("logical_and", "bool", "bool"),
    "logical_or": _binary("logical_or", "bool", "bool"),
    "logical_not": _unary("logical_not", "bool"),
    "logical_xor": _binary("logical_xor", "bool", "bool"),
    "bitwise_and": _binary("bitwise_and", "int9", "int9"),
    "bitwise_or": _binary("bitwise_or", "int9", "int9"),
    "bitwise_xor": _binary("bitwise_xor", "int9", "int9"),
    "bitwise_not": _unary("bitwise_not", "int9"),
    "lshift": _binary("bitwise_left_shift", "int9", "int9"),
    "rshift": _binary("bitwise_right_shift", "int9", "int9"),
    "gcd": _binary("gcd", "int9", "int9"),
    "lcm": _binary("lcm", "int9", "int9"),
    "to": S((3, 4))(lambda m, x: x.to(m.float32).to(m.float64) * x),
    "rsqrt": _unary("rsqrt", "positive"),
    "exp2": _unary("exp2"),
    "expm1": _unary("expm1"),
    "log1p": _unary("log1p", "positive"),
    "log2": _unary("log2", "positive"),
    "log10": _unary("log10", "positive"),
    "erf": _unary("erf"),
    "maximum": S(Input((3, 4), "apart"), Input((3, 4), "apart"))(lambda m, x, y: m.maximum(x, y)),
    "minimum": S(Input((3, 4), "apart"), Input((3, 4), "apart"))(lambda m, x, y: m.minimum(x, y)),
    "where": S((3, 4), (4,), Input((3, 4), "bool"))(lambda m, x, y, c: m.where(c, x, y)),
    # ---- pointwise math ------------------------------------------------------------------
    "floor": _unary("floor", "apart"),
    "ceil": _unary("ceil", "apart"),
    "trunc": _unary("trunc", "apart"),
    "round": _unary("round", "apart"),
    "round_decimals": S(Input((3, 4), "apart"))(lambda m, x: m.round(x * 0.71, decimals=1)),
    "frac": _unary("frac", "apart"),
    "tan": _unary("tan", "unit"),
    "atan": _unary("atan"),
    "asin": _unary("asin", "unit"),
    "acos": _unary("acos", "unit"),
    "sinh": _unary("sinh"),
    "cosh": _unary("cosh"),
    "angle": _unary("angle"),
    "remainder": _binary("remainder", "real", "positive"),
    "fmod": _binary("fmod", "real", "positive"),
    "remainder_number": S((3, 4))(lambda m, x: m.remainder(x, 0.7)),
    "fmod_number": S((3, 4))(lambda m, x: m.fmod(x, -0.7)),
    "floor_divide": S((3, 4), Input((4,), "positive"), order=0, why=_NO_TORCH_DERIVATIVE.format("floor_divide"))(
        lambda m, x, y: m.floor_divide(x, y)),
    "clamp_min": S(Input((3, 4), "apart"))(lambda m, x: m.clamp_min(x, 0.1)),
    "clamp_max": S(Input((3, 4), "apart"))(lambda m, x: m.clamp_max(x, 0.1)),
    "xlogy": _binary("xlogy", "real", "positive"),
    "lerp": S((3, 4), (4,))(lambda m, x, y: m.lerp(x, y, 0.3)),
    "lerp_tensor": S((3, 4), (4,), Input((3, 4), "probability"))(lambda m, x, y, w: m.lerp(x, y, w)),
    "atan2": _binary("atan2", "real", "positive"),
    "nan_to_num": S((3, 4))(lambda m, x: m.nan_to_num(m.log(x))),
    "addcmul": S((3, 4), (4,), (3, 1))(lambda m, x, y, z: m.addcmul(x, y, z, value=0.5)),
    "addcdiv": S((3, 4), (4,), Input((3, 1), "positive"))(lambda m, x, y, z: m.addcdiv(x, y, z, value=0.5)),
    "hypot": _binary("hypot", "positive", "positive"),
    "logaddexp": _binary("logaddexp"),
    "logaddexp2": _binary("logaddexp2"),
    "copysign": _binary("copysign", "positive", "apart"),
    "copysign_number": S(Input((3, 4), "apart"))(lambda m, x: m.copysign(x, -1.0)),
    "fmax": S(Input((3, 4), "apart"), Input((3, 4), "apart"))(lambda m, x, y: m.fmax(x, y)),
    "fmin": S(Input((3, 4), "apart"), Input((3, 4), "apart"))(lambda m, x, y: m.fmin(x, y)),
    "heaviside": S(Input((3, 4), "apart"), (4,), order=0, why=_NO_TORCH_DERIVATIVE.format("heaviside"))(
        lambda m, x, y: m.heaviside(x, y)),
    "xlog1py": S((3, 4), Input((4,), "positive"))(lambda m, x, y: m.special.xlog1py(x, y)),
    "sinc": _unary("sinc"),
    "deg2rad": _unary("deg2rad"),
    "rad2deg": _unary("rad2deg"),
    "logit": _unary("logit", "probability"),
    "asinh": _unary("asinh"),
    "acosh": _unary("acosh", "above1"),
    "atanh": _unary("atanh", "unit"),
    "erfc": _unary("erfc"),
    "erfinv": _unary("erfinv", "unit"),
    "lgamma": _unary("lgamma", "positive"),
    "digamma": _unary("digamma", "positive"),
    "polygamma": S(Input((3, 4), "positive"))(lambda m, x: m.polygamma(2, x)),
    "sgn": _unary("sgn", "apart"),
    "entr": S(Input((3, 4), "positive"))(lambda m, x: m.special.entr(x)),
    # Bessel, incomplete gamma, zeta, polynomials (ops/_special_functions.py)
    "i0": _unary("i0"),
    "special_i0e": _special_unary("i0e"),
    "special_i1": _special_unary("i1"),
    "special_i1e": _special_unary("i1e"),
    "special_erfcx": _special_unary("erfcx"),
    "special_log_ndtr": _special_unary("log_ndtr"),
    "special_ndtri": _special_unary("ndtri", "probability"),
    "igamma": S(Input((3, 4), "positive"), Input((4,), "positive"))(lambda m, a, x: m.igamma(a.detach(), x)),
    "igammac": S(Input((3, 4), "positive"), Input((4,), "positive"))(
        lambda m, a, x: m.special.gammaincc(a.detach(), x)),
    "mvlgamma": S(Input((3, 4), "above1"))(lambda m, x: m.mvlgamma(x + 1.0, 3)),
    "special_zeta": S(Input((3, 4), "above1"), Input((4,), "positive"))(
        lambda m, x, q: m.special.zeta(x.detach(), q)),
    "special_zeta_number_self": S(Input((3, 4), "positive"))(lambda m, q: m.special.zeta(2.5, q)),
    "special_zeta_number_other": S(Input((3, 4), "above1"), order=0,
                                   why="PyTorch raises 'the derivative for 'zeta' is not implemented.'")(
        lambda m, x: m.special.zeta(x, 1.5)),
    **{name: _special_unary(name, domain) for name, domain in (
        ("airy_ai", "real"), ("bessel_j0", "real"), ("bessel_j1", "real"), ("bessel_y0", "positive"),
        ("bessel_y1", "positive"), ("modified_bessel_i0", "real"), ("modified_bessel_i1", "real"),
        ("modified_bessel_k0", "positive"), ("modified_bessel_k1", "positive"),
        ("scaled_modified_bessel_k0", "positive"), ("scaled_modified_bessel_k1", "positive"),
        ("spherical_bessel_j0", "real"))},
    **{name: S(Input((3, 4), "unit"), Input((4,), "int6"))(
        lambda m, x, n, name=name: getattr(m.special, name)(x * 1.5, n - 1)) for name in (
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
        "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
        "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")},
    # ---- reductions ----------------------------------------------------------------------
    "sum_SumBackward0": S((3, 4))(lambda m, x: x.sum()),
    "sum_SumBackward1": S((3, 4))(lambda m, x: x.sum(1, keepdim=True)),
    "mean": S((3, 4))(lambda m, x: x.mean()),
    "mean_dim": S((3, 4))(lambda m, x: x.mean(0)),
    "prod": S((3, 4))(lambda m, x: x.prod()),
    "prod_dim": S((3, 4))(lambda m, x: x.prod(1)),
    "amax": S(Input((3, 4), "apart"))(lambda m, x: m.amax(x, 1)),
    "amin": S(Input((3, 4), "apart"))(lambda m, x: m.amin(x, 0)),
    "max": S(Input((3, 4), "apart"))(lambda m, x: x.max()),
    "min": S(Input((3, 4), "apart"))(lambda m, x: x.min()),
    "max_dim": S(Input((3, 4), "apart"))(lambda m, x: x.max(1).values),
    "min_dim": S(Input((3, 4), "apart"))(lambda m, x: x.min(0).values),
    "var": S((3, 4))(lambda m, x: x.var(1)),
    "std": S((3, 4))(lambda m, x: x.std(0)),
    "logsumexp": S((3, 4))(lambda m, x: m.logsumexp(x, 1)),
    "norm": S((3, 4))(lambda m, x: x.norm()),
    "renorm": S((3, 4))(lambda m, x: m.renorm(x, 1.5, 0, 1.0)),
    "cumsum": S((3, 4))(lambda m, x: x.cumsum(1)),
    "cumprod": S((3, 4))(lambda m, x: x.cumprod(1)),
    "nansum": S((3, 4))(lambda m, x: m.nansum(x, 1)),
    "logcumsumexp": S((3, 4))(lambda m, x: m.logcumsumexp(x, 1)),
    "cummax": S(Input((3, 4), "apart"))(lambda m, x: m.cummax(x, 1).values),
    "cummin": S(Input((3, 4), "apart"))(lambda m, x: m.cummin(x, 1).values),
    "kthvalue": S(Input((3, 4), "apart"))(lambda m, x: m.kthvalue(x, 2, 1).values),
    "aminmax": S(Input((3, 4), "apart"))(lambda m, x: m.aminmax(x, dim=1).max),
    "median": S(Input((3, 5), "apart"))(lambda m, x: m.median(x)),
    "median_dim": S(Input((3, 5), "apart"))(lambda m, x: m.median(x, 1).values),
    "nanmedian": S(Input((3, 5), "apart"))(lambda m, x: m.nanmedian(x)),
    "nanmedian_dim": S(Input((3, 5), "apart"))(lambda m, x: m.nanmedian(x, 1).values),
    "std_mean": S((3, 4))(lambda m, x: m.std_mean(x, 1)),
    "var_mean": S((3, 4))(lambda m, x: m.var_mean(x, 1)),
    # ---- shapes and views ----------------------------------------------------------------
    "view": S((3, 4))(lambda m, x: x.view(4, 3)),
    "reshape_alias": S((4, 6))(lambda m, x: x[::2].reshape(2, 6)),
    "transpose": S((3, 4, 2))(lambda m, x: x.transpose(0, 2)),
    "t": S((3, 4))(lambda m, x: x.t()),
    "permute": S((3, 4, 2))(lambda m, x: x.permute(2, 0, 1)),
    "unsqueeze": S((3, 4))(lambda m, x: x.unsqueeze(1)),
    "squeeze_dim": S((3, 1, 4))(lambda m, x: x.squeeze(1)),
    "squeeze_dims": S((3, 1, 4, 1))(lambda m, x: x.squeeze((1, 3))),
    "squeeze": S((3, 1, 4, 1))(lambda m, x: x.squeeze()),
    "expand": S((3, 1))(lambda m, x: x.expand(3, 4)),
    "clone": S((3, 4))(lambda m, x: x.clone()),
    "select": S((3, 4))(lambda m, x: x[1]),
    "slice": S((3, 4))(lambda m, x: x[:, 1:3]),
    "index": S((3, 4))(lambda m, x: x[m.tensor([2, 0, 2])]),
    "cat": S((3, 4), (2, 4))(lambda m, x, y: m.cat([x, y])),
    "stack": S((3, 4), (3, 4))(lambda m, x, y: m.stack([x, y], 1)),
    "split": S((5, 4))(lambda m, x: m.split(x, 2)),
    "split_with_sizes": S((5, 4))(lambda m, x: m.split(x, [1, 4])),
    "unsafe_split": S((5, 4))(lambda m, x: m.unsafe_split(x, 2)),
    "unbind": S((3, 4))(lambda m, x: m.unbind(x, 1)),
    "flip": S((3, 4))(lambda m, x: m.flip(x, (0, 1))),
    "repeat": S((3, 2))(lambda m, x: x.repeat(2, 3)),
    "roll": S((3, 4))(lambda m, x: m.roll(x, 1, 1)),
    "diagonal": S((3, 4))(lambda m, x: m.diagonal(x, 1)),
    "diag_embed": S((3, 4))(lambda m, x: m.diag_embed(x)),
    "tril": S((3, 4))(lambda m, x: m.tril(x)),
    "triu": S((3, 4))(lambda m, x: m.triu(x, 1)),
    "trace": S((3, 4))(lambda m, x: m.trace(x)),
    "take": S((3, 4), Input((5,), "index12"))(lambda m, x, i: m.take(x, i)),
    "rot90": S((3, 4))(lambda m, x: m.rot90(x, 1, (0, 1))),
    "block_diag": S((2, 3), (1, 2))(lambda m, x, y: m.block_diag(x, y)),
    "narrow_copy": S((5, 4))(lambda m, x: m.narrow_copy(x, 0, 1, 3)),
    "constant_pad_nd": S((3, 4))(lambda m, x: m.nn.functional.pad(x, (1, 2, 0, 1), value=0.5)),
    "pixel_shuffle": S((1, 8, 2, 3))(lambda m, x: m.nn.functional.pixel_shuffle(x, 2)),
    "pixel_unshuffle": S((1, 2, 4, 6))(lambda m, x: m.nn.functional.pixel_unshuffle(x, 2)),
    # ---- indexing ------------------------------------------------------------------------
    "gather": S((3, 4), Input((3, 2), "index4"))(lambda m, x, i: m.gather(x, 1, i)),
    "scatter_add": S((3, 4), (3, 2))(lambda m, x, s: m.scatter_add(x, 1, m.tensor([[0, 1], [2, 2], [3, 0]]), s)),
    "scatter_src": S((3, 4), (3, 2))(lambda m, x, s: m.scatter(x, 1, m.tensor([[0, 1], [2, 3], [3, 0]]), s)),
    "scatter_value": S((3, 4))(lambda m, x: m.scatter(x, 1, m.tensor([[0, 1], [2, 3], [3, 0]]), 1.5)),
    "index_select": S((3, 4), Input((5,), "index3"))(lambda m, x, i: m.index_select(x, 0, i)),
    "index_add": S((3, 4), (2, 4))(lambda m, x, s: m.index_add(x, 0, m.tensor([2, 0]), s, alpha=2.0)),
    "masked_fill": S((3, 4), Input((4,), "bool"))(lambda m, x, k: m.masked_fill(x, k, 0.5)),
    "sort": S(Input((3, 4), "apart"))(lambda m, x: m.sort(x, 1).values),
    "topk": S(Input((3, 4), "apart"))(lambda m, x: m.topk(x, 2).values),
    "masked_select": S((3, 4), Input((3, 4), "bool"))(lambda m, x, k: m.masked_select(x, k)),
    "index_fill": S((3, 4))(lambda m, x: m.index_fill(x, 1, m.tensor([0, 2]), 1.5)),
    "index_copy": S((3, 4), (3, 2))(lambda m, x, s: m.index_copy(x, 1, m.tensor([3, 0]), s)),
    "masked_scatter": S((3, 4), (12,), Input((3, 4), "bool"))(lambda m, x, s, k: m.masked_scatter(x, k, s)),
    "scatter_reduce": S((3, 4), (3, 2))(
        lambda m, x, s: m.scatter_reduce(x, 1, m.tensor([[0, 1], [2, 2], [3, 0]]), s, "sum")),
    # ---- products and linear algebra -----------------------------------------------------
    "dot": S((4,), (4,))(lambda m, x, y: m.dot(x, y)),
    "vdot": S((4,), (4,))(lambda m, x, y: m.vdot(x, y)),
    "mv": S((3, 4), (4,))(lambda m, x, y: m.mv(x, y)),
    "mm": S((3, 4), (4, 2))(lambda m, x, y: m.mm(x, y)),
    "bmm": S((2, 3, 4), (2, 4, 2))(lambda m, x, y: m.bmm(x, y)),
    "addmm": S((3, 2), (3, 4), (4, 2))(lambda m, b, x, y: m.addmm(b, x, y)),
    "addmm_scaled": S((3, 2), (3, 4), (4, 2))(lambda m, b, x, y: m.addmm(b, x, y, beta=0.5, alpha=-2.0)),
    "addmv": S((3,), (3, 4), (4,))(lambda m, b, x, y: m.addmv(b, x, y, beta=0.5)),
    "addr": S((3, 4), (3,), (4,))(lambda m, b, x, y: m.addr(b, x, y, alpha=2.0)),
    "baddbmm": S((2, 3, 2), (2, 3, 4), (2, 4, 2))(lambda m, b, x, y: m.baddbmm(b, x, y, beta=0.5)),
    "addbmm": S((3, 2), (2, 3, 4), (2, 4, 2))(lambda m, b, x, y: m.addbmm(b, x, y, alpha=2.0)),
    "linalg_cross": S((3, 3), (3, 3))(lambda m, x, y: m.linalg.cross(x, y)),
    "inverse": S(Input((3, 3), "spd"))(lambda m, x: m.inverse(x)),
    "det": S(Input((3, 3), "spd"))(lambda m, x: m.det(x)),
    "slogdet": S(Input((3, 3), "spd"))(lambda m, x: m.slogdet(x).logabsdet),
    "linalg_inv_ex": S(Input((3, 3), "spd"))(lambda m, x: m.linalg.inv_ex(x).inverse),
    "linalg_solve": S(Input((3, 3), "spd"), (3, 2))(lambda m, a, b: m.linalg.solve(a, b)),
    "linalg_cholesky_ex": S(Input((3, 3), "spd"))(lambda m, x: m.linalg.cholesky_ex(x).L),
    "cholesky": S(Input((3, 3), "spd"))(lambda m, x: m.cholesky(x)),
    "linalg_eigvalsh": S(Input((3, 3), "spd"))(lambda m, x: m.linalg.eigvalsh(x)),
    "linalg_svdvals": S((4, 3))(lambda m, x: m.linalg.svdvals(x)),
    "linalg_pinv": S((4, 3))(lambda m, x: m.linalg.pinv(x)),
    "linalg_matrix_exp": S((3, 3), rtol=1e-6)(lambda m, x: m.linalg.matrix_exp(x * 0.5)),
    # ---- activations ---------------------------------------------------------------------
    "softmax": S((3, 4))(lambda m, x: m.softmax(x, 1)),
    "log_softmax": S((3, 4))(lambda m, x: m.log_softmax(x, 1)),
    "softplus": S((3, 4))(lambda m, x: m.nn.functional.softplus(x, beta=2.0)),
    "gelu": S((3, 4))(lambda m, x: m.nn.functional.gelu(x)),
    "leaky_relu": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.leaky_relu(x, 0.2)),
    "elu": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.elu(x, 0.7)),
    "silu": S((3, 4))(lambda m, x: m.nn.functional.silu(x)),
    "hardtanh": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.hardtanh(x, -0.5, 0.5)),
    "threshold": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.threshold(x, 0.1, -1.0)),
    "hardshrink": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.hardshrink(x, 0.3)),
    "softshrink": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.softshrink(x, 0.3)),
    "log_sigmoid": S((3, 4))(lambda m, x: m.nn.functional.logsigmoid(x)),
    "selu": S(Input((3, 4), "apart"))(lambda m, x: m.selu(x)),
    "celu": S(Input((3, 4), "apart"))(lambda m, x: m.celu(x, 0.8)),
    "mish": S((3, 4))(lambda m, x: m.nn.functional.mish(x)),
    "hardswish": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.hardswish(x)),
    "hardsigmoid": S(Input((3, 4), "apart"), order=1, why=_NO_TORCH_DERIVATIVE.format("hardsigmoid_backward"))(
        lambda m, x: m.nn.functional.hardsigmoid(x)),
    "leaky_relu_backward": S(Input((3, 4), "apart"))(
        _grad_of(lambda m, x: m.nn.functional.leaky_relu(x, 0.2))),
    "hardtanh_backward": S(Input((3, 4), "apart"))(
        _grad_of(lambda m, x: m.nn.functional.hardtanh(x, -0.5, 0.5))),
    "hardshrink_backward": S(Input((3, 4), "apart"))(
        _grad_of(lambda m, x: m.nn.functional.hardshrink(x, 0.3))),
    "softshrink_backward": S(Input((3, 4), "apart"))(
        _grad_of(lambda m, x: m.nn.functional.softshrink(x, 0.3))),
    "hardsigmoid_backward": S(Input((3, 4), "apart"), order=0,
                              why=_NO_TORCH_DERIVATIVE.format("hardsigmoid_backward"))(
        _grad_of(lambda m, x: m.nn.functional.hardsigmoid(x))),
    "threshold_backward_at": S(Input((3, 4), "apart"))(
        _grad_of(lambda m, x: m.nn.functional.threshold(x, 0.1, -1.0))),
    # ---- losses --------------------------------------------------------------------------
    "mse_loss": S((3, 4), (3, 4))(lambda m, x, y: m.nn.functional.mse_loss(x, y)),
    "smooth_l1_loss": S((3, 4), (3, 4))(lambda m, x, y: m.nn.functional.smooth_l1_loss(x, y, beta=0.5)),
    "huber_loss": S((3, 4), (3, 4))(lambda m, x, y: m.nn.functional.huber_loss(x, y, delta=0.5)),
    "binary_cross_entropy": S(Input((3, 4), "probability"), Input((3, 4), "probability"))(
        lambda m, x, y: m.nn.functional.binary_cross_entropy(x, y)),
    "binary_cross_entropy_with_logits": S((3, 4), Input((3, 4), "probability"))(
        lambda m, x, y: m.nn.functional.binary_cross_entropy_with_logits(x, y)),
    "nll_loss": S((3, 4), Input((3,), "index4"))(lambda m, x, t: m.nn.functional.nll_loss(x, t)),
    # ---- nn: convolutions, pooling, normalization, resampling ------------------------------
    "conv1d": S((2, 3, 7), (4, 3, 3), (4,))(lambda m, x, w, b: m.nn.functional.conv1d(x, w, b, padding=1)),
    "conv2d": S((2, 3, 5, 6), (4, 3, 3, 2), (4,))(
        lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, stride=(2, 1), padding=1)),
    "conv3d": S((1, 2, 4, 4, 3), (3, 2, 2, 2, 2))(lambda m, x, w: m.nn.functional.conv3d(x, w)),
    "conv_transpose1d": S((2, 3, 5), (3, 2, 3), (2,))(
        lambda m, x, w, b: m.nn.functional.conv_transpose1d(x, w, b, stride=2)),
    "conv_transpose2d": S((1, 3, 4, 4), (3, 2, 3, 3))(
        lambda m, x, w: m.nn.functional.conv_transpose2d(x, w, stride=2, padding=1)),
    "max_pool2d": S(Input((2, 3, 6, 6), "apart"))(lambda m, x: m.nn.functional.max_pool2d(x, 2)),
    "max_pool3d": S(Input((1, 2, 4, 4, 4), "apart"))(lambda m, x: m.nn.functional.max_pool3d(x, 2)),
    "avg_pool2d": S((2, 3, 6, 6))(lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, padding=1)),
    "avg_pool3d": S((1, 2, 4, 4, 4))(lambda m, x: m.nn.functional.avg_pool3d(x, 2)),
    "adaptive_avg_pool2d": S((2, 3, 6, 6))(lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, 3)),
    "adaptive_avg_pool2d_bins": S((2, 3, 7, 5))(lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, 3)),
    "adaptive_avg_pool3d": S((1, 2, 5, 4, 3))(lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, 2)),
    "unfold": S((3, 7))(lambda m, x: x.unfold(1, 3, 2)),
    "im2col": S((1, 2, 4, 5))(lambda m, x: m.nn.functional.unfold(x, (2, 3), stride=2)),
    "col2im": S((1, 12, 9))(lambda m, x: m.nn.functional.fold(x, (4, 5), (2, 3))),
    "embedding": S((5, 3), Input((2, 4), "index5"))(lambda m, w, i: m.nn.functional.embedding(i, w)),
    "glu": S((3, 4, 2))(lambda m, x: m.nn.functional.glu(x, 1)),
    "safe_softmax": S((1, 3, 4), (1, 3, 4), (1, 3, 4))(
        lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=m.tensor([[True, False, True], [False, False, False], [True, True, True]]))),
    "layer_norm": S((3, 4, 5), (5,), (5,))(lambda m, x, w, b: m.nn.functional.layer_norm(x, (5,), w, b)),
    "batch_norm": S((4, 3, 2), (3,), (3,))(
        lambda m, x, w, b: m.nn.functional.batch_norm(x, None, None, w, b, training=True)),
    "group_norm": S((2, 4, 3), (4,), (4,))(lambda m, x, w, b: m.nn.functional.group_norm(x, 2, w, b)),
    "prelu_kernel": S((2, 3, 4), Input((3,), "positive"))(lambda m, x, w: m.nn.functional.prelu(x, w)),
    "trilinear": S((3, 4), (2, 4, 5), (3, 5))(lambda m, x, w, y: m.nn.functional.bilinear(x, y, w)),
    "upsample_nearest1d": S((1, 2, 5))(lambda m, x: m.nn.functional.interpolate(x, scale_factor=2)),
    "upsample_nearest2d": S((1, 2, 3, 4))(lambda m, x: m.nn.functional.interpolate(x, size=(5, 7))),
    "upsample_nearest3d": S((1, 2, 2, 3, 2))(lambda m, x: m.nn.functional.interpolate(x, scale_factor=2)),
    "upsample_nearest_exact1d": S((1, 2, 5))(
        lambda m, x: m.nn.functional.interpolate(x, size=8, mode="nearest-exact")),
    "upsample_nearest_exact2d": S((1, 2, 3, 4))(
        lambda m, x: m.nn.functional.interpolate(x, size=(5, 7), mode="nearest-exact")),
    "upsample_nearest_exact3d": S((1, 2, 2, 3, 2))(
        lambda m, x: m.nn.functional.interpolate(x, size=(3, 5, 3), mode="nearest-exact")),
    "upsample_linear1d": S((1, 2, 5))(
        lambda m, x: m.nn.functional.interpolate(x, size=8, mode="linear", align_corners=False)),
    "upsample_bilinear2d": S((1, 2, 3, 4))(
        lambda m, x: m.nn.functional.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True)),
    "upsample_trilinear3d": S((1, 2, 2, 3, 2))(
        lambda m, x: m.nn.functional.interpolate(x, size=(3, 5, 3), mode="trilinear", align_corners=False)),
    "upsample_bicubic2d": S((1, 2, 4, 4))(
        lambda m, x: m.nn.functional.interpolate(x, size=(6, 7), mode="bicubic", align_corners=False)),
    "affine_grid": S((2, 2, 3))(lambda m, t: m.nn.functional.affine_grid(t, (2, 1, 3, 4), align_corners=False)),
    "grid_sampler_2d": S((1, 2, 4, 5), Input((1, 3, 3, 2), "unit"))(
        lambda m, x, g: m.nn.functional.grid_sample(x, g, align_corners=False)),
    "embedding_bag": S((5, 3), Input((6,), "index5"))(
        lambda m, w, i: m.nn.functional.embedding_bag(i, w, m.tensor([0, 2, 5]), mode="mean")),
    # ---- more linear algebra -----------------------------------------------------------------
    "linalg_solve_triangular": S(Input((3, 3), "spd"), (3, 2))(
        lambda m, a, b: m.linalg.solve_triangular(m.triu(a), b, upper=True)),
    "triangular_solve": S((3, 2), Input((3, 3), "spd"))(lambda m, b, a: m.triangular_solve(b, m.triu(a)).solution),
    "cholesky_solve": S((3, 2), Input((3, 3), "spd"))(
        lambda m, b, a: m.cholesky_solve(b, m.linalg.cholesky(a))),
    "cholesky_inverse": S(Input((3, 3), "spd"))(lambda m, a: m.cholesky_inverse(m.linalg.cholesky(a))),
    "linalg_qr": S((4, 3))(lambda m, a: m.linalg.qr(a).R),
    "linalg_eigh": S(Input((3, 3), "spd"))(lambda m, a: m.linalg.eigh(a).eigenvalues),
    "linalg_svd": S((4, 3))(lambda m, a: m.linalg.svd(a, full_matrices=False).S),
    "linalg_lstsq": S((4, 3), (4, 2))(lambda m, a, b: m.linalg.lstsq(a, b).solution),
    "linalg_lu_factor_ex": S(Input((3, 3), "spd"))(lambda m, a: m.linalg.lu_factor_ex(a).LU),
    "linalg_lu": S(Input((3, 3), "spd"))(lambda m, a: m.linalg.lu(a).U),
    "lu_unpack": S(Input((3, 3), "spd"))(lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)).L),
    "linalg_lu_solve": S(Input((3, 3), "spd"), (3, 2))(
        lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b)),
    # ---- statistics and special functions -----------------------------------------------------
    "mode": S(Input((3, 5), "int3"))(lambda m, x: m.mode(x.double(), 1).values),
    "histogram": S((20,), order=0, why="a histogram's counts are piecewise constant; torch has "
                   "no derivative for histogram")(lambda m, x: m.histogram(x, 4).hist),
    "unique": S((3, 4), order=0, why="torch raises 'the derivative for '_unique2' is not implemented'")(
        lambda m, x: m.unique((x * 2).round())),
    "unique_dim": S((3, 4), order=0, why="torch raises 'the derivative for 'unique_dim' is not implemented'")(
        lambda m, x: m.unique((x * 2).round().clamp(-1, 1), dim=1)),
    # ---- in-place rows (on a non-leaf copy) ----------------------------------------------
    "leaky_relu_": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.leaky_relu_(x * 1.0, 0.2)),
    "elu_": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.elu_(x * 1.0, 0.7)),
    "celu_": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.celu_(x * 1.0, 0.8)),
    "threshold_": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.threshold_(x * 1.0, 0.1, -1.0)),
    "fill": S((3, 4))(lambda m, x: (x * 1.0)[1].fill_(2.5)),
    "zero": S((3, 4))(lambda m, x: (x * 1.0)[1].zero_()),
    "copy": S((3, 4), (4,))(lambda m, x, y: (x * 1.0)[1].copy_(y)),
    "index_put": S((3, 4), (2, 4))(lambda m, x, v: (x * 1.0).index_put_((m.tensor([2, 0]),), v)),
    "index_put_accumulate": S((3, 4), (2, 4))(
        lambda m, x, v: (x * 1.0).index_put_((m.tensor([2, 2]),), v, accumulate=True)),
    "put": S((3, 4), (3,))(lambda m, x, v: (x * 1.0).put_(m.tensor([1, 7, 11]), v)),
    "copy_slices": S((3, 4), (4,))(lambda m, x, y: _write_row(x * 1.0, y)),
    "as_strided_view": S((3, 4), (4,))(lambda m, x, y: _view_after_write(x * 1.0, y)),
    "diagonal_copy": S((3, 4))(lambda m, x: m.diag(x, 1)),
    "diagonal_backward": S((3, 4))(_grad_of(lambda m, x: m.diagonal(x, 1))),
    "where_zero": S(Input((3, 4), "apart"))(lambda m, x: m.where(x > 0.2, 0.0, x)),
    "mul_number": S((3, 4))(lambda m, x: m.special.ndtr(x)),
    "div_number": S((5,), (5,))(lambda m, y, x: m.trapezoid(y, x)),
    "norm_zero": S(Input((3, 4), "apart"))(lambda m, x: m.norm(x, 0, 1)),
    # ---- rows only a backward rule applies: reached through a first derivative ----------
    "convolution_backward": S((2, 3, 5, 6), (4, 3, 3, 2))(
        _grad_of(lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1))),
    # stride-1 convolutions take flat windows (ops/_flat_windows.py); their backward rules
    # apply the wide im2col (weight's gradient) and col2im (input's gradient)
    "col2im_wide": S((2, 3, 5, 6), (4, 3, 3, 2))(
        _grad_of(lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1))),
    "im2col_wide": S((4, 3, 3, 2), (2, 3, 5, 6))(
        _grad_of(lambda m, w, x: m.nn.functional.conv2d(x, w, padding=1))),
    "unfold_backward": S((3, 7))(_grad_of(lambda m, x: x.unfold(1, 3, 2))),
    "native_layer_norm_backward": S((3, 4, 5), (5,), (5,), order=1, why=_TORCH_THIRD_DERIVATIVE)(
        _grad_of(lambda m, x, w, b: m.nn.functional.layer_norm(x, (5,), w, b))),
    "native_group_norm_backward": S((2, 4, 3), (4,), (4,))(
        _grad_of(lambda m, x, w, b: m.nn.functional.group_norm(x, 2, w, b))),
    "native_batch_norm_backward": S((4, 3, 2), (3,), (3,), order=1, why=_TORCH_THIRD_DERIVATIVE)(
        _grad_of(lambda m, x, w, b: m.nn.functional.batch_norm(x, None, None, w, b, training=True))),
    "index_backward": S((3, 4))(_grad_of(lambda m, x: x[m.tensor([2, 0, 2])])),
    "as_strided_view_scatter": S((3, 4), (4,))(_grad_of(lambda m, x, y: _view_after_write(x * 1.0, y))),
    "upsample_nearest1d_backward": S((1, 2, 5))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, scale_factor=2))),
    "upsample_nearest2d_backward": S((1, 2, 3, 4))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=(5, 7)))),
    "upsample_nearest3d_backward": S((1, 2, 2, 3, 2))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, scale_factor=2))),
    "upsample_nearest_exact1d_backward": S((1, 2, 5))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=8, mode="nearest-exact"))),
    "upsample_nearest_exact2d_backward": S((1, 2, 3, 4))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=(5, 7), mode="nearest-exact"))),
    "upsample_nearest_exact3d_backward": S((1, 2, 2, 3, 2))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=(3, 5, 3), mode="nearest-exact"))),
    "upsample_linear1d_backward": S((1, 2, 5))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=8, mode="linear"))),
    "upsample_bilinear2d_backward": S((1, 2, 3, 4))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True))),
    "upsample_trilinear3d_backward": S((1, 2, 2, 3, 2))(
        _grad_of(lambda m, x: m.nn.functional.interpolate(x, size=(3, 5, 3), mode="trilinear"))),
    # ---- the rest -------------------------------------------------------------------------
    "rrelu_with_noise": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.rrelu(x, training=False)),
    "rrelu_with_noise_": S(Input((3, 4), "apart"))(lambda m, x: m.nn.functional.rrelu_(x * 1.0, training=False)),
    "squeeze_dim_": S((4,), (4, 3))(lambda m, x, y: m.matmul(x, y)),  # torch's squeeze_ inside matmul
    "unsafe_view": S((2, 3, 4), (4, 5))(lambda m, x, y: m.matmul(x, y)),
    "alias": S((3, 4))(lambda m, x: x[...]),
    "index_fill_tensor": S((3, 4), ())(lambda m, x, v: m.index_fill(x, 1, m.tensor([0, 2]), v)),
    "fill_tensor": S((3, 4), ())(lambda m, x, v: (x * 1.0)[1].fill_(v)),
    "add_scalar": S((3, 4))(lambda m, x: m.nn.functional.rms_norm(x, (4,), eps=1e-3)),
    "pack_padded_sequence": S((4, 3, 2))(
        lambda m, x: m.nn.utils.rnn.pack_padded_sequence(x, m.tensor([4, 2, 1])).data),
    # in-place view ops (ops/_inplace_views.py): the node of the in-place form
    "t_": S((3, 4))(lambda m, x: (x * 1.0).t_() * m.arange(3.0)),
    "transpose_": S((2, 3, 4))(lambda m, x: (x * 1.0).transpose_(0, 2) * m.arange(2.0)),
    "unsqueeze_": S((3, 4))(lambda m, x: (x * 1.0).unsqueeze_(1) * m.ones(3, 2, 4)),
    "squeeze_": S((3, 1, 4, 1))(lambda m, x: (x * 1.0).squeeze_() * m.arange(4.0)),
    "squeeze_dims_": S((3, 1, 4, 1))(lambda m, x: (x * 1.0).squeeze_((1, 2)) * m.ones(3, 4, 2)),
    "index_reduce": S((4, 3), (5, 3))(
        lambda m, x, s: x.index_reduce(0, m.tensor([0, 2, 2, 0, 3]), s, "prod", include_self=False)),
    "max_unpool2d": S(Input((2, 3, 4, 6), "apart"))(lambda m, x: m.nn.functional.max_unpool2d(
        *m.nn.functional.max_pool2d(x * 1.0, 2, return_indices=True), 2)),
    "max_unpool3d": S(Input((1, 2, 4, 4, 2), "apart"))(lambda m, x: m.nn.functional.max_unpool3d(
        *m.nn.functional.max_pool3d(x * 1.0, 2, return_indices=True), 2)),
    "ctc_loss": S((6, 2, 4), order=1, why=_NO_TORCH_DERIVATIVE.format("_ctc_loss_backward"))(
        lambda m, x: m.nn.functional.ctc_loss(x.log_softmax(2), m.tensor([[1, 2, 2], [3, 1, 0]]), [6, 5], [3, 2])),
    "ctc_loss_backward": S((6, 2, 4), order=0, why=_NO_TORCH_DERIVATIVE.format("_ctc_loss_backward"))(
        _grad_of(lambda m, x: m.nn.functional.ctc_loss(x.log_softmax(2), m.tensor([[1, 2, 2], [3, 1, 0]]),
                                                       [6, 5], [3, 2], reduction="sum"))),
    "as_strided": S((12,))(lambda m, x: (x * 1.0).as_strided((3, 4), (2, 1), 1)),
    "as_strided_": S((3, 4))(lambda m, x: (x * 1.0).as_strided_((4, 3), (1, 4))),
    "as_strided_scatter": S((12,))(_grad_of(lambda m, x: (x * 1.0).as_strided((3, 4), (2, 1), 1))),
    "as_strided_read": S((12,))(_grad_of(_grad_of(lambda m, x: (x * x).as_strided((3, 4), (2, 1), 1)))),
    # in-place random fills (ops/_random_fills.py): the draws differ, times zero they agree
    "normal_fill": S((3, 4))(lambda m, x: (x * 1.0).normal_() * 0.0 + x * x),
    "uniform_fill": S((3, 4))(lambda m, x: (x * 1.0).uniform_() * 0.0 + x * x),
    "exponential_fill": S((3, 4))(lambda m, x: (x * 1.0).exponential_() * 0.0 + x * x),
    "geometric_fill": S((3, 4))(lambda m, x: (x * 1.0).geometric_(0.5) * 0.0 + x * x),
    "log_normal_fill": S((3, 4))(lambda m, x: (x * 1.0).log_normal_() * 0.0 + x * x),
    "cauchy_fill": S((3, 4))(lambda m, x: (x * 1.0).cauchy_() * 0.0 + x * x),
    "random_fill": S((3, 4))(lambda m, x: (x * 1.0).random_(0, 5) * 0.0 + x * x),
    "random_to_fill": S((3, 4))(lambda m, x: (x * 1.0).random_(5) * 0.0 + x * x),
    "random_full_fill": S((3, 4))(lambda m, x: (x * 1.0).random_() * 0.0 + x * x),
    "bernoulli_fill": S((3, 4))(lambda m, x: (x * 1.0).bernoulli_(0.5) * 0.0 + x * x),
    "bernoulli_tensor_fill": S((3, 4), Input((3, 4), "probability"))(
        lambda m, x, p: (x * 1.0).bernoulli_(p * 1.0) * 0.0 + x * p),
}


def _write_row(x, y):
    """``x[1] = y`` on a non-leaf: the base records ``CopySlices``."""
    x[1] = y
    return x


def _view_after_write(x, y):
    """A view taken before its base was written: its ``grad_fn`` becomes ``AsStridedBackward0``."""
    view = x[:, 1:3]
    x[1] = y
    return view * 2.0

# rows that genuinely cannot take this comparison, each with its reason
EXEMPT: dict[str, str] = {
    "lstm_layer": "torch records MkldnnRnnLayerBackward0 for float32 LSTMs only, where a float64 "
                  "comparison cannot reach it; tests/nn/test_lstm_layer_vs_torch.py compares its "
                  "graph, values, first and second derivatives with torch's in float32",
    "standard_gamma": "a random draw: gradviz draws with numpy's generator, torch with its own, so "
                      "no two values can match (tests/distributions checks the draws' moments)",
    "standard_gamma_grad": "the implicit-reparameterization derivative of standard_gamma's draw; "
                           "torch exposes it only as the private torch._standard_gamma_grad and "
                           "gradviz keeps no public function for it",
}


def _arrays(name, spec):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [_draw(i, rng) for i in spec.inputs]


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


@contextlib.contextmanager
def _counting_forward(op):
    """Count the calls of ``op``'s forward rule while the block runs (the rows without a node,
    not differentiable ones, show up only there)."""
    calls = []
    original = op.forward
    op.forward = lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs)
    try:
        yield calls
    finally:
        op.forward = original


def _graph_ops(outputs):
    names, seen = set(), set()
    stack = [o.grad_fn for o in outputs if isinstance(o, gv.Tensor)]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, OpNode):
            names.add(node.op.name)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def _numpy(tensor):
    if isinstance(tensor, torch.Tensor):
        return tensor.detach().numpy(force=True)  # torch's ZeroTensor (the second derivative of abs)
    return tensor.detach().numpy()


def _run(m, spec, arrays, order):
    """Values and derivatives up to ``order`` of ``spec`` in library ``m``, as numpy arrays."""
    inputs = [m.tensor(array, requires_grad=array.dtype.kind == "f") for array in arrays]
    outputs = _flat(spec.program(m, *inputs))
    values = [_numpy(o) if isinstance(o, m.Tensor) else np.asarray(o) for o in outputs]
    leaves = [x for x in inputs if x.requires_grad]
    differentiable = [o for o in outputs if isinstance(o, m.Tensor) and o.requires_grad]
    if order == 0 or not leaves or not differentiable:
        return outputs, values, None, None
    rng = np.random.default_rng(7)
    total = sum((o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum() for o in differentiable)
    first = m.autograd.grad(total, leaves, create_graph=True, allow_unused=True)
    first_arrays = [np.zeros(x.shape) if g is None else _numpy(g) for x, g in zip(leaves, first)]
    linked = [g for g in first if g is not None and g.requires_grad]
    if order < 2:
        return outputs, values, first_arrays, None
    if not linked:
        return outputs, values, first_arrays, [np.zeros(x.shape) for x in leaves]
    total2 = sum((g * m.tensor(rng.standard_normal(tuple(g.shape)))).sum() for g in linked)
    second = m.autograd.grad(total2, leaves, allow_unused=True)
    second_arrays = [np.zeros(x.shape) if g is None else _numpy(g) for x, g in zip(leaves, second)]
    return outputs, values, first_arrays, second_arrays


def _compare(what, got, want, spec):
    assert len(got) == len(want), f"{what}: {len(got)} arrays, torch {len(want)}"
    for index, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64),
                                   rtol=spec.rtol, atol=spec.atol, err_msg=f"{what} {index}")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_op_matches_torch(name):
    spec = SPECS[name]
    op = TABLE[name]
    arrays = _arrays(name, spec)
    order = spec.order if op.backward is not None else 0
    with _counting_forward(op) as calls:
        outputs, values, first, second = _run(gv, spec, arrays, order)
    assert calls or name in _graph_ops(outputs), f"the program of {name} does not reach the row {name}"
    _, torch_values, torch_first, torch_second = _run(torch, spec, arrays, order)
    _compare("value", values, torch_values, spec)
    if order > 0:
        assert (first is None) == (torch_first is None), "one library gave no derivative"
        if first is not None:
            _compare("first derivative", first, torch_first, spec)
        if second is not None or torch_second is not None:
            _compare("second derivative", second, torch_second, spec)


@pytest.mark.parametrize("norm", ["layer_norm", "batch_norm"])
def test_norm_third_derivatives_match_finite_differences(norm):
    # where torch's derivative is wrong, finite differences are the reference
    rng = np.random.default_rng(zlib.crc32(norm.encode()))
    shape = (3, 4, 5) if norm == "layer_norm" else (4, 3, 2)
    features = shape[-1] if norm == "layer_norm" else shape[1]
    functional = gv.nn.functional

    def normalized(x, w, b):
        if norm == "layer_norm":
            return functional.layer_norm(x, (features,), w, b)
        return functional.batch_norm(x, None, None, w, b, training=True)

    def first_derivative(x, w, b):
        out = normalized(x, w, b)
        return gv.autograd.grad((out * out).sum(), x, create_graph=True)[0]

    inputs = [gv.tensor(rng.standard_normal(s), requires_grad=True) for s in (shape, (features,), (features,))]
    assert gv.autograd.gradgradcheck(first_derivative, inputs)


def test_every_op_is_covered():
    table = set(TABLE)
    listed = set(SPECS) | set(EXEMPT)
    assert sorted(table - listed) == [], "op rows without a torch comparison: add a spec to SPECS"
    assert sorted(listed - table) == [], "entries for rows that no longer exist"
    assert sorted(set(SPECS) & set(EXEMPT)) == [], "rows with a spec: remove them from EXEMPT"


def test_every_fast_rule_has_a_program():
    from test_fast_backward import test_programs_cover_every_fast_rule

    test_programs_cover_every_fast_rule()
