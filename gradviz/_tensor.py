"""The Tensor: a numpy array plus the autograd fields the engine reads.

Arithmetic and the other differentiable methods (``x + y``, ``x.sum()``, ...) come from the
ops layer, which installs them at import through :func:`install_methods`; this module only
holds what every tensor has regardless of ops: identity, dtype and shape, grad state,
conversion, printing and ``backward``.
"""

from __future__ import annotations

import warnings
import weakref
from typing import TYPE_CHECKING

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops
from gradviz_ext._hooks import HookList, RemovableHandle

from . import _memory_format
from . import dtypes as _dtypes
from ._tensor_str import _format, set_printoptions  # noqa: F401  (re-exported)
from .dtypes import as_dtype, from_numpy
from .storage import TypedStorage, UntypedStorage, in_shared_memory

__all__ = ["Tensor", "Size", "device", "is_tensor", "install_methods", "set_printoptions"]


class Size(tuple):
    """The shape of a tensor: a tuple that prints like ``gradviz.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"gradviz.Size({list(self)})"

    def __getitem__(self, index):
        result = tuple.__getitem__(self, index)
        return Size(result) if isinstance(index, slice) else result

    # like torch.Size: concatenation and repetition stay sizes
    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, count):
        if not isinstance(count, int):
            return NotImplemented
        return Size(tuple.__mul__(self, count))

    __rmul__ = __mul__

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
                 "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                 "privateuseone")


class device:
    """A device, as ``torch.device``: gradviz computes on the CPU, so ``device("cpu")`` is the
    only one tensors live on; the others exist so that device-selecting code runs."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002  (torch's name)
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        name, _, number = str(type).partition(":")
        if name not in _DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start "
                               f"of device string: {type}")
        self.type = name
        self.index = int(number) if number else index

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))


def check_device(value) -> None:
    """Accept the CPU (as None, a string or a :class:`device`); refuse any other device."""
    if value is None:
        return
    if not isinstance(value, device):
        value = device(value)
    if value.type != "cpu":
        if value.type == "cuda":
            raise AssertionError("Torch not compiled with CUDA enabled (gradviz runs on the CPU "
                                 "only)")
        raise RuntimeError(f"gradviz runs on the CPU only; got device {str(value)!r}")


_CPU = device("cpu")


