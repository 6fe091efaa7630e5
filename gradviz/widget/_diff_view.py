"""The diff view: :func:`gradviz.debug.diff` drawn on trace a's graph (``TraceDiff.show``,
``TraceDiff.to_html``).

The view is an ordinary debugger widget (or offline page) of a replay of trace a, run to its
end, plus two things: a user overlay named ``difference`` (per matched node, how far apart the
two passes' gradient statistics are: ``NodePair.max_relative``; ``inf`` for a node that ran in
one pass only; unmatched nodes have no value and are drawn faded) that the view shows first,
and the ``diff`` trait (:func:`diff_trait`), which the view's diff panel lists: the differing
nodes (a click selects one), and the nodes of each side without a partner.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import traitlets

from ..debug import ReplaySession
from ._bundle import STANDALONE_BUNDLE, load_bundle
from ._html import INSPECTION_BUDGET, render_html, standalone_data
from ._panels import OverlayPublisher
from ._widget import DebuggerWidget, json_safe

__all__ = ["DIFF_OVERLAY", "diff_trait", "diff_overlay", "show_diff", "diff_to_html"]

#: The name of the overlay a diff view opens with.
DIFF_OVERLAY = "difference"
#: At most this many entries per list in the panel (the counts say how many there are).
DIFF_LIST_LIMIT = 200


def _describe(node: dict) -> str:
    if "leaf_name" in node:
        return node["leaf_name"]
    module = ".".join(node.get("module") or ())
    return f"{module} · {node['name']}" if module else node["name"]


def diff_overlay(result: Any) -> dict[int, float]:
    """``{node id of trace a: max_relative}`` of every matched pair."""
    return {pair.a["id"]: float(pair.max_relative) for pair in result.pairs}


def diff_trait(result: Any, labels: tuple[str, str] = ("a", "b")) -> dict[str, Any]:
    """The ``diff`` trait: what the view's diff panel lists (docs/widget_protocol.md)."""
    differences = result.differences
    return json_safe({
        "a": str(labels[0]), "b": str(labels[1]), "overlay": DIFF_OVERLAY,
        "summary": result._lines()[0],
        "counts": {"pairs": len(result.pairs), "differ": len(differences),
                   "only_a": len(result.only_a), "only_b": len(result.only_b)},
        "differences": [{"node": pair.a["id"], "key": pair.key, "max_relative": pair.max_relative,
                         "reasons": pair.reasons[:3]} for pair in differences[:DIFF_LIST_LIMIT]],
        "only_a": [{"node": node["id"], "key": _describe(node)} for node in result.only_a[:DIFF_LIST_LIMIT]],
        "only_b": [{"node": node["id"], "key": _describe(node)} for node in result.only_b[:DIFF_LIST_LIMIT]],
    })


class DiffWidget(DebuggerWidget):
    """A debugger widget of trace a's replay with the diff panel (the ``diff`` trait)."""

    diff = traitlets.Dict(default_value=None, allow_none=True).tag(sync=True)

    def _write_docs_page(self, path: Any, final: bool) -> bool:
        """The docs' page of a diff view is the diff's own offline page (Note [Widgets in the
        built docs] in ``_docs_pages.py``)."""
        result, labels = self._diff_source
        diff_to_html(result, path, labels=labels)
        return True


def _session(result: Any) -> ReplaySession:
    session = ReplaySession(result.trace_a)
    session.continue_()
    session.overlay(DIFF_OVERLAY, diff_overlay(result), scale="log")
    return session


def show_diff(result: Any, labels: tuple[str, str] = ("a", "b")) -> DiffWidget:
    """A widget of ``result`` (a :class:`gradviz.debug.TraceDiff`): trace a's graph at the end of
    its pass, coloured by the ``difference`` overlay, with the diff panel."""
    widget = DiffWidget(_session(result))
    widget.diff = diff_trait(result, labels)
    widget._diff_source = (result, labels)
    return widget


def diff_to_html(result: Any, path: str | os.PathLike[str], title: str | None = None,
                 labels: tuple[str, str] = ("a", "b"), inspection_budget: int = INSPECTION_BUDGET) -> Path:
    """Write the diff view as one self-contained HTML page (as ``Trace.to_html`` writes a
    trace): trace a's replay with the ``difference`` overlay and the diff panel."""
    viewer = load_bundle(name=STANDALONE_BUNDLE)
    data = standalone_data(result.trace_a, title if title is not None else "gradviz diff", inspection_budget)
    publisher = OverlayPublisher()
    publisher.requested.add(DIFF_OVERLAY)
    overlays = publisher.trait(_session(result))
    assert overlays is not None  # the diff's session has overlays() (the difference)
    # the page replays trace a position by position; the built-ins' values change with the
    # position, so the page carries only the difference (fixed for the whole pass)
    data["overlays"] = {DIFF_OVERLAY: overlays[DIFF_OVERLAY]}
    data["diff"] = diff_trait(result, labels)
    target = Path(path)
    target.write_text(render_html(data, viewer), encoding="utf-8")
    return target
