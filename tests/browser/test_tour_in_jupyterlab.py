"""The real widget in JupyterLab: run a notebook, click Step, and check the DOM and the kernel agree.

Needs the built bundle (``npm --prefix labextension run build``), ``/usr/bin/chromium`` and the
test extras (jupyterlab, playwright). Marked ``browser``.
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    READ_CURRENT_JS,
    READ_STATES_JS,
    REPO,
    RUN_COUNT_JS,
    LabServer,
    PageProblems,
    has_run,
    launch_chromium,
    start_lab,
    stop_lab,
)

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

FAKE_TOUR = Path(__file__).resolve().parent / "fake_tour.ipynb"
REAL_TOUR = REPO / "notebooks" / "01_tour.ipynb"
SCREENSHOT = REPO / "docs" / "images" / "widget.png"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored
STEPS = 4

# Prints what the kernel's widgets know, for comparison with the DOM.
KERNEL_CHECK = """\
import json
from ipywidgets.widgets.widget import _instances
from gradviz.widget import DebuggerWidget
print("GVCHECK " + json.dumps([
    {str(k): v for k, v in w.session.node_states().items()}
    for w in _instances.values() if isinstance(w, DebuggerWidget) and w.comm is not None
]))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    notebooks = [FAKE_TOUR] + sorted((REPO / "notebooks").glob("*.ipynb"))
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"), notebooks)
    yield server
    stop_lab(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


class LabSession:
    """One notebook open in JupyterLab, with every problem in the page recorded."""

    def __init__(self, browser: Any, lab: LabServer, notebook: str) -> None:
        self.lab = lab
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.problems = PageProblems()
        self.problems.attach(self.page)
        lab.start_kernel_session(notebook)
        self.page.goto(lab.page_url(notebook))
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="visible")
        self.wait_for_kernel_idle()

    def wait_for_kernel_idle(self) -> None:
        # The execution indicator already says "idle" while the status bar says "No Kernel |
        # Initializing"; a Run All then opens a "Select Kernel" dialog. Wait for both.
        self.page.wait_for_function(
            """() => document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status') === 'idle'
                && [...document.querySelectorAll('.jp-StatusBar-Item')]
                     .some(item => /^(?!No Kernel).+ \\| Idle$/.test((item.textContent ?? '').trim()))"""
        )

    def menu(self, menu: str, item: str) -> None:
        """Click a main-menu entry, e.g. menu("Run", "Run All Cells")."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).click()
        label = self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$"))
        self.page.locator(".lm-Menu-item").filter(has=label).first.click()

    def run_all_cells(self) -> None:
        self.menu("Run", "Run All Cells")

    def widget(self) -> Any:
        """The last debugger widget of the notebook (earlier ones may be finished)."""
        return self.page.locator(".jp-NotebookPanel:visible .gv-root").last

    def states(self) -> dict[str, str]:
        return self.widget().evaluate(READ_STATES_JS)

    def current(self) -> list[str]:
        return self.widget().evaluate(READ_CURRENT_JS)

    def run_cell_at_end(self, source: str, marker: str) -> str:
        """Append a code cell, run it, and return the text of its output line starting with marker."""
        cells = self.page.locator(".jp-Notebook .jp-Cell")
        count = cells.count()
        cells.last.locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("b")
        self.page.wait_for_function(f"() => document.querySelectorAll('.jp-Notebook .jp-Cell').length === {count + 1}")
        self.page.keyboard.press("Enter")
        self.page.keyboard.insert_text(source)
        self.page.keyboard.press("Shift+Enter")
        output = cells.nth(count).locator(".jp-OutputArea-output", has_text=marker)
        output.wait_for()
        for line in output.inner_text().splitlines():
            if line.startswith(marker):
                return line[len(marker) :].strip()
        raise AssertionError(f"no line starting with {marker!r} in {output.inner_text()!r}")

    def log_console_entries(self) -> str:
        """Open JupyterLab's Log Console (View menu) and return the text of its entries.

        Exceptions in widget message handlers show only there (FRONTEND_NOTES pitfall 3). The
        default level (warning) is kept: any entry at all is a problem for these tests.
        """
        self.menu("View", "Show Log Console")
        panel = self.page.locator(".jp-LogConsolePanel").first
        panel.wait_for(state="attached")
        self.page.wait_for_timeout(500)  # entries arrive asynchronously
        return "\n".join(panel.locator(".jp-OutputArea").all_inner_texts()).strip()

    def save_artifacts(self, name: str) -> Path:
        """Screenshot, console and server log of a failed test, in tests/browser/artifacts/."""
        directory = ARTIFACTS / name
        directory.mkdir(parents=True, exist_ok=True)
        try:
            self.page.screenshot(path=str(directory / "page.png"), full_page=True)
        except Exception as exc:  # the page may be gone; the logs still help
            (directory / "screenshot-error.txt").write_text(repr(exc))
        (directory / "console.txt").write_text("\n".join(self.problems.console + [self.problems.report()]))
        (directory / "server.log").write_text(self.lab.log_tail(400))
        return directory

    def close(self) -> None:
        self.context.close()


@contextmanager
def lab_session(browser: Any, lab: LabServer, notebook: str, name: str) -> Iterator[LabSession]:
    """Open a notebook; on failure keep a screenshot and the logs for the report."""
    session = LabSession(browser, lab, notebook)
    try:
        yield session
    except BaseException:
        directory = session.save_artifacts(name)
        print(f"browser test artifacts: {directory}")
        raise
    finally:
        session.close()


def step_through(session: LabSession, steps: int) -> None:
    """Click Step `steps` times; after each click exactly one more node must have run."""
    page = session.page
    step = session.widget().locator('[data-testid="gv-step"]')
    status = session.widget().locator('[data-testid="gv-status"]')
    for _ in range(steps):
        before = session.states()
        before_current = session.current()
        assert len(before_current) == 1, f"one node must be current, got {before_current}"
        assert before[before_current[0]] == "ready", f"the current node must be ready: {before}"
        expected = sum(map(has_run, before.values())) + 1
        step.click()
        page.wait_for_function(RUN_COUNT_JS, arg=[session.widget().element_handle(), expected], timeout=15_000)
        after = session.states()
        changed = {node for node in after if after[node] != before[node]}
        # The node that was current has run; everything else that changed became ready.
        assert has_run(after[before_current[0]]), (before_current, after)
        assert all(after[node] == "ready" for node in changed - set(before_current)), (before, after)
        assert str(expected) in status.inner_text()


def run_all(session: LabSession) -> None:
    """Run All Cells, then wait until every code cell has run and the widgets are drawn."""
    session.run_all_cells()
    # The kernel is briefly idle between cells; the prompts tell when the last one has run.
    session.page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
                 .every(prompt => /^\\[\\d+\\]:$/.test((prompt.textContent ?? '').trim()))"""
    )
    session.page.wait_for_selector(".jp-NotebookPanel .gv-root .gv-node[data-node-id]", state="visible")
    session.wait_for_kernel_idle()


