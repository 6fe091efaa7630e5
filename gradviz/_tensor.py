"""The Tensor: a numpy array plus the autograd fields the engine reads.

Arithmetic and the other differentiable methods (``x + y``, ``x.sum()``, ...) come from the
ops layer, which installs them at import through :func:`install_methods`; this module only
holds what every tensor has regardless of ops: identity, dtype and shape, grad state,
conversion, printing and ``backward``.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext._hooks import HookList, RemovableHandle
from gradviz_ext import ops as _ext_ops

from . import dtypes as _dtypes
from .dtypes import as_dtype, from_numpy

__all__ = ["Tensor", "Size", "is_tensor", "install_methods"]


class Size(tuple):
    """The shape of a tensor: a tuple that prints like ``gradviz.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"gradviz.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class Tensor(_engine.TensorBase):
    """An n-dimensional array that records operations for automatic differentiation.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([4., 6.])
    """

    __hash__ = object.__hash__  # identity, like torch: tensors are usable as dict keys
    __array_priority__ = 1000  # numpy defers to our operators (np.float64(2) * t is a Tensor)
    _view_chain = ()  # for a view: the (op, attrs) steps that derive it from its base
    _forward_tangent = None  # forward-mode AD: the tangent at the active dual level
    _retain_grad_hook = None  # set by retain_grad()

    def __init__(self, data=None, *, requires_grad: bool = False, dtype=None):
        if isinstance(data, Tensor):
            raise TypeError("use gradviz.tensor(t) or t.clone() to copy a Tensor")
        array = _to_array(data, dtype)
        _engine.TensorBase.__init__(self, array, False)
        if requires_grad:
            self.requires_grad_(True)

    # ---- dtype, shape ---------------------------------------------------------------
    @property
    def dtype(self) -> _dtypes.dtype:
        return from_numpy(self._data.dtype)

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def nelement(self) -> int:
        return int(self._data.size)

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def is_cuda(self) -> bool:
        return False

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # ---- autograd state -------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set whether autograd records operations on this leaf tensor (in place)."""
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(
                "Only Tensors of floating point and complex dtype can require gradients "
                f"(got {self.dtype})"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        """How many times this tensor (or a view sharing its storage) was modified in place."""
        return self._version_counter.value

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this non-leaf (always False for a leaf)."""
        return self._retains_grad

    # Note [Tensor.grad]: TensorBase stores the gradient in a C slot that the engine writes;
    # this property adds PyTorch's warning for a non-leaf whose .grad will never be filled.
    @property
    def grad(self):
        """The gradient accumulated by backward (leaves, and non-leaves that ``retain_grad()``)."""
        value = _GRAD_SLOT.__get__(self)
        if value is None and self.grad_fn is not None and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return value

    @grad.setter
    def grad(self, value) -> None:
        _GRAD_SLOT.__set__(self, value)

    @grad.deleter
    def grad(self) -> None:
        _GRAD_SLOT.__set__(self, None)

    def retain_grad(self) -> None:
        """Populate ``.grad`` of this non-leaf during backward (a no-op on a leaf).

        Examples
        --------
        >>> import gradviz as torch
        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * 3
        >>> y.retain_grad()
        >>> (y * y).sum().backward()
        >>> y.grad
        tensor([ 6., 12.])
        """
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        self._retain_grad_hook = _RetainGradHook(self)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)`` to run after the gradient was accumulated into this leaf's
        ``.grad``; it must return None. Returns a handle whose ``remove()`` unregisters it.
        """
        if not self.requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_accumulate_hooks is None:
            self._post_accumulate_hooks = HookList()
        self._post_accumulate_hooks.append(_PostAccumulateGradHook(hook))
        return RemovableHandle(self._post_accumulate_hooks, self._post_accumulate_hooks[-1])

    @property
    def data(self) -> "Tensor":
        """A tensor sharing storage with this one, outside the graph and with its own version
        counter (as in PyTorch: writes through ``.data`` are invisible to autograd's checks)."""
        return _wrap(self._data)

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
        self._data = value._data

    def detach(self) -> "Tensor":
        """A new tensor sharing storage (and version counter) with this one, with no history."""
        return _wrap(self._data, version_counter=self._version_counter)

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self._requires_grad = False
        self._output_nr = 0
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """Compute the gradient of this tensor with respect to graph leaves.

        See :func:`gradviz.autograd.backward`.
        """
        from .autograd import _functional

        _functional.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """Register ``hook(grad) -> grad or None`` to run when this tensor's gradient is computed.

        Returns a handle whose ``remove()`` unregisters the hook.
        """
        if not self.requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient"
            )
        if self.grad_fn is not None:
            handle = self.grad_fn._register_tensor_pre_hook(self._output_nr, hook)
            if self._retains_grad:
                # PyTorch runs the retain_grad hook after every other hook of the tensor
                self._retain_grad_hook.move_last()
            return handle
        accumulator = _engine.grad_accumulator(self)
        handle = accumulator._register_tensor_pre_hook(0, hook)
        # keep the hooks with the leaf: the accumulator dies when no graph uses it
        self._hooks = accumulator._tensor_pre_hooks
        return handle

    # ---- conversion -----------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The underlying numpy array (shares memory; a write through it is invisible to autograd)."""
        if self.requires_grad and not force and _engine.is_grad_enabled():
            # like torch: allowed with grad mode off (a custom Function's forward)
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        return self._data

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        return self._data.reshape(()).item()

    def tolist(self):
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        if dtype is not None:
            return self._data.astype(dtype)
        return self._data

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._data.shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        return _format(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data.copy(), self._requires_grad))


class _RetainGradHook:
    """The tensor pre-hook behind ``retain_grad()``: stores the gradient that reaches its
    tensor in ``.grad`` (a copy the first time, then ``grad + new``, like PyTorch's)."""

    def __init__(self, tensor):
        self._tensor = weakref.ref(tensor)  # the node must not keep the tensor alive
        self._handle = None
        self.attach()

    def attach(self):
        tensor = self._tensor()
        if tensor is not None and tensor.grad_fn is not None:
            self._handle = tensor.grad_fn._register_tensor_pre_hook(tensor._output_nr, self)

    def move_last(self):
        if self._handle is not None:
            self._handle.remove()
        self.attach()

    def __call__(self, grad):
        tensor = self._tensor()
        if tensor is None or grad is None:
            return None
        current = _GRAD_SLOT.__get__(tensor)
        if current is None:
            _GRAD_SLOT.__set__(tensor, grad.clone())  # differentiable under create_graph
        else:
            _GRAD_SLOT.__set__(tensor, current + grad)
        return None

    @property
    def __name__(self):
        return "retain_grad_hook"


def _update_retains_grad(tensor):
    """After ``tensor``'s history changed (an in-place op), move its retain_grad hook to the
    new ``grad_fn``, as PyTorch does."""
    if tensor._retains_grad:
        hook = tensor._retain_grad_hook
        hook.move_last()


class _PostAccumulateGradHook:
    """Wraps a post-accumulate-grad hook: PyTorch requires it to return None."""

    def __init__(self, hook):
        self.hook = hook
        self.__name__ = getattr(hook, "__name__", "<unknown>")

    def __call__(self, tensor):
        result = self.hook(tensor)
        if result is not None:
            raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")


def _rebuild(array, requires_grad):
    out = _wrap(array)
    out._requires_grad = requires_grad
    return out


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def install_methods(methods: dict) -> None:
    """Attach the ops layer's functions as Tensor methods (called once, at import)."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)


# --------------------------------------------------------------------------------------
# Construction helpers used by every layer above
# --------------------------------------------------------------------------------------

_make_tensor = _ext_ops.make_tensor


class _InstanceSlot:
    """Interpreted engine: TensorBase.grad is a plain instance attribute, kept in __dict__."""

    def __get__(self, obj, owner=None):
        return obj.__dict__.get("grad")

    def __set__(self, obj, value):
        obj.__dict__["grad"] = value


# the storage behind Tensor.grad: a C slot (compiled engine) or the instance dict
_GRAD_SLOT = _engine.TensorBase.__dict__.get("grad") or _InstanceSlot()
_NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information."
)


def _wrap(array, requires_grad=False, grad_fn=None, output_nr=0, version_counter=None):
    """A Tensor around ``array`` (not copied). The engine's runtime ``make``."""
    out = _make_tensor(array)
    out._requires_grad = requires_grad
    if grad_fn is not None:
        out.grad_fn = grad_fn
        out._output_nr = output_nr
    if version_counter is not None:
        out._version_counter = version_counter
    return out


