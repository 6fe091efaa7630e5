"""``diff``: compare two recorded backward passes node by node.

Note [Matching nodes of two traces]
-----------------------------------
Node ids mean nothing across traces (a gradviz trace numbers nodes in creation order, a
``record_torch`` trace in the order it walked the graph), so nodes are matched by what the
user recognizes:

* a named leaf (``AccumulateGrad`` with a ``leaf_name``) by its name;
* any other node by its module path, the application of that path (``module_call``), its
  name (``AddmmBackward0``) and the shapes of its forward outputs and of its inputs made by
  other ops (from ``node_created``: an
  RNN cell's two ``addmm`` differ there, whichever the implementation runs first); among
  nodes sharing all of these, by occurrence: the k-th to run in one trace with the k-th to
  run in the other (nodes that never ran come after, in graph order);
* then the nodes left (a trace without ``node_created`` events, a shape that changed) by the
  same key without the shapes.

A node with no partner is listed as unmatched on its side: a module or an op that exists in
only one of the passes (a ``detach()`` cuts a branch off, a fused op replaces two).

Each matched pair compares the per-node gradient summaries of the events (the last
``node_finished`` of the node: what it received, ``grads_in``, and what it returned,
``grads_out``), slot by slot: shapes, NaN and Inf counts, and ``min``, ``max``, ``mean``,
``norm`` and the first values within ``atol + rtol * scale``, where the scale is the larger
of the value and the tensor's root mean square (``norm / sqrt(numel)``: a mean near zero by
cancellation is judged at the size of the entries); a returned gradient that no edge takes
(an input that needs none) is compared only when both passes computed it. The summaries are
what a trace keeps, so two traces differing only beyond them compare equal; ``max_relative``
says by how much the compared statistics differ.
"""

from __future__ import annotations

import html
import math

from ..instrument import Trace
from ._base import SessionBase

__all__ = ["diff", "TraceDiff", "NodePair"]

_STATISTICS = ("min", "max", "mean", "norm")


def _as_trace(value, side: str) -> Trace:
    if isinstance(value, Trace):
        return value
    trace = getattr(value, "trace", None)
    if isinstance(value, SessionBase) and callable(trace):  # everything it recorded so far
        return trace()  # (a tensor's trace() is the sum of its diagonal: not a session)
    raise TypeError(f"diff: trace_{side} must be a gradviz.instrument.Trace (gradviz.record(), "
                    f"record_torch(), load_trace()) or a debug session; got "
                    f"{type(value).__name__}")


def _number(value) -> float | None:
    if value is None:
        return None
    return float(value)  # "nan", "inf", "-inf" are how summaries write non-finite numbers


def _run_order(trace: Trace) -> dict[int, int]:
    """Each node's position in the run order (its first ``node_started``)."""
    order: dict[int, int] = {}
    for event in trace.events:
        if event["kind"] == "node_started" and event["node"] not in order:
            order[event["node"]] = len(order)
    return order


def _last_finished(trace: Trace) -> dict[int, dict]:
    finished = {}
    for event in trace.events:
        if event["kind"] == "node_finished":
            finished[event["node"]] = event
    return finished


def _dead_slots(trace: Trace) -> dict[int, set]:
    """``{node id: output slots whose edge leads nowhere}`` from ``node_created`` events: an
    engine may return a gradient there or None (torch returns None), and nothing reads it."""
    dead = {}
    for event in trace.events:
        if event["kind"] == "node_created":
            dead[event["node"]] = {slot for slot, edge in enumerate(event["edges"])
                                   if edge["node"] is None}
    return dead