class layout:
    """A tensor memory layout (``torch.layout``): gradviz has one, :data:`strided`."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"gradviz.{self.name}"

    def __reduce__(self):
        return "strided"


#: The dense, strided layout of every gradviz tensor (``torch.strided``).
strided = layout("strided")


if TYPE_CHECKING:  # the methods the ops install at import, for type checkers (Note [Op stubs])
    from ._tensor_methods import TensorMethods

    class _TensorBase(TensorMethods, _engine.TensorBase): ...
else:
    _TensorBase = _engine.TensorBase


_TYPED_STORAGE_WARNING = (
    "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
    "only storage class. This should only matter to you if you are using storages directly.  To "
    "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()")
_typed_storage_warned = False


class Tensor(_TensorBase):
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

    def __init__(self, *args, device=None):
        """``torch.Tensor``'s legacy constructor: ``Tensor(2, 3)`` (or a ``Size``) is an
        uninitialized (here: zero) tensor of that shape, ``Tensor(data)`` converts data to the
        default float dtype, ``Tensor(tensor)`` shares the tensor's storage and dtype."""
        check_device(device)
        array = _legacy_array(args)
        _engine.TensorBase.__init__(self, _wrap_converted(array, args[0] if args else None)._data,
                                    False)

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
    def device(self) -> device:
        return _CPU

    def type(self, dtype=None, non_blocking=False):
        """Without ``dtype``: the type name (``'gradviz.FloatTensor'``); with one (a dtype or a
        type name), the tensor converted to it."""
        if dtype is None:
            return f"gradviz.{_TYPE_NAMES[self.dtype.name]}"
        if isinstance(getattr(dtype, "dtype", None), _dtypes.dtype) and isinstance(dtype, type):
            dtype = dtype.dtype  # x.type(torch.LongTensor)
        if isinstance(dtype, str):
            name = dtype.rsplit(".", 1)[-1]
            by_type = {v: k for k, v in _TYPE_NAMES.items()}
            if name not in by_type:
                raise ValueError(f"invalid type: '{dtype}'")
            dtype = by_type[name]
        return self.to(as_dtype(dtype))

    def stride(self, dim=None):
        """Strides in elements (of the numpy array behind the tensor)."""
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        if dim is None:
            return strides
        return strides[_wrap_dim(dim, self._data.ndim)]

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_cpu(self) -> bool:
        """Always True: gradviz computes on the CPU."""
        return True

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (``numel() * itemsize``), as ``torch.Tensor.nbytes``."""
        return int(self._data.nbytes)

    @property
    def itemsize(self) -> int:
        """Bytes per element, as ``torch.Tensor.itemsize``."""
        return int(self._data.itemsize)

    @property
    def layout(self):
        """``gradviz.strided``: every gradviz tensor is dense and strided."""
        return strided

    # the other layouts and backends torch code asks about: none of them in gradviz
    is_sparse = is_sparse_csr = is_quantized = is_meta = is_mkldnn = is_nested = False

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return False  # gradviz has no complex dtypes

    def data_ptr(self) -> int:
        """The address of the tensor's first element (views share their base's memory)."""
        return int(self._data.__array_interface__["data"][0])

    def untyped_storage(self):
        """The memory the elements live in, shared with every view of this tensor
        (:class:`gradviz.storage.UntypedStorage`)."""
        return UntypedStorage(self._data)

    def storage(self) -> TypedStorage:
        """The memory the elements live in, read as elements of the dtype
        (:class:`gradviz.storage.TypedStorage`). PyTorch deprecates it for
        ``untyped_storage()`` and warns the first time in a process; so does gradviz."""
        global _typed_storage_warned
        if not _typed_storage_warned:
            _typed_storage_warned = True
            warnings.warn(_TYPED_STORAGE_WARNING, UserWarning, stacklevel=2)
        return TypedStorage(self._data, self.dtype, self.device)

    def is_pinned(self, device=None) -> bool:
        """False: pinned memory is for copies to an accelerator, which gradviz has none of."""
        return False

    def pin_memory(self, device=None) -> Tensor:
        """PyTorch's error on a machine without an accelerator: there is nothing to pin for."""
        raise RuntimeError("Cannot access accelerator device when none is available.")

    def is_shared(self) -> bool:
        """Whether the memory is shared with processes forked after ``share_memory_()``."""
        return in_shared_memory(self._data)

    def apply_(self, callable) -> Tensor:  # noqa: A002  (torch's name)
        """Replace each element by ``callable(element)``, called on a Python number, in place;
        the results are cast to the dtype (truncated for integers), and the version counter is
        left as it was, as in PyTorch. A Python call per element,
        as in PyTorch, which documents it as slow: for anything but small tensors, write the
        function with tensor ops."""
        if self.requires_grad:
            raise RuntimeError("Can't call apply_() on Variable that requires grad. Use "
                               "var.detach().apply_() instead.")
        values = [callable(value) for value in self._data.ravel().tolist()]
        np.copyto(self._data, np.asarray(values).reshape(self._data.shape), casting="unsafe")
        return self  # PyTorch leaves the version as it was: so does gradviz

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the memory is row-major dense, or dense in ``memory_format``'s layout
        (Note [Memory formats] in ``gradviz/_memory_format.py``)."""
        if memory_format is None:
            return bool(self._data.flags.c_contiguous)
        return _memory_format.is_laid_out(self._data, _memory_format.check(memory_format, "is_contiguous"))

    def ndimension(self) -> int:
        return self._data.ndim

    def cpu(self) -> Tensor:
        return self

    def cuda(self, device=None, non_blocking=False) -> Tensor:
        """``x.cuda()``: gradviz has no GPU, so torch's CPU-only error."""
        check_device("cuda" if device is None or isinstance(device, int) else device)
        return self

    def get_device(self) -> int:
        return -1

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # ---- autograd state -------------------------------------------------------------
    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (its ``_base``), as ``torch.Tensor._is_view``."""
        return self._base is not None

    @property
    def grad_fn(self):
        """The node that made this tensor (None for a leaf). Reading it for a view whose base
        changed in a way autograd cannot follow raises PyTorch's error (Note [Views after their
        base changed] in gradviz_ext/_engine.py); gradviz's own code reads the stored node."""
        node = _GRAD_FN_FIELD.__get__(self)
        if type(node) is _engine.ChangedViewError:
            raise RuntimeError(node.message)
        return node

    @grad_fn.setter
    def grad_fn(self, node) -> None:
        _GRAD_FN_FIELD.__set__(self, node)

    @property
    def requires_grad(self) -> bool:
        if self._requires_grad or _engine.stored_grad_fn(self) is not None:
            return True
        base = self._base  # Note [Views' requires_grad] (gradviz_ext/_ops.py)
        return base is not None and (base._requires_grad or base.grad_fn is not None)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        # torch words the dtype error differently for the setter, the method and factories
        if not isinstance(value, (bool, np.bool_)):
            raise RuntimeError(f"requires_grad must be a bool, got {type(value).__name__} (write "
                               "x.requires_grad = True or False)")
        self._set_requires_grad(value, "only Tensors of floating point and complex dtype")

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set whether autograd records operations on this leaf tensor (in place)."""
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TypeError("requires_grad_(): argument 'requires_grad' (position 1) must be bool, "
                            f"not {type(requires_grad).__name__}")
        return self._set_requires_grad(requires_grad, "only Tensors of floating point dtype")

    def _set_requires_grad(self, requires_grad, dtype_phrase) -> Tensor:
        fn = _engine.stored_grad_fn(self)
        # a view made under no_grad whose base then changed is still a leaf to this check
        if fn is not None and not (type(fn) is _engine.ChangedViewError
                                   and fn.view_node_name is None):
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"{dtype_phrase} can require gradients (got {self.dtype})")
        if (requires_grad and self._version_counter.inference
                and not _engine.is_inference_mode_enabled()):
            raise RuntimeError(_INFERENCE_REQUIRES_GRAD_MESSAGE)
        self._requires_grad = bool(requires_grad)
        return self

    def is_inference(self) -> bool:
        """Whether this is an inference tensor: made inside ``inference_mode()`` (or a view of
        one). Outside inference mode it cannot be saved for backward, written in place or made
        to require grad; ``clone()`` gives a normal tensor (Note [Inference tensors] in
        ``gradviz_ext/_engine.py``).

        Examples
        --------
        >>> import gradviz as torch
        >>> with torch.inference_mode():
        ...     x = torch.ones(2)
        >>> x.is_inference(), x[:1].is_inference(), x.clone().is_inference()
        (True, True, False)
        """
        return self._version_counter.inference

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None  # raises as PyTorch does for a view whose base changed

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        """How many times this tensor (or a view sharing its storage) was modified in place."""
        counter = self._version_counter
        if counter.inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return counter.value

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
        if value is None and _engine.stored_grad_fn(self) is not None and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return value

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            _check_assigned_grad(self, value)
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
        node = _engine.stored_grad_fn(self)
        if type(node) is _engine.ChangedViewError and node.view_node_name is None:
            return  # made under no_grad, its base changed since: a leaf here, as in PyTorch
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
    def data(self) -> Tensor:
        """A tensor sharing storage with this one, outside the graph and with its own version
        counter (as in PyTorch: writes through ``.data`` are invisible to autograd's checks);
        an inference tensor's ``.data`` is one too."""
        out = _wrap(self._data)
        out._version_counter.inference = self._version_counter.inference
        return out

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
        self._data = value._data

    def detach(self) -> Tensor:
        """A new tensor sharing storage (and version counter) with this one, with no history."""
        return _wrap(self._data, version_counter=self._version_counter)

    def detach_(self) -> Tensor:
        """Detach this tensor from the graph in place; a view cannot be (use ``detach()``)."""
        if self._base is not None:
            raise RuntimeError(_DETACH_VIEW_MESSAGE)
        self.grad_fn = None
        self._requires_grad = False
        self._output_nr = 0
        return self

    # Tensor.backward is autograd's: gradviz/autograd/_functional.py attaches it at import
    # (install_methods), as the ops layer attaches theirs; core cannot import autograd.

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
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self.requires_grad:
            _warn_once("scalar", _SCALAR_CONVERSION_WARNING)
        return float(self.item())

    def __int__(self) -> int:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:  # np.array(w) goes through numpy() in torch, with its error
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if dtype is not None:
            return self._data.astype(dtype)
        return self._data

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A numpy ufunc applied to a tensor (``np.exp(t)``) gives a tensor, as in PyTorch
        (bool results as uint8, PyTorch's legacy rule)."""
        array = np.asarray(array)
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        return _wrap(array)

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment.  If you were attempting to deepcopy a module, this may "
                "be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        rebuild, args = self.__reduce_ex__(4)
        copied = rebuild(*args)
        memo[id(self)] = copied
        grad = _GRAD_SLOT.__get__(self)
        if grad is not None:
            _GRAD_SLOT.__set__(copied, grad.__deepcopy__(memo))
        return copied

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._data.shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        return _format(self)

    def __format__(self, format_spec: str) -> str:
        # like torch: a 0-d tensor formats as its Python number (f"{loss:.4f}")
        if self._data.ndim == 0 and type(self) is Tensor:
            return self._data.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __reduce_ex__(self, protocol):
        # a saved non-leaf (torch.save(y * 2)) loads as a leaf that requires grad, as in torch
        return (_rebuild, (self._data.copy(), self.requires_grad))


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


_SCALAR_CONVERSION_WARNING = (
    "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
    "Consider using tensor.detach() first.")
_WARNED = set()


def _warn_once(key, message, stacklevel=3):
    """A UserWarning given once per process, like PyTorch's ``TORCH_WARN_ONCE``."""
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


def _check_assigned_grad(tensor, grad):
    """PyTorch's checks on ``tensor.grad = grad``: a tensor of the same shape and dtype."""
    if not isinstance(grad, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                        f"{type(grad).__name__}")
    if grad._data.shape != tensor._data.shape:
        raise RuntimeError(
            f"attempting to assign a gradient of size '{list(grad._data.shape)}' to a tensor of "
            f"size '{list(tensor._data.shape)}'. Please ensure that the gradient and the tensor "
            "are the same size")
    if grad._data.dtype != tensor._data.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{C_TYPE_NAMES[grad.dtype.name]}' to a "
            f"tensor with grad_dtype '{TYPE_WORDS[tensor.dtype.name]}'. The gradient must match "
            "the tensor's grad_dtype (defaults to the tensor's dtype).")


# how PyTorch's messages name dtypes: C++ type names ("expected m1 and m2 to have the same
# dtype, but got: double != float") and scalar type words ("Found dtype Long but expected Float")
C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
                "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                "uint8": "unsigned char", "bool": "bool"}
TYPE_WORDS = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
              "bool": "Bool", "float32": "Float", "float64": "Double", "float16": "Half"}


