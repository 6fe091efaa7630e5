"""The real widget in JupyterLab: run a notebook, click Step, and check the DOM and the kernel agree.

Needs the built bundle (``npm --prefix labextension run build``), ``/usr/bin/chromium`` and the
test extras (jupyterlab, playwright). Marked ``browser``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    MEASURE_FIT_JS,
    READABLE_SCALE,
    REPO,
    RUN_COUNT_JS,
    LabServer,
    browser,  # noqa: F401  (the module-scoped fixture)
    check_kernel_agrees,
    check_no_problems,
    has_run,
    notebook_session,
    run_all,
    start_lab,
    step_through,
    stop_lab,
)

pytestmark = pytest.mark.browser

FAKE_TOUR = Path(__file__).resolve().parent / "fake_tour.ipynb"
REAL_TOUR = REPO / "notebooks" / "01_tour.ipynb"
# The README's picture is refreshed only on request (GRADVIZ_UPDATE_SCREENSHOT=1), so a test
# run never dirties a tracked file; otherwise the screenshot goes with the other artifacts.
SCREENSHOT = (REPO / "docs" / "images" / "widget.png"
              if os.environ.get("GRADVIZ_UPDATE_SCREENSHOT") == "1"
              else Path(__file__).resolve().parent / "artifacts" / "01_tour_widget.png")
STEPS = 4


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    sources = [REPO / "notebooks", FAKE_TOUR] if (REPO / "notebooks").is_dir() else [FAKE_TOUR]
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"), sources)
    yield server
    stop_lab(server)


def test_fake_session_tour(browser: Any, lab: LabServer) -> None:
    with notebook_session(browser, lab, FAKE_TOUR.name, "fake_tour") as session:
        run_all(session)
        states = session.states()
        # The notebook's last cell stepped once from Python: the widget shows it.
        assert sum(map(has_run, states.values())) == 1, states
        assert session.widget().get_attribute("data-layout-site") in ("worker", "cache"), "layout must run in the worker"
        step_through(session, STEPS)
        check_kernel_agrees(session)
        check_step_key(session)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        session.widget().screenshot(path=str(ARTIFACTS / "fake_tour_widget.png"))
        # Continue runs to the end and disables the commands.
        session.widget().locator('[data-testid="gv-continue"]').click()
        session.page.wait_for_function(
            "root => root.querySelector('[data-testid=\"gv-status\"]').textContent.startsWith('Finished')",
            arg=session.widget().element_handle(),
        )
        assert all(has_run(state) for state in session.states().values())
        assert session.widget().locator('[data-testid="gv-step"]').is_disabled()
        check_kernel_agrees(session)
        check_no_problems(session)


def check_step_key(session: Any) -> None:
    """`s` steps while the graph has the focus, and only then: in the notebook's command mode
    the letter stays JupyterLab's, and the widget does not move."""
    page = session.page
    widget = session.widget()
    before = session.states()
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
    count = cells.count()
    cells.first.locator(".jp-InputPrompt").click()  # a cell selected, in command mode
    page.keyboard.press("Escape")
    page.keyboard.press("s")
    page.wait_for_timeout(300)  # a step round trip takes about 20 ms
    assert session.states() == before, "s outside the graph stepped the debugger"
    assert cells.count() == count
    canvas = widget.locator('[data-testid="gv-canvas"]')
    canvas.focus()
    expected = sum(map(has_run, before.values())) + 1
    page.keyboard.press("s")
    page.wait_for_function(RUN_COUNT_JS, arg=[widget.element_handle(), expected], timeout=15_000)
    assert canvas.evaluate("element => element === document.activeElement"), "the key moved the focus"
    assert cells.count() == count, "the key reached JupyterLab's command mode"
    check_kernel_agrees(session)


def test_log_console_check_sees_handler_errors(browser: Any, lab: LabServer) -> None:
    """The Log Console check above is not vacuous: an exception in a widget message handler
    (invisible in the notebook) is found there."""
    with notebook_session(browser, lab, FAKE_TOUR.name, "log_console") as session:
        run_all(session)
        session.run_cell_at_end(
            "def broken_handler(widget, content, buffers):\n"
            "    raise ZeroDivisionError('deliberate, from a widget message handler')\n"
            "widget.on_msg(broken_handler)\n"
            "print('GVREADY')",
            "GVREADY",
        )
        session.widget().locator('[data-testid="gv-step"]').click()
        session.page.wait_for_timeout(1000)
        assert "ZeroDivisionError" in session.log_console_entries()


