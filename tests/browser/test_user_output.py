"""What user code prints during a button click shows in the widget's output panel, an error
lists the user's frames first, and Run to selected never flashes "Paused at breakpoint": in
JupyterLab and in Notebook 7. Marked ``browser``; needs what test_tour_in_jupyterlab.py needs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    LabServer,
    launch_chromium,
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
    RUN_COUNT_JS,
)

import playwright.sync_api as sync_api  # a test dependency: a missing one must fail, not skip
pytestmark = pytest.mark.browser

NOTEBOOK = Path(__file__).resolve().parent / "user_output.ipynb"

# Every text the status line shows, recorded by a MutationObserver (a brief one included).
WATCH_STATUS_JS = """
root => {
  window.__statusTexts = [];
  const status = root.querySelector('[data-testid=gv-status]');
  new MutationObserver(() => window.__statusTexts.push(status.textContent))
    .observe(status, { childList: true, characterData: true, subtree: true });
}
"""


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    lab = start_lab(tmp_path_factory.mktemp(f"user-output-{request.param}"), [NOTEBOOK], app=request.param)
    lab.app = request.param  # type: ignore[attr-defined]
    yield lab
    stop_lab(lab)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def click_and_wait_for_run(session: Any, testid: str, expected_runs: int) -> None:
    widget = session.widget()
    widget.locator(f'[data-testid="{testid}"]').click()
    session.page.wait_for_function(RUN_COUNT_JS, arg=[widget.element_handle(), expected_runs], timeout=15_000)


def test_user_output_errors_and_run_to(browser: Any, server: LabServer) -> None:
    app = server.app  # type: ignore[attr-defined]
    with notebook_session(browser, server, NOTEBOOK.name, f"user-output-{app}", app=app) as session:
        run_all(session)
        widget = session.widget()
        output = widget.locator('[data-testid="gv-output"]')
        assert output.is_hidden(), "no output yet"

        # Run to selected (to Chatty's node, past SumBackward0, MulBackward0 and ExpBackward0):
        # the status never reads "Paused at breakpoint" on the way (Notebook 7 showed "Paused
        # at breakpoint on node #0" for a moment).
        chatty = widget.locator(".gv-node[data-node-id]", has_text="ChattyBackward").first.get_attribute("data-node-id")
        widget.evaluate(WATCH_STATUS_JS)
        widget.locator(f'.gv-node[data-node-id="{chatty}"]').first.click()
        session.page.wait_for_selector(f'.gv-root [data-testid=gv-inspector]:not([hidden]) .gv-inspector-id:text-is("#{chatty}")')
        widget.locator('[data-testid="gv-run-to"]').click()
        session.page.wait_for_function(RUN_COUNT_JS, arg=[widget.element_handle(), 3], timeout=15_000)
        session.page.wait_for_function(
            "id => document.querySelector('.gv-root .gv-node.gv-current')?.dataset.nodeId === id", arg=chatty)
        session.page.wait_for_timeout(300)
        seen = session.page.evaluate("window.__statusTexts")
        assert seen and not [line for line in seen if "breakpoint" in line], seen
        assert output.is_hidden(), "the nodes run so far printed nothing"

        click_and_wait_for_run(session, "gv-step", 4)  # Chatty's backward prints
        output.wait_for(state="visible")
        text = widget.locator('[data-testid="gv-output-text"]')
        assert text.is_visible(), "the panel opens by itself on new output"
        # its gradient is d(2 exp(x²))/d(x²) = 2 exp([1, 4]) (float32)
        assert text.text_content() == "[step]\ninside Chatty.backward, grad = [5.436563968658447, 109.19629669189453]\n"
        assert "(2 lines)" in output.locator("summary").text_content()  # the [step] line and the print

        # A backward that raises, run by Continue: the error box starts with the exception, then
        # the user's frames (the notebook cell), then the full traceback.
        session.run_cell_at_end(
            "y = torch.tensor([1.0, 2.0], requires_grad=True)\n"
            "broken = torch.debug.backward(Broken.apply(y).sum())\n"
            "print('shown-broken')\n"
            "broken", "shown-broken")
        session.page.wait_for_function(
            "() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .gv-root').length === 2")
        broken = session.widget()
        broken.locator(".gv-node[data-node-id]").first.wait_for(state="visible")
        broken.locator('[data-testid="gv-continue"]').click()
        error = broken.locator('[data-testid="gv-error"]')
        error.wait_for(state="visible")
        lines = error.inner_text().splitlines()
        assert lines[0] == "ValueError: raised by the user's backward"
        body = "\n".join(lines)
        mine, full = body.split("Full traceback:", 1)
        assert "In your code (innermost last):" in mine
        assert "raise ValueError(\"raised by the user's backward\")" in mine
        for internal in ("_widget.py", "_session.py", "_task.py", "gradviz_ext"):
            assert internal not in mine, mine
        assert "_widget.py" in full
        assert session.problems.report() == "", session.problems.report()
