"""``torch.autocast`` on a machine without an accelerator, for a library that computes in the
dtypes it is given (Note [Mixed precision without an accelerator])."""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable

from .. import dtypes as _dtypes

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_enabled"]

# Note [Mixed precision without an accelerator]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Training loops written for mixed precision wrap forward in ``torch.autocast`` and the
# backward in a ``GradScaler``. On a machine without CUDA torch turns both off for the "cuda"
# device, with a warning each, and the loop runs in float32; gradviz does the same, with
# torch's words. On the CPU torch's autocast runs matmuls and convolutions in bfloat16 (its
# default) or float16. gradviz has no bfloat16 and keeps its op table free of a per-op cast
# policy, so inside an enabled CPU autocast it computes in float32 and says so once: the
# gradients then match torch's float32 run, not its lower-precision one, which is what a
# debugger of gradients wants to show. ``is_autocast_enabled("cpu")`` still answers True
# inside the block, as code may branch on it. The scaler itself is exact (``_grad_scaler``):
# scaling is a multiplication, and skipping steps on non-finite gradients is behaviour a
# user may want to step through.

_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "xla", "hpu", "ipu", "mtia", "meta", "privateuseone")
_CPU_DTYPES = ("bfloat16", "float16")

_state = threading.local()


def _enabled_map() -> dict:
    enabled = getattr(_state, "enabled", None)
    if enabled is None:
        enabled = _state.enabled = {}
    return enabled


def _dtype_name(dtype) -> str:
    return getattr(dtype, "name", str(dtype))


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether an enabled :class:`autocast` block for ``device_type`` is running in this thread
    (``torch.is_autocast_enabled``; without an argument, for "cuda", as torch)."""
    return bool(_enabled_map().get(device_type))


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager (and decorator) for mixed-precision regions. gradviz computes in float32 inside it
    (Note [Mixed precision without an accelerator]); "cuda" disables itself with torch's
    warning.

    Examples
    --------
    >>> import warnings
    >>> import gradviz as torch
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with torch.autocast("cpu", dtype=torch.float16):
    ...         y = torch.ones(2, 2) @ torch.ones(2, 2)
    >>> y.dtype
    gradviz.float32
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError(f"Invalid device string: '{device_type}'")
        self.device = device_type
        # torch's defaults: bfloat16 on the CPU (a dtype gradviz does not have), float16 elsewhere
        self.fast_dtype = ("bfloat16" if device_type == "cpu" else _dtypes.float16) if dtype is None else dtype
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if enabled and device_type != "cpu":
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast."
                          if device_type == "cuda" else
                          f"User provided device_type of '{device_type}', but it is not available in "
                          f"gradviz (it computes on the CPU). Disabling autocast.", stacklevel=2)
            enabled = False
        elif enabled and _dtype_name(self.fast_dtype) not in _CPU_DTYPES:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                          stacklevel=2)
            enabled = False
        elif enabled:
            warnings.warn(f"gradviz computes in float32 inside autocast('cpu', dtype="
                          f"{_dtype_name(self.fast_dtype)}): its results match torch's float32 run, "
                          f"not the lower-precision one", stacklevel=2)
        self._enabled = enabled
        self._previous: list = []

    def __enter__(self):
        enabled = _enabled_map()
        self._previous.append(enabled.get(self.device))
        enabled[self.device] = self._enabled
        return self

    def __exit__(self, *exc):
        _enabled_map()[self.device] = self._previous.pop()
        return False

    def __call__(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def run_inside(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        return run_inside


def custom_fwd(fwd: Callable | None = None, *, device_type: str = "cuda", cast_inputs=None) -> Callable:
    """``torch.amp.custom_fwd``: a decorator for a custom Function's ``forward`` under autocast.
    gradviz computes in the dtypes it is given, so the forward runs as written."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str = "cuda") -> Callable:
    """``torch.amp.custom_bwd``: a decorator for a custom Function's ``backward``; it runs as
    written (see :func:`custom_fwd`)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd
