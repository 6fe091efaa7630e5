"""Drive the real widget: a private JupyterLab server and headless Chromium (playwright).

Everything here follows docs/frontend_notes.md: the system Chromium with fixed flags (never
``playwright install``), a server bound to 127.0.0.1 with a random port and token and
temporary config/settings/runtime dirs, stopped by its PID; page errors, console errors and
tracebacks in JupyterLab's Log Console all count as failures (pitfall 3).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Settings for the private server: no news or update checks (this machine has no internet,
# and a failed fetch is a console error that would hide real ones).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


# Errors that the host application raises on its own, before any gradviz code runs, with the
# reason each is tolerated. Everything else in the console fails the test.
KNOWN_HOST_ERRORS: dict[str, list[tuple[re.Pattern[str], str]]] = {
    "notebook": [
        (
            re.compile(r"Cannot read properties of undefined \(reading 'schema'\)[\s\S]*notebook_core"),
            "Notebook 7.6.5's shortcuts settings plugin reads the schema of a plugin it has not loaded, "
            "on every page load, with no notebook code run yet",
        ),
    ],
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LabServer:
    url: str
    token: str
    root: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def page_url(self, path: str, app: str = "lab", workspace: str | None = None) -> str:
        """The URL that opens a notebook. In JupyterLab, a workspace of its own (reset) keeps
        tabs that earlier tests opened from coming back."""
        if app != "lab":
            return f"{self.url}/notebooks/{path}?token={self.token}"
        workspace = workspace or secrets.token_hex(6)
        return f"{self.url}/lab/workspaces/{workspace}/tree/{path}?reset&token={self.token}"

    def start_kernel_session(self, path: str, kernel: str = "python3") -> None:
        """Start the notebook's kernel through the REST API before the page opens it.

        JupyterLab 4.6 then attaches to the running session instead of asking with a
        "Select Kernel" dialog (and autoStartDefaultKernel raced, starting two kernels).
        """
        body = json.dumps({"path": path, "name": path, "type": "notebook", "kernel": {"name": kernel}}).encode()
        request = urllib.request.Request(
            f"{self.url}/api/sessions",
            data=body,
            method="POST",
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            if answer.status not in (200, 201):
                raise RuntimeError(f"could not start a kernel for {path}: HTTP {answer.status}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def start_lab(workdir: Path, sources: list[Path], app: str = "lab", timeout: float = 90.0) -> LabServer:
    """Start ``jupyter lab`` (or ``jupyter notebook``) serving a temporary copy of ``sources``
    (files, and directories whose contents are copied, e.g. notebooks/ with its data files)."""
    root = workdir / "root"
    root.mkdir()
    for source in sources:
        if source.is_dir():
            shutil.copytree(source, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        else:
            shutil.copy2(source, root / source.name)
    dirs = {name: workdir / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython")}
    for directory in dirs.values():
        directory.mkdir()
    for relative, values in (LAB_SETTINGS.items() if app == "lab" else ()):
        target = dirs["settings"] / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    python_path = [str(REPO), str(REPO / "tests" / "widget")]
    if os.environ.get("PYTHONPATH"):
        python_path.append(os.environ["PYTHONPATH"])
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        IPYTHONDIR=str(dirs["ipython"]),
        PYTHONPATH=os.pathsep.join(python_path),
        JUPYTER_PLATFORM_DIRS="1",
    )
    port = free_port()
    token = secrets.token_hex(24)
    module = "jupyterlab" if app == "lab" else "notebook"
    command = [
        sys.executable, "-m", module,
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        "--ServerApp.allow_root=True",
        f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    if app == "lab":
        command += [
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        ]
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = LabServer(f"http://127.0.0.1:{port}", token, root, log_path, process)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter {app} exited with {process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}/api/status?token={token}", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            stop_lab(server)
            raise RuntimeError(f"jupyter {app} did not answer within {timeout:.0f} s:\n{server.log_tail()}")
        time.sleep(0.25)


def stop_lab(server: LabServer) -> None:
    """Stop the server by its PID (SIGTERM: it shuts its kernels down), then anything left in its group."""
    process = server.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    try:
        os.killpg(process.pid, signal.SIGKILL)  # kernels it started, should any be left
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class PageProblems:
    """Everything that went wrong in the page: console errors and uncaught exceptions."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)  # every message, for the failure report
    # (pattern, why): errors of the host application itself, each with the reason it is not ours.
    known: list[tuple[re.Pattern[str], str]] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)

    def _is_known(self, text: str) -> bool:
        return any(pattern.search(text) for pattern, _ in self.known)

    def _on_page_error(self, error: Any) -> None:
        text = f"{error.name}: {error.message}\n{error.stack}"
        self.console.append(f"[pageerror] {text}")
        if not self._is_known(text):
            self.page_errors.append(text)

    def _on_console(self, message: Any) -> None:
        self.console.append(f"[{message.type}] {message.text}")
        if message.type == "error" and not self._is_known(message.text):
            location = message.location or {}
            self.console_errors.append(f"{message.text} ({location.get('url', '?')}:{location.get('lineNumber', '?')})")

    def report(self) -> str:
        return "\n".join(
            [f"console error: {text}" for text in self.console_errors] + [f"page error: {text}" for text in self.page_errors]
        )