def check_disconnected_at_once(session: Any, reason: str) -> None:
    """The widget says it is disconnected without being clicked: error box, status, buttons off."""
    widget = session.widget()
    error_box = widget.locator('[data-testid="gv-error"]')
    error_box.wait_for(state="visible", timeout=10_000)
    text = error_box.inner_text()
    assert "disconnected" in text and reason in text, text
    assert "no longer live" in text and "Re-run the cell" in text, text
    assert widget.get_attribute("data-disconnected") == "true"
    assert widget.locator('[data-testid="gv-status"]').inner_text().startswith("Disconnected")
    for testid in ("gv-step", "gv-continue"):
        assert widget.locator(f'[data-testid="{testid}"]').is_disabled(), testid
    assert "gv-busy" not in (widget.get_attribute("class") or "")
    # Zoom and Fit still work on the last state shown: they need no kernel.
    assert widget.locator('[data-testid="gv-fit"]').is_enabled()


def test_after_a_kernel_restart_the_widget_says_at_once_that_it_is_disconnected(browser: Any, lab: LabServer) -> None:
    """After Kernel > Restart the widget stays on the page; without any click it must say that
    the kernel is gone (it looked live until a click said "cannot reach the kernel")."""
    with notebook_session(browser, lab, FAKE_TOUR.name, "kernel_restart") as session:
        run_all(session)
        session.menu("Kernel", "Restart Kernel…")
        session.page.locator(".jp-Dialog-button.jp-mod-accept").click()
        session.wait_for_kernel_idle()
        check_disconnected_at_once(session, "restarted")
        assert session.problems.report() == "", session.problems.report()


def test_after_a_kernel_shutdown_the_widget_says_at_once_that_it_is_disconnected(browser: Any, lab: LabServer) -> None:
    """Kernel > Shut Down: ipywidgets does not disconnect the widgets; the kernel's status does."""
    with notebook_session(browser, lab, FAKE_TOUR.name, "kernel_shutdown") as session:
        run_all(session)
        session.menu("Kernel", "Shut Down Kernel")
        dialog = session.page.locator(".jp-Dialog-button.jp-mod-accept")
        if dialog.count() > 0:
            dialog.click()
        check_disconnected_at_once(session, "shut down")
        assert session.problems.report() == "", session.problems.report()


# What a page whose security policy forbids workers looks like to the widget.
NO_WORKERS = """
window.Worker = class {
  constructor() { throw new DOMException("workers are blocked on this page (test)", "SecurityError"); }
};
"""


def test_layout_falls_back_to_the_page_without_workers(browser: Any, lab: LabServer) -> None:
    with notebook_session(browser, lab, FAKE_TOUR.name, "no_workers", init_script=NO_WORKERS) as session:
        run_all(session)
        assert session.widget().get_attribute("data-layout-site") == "page"
        step_through(session, 2)
        # The widget explains the fallback once as a warning, not as an error.
        assert any("laying out on the page instead" in line for line in session.problems.console)
        check_no_problems(session)


def test_01_tour(browser: Any, lab: LabServer) -> None:
    with notebook_session(browser, lab, REAL_TOUR.name, "01_tour") as session:
        run_all(session)
        steps = min(STEPS, sum(state == "pending" for state in session.states().values()))
        assert steps > 0, f"the tour's last widget shows no pending node: {session.states()}"
        step_through(session, steps)
        check_kernel_agrees(session)
        inspect_a_node_that_has_run(session)
        step_one_event(session)
        check_kernel_agrees(session)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        session.widget().screenshot(path=str(SCREENSHOT))  # for the README
        continue_to_the_tours_breakpoint(session)
        open_the_tours_html_page(session)
        check_gradients_of_a_wrong_function(session)
        edges_turn_green_as_their_gradients_arrive(session)
        check_no_problems(session)