def _rebuild(array, requires_grad):
    out = _wrap(array)
    out._requires_grad = requires_grad
    return out


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a gradviz tensor. Mirrors ``torch.is_tensor``."""
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
    """Interpreted engine: a TensorBase field (``grad``, ``grad_fn``) is a plain instance
    attribute, kept in __dict__."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        return obj.__dict__.get(self.name)

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value


# the storage behind Tensor.grad and Tensor.grad_fn: C slots (compiled engine) or the
# instance dict
_GRAD_SLOT = _engine.TensorBase.__dict__.get("grad") or _InstanceSlot("grad")
_GRAD_FN_FIELD = _engine.TensorBase.__dict__.get("grad_fn") or _InstanceSlot("grad_fn")
_DETACH_VIEW_MESSAGE = (
    "Can't detach views in-place. Use detach() instead. If you are using "
    "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, "
    "gradients are views of DDP buckets, and hence detach_() cannot be called on these "
    "gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
    "torch/optim/optimizer.py as the solution.")
_INFERENCE_REQUIRES_GRAD_MESSAGE = (
    "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
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


_make_tensor_as_laid_out = _ext_ops.make_tensor_as_laid_out


def _wrap_converted(array, source):
    """``_wrap(array)`` for ``array`` converted from ``source``: when both have no elements
    and ``source`` is a numpy array or a Tensor of the same shape, the tensor takes the
    source's strides (in elements), as torch.tensor, torch.from_numpy and torch.as_tensor
    keep them, even numpy's all-zero ones (Note [Empty tensors' strides] in
    gradviz_ext/_ops.py); otherwise a new tensor's."""
    if array.size == 0:
        data = source._data if isinstance(source, Tensor) else source
        if isinstance(data, np.ndarray) and data.shape == array.shape:
            return _make_tensor_as_laid_out(_memory_format.with_strides_of(array, data))
    return _make_tensor(array)


def _legacy_array(args) -> np.ndarray:
    """The array behind ``Tensor(*args)`` (torch's legacy constructor)."""
    default = _dtypes.get_default_dtype().numpy
    if not args:
        return np.zeros((0,), dtype=default)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0]._data
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or (
            len(args) == 1 and isinstance(args[0], Size)):
        shape = tuple(int(a) for a in (args[0] if isinstance(args[0], Size) else args))
        for size in shape:
            if size < 0:
                raise RuntimeError(
                    f"Trying to create tensor with negative dimension {size}: {list(shape)}")
        return np.zeros(shape, dtype=default)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, (float, bool, complex)) or np.isscalar(data):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return _to_array(data, _dtypes.get_default_dtype())
    raise TypeError("new() received an invalid combination of arguments: pass sizes as ints or "
                    "one sequence of data")


