"""Overlays: one value per node, to colour the graph by (``session.overlay`` and the built-ins).

An overlay is a name, a kind and ``{node id: value}`` for some of the graph's nodes (a node
without a value is drawn uncoloured):

* ``continuous``: numbers (NaN and infinities allowed: the view gives them their own colour);
* ``categorical``: strings (e.g. a dtype);
* ``boolean``: ``True``/``False``.

Users add their own with :meth:`SessionBase.overlay`. The built-ins (``BUILTIN_OVERLAYS``)
are computed from the events the session has shown, so they change as the backward pass
proceeds and a replay shows what the live session showed at the same point.

Note [Incremental overlays]
---------------------------
A Step must stay cheap on a 10,000-node graph, so the built-ins are not recomputed over the
whole graph on every change. The session's :class:`~gradviz.debug._view.EventView` records
which nodes the events it applied touched (``touched``); :class:`BuiltinOverlays` recomputes
only those nodes, and everything when the view was replaced (a replay stepping back rebuilds
it) or a new backward pass began (``epoch``). A value dict is replaced by a new object only
when one of its values changed, so a consumer (the widget) can compare by identity.
"""

from __future__ import annotations

import math
import numbers
import re
import weakref
from collections.abc import Iterable

import numpy

from ._view import EventView

__all__ = ["BUILTIN_OVERLAYS", "OVERLAY_KINDS", "BuiltinOverlays", "validate_overlay"]

OVERLAY_KINDS = ("continuous", "categorical", "boolean")

#: name -> (kind, scale, title, description) of each built-in overlay, in menu order.
BUILTIN_OVERLAYS = {
    "grad_norm": ("continuous", "log", "gradient norm",
                  "L2 norm of the gradient the node received (all input slots together)"),
    "max_abs_grad": ("continuous", "log", "max |grad|",
                     "largest absolute entry of the gradient the node received"),
    "nonfinite": ("boolean", "linear", "NaN/Inf",
                  "whether a gradient the node received or returned holds a NaN or an Inf"),
    "dtype": ("categorical", "linear", "dtype",
              "dtype of the gradient the node received (else of its forward output)"),
    "saved_bytes": ("continuous", "log", "saved bytes",
                    "bytes of the tensors the node saved for backward while it holds them "
                    "(0 once they are freed)"),
}

#: At most this many characters in an overlay's name (it is shown in a menu and a legend).
MAX_NAME_LENGTH = 80
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _number(value):
    """A summary statistic as a float (summaries write NaN and infinities as text)."""
    if value is None:
        return None
    return float(value)


def _received(facts: dict) -> list:
    return [summary for summary in (facts.get("grads_in") or ()) if summary is not None]


def grad_norm(facts: dict):
    summaries = _received(facts)
    if not summaries:
        return None
    # a summary's statistics are over the finite entries; NaN and Inf are counted apart
    if any(summary["nan"] for summary in summaries):
        return math.nan
    if any(summary["inf"] for summary in summaries):
        return math.inf
    norms = [_number(summary["norm"]) for summary in summaries]
    if any(norm is None for norm in norms):
        return None
    return math.sqrt(sum(norm * norm for norm in norms))


def max_abs_grad(facts: dict):
    summaries = [s for s in _received(facts) if s["numel"] > 0]
    if not summaries:
        return None
    found = []
    for summary in summaries:
        if summary["nan"]:
            return math.nan
        if summary["inf"]:
            found.append(math.inf)
            continue
        low, high = _number(summary["min"]), _number(summary["max"])
        if low is None or high is None:
            return None
        found.append(max(abs(low), abs(high)))
    return max(found)


def nonfinite(facts: dict):
    if facts.get("grads_in") is None:
        return None
    summaries = _received(facts) + [s for s in (facts.get("grads_out") or ()) if s is not None]
    return any(summary["nan"] or summary["inf"] for summary in summaries)


def dtype(facts: dict):
    for summary in _received(facts):
        return summary["dtype"]
    created = facts.get("created")
    if created is not None:
        for meta in created.get("outputs") or ():
            if meta is not None and meta.get("dtype"):
                return meta["dtype"]
    return None


def _itemsize(name: str) -> int:
    if name == "bfloat16":
        return 2
    try:
        return numpy.dtype(name).itemsize
    except TypeError:
        return 0


def saved_bytes_of(entries) -> int:
    """Bytes of saved-tensor entries: their ``bytes``, else shape times the dtype's size."""
    total = 0
    for entry in entries:
        size = entry.get("bytes")
        if size is None:
            size = math.prod(entry.get("shape") or ()) * _itemsize(str(entry.get("dtype")))
        total += int(size)
    return total