def continue_to_the_tours_breakpoint(session: Any) -> None:
    """The tour's breakpoint cell: Continue stops before SquareBackward and the status says why."""
    cell = session.page.locator(".jp-NotebookPanel:visible .jp-Cell").filter(has_text="square_breakpoint = ")
    widget = cell.locator(".gv-root")
    widget.locator(".gv-node[data-node-id]").first.wait_for(state="visible")
    status = widget.locator('[data-testid="gv-status"]')
    assert status.inner_text().startswith("Paused · next: SumBackward0"), status.inner_text()
    # The buttons' tooltips say what they will do, or how to make them work.
    step_title = widget.locator('[data-testid="gv-step"]').get_attribute("title")
    assert step_title.startswith("Run the backward of SumBackward0 #"), step_title
    assert widget.locator('[data-testid="gv-run-to"]').get_attribute("title").startswith("Select a node that has not run")
    widget.locator('[data-testid="gv-continue"]').click()
    session.page.wait_for_function(
        "element => element.textContent.startsWith('Paused at breakpoint on SquareBackward')",
        arg=status.element_handle(), timeout=15_000,
    )
    current = widget.locator(".gv-node.gv-current:not([data-copy]) text.gv-name").all_text_contents()
    assert current == ["SquareBackward"], current


def open_the_tours_html_page(session: Any) -> None:
    """The page the tour writes, opened as a first user would: double-click in the file browser.
    JupyterLab's viewer runs no script until Trust HTML: the page says so (it was blank), then
    draws the pass once trusted."""
    page = session.page
    page.locator(".jp-DirListing-item", has_text="tour_backward.html").dblclick()
    frame = page.frame_locator(".jp-HTMLViewer iframe").last
    frame.locator("main#gradviz-app").wait_for(state="attached", timeout=15_000)
    # (playwright's text selectors skip <noscript>; its rendered text does not)
    assert "scripts are off" in frame.locator("body").inner_text()
    page.locator(".jp-Toolbar-item", has_text="Trust HTML").click()
    frame.locator(".gv-root .gv-node[data-node-id]").first.wait_for(state="visible", timeout=30_000)
    assert frame.locator('[data-testid="gv-status"]').inner_text().startswith("Paused")
    # Chromium reports the untrusted load's blocked script; that is JupyterLab's sandbox at work.
    session.problems.console_errors = [
        error for error in session.problems.console_errors
        if not ("Blocked script execution" in error and "sandboxed" in error)
    ]
    page.locator(".lm-TabBar-tab", has_text="01_tour.ipynb").click()
    page.locator(".jp-NotebookPanel:visible").wait_for()


def inspect_a_node_that_has_run(session: Any) -> None:
    """Click a node: it is highlighted, and the inspector shows its name and its gradients."""
    widget = session.widget()
    node_id = next(node for node, state in session.states().items() if has_run(state))
    box = widget.locator(f'.gv-node[data-node-id="{node_id}"]:not([data-copy])')
    name = box.locator("text.gv-name").text_content()
    box.click()
    inspector = widget.locator('[data-testid="gv-inspector"]')
    inspector.wait_for(state="visible", timeout=15_000)
    shown = inspector.locator('[data-testid="gv-inspector-name"]').inner_text()
    leaf = inspector.locator('[data-testid="gv-inspector-leaf"]')
    if leaf.count():  # a named leaf: "w · AccumulateGrad" on the box and in the header
        shown = f"{leaf.inner_text()} · {shown}"
    assert shown == name
    assert "gv-selected" in (box.get_attribute("class") or "")
    # The keys work inside JupyterLab: the arrows move the graph's cursor, not the notebook's
    # cell selection, and Escape closes the inspector without leaving the graph.
    cells = session.page.locator(".jp-Notebook .jp-Cell")
    active = cells.evaluate_all("cells => cells.findIndex((cell) => cell.classList.contains('jp-mod-active'))")
    canvas = widget.locator('[data-testid="gv-canvas"]')
    canvas.focus()
    session.page.keyboard.press("ArrowUp")
    session.page.keyboard.press("ArrowDown")
    assert widget.locator(".gv-node.gv-focused").count() >= 1
    assert cells.evaluate_all("cells => cells.findIndex((cell) => cell.classList.contains('jp-mod-active'))") == active
    session.page.keyboard.press("Escape")
    inspector.wait_for(state="hidden", timeout=15_000)
    assert canvas.evaluate("element => element === document.activeElement")
    box.click()
    inspector.wait_for(state="visible", timeout=15_000)
    rows = inspector.locator('[data-section="in"] [data-testid="gv-grad-row"]')
    assert rows.count() >= 1, inspector.inner_text()
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[1].startswith("[") and cells[2].startswith("float"), cells  # shape, dtype
    # Run to selected is offered (a live session) but disabled: the node has already run.
    run_to = widget.locator('[data-testid="gv-run-to"]')
    assert run_to.is_disabled()
    assert "has already run" in run_to.get_attribute("title")


