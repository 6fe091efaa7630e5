"""gradviz's JupyterLab extension: a saved trace view (``.gvtrace.json``) opens in JupyterLab and
in Notebook 7 without a kernel, and ``trace.view()`` shows as an output; each draws the offline
page's view and steps exactly as a ReplaySession does in Python.

The extension must be installed where ``pip install`` puts it (``scripts/setup.sh`` does), in
``share/jupyter/labextensions/gradviz-jupyterlab/`` of this Python. The model's block, its
attribute and the title are hostile names: they must be shown as text, never as HTML. Marked
``browser``; needs what test_tour_in_jupyterlab.py needs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "widget"))
from gradviz_browser_harness import (  # noqa: E402
    KNOWN_HOST_ERRORS,
    READ_CURRENT_JS,
    READ_STATES_JS,
    LabServer,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
    notebook_session,
    start_lab,
    stop_lab,
)
from test_trace_view import EVIL, model_trace  # noqa: E402

from gradviz.debug import ReplaySession
from gradviz.widget._bundle import LAB_EXTENSION_NAME

pytestmark = pytest.mark.browser

VIEW_FILE = "run.gvtrace.json"
RAW_FILE = "raw.gvtrace.json"
OUTPUT_NOTEBOOK = "trace_view_output.ipynb"
RENDERER = ".jp-GradvizTraceView"
# Records any alert() (the hostile names call it if they ever run as HTML), without blocking.
TRAP = "window.__alerts = []; window.alert = (text) => window.__alerts.push(String(text));"
# What the output notebook runs: the hostile model of tests/widget/test_trace_view.py, displayed.
# The kernel shows the saved file's trace: a trace recorded again in the kernel would number
# its nodes from wherever the kernel's counter stands, not as the test's `trace` does.
OUTPUT_CELL = f"""\
import gradviz
from test_trace_view import EVIL
gradviz.load_trace({VIEW_FILE!r}).view(title=EVIL)
"""


@pytest.fixture(scope="module")
def trace() -> Any:
    return model_trace(EVIL)


@pytest.fixture(scope="module")
def sources(trace: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trace_view_sources")
    trace.save_view(directory / VIEW_FILE, title=EVIL)
    trace.save(directory / RAW_FILE)  # a raw trace under a view's name: the viewer says so
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(OUTPUT_CELL)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(notebook, directory / OUTPUT_NOTEBOOK)
    return directory


@pytest.fixture(scope="module")
def lab(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = start_lab(tmp_path_factory.mktemp("lab"), [sources])
    yield server
    stop_lab(server)


@pytest.fixture(scope="module")
def notebook7(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = start_lab(tmp_path_factory.mktemp("notebook7"), [sources / VIEW_FILE], app="notebook")
    yield server
    stop_lab(server)


def test_the_extension_is_installed_where_pip_puts_it() -> None:
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / LAB_EXTENSION_NAME
    assert (installed / "package.json").is_file(), f"{installed} is missing: run scripts/setup.sh (or pip install .)"


class Viewer:
    """One trace view in the page (a document or an output), found by the renderer's class."""

    def __init__(self, page: Any, root: Any) -> None:
        self.page = page
        self.root = root
        root.locator(".gv-node[data-node-id]").first.wait_for(state="visible", timeout=60_000)

    def position(self) -> int:
        return int(self.root.locator('[data-testid="gv-scrubber"]').input_value())

    def click(self, testid: str) -> None:
        before = self.position()
        self.root.locator(f'[data-testid="{testid}"]').click()
        self.page.wait_for_function(
            "([root, before]) => Number(root.querySelector('[data-testid=gv-scrubber]').value) !== before",
            arg=[self.root.element_handle(), before],
        )

    def check_shows(self, trace: Any, position: int) -> None:
        """The DOM shows what a ReplaySession of the trace shows after `position` events."""
        session = ReplaySession(trace)
        session.seek(position)
        assert self.position() == position
        states = {str(node_id): state for node_id, state in session.node_states().items()}
        assert self.root.locator(".gv-root").evaluate(READ_STATES_JS) == states, f"at position {position}"
        current = [] if session.current is None else [str(session.current)]
        assert self.root.locator(".gv-root").evaluate(READ_CURRENT_JS) == current, f"at position {position}"


