"""Overlays, the module inspector and the diff view in a real browser (protocol 5).

* The diff page (``TraceDiff.to_html``) of a gradviz transformer against its PyTorch twin
  with a seeded difference: the diff panel, the ``difference`` overlay with its legend, a click
  in the panel selecting the node; hostile labels shown as text. No server needed.
* In JupyterLab, a real gradviz model with a module named like markup: the overlay picker
  shows the gradient norm (values compared with PyTorch's), a user overlay with a hostile name,
  the module inspector, the diff widget. Marked ``browser``; needs the built bundle.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "debug"))
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    LabServer,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
    check_no_problems,
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
    write_notebook,
)
from test_module_scopes import twin_traces  # noqa: E402

import gradviz

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="gvPwned=1">'  # no dot: a module name cannot have one
TOP_OF_SCALE = "rgb(253, 231, 37)"  # overlays.ts SEQUENTIAL's last stop, #fde725


def format_value(value: float) -> str:
    """overlays.ts formatValue for the plain values of these tests."""
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    if abs(value) >= 1e5 or (value != 0 and abs(value) < 1e-3):
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{mantissa}e{'+' if int(exponent) >= 0 else '-'}{abs(int(exponent))}"
    text = repr(float(f"{value:.4g}"))
    return text[:-2] if text.endswith(".0") else text


def test_diff_page_colours_the_difference_and_lists_the_nodes(browser: Any, tmp_path: Path) -> None:
    def scale_head(model: Any) -> None:
        with gradviz.no_grad():
            model.head.weight.mul_(1.5)

    trace_a, trace_b = twin_traces("Transformer", seed_bug=scale_head, depth=2)
    result = gradviz.debug.diff(trace_a, trace_b)
    page_path = result.to_html(tmp_path / "diff.html", title=HOSTILE, labels=("gradviz", HOSTILE))
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = PageProblems()
    problems.attach(page)
    try:
        page.goto(page_path.as_uri())
        page.wait_for_selector(".gv-root .gv-node[data-node-id][data-overlay]", state="visible")
        panel = page.locator('[data-testid="gv-diff"]')
        assert HOSTILE in panel.locator('[data-testid="gv-diff-summary"]').inner_text()
        legend = page.locator('[data-testid="gv-overlay-legend"]')
        assert legend.locator('[data-testid="gv-overlay-title"]').inner_text() == "difference"
        assert page.locator('[data-testid="gv-overlay-picker"]').input_value() == "difference"
        painted = set(page.eval_on_selector_all(".gv-node[data-overlay]", "boxes => boxes.map(b => b.dataset.nodeId)"))
        assert painted == {str(pair.a["id"]) for pair in result.pairs}
        # the pair that differs most is drawn in the top colour of the scale
        finite = [pair for pair in result.pairs if pair.max_relative != float("inf")]
        worst = max(finite, key=lambda pair: pair.max_relative)
        fill = page.locator(f'.gv-node[data-node-id="{worst.a["id"]}"] rect.gv-box').first.evaluate("r => getComputedStyle(r).fill")
        assert fill == TOP_OF_SCALE
        # a click on a differing node in the panel selects it
        first = result.differences[0]
        details = panel.locator('[data-testid="gv-diff-differences"]')
        if not details.evaluate("d => d.open"):
            details.locator("summary").click()
        panel.locator(f'[data-testid="gv-diff-differences"] button[data-node-id="{first.a["id"]}"]').click()
        page.wait_for_selector(f'[data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{first.a["id"]}"]')
        assert page.locator("img").count() == 0 and page.evaluate("() => window.gvPwned") is None
        assert problems.report() == "", problems.report()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "diff_page.png"), full_page=True)
    finally:
        context.close()


NOTEBOOK_CELLS = [
    f"HOSTILE = {HOSTILE!r}",
    """import json, numpy as np, torch, gradviz
from gradviz.widget import DebuggerWidget

