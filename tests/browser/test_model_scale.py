"""Real-model graphs in the offline page (``Trace.to_html``), from ``file://``: folded first view,
expand/fold, roll-up counts, follow while stepping, search, a 10,000-node chain, hostile names.

The page draws with the same view code as the notebook widget (labextension/src/widget.ts), so
these checks cover the widget's folding too. Timings go to bench/widget_scale.py, not here.
Needs the built bundle. Marked ``browser``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    READ_STATES_JS,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
)
from scale_models import HOSTILE, chain_loss, hostile_model_loss, lstm_loss, shared_loss, transformer_loss  # noqa: E402

import gradviz as torch
from gradviz.widget import trace_to_html

pytestmark = pytest.mark.browser

#: Records any alert() without blocking the page (a hostile name must never run).
TRAP = "window.__alerts = []; window.alert = (text) => window.__alerts.push(String(text));"
MAX_FIRST_VIEW = 150


def _page_of(make_loss: Any, path: Path) -> Path:
    """The offline page of the backward pass of `make_loss()` (forward recorded too: module paths)."""
    with torch.record() as trace:
        loss = make_loss()
        (loss[0] if isinstance(loss, tuple) else loss).backward()
    return trace_to_html(trace, path, inspection_budget=1 << 20)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scale")
    return {
        "transformer": _page_of(lambda: transformer_loss(12), folder / "transformer.html"),
        "lstm": _page_of(lambda: lstm_loss(150), folder / "lstm.html"),
        "hostile": _page_of(hostile_model_loss, folder / "hostile.html"),
        "small": _page_of(lambda: transformer_loss(1), folder / "small.html"),
        "shared": _page_of(shared_loss, folder / "shared.html"),
    }


class Page:
    def __init__(self, browser: Any, path: Path, name: str) -> None:
        self.name = name
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.context.add_init_script(TRAP)
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.problems = PageProblems()
        self.problems.attach(self.page)
        self.page.goto(path.as_uri())
        self.root = self.page.locator(".gv-root")
        self.page.wait_for_selector(".gv-root .gv-node[data-node-id]", state="visible")

    def boxes(self) -> int:
        return self.root.locator(".gv-node:not([data-copy])").count()

    def layouts(self) -> int:
        return int(self.root.get_attribute("data-layout-count") or 0)

    def wait_for_layout(self, before: int) -> None:
        self.page.wait_for_function(
            "([before]) => { const root = document.querySelector('.gv-root');"
            " return Number(root.dataset.layoutCount) > before && root.querySelector('.gv-message').hidden"
            " && Number(root.dataset.boxCount) === root.querySelectorAll('.gv-node:not([data-copy])').length; }",
            arg=[before],
        )

    def close(self) -> None:
        directory = ARTIFACTS / f"scale-{self.name}"
        directory.mkdir(parents=True, exist_ok=True)
        try:
            self.page.screenshot(path=str(directory / "page.png"))
        finally:
            (directory / "console.txt").write_text("\n".join(self.problems.console))
            self.context.close()

    def check_clean(self) -> None:
        assert self.problems.report() == "", self.problems.report()
        assert self.page.evaluate("window.__alerts") == []
        assert self.root.locator('[data-testid="gv-error"]').is_hidden()


@pytest.fixture
def open_page(browser: Any, pages: dict[str, Path]) -> Iterator[Any]:
    opened: list[Page] = []

    def open_(name: str, path: Path | None = None) -> Page:
        page = Page(browser, path or pages[name], name)
        opened.append(page)
        return page

    yield open_
    for page in opened:
        page.close()


def test_transformer_opens_folded_and_expands_and_folds(open_page: Any) -> None:
    page = open_page("transformer")
    assert int(page.root.get_attribute("data-node-count")) > 800
    assert page.boxes() <= MAX_FIRST_VIEW
    folded = page.root.locator(".gv-node.gv-folded[data-module]")
    assert folded.count() > 0
    # Fold all blocks with the ⊖ of their frame: the 12 blocks roll up into "+11 more Block".
    frame = page.root.locator('.gv-frame[data-frame-module="blocks"] .gv-frame-toggle')
    before = page.layouts()
    frame.click()
    page.wait_for_layout(before)
    blocks = page.root.locator('.gv-node.gv-folded[data-module="blocks"]')
    assert blocks.count() == 1
    # Expand it by double-click: the group box of distinct instances shows its roll-up count.
    before = page.layouts()
    blocks.dblclick()
    page.wait_for_layout(before)
    group = page.root.locator('.gv-node.gv-folded[data-module="blocks.0"]')
    assert "+11 more Block" in " ".join(group.locator("text").all_text_contents())
    # Expand the group with its ⊕: twelve Block boxes.
    before = page.layouts()
    group.locator(".gv-toggle").click()
    page.wait_for_layout(before)
    assert page.root.locator('.gv-node.gv-folded[data-module^="blocks."]').count() == 12
    page.check_clean()


def test_search_opens_selects_and_pans_to_a_parameter(open_page: Any) -> None:
    page = open_page("transformer")
    page.root.locator('[data-testid="gv-canvas"]').focus()
    page.page.keyboard.press("/")
    search = page.root.locator('[data-testid="gv-search"]')
    assert search.evaluate("element => element === document.activeElement")
    search.fill("blocks.7.mlp.0.weight")
    assert page.root.locator('[data-testid="gv-search-count"]').inner_text() == "1 hit"
    before = page.layouts()
    search.press("Enter")
    page.wait_for_layout(before)
    hit = page.root.locator(".gv-node.gv-selected:not(.gv-folded)")
    hit.wait_for(state="visible")
    assert hit.locator("text.gv-name").text_content().startswith("blocks.7.mlp.0.weight")
    assert page.root.locator('[data-testid="gv-search-count"]').inner_text() == "1 of 1"
    search.press("Escape")
    assert page.root.locator('[data-testid="gv-canvas"]').evaluate("element => element === document.activeElement")
    page.check_clean()


def test_lstm_rolls_up_its_calls_and_follows_a_step(open_page: Any) -> None:
    page = open_page("lstm")
    assert page.boxes() <= MAX_FIRST_VIEW
    # The cell applied 150 times: folded, its box says (x150); open (cut into segments), its frame does.
    shown = page.root.locator('.gv-node.gv-folded[data-module="cell"] text, .gv-frame[data-frame-module="cell"] text.gv-frame-label')
    assert "LSTMCell cell" in " ".join(shown.all_text_contents())
    assert "(x150)" in " ".join(shown.all_text_contents())
    # Step until the running node is inside the cell: follow opens it and shows that node.
    for _ in range(20):
        before = page.layouts()
        page.page.locator('[data-testid="gv-step"]').click()
        current = page.root.locator(".gv-node.gv-current")
        if page.root.locator('.gv-node.gv-folded[data-module="cell"]').count() == 0:
            break
        if page.layouts() > before:
            break
    page.page.wait_for_function("() => document.querySelector('.gv-root .gv-node.gv-current:not(.gv-folded)') !== null")
    current = page.root.locator(".gv-node.gv-current:not(.gv-folded)")
    assert current.count() >= 1
    box = current.first.bounding_box()
    canvas = page.root.locator('[data-testid="gv-canvas"]').bounding_box()
    assert box is not None and canvas is not None
    assert canvas["y"] <= box["y"] + box["height"] / 2 <= canvas["y"] + canvas["height"], "the running node is in view"
    page.check_clean()


def test_a_10000_node_chain_opens_and_steps(open_page: Any, tmp_path: Path) -> None:
    with torch.record() as trace:
        chain_loss(10_000).backward()
    page = open_page("chain", trace_to_html(trace, tmp_path / "chain.html", inspection_budget=1 << 20))
    assert page.root.get_attribute("data-node-count") == "10000"
    assert page.boxes() <= MAX_FIRST_VIEW
    segment = page.root.locator(".gv-node.gv-folded").first
    assert segment.locator("text.gv-name").text_content().startswith("nodes 1–")
    page.page.locator('[data-testid="gv-step"]').click()
    page.page.wait_for_function("() => document.querySelector('.gv-root .gv-node.gv-current:not(.gv-folded)') !== null")
    assert page.boxes() <= 2 * MAX_FIRST_VIEW
    page.check_clean()


def test_hostile_module_class_and_parameter_names_are_text(open_page: Any) -> None:
    page = open_page("hostile")
    folded = page.root.locator(".gv-node.gv-folded[data-module]")
    assert f"{HOSTILE}.fc" in folded.evaluate_all("boxes => boxes.map(box => box.getAttribute('data-module'))")
    assert any(HOSTILE in text for text in page.root.locator(".gv-node.gv-folded text").all_text_contents())
    search = page.root.locator('[data-testid="gv-search"]')
    search.fill(f"{HOSTILE}.fc.weight")
    search.press("Enter")
    page.root.locator(".gv-node.gv-selected:not([data-copy])").wait_for(state="visible")
    names = " ".join(page.root.locator(".gv-node text, .gv-frame text").all_text_contents())
    assert f"{HOSTILE}.fc.weight" in names
    assert HOSTILE in " ".join(page.root.locator(".gv-frame text.gv-frame-label").all_text_contents())
    assert page.root.locator("img").count() == 0
    page.check_clean()


#: Each fan-in copy's box and the frames around its node's primary box, by their rectangles.
COPIES_IN_FRAMES_JS = """
root => {
  const rect = (element) => element.getBoundingClientRect();
  const inside = (a, b) => a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
  const frames = [...root.querySelectorAll('.gv-frame rect')];
  const wrong = [];
  let copies = 0;
  for (const copy of root.querySelectorAll('.gv-node[data-copy]')) {
    copies++;
    const primary = root.querySelector(`.gv-node[data-node-id="${copy.dataset.nodeId}"]:not([data-copy]) .gv-box`);
    const box = rect(copy.querySelector('.gv-box'));
    for (const frame of frames) {
      if (inside(rect(primary), rect(frame)) !== inside(box, rect(frame))) wrong.push(copy.dataset.nodeId);
    }
  }
  return { copies, wrong };
}
"""


def _pan_into_view(page: Page, element: Any) -> None:
    """Drag the drawing so that `element` sits in the middle of the canvas (as a user pans)."""
    canvas = page.root.locator('[data-testid="gv-canvas"]').bounding_box()
    target = element.bounding_box()
    assert canvas is not None and target is not None
    x, y = canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2
    mouse = page.page.mouse
    mouse.move(x, y)
    mouse.down()
    mouse.move(x + x - (target["x"] + target["width"] / 2), y + y - (target["y"] + target["height"] / 2), steps=5)
    mouse.up()


def test_frames_only_on_big_graphs_and_never_cut_into_columns(open_page: Any) -> None:
    small = open_page("small")
    assert int(small.root.get_attribute("data-node-count")) <= MAX_FIRST_VIEW
    assert small.root.locator(".gv-frame").count() == 0, "a teaching-size graph is drawn as before: no frames"
    assert small.root.locator(".gv-node.gv-folded").count() == 0
    page = open_page("transformer")
    assert page.root.locator(".gv-frame").count() > 0
    assert page.root.get_attribute("data-columns") == "1", "a drawing with frames is not cut into columns"
    page.check_clean()


def test_expanding_lays_out_only_the_module_and_its_ancestors(open_page: Any) -> None:
    page = open_page("transformer")
    # The states the tests read are of real nodes only (a folded box's id is synthetic).
    states = page.root.evaluate(READ_STATES_JS)
    assert states, "some nodes are drawn"
    node_ids = {int(node) for node in page.root.evaluate("root => [...root.querySelectorAll('.gv-node:not(.gv-folded)')]"
                                                         ".map(node => node.dataset.nodeId)")}
    assert {int(key) for key in states} == node_ids
    assert all(int(key) < 2**48 for key in states)
    checked = 0
    for module in ("blocks.0", "blocks.1.attn", "blocks.5"):
        box = page.root.locator(f'.gv-node.gv-folded[data-module="{module}"]')
        if box.count() == 0:
            continue
        toggle = box.locator(".gv-toggle")
        _pan_into_view(page, toggle)
        before = page.layouts()
        toggle.click()
        page.wait_for_layout(before)
        assert page.root.locator(f'.gv-frame[data-frame-module="{module}"]').count() == 1
        # Lazy layout: the expanded module's interior and its ancestors' (each one Graphviz run).
        runs = int(page.root.get_attribute("data-layout-runs"))
        assert 1 <= runs <= module.count(".") + 2, runs
        checked += 1
    assert checked > 0, "a module was expanded"
    page.check_clean()


def test_fan_in_copies_of_a_folded_box_stay_in_its_frame(open_page: Any) -> None:
    page = open_page("shared")
    assert int(page.root.get_attribute("data-node-count")) > MAX_FIRST_VIEW
    frame = page.root.locator('.gv-frame[data-frame-module="body.proj"] .gv-frame-toggle')
    if frame.count() == 1:
        _pan_into_view(page, frame)
        before = page.layouts()
        frame.click()
        page.wait_for_layout(before)
    assert page.root.locator('.gv-node.gv-folded[data-module="body.proj"]').count() >= 1
    assert page.root.locator('.gv-frame[data-frame-module="body"]').count() == 1
    found = page.root.evaluate(COPIES_IN_FRAMES_JS)
    assert found["copies"] > 0, "body.proj (x10) is drawn once per use"
    assert found["wrong"] == [], found
    page.check_clean()


def test_a_node_shows_its_forward_line_on_hover(open_page: Any) -> None:
    page = open_page("small")
    titles = page.root.locator(".gv-node:not(.gv-folded) > title")
    texts = titles.all_text_contents()
    # Recorded inside gradviz.record(): the user's line in scale_models.py (module forwards are
    # gradviz's code, so the line is the model's own: Block.forward's attention, the MLP...).
    lines = [line for text in texts for line in text.split("\n") if line.startswith("forward: ")]
    assert lines, texts[:3]
    assert any("scale_models.py:" in line and "self.attn(h, h, h" in line for line in lines), lines[:5]
    # Text, never markup: the title holds one text node.
    assert titles.evaluate_all("titles => titles.every(t => t.childNodes.length === 1 && t.firstChild.nodeType === 3)")
    page.check_clean()