# Appended to the tour: the tour's Square with the sign of its backward flipped, in a new session.
WRONG_FUNCTION_CELL = """\
class FlippedSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return -grad_output * 2 * x   # wrong: the sign is flipped

flipped = torch.debug.backward(FlippedSquare.apply(torch.tanh(x * w + b)).sum())
display(flipped)
print("GVFLIPPED", *[(n["id"], n["number"]) for n in flipped.graph()["nodes"] if n["name"] == "FlippedSquareBackward"][0])
"""


def check_gradients_of_a_wrong_function(session: Any) -> None:
    """Check gradients in the browser: the panel names the wrong Function and the node is marked."""
    node_id, number = session.run_cell_at_end(WRONG_FUNCTION_CELL, "GVFLIPPED ").split()
    widget = session.widget()  # the new session's widget is now the last one
    widget.locator(f'.gv-node[data-node-id="{node_id}"]').first.wait_for(state="visible", timeout=30_000)
    panel = widget.locator('[data-testid="gv-doctor"]')
    assert panel.is_hidden(), "no panel before the first check"
    button = widget.locator('[data-testid="gv-check-gradients"]')
    assert button.is_visible() and button.is_enabled()
    button.click()
    row = panel.locator('[data-testid="gv-finding-row"]')
    row.first.wait_for(state="visible", timeout=30_000)
    assert panel.get_attribute("data-tone") == "problems"
    assert panel.locator('[data-testid="gv-doctor-status"]').inner_text() == "1 problem found"
    assert row.count() == 1
    assert row.get_attribute("data-kind") == "wrong_gradient" and row.get_attribute("data-node-id") == node_id
    cells = row.locator("td").all_inner_texts()
    assert cells[:4] == ["wrong gradient", "FlippedSquare", f"FlippedSquareBackward #{number}", "0"], cells
    assert " vs " in cells[6], cells  # worst entries: analytic vs numeric
    assert "sign flipped?" in panel.locator(".gv-finding-message").first.inner_text()
    box = widget.locator(f'.gv-node[data-node-id="{node_id}"]:not([data-copy])')
    assert "gv-finding-error" in (box.get_attribute("class") or "")
    assert widget.locator(".gv-node.gv-finding").count() == 1, "only the wrong Function's node is marked"
    assert button.is_enabled(), "the check is over"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    widget.screenshot(path=str(ARTIFACTS / "check_gradients_widget.png"))
    # A click on the finding selects its node in the inspector.
    row.click()
    inspector = widget.locator('[data-testid="gv-inspector"]')
    inspector.wait_for(state="visible", timeout=15_000)
    name = inspector.locator('[data-testid="gv-inspector-name"]')
    assert name.inner_text() == "FlippedSquareBackward"
    # So does the keyboard: Tab to the finding, Enter (JupyterLab must not take it to edit the cell).
    widget.locator('[data-testid="gv-inspector-close"]').click()
    inspector.wait_for(state="hidden", timeout=15_000)
    row.focus()
    session.page.keyboard.press("Enter")
    inspector.wait_for(state="visible", timeout=15_000)
    assert name.inner_text() == "FlippedSquareBackward"
    assert session.page.locator(".jp-Notebook .jp-Cell.jp-mod-active .jp-InputArea-editor.jp-mod-focused").count() == 0
    check_fits_at_normal_and_narrow_widths(session, widget)


