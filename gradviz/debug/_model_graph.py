"""What the gradient doctor's model-level checks read from a graph, on gradviz and on PyTorch
alike: ``GraphLibrary`` (nodes, saved tensors and their versions, source lines, module calls),
``ModelGraph`` (the walk: leaves, distances from the roots, leaves below a node), the parameters'
names, and the ``Finding`` of a model-level kind (Note [Model-level checks] in
``_model_checks``)."""

from __future__ import annotations

import os
import re
import sys
from collections import deque

import numpy as np

from gradviz_ext import engine as _engine

from .._tensor import Tensor
from . import _capture
from ._report import Finding
from ._torch_scopes import CALL_KEY

__all__ = ["GraphLibrary", "ModelGraph", "model_finding", "module_of", "named_parameters", "op_of"]


def op_of(node):
    """``SubBackward0`` -> ``Sub``; ``torch::autograd::AccumulateGrad`` -> ``AccumulateGrad``."""
    name = node.name().rsplit("::", 1)[-1]
    return re.sub(r"Backward\d*$", "", name)


class GraphLibrary:
    """What the checks read from a graph of one library (gradviz, or torch with ``torch``)."""

    def __init__(self, torch=None):
        self.torch = torch
        self._saved = {}  # node -> saved(node): torch unpacks on every read

    def is_tensor(self, value):
        return isinstance(value, self.torch.Tensor if self.torch else Tensor)

    def array(self, tensor):
        if self.torch is None:
            return tensor._data
        tensor = tensor.detach()
        if tensor.dtype.is_floating_point and tensor.element_size() < 4:
            tensor = tensor.float()
        return tensor.cpu().numpy()

    def frame(self, node):
        """The module call that built ``node``: gradviz's ``ScopeFrame``, or the
        ``ModuleCall`` that ``torch_scopes`` kept; None outside every recorded call."""
        if self.torch is None:
            return getattr(node, "_scope", None)
        try:
            return node.metadata.get(CALL_KEY)
        except Exception:  # noqa: BLE001 - a node without metadata (a C++ custom node)
            return None

    def top_module_calls(self, outermost):
        """``[(module, sequence number)]``, oldest first, of the latest module calls made
        outside every other call, from the record kept beside ``outermost`` (frames of such
        calls): the engine's on gradviz, the ``torch_scopes`` block's on torch."""
        if self.torch is None:
            return _engine.top_module_calls()
        block = next((frame.top_calls for frame in outermost
                      if getattr(frame, "top_calls", None) is not None), None)
        return [] if block is None else block.top_module_calls()

    def site(self, node):
        """``"file:line"`` of the user's line that made ``node`` in forward, or None: gradviz
        keeps it in anomaly mode and inside a recording (``_forward_site``), torch in anomaly
        mode (``metadata["traceback_"]``)."""
        if node is None:
            return None
        if self.torch is None:
            return _gradviz_site(getattr(node, "_forward_site", None))
        try:
            stack = node.metadata.get("traceback_")
        except Exception:  # noqa: BLE001 - a node without metadata
            return None
        return _torch_site(stack, self.torch)

    def is_leaf(self, node):
        if self.torch is None:
            return isinstance(node, _engine.AccumulateGrad)
        return hasattr(node, "variable")

    def sequence(self, node):
        try:
            return node._sequence_nr()
        except Exception:  # noqa: BLE001 - a node without one sorts last
            return 1 << 62

    def edge_shape(self, node, nr):
        """The shape of the tensor that flows along edge ``(node, nr)``, or None."""
        if node is None:
            return None
        if self.is_leaf(node):
            return tuple(node.variable.shape)
        metadata = getattr(node, "_input_metadata", None)
        if metadata is None or nr >= len(metadata):
            return None
        return tuple(metadata[nr].shape)

    def saved(self, node):
        """``[(label, tensor or None, moved)]``: the node's saved tensors; ``moved`` is
        ``(saved version, version now, overwriter, producer)`` when an in-place op changed it
        since, else None: ``overwriter`` the node of that op when the tensor tells it (its
        ``grad_fn`` now; else None), ``producer`` ``(node or op name, output_nr)`` of the op
        that made the tensor, as far as known (:func:`_overwriter` finds the op from it)."""
        found = self._saved.get(node)
        if found is None:
            found = self._saved[node] = self._read_saved(node)
        return found

    def _read_saved(self, node):
        found: list[tuple[str, object, tuple | None]]
        if self.torch is None:
            found = []
            for label, item in _capture.saved_tensors_of(node):
                tensor = item._tensor
                if item._version_counter.value != item._saved_version:
                    writer = None if tensor is None else _engine.stored_grad_fn(tensor)
                    producer = (node if item._is_output else item._grad_fn, item._output_nr)
                    found.append((label, tensor, (item._saved_version,
                                                  item._version_counter.value, writer,
                                                  producer)))
                    continue
                data = _capture.saved_data(item)
                if data is not None:
                    found.append((label, tensor if tensor is not None else data, None))
            return found
        found = []
        for attribute in sorted(dir(node)):
            if not attribute.startswith("_raw_saved_"):
                continue
            name = attribute[len("_raw_saved_"):]
            try:
                value = node.saved_tensors if name == "tensors" else getattr(node, "_saved_" + name)
            except RuntimeError as exc:
                text = str(exc)
                if "modified by an inplace operation" in text:
                    # torch names the op that made the tensor ("output 0 of Sigmoid"), not
                    # the one that overwrote it
                    match = re.search(r"output (\d+) of (\w+), is at version (\d+); expected "
                                      r"version (\d+)", text)
                    moved = (None, None, None, None) if match is None else \
                        (int(match.group(4)), int(match.group(3)), None,
                         (match.group(2), int(match.group(1))))
                    found.append((name, None, moved))
                continue
            values = value if isinstance(value, (tuple, list)) else (value,)
            for index, tensor in enumerate(values):
                if isinstance(tensor, self.torch.Tensor):
                    found.append((name if len(values) == 1 else f"{name}[{index}]", tensor, None))
        return found

    def producer(self, saved):
        """The node that made a saved tensor (None for a leaf, a constant or an array)."""
        if isinstance(saved, np.ndarray):
            return None
        if self.torch is None:
            return _engine.stored_grad_fn(saved)
        return saved.grad_fn

    def memory_key(self, tensor):
        """A key equal for tensors that may share memory: the array that owns a gradviz
        tensor's buffer, a torch tensor's storage address; None without one."""
        if self.torch is None:
            array = tensor._data if isinstance(tensor, Tensor) else tensor
            while isinstance(array, np.ndarray) and isinstance(array.base, np.ndarray):
                array = array.base
            return id(array) if isinstance(array, np.ndarray) else None
        try:
            return tensor.untyped_storage().data_ptr() or None
        except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
            return None

    def shares_memory(self, a, b):
        if self.torch is None:
            first = a._data if isinstance(a, Tensor) else a
            second = b._data if isinstance(b, Tensor) else b
            return isinstance(second, np.ndarray) and np.shares_memory(first, second)
        if not isinstance(b, self.torch.Tensor) or a.device != b.device:
            return False
        try:
            return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() \
                and a.untyped_storage().nbytes() > 0
        except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse)
            return False


