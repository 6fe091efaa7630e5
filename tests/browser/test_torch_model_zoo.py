"""The models of tests/browser/torch_model_zoo.py (a ``TransformerEncoder`` with masks, a
bidirectional ``GRU``, a U-Net, a ViT, a custom ``autograd.Function``, weight tying, a module
called twice, ``BatchNorm`` in train and eval mode, parameters in ``ModuleDict`` and
``ParameterList``) recorded as the docs tell a user (forward inside
``gradviz.debug.torch_scopes()``, ``gradviz.debug.record_torch(loss, params=model)``) and opened
in the trace's offline page (``Trace.to_html``) in Chromium, as a tester would check them: the
page opens (folded into the model's modules when the graph is too big to draw whole) with no
page or console error; search finds a parameter by its full name; Step runs and marks the
running node; after Continue the inspector's ``.grad`` row of that parameter reads, column by
column, what torch's own ``.grad`` gives, and the gradient into the node that made a module's
output reads what a torch hook on that output received; Check gradients (the trace recorded
with ``doctor=True``) finds the one wrong backward, the custom Function's, and nothing else. The page size and the time to the first
drawing are printed, never asserted. Marked ``browser``; needs the built bundle.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_model_zoo  # noqa: E402
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
    format_number,
)

import gradviz

pytestmark = pytest.mark.browser

MAX_FIRST_VIEW = 150

#: Every cell of a row of the inspector's gradient tables, one list per row.
READ_ROWS_JS = """
(inspector, section) => [...inspector.querySelectorAll(`[data-section=${section}] tr[data-testid=gv-grad-row]`)]
  .map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))
"""


def expected_row(label: str, grad: Any) -> list[str]:
    """The inspector's row for a float32 torch gradient, from torch alone (no NaN/Inf here):
    slot, shape, dtype, min, max, mean, norm, NaN and Inf counts, the first values."""
    flat = grad.detach().reshape(-1)
    shown = flat.tolist() if flat.numel() <= 32 else flat[:6].tolist()
    values = ", ".join(format_number(value) for value in shown)
    more = ", …" if flat.numel() > len(shown) else ""
    return [label, f"[{', '.join(map(str, grad.shape))}]", "float32", format_number(flat.min().item()),
            format_number(flat.max().item()), format_number(flat.double().mean().item()),
            format_number(flat.double().norm().item()), "0", "0", f"[{values}{more}]"]


def discovery_ids(loss: Any) -> dict[Any, int]:
    """``{torch node: id}`` as docs/events.md says record_torch numbers them: walked
    iteratively from ``loss.grad_fn`` through ``next_functions``, ids in discovery order."""
    ids = {loss.grad_fn: 0}
    stack = [loss.grad_fn]
    while stack:
        for child, _ in stack.pop().next_functions:
            if child is not None and child not in ids:
                ids[child] = len(ids)
                stack.append(child)
    return ids


class Recorded:
    """One model's recorded backward: its page, torch's ``.grad`` of the searched parameter,
    and the probed module output's node, slot and gradient as a torch hook saw it."""

    def __init__(self, name: str, folder: Path) -> None:
        self.case = torch_model_zoo.make(name)
        probe = torch_model_zoo.probe_output(self.case)
        with gradviz.debug.torch_scopes():
            loss = self.case.forward_and_loss()
        output = probe()
        self.probe_node = discovery_ids(loss)[output.grad_fn]
        self.probe_slot = output.output_nr
        self.trace = gradviz.debug.record_torch(loss, params=self.case.model, doctor=True)
        self.probe_grad = output.grad.clone()
        self.grad = dict(self.case.model.named_parameters())[self.case.parameter].grad.clone()
        self.node_count = len(self.trace.graph["nodes"])
        self.path = self.trace.to_html(folder / f"{name}.html", title=name)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    folder = tmp_path_factory.mktemp("torch-zoo")
    return {name: Recorded(name, folder) for name in torch_model_zoo.NAMES}


def select_by_search(page: Any, text: str) -> Any:
    """Type ``text`` in the search box, Enter (opens the hit's module), return the selected box."""
    search = page.locator('[data-testid="gv-search"]')
    if not search.is_visible():
        page.locator('[data-testid="gv-canvas"]').focus()
        page.keyboard.press("/")
    search.fill(text)
    assert page.locator('[data-testid="gv-search-count"]').inner_text() == "1 hit", text
    search.press("Enter")
    hit = page.locator(".gv-root .gv-node.gv-selected:not(.gv-folded):not([data-copy])")
    hit.wait_for(state="visible")
    search.press("Escape")
    return hit