def _input_shapes(trace: Trace) -> dict[int, tuple]:
    """``{node id: (its forward outputs' shapes, the shapes of its forward inputs that came
    from other ops)}``, read from ``node_created`` events: an edge ``(child, input_nr)``
    carries the shape the child produced on that slot."""
    outputs, edges = {}, {}
    for event in trace.events:
        if event["kind"] == "node_created":
            outputs[event["node"]] = event["outputs"]
            edges[event["node"]] = event["edges"]
    leaves = {n["id"] for n in trace.graph["nodes"] if n["kind"] == "accumulate_grad"}
    shapes = {}
    for node_id, node_edges in edges.items():
        found = []
        for edge in node_edges:
            # a leaf's own event is not always recorded (its node may predate the recording):
            # leaves are left out on both sides, and so is an input without a gradient
            if edge["node"] is None or edge["node"] in leaves:
                continue
            metas = outputs.get(edge["node"])
            if metas and edge["input_nr"] < len(metas) and metas[edge["input_nr"]] is not None:
                found.append(tuple(metas[edge["input_nr"]]["shape"]))
        own = tuple(None if meta is None else tuple(meta["shape"])
                    for meta in outputs[node_id])
        shapes[node_id] = (own, tuple(found))
    return shapes


def _base_key(node: dict) -> tuple:
    if node["kind"] == "accumulate_grad" and "leaf_name" in node:
        return ("leaf", node["leaf_name"])
    module = node.get("module")
    return ("node", None if module is None else tuple(module), node.get("module_call"),
            node["name"])


def _ordered_nodes(trace: Trace) -> list:
    """The graph's nodes (GraphRoot left out) in run order, then graph order."""
    order = _run_order(trace)
    nodes = [n for n in trace.graph["nodes"] if n["name"] != "GraphRoot"]
    position = {n["id"]: index for index, n in enumerate(nodes)}
    nodes.sort(key=lambda n: (order.get(n["id"], len(order)), position[n["id"]]))
    return nodes


def _keyed(nodes: list, key_of) -> dict[tuple, dict]:
    """``{key_of(node) + (occurrence,): node}``, occurrences counted in the order given."""
    keyed: dict[tuple, dict] = {}
    seen: dict[tuple, int] = {}
    for node in nodes:
        base = key_of(node)
        occurrence = seen.get(base, 0)
        seen[base] = occurrence + 1
        keyed[base + (occurrence,)] = node
    return keyed


def _match(a: Trace, b: Trace) -> tuple[list, list, list]:
    """``(matched (node a, node b) pairs in a's order, only in a, only in b)``: first by
    module, name and forward input shapes, then what is left by module and name alone
    (Note [Matching nodes of two traces])."""
    nodes_a, nodes_b = _ordered_nodes(a), _ordered_nodes(b)
    shapes_a, shapes_b = _input_shapes(a), _input_shapes(b)
    matched: dict[int, dict] = {}  # id of node a -> node b
    taken_b: set[int] = set()
    for use_shapes in (True, False):
        left_a = [n for n in nodes_a if n["id"] not in matched]
        left_b = [n for n in nodes_b if n["id"] not in taken_b]
        if use_shapes:
            left_a = [n for n in left_a if n["id"] in shapes_a]
            left_b = [n for n in left_b if n["id"] in shapes_b]
            keyed_a = _keyed(left_a, lambda n: _base_key(n) + (shapes_a[n["id"]],))
            keyed_b = _keyed(left_b, lambda n: _base_key(n) + (shapes_b[n["id"]],))
        else:
            keyed_a, keyed_b = _keyed(left_a, _base_key), _keyed(left_b, _base_key)
        for key, node_a in keyed_a.items():
            node_b = keyed_b.get(key)
            if node_b is not None:
                matched[node_a["id"]] = node_b
                taken_b.add(node_b["id"])
    pairs = [(n, matched[n["id"]]) for n in nodes_a if n["id"] in matched]
    only_a = [n for n in nodes_a if n["id"] not in matched]
    only_b = [n for n in nodes_b if n["id"] not in taken_b]
    return pairs, only_a, only_b


def _describe_key(node: dict) -> str:
    if node["kind"] == "accumulate_grad" and "leaf_name" in node:
        return f"AccumulateGrad ({node['leaf_name']})"
    module = node.get("module")
    where = "" if module is None else (".".join(module) or "(model)")
    call = node.get("module_call")
    if where and call:
        where += f" call {call}"
    return f"{node['name']} in {where}" if where else node["name"]


