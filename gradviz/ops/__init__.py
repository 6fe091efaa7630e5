"""Differentiable built-in operations.

Importing this package registers every op in :data:`TABLE`, attaches the Tensor methods
(``x + y``, ``x.sum()``, ...) and gives the engine the tensor operations it needs
(``gradviz_ext.engine.install_runtime``).
"""

from __future__ import annotations

import numpy as np

from gradviz_ext import engine as _engine

from .. import _tensor
from .._tensor import Tensor, _describe, _wrap
from . import _activation, _creation, _indexing, _inplace, _linalg, _pointwise, _reduction, _shape
from . import _compose, _conv, _distance, _windows, _loss, _math, _nn, _statistics
from . import _lookup, _products, _rearrange, _scans, _special
from . import _linalg_solvers, _linalg_factor, _linalg_norms  # noqa: F401  (register their ops)
from . import _conv_transpose, _parametric, _resample  # noqa: F401,E402  (register their ops)
from . import _embedding_bag, _separable, _linalg_lu  # noqa: F401,E402  (register their ops)
from . import _saved  # noqa: F401,E402  (installs grad_fn._saved_<name>: Note [Saved names])
from ._activation import *  # noqa: F401,F403
from ._compose import *  # noqa: F401,F403
from ._creation import *  # noqa: F401,F403
from ._distance import *  # noqa: F401,F403
from ._indexing import *  # noqa: F401,F403
from ._linalg import *  # noqa: F401,F403
from ._math import *  # noqa: F401,F403
from ._nn import *  # noqa: F401,F403
from ._pointwise import *  # noqa: F401,F403
from ._reduction import *  # noqa: F401,F403
from ._registry import TABLE, Op, OpNode, apply
from ._shape import *  # noqa: F401,F403
from ._lookup import *  # noqa: F401,F403
from ._products import *  # noqa: F401,F403
from ._rearrange import *  # noqa: F401,F403
from ._scans import *  # noqa: F401,F403
from ._special import *  # noqa: F401,F403
from ._statistics import *  # noqa: F401,F403
from ._windows import *  # noqa: F401,F403

__all__ = (["TABLE", "Op", "OpNode", "apply"] + _activation.__all__ + _compose.__all__
           + _creation.__all__ + _distance.__all__ + _indexing.__all__ + _linalg.__all__ + _math.__all__
           + _nn.__all__ + _pointwise.__all__ + _reduction.__all__ + _lookup.__all__ + _products.__all__
           + _rearrange.__all__ + _scans.__all__ + _shape.__all__ + _special.__all__ + _statistics.__all__
           + _windows.__all__)

P, R, S, I, A, L = _pointwise, _reduction, _shape, _indexing, _activation, _linalg


def _reflected(fn):
    return lambda self, other: fn(other, self)


def _float_method(dtype_name):
    from .. import dtypes

    target = getattr(dtypes, dtype_name)
    return lambda self: P.to(self, target)


def _rtruediv(self, other):
    return P.rdiv(self, other)


def _rpow(self, other):
    return P.pow(other, self)


from gradviz_ext import ops as _ext_ops  # noqa: E402

_ext_ops.install_arithmetic(add=P.ADD, sub=P.SUB, mul=P.MUL, div=P.DIV, neg=P.NEG,
                            add_py=P.add, sub_py=P.sub, mul_py=P.mul, div_py=P.div, neg_py=P.neg)