def check_kernel_agrees(session: LabSession) -> None:
    dom = session.states()
    kernel = json.loads(session.run_cell_at_end(KERNEL_CHECK, "GVCHECK "))
    assert dom in kernel, f"the DOM shows {dom}, the kernel's widgets hold {kernel}"


def check_no_problems(session: LabSession) -> None:
    log = session.log_console_entries()
    assert log == "", f"JupyterLab's Log Console shows:\n{log}"
    assert session.problems.report() == "", session.problems.report()
    error_box = session.widget().locator('[data-testid="gv-error"]')
    assert error_box.is_hidden(), error_box.inner_text()


def test_fake_session_tour(browser: Any, lab: LabServer) -> None:
    with lab_session(browser, lab, FAKE_TOUR.name, "fake_tour") as session:
        run_all(session)
        states = session.states()
        # The notebook's last cell stepped once from Python: the widget shows it.
        assert sum(map(has_run, states.values())) == 1, states
        assert session.widget().get_attribute("data-layout-site") in ("worker", "cache"), "layout must run in the worker"
        step_through(session, STEPS)
        check_kernel_agrees(session)
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


def test_log_console_check_sees_handler_errors(browser: Any, lab: LabServer) -> None:
    """The Log Console check above is not vacuous: an exception in a widget message handler
    (invisible in the notebook) is found there."""
    with lab_session(browser, lab, FAKE_TOUR.name, "log_console") as session:
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


@pytest.mark.skipif(not REAL_TOUR.exists(), reason="notebooks/01_tour.ipynb does not exist yet")
def test_01_tour(browser: Any, lab: LabServer) -> None:
    with lab_session(browser, lab, REAL_TOUR.name, "01_tour") as session:
        run_all(session)
        steps = min(STEPS, sum(state == "pending" for state in session.states().values()))
        step_through(session, steps)
        check_kernel_agrees(session)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        session.widget().screenshot(path=str(SCREENSHOT))  # for the README
        check_no_problems(session)
