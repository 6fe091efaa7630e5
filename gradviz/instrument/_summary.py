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
- **the same tensor again**: a gradient is usually summarized four times (its producer's
  ``grads_out``, the ``buffer_added`` that stores it, its consumer's ``grads_in`` at
  ``node_started`` and at ``node_finished``). A ``Recorder`` keeps a ``SummaryCache``: the
  same tensor holding the same array, with the same shape, dtype and version, in the same
  *epoch*, gets a copy of the last summary (Note [Summary epochs]).

Note [Summary epochs]
---------------------
The cache once compared a tensor's bytes with a copy kept from last time, to see writes the
version counter misses (``t.numpy()[0] = 1``). That copy and compare read every gradient
four times and were most of the debugger's cost on a real model (bench/instrument.py
``--model gpt``: 4.5x a plain backward). A write behind the version counter needs code the
engine does not control, and the engine knows when such code may run. So the cache keeps no
bytes: an entry is valid while its tensor, array, shape, dtype and version counter are
unchanged and no outside code ran since it was made. The recorder starts a new epoch
(``SummaryCache.new_epoch``) at each point where outside code may have run before it
summarizes: a hook (``prehook``, ``posthook``, a post-accumulate hook before
``grad_accumulated``), a saved-tensor unpack hook (``saved_unpacked``), a backward that is not
a built-in rule (``node_finished`` of a custom Function or any other node class), and, for a
debug session, each time control comes back from the user (``step``, ``step_event``,
``continue_``, and a ``when=`` breakpoint's predicate). The engine's own in-place writes (the
input buffer's sum, ``.grad`` accumulation) bump version counters. Built-in backward rules never
write into the gradients they receive. Between two of those points only engine code runs, so a
hit is exact. The entries hold references, not copies, bounded in count and in bytes, and are
dropped when the pass ends. tests/instrument/test_summary_epochs.py runs graphs that write
behind the version counter at each of those points and requires the same events as a
recorder without a cache. The one writer it cannot see is another thread that writes a
gradient while backward runs.

Note [Shared summaries]
-----------------------
A cache hit returns the very dict the first call made, not a copy, so the events of one pass
share summaries: a gradient's ``grads_out``, its ``buffer_added`` and its consumer's
``grads_in`` are one object. Summaries are read-only for every reader (the views, the widget,
traces, the doctor only read them; tests/instrument/test_summary_epochs.py checks that a pass's
summaries are unchanged when it ends). Copies cost more than their time: a summary is a dict
and two lists, GC-tracked objects that live as long as the session, and a debugged GPT step
made about 1,600 of them for hits alone; the collector's full collections come from such
survivors (bench/README.md, "Fewer objects per debugged pass").

Note [Summary kernel]
---------------------
The statistics of a large float32 or float64 array come from one compiled pass
(gradviz_ext/c/summary_stats.h): the sum and the sum of squares in numpy's own pairwise
order over the float64 values, the min and the max, with no float64 copy. The five numpy
passes it replaces cost about as much on an array in cache, and two to four times more on a
gradient just written (out of cache), which is what the debugger summarizes. A gradient that
is not C-contiguous (a product's transposed weight gradient, attention's permuted heads: a
third of a GPT step's summarized bytes) is copied once in C order, the order numpy sums its
ravel in, and takes the kernel too: 1.0 ms less per debugged GPT step than numpy's five
passes over a float64 copy.
tests/instrument/test_summary.py holds the kernel to numpy's sums bit for bit.

Note [Lazy summaries]
---------------------
In a debug session most summaries are never read: ``continue_()`` on a GPT step records about
650 events over about two million gradient entries, and a person then opens a few nodes. So
the session's recorder (``_SessionRecorder.lazy_summaries``) gives a tensor of more than
``SMALL_NUMEL`` entries a ``LazySummary``: a dict that computes its entries from the array it
holds the first time anything reads it (every read path: items, ``==``, ``len``, ``repr``,
json, copies, pickling). Reading it later gives the value at its event only if nothing wrote
the array in between, so each writer is accounted for:

- the engine writes in place only into a sum it made itself (the input buffer's second and
  later contributions) and into a leaf's ``.grad``: a ``buffer_added`` sum is summarized at
  once, and a ``.grad`` is what the user can reach (below);
- built-in backward rules never write into the gradients they receive or produce;
- code the engine does not control (hooks of every kind, a custom backward, saved-tensor unpack
  hooks) may write anything: at the ``node_started`` of a node that will run such code, before
  it runs, every pending summary is computed and the rest of the pass is summarized eagerly;
- the user, each time the session returns control (``DebugSession._notify``, and before a
  ``when=`` predicate): the pending summaries over the memory of the pass's initial gradients
  (the caller's) and of each leaf's ``.grad`` are computed then (``flush_reachable``; arrays
  share memory when they have the same owner at the end of their ``base`` chain); and before
  ``session.tensor()`` hands out a live tensor, all of them;
- passes that hand gradients to the user while they run (``autograd.grad``'s captures,
  ``backward(inputs=...)``) or keep them in a graph (``create_graph``) stay eager.

Everything else is an intermediate gradient only the session holds, so a summary computed when
read is the summary at its event. A ``gradviz.record()`` trace computes what is pending when
each pass ends (``Recorder.lazy_after_pass`` False): it may hold many passes, and pending
summaries would keep all their gradients alive (it defers a pass's events, bounded in bytes:
Note [Events when read] in _recorder.py).
tests/instrument/test_lazy_summaries.py writes at each of those points and requires the events
of an eager session; bench/README.md has the cost.

tests/instrument/test_summary.py checks ``summarize == summarize_reference`` on many arrays.
The one permitted difference: the sign of a zero ``min``/``max`` (numpy's own answer for
``[0.0, -0.0]`` depends on the array's length and the CPU's vector unit).
"""

from __future__ import annotations

import math

import numpy as np

from gradviz_ext._ops import array_address as _array_address
from gradviz_ext._ops import summary_stats as _summary_stats

__all__ = ["summarize", "summarize_array", "summarize_reference", "SummaryCache", "LazySummary",
           "MAX_VALUES", "ALL_VALUES", "SMALL_NUMEL"]

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
    return summarize_array(tensor._data, tensor.dtype.name)


def summarize_array(data, dtype_name: str) -> dict:
    """:func:`summarize` of a tensor holding ``data`` (a numpy array) with dtype ``dtype_name``."""
    size = data.size
    kind = data.dtype.kind
    if kind not in _SIMPLE_KINDS:
        return _reference(data, dtype_name)
    if size == 1:  # a scalar: every loss, every sum; often the gradient of one
        value = data.item()
        if kind == "f":
            if _isfinite(value):
                # what _summarize_small computes for one entry: 0.0 + value normalizes -0.0
                return {"shape": list(data.shape), "dtype": dtype_name, "numel": 1,
                        "nan": 0, "inf": 0, "min": value, "max": value, "mean": 0.0 + value,
                        "norm": _num(_sqrt(value * value)), "values": [value]}
    if size <= SMALL_NUMEL:
        return _summarize_small(data, dtype_name, size, kind)
    return _summarize_large(data, dtype_name, size, kind)


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


def _summarize_large(data, dtype_name, size, kind):
    """Note [Summary cost]: all entries finite, checked with one sum; else the reference."""
    original = data
    if kind == "f" and not data.flags.c_contiguous:
        # a transposed or sliced gradient: one copy in C order, the order numpy sums a ravel
        # in, and the kernel over it (Note [Summary kernel])
        data = np.ascontiguousarray(data)
    stats = _summary_stats(data)  # Note [Summary kernel]
    if stats is not None:
        total, squares, low, high = stats
        if not (_isfinite(total) and _isfinite(squares)):
            return _reference(original, dtype_name)  # NaN/Inf, or a sum that overflowed
        return {
            "shape": list(data.shape), "dtype": dtype_name, "numel": size, "nan": 0,
            "inf": 0, "min": low, "max": high, "mean": total / size, "norm": _sqrt(squares),
            "values": data.ravel()[:MAX_VALUES].tolist(),
        }
    flat = data.ravel()
    if kind == "f":
        flat = flat.astype(np.float64, copy=False)
        total = float(np.add.reduce(flat))
        if not _isfinite(total):  # a NaN or an Inf, or a sum that overflowed
            return _reference(original, dtype_name)
    else:
        flat = flat.astype(np.float64)
        total = float(np.add.reduce(flat))
    return {
        "shape": list(data.shape), "dtype": dtype_name, "numel": size, "nan": 0, "inf": 0,
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
    return _reference(tensor._data, tensor.dtype.name)


def _reference(data, dtype_name: str) -> dict:
    summary = {
        "shape": list(data.shape),
        "dtype": dtype_name,
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


def _owner(array):
    """The object that owns ``array``'s memory: the end of its ``base`` chain (a view's base
    array, or what an ``as_strided`` view or a buffer wraps). Arrays over the same memory
    share it (Note [Lazy summaries])."""
    while True:
        base = getattr(array, "base", None)
        if base is None:
            return array
        array = base


class LazySummary(dict):
    """A summary computed when it is first read (Note [Lazy summaries]).

    A plain ``dict`` to every reader: each way of reading it (items, keys, ``==``, ``len``,
    ``in``, ``repr``, ``json.dumps``, ``dict(...)``, copies, pickling) fills it first. It holds
    the array it describes until then.
    """

    __slots__ = ("_source", "_detail")

    def __init__(self, source, detail):
        # an array and its dtype's name, or another LazySummary and the shape of a reshape of
        # its memory. Until filled, the storage holds one marker entry: C code that reads a
        # dict's size directly (json's encoder writes "{}" for an empty one) then calls
        # items() instead.
        dict.__init__(self, pending=True)
        self._source = source
        self._detail = detail

    @property
    def pending(self) -> bool:
        """True until the summary is computed."""
        return self._source is not None

    def _fill(self):
        source = self._source
        if source is not None:
            if isinstance(source, LazySummary):
                summary = dict(source._fill(), shape=list(self._detail))
            else:
                summary = summarize_array(source, self._detail)
            dict.clear(self)
            dict.update(self, summary)
            self._source = self._detail = None
        return self

    def __getitem__(self, key):
        return dict.__getitem__(self._fill(), key)

    def get(self, key, default=None):
        return dict.get(self._fill(), key, default)

    def __contains__(self, key):
        return dict.__contains__(self._fill(), key)

    def __iter__(self):
        return dict.__iter__(self._fill())

    def __reversed__(self):
        return dict.__reversed__(self._fill())

    def __len__(self):
        return dict.__len__(self._fill())

    def keys(self):
        return dict.keys(self._fill())

    def values(self):
        return dict.values(self._fill())

    def items(self):
        return dict.items(self._fill())

    def __eq__(self, other):
        if isinstance(other, LazySummary):
            other._fill()
        return dict.__eq__(self._fill(), other)

    def __ne__(self, other):
        if isinstance(other, LazySummary):
            other._fill()
        return dict.__ne__(self._fill(), other)

    def __repr__(self):
        return dict.__repr__(self._fill())

    def __or__(self, other):
        return dict(self.items()) | other

    def __ror__(self, other):
        return dict(other) | dict(self.items())

    def copy(self):
        return dict(self.items())

    def __copy__(self):
        return dict(self.items())

    def __deepcopy__(self, memo):
        import copy
        return copy.deepcopy(dict(self.items()), memo)

    def __reduce_ex__(self, protocol):
        return (dict, (dict(self.items()),))

    # writes (summaries are read-only, Note [Shared summaries]; these keep a write consistent)
    def __setitem__(self, key, value):
        dict.__setitem__(self._fill(), key, value)

    def __delitem__(self, key):
        dict.__delitem__(self._fill(), key)

    def __ior__(self, other):
        dict.update(self._fill(), other)
        return self

    def update(self, *args, **kwargs):
        dict.update(self._fill(), *args, **kwargs)

    def setdefault(self, key, default=None):
        return dict.setdefault(self._fill(), key, default)

    def pop(self, key, *default):
        return dict.pop(self._fill(), key, *default)

    def popitem(self):
        return dict.popitem(self._fill())

    def clear(self):
        self._source = self._detail = None
        dict.clear(self)


class SummaryCache:
    """Remembers the summaries of recent tensors within an epoch (Note [Summary epochs]).

    A hit needs the same tensor object holding the same array with the same shape, dtype and
    version, and no :meth:`new_epoch` since the summary was made; the caller starts a new epoch
    whenever code it does not control may have written a tensor behind its version counter.
    A hit returns the same dict as the call that made it (Note [Shared summaries]). Holds at
    most ``size`` tensors
    of at most ``max_bytes`` each (larger ones are summarized every time) and ``budget`` bytes
    of arrays in all: it holds references, not copies, and starts again empty when either
    bound is reached; ``clear()`` drops them (the recorder does at the end of each pass).

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
    ...     _ = g.mul_(3)  # bumps g's version: summarized again
    >>> cache.summarize(g)["max"], cache.hits
    (6.0, 1)
    >>> g.numpy()[0] = 10.0  # a write the version counter does not see: the writer's caller
    >>> cache.new_epoch()    # starts a new epoch
    >>> cache.summarize(g)["min"], cache.hits
    (6.0, 1)
    """

    __slots__ = ("_entries", "_memory", "_size", "_max_bytes", "_budget", "_held", "_epoch",
                 "hits", "lazy", "_pending")

    def __init__(self, size: int = 1024, max_bytes: int = 1 << 24, budget: int = 1 << 26):
        # id(tensor) -> (tensor, array, shape, dtype, version, epoch, summary)
        self._entries: dict = {}
        # (address, bytes, dtype) of a C-contiguous array -> the key of its entry in _entries
        self._memory: dict = {}
        self._size = size
        self._max_bytes = max_bytes
        self._budget = budget  # the most bytes the arrays of all entries may hold together
        self._held = 0
        self._epoch = 0
        self.hits = 0
        # Note [Lazy summaries]: while set, a large tensor's summary is a LazySummary, kept
        # in _pending (by the id of its memory's owner) until flush() or flush_owners()
        self.lazy = False
        self._pending: dict[int, list] = {}

    def new_epoch(self) -> None:
        """Code outside the engine may have written a tensor: no entry made before is valid."""
        self._epoch += 1

    def summarize(self, tensor, now: bool = False) -> dict | None:
        """The tensor's summary; ``now``: computed now even while ``lazy`` (Note [Lazy
        summaries])."""
        if tensor is None:
            return None
        data = tensor._data
        nbytes = data.nbytes
        if nbytes > self._max_bytes:
            return self._new_summary(tensor, data, now)  # would crowd out the rest
        key = id(tensor)
        entry = self._entries.get(key)
        version = tensor._version_counter.value
        # The entry holds the tensor, so its id cannot be reused while it is here.
        if (entry is not None and entry[0] is tensor and entry[1] is data
                and entry[4] == version and entry[5] == self._epoch
                and entry[2] == data.shape and entry[3] is data.dtype):
            self.hits += 1
            summary = entry[6]
        else:
            memory = ((_array_address(data), nbytes, data.dtype) if data.flags.c_contiguous
                      else None)
            summary = self._same_memory(memory)
            if summary is not None:
                self.hits += 1
                if isinstance(summary, LazySummary) and summary.pending:
                    summary = self._pend(LazySummary(summary, data.shape), data)
                else:
                    summary = dict(summary, shape=list(data.shape))
            else:
                summary = self._new_summary(tensor, data, now)
            if len(self._entries) >= self._size or self._held + nbytes > self._budget:
                self.clear()
            replaced = self._entries.get(key)
            if replaced is not None:
                self._held -= replaced[1].nbytes
            self._entries[key] = (tensor, data, data.shape, data.dtype, version, self._epoch,
                                  summary)
            self._held += nbytes
            if memory is not None:
                self._memory[memory] = key
        if now and isinstance(summary, LazySummary):
            summary._fill()
        return summary  # shared, read-only: Note [Shared summaries]

    def _new_summary(self, tensor, data, now) -> dict:
        if self.lazy and not now and data.size > SMALL_NUMEL and data.dtype.kind in _SIMPLE_KINDS:
            return self._pend(LazySummary(data, tensor.dtype.name), data)
        return summarize_array(data, tensor.dtype.name)

    def _pend(self, summary: LazySummary, data) -> LazySummary:
        key = id(_owner(data))  # the summary holds data, so its owner's id stays its own
        pending = self._pending.get(key)
        if pending is None:
            self._pending[key] = [summary]
        else:
            pending.append(summary)
        return summary

    def flush(self) -> None:
        """Compute every pending summary now (Note [Lazy summaries])."""
        pending, self._pending = self._pending, {}
        for summaries in pending.values():
            for summary in summaries:
                summary._fill()

    def flush_owners(self, arrays) -> None:
        """Compute now the pending summaries of memory that any of ``arrays`` shares."""
        if self._pending:
            for array in arrays:
                summaries = self._pending.pop(id(_owner(array)), None)
                if summaries is not None:
                    for summary in summaries:
                        summary._fill()

    def _same_memory(self, memory) -> dict | None:
        """The summary of another tensor's C-contiguous array over the same bytes with the same
        dtype (a reshape or a detach hands the same memory on under a new tensor), if still
        valid: same bytes in the same order give the same statistics and values, bit for bit;
        only the shape may differ. The entry holds that array, so its memory is not reused."""
        if memory is None:
            return None
        key = self._memory.get(memory)
        if key is None:
            return None
        entry = self._entries.get(key)
        if entry is None or entry[5] != self._epoch or not entry[1].flags.c_contiguous:
            return None
        source = entry[0]
        if source._data is not entry[1] or source._version_counter.value != entry[4]:
            return None
        return entry[6]

    def clear(self) -> None:
        self._entries.clear()
        self._memory.clear()
        self._held = 0