def assert_in_view(page: Any, box: Any) -> None:
    """The box is drawn inside the canvas (the view panned to it), not outside its edges."""
    inner, canvas = box.bounding_box(), page.locator('[data-testid="gv-canvas"]').bounding_box()
    assert canvas["x"] <= inner["x"] and inner["x"] + inner["width"] <= canvas["x"] + canvas["width"], (inner, canvas)
    assert canvas["y"] <= inner["y"] and inner["y"] + inner["height"] <= canvas["y"] + canvas["height"], (inner, canvas)


def inspect(page: Any, node_id: int | str) -> Any:
    """Click the drawn node ``node_id``; wait for the inspector to show it."""
    page.locator(f'.gv-root .gv-node[data-node-id="{node_id}"]:not([data-copy])').click()
    page.wait_for_selector(f'[data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{node_id}"]')
    return page.locator('[data-testid="gv-inspector"]')


@pytest.mark.parametrize("name", torch_model_zoo.NAMES)
def test_a_torch_model_opens_searches_steps_and_shows_torchs_gradients(
    browser: Any, recorded: dict[str, Recorded], name: str
) -> None:
    model = recorded[name]
    parameter = model.case.parameter
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
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
        folded = set(root.locator(".gv-node.gv-folded[data-module], .gv-frame[data-frame-module]").evaluate_all(
            "boxes => boxes.map(box => box.dataset.module ?? box.dataset.frameModule)"))
        if model.node_count <= MAX_FIRST_VIEW:  # a graph this small is drawn whole
            assert boxes == model.node_count and not folded
        else:  # folded into the model's modules (boxes, or frames holding folded pieces)
            assert boxes <= MAX_FIRST_VIEW, boxes
            assert model.case.folded <= {module.split(".")[0] for module in folded}, folded

        # Search finds the parameter by its full name (opening its module, a new layout) and
        # pans to it; and the non-leaf by its number.
        hit = select_by_search(page, parameter)
        assert hit.locator("text.gv-name").text_content().startswith(parameter)
        page.wait_for_timeout(300)  # a late pan (the canvas's first resize report) would show here
        assert_in_view(page, hit)
        parameter_node = hit.get_attribute("data-node-id")
        probe = model.trace.graph["nodes"][model.probe_node]
        assert select_by_search(page, f"/^#{probe['number']}$/").get_attribute("data-node-id") == str(model.probe_node)

        # Step: one node runs at a time, the running node drawn and marked.
        status = root.locator('[data-testid="gv-status"]')
        for _ in range(3):
            before = status.inner_text()
            root.locator('[data-testid="gv-step"]').click()
            page.wait_for_function("before => document.querySelector('[data-testid=gv-status]').textContent !== before",
                                   arg=before)
        root.locator(".gv-node.gv-current:not(.gv-folded)").first.wait_for(state="visible")

        # Continue; the inspector shows torch's .grad of the parameter, and the gradient that
        # reached the probed module's output as torch's hook saw it.
        root.locator('[data-testid="gv-continue"]').click()
        page.wait_for_function("() => { const s = document.querySelector('[data-testid=gv-scrubber]');"
                               " return Number(s.value) === Number(s.max); }")
        select_by_search(page, parameter)
        inspector = inspect(page, parameter_node)
        rows = inspector.evaluate(READ_ROWS_JS, "accumulated")
        assert rows[1] == expected_row("after", model.grad), rows
        assert inspector.locator('[data-testid="gv-inspector-leaf"]').inner_text() == parameter

        select_by_search(page, f"/^#{probe['number']}$/")
        inspector = inspect(page, model.probe_node)
        rows = inspector.evaluate(READ_ROWS_JS, "in")
        assert rows[model.probe_slot] == expected_row(str(model.probe_slot), model.probe_grad), rows

        # Check gradients (the doctor's report, recorded with the trace): the custom Function's
        # backward, off by half, is the one problem in these models.
        page.locator('[data-testid="gv-check-gradients"]').click()
        panel = page.locator('[data-testid="gv-doctor"]')
        status = panel.locator('[data-testid="gv-doctor-status"]')
        status.wait_for(state="visible")
        findings = panel.locator('[data-testid="gv-finding-row"]').evaluate_all(
            "rows => rows.map(row => [row.dataset.kind, row.dataset.nodeId])")
        if name == "custom_function":
            (custom,) = [node["id"] for node in model.trace.graph["nodes"] if node["kind"] == "custom"]
            assert status.inner_text() == "1 problem found" and findings == [["wrong_gradient", str(custom)]]
        else:
            assert status.inner_text() == "No problems found" and findings == [], panel.inner_text()
        assert problems.report() == "", problems.report()
        assert root.locator('[data-testid="gv-error"]').is_hidden()
    finally:
        directory = ARTIFACTS / f"torch-zoo-{name}"
        directory.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(directory / "page.png"))
        (directory / "console.txt").write_text("\n".join(problems.console))
        context.close()