# Where the widget's parts are, to tell whether anything is cut or split at the page's width.
READ_FIT_JS = """
root => {
  const box = (element) => element.getBoundingClientRect();
  const right = box(root).right + 0.5;
  const shown = (element) => element.offsetParent !== null;
  const status = root.querySelector('[data-testid=gv-status]');
  const doctor = root.querySelector('[data-testid=gv-doctor]');
  const scrollers = [...root.querySelectorAll('[data-testid=gv-inspector] .gv-grads-scroll')];
  return {
    width: box(root).width,
    zoomTops: [...root.querySelectorAll('[data-testid=gv-zoom] button')].map((button) => Math.round(box(button).top)),
    statusCut: status.scrollHeight > status.clientHeight + 1 || box(status).right > right,
    statusLines: status.clientHeight / parseFloat(getComputedStyle(status).lineHeight),
    statusText: status.textContent,
    statusTitle: status.title,
    commandTops: [...root.querySelectorAll('.gv-toolbar > button')].filter(shown).map((button) => Math.round(box(button).top)),
    cut: [...root.querySelectorAll('.gv-toolbar button, .gv-status, .gv-narration, .gv-doctor, .gv-findings, .gv-inspector, .gv-legend-item')]
      .filter((element) => shown(element) && box(element).right > right)
      .map((element) => element.dataset.testid || element.className),
    doctorSideways: doctor.scrollWidth > doctor.clientWidth + 1,
    findingCells: [...doctor.querySelectorAll('[data-testid=gv-finding-row] td')].map((cell) => getComputedStyle(cell).display),
    tables: scrollers.map((scroller) => ({
      sideways: scroller.scrollWidth > scroller.clientWidth + 1,
      scrolls: getComputedStyle(scroller).overflowX === 'auto',
    })),
  };
}
"""


def check_fits_at_normal_and_narrow_widths(session: Any, widget: Any) -> None:
    """At 1280 x 800 and at 700 px (JupyterLab's file browser open): nothing of the widget is cut
    at its right edge, the zoom buttons stay on one line, the status is one line whose tooltip
    holds it whole (cut with an ellipsis when it has less room); at 1280 the command buttons
    stay on one line, the
    inspector's gradient tables fit without scrolling sideways, and at 700 they scroll inside their
    own box while the findings of Check gradients stack into lines. (At 1280 the zoom buttons
    were split over two lines, the status ended in "…" before the progress, and the gradient
    tables ran off the panel; at 700 the findings table was cut and broke names letter by letter.)"""
    page = session.page
    # A node with gradient tables: step once, inspect the node that ran.
    widget.locator('[data-testid="gv-step"]').click()
    done = widget.locator(".gv-node.gv-state-done:not([data-copy]), .gv-node.gv-state-released:not([data-copy])").first
    done.wait_for(state="attached", timeout=15_000)
    done.click()
    widget.locator('[data-testid="gv-inspector"] [data-section="out"] [data-testid="gv-grad-row"]').first.wait_for(state="visible")
    try:
        for width, height in ((1280, 800), (700, 800)):
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(300)  # JupyterLab lays the notebook out again
            seen = widget.evaluate(READ_FIT_JS)
            widget.screenshot(path=str(ARTIFACTS / f"widget_at_{width}.png"))
            assert seen["cut"] == [], seen
            assert len(set(seen["zoomTops"])) == 1, f"the zoom buttons are split over lines: {seen}"
            assert not seen["statusCut"] and "nodes run" in seen["statusText"], seen
            assert seen["statusLines"] < 1.5 and seen["statusTitle"] == seen["statusText"], seen
            assert seen["tables"] and all(table["scrolls"] for table in seen["tables"]), seen
            assert not seen["doctorSideways"], seen
            if width == 1280:
                assert not any(table["sideways"] for table in seen["tables"]), seen
                assert len(set(seen["commandTops"])) == 1, f"the command buttons wrap: {seen}"
            else:
                assert seen["width"] < 560, seen  # the narrow layout is what is tested
                assert set(seen["findingCells"]) == {"block"}, seen
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


EDGES_CELL = """\
xe = torch.tensor([1.0, 2.0], requires_grad=True)
edges = torch.debug.backward((xe * 3.0).exp().sum())
display(edges)
print("GVEDGES", edges.current)
"""