def launch_chromium(playwright: Any) -> Any:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium (never `playwright install`)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module (import it into the module: ``from gradviz_browser_harness
    import browser``)."""
    import playwright.sync_api as sync_api  # a test dependency: a missing one must fail, not skip

    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


# ---- reading the widget from the DOM ------------------------------------------------------------

def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a notebook of these code cells (no outputs, the Python 3 kernel) to ``path``."""
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{k}", "metadata": {}, "outputs": [], "source": source}
                  for k, source in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))
    return path


#: The rows of the inspector's ".grad of the leaf" table: [label, shape, dtype, min, max] each.
READ_ACCUMULATED_JS = """
inspector => [...inspector.querySelectorAll('[data-section=accumulated] tr[data-testid=gv-grad-row]')]
  .map(tr => [...tr.querySelectorAll('td')].slice(0, 5).map(td => td.textContent))
"""


def format_number(value: Any) -> str:
    """formatNumber of labextension/src/inspector.ts: how the inspector prints a finite number."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if float(value).is_integer() and abs(value) < 1e6:
        return str(int(value))
    magnitude = abs(value)
    if magnitude >= 1e5 or (magnitude != 0 and magnitude < 1e-3):
        mantissa, exponent = f"{value:.3e}".split("e")
        return f"{mantissa}e{'+' if int(exponent) >= 0 else '-'}{abs(int(exponent))}"
    text = repr(float(f"{value:.4g}"))
    return text[:-2] if text.endswith(".0") else text


# Real graph nodes only: a folded module, group or segment box (class gv-folded) carries a
# synthetic id (2**48 and up, labextension/src/hierarchy.ts), never a node id.
READ_STATES_JS = """
root => Object.fromEntries(
  [...root.querySelectorAll('.gv-node[data-node-id]:not([data-copy]):not(.gv-folded)')].map(node => {
    const state = [...node.classList].find(name => name.startsWith('gv-state-'));
    return [node.dataset.nodeId, state === undefined ? null : state.slice('gv-state-'.length)];
  }))
"""

READ_CURRENT_JS = """
root => [...root.querySelectorAll('.gv-node.gv-current:not([data-copy]):not(.gv-folded)')].map(node => node.dataset.nodeId)
"""

RUN_COUNT_JS = """
([root, expected]) => [...root.querySelectorAll('.gv-node[data-node-id]:not([data-copy]):not(.gv-folded)')]
  .filter(node => node.classList.contains('gv-state-done') || node.classList.contains('gv-state-released'))
  .length === expected
