"""Printing tensors: a port of ``torch/_tensor_str.py`` (and ``set_printoptions``), so that a
tensor prints exactly as PyTorch prints it, line breaks and summarization included."""

from __future__ import annotations

import math

import numpy as np

from gradviz_ext import engine as _engine

from . import dtypes as _dtypes

__all__ = ["set_printoptions"]


class _PrintOptions:
    """torch's ``PRINT_OPTS``."""

    precision = 4  # digits after the point
    threshold = 1000  # more elements than this are summarized with "..."
    edgeitems = 3  # elements kept at each end of a summarized dimension
    linewidth = 80
    sci_mode = None  # None: chosen from the values


_OPTS = _PrintOptions()
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """Set how tensors print, as ``torch.set_printoptions``.

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.set_printoptions(precision=2)
    >>> torch.tensor([1.12345])
    tensor([1.12])
    >>> torch.set_printoptions(profile="default")
    """
    if profile is not None:
        (_OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth) = _PROFILES[profile]
    if precision is not None:
        _OPTS.precision = precision
    if threshold is not None:
        _OPTS.threshold = threshold
    if edgeitems is not None:
        _OPTS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTS.linewidth = linewidth
    _OPTS.sci_mode = sci_mode


class _Formatter:
    """torch's ``_Formatter``: one style (integral, fixed or scientific) and one width for
    every element, chosen from the nonzero finite values."""

    def __init__(self, values: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            self.max_width = max([1] + [len(f"{v}") for v in flat.tolist()])
            return
        as_double = flat.astype(np.float64)
        finite = as_double[np.isfinite(as_double) & (as_double != 0)]
        if finite.size == 0:
            return
        magnitudes = np.abs(finite)
        smallest, largest = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if _OPTS.sci_mode is None:
            self.sci_mode = bool(largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4)
        else:
            self.sci_mode = bool(_OPTS.sci_mode)
        numbers = finite.tolist()
        if self.sci_mode:
            self.max_width = max(len(f"{v:.{_OPTS.precision}e}") for v in numbers)
        elif self.int_mode:
            self.max_width = max(len(f"{v:.0f}") + 1 for v in numbers)
        else:
            self.max_width = max(len(f"{v:.{_OPTS.precision}f}") for v in numbers)

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{_OPTS.precision}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{_OPTS.precision}f}"
        else:
            text = f"{value}"
        return (self.max_width - len(text)) * " " + text


def _summarized(data: np.ndarray) -> np.ndarray:
    """The elements that a summarized print shows (torch's ``get_summarized_data``)."""
    if data.ndim == 0:
        return data
    if data.ndim == 1:
        if data.shape[0] > 2 * _OPTS.edgeitems:
            return np.concatenate((data[:_OPTS.edgeitems], data[-_OPTS.edgeitems:]))
        return data
    if data.shape[0] > 2 * _OPTS.edgeitems:
        rows = list(range(_OPTS.edgeitems)) + list(range(data.shape[0] - _OPTS.edgeitems, data.shape[0]))
    else:
        rows = range(data.shape[0])
    return np.stack([_summarized(data[i]) for i in rows])


def _vector_str(data, indent, summarize, formatter):
    element_length = formatter.max_width + 2
    per_line = max(1, math.floor((_OPTS.linewidth - indent) / element_length))
    if summarize and data.shape[0] > 2 * _OPTS.edgeitems:
        items = ([formatter.format(v) for v in data[:_OPTS.edgeitems].tolist()] + [" ..."]
                 + [formatter.format(v) for v in data[-_OPTS.edgeitems:].tolist()])
    else:
        items = [formatter.format(v) for v in data.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(data, indent, summarize, formatter):
    if data.ndim == 0:
        return formatter.format(data.item())
    if data.ndim == 1:
        return _vector_str(data, indent, summarize, formatter)
    size = data.shape[0]
    if summarize and size > 2 * _OPTS.edgeitems:
        slices = ([_nested_str(data[i], indent + 1, summarize, formatter) for i in range(_OPTS.edgeitems)]
                  + ["..."]
                  + [_nested_str(data[i], indent + 1, summarize, formatter)
                     for i in range(size - _OPTS.edgeitems, size)])
    else:
        slices = [_nested_str(data[i], indent + 1, summarize, formatter) for i in range(size)]
    return "[" + ("," + "\n" * (data.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        # measured as PyTorch measures "dtype=torch.float64", so that the line breaks fall
        # where torch's do once the module name is read as "torch"
        width = len(suffix.replace("gradviz", "torch"))
        if last_line_len + width + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + width
        else:
            parts.append(", " + suffix)
            last_line_len += width + 2
    parts.append(")")
    return "".join(parts)


def _format(t) -> str:
    """``repr(t)``, as torch's ``_str_intern`` writes it for a CPU tensor."""
    data = t._data
    dtype = t.dtype
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if data.size == 0:
        if data.ndim != 1:
            suffixes.append(f"size={tuple(data.shape)}")
        if dtype is not _dtypes.get_default_dtype():
            suffixes.append(f"dtype=gradviz.{dtype.name}")
        body = "[]"
    else:
        if dtype not in (_dtypes.get_default_dtype(), _dtypes.int64, _dtypes.bool):
            suffixes.append(f"dtype=gradviz.{dtype.name}")
        summarize = data.size > _OPTS.threshold
        formatter = _Formatter(_summarized(data) if summarize else data,
                               dtype.is_floating_point)
        body = _nested_str(data, indent, summarize, formatter)
    node = _engine.stored_grad_fn(t)  # Tensor.grad_fn raises for a view whose base changed
    if node is not None:
        # PyTorch's repr prints <Invalid> when reading grad_fn raises (a view whose base changed)
        invalid = type(node) is _engine.ChangedViewError
        suffixes.append(f"grad_fn=<{'Invalid' if invalid else _engine.display_name(node)}>")
    elif t.requires_grad:  # a view under no_grad of a base that requires grad too
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
