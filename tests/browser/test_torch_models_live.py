"""Recorded PyTorch models replayed live in JupyterLab: the ResNet-18, GPT-2-style transformer
and 2-layer LSTM language model of tests/browser/torch_models.py (``torch.nn`` only) are recorded
with ``gradviz.debug.record_torch`` in the kernel and opened with ``gradviz.debug.replay``. In
the widget, the graph opens (folded into the model's modules when it has more nodes than fit)
with no page, console or Log Console error; search finds a parameter by name (e.g.
``layer3.1.conv2.weight``); Step runs one node at a time; and after Continue the inspector shows
that parameter's gradient with the statistics of torch's own ``.grad`` (computed here, in the
test's process, from the same seeded model and batch, dropout masks included). The time from Run
All to the first drawing is printed, never asserted. Marked ``browser``; needs the built bundle.
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
    READ_ACCUMULATED_JS,
    browser,  # noqa: F401  (the module-scoped fixture)
    check_no_problems,
    format_number,
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
    write_notebook,
)

pytestmark = pytest.mark.browser

MODELS = Path(__file__).resolve().parent / "torch_models.py"
MAX_FIRST_VIEW = 150

SOURCE = (
    "import gradviz\n"
    "import torch_models\n"
    "model, forward_and_loss = torch_models.make({name!r})\n"
    "with gradviz.debug.torch_scopes():\n"
    "    loss = forward_and_loss()\n"
    "trace = gradviz.debug.record_torch(loss, params=model)\n"
    "session = gradviz.debug.replay(trace)\n"
    "session"
)

def _notebook(folder: Path, name: str) -> Path:
    return write_notebook(folder / f"torch_{name}.ipynb", [SOURCE.format(name=name)])


@pytest.mark.parametrize("name", torch_models.NAMES)
def test_a_recorded_torch_model_replays_live_folded_searchable_steppable_with_torch_grads(
    browser: Any, tmp_path: Path, name: str
) -> None:
    modules, parameter = torch_models.CHECKS[name]
    model, forward_and_loss = torch_models.make(name)
    forward_and_loss().backward()
    grad = dict(model.named_parameters())[parameter].grad
    notebook = _notebook(tmp_path, name)
    (tmp_path / "server").mkdir()
    server = start_lab(tmp_path / "server", [notebook, MODELS])
    try:
        with notebook_session(browser, server, notebook.name, f"torch-{name}-live") as session:
            started = time.perf_counter()
            run_all(session)
            print(f"\nlive {name}: Run All to first drawing {time.perf_counter() - started:.1f} s")
            widget = session.widget()
            nodes = int(widget.get_attribute("data-node-count"))
            boxes = int(widget.get_attribute("data-box-count"))
            folded = set(widget.locator(".gv-node.gv-folded[data-module], .gv-frame[data-frame-module]").evaluate_all(
                "boxes => boxes.map(box => box.dataset.module ?? box.dataset.frameModule)"))
            if nodes <= MAX_FIRST_VIEW:  # a graph this small is drawn whole
                assert boxes == nodes and not folded, (boxes, nodes, folded)
            else:  # folded into the model's modules
                assert boxes <= MAX_FIRST_VIEW, boxes
                assert modules <= {module.split(".")[0] for module in folded}, folded

            # Search finds the parameter by name, opens its module and selects its node.
            widget.locator('[data-testid="gv-canvas"]').focus()
            session.page.keyboard.press("/")
            search = widget.locator('[data-testid="gv-search"]')
            search.fill(parameter)
            assert widget.locator('[data-testid="gv-search-count"]').inner_text() == "1 hit"
            search.press("Enter")
            hit = widget.locator(".gv-node.gv-selected:not(.gv-folded):not([data-copy])")
            hit.wait_for(state="visible")
            assert hit.locator("text.gv-name").text_content().startswith(parameter)
            node_id = hit.get_attribute("data-node-id")
            search.press("Escape")

            # Step runs one node at a time, the running node drawn and marked.
            status = widget.locator('[data-testid="gv-status"]')
            for _ in range(3):
                before = status.inner_text()
                widget.locator('[data-testid="gv-step"]').click()
                session.page.wait_for_function(
                    "([root, before]) => root.querySelector('[data-testid=gv-status]').textContent !== before",
                    arg=[widget.element_handle(), before])
            widget.locator(".gv-node.gv-current:not(.gv-folded)").first.wait_for(state="visible")

            # Continue; the inspector shows the parameter's gradient as torch computes it.
            widget.locator('[data-testid="gv-continue"]').click()
            status.filter(has_text="Finished").wait_for(timeout=120_000)
            search.fill(parameter)
            search.press("Enter")
            node = widget.locator(f'.gv-node.gv-selected[data-node-id="{node_id}"]:not([data-copy])')
            node.wait_for(state="visible")
            search.press("Escape")
            node.click()
            inspector = widget.locator('[data-testid="gv-inspector"]')
            session.page.wait_for_selector(
                f'[data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{node_id}"]')
            after = ["after", f"[{', '.join(map(str, grad.shape))}]", "float32",
                     format_number(grad.min().item()), format_number(grad.max().item())]
            inspector.locator('[data-section=accumulated] tr[data-testid=gv-grad-row]').first.wait_for()
            rows = inspector.evaluate(READ_ACCUMULATED_JS)
            assert after in rows, rows
            check_no_problems(session)
    finally:
        stop_lab(server)
