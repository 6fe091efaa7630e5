"""The nodes of the in-place random fills (``normal_``, ``uniform_``, ``bernoulli_``, ...).

Note [Random fills in a graph]
------------------------------
``y.normal_()`` on a tensor that is part of a graph overwrites every value with draws that do
not depend on ``y``: PyTorch records a node of the fill's own name (``NormalBackward0``,
``UniformBackward0``, ``ExponentialBackward0``, ``GeometricBackward0``, ``LogNormalBackward0``,
``CauchyBackward0``, ``RandomBackward0/1/2`` (``random_(from, to)``, ``random_(to)``,
``random_()``), ``BernoulliBackward2``; ``BernoulliBackward1`` when
the probabilities are a tensor, which is the node's second input) whose gradient to every input
is zero. The draws themselves come from gradviz's generator (``ops/_creation.py``), so their
values differ from torch's; the fill is an ordinary in-place op (Note [In-place semantics] in
``ops/_inplace.py``), with its checks, version bump and ``CopySlices`` through a view.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import C_TYPE_NAMES, TYPE_WORDS, Tensor
from ._inplace import _overwritten, inplace
from ._registry import Op, apply

__all__: list[str] = []


def _draws_forward(a, draws):
    return np.asarray(draws, dtype=a.dtype)


def _fill_row(name, node_name):
    return Op(name, node_name, forward=_draws_forward,
              backward=lambda ctx, g: (_overwritten(g),))


NORMAL_FILL = _fill_row("normal_fill", "NormalBackward0")
UNIFORM_FILL = _fill_row("uniform_fill", "UniformBackward0")
EXPONENTIAL_FILL = _fill_row("exponential_fill", "ExponentialBackward0")
GEOMETRIC_FILL = _fill_row("geometric_fill", "GeometricBackward0")
LOG_NORMAL_FILL = _fill_row("log_normal_fill", "LogNormalBackward0")
CAUCHY_FILL = _fill_row("cauchy_fill", "CauchyBackward0")
RANDOM_FILL = _fill_row("random_fill", "RandomBackward0")  # random_(from, to)
RANDOM_TO_FILL = _fill_row("random_to_fill", "RandomBackward1")  # random_(to)
RANDOM_FULL_FILL = _fill_row("random_full_fill", "RandomBackward2")  # random_()
BERNOULLI_FILL = _fill_row("bernoulli_fill", "BernoulliBackward2")
# bernoulli_(p) with a tensor of probabilities: p is an input, with a zero gradient too
BERNOULLI_TENSOR_FILL = Op(
    "bernoulli_tensor_fill", "BernoulliBackward1",
    forward=lambda a, probability, draws, probability_shape: np.asarray(draws, dtype=a.dtype),
    backward=lambda ctx, g: (_overwritten(g) if ctx.needs_input_grad[0] else None,
                             g.new_zeros(ctx.probability_shape) if ctx.needs_input_grad[1] else None))


# PyTorch's refusals of a fill for a dtype: (error type, message with {word} / {c_name})
_DTYPE_ERRORS = {
    "normal_": (NotImplementedError, '"normal_kernel_cpu" not implemented for \'{word}\''),
    "uniform_": (NotImplementedError, '"check_uniform_bounds" not implemented for \'{word}\''),
    "log_normal_": (NotImplementedError, '"log_normal_cpu" not implemented for \'{word}\''),
    "exponential_": (RuntimeError, "Exponential distribution is a continuous probability "
                                   "distribution. dtype must be a floating point but you specified {word}"),
    "cauchy_": (RuntimeError, "Cauchy distribution is a continuous probability distribution. dtype "
                              "must be a floating point but you specified {c_name}"),
}


def check_dtype(self, name):
    """PyTorch's error for a fill ``name`` its kernel has no version of for ``self``'s dtype
    (the continuous laws need floating point; ``geometric_`` takes integers, not booleans)."""
    dtype = self.dtype
    if name == "geometric_":
        if dtype is _dtypes.bool:
            raise NotImplementedError("\"geometric_cpu\" not implemented for 'Bool'")
        return
    if not dtype.is_floating_point:
        error, message = _DTYPE_ERRORS[name]
        raise error(message.format(word=TYPE_WORDS[dtype.name], c_name=C_TYPE_NAMES[dtype.name]))


def check_probability(p):
    """``bernoulli_``'s checks of ``p`` (a number or a tensor of probabilities)."""
    if isinstance(p, Tensor):
        data = p._data
        if data.size and not bool(((data >= 0) & (data <= 1)).all()):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={float(p):g}")


def fill_with_draws(self, draws, row, probability=None):
    """Write ``draws`` (an array of ``self``'s shape) into ``self`` in place, recording ``row``
    (Note [Random fills in a graph]); ``probability`` is ``bernoulli_``'s tensor ``p``."""
    draws = np.asarray(draws).astype(self._data.dtype)
    if isinstance(probability, Tensor):
        shape = tuple(probability.shape)
        return inplace(self, lambda old: apply(BERNOULLI_TENSOR_FILL, old, probability,
                                               draws=draws, probability_shape=shape), probability)
    return inplace(self, lambda old: apply(row, old, draws=draws))
