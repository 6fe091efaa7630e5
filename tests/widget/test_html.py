"""``Trace.to_html``: the self-contained HTML page of a trace (no browser here; see
tests/browser/test_standalone_html.py for the page itself)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import gradviz as torch
from gradviz.autograd import Function
from gradviz.debug import ReplaySession
from gradviz.instrument import Trace
from gradviz.widget import _bundle, _html, trace_to_html
from gradviz.widget._widget import json_safe, normalize_graph

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "</script><script>alert(1)</script><!--"


def hostile_trace(name: str = HOSTILE) -> Trace:
    def forward(ctx: Any, x: Any) -> Any:
        return x * 2

    def backward(ctx: Any, grad: Any) -> Any:
        return grad * 2

    evil = type(name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    w = torch.tensor([0.5, 3.0], requires_grad=True)
    with torch.record() as trace:
        ((evil.apply(x) * w).exp() + w).sum().backward()
    return trace


class Scripts(HTMLParser):
    """The page's <script> elements as a browser's tokenizer splits them: (attrs, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.title = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append((dict(attrs), ""))
        self._in = tag

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        elif self._in == "title":
            self.title += data


def read_page(path: Path) -> tuple[Scripts, dict[str, Any]]:
    parser = Scripts()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    data = [json.loads(text) for attrs, text in parser.scripts if attrs.get("id") == _html.DATA_ELEMENT_ID]
    assert len(data) == 1
    return parser, data[0]


def replay_states(data: dict[str, Any]) -> list[dict[str, str]]:
    """Every position's node states (all nodes; absent = pending), decoded like replay.ts."""
    names = data["state_names"]
    ids = [node["id"] for node in data["graph"]["nodes"]]
    states = {node_id: "pending" for node_id in ids}
    out = []
    for flat in data["changes"]:
        for node_id, code in zip(flat[::2], flat[1::2]):
            states[node_id] = names[code]
        out.append({str(node_id): state for node_id, state in states.items()})
    return out


def test_page_is_written_and_replays_like_a_replay_session(tmp_path: Path) -> None:
    trace = hostile_trace()
    path = trace.to_html(tmp_path / "trace.html", title="A trace")
    assert path == tmp_path / "trace.html"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert "default-src 'none'" in text and "connect-src data: blob:" in text
    parser, data = read_page(path)
    assert parser.title == "A trace" and data["title"] == "A trace"
    assert [attrs for attrs, _ in parser.scripts] == [{"type": "application/json", "id": "gradviz-data"}, {}]
    # The trace's graph, with each node's forward line (the trace was recorded: it knows them).
    sources = ReplaySession(trace).forward_sources()
    assert sources and data["graph"] == normalize_graph(trace.graph, sources)
    assert len(data["events"]) == len(trace.events)
    assert [event[2] for event in data["events"]] == [event["text"] for event in trace.events]
    session = ReplaySession(trace)
    assert data["start"] == session.position
    for position, states in enumerate(replay_states(data)):
        session.seek(position)
        assert states == {str(k): v for k, v in session.node_states().items()}, position
        assert data["current"][position] == session.current, position
    assert data["final_status"] == "finished"


def test_hostile_names_and_titles_stay_inside_their_elements(tmp_path: Path) -> None:
    trace = hostile_trace()
    path = trace_to_html(trace, tmp_path / "evil.html", title=HOSTILE)
    text = path.read_text(encoding="utf-8")
    # Exactly the page's own two scripts, no comment opened, and the names come back intact.
    assert text.lower().count("<script") == 2
    assert text.lower().count("</script") == 2
    assert "<!--" not in text
    parser, data = read_page(path)
    assert parser.title == HOSTILE
    assert data["title"] == HOSTILE
    assert f"{HOSTILE}Backward" in [node["name"] for node in data["graph"]["nodes"]]


def test_script_json_escapes_every_angle_bracket_and_round_trips() -> None:
    value = {"a": "</SCRIPT ><!-- & \u2028 -->", "b": [1, None, "é"]}
    encoded = _html.script_json(value)
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded
    assert json.loads(encoded) == value


def test_a_viewer_that_could_close_its_script_is_refused() -> None:
    data = _html.standalone_data(hostile_trace("Plain"))
    for bad in ('x = "</script>"', "// <!-- old-style comment"):
        with pytest.raises(_bundle.BundleError, match="would end its inline <script> early"):
            _html.render_html(data, bad)


def test_several_passes_and_an_empty_trace(tmp_path: Path) -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.record() as trace:
        (x * x).sum().backward()
        (x * 3).sum().backward()
    data = _html.standalone_data(trace)
    session = ReplaySession(trace)
    for position, states in enumerate(replay_states(data)):
        session.seek(position)
        assert states == {str(k): v for k, v in session.node_states().items()}, position
    empty = _html.standalone_data(Trace())
    assert empty["changes"] == [[]] and empty["current"] == [None] and empty["events"] == []
    assert Trace().to_html(tmp_path / "empty.html").is_file()


@pytest.fixture
def copied_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A copy of labextension/ and static/, which trace_to_html then reads its bundle from."""
    labextension = tmp_path / "labextension"
    shutil.copytree(REPO / "labextension", labextension, ignore=shutil.ignore_patterns("node_modules", ".tsbuild"))
    static = tmp_path / "static"
    shutil.copytree(_bundle.STATIC_DIR, static)
    real = _bundle.load_bundle
    monkeypatch.setattr(_html, "load_bundle", lambda name: real(static, labextension, name=name))
    return labextension, static


def test_a_stale_or_missing_viewer_fails_clearly_and_writes_nothing(copied_checkout: tuple[Path, Path], tmp_path: Path) -> None:
    labextension, static = copied_checkout
    trace = hostile_trace("Plain")
    target = tmp_path / "out.html"
    assert trace_to_html(trace, target).is_file()
    target.unlink()
    standalone = labextension / "src" / "standalone.ts"
    standalone.write_text(standalone.read_text() + "\n// edited\n")
    with pytest.raises(_bundle.BundleError, match=r"bundle is stale.*npm --prefix labextension run build"):
        trace.to_html(target)
    assert not target.exists()
    shutil.copy2(REPO / "labextension" / "src" / "standalone.ts", standalone)
    (static / "standalone.js").unlink()
    with pytest.raises(_bundle.BundleError, match=r"bundle is missing.*standalone\.js"):
        trace.to_html(target)
    assert not target.exists()


def test_the_instrument_layer_does_not_load_the_widget_layer() -> None:
    code = "import sys, gradviz; assert 'gradviz.widget' not in sys.modules, 'widget imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_the_fast_replay_falls_back_to_reading_every_state(monkeypatch: pytest.MonkeyPatch) -> None:
    # Note [Replay deltas]: if reading only the event's node ever misses a change, the final
    # comparison notices and every position is read in full.
    trace = hostile_trace("Plain")
    expected = _html.standalone_data(trace)
    monkeypatch.setattr(ReplaySession, "node", lambda self, node_id: {"state": "pending"})
    found = _html.standalone_data(trace)
    for key in ("inspections", "inspection_budget"):  # the inspector's snapshots come from node() itself
        del found[key], expected[key]
    assert found == expected


def named_trace(params: dict[str, str]) -> tuple[Trace, dict[int, str]]:
    """A debug session's trace whose graph names its leaves (``leaf_name``, optional in the
    trace's graph nodes), with the names ``gradviz.debug.backward(..., params=)`` gave them;
    and those names by node id."""
    weight = torch.tensor([1.5, -0.5], requires_grad=True)
    bias = torch.tensor([0.25, 2.0], requires_grad=True)
    tensors = {"weight": weight, "bias": bias}
    session = torch.debug.backward((torch.tanh(torch.tensor([1.0, 2.0]) * weight) + bias).sum(),
                                   params={name: tensors[role] for role, name in params.items()})
    session.continue_()
    names = {node["id"]: node["leaf_name"] for node in session.graph()["nodes"] if "leaf_name" in node}
    assert sorted(names.values()) == sorted(params.values())
    trace = session.trace()
    for node in trace.graph["nodes"]:
        if node["id"] in names:
            node.setdefault("leaf_name", names[node["id"]])
    return trace, names


def test_the_page_names_the_leaves_its_trace_names(tmp_path: Path) -> None:
    """The page's graph keeps each AccumulateGrad node's leaf_name (the viewer draws it as
    'weight · AccumulateGrad'); a hostile name stays text inside the data element."""
    trace, names = named_trace({"weight": "fc.weight", "bias": HOSTILE})
    path = trace_to_html(trace, tmp_path / "named.html")
    text = path.read_text(encoding="utf-8")
    assert text.lower().count("<script") == 2 and "<!--" not in text
    _, data = read_page(path)
    shown = {node["id"]: node.get("leaf_name") for node in data["graph"]["nodes"] if node["kind"] == "accumulate_grad"}
    assert shown == names
    assert all("leaf_name" not in node for node in data["graph"]["nodes"] if node["kind"] != "accumulate_grad")


def test_a_page_of_a_trace_without_leaf_names_has_none(tmp_path: Path) -> None:
    """Traces whose leaves have no names (recorded where no variable names them) still make
    pages."""
    trace = hostile_trace()
    for node in trace.graph["nodes"]:
        node.pop("leaf_name", None)
    _, data = read_page(trace_to_html(trace, tmp_path / "plain.html"))
    assert all("leaf_name" not in node for node in data["graph"]["nodes"])
    assert any(node["kind"] == "accumulate_grad" for node in data["graph"]["nodes"])


def test_the_page_carries_each_delivery_with_its_producer() -> None:
    """The page colours an edge once its buffer_added is shown: each such event carries the
    producer, as the live widget's `delivered` trait does."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.record() as trace:
        (x * x).exp().sum().backward()
    data = _html.standalone_data(trace)
    sent = [(event["producer"], event["node"]) for event in trace.events if event["kind"] == "buffer_added"]
    carried = [(entry[3], entry[1]) for entry in data["events"] if entry[0] == "buffer_added"]
    assert carried == sent and len(sent) == 4  # Sum -> Exp, Exp -> Mul, Mul -> x twice
    assert all(len(entry) == 3 for entry in data["events"] if entry[0] != "buffer_added")


def snapshot_at(data: dict[str, Any], node_id: int, position: int) -> Any:
    """What the page's inspector shows of a node at a position (as replay.ts's inspectionAt)."""
    found = None
    for at, info in data["inspections"].get(str(node_id), []):
        if at > position:
            break
        found = info
    return found


def test_the_pages_inspector_shows_what_a_replay_session_shows_at_every_position() -> None:
    # Note [Page inspector]: the snapshots, read back as the page reads them, equal
    # ReplaySession.node() (made JSON-safe) for every node at every position.
    trace = hostile_trace("Plain")
    data = _html.standalone_data(trace)
    session = ReplaySession(trace)
    ids = [node["id"] for node in data["graph"]["nodes"]]
    for position in range(len(trace.events) + 1):
        session.seek(position)
        for node_id in ids:
            assert snapshot_at(data, node_id, position) == json_safe(session.node(node_id)), (position, node_id)
    # the gradients are there: a finished node shows its summaries in and out
    last = snapshot_at(data, ids[0], len(trace.events))
    assert last["grads_in"] and last["grads_in"][0]["shape"] == [] and last["grads_out"][0]["shape"] == [2]
    assert data["inspection_budget"]["left_out"] == 0 and data["inspection_budget"]["bytes"] > 0


def test_the_inspector_budget_bounds_the_page_and_says_what_it_left_out(tmp_path: Path) -> None:
    trace = hostile_trace("Plain")
    full = _html.standalone_data(trace)
    budget = full["inspection_budget"]["bytes"] // 3
    with pytest.warns(UserWarning, match=r"snapshots of up to \d+ node states were left out .*inspection_budget="):
        path = _html.trace_to_html(trace, tmp_path / "small.html", inspection_budget=budget)
    _, data = read_page(path)
    used = data["inspection_budget"]
    assert used["limit"] == budget and 0 < used["bytes"] <= budget and used["left_out"] > 0
    snapshots = {key: [pair for pair in pairs if pair[1] != _html.LEFT_OUT_MARKER]
                 for key, pairs in data["inspections"].items()}
    kept = sum(len(pairs) for pairs in snapshots.values())
    assert len(_html.script_json(snapshots)) <= budget
    # what was kept is the full page's snapshots up to the cut, in position order
    cut = min(pair[0] for pairs in data["inspections"].values() for pair in pairs
              if pair[1] == _html.LEFT_OUT_MARKER)
    assert kept == sum(1 for pairs in full["inspections"].values() for at, _ in pairs if at < cut) + sum(
        1 for pairs in snapshots.values() for at, _ in pairs if at == cut)
    assert kept + used["left_out"] >= sum(len(pairs) for pairs in full["inspections"].values())
    # Fidelity: at every position the page shows a node either what the replay shows or the
    # budget marker (the view then says the value was left out), never an older snapshot
    markers = 0
    for node in data["graph"]["nodes"]:
        for position in range(len(trace.events) + 1):
            shown = snapshot_at(data, node["id"], position)
            if shown == _html.LEFT_OUT_MARKER:
                markers += 1
            elif shown is not None:
                assert shown == snapshot_at(full, node["id"], position), (node["id"], position)
    assert markers > 0
    none = _html.standalone_data(trace, inspection_budget=0)
    assert none["inspections"] == {} and none["inspection_budget"]["bytes"] == 0


def test_trace_to_html_takes_the_inspector_budget_the_warning_names(tmp_path: Path) -> None:
    trace = hostile_trace("Plain")
    budget = _html.standalone_data(trace)["inspection_budget"]["bytes"] // 3
    with pytest.warns(UserWarning, match="pass a larger inspection_budget"):
        path = trace.to_html(tmp_path / "small.html", inspection_budget=budget)
    assert read_page(path)[1]["inspection_budget"]["limit"] == budget
    _, data = read_page(trace.to_html(tmp_path / "default.html"))
    assert data["inspection_budget"]["limit"] == _html.INSPECTION_BUDGET
