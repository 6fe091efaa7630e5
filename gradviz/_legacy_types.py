"""The legacy typed constructors of older tutorials: ``torch.FloatTensor(X_train)``,
``torch.LongTensor(labels)``, ``x.type(torch.FloatTensor)``, ``isinstance(x,
torch.LongTensor)``. Each is a class whose instances are the tensors of its dtype; calling it
makes one, like ``torch.Tensor(...)`` in that dtype."""

from __future__ import annotations

import numpy as np

from . import dtypes as _dtypes
from ._tensor import C_TYPE_NAMES, Tensor, _legacy_array, _wrap, _wrap_converted, check_device

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]


def _options(dtype):
    return (f"TensorOptions(dtype={C_TYPE_NAMES[dtype.name]}, device=cpu, layout=Strided, "
            "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))")


class tensortype(type):
    """The metaclass: ``isinstance(t, FloatTensor)`` asks for a float32 tensor."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args, device=None):
        check_device(device)
        if len(args) == 1 and isinstance(args[0], Tensor):
            if args[0].dtype is not cls.dtype:
                raise TypeError(f"expected {_options(cls.dtype)} (got {_options(args[0].dtype)})")
            return _wrap(args[0]._data)  # shares the data, as torch's
        array = _legacy_array(args)
        if isinstance(args[0] if args else None, np.ndarray) or array.dtype != cls.dtype.numpy:
            array = np.asarray(array).astype(cls.dtype.numpy)
        return _wrap_converted(array, args[0] if args else None)

    def __repr__(cls) -> str:
        return f"<class 'gradviz.{cls.__name__}'>"


def _make(name, dtype):
    doc = (f"The legacy constructor of {dtype.name} tensors: ``{name}(data)`` or "
           f"``{name}(*sizes)``; ``isinstance(t, {name})`` tests the dtype. "
           f"Mirrors ``torch.{name}``.")
    return tensortype(name, (), {"dtype": dtype, "__module__": "gradviz", "__qualname__": name,
                                 "__doc__": doc})


FloatTensor = _make("FloatTensor", _dtypes.float32)
DoubleTensor = _make("DoubleTensor", _dtypes.float64)
HalfTensor = _make("HalfTensor", _dtypes.float16)
LongTensor = _make("LongTensor", _dtypes.int64)
IntTensor = _make("IntTensor", _dtypes.int32)
ShortTensor = _make("ShortTensor", _dtypes.int16)
CharTensor = _make("CharTensor", _dtypes.int8)
ByteTensor = _make("ByteTensor", _dtypes.uint8)
BoolTensor = _make("BoolTensor", _dtypes.bool)
