"""Tensor summaries: what events carry instead of whole tensors.

Note [Summary cost]
-------------------
A ``Recorder`` summarizes three or four tensors per node, so the summary is the recorder's
hot path (bench/instrument.py). ``summarize_reference`` is the readable definition: one numpy
pass per statistic, over a float64 copy of the finite entries. ``summarize`` returns exactly
the same dict, faster:

- **small tensors** (at most ``SMALL_NUMEL`` entries, the common case in teaching graphs):
  one ``tolist()`` and plain Python arithmetic. A numpy call costs about a microsecond
  whatever the size; a Python float operation a few tens of nanoseconds. Sums replay numpy's
  own summation order (``_numpy_sum``) so that mean and norm are bit-identical to numpy's;
- **larger tensors**: one ``add.reduce`` first; a finite total means every entry is finite,
  so the NaN/Inf masks and the copy of the finite entries are skipped (five passes, not ten);
- anything else (NaN/Inf present, a sum that overflows, unusual dtypes) takes the reference;
- **the same tensor again**: a gradient is usually summarized three times (its producer's
  ``grads_out``, its consumer's ``grads_in`` at ``node_started`` and at ``node_finished``).
  A ``Recorder`` keeps a ``SummaryCache``: a tensor (of at most 1 MiB) whose bytes, shape
  and dtype are those of the last time gets a copy of the last summary. Comparing the bytes
  (not trusting the version counter, which writes through ``.numpy()`` do not move) keeps it
  exact; a copy and a compare of the bytes cost far less than a float64 copy and four
  reductions over it. The limit was 64 KiB, which left out every gradient of a small real
  model (a GPT block's activations are 128-512 KiB: bench/instrument.py ``--model gpt``); the
  copies the cache holds are bounded in total (16 MiB) as well as in number.

tests/instrument/test_summary.py checks ``summarize == summarize_reference`` on many arrays.
The one permitted difference: the sign of a zero ``min``/``max`` (numpy's own answer for
``[0.0, -0.0]`` depends on the array's length and the CPU's vector unit).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["summarize", "summarize_reference", "SummaryCache", "MAX_VALUES", "ALL_VALUES",
           "SMALL_NUMEL"]

# ``values``: every entry of a tensor of at most ALL_VALUES entries (a teaching graph's
# gradients, shown whole in the inspector and the saved page), else the first MAX_VALUES
MAX_VALUES = 6
ALL_VALUES = 32
# Up to about this many entries the Python path is faster than five numpy reductions (about
# 1 µs each, whatever the size) on the machine of bench/README.md;
# it must stay <= 128, the block that _numpy_sum replays without recursion, and <= ALL_VALUES.
SMALL_NUMEL = 32
# dtype kinds whose entries tolist() turns into Python floats, ints or bools
_SIMPLE_KINDS = frozenset("fiub")

_isfinite = math.isfinite
_sqrt = math.sqrt
_INF = math.inf


def summarize(tensor) -> dict | None:
    """Shape, dtype, min, max, mean, norm, NaN and Inf counts and the values: all of them for
    a tensor of at most ``ALL_VALUES`` (32) entries, else the first ``MAX_VALUES`` (6).

    Statistics are over the finite entries, and None for an empty tensor or a tensor with no
    finite entries. Non-finite numbers are the strings ``"nan"``, ``"inf"``, ``"-inf"``.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.instrument import summarize
    >>> summarize(torch.tensor([3.0, float("nan"), -4.0]))  # doctest: +NORMALIZE_WHITESPACE
    {'shape': [3], 'dtype': 'float32', 'numel': 3, 'nan': 1, 'inf': 0, 'min': -4.0,
     'max': 3.0, 'mean': -0.5, 'norm': 5.0, 'values': [3.0, 'nan', -4.0]}
    """
    if tensor is None:
        return None
    data = tensor._data
    size = data.size
    kind = data.dtype.kind
    if kind not in _SIMPLE_KINDS:
        return summarize_reference(tensor)
    if size == 1:  # a scalar: every loss, every sum; often the gradient of one
        value = data.item()
        if kind == "f":
            if _isfinite(value):
                # what _summarize_small computes for one entry: 0.0 + value normalizes -0.0
                return {"shape": list(data.shape), "dtype": tensor.dtype.name, "numel": 1,
                        "nan": 0, "inf": 0, "min": value, "max": value, "mean": 0.0 + value,
                        "norm": _num(_sqrt(value * value)), "values": [value]}
    if size <= SMALL_NUMEL:
        return _summarize_small(data, tensor.dtype.name, size, kind)
    return _summarize_large(tensor, data, size, kind)


def _summarize_small(data, dtype_name, size, kind):
    """Note [Summary cost]: a small tensor, in Python."""
    values = data.tolist() if data.ndim == 1 else data.ravel().tolist()
    if kind != "f":
        values = [float(v) for v in values]  # ints and bools, as astype(float64) converts them
    total = _numpy_sum(values)
    if _isfinite(total):  # then every entry is finite (a NaN or an Inf would show in the sum)
        finite = values
        nan = inf = 0
        first = values  # at most SMALL_NUMEL (<= ALL_VALUES) entries: all of them
    else:  # rare: NaN/Inf entries, or finite entries whose sum overflowed
        finite = [v for v in values if _isfinite(v)]
        nan = sum(1 for v in values if v != v)
        inf = size - len(finite) - nan
        total = _numpy_sum(finite)
        first = [_num(v) for v in values]
    count = len(finite)
    if not count:
        return {"shape": list(data.shape), "dtype": dtype_name, "numel": size, "nan": nan,
                "inf": inf, "min": None, "max": None, "mean": None, "norm": None,
                "values": first}
    # min()/max() of finite floats: numpy's answer, but for the sign of a zero (Note above)
    return {"shape": list(data.shape), "dtype": dtype_name, "numel": size, "nan": nan,
            "inf": inf, "min": min(finite), "max": max(finite), "mean": _num(total / count),
            "norm": _num(_sqrt(_numpy_sum([v * v for v in finite]))), "values": first}


def _numpy_sum(values):
    """``float(np.add.reduce(np.array(values)))`` for at most 128 floats, in Python.

    numpy starts from the identity (0.0) and adds a pairwise sum: below 8 entries one
    running sum; up to 128, eight interleaved running sums combined as a tree, then the
    remainder (``pairwise_sum`` in numpy's ``loops_utils.h.src``).
    """
    n = len(values)
    if n < 8:
        total = -0.0
        for value in values:
            total += value
        return 0.0 + total
    r0, r1, r2, r3, r4, r5, r6, r7 = values[:8]
    end = n - n % 8
    for i in range(8, end, 8):
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, n):
        total += values[i]
    return 0.0 + total


def _summarize_large(tensor, data, size, kind):
    """Note [Summary cost]: all entries finite, checked with one sum; else the reference."""
    flat = data.ravel()
    if kind == "f":
        flat = flat.astype(np.float64, copy=False)
        total = float(np.add.reduce(flat))
        if not _isfinite(total):  # a NaN or an Inf, or a sum that overflowed
            return summarize_reference(tensor)
    else:
        flat = flat.astype(np.float64)
        total = float(np.add.reduce(flat))
    return {
        "shape": list(data.shape), "dtype": tensor.dtype.name, "numel": size, "nan": 0, "inf": 0,
        "min": _num(np.minimum.reduce(flat)), "max": _num(np.maximum.reduce(flat)),
        "mean": _num(total / size), "norm": _num(_sqrt(float(np.add.reduce(flat * flat)))),
        "values": flat[:MAX_VALUES].tolist(),  # finite: no text needed
    }


def summarize_reference(tensor) -> dict | None:
    """The definition of :func:`summarize`, one numpy pass per statistic (Note [Summary cost]).

    Also the path for NaN/Inf, overflowing sums and dtypes other than float, int and bool.
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
        finite = data.reshape(-1).astype(np.float64)  # C order, as the mask above gives
    if finite.size:
        with np.errstate(over="ignore"):
            summary.update(min=_num(finite.min()), max=_num(finite.max()), mean=_num(finite.mean()),
                           norm=_num(np.sqrt(np.sum(finite * finite))))
    else:
        summary.update(min=None, max=None, mean=None, norm=None)
    shown = data.size if data.size <= ALL_VALUES else MAX_VALUES
    summary["values"] = [_num(v) for v in data.reshape(-1)[:shown].tolist()]
    return summary


def _num(value):
    """A JSON-safe number: NaN and infinities become strings."""
    value = float(value)
    if value != value:
        return "nan"
    if value == _INF:
        return "inf"
    if value == -_INF:
        return "-inf"
    return value


class SummaryCache:
    """Remembers the summaries of recent small tensors (Note [Summary cost]).

    A hit needs the same tensor object holding the same array with the same shape, dtype and
    bytes, so a cached summary is always the one :func:`summarize` would compute now. Each
    call returns a new dict (events never share objects). Holds at most ``size`` tensors of at
    most ``max_bytes`` each (larger ones are summarized every time) and ``budget`` bytes of
    copies in all (it starts again empty when either is reached); ``clear()`` drops them
    (the recorder does at the end of each backward pass).

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.instrument._summary import SummaryCache
    >>> cache = SummaryCache()
    >>> g = torch.tensor([1.0, 2.0])
    >>> first = cache.summarize(g)
    >>> cache.summarize(g) == first, cache.hits
    (True, 1)
    >>> with torch.no_grad():
    ...     _ = g.mul_(3)
    >>> cache.summarize(g)["max"], cache.hits
    (6.0, 1)
    """

    __slots__ = ("_entries", "_size", "_max_bytes", "_budget", "_held", "hits")

    def __init__(self, size: int = 64, max_bytes: int = 1 << 20, budget: int = 1 << 24):
        self._entries: dict = {}  # id(tensor) -> (tensor, array, shape, dtype, bytes, summary)
        self._size = size
        self._max_bytes = max_bytes
        self._budget = budget  # the most bytes all entries' copies may hold together
        self._held = 0
        self.hits = 0

    def summarize(self, tensor) -> dict | None:
        if tensor is None:
            return None
        data = tensor._data
        if data.nbytes > self._max_bytes:
            return summarize(tensor)  # not worth holding a copy of its bytes
        raw = data.tobytes()
        key = id(tensor)
        entry = self._entries.get(key)
        # The entry holds the tensor, so its id cannot be reused while it is here.
        if (entry is not None and entry[0] is tensor and entry[1] is data
                and entry[4] == raw and entry[2] == data.shape and entry[3] == data.dtype):
            self.hits += 1
            summary = entry[5]
        else:
            summary = summarize(tensor)
            if len(self._entries) >= self._size or self._held + len(raw) > self._budget:
                self._entries.clear()
                self._held = 0
            replaced = self._entries.get(key)
            if replaced is not None:
                self._held -= len(replaced[4])
            self._entries[key] = (tensor, data, data.shape, data.dtype, raw, summary)
            self._held += len(raw)
        copy = dict(summary)
        copy["shape"] = list(summary["shape"])
        copy["values"] = list(summary["values"])
        return copy

    def clear(self) -> None:
        self._entries.clear()
        self._held = 0
