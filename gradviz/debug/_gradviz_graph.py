"""What the gradient doctor reads from a gradviz graph: forward arguments (``_arguments``),
saved tensors changed after saving, and the extra backward pass (``_torch_graph`` is the same
for a PyTorch graph)."""

from __future__ import annotations

import contextlib

import numpy as np

from gradviz_ext import engine as _engine

from .. import ops as _ops
from .._tensor import Tensor
from ..autograd._functional import make_graph_task
from . import _capture
from ._arguments import graph_values, is_custom, recorded_inputs
from ._report import _WORST, Entry, Finding, _fmt, _format_index, _index
from ._rerun import GradvizRerun

__all__ = ["GradvizGraph"]


class GradvizGraph:
    """The doctor's view of a gradviz graph: its nodes, how to read a custom node's forward
    arguments (``_arguments``), the saved-tensor checks and the extra backward pass.
    ``_torch_graph.TorchGraph`` is the same for a PyTorch graph."""

    rerun = GradvizRerun
    torch = False

    def __init__(self, roots, nodes):
        self.roots = roots
        self.nodes = nodes
        self.custom = [n for n in nodes if is_custom(n)]
        self._known = None

    @staticmethod
    def node_id(node):
        return node.node_id

    @contextlib.contextmanager
    def paused(self):
        previous = _engine.set_forward_observer(None)
        try:
            yield
        finally:
            _engine.set_forward_observer(previous)

    def saved_findings(self):
        return _check_saved(self.nodes)

    def backward_pass(self, gradient, report):
        return _backward_pass(self.roots, gradient, self.nodes, report)

    def arguments(self, node):
        if self._known is None:  # after the backward pass, as the graph is then
            self._known = graph_values(self.nodes)
        return recorded_inputs(node, self._known)


# ---- mutated saved tensors ---------------------------------------------------------------

def _check_saved(nodes):
    findings = []
    for node in nodes:
        prints = dict(_capture.fingerprints_of(node) or ())
        for label, item in _capture.saved_tensors_of(node):
            data = _capture.saved_data(item)
            if data is None:
                continue
            version_moved = item._version_counter.value != item._saved_version
            fingerprint = prints.get(label)
            changed = None
            if fingerprint is not None:
                changed = _compare_fingerprint(fingerprint, data)
            if not version_moved and not changed:
                continue
            findings.append(_mutated_finding(node, label, item, version_moved, changed,
                                             fingerprint))
    return findings


def _compare_fingerprint(fingerprint, data):
    """None if ``data`` still matches, else a dict describing the change."""
    if data.shape != fingerprint.shape or data.dtype != fingerprint.dtype:
        return {"entries": None, "shape": (fingerprint.shape, data.shape),
                "dtype": (fingerprint.dtype, data.dtype)}
    if fingerprint.copy is not None:
        old = fingerprint.copy
        if old.tobytes() == np.ascontiguousarray(data).tobytes():
            return None
        differ = (old != data) & ~(_isnan(old) & _isnan(data))
        flat = np.flatnonzero(differ.reshape(-1))
        old64 = old.reshape(-1)[flat].astype(np.float64)
        new64 = data.reshape(-1)[flat].astype(np.float64)
        with np.errstate(invalid="ignore"):
            change = np.abs(new64 - old64)
        order = np.argsort(-np.nan_to_num(change, nan=np.inf))[:_WORST]
        worst = [Entry(_index(flat[i], data.shape), float(old64[i]), float(new64[i])) for i in order]
        return {"entries": int(flat.size), "numel": int(data.size), "worst": worst,
                "max_abs": float(np.nanmax(change)) if change.size else 0.0}
    if _capture._digest(data) == fingerprint.digest:
        return None
    return {"entries": None, "numel": int(data.size), "worst": []}


def _isnan(array):
    return np.isnan(array) if array.dtype.kind in "fc" else np.zeros(array.shape, dtype=bool)


def _saved_input_position(node, item, fingerprint=None):
    """Which forward argument a saved (non-output) tensor is, when that can be told.

    By its autograd identity (the edge it feeds); an in-place op since then rebased its
    history, so the edge may sit a few nodes below its ``grad_fn``. Failing that, by value:
    the fingerprint taken at save time equals the recorded copy of exactly one argument.
    """
    if item._is_output or item._tensor is None:
        return None
    tensor = item._tensor
    positions = getattr(node, "_tensor_input_positions", ())
    depth = min(max(item._version_counter.value - item._saved_version, 0), 8)
    for edge, (next_node, input_nr) in enumerate(node.next_functions):
        if next_node is None:
            continue
        node_of = _engine.stored_grad_fn(tensor)  # no error for a view whose base changed
        if node_of is not None:
            same = _feeds(node_of, tensor._output_nr, next_node, input_nr, depth)
        else:
            same = isinstance(next_node, _engine.AccumulateGrad) and next_node.variable is tensor
        if same:
            return positions[edge] if edge < len(positions) else edge
    recorded = getattr(node, "_forward_args", None)
    if fingerprint is not None and fingerprint.copy is not None and recorded is not None:
        matches = [p for p, a in enumerate(recorded) if isinstance(a, Tensor)
                   and a._data.shape == fingerprint.shape and a._data.dtype == fingerprint.dtype
                   and a._data.tobytes() == fingerprint.copy.tobytes()]
        if len(matches) == 1:
            return matches[0]
    return None