def step_and_check(viewer: Viewer, trace: Any, steps: int) -> None:
    """Start, then Step `steps` times and Step back once, each compared with ReplaySession."""
    session = ReplaySession(trace)
    viewer.check_shows(trace, session.position)
    for _ in range(steps):
        viewer.click("gv-step")
        session.step()
        viewer.check_shows(trace, session.position)
    viewer.click("gv-step-back")
    session.step_back()
    viewer.check_shows(trace, session.position)


def check_hostile_names_are_text(page: Any, viewer: Viewer) -> None:
    assert viewer.root.locator(".gv-page-header h1").text_content() == EVIL
    assert page.evaluate("document.querySelectorAll('img[src=x]').length") == 0
    assert page.evaluate("window.__alerts") == []
    # The parameter of the hostile block is named after it, as text, in its box.
    boxes = viewer.root.locator(".gv-node[data-node-id]").all_text_contents()
    assert any(f"0.{EVIL}.weight"[:12] in text for text in boxes), boxes


def open_page(browser: Any, url: str, app: str) -> tuple[Any, Any, PageProblems]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(TRAP)
    page = context.new_page()
    page.set_default_timeout(60_000)
    problems = PageProblems(known=list(KNOWN_HOST_ERRORS.get(app, [])))
    problems.attach(page)
    page.goto(url)
    return context, page, problems


def test_a_saved_view_opens_from_jupyterlabs_file_browser_without_a_kernel(browser: Any, lab: LabServer, trace: Any) -> None:
    context, page, problems = open_page(browser, f"{lab.url}/lab?reset&token={lab.token}", "lab")
    try:
        item = page.locator(".jp-DirListing-item", has_text=VIEW_FILE)
        item.dblclick()
        viewer = Viewer(page, page.locator(f".jp-MainAreaWidget {RENDERER}").first)
        assert page.locator(".lm-TabBar-tab.lm-mod-current", has_text=VIEW_FILE).count() == 1
        step_and_check(viewer, trace, 3)
        check_hostile_names_are_text(page, viewer)
        assert viewer.root.locator('[data-testid="gv-error"]').is_hidden()
        # No kernel was started to show it.
        assert page.evaluate("fetch('/api/kernels').then(r => r.json())") == []
        # A file that is not a trace view opens to a message saying what it is and what to do.
        page.locator(".jp-DirListing-item", has_text=RAW_FILE).dblclick()
        error = page.locator(f".jp-MainAreaWidget:visible {RENDERER} .gv-page-error")
        error.wait_for()
        assert "this is a raw trace (Trace.save)" in error.text_content()
        assert 'trace.save_view("run.gvtrace.json")' in error.text_content()
        assert problems.report() == "", problems.report()
    finally:
        context.close()


def test_a_saved_view_opens_from_notebook7s_file_browser(browser: Any, notebook7: LabServer, trace: Any) -> None:
    # A double click in Notebook 7's tree opens a file that is not a notebook in a new tab, its
    # /edit/ page, with the file type's default viewer.
    context, tree, tree_problems = open_page(browser, f"{notebook7.url}/tree?token={notebook7.token}", "notebook")
    problems = PageProblems(known=list(KNOWN_HOST_ERRORS["notebook"]))
    context.on("page", problems.attach)  # from its first message on
    try:
        with context.expect_page() as opened:
            tree.locator(".jp-DirListing-item", has_text=VIEW_FILE).dblclick()
        page = opened.value
        page.wait_for_load_state()
        assert page.url.split("?")[0] == f"{notebook7.url}/edit/{VIEW_FILE}"
        viewer = Viewer(page, page.locator(RENDERER).first)
        step_and_check(viewer, trace, 2)
        check_hostile_names_are_text(page, viewer)
        assert problems.report() == "", problems.report()
        assert tree_problems.report() == "", tree_problems.report()
    finally:
        context.close()


def test_trace_view_shows_as_an_output_in_jupyterlab(browser: Any, lab: LabServer, trace: Any) -> None:
    with notebook_session(browser, lab, OUTPUT_NOTEBOOK, "trace-view-output", init_script=TRAP) as session:
        session.run_all_cells()
        viewer = Viewer(session.page, session.page.locator(f".jp-OutputArea-child {RENDERER}").first)
        step_and_check(viewer, trace, 2)
        check_hostile_names_are_text(session.page, viewer)
        assert session.log_console_entries() == ""
        assert session.problems.report() == "", session.problems.report()
