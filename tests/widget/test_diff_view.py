"""The diff view's data (``TraceDiff.show``, ``TraceDiff.to_html``): gradviz against a fixed
gradviz pass and against ``record_torch`` of the same model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

import gradviz
from gradviz._typescript import object_schema, type_schema
from gradviz.widget import _protocol
from gradviz.widget._diff_view import DIFF_OVERLAY, DiffWidget

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "debug"))
from test_module_scopes import HOSTILE, twin_traces  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

# The diff trait's shape as the protocol declares it (gradviz/widget/_protocol.py): extra keys refused.
_DIFF_SHAPES = (_protocol.DiffCounts, _protocol.DiffDifference, _protocol.DiffOnly, _protocol.DiffData)
DIFF_DATA_SCHEMA = {
    "$ref": "#/$defs/DiffData",
    "$defs": {
        "Number": type_schema(_protocol.Number),
        **{tp.__name__: object_schema(tp, {id(_protocol.Number): "Number"}) for tp in _DIFF_SHAPES},
    },
}


def test_a_gradviz_pass_and_its_torch_twin_show_no_difference():
    trace_a, trace_b = twin_traces("Transformer", depth=2)
    result = gradviz.debug.diff(trace_a, trace_b)
    widget = result.show(labels=("gradviz", "torch"))
    try:
        assert isinstance(widget, DiffWidget) and widget.status == "finished"
        assert widget.diff["counts"] == {"pairs": len(result.pairs), "differ": 0, "only_a": 0, "only_b": 0}
        assert (widget.diff["a"], widget.diff["b"], widget.diff["overlay"]) == ("gradviz", "torch", DIFF_OVERLAY)
        values = widget.overlays[DIFF_OVERLAY]["values"]
        assert widget.overlays[DIFF_OVERLAY]["scale"] == "log"
        assert set(values) == {str(pair.a["id"]) for pair in result.pairs}
        assert all(value < 1e-4 for value in values.values())
    finally:
        widget.close()


def test_a_seeded_bug_is_the_node_with_the_large_difference():
    def scale_head(model):
        with gradviz.no_grad():
            model.head.weight.mul_(1.5)  # a different model: its gradients differ downstream of the head

    trace_a, trace_b = twin_traces("Transformer", seed_bug=scale_head, depth=2)
    result = gradviz.debug.diff(trace_a, trace_b)
    widget = result.show()
    try:
        differing = {entry["node"] for entry in widget.diff["differences"]}
        assert differing == {pair.a["id"] for pair in result.differences} and differing
        # the trait has exactly the protocol's DiffData shape (what the view's readShape checks)
        jsonschema.validate(widget.diff, DIFF_DATA_SCHEMA)
        values = widget.overlays[DIFF_OVERLAY]["values"]
        checked = 0
        for pair in result.pairs:
            # the statistics' own gap, recomputed from the two summaries (not from max_relative)
            event_a = next(e for e in reversed(trace_a.events) if e["kind"] == "node_finished" and e["node"] == pair.a["id"])
            event_b = next(e for e in reversed(trace_b.events) if e["kind"] == "node_finished" and e["node"] == pair.b["id"])
            gaps = [abs(float(x["norm"]) - float(y["norm"])) / max(abs(float(y["norm"])), 1e-30)
                    for x, y in zip(event_a["grads_in"], event_b["grads_in"]) if x is not None and y is not None]
            if gaps and max(gaps) > 1e-3:
                assert values[str(pair.a["id"])] >= max(gaps) * 0.5
                checked += 1
        assert checked > 0
    finally:
        widget.close()


def test_unmatched_nodes_are_listed_per_side_before_and_after_a_fix():
    w = gradviz.tensor([1.0, -2.0], requires_grad=True)
    with gradviz.record() as before:
        (w * w).sum().backward()
    with gradviz.record() as after:
        (w * w * 2).sum().backward()
    widget = gradviz.debug.diff(before, after).show(labels=("before", HOSTILE))
    try:
        assert widget.diff["b"] == HOSTILE
        assert [entry["key"] for entry in widget.diff["only_b"]] == ["MulBackward0"]
        assert widget.diff["only_a"] == []
        ids_b = {node["id"] for node in after.graph["nodes"]}
        assert all(entry["node"] in ids_b for entry in widget.diff["only_b"])
    finally:
        widget.close()


def test_the_offline_page_carries_the_overlay_and_the_panel(tmp_path):
    trace_a, trace_b = twin_traces("Unrolled", steps=3)
    result = gradviz.debug.diff(trace_a, trace_b)
    page = result.to_html(tmp_path / "diff.html", title=HOSTILE, labels=(HOSTILE, "torch"))
    text = page.read_text(encoding="utf-8")
    assert HOSTILE not in text  # every < > & of user text is escaped (Note [Inline script safety])
    data = json.loads(re.search(r'<script type="application/json" id="gradviz-data">(.*?)</script>', text, re.S).group(1))
    assert data["diff"]["a"] == HOSTILE and data["diff"]["counts"]["pairs"] == len(result.pairs)
    assert set(data["overlays"]) == {DIFF_OVERLAY}
    assert len(data["overlays"][DIFF_OVERLAY]["values"]) == len(result.pairs)


def test_a_diff_without_traces_says_how_to_get_one():
    result = gradviz.debug.TraceDiff([], [], [], 1e-4, 1e-6)
    with pytest.raises(ValueError, match="needs the traces"):
        result.show()


def test_a_diff_displayed_in_ipython_shows_the_diff_widget():
    script = textwrap.dedent("""
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import gradviz
        from gradviz.widget import _diff_view
        shown_widgets = []
        original = _diff_view.show_diff
        _diff_view.show_diff = lambda *args: shown_widgets.append(original(*args)) or shown_widgets[-1]
        w = gradviz.tensor([1.0, 2.0], requires_grad=True)
        with gradviz.record() as trace:
            (w * w).sum().backward()
        shown = shell.display_formatter.ipython_display_formatter(gradviz.debug.diff(trace, trace))
        print(shown, len(shown_widgets), shown_widgets[0].diff["counts"]["differ"])
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "True 1 0"
