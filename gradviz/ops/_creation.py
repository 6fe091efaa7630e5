"""torch-style tensor creation: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``,
``randn``, ``rand``, ``empty``, ``eye``, ``linspace`` and the ``*_like`` variants."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _memory_format
from .. import dtypes as _dtypes
from .._tensor import C_TYPE_NAMES, TYPE_WORDS, Tensor, _int_arg, _to_array, _wrap, _wrap_converted, check_device
from .._tensor import device as _device
from . import _random_fills
from ._pointwise import checked_integer
from ._registry import declare, exports
from ._shape import _shape_arg

_DEFAULT_SEED = 67280421310721  # PyTorch's default generator starts from this seed too


@declare()
class Generator:
    """A random number generator (numpy's PCG64 underneath: its streams differ from
    PyTorch's). Pass one as ``generator=`` to the random functions."""

    def __init__(self, device="cpu"):
        check_device(device)
        self.device = _device("cpu")  # a device, as torch's ``Generator().device``
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed."""
        self.manual_seed(np.random.SeedSequence().entropy % 2**63)
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor, for :meth:`set_state` (its layout is
        gradviz's, not torch's: Note [Generator state])."""
        state = self._rng.bit_generator.state
        words = (state["state"]["state"].to_bytes(16, "little") + state["state"]["inc"].to_bytes(16, "little")
                 + bytes([state["has_uint32"]]) + state["uinteger"].to_bytes(4, "little")
                 + self._seed.to_bytes(8, "little", signed=True))
        return _wrap(np.frombuffer(words, dtype=np.uint8).copy())

    def set_state(self, new_state) -> Generator:
        """Restore a state :meth:`get_state` returned; the draws that followed it repeat."""
        array = _state_bytes(new_state)
        bit_generator = np.random.PCG64()
        bit_generator.state = {"bit_generator": "PCG64",
                               "state": {"state": int.from_bytes(array[:16], "little"),
                                         "inc": int.from_bytes(array[16:32], "little")},
                               "has_uint32": int(array[32]), "uinteger": int.from_bytes(array[33:37], "little")}
        self._seed = int.from_bytes(array[37:45], "little", signed=True)
        self._rng = np.random.Generator(bit_generator)
        return self


# Note [Generator state]
# ~~~~~~~~~~~~~~~~~~~~~~
# torch's CPU generator state is a 5,056-byte Mersenne Twister; gradviz draws from numpy's PCG64,
# whose whole state is two 128-bit words, a cached 32-bit half and the seed: 45 bytes in a
# uint8 tensor. Code that saves and restores the state (``get_rng_state``/``set_rng_state``,
# ``fork_rng``, checkpointing) works unchanged; a torch state cannot be loaded (its size is
# refused with torch's message) and the streams differ from torch's anyway.
STATE_BYTES = 45


def _state_bytes(state) -> bytes:
    if not isinstance(state, Tensor):
        raise TypeError(f"expected a torch.ByteTensor, but got {type(state).__name__}")
    if state.dtype is not _dtypes.uint8:
        raise TypeError("RNG state must be a torch.ByteTensor")
    if state.numel() != STATE_BYTES:
        raise RuntimeError(f"Expected a CPUGeneratorImplState of size {STATE_BYTES} but found the input RNG "
                           f"state size to be {state.numel()}")
    return state.detach().numpy().reshape(-1).tobytes()


_default_generator = Generator()
# the default stream, read at every call (gradviz.func's vmap swaps it for its randomness modes)
_generator = _default_generator._rng


@declare()
def manual_seed(seed: int) -> Generator:
    """Seed gradviz's random generator (its streams differ from PyTorch's); returns it."""
    global _generator
    _default_generator.manual_seed(seed)
    _generator = _default_generator._rng
    return _default_generator


@declare()
def get_rng_state():
    """The default generator's state (a uint8 tensor). Mirrors ``torch.get_rng_state``
    (Note [Generator state])."""
    return _default_generator.get_state()


@declare()
def set_rng_state(new_state) -> None:
    """Restore the default generator's state from :func:`get_rng_state`. Mirrors
    ``torch.set_rng_state``."""
    global _generator
    _default_generator.set_state(new_state)
    _generator = _default_generator._rng


@declare()
def initial_seed() -> int:
    """The seed the default generator was last seeded with. Mirrors ``torch.initial_seed``."""
    return _default_generator.initial_seed()


@declare()
def seed() -> int:
    """Seed the default generator with a non-deterministic number and return it.

    Mirrors ``torch.seed``."""
    global _generator
    value = _default_generator.seed()
    _generator = _default_generator._rng
    return value


def _rng(generator):
    """The numpy generator behind ``generator=`` (None: the default stream)."""
    if generator is None:
        return _generator
    if isinstance(generator, Generator):
        return generator._rng
    return generator


def _finish(array, requires_grad, source=None):
    out = _wrap(array) if source is None else _wrap_converted(array, source)
    if requires_grad:
        out._set_requires_grad(True, "Only Tensors of floating point and complex dtype")
    return out


def _dtype_or_default(dtype):
    return _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.get_default_dtype()


@declare()
def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, a numpy array or a Tensor).

    Examples
    --------
    >>> import gradviz as torch
    >>> torch.tensor([1.0, 2.0]).dtype
    gradviz.float32
    >>> torch.tensor([1, 2]).dtype
    gradviz.int64
    """
    _check_device(device)
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
            "or sourceTensor.detach().clone().requires_grad_(True), rather than "
            "gradviz.tensor(sourceTensor).", UserWarning, stacklevel=2)
        array = data._data.astype(_dtypes.as_dtype(dtype).numpy if dtype is not None else data._data.dtype)
    elif data is None:
        raise RuntimeError("Could not infer dtype of NoneType")
    else:
        array = np.array(_to_array(data, dtype), copy=True)
    return _finish(array, requires_grad, data)


@declare()
def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory with a numpy array or tensor when the dtype allows.

    Mirrors ``torch.as_tensor``."""
    _check_device(device)
    if isinstance(data, Tensor) and (dtype is None or _dtypes.as_dtype(dtype) is data.dtype):
        return data
    return _wrap_converted(_to_array(data, dtype), data)


