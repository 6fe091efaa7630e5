"""The 2-D matrix product of ``mm`` and ``addmm``, in whichever operand order the BLAS runs faster.

Note [Product layout]
~~~~~~~~~~~~~~~~~~~~~
``a @ b`` can be computed as it is written, or as ``(b.T @ a.T).T``, the transposed product
copied back to row-major order. The two are one GEMM with the roles of the operands swapped:
every entry is the same dot product, accumulated in the same ``k`` order, so the bits agree
(checked on 1,540 shapes, float32 and float64, with numpy's OpenBLAS). Their speed does not.
With OpenBLAS 0.3 on this machine's Xeon, the product of every Linear layer, an activation
``a`` (batch x in) times a transposed weight ``w.t()``, took 0.47-0.88x the time when swapped
for float32 batches of 8 to 64 and 512 to 4,096 features, and 1.1-1.35x for a batch of 1,024
or in float64. Which order wins depends on the BLAS, the CPU and the shape, so the engine
measures instead of guessing, once per shape and memory order of the operands:

* the first product of a shape (dtype, M, K, N, and whether each operand is row-major,
  column-major or strided) is computed both ways. Different bits (a BLAS
  whose kernels differ by operand order) settle the shape on the written order for good, so
  the choice can never change a result;
* the next ``2 * TRIALS`` products of that shape alternate between the two orders, timed in
  this thread's CPU time (another process's load on the machine does not count);
* the swapped order is kept if its best time beats the written order's best by 10%: a smaller
  difference is within what noise can fake, and the written order is the one numpy users get.

The swapped product comes back transposed; a compiled loop copies it back in cache-sized tiles
and adds the bias on the way (``transpose_add``, Note [Whole-array kernels] in
``gradviz_ext/_ops.py``), where numpy's copy of a transposed view took a quarter of the time
the swap saved.

Products under ``SMALL`` multiply-adds (tens of microseconds), and matrix-vector shapes
(M or N of 1), always run as written: there the timing would cost more than it could save. So
do products over ``LARGE`` (a second or more), whose first call would be paid twice; the BLAS
is efficient in either order there.
``GRADVIZ_PRODUCT_LAYOUT=written`` turns the measuring off (every product as written);
``product_layouts()`` shows what was decided.
"""

from __future__ import annotations

import os
import threading
import time
import warnings

import numpy as np

from gradviz_ext import ops as _ext_ops

__all__ = ["product", "product_layouts"]

SMALL = 1 << 20      # M * K * N below this: as written
LARGE = 1 << 31      # and above this: the first product, computed twice, would cost seconds
TRIALS = 4           # timed products per order, after the first (which computes both)
MARGIN = 0.9         # the swapped order must be this much faster to be kept
MAX_SHAPES = 1024    # shapes remembered; past this, new shapes run as written

WRITTEN, SWAPPED = "written", "swapped"

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_decided: dict = {}   # (dtype char, M, K, N) -> WRITTEN or SWAPPED
_trials: dict = {}    # (dtype char, M, K, N) -> [calls so far, best written, best swapped]
_lock = threading.Lock()
_clock = time.thread_time  # CPU time of this thread: other processes' load is not counted


def _measuring_from_env() -> bool:
    value = os.environ.get("GRADVIZ_PRODUCT_LAYOUT", "auto").strip().lower()
    if value in ("", "auto"):
        return True
    if value == WRITTEN:
        return False
    warnings.warn(f"GRADVIZ_PRODUCT_LAYOUT={value!r} is neither 'auto' nor 'written'; "
                  f"using 'auto'", RuntimeWarning, stacklevel=2)
    return True


_measuring = _measuring_from_env()
_transpose_add = _ext_ops.transpose_add
_add_row_vector = _ext_ops.add_row_vector


def _written(a, b, bias):
    out = np.matmul(a, b)
    if bias is not None and not _add_row_vector(out, bias):  # one C loop (a Linear's bias)
        np.add(out, bias, out=out)  # the product is ours: no second array
    return out


def _swapped(a, b, bias):
    transposed = np.matmul(b.T, a.T)  # (N, M), row-major
    out = _transpose_add(transposed, bias)  # a tiled copy back to row-major (and the bias)
    if out is not None:
        return out
    out = np.empty((a.shape[0], b.shape[1]), dtype=transposed.dtype)
    if bias is None:
        np.copyto(out, transposed.T)
    else:
        np.add(transposed.T, bias, out=out)  # back to row-major and the bias in one pass
    return out


def _order(array):
    flags = array.flags
    return "C" if flags.c_contiguous else "F" if flags.f_contiguous else "strided"


def product(a, b, bias=None):
    """``a @ b (+ bias)`` for 2-D float arrays of one dtype, row-major, in the faster order.

    ``bias`` (optional) must broadcast to the product's shape without enlarging it; the caller
    handles any other bias. Note [Product layout].
    """
    m, k = a.shape
    n = b.shape[1]
    size = m * k * n
    if (not _measuring or size < SMALL or size > LARGE or m == 1 or n == 1
            or a.dtype not in _FLOATS):
        return _written(a, b, bias)
    key = (a.dtype.char, m, k, n, _order(a), _order(b))
    layout = _decided.get(key)
    if layout is WRITTEN:
        return _written(a, b, bias)
    if layout is SWAPPED:
        return _swapped(a, b, bias)
    return _trial(key, a, b, bias)


def _trial(key, a, b, bias):
    with _lock:
        state = _trials.get(key)
        if state is None:
            if len(_decided) + len(_trials) >= MAX_SHAPES:
                return _written(a, b, bias)
            state = _trials[key] = [0, float("inf"), float("inf")]
        calls = state[0]
        state[0] += 1
    start = _clock()
    if calls == 0 or calls % 2 == 0:
        out = _written(a, b, bias)
        spent = _clock() - start
        if spent < state[1]:
            state[1] = spent
        if calls == 0:
            start = _clock()
            other = _swapped(a, b, bias)
            state[2] = _clock() - start
            if not np.array_equal(out, other, equal_nan=True):
                _decide(key, WRITTEN)
    else:
        out = _swapped(a, b, bias)
        spent = _clock() - start
        if spent < state[2]:
            state[2] = spent
    if calls >= 2 * TRIALS:
        _decide(key, SWAPPED if state[2] < MARGIN * state[1] else WRITTEN)
    return out


def _decide(key, layout):
    with _lock:
        _decided.setdefault(key, layout)
        _trials.pop(key, None)


def product_layouts() -> dict:
    """What the engine decided per shape: ``{(dtype, M, K, N, order of a, order of b):
    "written" or "swapped"}`` (an order is ``"C"``, ``"F"`` or ``"strided"``),
    plus ``"measuring"`` (False under ``GRADVIZ_PRODUCT_LAYOUT=written``)."""
    with _lock:
        decided = {(np.dtype(char).name, m, k, n, a, b): layout
                   for (char, m, k, n, a, b), layout in _decided.items()}
    return {"measuring": _measuring, "shapes": decided}


def _reset():
    """Forget every decision (tests)."""
    with _lock:
        _decided.clear()
        _trials.clear()
