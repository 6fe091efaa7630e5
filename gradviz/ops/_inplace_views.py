"""In-place view ops: ``squeeze_``, ``unsqueeze_``, ``t_``, ``transpose_`` (``swapdims_``,
``swapaxes_``). They change a tensor's shape, not its values.

Note [In-place view ops]
------------------------
PyTorch's ``y.t_()`` changes ``y``'s sizes and strides over the same storage, bumps the version
counter and, when ``y`` is part of a graph, makes ``y``'s ``grad_fn`` the op's in-place node
(``TBackward1``, ``TransposeBackward1``, ``UnsqueezeBackward1``, ``SqueezeBackward3/4/5``)
whose next function is ``y``'s old ``grad_fn``. gradviz does the same with numpy: ``y._data``
becomes the transposed (squeezed, ...) numpy view of the same memory, and the node comes from
a row of its own, applied to a tensor that shares ``y``'s memory and autograd identity.

gradviz derives a view from its base by replaying the view ops in ``_view_chain``
(Note [In-place semantics] in ``ops/_inplace.py``), so the chains must follow the new shape:

* On a view, the op is one more step of its chain (later writes through it replay it).
* On a base, each of its live views (those ``track_view`` keeps: the ones with a history)
  starts its chain with the inverse step (``t`` after ``t_``, ``squeeze(d)`` after
  ``unsqueeze_(d)``, a ``view`` to the old shape after ``squeeze_``), which re-derives the old
  base from the new one. Those views then get ``AsStridedBackward0``, as in PyTorch, where the
  version bump regenerates them.

Under forward AD the tensor's tangent takes the same step (a view of the same tangent memory).

The checks are those of every in-place op: PyTorch's errors for a leaf that requires grad, a
view of one, and an output of a multi-output view op, with grad mode on.
"""

from __future__ import annotations

import operator

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops

from .._tensor import _wrap, _wrap_dim
from ._inplace import _check_writable, refresh_views
from ._registry import Op, apply, declare
from ._saved import DIM, DIMS, SELF_SIZES, passed
from ._shape import (
    SQUEEZE,
    SQUEEZE_DIM,
    SQUEEZE_DIM_INPLACE,
    SQUEEZE_DIMS,
    TRANSPOSE,
    UNSQUEEZE,
    VIEW,
    T,
    check_distinct_dims,
    reshape,
    squeeze_dim,
    t,
    transpose,
)

__all__: list[str] = []

# the in-place rows: the same forward and backward as the view ops, PyTorch's node names
T_INPLACE = Op("t_", "TBackward1", forward=lambda a: a.T, backward=lambda ctx, g: (t(g),), saved={})
TRANSPOSE_INPLACE = Op("transpose_", "TransposeBackward1",
                       forward=lambda a, dim0, dim1, dim0_arg=None, dim1_arg=None: (
                           np.swapaxes(a, dim0, dim1) if a.ndim else a),
                       backward=lambda ctx, g: (transpose(g, ctx.dim0, ctx.dim1),),
                       saved={"dim0": passed("dim0"), "dim1": passed("dim1")})
UNSQUEEZE_INPLACE = Op("unsqueeze_", "UnsqueezeBackward1",
                       forward=lambda a, dim, dim_arg=None: np.expand_dims(a, dim),
                       backward=lambda ctx, g: (squeeze_dim(g, ctx.dim),), saved={"dim": DIM})
SQUEEZE_INPLACE = Op("squeeze_", "SqueezeBackward3", forward=lambda a, shape: np.squeeze(a),
                     backward=lambda ctx, g: (reshape(g, ctx.shape),),
                     saved={"self_sym_sizes": SELF_SIZES})
SQUEEZE_DIMS_INPLACE = Op(
    "squeeze_dims_", "SqueezeBackward5",
    forward=lambda a, dims, shape, dims_arg=None: np.squeeze(a, tuple(d for d in dims if a.shape[d] == 1)),
    backward=lambda ctx, g: (reshape(g, ctx.shape),),
    saved={"dim": DIMS, "self_sym_sizes": SELF_SIZES})


def _dims(name, *dims):
    """``dims`` as ints, or PyTorch's TypeError for a dim of another type (``squeeze_(0.5)``)."""
    try:
        return tuple(operator.index(dim) for dim in dims)
    except TypeError:
        got = ", ".join(type(dim).__name__ for dim in dims)
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                        f"but expected int dims") from None


def _check_replayable(shape, chains):
    """Refuse a transpose of a base with a live view that a contiguous layout cannot re-derive
    from the transposed base (a ``view(-1)`` of it): gradviz replays views on dense copies
    (Note [In-place view ops]), where PyTorch keeps strides into the storage."""
    positions = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    for chain in chains:
        array = positions  # the new base as a dense copy of it is laid out
        try:
            for op, attrs in chain:
                array = op.forward(array, **attrs)
        except RuntimeError:
            raise RuntimeError(
                "t_()/transpose_() of a tensor with a live view made by view() or flatten() of it "
                "is not supported by gradviz (it re-derives views from a dense copy of their "
                "base). Take the view after the transpose, or transpose out of place "
                "(y = y.t()).") from None


