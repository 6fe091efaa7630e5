"""``gradviz.storage``: ``UntypedStorage``, the memory a tensor's elements live in, as
``torch.UntypedStorage`` (what ``x.untyped_storage()`` returns), and ``TypedStorage``, the same
memory read as elements of the tensor's dtype (what the deprecated ``x.storage()`` returns).

Code reads a storage to tell whether two tensors share memory (``a.untyped_storage().data_ptr()
== b.untyped_storage().data_ptr()``, or ``==`` of the storages), and how much memory a tensor
keeps alive (``x[0].untyped_storage().nbytes()`` is the whole base's, not the view's). A
gradviz tensor's memory is a numpy buffer: views of one tensor are numpy views of it, so the
storage is the array that owns the buffer, found by following ``.base``. This is the minimal,
honest part of PyTorch's storage API: the size in bytes, the address of the first byte, the
bytes themselves (``tolist``, printing), and equality of two tensors' storages; PyTorch's
resizing, sharing and file-backed storages, and its ``device`` (always the CPU here), are not
there.

Two storages are equal when they are the same memory. In PyTorch they are equal when they are
the same storage object, which differs in one case: ``torch.from_numpy(x.numpy())`` makes a new
storage over ``x``'s memory (same ``data_ptr()``, yet unequal to ``x``'s); in gradviz the two
are one array's memory, so equal.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["TypedStorage", "UntypedStorage"]


def _owner(array: np.ndarray) -> np.ndarray:
    """The array that owns the memory ``array`` views (``array`` itself when it owns it). A
    strided view (``as_strided``: diagonal, unfold) has a numpy helper object between it and
    its base, which keeps the base as ``.base`` too."""
    owner = array
    base = array.base
    while base is not None:
        if isinstance(base, np.ndarray):
            owner = base
        base = getattr(base, "base", None)
    return owner


def shared_copy(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` in anonymous shared memory (``MAP_SHARED``): a process forked after
    the copy reads and writes the same bytes (``x.share_memory_()``)."""
    buffer = mmap.mmap(-1, max(array.nbytes, 1))
    out = np.frombuffer(buffer, dtype=array.dtype, count=array.size).reshape(array.shape)
    np.copyto(out, array)
    return out


def in_shared_memory(array: np.ndarray) -> bool:
    """Whether ``array``'s memory was made by :func:`shared_copy`."""
    base = _owner(array).base
    return isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)


class UntypedStorage:
    """The bytes behind a tensor and every view of it: ``x.untyped_storage()``.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.arange(12.0).reshape(3, 4)
    >>> s = x[1:, 1:].untyped_storage()
    >>> s.nbytes(), s.data_ptr() == x.data_ptr(), s == x.untyped_storage()
    (48, True, True)
    >>> x.clone().untyped_storage() == s
    False
    """

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray):
        self._array = _owner(array)

    def nbytes(self) -> int:
        """The storage's size in bytes (the whole buffer, whatever part a view uses)."""
        return int(self._array.nbytes)

    def size(self) -> int:
        """The size in elements, which for an untyped storage are bytes: ``nbytes()``."""
        return self.nbytes()

    __len__ = size

    def element_size(self) -> int:
        return 1

    def data_ptr(self) -> int:
        """The address of the storage's first byte (a view's ``data_ptr()`` may be past it)."""
        return int(self._array.__array_interface__["data"][0])

    def tolist(self) -> list:
        """The bytes, as integers."""
        return self._bytes().tolist()

    def _bytes(self) -> np.ndarray:
        return self._array.reshape(-1, order="A").view(np.uint8)

    def __eq__(self, other) -> bool:
        return isinstance(other, UntypedStorage) and other._array is self._array

    def __hash__(self) -> int:
        return hash(id(self._array))

    def __repr__(self) -> str:
        lines = [f" {value}" for value in self._bytes().tolist()]
        lines.append(f"[{type(self).__module__}.{type(self).__name__}(device=cpu) of size {self.nbytes()}]")
        return "\n".join(lines)


class TypedStorage:
    """The memory behind a tensor and every view of it, read as elements of the tensor's dtype:
    ``x.storage()``, which PyTorch deprecates for ``x.untyped_storage()`` (and warns once per
    process, as gradviz does).

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([1.0, 2.0, 3.0])
    >>> s = x[1:].untyped_storage()
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     t = x[1:].storage()
    >>> t.size(), t.tolist(), t.data_ptr() == x.data_ptr()
    (3, [1.0, 2.0, 3.0], True)
    """

    __slots__ = ("_array", "dtype", "device")

    def __init__(self, array: np.ndarray, dtype, device):
        self._array = _owner(array)
        self.dtype = dtype
        self.device = device

    def _elements(self) -> np.ndarray:
        return self._array.reshape(-1, order="A").view(np.uint8).view(self.dtype.numpy)

    def size(self) -> int:
        """The size in elements of the dtype (the whole buffer, whatever part a view uses)."""
        return int(self._array.nbytes // self.element_size())

    __len__ = size

    def element_size(self) -> int:
        return int(np.dtype(self.dtype.numpy).itemsize)

    def nbytes(self) -> int:
        return int(self._array.nbytes)

    def data_ptr(self) -> int:
        """The address of the storage's first element (a view's ``data_ptr()`` may be past it)."""
        return int(self._array.__array_interface__["data"][0])

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self._array)

    def tolist(self) -> list:
        return self._elements().tolist()

    def __getitem__(self, index):
        if isinstance(index, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        size = self.size()
        if not -size <= index < size:
            raise IndexError(f"index {index} out of range for storage of size {size}")
        return self._elements()[index].item()

    def __repr__(self) -> str:
        lines = [f" {value}" for value in self.tolist()]
        lines.append(f"[{type(self).__module__}.{type(self).__name__}(dtype={self.dtype}, device=cpu) "
                     f"of size {self.size()}]")
        return "\n".join(lines)
