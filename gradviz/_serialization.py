"""``gradviz.save`` and ``gradviz.load``: tensors, state dicts and other Python objects to a
file, as ``torch.save``/``torch.load`` (pickle underneath; the files are gradviz's own)."""

from __future__ import annotations

import os
import pickle

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


def load(f, map_location=None, pickle_module=pickle, *, weights_only=None, mmap=None, **kwargs):
    """Read an object written by :func:`save` (``map_location`` may only name the CPU)."""
    from ._tensor import check_device

    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        check_device(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return pickle_module.load(file)
    return pickle_module.load(f)