def _change_view(self, node_op, step, attrs, inverse):
    """Give ``self`` the shape of ``step`` (a view op row) applied with ``attrs``, in place,
    recording ``node_op`` when ``self`` is part of a graph; ``inverse`` is the ``(op, attrs)``
    step that re-derives the old ``self`` from the new (Note [In-place view ops])."""
    _check_writable(self)
    base = self._base
    needs_graph = _engine.is_grad_enabled() and (
        _ext_ops.requires_grad(self) or (base is not None and _ext_ops.requires_grad(base)))
    new_data = step.forward(self._data, **attrs)
    views = _engine.live_views(self) if base is None else []
    chains = [(inverse,) + view._view_chain for view in views]
    if views and inverse[0] in (T, TRANSPOSE):
        _check_replayable(new_data.shape, chains)
    node = None
    if needs_graph:
        source = _wrap(self._data)  # the same memory, self's autograd identity
        source.grad_fn = self.grad_fn  # raises for a view whose base changed, as PyTorch
        source._output_nr = self._output_nr
        source._requires_grad = self._requires_grad
        node = apply(node_op, source, **attrs).grad_fn
    self._data = new_data
    self._version_counter.bump()
    tangent = self._forward_tangent
    if tangent is not None:  # forward AD: the tangent takes the same shape, over its own memory
        self._forward_tangent = apply(step, tangent, **attrs)
    if base is not None:
        self._view_chain = self._view_chain + ((step, attrs),)
        if base._views is not None:
            refresh_views(base)
    else:
        for view, chain in zip(views, chains):
            view._view_chain = chain
        if self._views is not None:
            refresh_views(self)
    if node is not None:
        # unlike other in-place ops, PyTorch leaves a retain_grad() hook on the old node here:
        # .grad keeps the shape the tensor had when retain_grad() was called
        self.grad_fn = node
        self._output_nr = 0
    return self


@declare(name=False, method=True)
def t_(self):
    """Transpose a tensor of at most 2 dimensions in place. Mirrors ``torch.Tensor.t_``.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.zeros(2, 3)
    >>> x.t_().shape
    gradviz.Size([3, 2])
    """
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return _change_view(self, T_INPLACE, T, {}, (T, {}))


@declare(name=False, method=("transpose_", "swapdims_", "swapaxes_"))
def transpose_(self, dim0, dim1):
    """Swap dimensions ``dim0`` and ``dim1`` of ``self`` in place (``swapdims_`` and
    ``swapaxes_`` are the same method). Mirrors ``torch.Tensor.transpose_``."""
    for position, (label, dim) in enumerate((("dim0", dim0), ("dim1", dim1)), start=1):
        if not isinstance(dim, (int, np.integer)):
            raise TypeError(f"transpose_(): argument '{label}' (position {position}) must be int, "
                            f"not {type(dim).__name__}")
    attrs = {"dim0": _wrap_dim(dim0, self.ndim), "dim1": _wrap_dim(dim1, self.ndim),
             "dim0_arg": dim0, "dim1_arg": dim1}  # Note [Saved ints as passed]
    return _change_view(self, TRANSPOSE_INPLACE, TRANSPOSE, attrs, (TRANSPOSE, attrs))


@declare(name=False, method=True)
def unsqueeze_(self, dim):
    """Insert a dimension of size 1 at ``dim``, in place. Mirrors ``torch.Tensor.unsqueeze_``."""
    (dim_arg,) = _dims("unsqueeze_", dim)
    dim = _wrap_dim(dim_arg, self.ndim + 1)
    new_shape = self._data.shape[:dim] + (1,) + self._data.shape[dim:]
    return _change_view(self, UNSQUEEZE_INPLACE, UNSQUEEZE, {"dim": dim, "dim_arg": dim_arg},
                        (SQUEEZE_DIM, {"dim": dim, "shape": new_shape}))


@declare(name=False, method=True)
def squeeze_(self, dim=None):
    """Remove dimensions of size 1 in place: all of them, ``dim`` alone, or those in a tuple of
    dims (a dim of another size stays). Mirrors ``torch.Tensor.squeeze_``."""
    shape = self._data.shape
    if isinstance(dim, (tuple, list)):
        dims_arg = _dims("squeeze_", *dim)
        dims = check_distinct_dims(tuple(_wrap_dim(d, self.ndim) for d in dims_arg) if self.ndim else ())
        node_op, step = SQUEEZE_DIMS_INPLACE, SQUEEZE_DIMS
        attrs = {"dims": dims, "shape": shape, "dims_arg": tuple(dims_arg)}
    elif dim is not None:
        (dim,) = _dims("squeeze_", dim)
        node_op, step = SQUEEZE_DIM_INPLACE, SQUEEZE_DIM
        attrs = {"dim": _wrap_dim(dim, self.ndim), "shape": shape, "dim_arg": dim}
    else:
        node_op, step, attrs = SQUEEZE_INPLACE, SQUEEZE, {"shape": shape}
    new_shape = step.forward(self._data, **attrs).shape
    return _change_view(self, node_op, step, attrs, (VIEW, {"shape": shape, "source": new_shape}))