"""


def has_run(state: str | None) -> bool:
    return state in ("done", "released")


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


class NotebookSession:
    """One notebook open in JupyterLab or Notebook 7, with every problem in the page recorded."""

    def __init__(self, browser: Any, lab: LabServer, notebook: str, app: str = "lab", init_script: str | None = None) -> None:
        self.lab = lab
        self.app = app
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        if init_script is not None:
            self.context.add_init_script(init_script)
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.problems = PageProblems(known=list(KNOWN_HOST_ERRORS.get(app, [])))
        self.problems.attach(self.page)
        lab.start_kernel_session(notebook)
        self.page.goto(lab.page_url(notebook, app=app))
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="visible")
        self.wait_for_kernel_idle()

    def wait_for_kernel_idle(self) -> None:
        # The execution indicator already says "idle" before the kernel is connected (the
        # status bar then says "No Kernel | Initializing"); a Run All at that moment opens a
        # "Select Kernel" dialog. So also wait for the kernel's name to be shown.
        connected = (
            "[...document.querySelectorAll('.jp-StatusBar-Item')]"
            ".some(item => /^(?!No Kernel).+ \\| Idle$/.test((item.textContent ?? '').trim()))"
            if self.app == "lab"
            else "document.querySelector('.jp-NotebookKernelLogo [title], [title=\"Python 3 (ipykernel)\"]') !== null"
        )
        self.page.wait_for_function(
            "() => document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status') === 'idle'"
            f" && {connected}"
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
        # A long line can arrive in several stream messages: wait until the text stops changing.
        text, previous = output.inner_text(), None
        for _ in range(40):
            if text == previous:
                break
            self.page.wait_for_timeout(250)
            previous, text = text, output.inner_text()
        for line in text.splitlines():
            if line.strip().startswith(marker):
                return line.strip()[len(marker) :].strip()
        raise AssertionError(f"no line starting with {marker!r} in {text!r}")

    def log_console_entries(self) -> str:
        """Open JupyterLab's Log Console (View menu) and return the text of its entries.

        Exceptions in widget message handlers show only there (frontend_notes.md, pitfall 3). The
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
def notebook_session(
    browser: Any, lab: LabServer, notebook: str, name: str, app: str = "lab", init_script: str | None = None
) -> Iterator[NotebookSession]:
    """Open a notebook; on failure keep a screenshot and the logs for the report."""
    session = NotebookSession(browser, lab, notebook, app, init_script)
    try:
        yield session
    except BaseException:
        directory = session.save_artifacts(name)
        print(f"browser test artifacts: {directory}")
        raise
    finally:
        session.close()


def step_through(session: NotebookSession, steps: int) -> None:
    """Click Step `steps` times; after each click exactly one more node must have run."""
    page = session.page
    step = session.widget().locator('[data-testid="gv-step"]')
    status = session.widget().locator('[data-testid="gv-status"]')
    # A step restyles what is drawn; it never lays out or redraws. Mark the drawing to tell.
    layouts = session.widget().get_attribute("data-layout-count")
    session.widget().locator("svg").first.evaluate("svg => svg.setAttribute('data-gv-test-mark', 'kept')")
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
    assert session.widget().get_attribute("data-layout-count") == layouts, "a step laid the graph out again"
    assert session.widget().locator("svg[data-gv-test-mark=kept]").count() == 1, "a step redrew the graph"


def run_all(session: NotebookSession) -> None:
    """Run All Cells, then wait until every code cell has run and the widgets are drawn."""
    session.run_all_cells()
    # The kernel is briefly idle between cells; the prompts tell when the last one has run.
    session.page.wait_for_function(
        """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')]
                 .every(prompt => /^\\[\\d+\\]:$/.test((prompt.textContent ?? '').trim()))"""
    )
    session.page.wait_for_selector(".jp-NotebookPanel .gv-root .gv-node[data-node-id]", state="visible")
    # the widget the tests drive is the last one (session.widget()): on a loaded machine it can
    # still be laying out when the first one is drawn
    session.widget().locator(".gv-node[data-node-id]").first.wait_for(state="visible")
    session.wait_for_kernel_idle()


def check_kernel_agrees(session: NotebookSession) -> None:
    dom = session.states()
    kernel = json.loads(session.run_cell_at_end(KERNEL_CHECK, "GVCHECK "))
    assert dom in kernel, f"the DOM shows {dom}, the kernel's widgets hold {kernel}"


def check_no_problems(session: NotebookSession) -> None:
    log = session.log_console_entries()
    assert log == "", f"JupyterLab's Log Console shows:\n{log}"
    assert session.problems.report() == "", session.problems.report()
    error_box = session.widget().locator('[data-testid="gv-error"]')
    assert error_box.is_hidden(), error_box.inner_text()


READABLE_SCALE = 0.6  # labextension/src/draw.ts: below it node text is too small to read

# Where the drawing is on screen relative to the canvas, and at what scale boxes are drawn.
MEASURE_FIT_JS = """
root => {
  const canvas = root.querySelector('[data-testid=gv-canvas]').getBoundingClientRect();
  const drawing = root.querySelector('svg g.gv-viewport').getBoundingClientRect();
  const box = root.querySelector('.gv-node rect.gv-box');
  const name = root.querySelector('.gv-node text.gv-name').getBoundingClientRect();
  return {
    canvas: [canvas.left, canvas.top, canvas.right, canvas.bottom],
    drawing: [drawing.left, drawing.top, drawing.right, drawing.bottom],
    scale: box.getBoundingClientRect().height / Number(box.getAttribute('height')),
    nameHeight: name.height,
  };
}
"""