_COMPUTE = {"grad_norm": grad_norm, "max_abs_grad": max_abs_grad, "nonfinite": nonfinite,
            "dtype": dtype}
#: The built-ins that also colour edges: by the gradient that flowed along each edge.
EDGE_OVERLAYS = ("grad_norm", "max_abs_grad", "nonfinite")


def edge_key(source: int, target: int, input_nr: int, occurrence: int) -> str:
    """An edge's key in an overlay's ``edges``: ``"source:target:input_nr:k"``, ``k`` counting
    the graph's edges with the same three (``x * x`` joins one pair twice), in graph order."""
    return f"{source}:{target}:{input_nr}:{occurrence}"


def _edge_values(node_id, facts) -> dict[str, dict]:
    """``{name: {edge key: value}}`` of the edges into ``node_id``, from the contributions its
    input buffer received (``buffer_added``: the k-th from one producer into one slot came along
    the k-th such edge)."""
    found: dict[str, dict] = {name: {} for name in EDGE_OVERLAYS}
    seen: dict[tuple, int] = {}
    for event in facts.get("contributions") or ():
        pair = (event["producer"], event["slot"])
        occurrence = seen.get(pair, 0)
        seen[pair] = occurrence + 1
        grad = event.get("grad")
        if event["producer"] is None or grad is None:
            continue
        key = edge_key(event["producer"], node_id, event["slot"], occurrence)
        received = {"grads_in": [grad]}
        for name in EDGE_OVERLAYS:
            value = _COMPUTE[name](received)
            if value is not None:
                found[name][key] = value
    return found


class BuiltinOverlays:
    """The built-in overlays of one session, kept up to date incrementally (Note
    [Incremental overlays]). ``saved_entries(node_id, facts)`` lists what a node saved
    (dicts with ``bytes``, or ``shape`` and ``dtype``); the session provides it, as a bound
    method held weakly: the session holds this object, and a strong reference back would be a
    cycle that keeps a dropped session's graph alive until the cycle collector runs."""

    def __init__(self, saved_entries):
        self._saved_entries = weakref.WeakMethod(saved_entries)
        self._view: EventView | None = None
        self._epoch: int | None = None
        self.values: dict[str, dict] = {name: {} for name in BUILTIN_OVERLAYS}
        #: ``{name: {edge key: value}}`` for EDGE_OVERLAYS; the keys into each node, by node
        self.edges: dict[str, dict] = {name: {} for name in EDGE_OVERLAYS}
        self._edge_keys: dict[int, set] = {}

    def _node_values(self, node_id, facts) -> dict:
        found = {name: compute(facts) for name, compute in _COMPUTE.items()}
        released = facts.get("released")
        reader = self._saved_entries()
        entries = None if reader is None else reader(node_id, facts)
        if entries is not None:
            found["saved_bytes"] = 0 if released is not None else saved_bytes_of(entries)
        elif released is not None:
            found["saved_bytes"] = 0
        else:
            found["saved_bytes"] = None
        return found

    def update(self, view: EventView, node_ids: Iterable[int]) -> dict[str, dict]:
        """Bring the values up to date with ``view`` (an EventView; ``node_ids``: every node
        of the graph, for a full recompute) and return ``{name: {node id: value}}``."""
        full = view is not self._view or view.epoch != self._epoch
        if full:
            changed = list(node_ids)
            fresh: dict[str, dict[int, object]] | None = {name: {} for name in BUILTIN_OVERLAYS}
            self.edges = {name: {} for name in EDGE_OVERLAYS}
            self._edge_keys = {}
        else:
            changed = list(view.touched)
            fresh = None
        view.touched.clear()
        self._view, self._epoch = view, view.epoch
        if not changed and not full:
            return self.values
        copies = fresh if fresh is not None else {}
        empty: dict = {}
        for node_id in changed:
            found = self._node_values(node_id, view.facts.get(node_id, empty))
            for name, value in found.items():
                target = copies.get(name)
                current = self.values[name].get(node_id)
                if target is None:
                    if value == current or (value is None and node_id not in self.values[name]):
                        continue
                    if isinstance(value, float) and isinstance(current, float) and \
                            math.isnan(value) and math.isnan(current):
                        continue
                    target = copies[name] = dict(self.values[name])
                if value is None:
                    target.pop(node_id, None)
                else:
                    target[node_id] = value
        for name, target in copies.items():
            self.values[name] = target
        self._update_edges(view, changed)
        return self.values

    def _update_edges(self, view, changed) -> None:
        copies: dict[str, dict] = {}
        empty: dict = {}
        for node_id in changed:
            found = _edge_values(node_id, view.facts.get(node_id, empty))
            old = self._edge_keys.get(node_id, set())
            new = set().union(*(values.keys() for values in found.values()))
            for name in EDGE_OVERLAYS:
                current = self.edges[name]
                if all(current.get(key) == found[name].get(key) for key in old | new) and \
                        not any(isinstance(v, float) and math.isnan(v) for v in found[name].values()):
                    continue
                target = copies.get(name)
                if target is None:
                    target = copies[name] = dict(current)
                for key in old - found[name].keys():
                    target.pop(key, None)
                target.update(found[name])
            if new:
                self._edge_keys[node_id] = new
            else:
                self._edge_keys.pop(node_id, None)
        for name, target in copies.items():
            self.edges[name] = target


