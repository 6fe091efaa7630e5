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
import playwright.sync_api as sync_api  # a test dependency: a missing one must fail, not skip
from gradviz_browser_harness import ARTIFACTS, PageProblems, launch_chromium  # noqa: E402
from scale_models import HOSTILE, chain_loss, hostile_model_loss, lstm_loss, transformer_loss  # noqa: E402

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
    }


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


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