class SlotDifference:
    """One gradient slot of a matched pair: ``what`` (``grads_in``/``grads_out``), ``slot``,
    the two summaries, ``max_relative`` and the ``reasons`` it differs (empty: it agrees)."""

    def __init__(self, what, slot, a, b, reasons, max_relative):
        self.what, self.slot, self.a, self.b = what, slot, a, b
        self.reasons: list[str] = reasons
        self.max_relative: float = max_relative

    @property
    def differs(self) -> bool:
        return bool(self.reasons)

    def __repr__(self) -> str:
        state = "; ".join(self.reasons) if self.reasons else "equal"
        return f"<{self.what}[{self.slot}]: {state}>"


def _compare_summaries(a, b, rtol, atol) -> tuple[list[str], float]:
    if a is None or b is None:
        if a is None and b is None:
            return [], 0.0
        return [f"gradient is None on side {'a' if a is None else 'b'} only"], math.inf
    reasons = []
    if a["shape"] != b["shape"]:
        return [f"shape {a['shape']} vs {b['shape']}"], math.inf
    for field in ("nan", "inf"):
        if a[field] != b[field]:
            reasons.append(f"{a[field]} vs {b[field]} {field.upper() if field == 'nan' else 'Inf'}"
                           " entries")
    worst = 0.0
    # the scale of every statistic: the tensor's root mean square (a mean near 0 by
    # cancellation is compared at the size of the entries, not at its own size)
    norms = [_number(a["norm"]), _number(b["norm"])]
    finite = [n for n in norms if n is not None and math.isfinite(n)]
    rms = max(finite, default=0.0) / math.sqrt(max(a["numel"], 1))
    pairs = [(name, _number(a[name]), _number(b[name])) for name in _STATISTICS]
    pairs += [(f"values[{i}]", _number(x), _number(y))
              for i, (x, y) in enumerate(zip(a["values"], b["values"]))]
    for name, x, y in pairs:
        if x is None or y is None:
            if (x is None) != (y is None):
                reasons.append(f"{name} {x} vs {y}")
                worst = math.inf
            continue
        if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                reasons.append(f"{name} {x} vs {y}")
                worst = math.inf
            continue
        gap = abs(x - y)
        scale = max(abs(x), abs(y), rms)
        worst = max(worst, gap / scale if scale else 0.0)
        if gap > atol + rtol * max(abs(y), rms):
            reasons.append(f"{name} {x:.6g} vs {y:.6g}")
    return reasons, worst


class NodePair:
    """Two matched nodes: ``a`` and ``b`` (graph node dicts), ``key`` (what matched them,
    as text), and ``slots`` (a :class:`SlotDifference` per gradient slot compared)."""

    def __init__(self, key, a, b, slots, ran):
        self.key: str = key
        self.a: dict = a
        self.b: dict = b
        self.slots: list[SlotDifference] = slots
        self.ran: tuple[bool, bool] = ran

    @property
    def differs(self) -> bool:
        """Whether any compared gradient differs, or the node ran in one pass only."""
        return self.ran[0] != self.ran[1] or any(slot.differs for slot in self.slots)

    @property
    def max_relative(self) -> float:
        """The largest gap of the compared statistics relative to their scale (the larger of
        the values and the gradient's root mean square); 0.0: identical."""
        if self.ran[0] != self.ran[1]:
            return math.inf
        return max((slot.max_relative for slot in self.slots), default=0.0)

    @property
    def reasons(self) -> list[str]:
        found = [f"{slot.what}[{slot.slot}]: {reason}" for slot in self.slots
                 for reason in slot.reasons]
        if self.ran[0] != self.ran[1]:
            found.insert(0, f"ran only in {'a' if self.ran[0] else 'b'}")
        return found

    def __repr__(self) -> str:
        state = "; ".join(self.reasons) if self.differs else "equal"
        return f"<NodePair {self.key} (a #{self.a['id']}, b #{self.b['id']}): {state}>"


