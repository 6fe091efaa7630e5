"""``gradviz.nn.attention``: ``SDPBackend`` and the ``sdpa_kernel`` context manager that
modern attention code wraps ``scaled_dot_product_attention`` in. gradviz has one
implementation (the math one, differentiable to any order), so choosing a backend changes
nothing; asking for a backend list without ``MATH`` still runs the math kernel, where torch's
CPU build would refuse a fused kernel it does not have."""

from __future__ import annotations

import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """The attention kernels torch can choose from."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Run the block with ``backends`` chosen (gradviz always computes attention one way)."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not all(isinstance(backend, SDPBackend) for backend in chosen):
        raise AssertionError("Backend must be an instance of SDPBackend")
    yield
