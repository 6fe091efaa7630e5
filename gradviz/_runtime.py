"""The process-wide switches training scripts call (``torch.compile``, threads, deterministic
algorithms) and ``torch.random``. gradviz runs eagerly, one op at a time, which is what a
debugger of backward needs to show, so these keep what they are given and say what it means
here (Note [Runtime switches])."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator

from threadpoolctl import threadpool_info, threadpool_limits

from .ops import _creation

__all__ = ["compile", "set_num_threads", "get_num_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "fork_rng"]

# Note [Runtime switches]
# ~~~~~~~~~~~~~~~~~~~~~~~
# * ``compile(model)`` returns ``model`` itself (and ``@compile`` the function): the compiled
#   program computes what the eager one does, and running eagerly keeps every op a node of
#   the graph the debugger steps through. Its options are accepted and checked for type only.
# * ``set_num_threads(n)`` limits the BLAS and OpenMP pools numpy computes with, through
#   threadpoolctl, as torch limits its intra-op pool; ``get_num_threads()`` reads them back.
#   It is a process-wide setting the user asked for, like torch's.
# * gradviz's ops are deterministic (numpy on the CPU), so ``use_deterministic_algorithms``
#   only records the flag for ``are_deterministic_algorithms_enabled()``.

_lock = threading.Lock()
_num_threads: int | None = None
_deterministic = False
_deterministic_warn_only = False


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,  # noqa: A001
            backend: str | Callable = "inductor", mode: str | None = None, options: dict | None = None,
            disable: bool = False) -> Callable:
    """``torch.compile``: returns ``model`` unchanged (Note [Runtime switches]); as a decorator
    (``@torch.compile`` or ``@torch.compile(mode=...)``), the function unchanged."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if not callable(model):
        raise RuntimeError("torch.compile expected a callable, but got "
                           f"{type(model).__name__}")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same "
                           "time.")
    return model


def set_num_threads(num: int) -> None:
    """Limit the threads numpy's BLAS and OpenMP pools use to ``num`` (process-wide). Mirrors
    ``torch.set_num_threads``."""
    global _num_threads
    if not isinstance(num, int) or isinstance(num, bool):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    with _lock:
        threadpool_limits(limits=num)
        _num_threads = num


def get_num_threads() -> int:
    """The threads numpy's pools use: the number given to :func:`set_num_threads`, else the
    largest pool's size. Mirrors ``torch.get_num_threads``."""
    if _num_threads is not None:
        return _num_threads
    sizes = [pool.get("num_threads", 1) for pool in threadpool_info()]
    return max(sizes, default=os.cpu_count() or 1)


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the flag (gradviz's ops are deterministic already). Mirrors
    ``torch.use_deterministic_algorithms``."""
    global _deterministic, _deterministic_warn_only
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _deterministic, _deterministic_warn_only = mode, warn_only


def are_deterministic_algorithms_enabled() -> bool:
    """The flag :func:`use_deterministic_algorithms` last set."""
    return _deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The ``warn_only`` flag :func:`use_deterministic_algorithms` last set."""
    return _deterministic_warn_only


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str = "cuda") -> Iterator[None]:
    """Draws made inside the block leave the default generator where it was. Mirrors
    ``torch.random.fork_rng`` (gradviz has only the CPU generator)."""
    if not enabled:
        yield
        return
    state = _creation.get_rng_state()
    try:
        yield
    finally:
        _creation.set_rng_state(state)