def _to_array(data, dtype=None) -> np.ndarray:
    """Convert Python data or a numpy array to a numpy array with torch's default dtypes."""
    if dtype is not None:
        dtype = as_dtype(dtype)
    if isinstance(data, Tensor):
        array = data._data
    elif data is None:
        array = np.zeros((0,), dtype=_dtypes.get_default_dtype().numpy)
    else:
        array = np.asarray(data)
        if array.dtype == object:
            raise TypeError(
                f"cannot build a tensor from {type(data).__name__}: the elements must be numbers "
                "or nested lists of numbers of equal lengths"
            )
        if dtype is None and not isinstance(data, (np.ndarray, np.generic)):
            # Python data: floats become the default float dtype, ints int64, like torch.
            # With an explicit dtype, convert once (float64 -> float32 -> float64 loses digits).
            if array.dtype.kind == "f":
                array = array.astype(_dtypes.get_default_dtype().numpy)
            elif array.dtype.kind in "iu":
                array = array.astype(np.int64)
    if dtype is not None:
        array = array.astype(dtype.numpy, copy=False)
    elif array.dtype not in _SUPPORTED_NUMPY:
        array = array.astype(from_numpy(array.dtype).numpy)
    return array


_ext_ops.install(Tensor, _dtypes._BY_NUMPY)

_SUPPORTED_NUMPY = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16,
                                           np.int32, np.int64, np.uint8, np.bool_)}


def _wrap_dim(dim: int, ndim: int) -> int:
    limit = max(ndim, 1)
    if not -limit <= dim < limit:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-limit}, {limit - 1}], "
            f"but got {dim})"
        )
    return dim % limit if ndim else 0


_TYPE_NAMES = {"float16": "HalfTensor", "float32": "FloatTensor", "float64": "DoubleTensor",
               "int8": "CharTensor", "int16": "ShortTensor", "int32": "IntTensor",
               "int64": "LongTensor", "uint8": "ByteTensor", "bool": "BoolTensor"}


def _describe(tensor) -> str:
    """``[gradviz.FloatTensor [2, 3]]``: how PyTorch names a tensor (or array) in error messages."""
    array = tensor._data if isinstance(tensor, Tensor) else tensor
    return f"[gradviz.{_TYPE_NAMES[from_numpy(array.dtype).name]} {list(array.shape)}]"


# --------------------------------------------------------------------------------------
# Printing, close to torch's
# --------------------------------------------------------------------------------------

def _format(t: Tensor) -> str:
    data = t._data
    dtype = t.dtype
    if data.size == 0:
        body = "[]"
    elif dtype.is_floating_point:
        body = np.array2string(data, separator=", ", prefix="tensor(",
                               formatter={"float_kind": _float_formatter(data)})
    elif dtype is _dtypes.bool:
        body = np.array2string(data, separator=", ", prefix="tensor(",
                               formatter={"bool": _bool_formatter(data)})
    else:
        body = np.array2string(data, separator=", ", prefix="tensor(")
    extras = []
    if data.size == 0 and data.ndim != 1:
        extras.append(f"size={tuple(data.shape)}")
    if dtype not in (_dtypes.get_default_dtype(), _dtypes.int64, _dtypes.bool):
        extras.append(f"dtype=gradviz.{dtype.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    suffix = "".join(", " + e for e in extras)
    return f"tensor({body}{suffix})"


def _float_formatter(data):
    """torch's choice of style (integral, fixed 4 decimals, or scientific), right-aligned."""
    finite = data[np.isfinite(data)].astype(np.float64)
    magnitudes = np.abs(finite)
    nonzero = magnitudes[magnitudes > 0]
    integral = bool(np.all(finite == np.round(finite)))
    big = bool(magnitudes.size and magnitudes.max() >= 1e8)
    small = bool(nonzero.size and nonzero.min() < 1e-4)
    scientific = big or small or (nonzero.size and nonzero.max() / nonzero.min() > 1000 and not integral)

    def style(v):
        if not np.isfinite(v):
            return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
        if scientific:
            return f"{v:.4e}"
        if integral:
            return f"{v:.0f}."
        return f"{v:.4f}"

    width = max((len(style(v)) for v in data.reshape(-1)), default=0)
    return lambda v: style(v).rjust(width)


def _bool_formatter(data):
    true = " True" if not data.all() else "True"  # torch right-aligns to "False"'s width
    return lambda v: true if v else "False"