def _to_array(data, dtype=None) -> np.ndarray:
    """Convert Python data or a numpy array to a numpy array with torch's default dtypes."""
    if dtype is not None:
        dtype = as_dtype(dtype)
    if isinstance(data, Tensor):
        array = data._data
    elif data is None:
        array = np.zeros((0,), dtype=_dtypes.get_default_dtype().numpy)
    else:
        if isinstance(data, (list, tuple)):
            data = _scalars_for_tensors(data)
        try:
            array = np.asarray(data)
        except ValueError:
            raise _sequence_error(data) from None
        if array.dtype.kind == "O" and not isinstance(data, (np.ndarray, np.generic)):
            converted = _big_ints_as_floats(data, dtype)
            if converted is not None:
                data, array = converted, np.asarray(converted)
        if (array.dtype.kind in "OUS" or array.dtype == np.uint64) and not isinstance(
                data, (np.ndarray, np.generic)):
            raise _sequence_error(data)
        if dtype is None and not isinstance(data, (np.ndarray, np.generic)):
            # Python data: floats become the default float dtype, ints int64, like torch;
            # numpy scalars inside keep their own dtype. With an explicit dtype, convert once
            # (float64 -> float32 -> float64 loses digits).
            with np.errstate(over="ignore"):  # 1e40 becomes inf in float32, silently as torch
                if isinstance(data, (list, tuple)):
                    if array.dtype.kind in "fiu":
                        array = array.astype(_sequence_dtype(data))
                elif array.dtype.kind == "f":  # a range, a Python number, ...
                    array = array.astype(_dtypes.get_default_dtype().numpy)
                elif array.dtype.kind in "iu":
                    array = array.astype(np.int64)
    if dtype is not None and dtype.numpy.kind in "iu" and array.dtype.kind in "fiu" and array.size \
            and not isinstance(data, (Tensor, np.ndarray, np.generic)):
        _check_integer_range(array, dtype.numpy)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype is not None:
            array = array.astype(dtype.numpy, copy=False)
        elif array.dtype not in _SUPPORTED_NUMPY:
            array = array.astype(from_numpy(array.dtype).numpy)
    return array