def _feeds(grad_fn, output_nr, target, target_nr, depth):
    """Whether ``(grad_fn, output_nr)`` is the edge ``(target, target_nr)``, or was before at
    most ``depth`` in-place operations rebased it (each puts the old edge first)."""
    node, nr = grad_fn, output_nr
    for _ in range(depth + 1):
        if node is target and nr == target_nr:
            return True
        if node is None or not node.next_functions:
            return False
        node, nr = node.next_functions[0]
    return False


def _mutated_finding(node, label, item, version_moved, changed, fingerprint):
    kind, number = label
    if is_custom(node):
        position = _saved_input_position(node, item, fingerprint)
        what = f"saved tensor {number}"
        if item._is_output:
            what += f" (output {item._output_nr})"
        elif position is not None:
            what += f" (input {position})"
    else:
        position = number if kind == "input" else None
        what = f"its saved {kind} {number}" if kind == "input" else "its saved output"
    worst = (changed or {}).get("worst", [])
    message = f"{node.name()}: {what} was changed after it was saved"
    details = {"saved": label, "version_moved": version_moved}
    if changed and changed.get("entries") is not None:
        first = worst[0]
        message += (f" ({changed['entries']} of {changed['numel']} entries differ; at "
                    f"{_format_index(first.index)}: saved {_fmt(first.analytic)}, now "
                    f"{_fmt(first.numeric)})")
    elif changed and "shape" in changed:
        message += f" (it now has shape {list(changed['shape'][1])}, dtype {changed['dtype'][1]})"
    if version_moved:
        message += (f"; an in-place operation moved its version from {item._saved_version} to "
                    f"{item._version_counter.value}, so backward will raise")
        hint = "clone the tensor before modifying it in place"
    else:
        message += ("; the change bypassed the version counter (a write through .numpy() or "
                    ".data?), so backward silently uses the new values")
        hint = "write to a copy, or clone the tensor before saving it"
    return Finding(kind="mutated_saved", function=getattr(node, "_forward_cls", None), node=node, input_index=position,
                   message=message, max_abs_error=(changed or {}).get("max_abs"),
                   worst=list(worst), hint=hint, details=details)


# ---- the extra backward pass -------------------------------------------------------------

def _nonfinite(grads):
    """(slot, nan, inf, index of the first) of the first gradient with NaN/Inf entries, or
    None."""
    for slot, grad in enumerate(grads):
        if grad is None:
            continue
        data = grad._data
        if data.dtype.kind != "f":
            continue
        bad = ~np.isfinite(data)
        if bad.any():
            first = _index(np.flatnonzero(bad.reshape(-1))[0], data.shape)
            return slot, int(np.isnan(data).sum()), int(np.isinf(data).sum()), first
    return None


class _PassObserver(_engine.Observer):
    """Watches the doctor's backward pass: first NaN/Inf, dtype casts, shape reductions, errors."""

    def __init__(self):
        self.incoming = {}
        self.first_nonfinite = None
        self.casts = []
        self.failure = None  # (node, exception) of a backward that raised
        self.grads_in = {}   # custom node -> the gradients it received (copies)
        self.grads_out = {}  # custom node -> the gradients it returned, by edge (copies)
        self.leaf_grads = None  # id(leaf) -> its gradient (a Tensor or None), once finished

    def node_started(self, task, node, grads):
        if self.first_nonfinite is None:
            self.incoming[node] = _nonfinite(grads)
        if is_custom(node):
            self.grads_in[node] = [None if g is None else g._data.copy() for g in grads]

    def node_finished(self, task, node, grads_in, grads_out, duration):
        if is_custom(node):
            self.grads_out[node] = [None if g is None else g._data.copy() for g in grads_out]
        if self.first_nonfinite is not None:
            return
        produced = _nonfinite(grads_out)
        if produced is not None:
            self.first_nonfinite = (node, produced, self.incoming.get(node), _nonfinite(grads_in))
        self.incoming.pop(node, None)

    def grad_cast(self, task, node, slot, from_dtype, to_dtype):
        if is_custom(node):
            self.casts.append((node, slot, from_dtype, to_dtype))

    def error(self, task, node, exc):
        self.failure = (node, exc)


def _backward_pass(roots, gradient, nodes, report):
    """One backward pass that leaves ``.grad`` alone (the leaves' gradients are captured)."""
    if gradient is None:
        gradient = [_ops.ones_like(r) for r in roots]
    leaves = [(n, 0) for n in nodes if isinstance(n, _engine.AccumulateGrad)]
    before = [(n.variable, n.variable.grad) for n, _ in leaves]
    observer = _PassObserver()
    try:
        task = make_graph_task(list(roots), gradient, retain_graph=True, capture=leaves or None,
                               observer=observer)
        captured = task.run()
        # the leaves' gradients, for the model-level checks (``_model_checks``)
        observer.leaf_grads = {id(node.variable): grad for (node, _), grad
                               in zip(leaves, captured or ())}
    except Exception as exc:  # noqa: BLE001 - the user's backward may raise anything
        if str(exc).startswith("Trying to backward through the graph a second time"):
            report.notes.append(
                "the graph's saved tensors were already freed by a backward() without "
                "retain_graph=True, so NaN/Inf and dtype checks could not run")
        elif observer.failure is None:
            report.notes.append(f"the backward pass could not start: {type(exc).__name__}: {exc}")
    finally:
        for variable, grad in before:
            if variable.grad is not grad:
                variable.grad = grad
    return observer
