"""A live debug session of a 12-block transformer-style model in JupyterLab and Notebook 7: the
widget opens folded (at most ~150 boxes), a folded box expands, and Step keeps the running node
drawn and highlighted, with no errors in the page or the Log Console. Then long chains (1,000
and 10,000 nodes) stepped live: the view shows the kernel's states after steps and a Continue,
and the Step round trips are printed (bench/README.md). Marked ``browser``."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    browser,  # noqa: F401  (the module-scoped fixture)
    check_no_problems,
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
    write_notebook,
)
from live_scale import chain_notebook, kernel_states, open_session, shown_states, step_times  # noqa: E402

pytestmark = pytest.mark.browser

MODELS = Path(__file__).resolve().parent / "scale_models.py"
SOURCE = (
    "import gradviz as torch\n"
    "from scale_models import transformer_loss\n"
    "loss, model = transformer_loss(12)\n"
    "session = torch.debug.backward(loss, params=model)\n"
    "session"
)


def _notebook(folder: Path) -> Path:
    return write_notebook(folder / "model_scale.ipynb", [SOURCE])


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_a_transformer_session_opens_folded_and_steps(browser: Any, app: str, tmp_path: Path) -> None:
    notebook = _notebook(tmp_path)
    (tmp_path / "server").mkdir()
    server = start_lab(tmp_path / "server", [notebook, MODELS], app=app)
    try:
        with notebook_session(browser, server, notebook.name, f"model-scale-{app}", app=app) as session:
            run_all(session)
            widget = session.widget()
            assert int(widget.get_attribute("data-node-count")) > 800
            assert int(widget.get_attribute("data-box-count")) <= 150
            folded = widget.locator(".gv-node.gv-folded[data-module]")
            assert folded.count() > 0
            # A folded box expands on a double-click (one new, small layout).
            layouts = int(widget.get_attribute("data-layout-count"))
            boxes = int(widget.get_attribute("data-box-count"))
            # (one drawn inside the canvas's visible area, after Fit: a big drawing extends beyond it)
            widget.locator('[data-testid="gv-fit"]').click()
            point = widget.evaluate(
                """root => {
                  const canvas = root.querySelector('[data-testid=gv-canvas]').getBoundingClientRect();
                  for (const box of root.querySelectorAll('.gv-node.gv-folded[data-module] rect.gv-box')) {
                    const r = box.getBoundingClientRect();
                    const x = r.left + r.width / 2, y = r.top + r.height / 2;
                    if (x > canvas.left + 5 && x < canvas.right - 5 && y > canvas.top + 5 && y < canvas.bottom - 5) return [x, y];
                  }
                  return null;
                }""")
            assert point is not None, "no folded box in view"
            session.page.mouse.dblclick(point[0], point[1])
            session.page.wait_for_function(
                "([root, layouts]) => Number(root.dataset.layoutCount) > layouts", arg=[widget.element_handle(), layouts])
            widget.locator(".gv-frame").first.wait_for(state="attached")
            assert int(widget.get_attribute("data-box-count")) > boxes
            # Step: the running node stays drawn and marked.
            step = widget.locator('[data-testid="gv-step"]')
            for _ in range(3):
                status = widget.locator('[data-testid="gv-status"]').inner_text()
                step.click()
                session.page.wait_for_function(
                    "([root, before]) => root.querySelector('[data-testid=gv-status]').textContent !== before",
                    arg=[widget.element_handle(), status])
            widget.locator(".gv-node.gv-current:not(.gv-folded)").first.wait_for(state="visible")
            check_no_problems(session)
    finally:
        stop_lab(server)


@pytest.mark.parametrize("nodes", [1_000, 10_000])
def test_a_long_chain_steps_live_and_shows_the_kernels_states(browser: Any, nodes: int, tmp_path: Path) -> None:
    # Protocol 6: a Step sends only the changed states (a states_delta); after several steps
    # and a Continue the view must show exactly what the kernel holds. Timings are printed
    # for bench/README.md, never asserted.
    notebook = chain_notebook(tmp_path, nodes)
    (tmp_path / "server").mkdir()
    server = start_lab(tmp_path / "server", [notebook, MODELS])
    try:
        with notebook_session(browser, server, notebook.name, f"chain-live-{nodes}") as session:
            opened = open_session(session)
            assert int(session.widget().get_attribute("data-node-count")) == nodes
            measured = step_times(session, 12)
            assert len(measured["times"]) == 12
            times = sorted(measured["times"])
            print(f"\nlive chain {nodes:,}: open {opened:.1f} s, Step round trip median {statistics.median(times):.1f} ms "
                  f"(p90 {times[int(0.9 * (len(times) - 1))]:.1f}), view refresh median "
                  f"{statistics.median(measured['refresh']):.1f} ms")
            _check_shown_states(session, nodes, finished=False)
            status = session.widget().locator('[data-testid="gv-status"]')
            session.widget().locator('[data-testid="gv-continue"]').click()
            status.filter(has_text="Finished").wait_for(timeout=120_000)
            _check_shown_states(session, nodes, finished=True)
            check_no_problems(session)
    finally:
        stop_lab(server)


def _check_shown_states(session: Any, nodes: int, finished: bool) -> None:
    """The drawn node boxes and the status line's count agree with the kernel's states."""
    kernel = kernel_states(session)
    drawn, status = shown_states(session)
    assert drawn, "no single-node box drawn"
    assert drawn == {node: kernel["states"][node] for node in drawn}
    run = kernel["counts"].get("done", 0) + kernel["counts"].get("released", 0)
    assert f"{run} of {nodes} nodes run" in status, (status, kernel["counts"])
    assert (run == nodes) == finished
