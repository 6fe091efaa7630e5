"""Tensor summaries: what events carry instead of whole tensors."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["summarize", "MAX_VALUES"]

MAX_VALUES = 6


def summarize(tensor) -> dict | None:
    """Shape, dtype, min, max, mean, norm, NaN and Inf counts and the first few values.

    Statistics are None for an empty tensor or a tensor with no finite entries.
    """
    if tensor is None:
        return None
    data = tensor._data
    summary = {
        "shape": list(data.shape),
        "dtype": tensor.dtype.name,
        "numel": int(data.size),
    }
    if data.dtype.kind == "f":
        as64 = data.astype(np.float64, copy=False)
        finite_mask = np.isfinite(as64)
        nan = int(np.isnan(as64).sum())
        summary["nan"] = nan
        summary["inf"] = int(data.size - nan - int(finite_mask.sum()))
        finite = as64[finite_mask]
    else:
        summary["nan"] = summary["inf"] = 0
        finite = data.astype(np.float64)
    if finite.size:
        summary.update(min=_num(finite.min()), max=_num(finite.max()), mean=_num(finite.mean()),
                       norm=_num(np.sqrt(np.sum(finite * finite))))
    else:
        summary.update(min=None, max=None, mean=None, norm=None)
    summary["values"] = [_num(v) for v in data.reshape(-1)[:MAX_VALUES].tolist()]
    return summary


def _num(value):
    """A JSON-safe number: NaN and infinities become strings."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value