def edges_turn_green_as_their_gradients_arrive(session: Any) -> None:
    """Step event through the first node: after its node_finished the node is done but its
    edge is still grey (the gradient is on the way); the next event, buffer_added, greens it."""
    root = session.run_cell_at_end(EDGES_CELL, "GVEDGES ")
    widget = session.widget()
    box = widget.locator(f'.gv-node[data-node-id="{root}"]:not([data-copy])')
    box.wait_for(state="visible", timeout=30_000)
    edge = widget.locator(f'path.gv-edge[data-source="{root}"]')
    narration = widget.locator('[data-testid="gv-narration"]')

    def step_event() -> str:
        seq = narration.get_attribute("data-seq")
        widget.locator('[data-testid="gv-step-event"]').click()
        session.page.wait_for_function(
            "([element, seq]) => element.dataset.seq !== seq", arg=[narration.element_handle(), seq], timeout=15_000
        )
        return narration.locator('[data-testid="gv-narration-text"]').inner_text()

    assert edge.count() == 1 and "gv-edge-delivered" not in edge.get_attribute("class")
    step_event()  # node_started
    finished = step_event()
    assert "finished" in finished, finished
    assert box.get_attribute("data-state") == "done"
    assert "gv-edge-delivered" not in edge.get_attribute("class"), "the edge is green before its buffer_added"
    arrived = step_event()
    assert "gv-edge-delivered" in edge.get_attribute("class"), f"after {arrived!r} the edge is still grey"


def step_one_event(session: Any) -> None:
    """Step event shows one more engine decision: the narration line changes."""
    widget = session.widget()
    narration = widget.locator('[data-testid="gv-narration"]')
    before = narration.inner_text()
    seq = narration.get_attribute("data-seq")
    assert before.strip() != "", "the narration shows the latest event"
    widget.locator('[data-testid="gv-step-event"]').click()
    session.page.wait_for_function(
        "([element, seq]) => element.dataset.seq !== seq", arg=[narration.element_handle(), seq], timeout=15_000
    )
    assert narration.inner_text() != before
    # A live session cannot go back in time, so Step back is not offered.
    assert widget.locator('[data-testid="gv-step-back"]').is_hidden()


# Every cell of the inspector's gradient tables: its column, box, alignment, clipping, tooltip.
READ_GRAD_CELLS_JS = """
inspector => [...inspector.querySelectorAll('table.gv-grads')].map(table =>
  [...table.querySelectorAll('tr')].map(row => [...row.children].map(cell => {
    const box = cell.getBoundingClientRect();
    return {
      text: cell.textContent, title: cell.title, header: cell.tagName === 'TH',
      left: box.left, right: box.right, align: getComputedStyle(cell).textAlign,
      clipped: cell.scrollWidth > cell.clientWidth + 1,
    };
  })))
"""

INSPECTOR_CELL = """
import gradviz
import gradviz.debug
from gradviz.widget import display_session
weights_with_a_long_name = gradviz.full((2, 3, 4, 5, 6, 1), -123456.7, requires_grad=True)
inputs = gradviz.full((2, 3, 4, 5, 6, 1), -2.5e-7)
inspected = gradviz.debug.backward((weights_with_a_long_name * inputs).sum())
inspected.continue_()
inspected_view = display_session(inspected)
print('GVMUL', next(n['id'] for n in inspected.graph()['nodes'] if n['name'] == 'MulBackward0'))
"""


