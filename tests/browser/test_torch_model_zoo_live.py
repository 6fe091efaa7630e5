"""Two models of tests/browser/torch_model_zoo.py replayed live in JupyterLab, as a user records
them (forward inside ``gradviz.debug.torch_scopes()``, ``gradviz.debug.record_torch(loss,
params=model)``, ``gradviz.debug.replay(trace)``): a 6-layer ``TransformerEncoder`` with a
causal and a key padding mask, and a 2-layer bidirectional ``GRU``. One server serves both
notebooks. In the widget: the graph opens folded with no page, console or Log Console error;
search finds a parameter by its full name; Step runs; after Continue the inspector's ``.grad``
row of the parameter reads what torch's own ``.grad`` gives (computed here, in the test's
process, from the same seeded model and batch), and a click on a folded module lists its
parameters with torch's gradients. Marked ``browser``; needs the built bundle.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_model_zoo  # noqa: E402
from gradviz_browser_harness import (  # noqa: E402
    LabServer,
    browser,  # noqa: F401  (the module-scoped fixture)
    check_no_problems,
    format_number,
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
    write_notebook,
)
from test_torch_model_zoo import READ_ROWS_JS, expected_row  # noqa: E402

pytestmark = pytest.mark.browser

ZOO = Path(__file__).resolve().parent / "torch_model_zoo.py"
#: model -> a module whose box the test clicks
MODELS = {"deep_encoder": "encoder.layers.4.linear1", "gru": "out"}

SOURCE = (
    "import gradviz\n"
    "import torch_model_zoo\n"
    "case = torch_model_zoo.make({name!r})\n"
    "with gradviz.debug.torch_scopes():\n"
    "    loss = case.forward_and_loss()\n"
    "trace = gradviz.debug.record_torch(loss, params=case.model)\n"
    "session = gradviz.debug.replay(trace)\n"
    "session"
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    folder = tmp_path_factory.mktemp("torch-zoo-live")
    notebooks = [write_notebook(folder / f"zoo_{name}.ipynb", [SOURCE.format(name=name)]) for name in MODELS]
    (folder / "server").mkdir()
    server = start_lab(folder / "server", [*notebooks, ZOO])
    yield server
    stop_lab(server)


def parameter_row(name: str, grad: Any) -> list[str]:
    """The module inspector's row of a parameter: name, shape, dtype, min, max, norm, NaN, Inf."""
    flat = grad.reshape(-1)
    return [name, f"[{', '.join(map(str, grad.shape))}]", "float32", format_number(flat.min().item()),
            format_number(flat.max().item()), format_number(flat.double().norm().item()), "0", "0"]


@pytest.mark.parametrize("name", list(MODELS))
def test_a_torch_model_replays_live_with_torchs_gradients(browser: Any, lab: LabServer, name: str) -> None:
    case = torch_model_zoo.make(name)
    case.forward_and_loss().backward()
    grads = {key: parameter.grad for key, parameter in case.model.named_parameters()}
    module = MODELS[name]
    with notebook_session(browser, lab, f"zoo_{name}.ipynb", f"torch-zoo-live-{name}") as session:
        started = time.perf_counter()
        run_all(session)
        print(f"\nlive {name}: Run All to first drawing {time.perf_counter() - started:.1f} s")
        widget = session.widget()
        assert int(widget.get_attribute("data-box-count")) <= 150
        folded = set(widget.locator(".gv-node.gv-folded[data-module], .gv-frame[data-frame-module]").evaluate_all(
            "boxes => boxes.map(box => box.dataset.module ?? box.dataset.frameModule)"))
        assert case.folded <= {path.split(".")[0] for path in folded}, folded

        status = widget.locator('[data-testid="gv-status"]')
        for _ in range(3):
            before = status.inner_text()
            widget.locator('[data-testid="gv-step"]').click()
            session.page.wait_for_function(
                "([root, before]) => root.querySelector('[data-testid=gv-status]').textContent !== before",
                arg=[widget.element_handle(), before])
        widget.locator('[data-testid="gv-continue"]').click()
        status.filter(has_text="Finished").wait_for()

        # Search finds the parameter (opening its module); its .grad row is torch's.
        widget.locator('[data-testid="gv-canvas"]').focus()
        session.page.keyboard.press("/")
        search = widget.locator('[data-testid="gv-search"]')
        search.fill(case.parameter)
        assert widget.locator('[data-testid="gv-search-count"]').inner_text() == "1 hit"
        search.press("Enter")
        hit = widget.locator(".gv-node.gv-selected:not(.gv-folded):not([data-copy])")
        hit.wait_for(state="visible")
        node_id = hit.get_attribute("data-node-id")
        search.press("Escape")
        hit.click()
        inspector = widget.locator('[data-testid="gv-inspector"]')
        inspector.locator(f'.gv-inspector-id[data-node-id="{node_id}"]').wait_for()
        inspector.locator("[data-section=accumulated] tr[data-testid=gv-grad-row]").first.wait_for()
        rows = inspector.evaluate(READ_ROWS_JS, "accumulated")
        assert rows[1] == expected_row("after", grads[case.parameter]), rows

        # A click on a folded module lists its parameters with torch's gradients (the whole
        # drawing in view first; a module drawn open is folded with the toggle of its frame).
        widget.locator('[data-testid="gv-fit"]').click()
        box = widget.locator(f'.gv-node.gv-folded[data-module="{module}"]')
        if box.count() == 0:
            widget.locator(f'.gv-frame[data-frame-module="{module}"] .gv-frame-toggle').click()
            widget.locator('[data-testid="gv-fit"]').click()
        box.click()
        panel = widget.locator('[data-testid="gv-module-inspector"]')
        panel.wait_for(state="visible")
        assert panel.locator('[data-testid="gv-module-name"]').inner_text().startswith(module)
        shown = [[cell.inner_text() for cell in row.locator("td").all()][:8]
                 for row in panel.locator('[data-testid="gv-module-param"]').all()]
        expected = [parameter_row(key, grad) for key, grad in sorted(grads.items()) if key.startswith(module + ".")]
        assert shown == expected, shown
        check_no_problems(session)
