"""Real PyTorch models in the widget's page: a ResNet-18, a GPT-2-style transformer and an LSTM
language model unrolled over 35 steps (tests/browser/torch_models.py, ``torch.nn`` only).

Each forward runs inside ``gradviz.debug.torch_scopes()``, its backward is recorded with
``gradviz.debug.record_torch(loss, params=model)``, and the trace's offline page
(``Trace.to_html``) is opened in Chromium from ``file://``. The page draws with the widget's
view code, so this is what a person debugging a real model sees: the graph opens folded into
the model's modules with no page or console error, search finds a parameter by its name and
selects it, stepping follows the running node, and after Continue the inspector shows that
parameter's gradient with torch's own ``.grad`` statistics. The page size and the time to the
first drawing are printed (bench/widget_scale.py holds the timings; nothing here is timed).
Marked ``browser``; needs the built bundle.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_models  # noqa: E402
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    READ_ACCUMULATED_JS,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
    format_number,
)

import gradviz

pytestmark = pytest.mark.browser

MAX_FIRST_VIEW = 150


class Recorded:
    """One model's recorded backward: its page, and torch's ``.grad`` of every parameter."""

    def __init__(self, name: str, folder: Path) -> None:
        model, forward_and_loss = torch_models.make(name)
        with gradviz.debug.torch_scopes():
            loss = forward_and_loss()
        self.trace = gradviz.debug.record_torch(loss, params=model)
        self.grads = {key: parameter.grad.clone() for key, parameter in model.named_parameters()
                      if parameter.grad is not None}
        self.node_count = len(self.trace.graph["nodes"])
        self.path = self.trace.to_html(folder / f"{name}.html", title=name, inspection_budget=1 << 25)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    folder = tmp_path_factory.mktemp("torch-models")
    return {name: Recorded(name, folder) for name in torch_models.NAMES}


@pytest.mark.parametrize("name", torch_models.NAMES)
def test_a_recorded_torch_model_opens_folded_searches_steps_and_shows_torch_grads(
    browser: Any, recorded: dict[str, Recorded], name: str
) -> None:
    model = recorded[name]
    modules, parameter = torch_models.CHECKS[name]
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(90_000)
    problems = PageProblems()
    problems.attach(page)
    try:
        started = time.perf_counter()
        page.goto(model.path.as_uri())
        page.wait_for_selector(".gv-root .gv-node[data-node-id]", state="visible")
        first_drawing = time.perf_counter() - started
        print(f"\n{name}: {model.node_count} nodes, page {model.path.stat().st_size / 2**20:.1f} MiB, "
              f"first drawing after {first_drawing:.2f} s")
        root = page.locator(".gv-root")
        assert int(root.get_attribute("data-node-count")) == model.node_count
        boxes = root.locator(".gv-node:not([data-copy])").count()
        folded = set(root.locator(".gv-node.gv-folded[data-module]").evaluate_all(
            "boxes => boxes.map(box => box.dataset.module)"))
        framed = set(root.locator(".gv-frame[data-frame-module]").evaluate_all(
            "frames => frames.map(frame => frame.dataset.frameModule)"))
        if model.node_count <= MAX_FIRST_VIEW:  # a graph this small is drawn whole
            assert boxes == model.node_count and not folded
        else:  # folded into the model's modules (boxes, or frames holding folded pieces)
            assert boxes <= MAX_FIRST_VIEW and folded | framed
            assert modules <= {module.split(".")[0] for module in folded | framed}, (folded, framed)

        # Search finds the parameter by its name, opens its module and selects its node.
        page.locator('[data-testid="gv-canvas"]').focus()
        page.keyboard.press("/")
        search = page.locator('[data-testid="gv-search"]')
        search.fill(parameter)
        assert page.locator('[data-testid="gv-search-count"]').inner_text() == "1 hit"
        search.press("Enter")  # on a folded graph, its module opens first (a new layout)
        hit = root.locator(".gv-node.gv-selected:not(.gv-folded):not([data-copy])")
        hit.wait_for(state="visible")
        assert hit.locator("text.gv-name").text_content().startswith(parameter)
        node_id = hit.get_attribute("data-node-id")
        search.press("Escape")

        # Step: the running node is drawn (its module opened) and highlighted.
        for _ in range(3):
            page.locator('[data-testid="gv-step"]').click()
        page.wait_for_function("() => Number(document.querySelector('[data-testid=gv-scrubber]').value) > 0")
        page.wait_for_selector(".gv-root .gv-node.gv-current:not(.gv-folded)", state="visible")

        # Continue to the end; the inspector shows the parameter's gradient as torch left it.
        page.locator('[data-testid="gv-continue"]').click()
        page.wait_for_function("() => { const s = document.querySelector('[data-testid=gv-scrubber]');"
                               " return Number(s.value) === Number(s.max); }")
        # (following the run panned the drawing away: search again, which pans to the hit)
        search.fill(parameter)
        search.press("Enter")
        node = root.locator(f'.gv-node.gv-selected[data-node-id="{node_id}"]:not([data-copy])')
        node.wait_for(state="visible")
        search.press("Escape")
        node.click()
        inspector = page.locator('[data-testid="gv-inspector"]')
        page.wait_for_selector(f'[data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{node_id}"]')
        grad = model.grads[parameter]
        after = ["after", f"[{', '.join(map(str, grad.shape))}]", "float32",
                 format_number(grad.min().item()), format_number(grad.max().item())]
        rows = inspector.evaluate(READ_ACCUMULATED_JS)
        assert after in rows, rows
        assert problems.report() == "", problems.report()
        assert root.locator('[data-testid="gv-error"]').is_hidden()
    finally:
        directory = ARTIFACTS / f"torch-{name}"
        directory.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(directory / "page.png"))
        (directory / "console.txt").write_text("\n".join(problems.console))
        context.close()
