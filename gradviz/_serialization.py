"""``gradviz.save`` and ``gradviz.load``: tensors, state dicts and other Python objects to a
file, as ``torch.save``/``torch.load`` (pickle underneath; the files are gradviz's own)."""

from __future__ import annotations

import os
import pickle

import numpy as np

from ._tensor import Tensor, check_device

__all__ = ["save", "load"]


def save(obj, f, pickle_module=pickle, pickle_protocol: int = 2, **kwargs) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file object).

    Examples
    --------
    >>> import io
    >>> import gradviz as torch
    >>> buffer = io.BytesIO()
    >>> torch.save({"w": torch.tensor([1.0, 2.0])}, buffer)
    >>> _ = buffer.seek(0)
    >>> torch.load(buffer)
    {'w': tensor([1., 2.])}
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            pickle_module.dump(obj, file, protocol=pickle_protocol)
    else:
        pickle_module.dump(obj, f, protocol=pickle_protocol)


# What ``weights_only`` loading accepts, as torch >= 2.6 by default: tensors, parameters and
# their dtypes, sizes and devices, in dicts, lists, tuples, sets, OrderedDicts and Counters of
# numbers, strings and bytes. A saved module, a numpy array or a namedtuple is refused.
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"), ("collections", "Counter"), ("builtins", "set"),
    ("builtins", "complex"), ("__builtin__", "set"), ("__builtin__", "complex"), ("_codecs", "encode"),
    ("gradviz._tensor", "_rebuild"), ("gradviz._tensor", "Size"), ("gradviz._tensor", "device"),
    ("gradviz.nn._module", "_rebuild_parameter"), ("gradviz.dtypes", "as_dtype"),
}
# the pieces of the numpy array inside a saved tensor; an array anywhere else is refused after
_ARRAY_GLOBALS = {("numpy", "dtype"), ("numpy", "ndarray"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy.core.multiarray", "_reconstruct")}

_WEIGHTS_ONLY_FAILED = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, do "
    "those steps only if you trust the source of the checkpoint. \n\t(1) In PyTorch 2.6, we changed "
    "the default value of the `weights_only` argument in `torch.load` from `False` to `True`. "
    "Re-running `torch.load` with `weights_only` set to `False` will likely succeed, but it can "
    "result in arbitrary code execution. Do it only if you got the file from a trusted source.\n\t"
    "(2) Alternatively, to load with `weights_only=True` please check the recommended steps in the "
    "following error message.\n\tWeightsUnpickler error: {}\n\nCheck the documentation of "
    "torch.load to learn more about types accepted by default with weights_only "
    "https://pytorch.org/docs/stable/generated/torch.load.html.")


class _WeightsUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS or (module, name) in _ARRAY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(_WEIGHTS_ONLY_FAILED.format(
            f"Unsupported global: GLOBAL {module}.{name} was not an allowed global by default."))


def _check_no_arrays(obj):
    """A numpy array outside a tensor is refused, as torch refuses it."""
    if isinstance(obj, (np.ndarray, np.generic)):
        raise pickle.UnpicklingError(_WEIGHTS_ONLY_FAILED.format(
            "Unsupported global: GLOBAL numpy.ndarray was not an allowed global by default."))
    if isinstance(obj, dict):
        for key, value in obj.items():
            _check_no_arrays(key)
            _check_no_arrays(value)
    elif isinstance(obj, (list, tuple, set)) and not isinstance(obj, Tensor):
        for value in obj:
            _check_no_arrays(value)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **kwargs):
    """Read an object written by :func:`save` (``map_location`` may only name the CPU).

    As torch (2.6 and later), ``weights_only`` is the default: tensors, state dicts and
    containers of numbers and strings load, anything else (a whole saved model, a numpy array)
    is a ``pickle.UnpicklingError`` unless ``weights_only=False``."""
    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        check_device(map_location)
    if weights_only is None:
        weights_only = pickle_module is None
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return _load(file, pickle_module, weights_only)
    return _load(f, pickle_module, weights_only)


def _load(file, pickle_module, weights_only):
    if not weights_only:
        return (pickle_module or pickle).load(file)
    if pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    try:
        obj = _WeightsUnpickler(file).load()
    except pickle.UnpicklingError as error:
        if str(error).startswith(_WEIGHTS_ONLY_FAILED[:30]):
            raise
        # bytes that are no pickle at all (a truncated or foreign file): torch's type, our words
        raise pickle.UnpicklingError(
            f"the file is not a checkpoint written by torch.save ({error}); check that it was saved "
            "completely and that this is the right file") from error
    _check_no_arrays(obj)
    return obj