def _node_id(key, known) -> int:
    """A node id from an overlay key: an int, a graph node dict or a node with ``node_id``."""
    if isinstance(key, dict) and "id" in key:
        key = key["id"]
    else:
        key = getattr(key, "node_id", key)
    if isinstance(key, bool) or not isinstance(key, numbers.Integral):
        raise TypeError(f"overlay keys must be node ids (int), graph node dicts or nodes, got "
                        f"{type(key).__name__} {key!r:.60}")
    node_id = int(key)
    if node_id not in known:
        raise KeyError(f"overlay: no node with id {node_id} in this session's graph "
                       f"(ids run from {min(known, default=0)} to {max(known, default=0)}; "
                       f"see session.graph()['nodes'])")
    return node_id


def _value(value, key):
    """An overlay value as bool, float (NaN and infinities kept) or str, naming ``key`` when
    it is none of these."""
    if isinstance(value, (bool, numpy.bool_)):
        return bool(value)
    if isinstance(value, (numbers.Real, numpy.integer, numpy.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and callable(numel) and numel() == 1:
        return _value(item(), key)
    raise TypeError(f"overlay value for node {key} must be a number, a bool or a str, got "
                    f"{type(value).__name__} {value!r:.60}; pass float(value) or tensor.item()")


def validate_overlay(name, values, known, kind=None) -> tuple[str, dict[int, object]]:
    """Check a user overlay and return ``(kind, {node id: value})``.

    Raises
    ------
    TypeError
        A name that is not a str, values that are not a dict, a key that is not a node id,
        a value that is not a number, bool or str, or values of mixed kinds.
    ValueError
        A name that is empty, too long, has control characters or is a built-in's name;
        an unknown ``kind``.
    KeyError
        A node id the graph does not have.
    """
    if not isinstance(name, str):
        raise TypeError(f"overlay name must be a str, got {type(name).__name__} {name!r:.60}")
    if not name.strip() or len(name) > MAX_NAME_LENGTH or _CONTROL.search(name):
        raise ValueError(f"overlay name must be 1 to {MAX_NAME_LENGTH} printable characters, got "
                         f"{name!r:.100}")
    if name in BUILTIN_OVERLAYS:
        raise ValueError(f"overlay name {name!r} is a built-in overlay's; choose another name "
                         f"(built-ins: {', '.join(BUILTIN_OVERLAYS)})")
    if kind is not None and kind not in OVERLAY_KINDS:
        raise ValueError(f"overlay kind must be one of {', '.join(OVERLAY_KINDS)} or None "
                         f"(inferred), got {kind!r}")
    if not isinstance(values, dict):
        raise TypeError(f"overlay values must be a dict {{node id: value}}, got "
                        f"{type(values).__name__}")
    checked: dict[int, object] = {}
    kinds: dict[type, int] = {}
    for key, value in values.items():
        node_id = _node_id(key, known)
        found = _value(value, node_id)
        checked[node_id] = found
        kinds.setdefault(type(found), node_id)
    inferred = {bool: "boolean", float: "continuous", str: "categorical"}
    if len(kinds) > 1:
        described = ", ".join(f"{inferred[t]} (node {node})" for t, node in kinds.items())
        raise TypeError(f"overlay {name!r} mixes kinds of values: {described}; use one kind")
    found_kind = inferred[next(iter(kinds))] if kinds else "continuous"
    if kind is None:
        kind = found_kind
    elif kind == "categorical":
        checked = {node: (value if isinstance(value, str) else _category(value))
                   for node, value in checked.items()}
    elif kind != found_kind:
        raise TypeError(f"overlay {name!r}: kind={kind!r} but the values are {found_kind}")
    return kind, checked


def _category(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