def test_inspector_columns_line_up_across_sections(browser: Any, lab: LabServer) -> None:
    """The inspector's tables (Gradients in, Gradients out) share fixed column widths, numbers
    are right-aligned, and a cell too long for its column ends in "…" with the whole text in
    its tooltip, while the first values wrap (they were unaligned and ran off to the right)."""
    with notebook_session(browser, lab, FAKE_TOUR.name, "inspector_columns") as session:
        run_all(session)
        node = session.run_cell_at_end(INSPECTOR_CELL, "GVMUL")
        widget = session.widget()
        widget.locator(f'.gv-node[data-node-id="{node}"]').first.wait_for(state="visible")
        widget.locator(f'.gv-node[data-node-id="{node}"]').first.click()
        inspector = widget.locator('[data-testid="gv-inspector"]')
        inspector.locator('[data-section="out"] [data-testid="gv-grad-row"]').first.wait_for(state="visible")
        tables = inspector.evaluate(READ_GRAD_CELLS_JS)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        inspector.screenshot(path=str(ARTIFACTS / "inspector_columns.png"))
        rows = [row for table in tables for row in table]
        assert len(tables) >= 2 and len(rows) >= 5, tables
        headers = [cell["text"] for cell in tables[0][0]]
        assert headers == ["", "shape", "dtype", "min", "max", "mean", "norm", "NaN", "Inf", "values"], headers
        numeric = {"min", "max", "mean", "norm", "NaN", "Inf"}
        for index, name in enumerate(headers):
            column = [row[index] for row in rows]
            lefts = {round(cell["left"]) for cell in column}
            rights = {round(cell["right"]) for cell in column}
            assert max(lefts) - min(lefts) <= 1 and max(rights) - min(rights) <= 1, f"column {name!r} moves: {lefts} {rights}"
            for cell in column:
                assert cell["align"] == ("right" if name in numeric else "left"), (name, cell)
                if name == "values":
                    assert not cell["clipped"], f"the values must wrap, not be cut: {cell}"
                elif cell["clipped"]:
                    assert cell["title"] == cell["text"], f"a cut cell without its text in a tooltip: {cell}"
        # The statistics of these gradients fit their columns; the 6-d shapes do not, and say so.
        cells = [row for row in rows if not row[0]["header"]]
        assert not any(row[index]["clipped"] for row in cells for index, name in enumerate(headers) if name in numeric)
        shapes = [row[1] for row in cells if row[1]["text"] == "[2, 3, 4, 5, 6, 1]"]
        assert shapes and all(cell["clipped"] and cell["title"] == "[2, 3, 4, 5, 6, 1]" for cell in shapes), rows
        check_no_problems(session)


TALL_CELL = """
import gradviz
import gradviz.debug
from gradviz.widget import display_session
chained = gradviz.tensor([1.0, 2.0, 3.0], requires_grad=True)
value = chained
for step in range(60):
    value = (value * 1.01).sin() if step % 2 else value * 1.01
tall = gradviz.debug.backward(value.sum())
display_session(tall)
print('GVTALL', len(tall.graph()['nodes']))
"""


def test_a_tall_graph_in_a_notebook_is_folded_and_fits_readably(browser: Any, lab: LabServer) -> None:
    """A chain of 60 operations in JupyterLab: both views (the second laid out from the cache,
    before JupyterLab attaches it) fold the drawing into columns, and Fit shows it whole with
    boxes at READABLE_SCALE or more."""
    with notebook_session(browser, lab, FAKE_TOUR.name, "tall_graph") as session:
        run_all(session)
        count = int(session.run_cell_at_end(TALL_CELL, "GVTALL"))
        drawn = f"root => root.querySelectorAll('.gv-node[data-node-id]:not([data-copy])').length === {count}"
        notebook = session.page.locator(".jp-NotebookPanel:visible")
        first = notebook.locator(".jp-Cell").filter(has_text="GVTALL").locator(".gv-root")
        session.page.wait_for_function(drawn, arg=first.element_handle())
        # A second view of the same widget, in a later cell: its layout comes from the cache.
        session.run_cell_at_end("display_session(tall)\nprint('GVAGAIN')", "GVAGAIN")
        second = notebook.locator(".jp-Cell").filter(has_text="GVAGAIN").locator(".gv-root")
        session.page.wait_for_function(drawn, arg=second.element_handle())
        assert second.get_attribute("data-layout-site") == "cache"
        views = [first, second]
        for index, view in enumerate(views):
            assert int(view.get_attribute("data-columns")) > 1, f"view {index} was not folded"
            view.locator('[data-testid="gv-zoom-in"]').click()
            view.locator('[data-testid="gv-fit"]').click()
            seen = view.evaluate(MEASURE_FIT_JS)
            left, top, right, bottom = seen["canvas"]
            d_left, d_top, d_right, d_bottom = seen["drawing"]
            assert left - 0.5 <= d_left and d_right <= right + 0.5 and top - 0.5 <= d_top and d_bottom <= bottom + 0.5, seen
            assert seen["scale"] >= READABLE_SCALE - 1e-6, seen
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        second.screenshot(path=str(ARTIFACTS / "tall_graph_in_jupyterlab.png"))
        check_no_problems(session)


