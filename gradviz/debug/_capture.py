"""``gradviz.debug.capture()``: keep what the gradient doctor needs while a graph is built.

Inside ``with gradviz.debug.capture():`` a forward observer is installed, so

- every custom Function node keeps copies of its forward arguments, taken before ``forward``
  ran (``ctx._forward_args``, see Note [Forward capture] in ``gradviz.autograd.function``);
  the doctor re-runs the Function on them;
- every saved tensor (of custom and built-in nodes) gets a *fingerprint* when its node is
  created: a copy of small tensors, a hash and a summary of large ones. The doctor compares
  it with the tensor's current value, which finds writes that bypass the version counter
  (through ``.numpy()`` or ``.data``) as well as ordinary in-place operations.

Note [Capturing PyTorch Functions]
----------------------------------
PyTorch keeps no forward arguments on a custom Function's node. When ``torch`` is imported,
``capture()`` also replaces ``torch.autograd.Function.apply`` for the duration of the block
with a wrapper that copies the arguments (tensors detached and cloned before forward runs,
other values as they are, after binding defaults as torch does for ``setup_context``
Functions) and keeps them on the node (the ctx) as ``_gradviz_forward_args``, a
:class:`TorchRecord`. Only calls that build a node are recorded (grad mode on, a tensor
argument requiring grad). The original ``apply`` is put back when the last active capture
exits, even on errors; nested and concurrent captures count their entries under a lock. The
doctor pauses the recording, in its own thread, while it re-runs Functions. Such a node also
gets a pre-hook and a hook that, when its backward runs inside capture() with
``create_graph=True``, note which nodes that backward made (``_watch_backward``): the link
gradviz's engine gives every node made while a custom backward runs, for Note [Custom
Functions behind a gradient penalty] in ``_doctor``.

Nothing of this costs anything outside ``capture()``.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import threading
import weakref
from typing import Any, NamedTuple

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import function as _ext_function

__all__ = ["capture", "keep_forward_inputs", "COPY_LIMIT_BYTES", "TorchRecord", "TORCH_RECORD",
           "torch_recording_paused"]

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
_fingerprints: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# node made while a custom Function's backward ran (create_graph=True) -> that custom node:
# a gradient penalty's graph holds these nodes but not the custom node itself (Note
# [Custom Functions behind a gradient penalty] in ``_doctor``)
_made_in_backward_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# torch custom Function nodes (their ctx) whose backward, run inside capture() with
# create_graph=True, made nodes; each keeps the (sequence_nr, name) of the nodes it made under
# MADE_IN_BACKWARD (torch makes a new Python object for a built-in node each time it is asked
# for one, so the nodes themselves cannot be the keys; Note [Capturing PyTorch Functions])
_torch_makers: weakref.WeakSet = weakref.WeakSet()
MADE_IN_BACKWARD = "_gradviz_made_in_backward"


def torch_made_in_backward():
    """{(sequence_nr, name): the torch custom Function node whose backward made that node}."""
    index = {}
    for maker in list(_torch_makers):
        for key in getattr(maker, MADE_IN_BACKWARD, ()):
            index[key] = maker
    return index


def made_in_backward_of(node):
    """The custom Function node whose backward made ``node`` inside capture(), or None."""
    try:
        return _made_in_backward_of.get(node)
    except TypeError:  # not weak-referenceable
        return None


def _digest(array: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(array).view(np.uint8).data, digest_size=16).digest()


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
        task = _engine.current_graph_task()
        running = getattr(task, "current", None) if task is not None else None
        if running is not None and getattr(running, "_forward_cls", None) is not None:
            try:
                _made_in_backward_of[node] = running
            except TypeError:
                pass
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


# ---- PyTorch: Note [Capturing PyTorch Functions] ------------------------------------------

#: The attribute of a torch custom Function's node (its ctx) that holds its TorchRecord.
TORCH_RECORD = "_gradviz_forward_args"


class TorchRecord(NamedTuple):
    """A torch custom Function's forward arguments, as copies taken before forward ran."""

    args: tuple
    tensor_positions: tuple   # the positions of the tensor arguments (one edge each)


_torch_lock = threading.Lock()
_torch_entries = 0          # active captures that installed the wrapper
_torch_original: tuple[Any, Any] | None = None  # (torch.autograd.Function, its own ``apply``, a classmethod)
_torch_local = threading.local()


class torch_recording_paused:
    """Within the block, this thread's torch ``Function.apply`` calls are not recorded (the
    doctor re-running Functions)."""

    def __enter__(self):
        self._previous = getattr(_torch_local, "paused", False)
        _torch_local.paused = True
        return self

    def __exit__(self, *exc):
        _torch_local.paused = self._previous
        return False


def _bound_arguments(torch, cls, args, kwargs):
    """The arguments as the node counts them (``needs_input_grad`` has one per entry), or
    None when they cannot be told: torch binds defaults for ``setup_context`` Functions."""
    if cls.setup_context is not torch.autograd.Function.setup_context:
        try:
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return None  # torch raises the same TypeError itself
        bound.apply_defaults()
        return None if bound.kwargs else tuple(bound.args)
    return None if kwargs else args


def _node_of(torch, cls, outputs):
    """The node ``cls.apply`` made (the ctx), found on its outputs."""
    for output in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
        if isinstance(output, torch.Tensor):
            node = output.grad_fn
            if node is not None and getattr(node, "_forward_cls", None) is cls:
                return node
    return None