@declare()
def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    _dtypes.from_numpy(array.dtype)
    return _wrap_converted(array, array)


_check_device = check_device


def _checked_shape(size, what=None):
    """The shape of ``f(2, 3)`` or ``f((2, 3))``, with PyTorch's error for a negative size."""
    shape = _shape_arg(size)
    for n in shape:
        if n < 0:
            if what == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(shape)}")
    return shape


def _size_argument(name, sizes, size):
    """The shape given positionally (``zeros(2, 3)``, ``zeros((2, 3))``) or as ``size=``."""
    if size is None:
        return sizes
    if sizes:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    return (size,)


def _filled(size, value, dtype, requires_grad, device, what=None):
    _check_device(device)
    shape = _checked_shape(size, what)
    np_dtype = _dtype_or_default(dtype).numpy
    return _finish(_allocated(lambda: np.full(shape, value, dtype=np_dtype), shape, np_dtype),
                   requires_grad)


def _allocated(make, shape, np_dtype):
    """``make()``, a new array of ``shape``, with PyTorch's RuntimeErrors where the size is too
    big: its product overflows 64 bits, or the memory cannot be had (numpy's MemoryError or
    ValueError would name no size; nothing is allocated either way)."""
    try:
        return make()
    except (MemoryError, ValueError):
        error = allocation_error(shape, np_dtype)
        if error is None:
            raise
        raise error from None


def allocation_error(shape, np_dtype):
    """PyTorch's RuntimeError for an array of ``shape`` too big to have (None for a small one:
    the MemoryError or ValueError was about something else)."""
    nbytes = math.prod(shape) * np.dtype(np_dtype).itemsize
    if nbytes >= 2 ** 63:
        return RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}")
    if nbytes > 2 ** 32:
        return RuntimeError(f"DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                            f"{nbytes} bytes; the shape {list(shape)} is too big for this "
                            f"machine's memory")
    return None


@declare()
def zeros(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size filled with 0. Mirrors ``torch.zeros``."""
    return _filled(_size_argument("zeros", sizes, size), 0, dtype, requires_grad, device, "zeros")


@declare()
def ones(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size filled with 1. Mirrors ``torch.ones``."""
    return _filled(_size_argument("ones", sizes, size), 1, dtype, requires_grad, device)


@declare()
def empty(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size with unspecified values (gradviz fills it with zeros).

    Mirrors ``torch.empty``."""
    return _filled(_size_argument("empty", sizes, size), 0, dtype, requires_grad, device)


@declare()
def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor of the given size filled with ``fill_value``. Mirrors ``torch.full``."""
    if dtype is None:
        dtype = _dtypes.result_type(fill_value)
    elif type(fill_value) in (int, float) and dtype.numpy.kind in "iu":
        fill_value = checked_integer(fill_value, dtype.numpy)
    return _filled((size,) if isinstance(size, int) else size, fill_value, dtype, requires_grad, device)


@declare()
def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive); int64 unless an argument is a float."""
    _check_device(device)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(np.isfinite(float(v)) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:  # arange(0, 10, -1): torch refuses, numpy gives []
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = _dtypes.result_type(start, end, step)
    dtype = _dtypes.as_dtype(dtype)
    count = max(0, int(np.ceil((end - start) / step)))
    if dtype.is_floating_point:
        array = _arange_values(float(start), float(step), count, dtype.numpy)
    else:
        array = (start + step * np.arange(count, dtype=np.int64)).astype(dtype.numpy)
    return _finish(array, requires_grad)


@declare(name=False, hidden="range")
def legacy_range(start, end, step=1, *, dtype=None, device=None, requires_grad=False):
    """The deprecated ``torch.range``: like ``arange`` but ``end`` included, float by default."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use torch.arange, "
                  "which produces values in [start, end).", UserWarning, stacklevel=2)
    _check_device(device)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(np.isfinite(float(v)) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    dtype = _dtype_or_default(dtype)
    count = int(np.floor((end - start) / step)) + 1
    values = (float(start) + float(step) * np.arange(count, dtype=np.float64)).astype(dtype.numpy)
    return _finish(values, requires_grad)


def _arange_values(start, step, count, np_dtype):
    """Floating ``arange`` bit for bit as PyTorch's CPU kernel computes it: ``start + step * i``
    in double precision (one fused multiply-add), except that whole blocks of two 256-bit
    vectors start each vector at a value rounded to the dtype and count up from there."""
    index = np.arange(count, dtype=np.float64)
    scalar = _fused_multiply_add(step, index, start)
    if np_dtype.itemsize not in (4, 8):
        return scalar.astype(np_dtype)
    lanes = 32 // np_dtype.itemsize
    vectorized = count - count % (2 * lanes)
    lane = index % lanes
    chunk_start = _fused_multiply_add(step, index - lane, start).astype(np_dtype).astype(np.float64)
    blocked = _fused_multiply_add(step, lane, chunk_start)
    return np.where(index < vectorized, blocked, scalar).astype(np_dtype)


@declare()
def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end``, bit for bit as PyTorch's CPU
    kernel computes them (the first half counts up from ``start``, the second half down from
    ``end``, each value one fused multiply-add)."""
    _check_device(device)
    dtype = _dtype_or_default(dtype)
    steps = _int_arg(steps, "steps")
    if steps < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    return _finish(_allocated(lambda: _linspace_values(start, end, steps, dtype.numpy), (steps,),
                              dtype.numpy), requires_grad)


@declare()
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``base ** linspace(start, end, steps)``: the exponents as ``linspace`` computes them in
    the tensor's dtype, each power in double precision, as PyTorch's CPU kernel."""
    _check_device(device)
    dtype = _dtype_or_default(dtype)
    steps = _int_arg(steps, "steps")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    exponents = _linspace_values(start, end, steps, dtype.numpy).astype(np.float64)
    return _finish(np.power(float(base), exponents).astype(dtype.numpy), requires_grad)


def _linspace_values(start, end, steps, np_dtype):
    if steps <= 1:
        return np.full((steps,), start).astype(np_dtype)
    if np_dtype.kind != "f":
        # integral dtypes: the ends are truncated first, the step is a double, each value
        # truncated
        start, end = int(start), int(end)
        step = (float(end) - float(start)) / (steps - 1)
        index = np.arange(steps, dtype=np.float64)
        up = _fused_multiply_add(step, index, float(start))
        down = _fused_multiply_add(-step, steps - 1 - index, float(end))
        return np.trunc(np.where(index < steps // 2, up, down)).astype(np_dtype)
    if np_dtype.itemsize == 2:
        return _linspace_half(start, end, steps)
    first, last = np_dtype.type(start), np_dtype.type(end)
    step = (last - first) / np_dtype.type(steps - 1)  # in the tensor's dtype, like torch
    index = np.arange(steps, dtype=np.float64)
    up = _fused_multiply_add(np.float64(step), index, np.float64(first))
    down = _fused_multiply_add(-np.float64(step), steps - 1 - index, np.float64(last))
    return np.where(index < steps // 2, up, down).astype(np_dtype)


def _linspace_half(start, end, steps):
    """float16 ``linspace``: c10::Half arithmetic computes each operation in float32 and rounds
    the result to half, so every step of torch's formula rounds twice."""
    half, single = np.float16, np.float32
    first, last = half(start), half(end)
    step = half(single(half(single(last) - single(first))) / single(half(steps - 1)))
    index = np.arange(steps)

    def rounded(values):  # float32 arithmetic, rounded to half, back to float32
        return np.asarray(values, dtype=single).astype(half).astype(single)

    up = single(first) + rounded(single(step) * rounded(index))
    down = single(last) - rounded(single(step) * rounded(steps - 1 - index))
    return np.where(index < steps // 2, up, down).astype(half)


def _fused_multiply_add(a, b, c):
    """``a * b + c`` rounded once, in float64 (Dekker's product and Knuth's sum, which are exact):
    what the C++ compiler emits for torch's ``start + step * idx``."""
    product = a * b
    split = 134217729.0  # 2**27 + 1
    a_big = a * split
    a_hi = a_big - (a_big - a)
    a_lo = a - a_hi
    b_big = b * split
    b_hi = b_big - (b_big - b)
    b_lo = b - b_hi
    product_error = ((a_hi * b_hi - product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    total = product + c
    virtual = total - product
    sum_error = (product - (total - virtual)) + (c - virtual)
    return total + (sum_error + product_error)


@declare()
def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The ``n`` by ``m`` identity matrix (ones on the diagonal). Mirrors ``torch.eye``."""
    _check_device(device)
    n = _int_arg(n, "n")
    m = n if m is None else _int_arg(m, "m")
    for name, size in (("n", n), ("m", m)):
        if size < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {size}")
    np_dtype = _dtype_or_default(dtype).numpy
    return _finish(_allocated(lambda: np.eye(n, m, dtype=np_dtype), (n, m), np_dtype),
                   requires_grad)


def _check_floating_draws(dtype, kernel, shape, empty_too):
    """torch's error for continuous draws into an integer or bool dtype: its uniform kernel
    checks the dtype first, its normal kernel only when there is something to draw."""
    if not dtype.is_floating_point and (empty_too or math.prod(shape)):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{TYPE_WORDS[dtype.name]}\'')


@declare()
def randn(*sizes, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples (gradviz's own generator: values differ from PyTorch's)."""
    _check_device(device)
    rng = _rng(generator)
    shape = _checked_shape(_size_argument("randn", sizes, size))
    dtype = _dtype_or_default(dtype)
    _check_floating_draws(dtype, "normal_kernel_cpu", shape, empty_too=False)
    array = _allocated(lambda: rng.standard_normal(shape).astype(dtype.numpy), shape, dtype.numpy)
    return _finish(array, requires_grad)


@declare()
def rand(*sizes, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    """A tensor of the given size drawn uniformly from ``[0, 1)`` (gradviz's generator).

    Mirrors ``torch.rand``."""
    _check_device(device)
    rng = _rng(generator)
    shape = _checked_shape(_size_argument("rand", sizes, size))
    dtype = _dtype_or_default(dtype)
    _check_floating_draws(dtype, "check_uniform_bounds", shape, empty_too=True)
    array = _allocated(lambda: rng.random(shape).astype(dtype.numpy), shape, dtype.numpy)
    return _finish(array, requires_grad)


def _check_integer_bounds(low, high, dtype):
    """torch's ``random_(from, to)`` checks: ``from < to``, and both ``from`` and ``to - 1``
    within an integer (or bool) dtype's range."""
    if not low < high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    if dtype.is_floating_point:
        return
    info = (0, 1) if dtype is _dtypes.bool else (np.iinfo(dtype.numpy).min, np.iinfo(dtype.numpy).max)
    for bound, label in ((low, "from"), (high - 1, "to - 1")):
        if not info[0] <= bound <= info[1]:
            raise RuntimeError(f"{label} is out of bounds for {C_TYPE_NAMES[dtype.name]}")


@declare()
def randint(low, high=None, size=(), *, dtype=None, device=None, generator=None):
    """A tensor of the given size of integers drawn uniformly from ``[low, high)``.

    Mirrors ``torch.randint``."""
    _check_device(device)
    if high is None or isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, (size if high is None else high)
    rng = _rng(generator)
    dtype = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.int64
    _check_integer_bounds(low, high, dtype)
    shape = _checked_shape(size)
    return _wrap(_allocated(lambda: rng.integers(low, high, size=shape).astype(dtype.numpy), shape,
                            dtype.numpy))


def _like(input, dtype):
    return input._data.shape, (_dtypes.as_dtype(dtype) if dtype is not None else input.dtype)


def _laid_out_like(out, input, memory_format):
    """``out`` in the layout a ``*_like`` constructor gives (Note [Memory formats])."""
    array = _memory_format.like(out._data, input._data, memory_format)
    if array is out._data:
        return out
    relaid = _wrap(array)
    return relaid.requires_grad_() if out.requires_grad else relaid


@declare()
def zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Zeros with the shape (and by default the dtype) of ``input``.

    Mirrors ``torch.zeros_like``."""
    shape, dtype = _like(input, dtype)
    return _laid_out_like(zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad), input, memory_format)


@declare()
def ones_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Ones with the shape (and by default the dtype) of ``input``. Mirrors ``torch.ones_like``."""
    shape, dtype = _like(input, dtype)
    return _laid_out_like(ones(shape, dtype=dtype, device=device, requires_grad=requires_grad), input, memory_format)


@declare()
def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """An uninitialised tensor shaped like ``input`` (gradviz fills it with zeros).

    Mirrors ``torch.empty_like``."""
    shape, dtype = _like(input, dtype)
    return _laid_out_like(empty(shape, dtype=dtype, device=device, requires_grad=requires_grad), input, memory_format)


@declare()
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """``fill_value`` with the shape (and by default the dtype) of ``input``.

    Mirrors ``torch.full_like``."""
    shape, dtype = _like(input, dtype)
    out = full(shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format)


@declare()
def randn_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Standard normal draws with the shape (and by default the dtype) of ``input``.

    Mirrors ``torch.randn_like``."""
    shape, dtype = _like(input, dtype)
    return _laid_out_like(randn(shape, dtype=dtype, device=device, requires_grad=requires_grad), input, memory_format)


@declare()
def rand_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Uniform ``[0, 1)`` draws with the shape (and by default the dtype) of ``input``.

    Mirrors ``torch.rand_like``."""
    shape, dtype = _like(input, dtype)
    return _laid_out_like(rand(shape, dtype=dtype, device=device, requires_grad=requires_grad), input, memory_format)


@declare()
def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False,
                 memory_format=None):
    """Random integers in ``[low, high)`` shaped like ``input`` (``randint_like(x, high)``
    with one bound), in ``input``'s dtype unless ``dtype`` says."""
    if high is None:
        low, high = 0, low
    shape, dtype = _like(input, dtype)
    out = randint(low, high, shape, dtype=dtype, device=device)
    return _laid_out_like(out.requires_grad_() if requires_grad else out, input, memory_format)


# ---- Tensor.new_* and in-place random fills -----------------------------------------------

def _new_dtype(self, dtype):
    return _dtypes.as_dtype(dtype) if dtype is not None else self.dtype


@declare(name=False, method=True)
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor from ``data`` with ``self``'s dtype (unless ``dtype`` is given)."""
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
            "or sourceTensor.detach().clone().requires_grad_(True), rather than "
            "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        data = data._data
    _check_device(device)
    return _finish(np.array(_to_array(data, _new_dtype(self, dtype)), copy=True), requires_grad)


@declare(name=False, method=True)
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return _filled(_size_argument("new_zeros", size, None), 0, _new_dtype(self, dtype),
                   requires_grad, device)  # (torch's error for a negative size is not zeros')


@declare(name=False, method=True)
def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return ones(*size, dtype=_new_dtype(self, dtype), device=device, requires_grad=requires_grad)


@declare(name=False, method=True)
def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    return empty(*size, dtype=_new_dtype(self, dtype), device=device, requires_grad=requires_grad)


@declare(name=False, method=True)
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=_new_dtype(self, dtype), device=device,
                requires_grad=requires_grad)


def _fill_from(self, row, draws):
    """Write ``draws`` into ``self``, recording ``row``'s node in a graph (Note [Random fills
    in a graph] in ``ops/_random_fills.py``)."""
    return _random_fills.fill_with_draws(self, draws, row)


@declare(name=False, method=True)
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with N(mean, std²) samples from gradviz's generator (values differ from torch's)."""
    _random_fills.check_dtype(self, "normal_")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_c_number(std)}")
    return _fill_from(self, _random_fills.NORMAL_FILL,
                      _rng(generator).normal(mean, std, size=self._data.shape))


@declare(name=False, method=True)
def uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Fill with U(a, b) samples from gradviz's generator (values differ from torch's)."""
    _random_fills.check_dtype(self, "uniform_")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={_c_number(a)} > to={_c_number(b)}")
    return _fill_from(self, _random_fills.UNIFORM_FILL,
                      _rng(generator).uniform(a, b, size=self._data.shape))


@declare(name=False, method=True)
def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with samples of the exponential distribution of rate ``lambd`` (gradviz's
    generator). Mirrors ``torch.Tensor.exponential_``."""
    _random_fills.check_dtype(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_c_number(lambd)}")
    return _fill_from(self, _random_fills.EXPONENTIAL_FILL,
                      _rng(generator).exponential(1.0 / lambd, size=self._data.shape))


@declare(name=False, method=True)
def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(``p``) trials up to the first success (1, 2, ...).
    Mirrors ``torch.Tensor.geometric_``."""
    _random_fills.check_dtype(self, "geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_c_number(p)}")
    return _fill_from(self, _random_fills.GEOMETRIC_FILL,
                      _rng(generator).geometric(p, size=self._data.shape))


@declare(name=False, method=True)
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with ``exp(N(mean, std²))`` samples. Mirrors ``torch.Tensor.log_normal_``."""
    _random_fills.check_dtype(self, "log_normal_")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_c_number(std)}")
    return _fill_from(self, _random_fills.LOG_NORMAL_FILL,
                      _rng(generator).lognormal(mean, std, size=self._data.shape))


@declare(name=False, method=True)
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy(``median``, ``sigma``) samples. Mirrors ``torch.Tensor.cauchy_``."""
    _random_fills.check_dtype(self, "cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_c_number(sigma)}")
    return _fill_from(self, _random_fills.CAUCHY_FILL,
                      median + sigma * _rng(generator).standard_cauchy(size=self._data.shape))


def _c_number(value) -> str:
    """A number as torch's C++ messages print it (``1.0`` as ``1``)."""
    return format(float(value), "g")


_C_INTEGER_NAMES = {"uint8": "unsigned char", "int8": "signed char", "int16": "short", "int32": "int",
                    "int64": "long"}


def _random_bounds(dtype):
    """``random_()``'s default range ``[0, high]`` for ``dtype``: floats up to 2 ** mantissa
    bits (every integer there is exact), integers their maximum, booleans 1."""
    if dtype is _dtypes.bool:
        return 1
    if dtype.is_floating_point:
        return 2 ** (np.finfo(dtype.numpy).nmant + 1)
    return int(np.iinfo(dtype.numpy).max)


_RANDOM_SIGNATURES = (" * (*, torch.Generator generator = None)\n"
                      " * (int from, int to, *, torch.Generator generator = None)\n"
                      " * (int to, *, torch.Generator generator = None)\n")


def _integral_bound(value) -> bool:
    """Whether ``value`` passes for an int bound of ``random_``, as torch's argument parser
    takes it: an int or numpy integer (no bool), or a 0-d integer tensor."""
    if isinstance(value, Tensor):
        return value.ndim == 0 and value._data.dtype.kind in "iu"
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_random_bounds(from_, to) -> None:
    """torch's TypeError for bounds that are not ints (``random_(1.5)``, ``random_(0, 2.0)``)."""
    if from_ is None and to is None:
        return  # random_()
    passed = [from_] if to is None else [from_, to]
    if all(_integral_bound(value) for value in passed):
        return
    got = ", ".join("Tensor" if isinstance(value, Tensor) else type(value).__name__ for value in passed)
    raise TypeError(f"random_() received an invalid combination of arguments - got ({got}), "
                    f"but expected one of:\n{_RANDOM_SIGNATURES}")


@declare(name=False, method=True)
def random_(self, from_=None, to=None, *, generator=None, **kwargs):
    """Fill with integers drawn uniformly from ``[from, to)`` (``random_(to)``: ``[0, to)``;
    ``random_()``: from 0 to the dtype's largest exact integer). Mirrors
    ``torch.Tensor.random_`` (its first argument is named ``from``)."""
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    _check_random_bounds(from_, to)
    row = _random_fills.RANDOM_FILL
    if from_ is not None and to is None:
        low, high, row = 0, int(from_), _random_fills.RANDOM_TO_FILL  # random_(to)
    elif from_ is None:
        low, high, row = 0, _random_bounds(self.dtype) + 1, _random_fills.RANDOM_FULL_FILL
    else:
        low, high = int(from_), int(to)
        if low >= high:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if not self.dtype.is_floating_point and self.dtype is not _dtypes.bool:
        info = np.iinfo(self._data.dtype)
        if low < info.min or low > info.max:
            raise RuntimeError(f"from is out of bounds for {_C_INTEGER_NAMES[self.dtype.name]}")
    return _fill_from(self, row,
                      _rng(generator).integers(low, high, size=self._data.shape))


@declare()
def randperm(n, *, dtype=None, device=None, requires_grad=False, generator=None):
    """A random permutation of the integers 0 to ``n - 1`` (int64)."""
    _check_device(device)
    dtype = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.int64
    n = _int_arg(n, "n")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return _finish(_allocated(lambda: _rng(generator).permutation(n).astype(dtype.numpy), (n,),
                              dtype.numpy), requires_grad)


@declare()
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std²): tensors ``mean``/``std`` give one sample per element."""
    _check_device(device)
    mean_data = mean._data if isinstance(mean, Tensor) else mean
    std_data = std._data if isinstance(std, Tensor) else std
    if size is None and not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        raise TypeError("normal() received an invalid combination of arguments: pass a size "
                        "with float mean and std")
    shape = _checked_shape((size,)) if size is not None else np.broadcast_shapes(
        np.shape(mean_data), np.shape(std_data))
    if dtype is None:
        dtype = next((t.dtype for t in (mean, std) if isinstance(t, Tensor)),
                     _dtypes.get_default_dtype())
    dtype = _dtypes.as_dtype(dtype)
    if not bool(np.all(np.asarray(std_data) >= 0)):  # numpy's ValueError, or NaN draws, else
        if isinstance(std, Tensor):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    sample = _rng(generator).normal(mean_data, std_data, size=shape)
    return _finish(np.asarray(sample).astype(dtype.numpy), requires_grad)


@declare(method=True)
def bernoulli(input, p=None, *, generator=None):
    """0/1 samples with probability ``input`` (or ``p``) of a 1, in ``input``'s dtype."""
    if p is None and not input.dtype.is_floating_point and input._data.size:
        raise NotImplementedError('"bernoulli_tensor_cpu_p_" not implemented for '
                                  f"'{TYPE_WORDS[input.dtype.name]}'")
    if p is None:
        _random_fills.check_probability(input)
    probability = input._data if p is None else p
    draws = _rng(generator).random(input._data.shape) < probability
    return _wrap(draws.astype(input._data.dtype))


@declare(name=False, method=True)
def bernoulli_(self, p=0.5, *, generator=None):
    _random_fills.check_probability(p)
    probability = p._data if isinstance(p, Tensor) else p
    draws = _rng(generator).random(self._data.shape) < probability
    return _random_fills.fill_with_draws(self, draws, _random_fills.BERNOULLI_FILL, p)


@declare(method=True)
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices drawn from the categorical distributions in the rows of ``input`` (weights,
    normalized per row); int64, shaped ``(rows, num_samples)`` or ``(num_samples,)``."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           f"{TYPE_WORDS[input.dtype.name]}")
    weights = input._data.astype(np.float64)
    if weights.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    num_samples = _int_arg(num_samples, "num_samples")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    rows = weights.reshape(weights.shape[0] if weights.ndim == 2 else 1, weights.shape[-1])
    if not replacement and num_samples > rows.shape[1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if rows.shape[1] == 0 and rows.shape[0] and num_samples == 1:  # torch checks with aminmax
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(rows.sum(axis=1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    categories = rows.shape[1]
    rng = _rng(generator)
    out = _allocated(lambda: np.empty((rows.shape[0], num_samples), dtype=np.int64),
                     (rows.shape[0], num_samples), np.int64)
    for i, row in enumerate(rows):
        if replacement:
            # numpy's ``rng.choice(categories, size, p=row / row.sum())`` as that method
            # computes it (the same draws from the same state), without its argument checks,
            # which the checks above make: 24 -> 11 us for one sample of 27 weights
            cdf = (row / row.sum()).cumsum()
            cdf /= cdf[-1]
            out[i] = cdf.searchsorted(rng.random(int(num_samples)), side="right")
        else:  # torch's way: the top-k of weight / Exp(1) noise
            keys = row / rng.exponential(size=categories)
            out[i] = np.argsort(-keys, kind="stable")[:int(num_samples)]
    return _wrap(out.reshape(weights.shape[:-1] + (int(num_samples),)))


@declare()
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, n) row and column indices of the upper triangle of a ``row`` x ``col`` matrix
    (from diagonal ``offset``)."""
    _check_device(device)
    rows, cols = np.triu_indices(row, offset, col)
    return _wrap(np.stack([rows, cols]).astype((dtype or _dtypes.int64).numpy))


@declare()
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, n) row and column indices of the lower triangle (to diagonal ``offset``)."""
    _check_device(device)
    rows, cols = np.tril_indices(row, offset, col)
    return _wrap(np.stack([rows, cols]).astype((dtype or _dtypes.int64).numpy))


__all__ = exports(globals())