_tensor.install_methods({
    # the dunders are compiled fast paths to the same ops (Note [Op fast paths])
    "__add__": _ext_ops.tensor_add, "__radd__": _ext_ops.tensor_radd, "add": P.add,
    "__sub__": _ext_ops.tensor_sub, "__rsub__": P.rsub, "sub": P.sub,
    "__mul__": _ext_ops.tensor_mul, "__rmul__": _ext_ops.tensor_rmul, "mul": P.mul,
    "__truediv__": _ext_ops.tensor_truediv, "__rtruediv__": _rtruediv, "div": P.div,
    "__neg__": _ext_ops.tensor_neg, "neg": P.neg, "__pos__": lambda self: self,
    "__pow__": P.pow, "__rpow__": _rpow, "pow": P.pow,
    "__matmul__": L.matmul, "__rmatmul__": _reflected(L.matmul), "matmul": L.matmul,
    "mm": L.mm, "mv": L.mv, "dot": L.dot, "bmm": L.bmm,
    "allclose": P.allclose,
    "__lt__": P.lt, "__le__": P.le, "__gt__": P.gt, "__ge__": P.ge, "__eq__": P.eq, "__ne__": P.ne,
    "lt": P.lt, "le": P.le, "gt": P.gt, "ge": P.ge, "eq": P.eq, "ne": P.ne,
    "__and__": lambda self, other: P._bitwise(P._BITWISE_AND, self, other),
    "__or__": lambda self, other: P._bitwise(P._BITWISE_OR, self, other),
    "__invert__": lambda self: P.logical_not(self) if self.dtype.name == "bool" else P.apply(P._BITWISE_NOT, self),
    "logical_and": P.logical_and, "logical_or": P.logical_or, "logical_not": P.logical_not,
    "exp": P.exp, "log": P.log, "tanh": P.tanh, "sigmoid": P.sigmoid, "relu": P.relu,
    "sin": P.sin, "cos": P.cos, "sqrt": P.sqrt, "abs": P.abs, "__abs__": P.abs, "sign": P.sign,
    "reciprocal": P.reciprocal, "clamp": P.clamp, "clip": P.clamp,
    "to": P.to, "float": _float_method("float32"), "double": _float_method("float64"),
    "half": _float_method("float16"), "long": _float_method("int64"), "int": _float_method("int32"),
    "short": _float_method("int16"), "char": _float_method("int8"), "byte": _float_method("uint8"),
    "bool": _float_method("bool"), "type_as": lambda self, other: P.to(self, other.dtype),
    "sum": R.sum, "mean": R.mean,
    "reshape": S.reshape, "view": S.view, "flatten": S.flatten,
    "transpose": S.transpose, "t": S.t, "permute": S.permute,
    "unsqueeze": S.unsqueeze, "squeeze": S.squeeze, "expand": S.expand,
    "expand_as": lambda self, other: S.expand(self, other._data.shape),
    "view_as": lambda self, other: S.view(self, other._data.shape),
    "reshape_as": lambda self, other: S.reshape(self, other._data.shape),
    "clone": S.clone, "contiguous": S.contiguous,
    "__getitem__": S.getitem,
    "rsqrt": P.rsqrt, "exp2": P.exp2, "expm1": P.expm1, "log1p": P.log1p, "log2": P.log2,
    "log10": P.log10, "erf": P.erf, "maximum": P.maximum, "minimum": P.minimum,
    "where": lambda self, condition, other: P.where(condition, self, other),
    "prod": R.prod, "amax": R.amax, "amin": R.amin, "max": R.max, "min": R.min,
    "argmax": R.argmax, "argmin": R.argmin, "var": R.var, "std": R.std,
    "logsumexp": R.logsumexp, "norm": R.norm, "cumsum": R.cumsum,
    "softmax": A.softmax, "log_softmax": A.log_softmax,
    "narrow": S.narrow, "select": S.select, "split": S.split, "chunk": S.chunk,
    "unsafe_split": S.unsafe_split, "unsafe_chunk": S.unsafe_chunk,
    "unbind": S.unbind, "flip": S.flip,
    "gather": I.gather, "scatter": I.scatter, "scatter_add": I.scatter_add,
    "index_select": I.index_select, "index_add": I.index_add, "masked_fill": I.masked_fill,
    "sort": I.sort, "argsort": I.argsort, "topk": I.topk,
    "T": property(S.reversed_dims),
    "mT": property(_linalg_solvers.mT),
})


_tensor.install_methods(_inplace.INPLACE_METHODS)
_tensor.install_methods({"index_put": _inplace.index_put, "put": _inplace.put})
index_put, put = _inplace.index_put, _inplace.put
__all__ += ["index_put", "put"]


def _add_inplace(target, grad):
    """Engine runtime: ``target += grad`` on data, outside the graph (an owned buffer or ``.grad``)."""
    np.add(target._data, grad._data, out=target._data, casting="unsafe")
    target._version_counter.bump()
    return target


def _sum_to(grad, shape):
    """Engine runtime: reduce a broadcast gradient to ``shape``; differentiable only when the
    engine runs with ``create_graph`` (grad mode on), else straight on the array."""
    if _engine.is_grad_enabled():
        return R.sum_to(grad, shape)
    return _wrap(R.sum_to_array(grad._data, shape))


def _clone(grad):
    """Engine runtime: a copy of a gradient for ``.grad``. Recorded (``create_graph=True``) it
    is PyTorch's ``empty_like(grad).copy_(grad)``: ``x.grad.grad_fn`` is ``CopyBackwards``."""
    if not _engine.is_grad_enabled():
        return S.clone(grad)
    return _inplace.copy_(_creation.empty_like(grad), grad)


def _zeros(shape, dtype):
    return _wrap(np.zeros(shape, dtype=dtype.numpy))


_engine.install_runtime(
    add=P.add,
    add_inplace=_add_inplace,
    clone=_clone,
    detach=Tensor.detach,
    zeros=_zeros,
    sum_to=_sum_to,
    cast=P.to,
    make=_tensor._wrap,
    describe=_describe,
)
