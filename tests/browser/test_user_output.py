"""What user code prints during a button click shows in the widget's output panel, an error
lists the user's frames first, and Run to selected never flashes "Paused at breakpoint": in
JupyterLab and in Notebook 7. Marked ``browser``; needs what test_tour_in_jupyterlab.py needs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    RUN_COUNT_JS,
    LabServer,
    browser,  # noqa: F401  (the module-scoped fixture)
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
)

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
        session.page.wait_for_selector(f'.gv-root [data-testid=gv-inspector]:not([hidden]) .gv-inspector-id[data-node-id="{chatty}"]')
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


LIVE_CELL = (
    "import json\n"
    "from gradviz.widget import display_session\n"
    "from gradviz.widget._widget import json_safe\n"
    "w = torch.tensor([1.0, 2.0], requires_grad=True)\n"
    "w.grad = torch.tensor([2.0, 4.0])\n"
    "h = w * torch.tensor([3.0, -1.0])\n"
    "hook = h.register_hook(lambda grad: grad * 10)\n"
    "live = torch.debug.backward((Chatty.apply(h).exp() + w).sum())\n"
    "view = display_session(live)\n"
    "gvlog = {}\n"
    "remember = lambda *_: view.selected is None or gvlog.__setitem__("
    "f'{len(live.events)}:{view.selected}', json_safe(live.node(view.selected)))\n"
    "listener = live.add_listener(remember)\n"
    "view.observe(remember, names=['inspection'])\n"
    "print('GVREADY', len(live.events))\n"
)


def test_a_live_session_stepped_event_by_event_shows_node_at_each_event(browser: Any, server: LabServer) -> None:
    """Step event through a live pass; after each event, select the event's node by clicking it
    in the event history, and compare the inspector's tables with what ``session.node()``
    returned for that node at that moment (the kernel logs it from a session listener)."""
    from test_inspector_fidelity import READ_TABLES_JS, expected_tables

    app = server.app  # type: ignore[attr-defined]
    with notebook_session(browser, server, NOTEBOOK.name, f"live-fidelity-{app}", app=app) as session:
        run_all(session)
        session.run_cell_at_end(LIVE_CELL, "GVREADY")
        session.page.wait_for_function(
            "() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .gv-root').length === 2")
        widget = session.widget()
        widget.locator(".gv-node[data-node-id]").first.wait_for(state="visible")
        widget.locator('[data-testid="gv-history-toggle"]').click()
        history = widget.locator('[data-testid="gv-history"]')
        inspector = widget.locator('[data-testid="gv-inspector"]')
        shown: list[tuple[int, str, Any]] = []
        selected: str | None = None
        for _ in range(60):
            step_event = widget.locator('[data-testid="gv-step-event"]')
            if step_event.is_disabled():
                break
            before = history.locator(".gv-history-current").get_attribute("data-index")
            step_event.click()
            session.page.wait_for_function(
                "([panel, before]) => panel.querySelector('.gv-history-current')?.dataset.index !== before",
                arg=[history.element_handle(), before], timeout=15_000)
            current = history.locator(".gv-history-current")
            index = int(current.get_attribute("data-index"))
            node = current.get_attribute("data-node")
            current.click()  # a live history selects the event's node (nothing for a node-less event)
            if node is not None:
                selected = node
                session.page.wait_for_function(
                    "([panel, id]) => panel.querySelector('.gv-inspector-id')?.dataset.nodeId === id",
                    arg=[inspector.element_handle(), node], timeout=15_000)
            if selected is not None:
                shown.append((index + 1, selected, inspector.evaluate(READ_TABLES_JS)))
        assert len(shown) > 10, shown
        log = json.loads(session.run_cell_at_end("print('GVLOG', json.dumps(gvlog))", "GVLOG"))
        kinds = set()
        for position, node, tables in shown:
            info = log.get(f"{position}:{node}")
            assert info is not None, f"the kernel logged no node({node}) at {position}: {sorted(log)}"
            expected = [[key, rows] for key, rows in expected_tables(info)]
            assert tables == expected, f"after event {position - 1}, node {node} ({info['name']})"
            kinds.update(key for key, _ in tables)
        assert {"buffer", "in", "out", "accumulated", "hook-0"} <= kinds, kinds
        assert session.problems.report() == "", session.problems.report()
