"""Drive the real widget: a private JupyterLab server and headless Chromium (playwright).

Everything here follows FRONTEND_NOTES.md: the system Chromium with fixed flags (never
``playwright install``), a server bound to 127.0.0.1 with a random port and token and
temporary config/settings/runtime dirs, stopped by its PID; page errors, console errors and
tracebacks in JupyterLab's Log Console all count as failures (pitfall 3).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]
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


def start_lab(workdir: Path, notebooks: list[Path], app: str = "lab", timeout: float = 90.0) -> LabServer:
    """Start ``jupyter lab`` (or ``jupyter notebook``) serving copies of ``notebooks``."""
    root = workdir / "root"
    root.mkdir()
    for notebook in notebooks:
        shutil.copy2(notebook, root / notebook.name)
    dirs = {name: workdir / name for name in ("config", "data", "runtime", "settings", "workspaces", "ipython")}
    for directory in dirs.values():
        directory.mkdir()
    for relative, values in LAB_SETTINGS.items():
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

    def attach(self, page: Any) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.page_errors.append(f"{error.name}: {error.message}\n{error.stack}"))

    def _on_console(self, message: Any) -> None:
        self.console.append(f"[{message.type}] {message.text}")
        if message.type == "error":
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


# ---- reading the widget from the DOM ------------------------------------------------------------

READ_STATES_JS = """
root => Object.fromEntries(
  [...root.querySelectorAll('.gv-node[data-node-id]:not([data-copy])')].map(node => {
    const state = [...node.classList].find(name => name.startsWith('gv-state-'));
    return [node.dataset.nodeId, state === undefined ? null : state.slice('gv-state-'.length)];
  }))
"""

READ_CURRENT_JS = """
root => [...root.querySelectorAll('.gv-node.gv-current:not([data-copy])')].map(node => node.dataset.nodeId)
"""

RUN_COUNT_JS = """
([root, expected]) => [...root.querySelectorAll('.gv-node[data-node-id]:not([data-copy])')]
  .filter(node => node.classList.contains('gv-state-done') || node.classList.contains('gv-state-released'))
  .length === expected
"""


def has_run(state: str | None) -> bool:
    return state in ("done", "released")


def iter_cells_text(page: Any) -> Iterator[str]:
    for cell in page.locator(".jp-Cell").all():
        yield cell.inner_text()