def _recording_apply(original):
    """``torch.autograd.Function.apply`` inside capture(): records the arguments, then calls
    ``original`` (torch's own, a classmethod; bound here so that a capture exiting in another
    thread cannot pull it away from a call in progress)."""
    apply = original.__func__

    def recording_apply(cls, *args, **kwargs):
        torch = sys.modules["torch"]
        if getattr(_torch_local, "paused", False) or not torch.is_grad_enabled():
            return apply(cls, *args, **kwargs)
        bound = _bound_arguments(torch, cls, args, kwargs)
        if bound is None or not any(isinstance(a, torch.Tensor) and a.requires_grad
                                    for a in bound):
            return apply(cls, *args, **kwargs)
        copies = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in bound)
        outputs = apply(cls, *args, **kwargs)
        node = _node_of(torch, cls, outputs)
        if node is not None:
            positions = tuple(i for i, a in enumerate(bound) if isinstance(a, torch.Tensor))
            setattr(node, TORCH_RECORD, TorchRecord(copies, positions))
            _watch_backward(torch, node)
        return outputs

    return recording_apply


_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


def _watch_backward(torch, node):
    """Hooks on a torch custom Function's node that, when its backward runs inside capture()
    with grad mode on (create_graph=True), note the nodes it made: those reachable from the
    gradients it returned whose sequence number is not below a marker node made just before
    it ran (a thread's sequence numbers only grow, and torch runs a CPU backward in the
    calling thread). The hooks hold the node weakly (no reference cycle through torch)."""
    ref = weakref.ref(node)

    def before(grad_outputs):
        owner = ref()
        if owner is not None and _torch_entries and torch.is_grad_enabled():
            marker = torch.empty(0, requires_grad=True).view(0).grad_fn
            owner._gradviz_backward_start = marker._sequence_nr()

    def after(grad_inputs, grad_outputs):
        owner = ref()
        start = getattr(owner, "_gradviz_backward_start", None)
        if owner is None or start is None:
            return
        owner._gradviz_backward_start = None
        made = set()
        stack = [g.grad_fn for g in grad_inputs
                 if isinstance(g, torch.Tensor) and g.grad_fn is not None]
        while stack:
            made_node = stack.pop()
            if made_node is None or made_node.name() == _ACCUMULATE_GRAD:
                continue
            key = (made_node._sequence_nr(), made_node.name())
            if key[0] < start or key in made:
                continue
            made.add(key)
            stack.extend(next_node for next_node, _ in made_node.next_functions)
        if made:
            setattr(owner, MADE_IN_BACKWARD, getattr(owner, MADE_IN_BACKWARD, set()) | made)
            _torch_makers.add(owner)

    node.register_prehook(before)
    node.register_hook(after)


def _install_torch() -> bool:
    """Wrap torch's ``Function.apply`` if torch is imported; True if this call counted."""
    global _torch_entries, _torch_original
    torch = sys.modules.get("torch")
    function = getattr(getattr(torch, "autograd", None), "Function", None)
    if function is None:
        return False
    with _torch_lock:
        if _torch_entries == 0:
            _torch_original = (function, function.__dict__["apply"])
            function.apply = classmethod(_recording_apply(_torch_original[1]))
        _torch_entries += 1
    return True


def _uninstall_torch() -> None:
    global _torch_entries, _torch_original
    with _torch_lock:
        _torch_entries -= 1
        if _torch_entries == 0:
            assert _torch_original is not None  # set by the first _install_torch
            function, apply = _torch_original
            function.apply = apply
            _torch_original = None


class capture:
    """Record, while the graph is built, what :func:`gradviz.debug.doctor` needs.

    Custom Functions applied inside keep copies of their forward arguments, and every saved
    tensor is fingerprinted, so the doctor can re-run each Function on the values it really
    saw and tell which saved tensors were changed after saving (even through ``.numpy()``).
    The previous forward observer keeps receiving every event; nesting is allowed. When
    ``torch`` is imported, ``torch.autograd.Function`` s applied inside keep copies of their
    arguments too (Note [Capturing PyTorch Functions]), so the doctor can re-run them on a
    real PyTorch graph.

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
        self._torch = False

    def __enter__(self):
        self._torch = _install_torch()
        current = _engine.forward_observer()
        if isinstance(current, _CaptureObserver):
            return self  # already capturing: nothing to add
        self._previous = _engine.set_forward_observer(_CaptureObserver(current))
        self._installed = True
        return self

    def __exit__(self, *exc):
        if self._torch:
            self._torch = False
            _uninstall_torch()
        if self._installed:
            _engine.set_forward_observer(self._previous)
            self._installed = False
            self._previous = None
        return False


class keep_forward_inputs:
    """Whether custom Function nodes keep references to their forward arguments, so the
    gradient doctor can re-run them without :func:`capture` and after ``backward()`` freed
    their saved tensors (on by default; Note [Kept forward inputs] in
    ``gradviz_ext/_function.py``, docs/doctor.md for what it costs).

    The setting changes at the call, for the whole process, and applies to nodes recorded
    from then on; used as a context manager, the previous setting is put back on leaving.

    Examples
    --------
    >>> import gradviz as torch
    >>> with torch.debug.keep_forward_inputs(False):  # a memory-tight training loop
    ...     pass
    >>> torch.debug.keep_forward_inputs.enabled()
    True
    """

    def __init__(self, enabled: bool):
        if not isinstance(enabled, bool):
            raise TypeError(f"keep_forward_inputs(enabled): enabled must be a bool, got "
                            f"{type(enabled).__name__}; pass True or False")
        self._previous = _ext_function.set_keep_forward_inputs(enabled)

    @staticmethod
    def enabled() -> bool:
        """The current setting."""
        return _ext_function.keeps_forward_inputs()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _ext_function.set_keep_forward_inputs(self._previous)
        return False