def _check_integer_range(array, dtype):
    """PyTorch's check of Python numbers made an integer tensor (``tensor([nan], dtype=int64)``,
    ``tensor([300], dtype=uint8)``): a value outside the dtype's range, or NaN, is an error rather
    than the wrapped or undefined integer a numpy cast gives. An unsigned dtype takes a negative
    int no larger than its maximum, which wraps (-1 is 255 in uint8), as torch does."""
    info = np.iinfo(dtype)
    low = -info.max if info.min == 0 and array.dtype.kind in "iu" else info.min
    with np.errstate(invalid="ignore"):
        fits = (array >= low) & (array <= info.max)
    if not fits.all():
        value = array[~fits].flat[0]
        raise RuntimeError(
            f"value cannot be converted to type {dtype.name} without overflow: {value} is "
            f"outside [{info.min}, {info.max}], the range of {dtype.name}; convert the values in "
            f"range first (nan_to_num, clamp) or choose a wider dtype")


def _big_ints_as_floats(data, dtype):
    """``data`` with each integer beyond int64 made a Python float, when the tensor's dtype
    (given, or inferred: a float beside it) is not an integer one: torch reads
    ``[1.5, 2 ** 70]`` as a float32 tensor. Raises torch's ValueError when that dtype is an
    integer one, OverflowError ("int too large to convert to float") beyond float's range;
    None when ``data`` holds no such integer."""
    def is_big(item):
        return (isinstance(item, int) and not isinstance(item, bool)
                and not -2 ** 63 <= item < 2 ** 63)

    def convert(item):
        if isinstance(item, (list, tuple)):
            return [convert(child) for child in item]
        return float(item) if is_big(item) else item

    def any_big(item):
        if isinstance(item, (list, tuple)):
            return any(any_big(child) for child in item)
        return is_big(item)

    if not any_big(data) or _leaf_error_ignoring_big_ints(data) is not None:
        return None
    if dtype is not None:
        integral = not (dtype.is_floating_point or dtype.is_complex or dtype is _dtypes.bool)
    else:
        integral = not isinstance(data, (list, tuple)) or _sequence_dtype(data).kind in "iub"
    if integral:
        raise ValueError("Overflow when unpacking long long")
    return convert(data)