class TraceDiff:
    """What :func:`diff` found: ``pairs`` (matched nodes, in the run order of trace a),
    ``only_a`` and ``only_b`` (graph nodes without a partner), ``differences`` (the pairs
    that differ, same order) and ``first_difference`` (the first of them to run: where a
    backward-only bug shows first, the node whose ``grads_out`` differ while its
    ``grads_in`` agree)."""

    def __init__(self, pairs, only_a, only_b, rtol, atol, trace_a=None, trace_b=None):
        self.pairs: list[NodePair] = pairs
        self.only_a: list[dict] = only_a
        self.only_b: list[dict] = only_b
        self.rtol, self.atol = rtol, atol
        self.trace_a: Trace | None = trace_a
        self.trace_b: Trace | None = trace_b

    def _traces(self, what: str) -> None:
        if self.trace_a is None:
            raise ValueError(f"TraceDiff.{what}() needs the traces; build the diff with "
                             "gradviz.debug.diff(trace_a, trace_b)")

    def show(self, labels: tuple[str, str] = ("a", "b")):
        """The diff as a notebook widget: trace a's graph at the end of its pass, coloured by
        the ``difference`` overlay (per matched node, :attr:`NodePair.max_relative`), with a
        panel listing the differing nodes (a click selects one) and the unmatched nodes of
        each side. ``display(result)`` in a notebook shows the same.

        The widget layer is imported when this is called (as ``Trace.to_html`` does), so
        ``gradviz.debug`` still loads without it.

        Examples
        --------
        >>> import gradviz
        >>> w = gradviz.tensor([1.0, -2.0], requires_grad=True)
        >>> with gradviz.record() as before:
        ...     (w * w).sum().backward()
        >>> with gradviz.record() as after:
        ...     (w * w * 2).sum().backward()
        >>> widget = gradviz.debug.diff(before, after).show(labels=("before", "after"))
        >>> widget.diff["counts"], widget.overlays["difference"]["kind"]
        ({'pairs': 3, 'differ': 2, 'only_a': 0, 'only_b': 1}, 'continuous')
        """
        from ..widget import _diff_view  # the widget layer, only when a view is asked for

        self._traces("show")
        return _diff_view.show_diff(self, labels)

    def to_html(self, path, title: str | None = None, labels: tuple[str, str] = ("a", "b")):
        """Write the diff view (see :meth:`show`) as one self-contained HTML page that works
        offline, as ``Trace.to_html`` does for a trace; returns the path.

        Examples
        --------
        >>> import gradviz, os, tempfile
        >>> w = gradviz.tensor([1.0, -2.0], requires_grad=True)
        >>> with gradviz.record() as before:
        ...     (w * w).sum().backward()
        >>> page = gradviz.debug.diff(before, before).to_html(os.path.join(tempfile.mkdtemp(), "diff.html"))
        >>> page.read_text(encoding="utf-8").startswith("<!doctype html>")
        True
        """
        from ..widget import _diff_view  # the widget layer, only when a page is asked for

        self._traces("to_html")
        return _diff_view.diff_to_html(self, path, title, labels)

    @property
    def differences(self) -> list[NodePair]:
        return [pair for pair in self.pairs if pair.differs]

    @property
    def first_difference(self) -> NodePair | None:
        differences = self.differences
        return differences[0] if differences else None

    @property
    def equal(self) -> bool:
        """No unmatched node and no differing pair."""
        return not (self.only_a or self.only_b or self.differences)

    def _lines(self) -> list[str]:
        lines = [f"{len(self.pairs)} matched nodes, {len(self.differences)} differ "
                 f"(rtol={self.rtol:g}, atol={self.atol:g}); {len(self.only_a)} only in a, "
                 f"{len(self.only_b)} only in b"]
        for pair in self.differences[:20]:
            lines.append(f"  differs: {pair.key}: {'; '.join(pair.reasons[:3])}")
        for side, nodes in (("a", self.only_a), ("b", self.only_b)):
            for node in nodes[:10]:
                lines.append(f"  only in {side}: {_describe_key(node)} (#{node['id']})")
            if len(nodes) > 10:
                lines.append(f"  ... and {len(nodes) - 10} more only in {side}")
        return lines

    def __repr__(self) -> str:
        return "<TraceDiff: " + "\n".join(self._lines()) + ">"

    def _repr_html_(self) -> str:
        # Every name here came from user code (module and class names): escaped, never markup.
        rows = []
        for pair in self.pairs:
            state = "; ".join(pair.reasons) if pair.differs else "equal"
            colour = "#fde2e1" if pair.differs else "transparent"
            rows.append(f'<tr style="background:{colour}"><td>{html.escape(pair.key)}</td>'
                        f"<td>{pair.a['id']}</td><td>{pair.b['id']}</td>"
                        f"<td>{pair.max_relative:.3g}</td><td>{html.escape(state)}</td></tr>")
        unmatched = "".join(
            f"<li>only in {side}: {html.escape(_describe_key(node))} (#{node['id']})</li>"
            for side, nodes in (("a", self.only_a), ("b", self.only_b)) for node in nodes)
        head = html.escape(self._lines()[0])
        return (f"<div><p>{head}</p><table><tr><th>node</th><th>a</th><th>b</th>"
                f"<th>max relative gap</th><th>difference</th></tr>{''.join(rows)}</table>"
                f"<ul>{unmatched}</ul></div>")


