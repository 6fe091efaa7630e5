"""Debugger widgets in the built docs (Note [Widgets in the built docs] in
gradviz/widget/_docs_pages.py): only while GRADVIZ_DOCS_PAGES is set, a widget's display data
also hold an iframe of an offline replay page of its session, rewritten at exit with the whole
pass."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import gradviz as torch
from gradviz.widget import DebuggerWidget, _docs_pages
from gradviz.widget._docs_pages import DOCS_PAGES_ENV, DOCS_PAGES_URL_ENV


def page_data(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="gradviz-data">(.*?)</script>', text, re.S)
    assert match is not None, f"{path} is not a replay page"
    return json.loads(match.group(1))


def display_data(widget: DebuggerWidget) -> dict:
    bundle = widget._repr_mimebundle_()
    return bundle[0] if isinstance(bundle, tuple) else bundle


@pytest.fixture
def pages(tmp_path, monkeypatch):
    monkeypatch.setenv(DOCS_PAGES_ENV, str(tmp_path / "replays"))
    monkeypatch.setenv(DOCS_PAGES_URL_ENV, "../replays/")
    monkeypatch.setattr(_docs_pages, "_pages", [])
    monkeypatch.setattr(_docs_pages, "_exit_hook_registered", True)  # the test runs the hook itself
    return tmp_path / "replays"


def session_of_square():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    return torch.debug.backward((x * x).sum()), x


def test_outside_a_docs_build_the_display_data_are_the_widgets_own(monkeypatch):
    monkeypatch.delenv(DOCS_PAGES_ENV, raising=False)
    session, _ = session_of_square()
    data = display_data(DebuggerWidget(session))
    assert "text/html" not in data
    assert "application/vnd.jupyter.widget-view+json" in data


def test_in_a_docs_build_a_widget_is_an_iframe_of_its_replay_page(pages):
    session, _ = session_of_square()
    data = display_data(DebuggerWidget(session))
    assert "application/vnd.jupyter.widget-view+json" in data  # Jupyter still draws the widget
    source = re.search(r'<iframe class="gradviz-replay" src="\.\./replays/([^"]+)"', data["text/html"]).group(1)
    written = page_data(pages / source)
    assert written["events"] and written["final_status"] != "finished"  # displayed before it ran


def test_at_exit_a_paused_session_runs_to_its_end_and_its_page_replays_the_whole_pass(pages):
    session, x = session_of_square()
    session.break_on(function="MulBackward0")  # a breakpoint does not stop the page's pass
    data = display_data(DebuggerWidget(session))
    source = re.search(r'src="\.\./replays/([^"]+)"', data["text/html"]).group(1)
    session.step()  # the notebook took one step, and left the rest to the reader
    _docs_pages._rewrite_all()
    written = page_data(pages / source)
    assert written["final_status"] == "finished"
    assert written["events"][-1][0] == "backward_finished"
    assert session.status == "finished"
    # the pass the page replays is the real one: x.grad as PyTorch computes it, 2x
    assert x.grad.tolist() == [2.0, -4.0, 6.0]


def test_a_hostile_url_prefix_is_escaped_in_the_iframe(pages, monkeypatch):
    monkeypatch.setenv(DOCS_PAGES_URL_ENV, '"><script>alert(1)</script>/')
    session, _ = session_of_square()
    embed = display_data(DebuggerWidget(session))["text/html"]
    assert "<script>" not in embed and "&quot;&gt;&lt;script&gt;" in embed


def test_a_runcall_session_gets_a_page_of_its_whole_run(pages):
    weights = torch.tensor([1.0, 2.0], requires_grad=True)

    def train(w):
        for _ in range(2):
            (w * w).sum().backward()

    session = torch.debug.runcall(train, weights, breakpoints=[{"function": "MulBackward0"}])
    embed = display_data(DebuggerWidget(session))["text/html"]
    source = re.search(r'src="\.\./replays/([^"]+)"', embed).group(1)
    _docs_pages._rewrite_all()  # at exit: run to the end through the breakpoints, then write
    written = page_data(pages / source)
    assert session.status == "finished" and written["final_status"] == "finished"
    assert [event[0] for event in written["events"]].count("backward_finished") == 2
    assert weights.grad.tolist() == [4.0, 8.0]  # two passes of d(w*w)/dw = 2w, accumulated