def _leaf_error_ignoring_big_ints(data):
    error = _leaf_error(data)
    return None if isinstance(error, ValueError) else error


def _sequence_dtype(data) -> np.dtype:
    """The dtype torch infers for nested Python data: the promotion of its elements' types,
    where a Python float counts as the default dtype, an int as int64, and a numpy scalar or
    a tensor as its own dtype."""
    kinds = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, np.generic):
            kinds.add(from_numpy(item.dtype))
        elif isinstance(item, Tensor):
            kinds.add(item.dtype)
        elif isinstance(item, bool):
            kinds.add(_dtypes.bool)
        elif isinstance(item, int):
            kinds.add(_dtypes.int64)
        else:
            kinds.add(_dtypes.get_default_dtype())
    result = _dtypes.get_default_dtype() if not kinds else None  # [] is a float tensor
    for kind in kinds:
        result = kind if result is None else _dtypes._promote(result, kind)
    return result.numpy


def _scalars_for_tensors(data):
    """``data`` with each tensor inside replaced by its one number (a numpy scalar of its dtype),
    as torch reads ``[tensor(1.5), tensor([2.5])]``; ``data`` itself when it holds no tensor."""
    changed = False
    items = []
    for item in data:
        if isinstance(item, Tensor):
            if item._data.size != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            item = item._data.reshape(-1)[0]
            changed = True
        elif isinstance(item, (list, tuple)):
            converted = _scalars_for_tensors(item)
            changed = changed or converted is not item
            item = converted
        items.append(item)
    return items if changed else data