_TRACEBACK_LINE = re.compile(r'File "(.*)", line (\d+), in ')


def _gradviz_site(site):
    """``"file:line"`` from a gradviz node's ``_forward_site``: the recorder's dict, or the
    anomaly mode's ``ForwardSite`` (its frames outermost first)."""
    if site is None:
        return None
    if isinstance(site, dict):
        return f"{site['file']}:{site['line']}" if site.get("file") else None
    frames = getattr(site, "frames", None)
    if not frames:
        return None
    filename, line = frames[-1][0], frames[-1][1]
    return f"{filename}:{line}"


def _torch_site(stack, torch):
    """``"file:line"`` of the innermost frame outside torch and gradviz in a torch node's
    anomaly-mode traceback (a list of formatted stack lines), or None."""
    if not stack:
        return None
    skip = tuple(os.path.dirname(os.path.abspath(module.__file__)) + os.sep
                 for module in (torch, sys.modules["gradviz"]) if module.__file__ is not None)
    found = None
    for text in stack:
        match = _TRACEBACK_LINE.search(text)
        if match is not None and not os.path.abspath(match.group(1)).startswith(skip):
            found = f"{match.group(1)}:{match.group(2)}"
    return found


def named_parameters(params, nodes, library):
    """``[(name, tensor)]`` from ``params``: a Module (gradviz or torch), an iterable of
    ``(name, tensor)`` pairs, or None (the graph's leaves that require grad, named by
    position and shape)."""
    if params is None:
        found: list[tuple[str, object]] = []
        for node in nodes:
            if library.is_leaf(node):
                variable = node.variable
                found.append((f"leaf {len(found)} {list(variable.shape)}", variable))
        return found
    method = getattr(params, "named_parameters", None)
    if callable(method):
        return list(method())
    try:
        pairs = list(params)
    except TypeError:
        raise TypeError(
            f"doctor: params must be a Module, an iterable of (name, tensor) pairs, or None; "
            f"got {type(params).__name__}: pass model, or model.named_parameters()") from None
    result = []
    for index, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                and library.is_tensor(pair[1])):
            raise TypeError(
                f"doctor: params[{index}] must be a (name, tensor) pair of a str and a "
                f"{'torch.Tensor' if library.torch else 'gradviz Tensor'} (the library of the "
                f"loss), got {type(pair).__name__} {pair!r:.60}: pass model.named_parameters()")
        result.append(pair)
    return result


