"""Fit on tall graphs, in a real browser: the whole graph inside the canvas, at a readable size.

A chain of 60 operations and an MLP's graph (8 layers, a weight and a bias leaf each) are
recorded with gradviz, written as self-contained pages (``Trace.to_html``: the notebook
widget's own view) and opened from ``file://`` at a notebook's width. After zooming and
panning away, Fit must bring back all of the drawing (its bounding box inside the canvas) with
node boxes drawn at least READABLE_SCALE of their size (node names then are >= 7 px tall; the
unfolded chain fitted at 0.09). Marked ``browser``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    MEASURE_FIT_JS,
    READABLE_SCALE,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
)

import gradviz as torch

pytestmark = pytest.mark.browser

MAX_CANVAS_HEIGHT = 560  # labextension/src/draw.ts, MAX_HEIGHT

def _chain_trace() -> Any:
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with torch.record() as trace:
        y = x
        for step in range(60):
            y = (y * 1.01).sin() if step % 2 else y * 1.01
        y.sum().backward()
    return trace


def _mlp_trace() -> Any:
    nn = torch.nn
    layers = [module for _ in range(8) for module in (nn.Linear(16, 16), nn.ReLU())]
    model = nn.Sequential(*layers, nn.Linear(16, 1))
    with torch.record() as trace:
        model(torch.ones(4, 16)).sum().backward()
    return trace


@pytest.mark.parametrize("name, make_trace, width", [
    ("chain60", _chain_trace, 960),
    ("mlp8", _mlp_trace, 960),
    ("chain60-narrow", _chain_trace, 800),
])
def test_fit_shows_a_tall_graph_whole_and_readable(browser: Any, tmp_path: Path, name: str, make_trace: Any, width: int) -> None:
    trace = make_trace()
    path = trace.to_html(tmp_path / f"{name}.html", title=name)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    problems = PageProblems()
    problems.attach(page)
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".gv-root .gv-node[data-node-id]", state="visible", timeout=30_000)
        root = page.locator(".gv-root")
        assert root.locator(".gv-node[data-node-id]:not([data-copy])").count() == len(trace.graph["nodes"])
        # Away from the fitted view: zoom in and drag the drawing aside.
        for _ in range(3):
            root.locator('[data-testid="gv-zoom-in"]').click()
        canvas = root.locator('[data-testid="gv-canvas"]').bounding_box()
        page.mouse.move(canvas["x"] + 40, canvas["y"] + 40)
        page.mouse.down()
        page.mouse.move(canvas["x"] + 300, canvas["y"] + 200, steps=5)
        page.mouse.up()
        root.locator('[data-testid="gv-fit"]').click()
        seen = root.evaluate(MEASURE_FIT_JS)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        root.screenshot(path=str(ARTIFACTS / f"fit-{name}.png"))
        left, top, right, bottom = seen["canvas"]
        d_left, d_top, d_right, d_bottom = seen["drawing"]
        assert left - 0.5 <= d_left and d_right <= right + 0.5, f"drawing {seen['drawing']} outside canvas {seen['canvas']}"
        assert top - 0.5 <= d_top and d_bottom <= bottom + 0.5, f"drawing {seen['drawing']} outside canvas {seen['canvas']}"
        assert bottom - top <= MAX_CANVAS_HEIGHT + 1
        assert seen["scale"] >= READABLE_SCALE - 1e-6, f"boxes drawn at {seen['scale']:.2f} of their size"
        assert seen["nameHeight"] >= 7, seen
        assert int(root.get_attribute("data-columns")) > 1, "the tall drawing was not folded"
        assert problems.report() == "", problems.report()
    finally:
        context.close()