class Net(gradviz.nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module(HOSTILE, gradviz.nn.Linear(3, 4))
        self.out = gradviz.nn.Linear(4, 2)
    def forward(self, x):
        return self.out(getattr(self, HOSTILE)(x).tanh()).pow(2).sum()

model = Net()
x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
session = gradviz.debug.backward(model(gradviz.tensor(x)), params=model)
ids = [n["id"] for n in session.graph()["nodes"]]
session.overlay(HOSTILE, {node: float(k) for k, node in enumerate(ids)})
widget = DebuggerWidget(session)
widget""",
    """# PyTorch's gradients of the same parameters, for the test to compare with
tensors = {name: torch.tensor(p.detach().numpy(), requires_grad=True) for name, p in model.named_parameters()}
hidden = torch.tanh(torch.from_numpy(x) @ tensors[HOSTILE + ".weight"].T + tensors[HOSTILE + ".bias"])
(hidden @ tensors["out.weight"].T + tensors["out.bias"]).pow(2).sum().backward()
leaves = {n["leaf_name"]: n["id"] for n in session.graph()["nodes"] if "leaf_name" in n}
print("GVEXPECT " + json.dumps({str(leaves[name]): float(t.grad.norm()) for name, t in tensors.items()}))""",
    """# the diff widget: the same pass before and after a fix, inside a scope named like markup
v = gradviz.tensor([1.0, -2.0, 0.5], requires_grad=True)
with gradviz.record() as before:
    with gradviz.debug.scope(HOSTILE):
        (v * v).sum().backward()
with gradviz.record() as after:
    with gradviz.debug.scope(HOSTILE):
        (v * v * 2).sum().backward()
result = gradviz.debug.diff(before, after)
print("GVDIFF " + json.dumps({"differ": [p.a["id"] for p in result.differences], "pairs": [p.a["id"] for p in result.pairs]}))
result.show(labels=("before", "after"))""",
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    source = tmp_path_factory.mktemp("notebooks") / "overlays.ipynb"
    write_notebook(source, NOTEBOOK_CELLS)
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"), [source])
    yield server
    stop_lab(server)


def printed_json(output: Any, tag: str) -> Any:
    """The JSON a cell printed after ``tag``. The output may still be streaming when found, and
    its rendered text may break lines: wait until the tag and a whole JSON object are there."""
    pattern = re.compile(re.escape(tag) + r"\s*(\{.*\})", re.S)
    output.page.wait_for_function(
        "([element, tag]) => { const text = element.innerText; const at = text.indexOf(tag);"
        " return at >= 0 && text.trimEnd().endsWith('}'); }",
        arg=[output.element_handle(), tag])
    match = pattern.search(output.inner_text())
    assert match is not None, f"no {tag} JSON in {output.inner_text()!r}"
    return json.loads(match.group(1))


def test_overlay_picker_legend_and_module_inspector_in_jupyterlab(browser: Any, lab: LabServer) -> None:
    with notebook_session(browser, lab, "overlays.ipynb", "overlays") as session:
        run_all(session)
        widget = session.page.locator(".jp-NotebookPanel:visible .gv-root").first
        picker = widget.locator('[data-testid="gv-overlay-picker"]')
        options = picker.locator("option").all_inner_texts()
        assert f"{HOSTILE} (yours)" in options and "gradient norm" in options
        # a user overlay named like markup: its title is text
        picker.select_option(HOSTILE)
        legend = widget.locator('[data-testid="gv-overlay-legend"]')
        assert legend.locator('[data-testid="gv-overlay-title"]').inner_text() == HOSTILE
        # the gradient norm: requested from the kernel, then filled in as the pass runs
        picker.select_option("grad_norm")
        widget.locator('[data-testid="gv-continue"]').click()
        session.page.wait_for_function(
            "root => root.querySelector('[data-testid=\"gv-status\"]').textContent.startsWith('Finished')",
            arg=widget.element_handle())
        widget.locator('[data-testid="gv-overlay-bar"]').wait_for()
        session.wait_for_kernel_idle()
        norms = printed_json(session.page.locator(".jp-OutputArea-output", has_text="GVEXPECT").first, "GVEXPECT")
        for node, norm in norms.items():
            box = widget.locator(f'.gv-node[data-node-id="{node}"]').first
            assert box.get_attribute("data-overlay") == format_value(norm), (node, norm)
            # the one edge into a parameter's leaf carried its whole gradient
            edge = widget.locator(f'path.gv-edge[data-target="{node}"]')
            assert edge.count() == 1 and edge.get_attribute("data-overlay") == format_value(norm), (node, norm)
        # the module inspector, opened from the kernel (a folded box's click sends the same message)
        session.run_cell_at_end("widget.select_module(HOSTILE); print('GVDONE ok')", "GVDONE ")
        inspector = widget.locator('[data-testid="gv-module-inspector"]')
        inspector.wait_for(state="visible")
        assert inspector.locator('[data-testid="gv-module-name"]').inner_text().startswith(f"{HOSTILE} · Linear")
        rows = inspector.locator('[data-testid="gv-module-param"]')
        assert sorted(row.locator("td").first.inner_text() for row in rows.all()) == [f"{HOSTILE}.bias", f"{HOSTILE}.weight"]
        weight = rows.filter(has_text=f"{HOSTILE}.weight")
        node = weight.get_attribute("data-node-id")
        weight.locator("button").click()
        widget.locator(f'[data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{node}"]').wait_for()
        # the diff widget (the notebook's last): difference overlay, panel, a click selects
        expected = printed_json(session.page.locator(".jp-OutputArea-output", has_text="GVDIFF").first, "GVDIFF")
        diff = session.widget()
        diff.locator(".gv-node[data-overlay]").first.wait_for()
        assert diff.locator('[data-testid="gv-overlay-picker"]').input_value() == "difference"
        painted = set(diff.locator(".gv-node[data-overlay]").evaluate_all("boxes => boxes.map(b => Number(b.dataset.nodeId))"))
        assert painted == set(expected["pairs"])
        panel = diff.locator('[data-testid="gv-diff"]')
        assert panel.locator('[data-testid="gv-diff-summary"]').inner_text().startswith("Comparing before (drawn) with after")
        assert HOSTILE in panel.locator('[data-testid="gv-diff-only-b"]').inner_text()
        first = expected["differ"][0]
        panel.locator(f'[data-testid="gv-diff-differences"] button[data-node-id="{first}"]').click()
        diff.locator(f'[data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{first}"]').wait_for()
        assert session.page.locator(".gv-root img").count() == 0
        assert session.page.evaluate("() => window.gvPwned") is None
        check_no_problems(session)
