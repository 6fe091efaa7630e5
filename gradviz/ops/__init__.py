"""Differentiable built-in operations.

Importing this package registers every op in :data:`TABLE`, attaches the Tensor methods
(``x + y``, ``x.sum()``, ...) and gives the engine the tensor operations it needs
(``gradviz_ext.engine.install_runtime``).
"""

from __future__ import annotations

import typing as _typing

import numpy as np

from gradviz_ext import engine as _engine

from .. import _memory_format, _tensor
from .. import dtypes as _dtypes
from .._tensor import Tensor, _describe, _wrap
from . import _activation, _creation, _indexing, _inplace, _linalg, _pointwise, _reduction, _shape
from . import _compose, _conv, _distance, _windows, _loss, _math, _nn, _statistics
from . import _lookup, _products, _rearrange, _scans, _special, _special_functions, _special_namespace
from . import _linalg_solvers, _linalg_factor, _linalg_norms  # noqa: F401  (register their ops)
from . import _conv_transpose, _parametric, _resample  # noqa: F401,E402  (register their ops)
from . import _embedding_bag, _separable, _linalg_lu  # noqa: F401,E402  (register their ops)
from . import _as_strided, _index_reduce, _inplace_views, _random_fills  # noqa: F401,E402  (register their ops)
from . import _lstm_layer  # noqa: F401,E402  (registers its op)
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
from . import _registry
from ._registry import TABLE, Op, OpNode, apply
from ._shape import *  # noqa: F401,F403
from ._lookup import *  # noqa: F401,F403
from ._products import *  # noqa: F401,F403
from ._rearrange import *  # noqa: F401,F403
from ._scans import *  # noqa: F401,F403
from ._special import *  # noqa: F401,F403
from ._special_functions import *  # noqa: F401,F403
from ._special_namespace import *  # noqa: F401,F403
from ._statistics import *  # noqa: F401,F403
from ._windows import *  # noqa: F401,F403

if _typing.TYPE_CHECKING:  # the names above, which __all__ = exports(...) hides from checkers (Note [Op stubs])
    from ._exports import *  # noqa: F403

__all__ = (["TABLE", "Op", "OpNode", "apply"] + _activation.__all__ + _compose.__all__
           + _creation.__all__ + _distance.__all__ + _indexing.__all__ + _linalg.__all__ + _math.__all__
           + _nn.__all__ + _pointwise.__all__ + _reduction.__all__ + _lookup.__all__ + _products.__all__
           + _rearrange.__all__ + _scans.__all__ + _shape.__all__ + _special.__all__ + _special_functions.__all__
           + _special_namespace.__all__ + _statistics.__all__
           + _windows.__all__)

P, R, S, I, A, L = _pointwise, _reduction, _shape, _indexing, _activation, _linalg


def _reflected(fn):
    return lambda self, other: fn(other, self)


def _float_method(dtype_name):
    target = getattr(_dtypes, dtype_name)
    return lambda self: P.to(self, target)


def _rtruediv(self, other):
    return P.rdiv(self, other)


def _rpow(self, other):
    return P.pow(other, self)


from gradviz_ext import ops as _ext_ops  # noqa: E402

_ext_ops.install_arithmetic(add=P.ADD, sub=P.SUB, mul=P.MUL, div=P.DIV, neg=P.NEG,
                            add_py=P.add, sub_py=P.sub, mul_py=P.mul, div_py=P.div, neg_py=P.neg)

# Tensor methods with no function of their own: the operators' compiled fast paths to the same
# ops (Note [Op fast paths]), dtype conversions and the ``*_as`` forms. Every other method comes
# from a declaration (Note [Declared once] in _registry.py), installed by _install_declared.
_OPERATORS = {
    "__add__": _ext_ops.tensor_add, "__radd__": _ext_ops.tensor_radd,
    "__sub__": _ext_ops.tensor_sub, "__mul__": _ext_ops.tensor_mul, "__rmul__": _ext_ops.tensor_rmul,
    "__truediv__": _ext_ops.tensor_truediv, "__rtruediv__": _rtruediv,
    "__neg__": _ext_ops.tensor_neg, "__pos__": lambda self: self, "__rpow__": _rpow,
    "__rmatmul__": _reflected(L.matmul),
    "__invert__": lambda self: P.logical_not(self) if self.dtype.name == "bool" else P.apply(P._BITWISE_NOT, self),
    "float": _float_method("float32"), "double": _float_method("float64"),
    "half": _float_method("float16"), "long": _float_method("int64"), "int": _float_method("int32"),
    "short": _float_method("int16"), "char": _float_method("int8"), "byte": _float_method("uint8"),
    "bool": _float_method("bool"), "type_as": lambda self, other: P.to(self, other.dtype),
    "expand_as": lambda self, other: S.expand(self, other._data.shape),
    "view_as": lambda self, other: S.view(self, other._data.shape),
    "reshape_as": lambda self, other: S.reshape(self, other._data.shape),
    "where": lambda self, condition, other: P.where(condition, self, other),
    "T": property(S.reversed_dims),
    "mT": property(_linalg_solvers.mT),
}
_tensor.install_methods(_OPERATORS)


def _install_declared():
    """Install the Tensor methods and in-place methods the op functions declare (Note [Declared
    once]); a name declared twice, or also installed by hand above, is an error."""
    methods = {}
    for declared in _registry.DECLARED:
        inplace = _inplace.inplace_method(declared.function) if declared.inplace else None
        for name, method in ([(name, declared.function) for name in declared.methods]
                             + [(name, inplace) for name in declared.inplace]):
            if name in methods or name in _OPERATORS:
                raise RuntimeError(f"Tensor.{name} is declared twice: again by {declared}")
            methods[name] = method
    _tensor.install_methods(methods)


_install_declared()
_tensor.install_methods({"fill_diagonal_": _inplace._fill_diagonal_method(Tensor.masked_fill_),
                         "share_memory_": _inplace.share_memory_})
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
    row_major = _memory_format.contiguous_format  # the layout contract: a row-major leaf's .grad is row-major
    if not _engine.is_grad_enabled():
        return S.clone(grad, memory_format=row_major)
    return _inplace.copy_(_creation.empty_like(grad, memory_format=row_major), grad)


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
