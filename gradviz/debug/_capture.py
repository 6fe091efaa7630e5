"""``gradviz.debug.capture()``: keep what the gradient doctor needs while a graph is built.

Inside ``with gradviz.debug.capture():`` a forward observer is installed, so

- every custom Function node keeps copies of its forward arguments, taken before ``forward``
  ran (``ctx._forward_args``, see Note [Forward capture] in ``gradviz.autograd.function``);
  the doctor re-runs the Function on them;
- every saved tensor (of custom and built-in nodes) gets a *fingerprint* when its node is
  created: a copy of small tensors, a hash and a summary of large ones. The doctor compares
  it with the tensor's current value, which finds writes that bypass the version counter
  (through ``.numpy()`` or ``.data``) as well as ordinary in-place operations.

Nothing of this costs anything outside ``capture()``.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import NamedTuple

import numpy as np

from gradviz_ext import engine as _engine

__all__ = ["capture", "COPY_LIMIT_BYTES"]

#: Saved tensors up to this size are fingerprinted by a full copy (so the doctor can say which
#: entries changed); larger ones by a hash and a summary.
COPY_LIMIT_BYTES = 1 << 20


class Fingerprint(NamedTuple):
    """What a saved tensor looked like when it was saved."""

    shape: tuple
    dtype: np.dtype
    copy: np.ndarray | None   # the values, for small tensors
    digest: bytes             # a hash of the bytes, for every tensor
    mean: float | None        # a summary for large ones (None if not a float or empty)


# node -> list of (saved-tensor label, Fingerprint). Weak: fingerprints die with their graph.
_fingerprints: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _digest(array: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(array).view(np.uint8), digest_size=16).digest()


def fingerprint(array: np.ndarray) -> Fingerprint:
    small = array.nbytes <= COPY_LIMIT_BYTES
    mean = None
    if not small and array.dtype.kind == "f" and array.size:
        mean = float(np.mean(array, dtype=np.float64))
    return Fingerprint(array.shape, array.dtype, array.copy() if small else None,
                       _digest(array), mean)


def saved_tensors_of(node) -> list:
    """``(label, SavedTensor)`` for every tensor a node saved for backward.

    Custom Function nodes keep theirs in ``ctx._saved`` (label ``("saved", i)``: the i-th
    argument of ``save_for_backward``); built-in op nodes in ``_saved_inputs`` (label
    ``("input", i)``) and ``_saved_output`` (label ``("output", 0)``).
    """
    found = []
    saved = getattr(node, "_saved", None)
    if isinstance(saved, (list, tuple)):
        for index, item in enumerate(saved):
            if isinstance(item, _engine.SavedTensor):
                found.append((("saved", index), item))
    inputs = getattr(node, "_saved_inputs", None)
    if isinstance(inputs, dict):
        for index, item in inputs.items():
            if isinstance(item, _engine.SavedTensor):
                found.append((("input", index), item))
    output = getattr(node, "_saved_output", None)
    if isinstance(output, _engine.SavedTensor):
        found.append((("output", 0), output))
    return found


def saved_data(saved) -> np.ndarray | None:
    """The array a SavedTensor currently refers to (None once released)."""
    if saved._tensor is not None:
        return saved._tensor._data
    return saved._data


def fingerprints_of(node) -> list | None:
    """The fingerprints taken when ``node`` was created, or None outside capture."""
    try:
        return _fingerprints.get(node)
    except TypeError:  # not weak-referenceable
        return None


class _CaptureObserver(_engine.Observer):
    """The forward observer of :func:`capture`; passes every event on to the previous one."""

    def __init__(self, previous):
        self.previous = previous

    def node_created(self, node):
        saved = saved_tensors_of(node)
        if saved:
            prints = []
            for label, item in saved:
                data = saved_data(item)
                if data is not None:
                    prints.append((label, fingerprint(data)))
            try:
                _fingerprints[node] = prints
            except TypeError:
                pass
        if self.previous is not None:
            self.previous.node_created(node)

    def saved_packed(self, saved, hook):
        # nothing to capture; pass it on so an outer gradviz.record() still sees it
        method = getattr(self.previous, "saved_packed", None)
        if method is not None:
            method(saved, hook)


class capture:
    """Record, while the graph is built, what :func:`gradviz.debug.doctor` needs.

    Custom Functions applied inside keep copies of their forward arguments, and every saved
    tensor is fingerprinted, so the doctor can re-run each Function on the values it really
    saw and tell which saved tensors were changed after saving (even through ``.numpy()``).
    The previous forward observer keeps receiving every event; nesting is allowed.

    Examples
    --------
    >>> import gradviz as torch
    >>> class Double(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 2
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         return grad * 2
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.debug.capture():
    ...     loss = Double.apply(x).sum()
    >>> torch.debug.doctor(loss).ok
    True
    """

    def __init__(self):
        self._previous = None
        self._installed = False

    def __enter__(self):
        current = _engine.forward_observer()
        if isinstance(current, _CaptureObserver):
            return self  # already capturing: nothing to add
        self._previous = _engine.set_forward_observer(_CaptureObserver(current))
        self._installed = True
        return self

    def __exit__(self, *exc):
        if self._installed:
            _engine.set_forward_observer(self._previous)
            self._installed = False
            self._previous = None
        return False