def module_of(name):
    return name.rsplit(".", 1)[0] if "." in name else None


def model_finding(kind, node, params, summary, message, cause, fix, evidence, severity="error",
             module=None):
    return Finding(kind=kind, function=None, node=node, input_index=None,
                   message=f"{message} - {cause}" if cause else message, hint=cause,
                   severity=severity, details=evidence, params=list(params), summary=summary,
                   fix=fix, module=module)


class ModelGraph:
    """The walk: nodes, their children, distances from the roots, leaves by tensor id."""

    def __init__(self, roots, nodes, library):
        self.library = library
        self.nodes = nodes
        self.roots = roots
        self.leaf_of = {}       # id(variable) -> its AccumulateGrad node
        for node in nodes:
            if library.is_leaf(node):
                self.leaf_of[id(node.variable)] = node
        self.depth: dict[object, int] = {}
        queue = deque((r.grad_fn, 0) for r in roots if r.grad_fn is not None)
        while queue:
            node, depth = queue.popleft()
            if node in self.depth:
                continue
            self.depth[node] = depth
            for child, _ in node.next_functions:
                if child is not None and child not in self.depth:
                    queue.append((child, depth + 1))
        self._below = {}
        self._by_memory = None

    def saved_by_memory(self):
        """``{memory key: [(node, label, tensor)]}`` of the saved tensors the graph holds
        (``GraphLibrary.memory_key``), built once."""
        if self._by_memory is None:
            library = self.library
            found: dict[int, list] = {}
            for node in self.nodes:
                if library.is_leaf(node):
                    continue
                for label, saved, _ in library.saved(node):
                    if saved is not None and library.is_tensor(saved):
                        key = library.memory_key(saved)
                        if key is not None:
                            found.setdefault(key, []).append((node, label, saved))
            self._by_memory = found
        return self._by_memory

    def leaves_below(self, node):
        """ids of the leaf variables reachable from ``node``."""
        found = self._below.get(node)
        if found is not None:
            return found
        found, stack, seen = set(), [node], set()
        while stack:
            current = stack.pop()
            if current is None or current in seen:
                continue
            seen.add(current)
            if self.library.is_leaf(current):
                found.add(id(current.variable))
                continue
            stack.extend(child for child, _ in current.next_functions)
        self._below[node] = found
        return found