# A model whose first layer is cut off upstream (Note [Modules cut off upstream] in
# gradviz/debug/_model_checks.py): a debug session of it, and the same model recorded into an
# offline HTML page that carries the doctor's report.
CUT_LAYER_CELL = """
import tempfile, os
import gradviz as torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = torch.nn.Linear(3, 4)
        self.layer2 = torch.nn.Linear(4, 1)

    def forward(self, x):
        h = self.layer1(x).detach()   # the bug: layer1 gets no gradient
        return self.layer2(torch.tanh(h))

torch.manual_seed(0)
net, x = Net(), torch.ones(2, 3)
model_session = torch.debug.backward(net(x).pow(2).mean(), params=net)
display(model_session)
with torch.record() as model_trace:
    model_loss = net(x).pow(2).mean()
    model_report = torch.debug.doctor(model_loss, params=net)   # before backward()
    model_loss.backward()
model_page = model_trace.to_html(os.path.join(tempfile.mkdtemp(), "model.html"), doctor=model_report)
cut = [n["id"] for n in model_session.graph()["nodes"] if n["name"] == "AddmmBackward0"]
print("GVMODEL", cut[0], model_report.to_dict()["findings"][0]["node"], model_page)
"""


def check_the_cut_layer(root: Any, button: Any, node_id: str) -> None:
    """Check gradients on the model: two no_gradient findings, layer1's parameters named, the
    node where the graph resumes past the cut marked, a click on a finding selecting it."""
    panel = root.locator('[data-testid="gv-doctor"]')
    assert panel.is_hidden(), "no panel before the first check"
    assert button.is_enabled()
    button.click()
    row = panel.locator('[data-testid="gv-finding-row"]')
    row.first.wait_for(state="visible", timeout=30_000)
    assert panel.locator('[data-testid="gv-doctor-status"]').inner_text() == "2 problems found"
    assert [row.nth(i).get_attribute("data-kind") for i in range(row.count())] == ["no_gradient"] * 2
    assert {row.nth(i).get_attribute("data-node-id") for i in range(row.count())} == {node_id}
    params = panel.locator('[data-testid="gv-finding-params"]').all_inner_texts()
    assert params == ["parameters: layer1.weight", "parameters: layer1.bias"], params
    message = panel.locator(".gv-finding-message").first.inner_text()
    assert "layer1 (Linear) ran in this forward" in message and "fix: keep layer1's output in the graph" in message
    box = root.locator(f'.gv-node[data-node-id="{node_id}"]:not([data-copy])')
    assert "gv-finding-error" in (box.get_attribute("class") or "")
    assert root.locator(".gv-node.gv-finding:not([data-copy])").count() == 1, "only the node past the cut"
    row.first.click()
    inspector = root.locator('[data-testid="gv-inspector"]')
    inspector.wait_for(state="visible", timeout=15_000)
    assert inspector.locator('[data-testid="gv-inspector-name"]').inner_text() == "AddmmBackward0"


def test_check_gradients_names_a_layer_cut_off_upstream_here_and_on_the_page(browser: Any, lab: LabServer) -> None:
    with notebook_session(browser, lab, FAKE_TOUR.name, "cut_layer") as session:
        run_all(session)
        node_id, page_node_id, page_path = session.run_cell_at_end(CUT_LAYER_CELL, "GVMODEL ").split(maxsplit=2)
        widget = session.widget()
        widget.locator(f'.gv-node[data-node-id="{node_id}"]').first.wait_for(state="visible", timeout=30_000)
        check_the_cut_layer(widget, widget.locator('[data-testid="gv-check-gradients"]'), node_id)
        check_no_problems(session)
    # The offline page of the same model, recorded with the doctor's report: the same answer.
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(Path(page_path).as_uri())
        root = page.locator(".gv-root")
        root.locator(".gv-node[data-node-id]").first.wait_for(state="visible")
        check_the_cut_layer(root, page.locator('[data-testid="gv-check-gradients"]'), page_node_id)
    finally:
        context.close()