def _leaf_error(data) -> Exception | None:
    """torch's error for a leaf that is not a number (it reads every leaf's type before the
    shape): a string, an object of another type, an integer beyond int64."""
    stack = [data]
    has_float = False
    big_int = False
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            return TypeError("new(): invalid data type 'str'")
        elif isinstance(item, (bool, np.generic, Tensor)):
            continue
        elif isinstance(item, int):
            big_int = big_int or not -2 ** 63 <= item < 2 ** 63
        elif isinstance(item, float):
            has_float = True
        else:
            return RuntimeError(f"Could not infer dtype of {type(item).__name__}")
    if big_int and not has_float:
        return ValueError("Overflow when unpacking long long")
    return None


def _sequence_error(data) -> Exception:
    """torch's error for data that is not numbers in nested lists of equal lengths: a leaf
    that is not a number (:func:`_leaf_error`), else the first length that differs ("expected
    sequence of length 2 at dim 1 (got 1)"), found the way torch finds it: the shape follows
    the first elements."""
    error = _leaf_error(data)
    if error is not None:
        return error
    shape = []
    item = data
    while isinstance(item, (list, tuple)):
        shape.append(len(item))
        if not item:
            break
        item = item[0]

    def check(item, dim):
        if dim == len(shape):
            if isinstance(item, (list, tuple)):
                return TypeError(f"'{type(item).__name__}' object cannot be interpreted as a number")
            return None
        if not isinstance(item, (list, tuple)):
            return TypeError("not a sequence")
        if len(item) != shape[dim]:
            return ValueError(
                f"expected sequence of length {shape[dim]} at dim {dim} (got {len(item)})")
        for child in item:
            error = check(child, dim + 1)
            if error is not None:
                return error
        return None

    return check(data, 0) or TypeError(
        f"could not build a tensor from {type(data).__name__}: the elements must be numbers or "
        "nested lists of numbers of equal lengths")


_ext_ops.install(Tensor, _dtypes._BY_NUMPY)

_SUPPORTED_NUMPY = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16,
                                           np.int32, np.int64, np.uint8, np.bool_)}


def _int_arg(value, name: str) -> int:
    """An int argument (a dim, a shift) as an int: a Python or numpy integer, or a one-element
    integer tensor (``__index__``), as in PyTorch; a float, str, None or bool is a TypeError,
    never truncated or taken as 1."""
    if type(value) is int:
        return value
    if not isinstance(value, (bool, np.bool_)) and hasattr(type(value), "__index__"):
        try:
            return value.__index__()
        except TypeError:
            pass
    raise TypeError(f"argument '{name}' must be int, not {type(value).__name__}: pass the "
                    f"{name} as an integer")


def _not_a_tensor(value, op: str, name: str = "input") -> TypeError:
    """PyTorch's TypeError where an op takes a tensor and gets a number, a list, None... (rather
    than the AttributeError of the first ``.dtype`` the op reads); the caller checks
    ``isinstance(value, Tensor)`` inline, which costs less than a call on the ops' hot path."""
    return TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(value).__name__}")


def _wrap_dim(dim: int, ndim: int) -> int:
    if type(dim) is not int:
        dim = _int_arg(dim, "dim")
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