def diff(trace_a, trace_b, *, rtol: float = 1e-4, atol: float = 1e-6) -> TraceDiff:
    """Compare two recorded backward passes node by node (Note [Matching nodes of two
    traces]): the same model before and after a fix, or a gradviz pass against
    :func:`record_torch` of the same model.

    Parameters
    ----------
    trace_a, trace_b : Trace or debug session
        From ``gradviz.record()``, ``record_torch``, ``load_trace`` or ``session.trace()``.
        Module paths (modules, ``scope``, ``torch_scopes``) make the matching exact.
    rtol, atol : float
        Tolerances of the gradient statistics: a pair differs where
        ``|a - b| > atol + rtol * max(|b|, rms)``, ``rms`` the gradient's root mean square.

    Examples
    --------
    >>> import gradviz
    >>> w = gradviz.tensor([1.0, -2.0], requires_grad=True)
    >>> with gradviz.record() as before:
    ...     (w * w).sum().backward()
    >>> with gradviz.record() as after:
    ...     (w * w * 2).sum().backward()
    >>> result = gradviz.debug.diff(before, after)
    >>> len(result.pairs), len(result.only_b), result.first_difference.key
    (3, 1, 'MulBackward0')
    """
    a, b = _as_trace(trace_a, "a"), _as_trace(trace_b, "b")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"diff({name}=...) must be a number >= 0, got {value!r}")
    pairs = []
    matched, only_a, only_b = _match(a, b)
    finished_a, finished_b = _last_finished(a), _last_finished(b)
    dead_a, dead_b = _dead_slots(a), _dead_slots(b)
    for node_a, node_b in matched:
        event_a, event_b = finished_a.get(node_a["id"]), finished_b.get(node_b["id"])
        slots = []
        if event_a is not None and event_b is not None:
            for what in ("grads_in", "grads_out"):
                for slot, (x, y) in enumerate(zip(event_a[what], event_b[what])):
                    if what == "grads_out" and (x is None or y is None) and (
                            slot in dead_a.get(node_a["id"], ()) or
                            slot in dead_b.get(node_b["id"], ())):
                        continue  # a gradient nothing reads (no edge): None or not
                    reasons, worst = _compare_summaries(x, y, rtol, atol)
                    slots.append(SlotDifference(what, slot, x, y, reasons, worst))
                if len(event_a[what]) != len(event_b[what]):
                    slots.append(SlotDifference(
                        what, min(len(event_a[what]), len(event_b[what])), None, None,
                        [f"{len(event_a[what])} vs {len(event_b[what])} slots"], math.inf))
        pairs.append(NodePair(_describe_key(node_a), node_a, node_b, slots,
                              (event_a is not None, event_b is not None)))
    return TraceDiff(pairs, only_a, only_b, rtol, atol, a, b)
