"""The course notebooks (02-06) in JupyterLab: each runs top to bottom in the browser, every
debugger widget it displays is drawn, none shows an error, and the page and JupyterLab's Log
Console report no error. Marked ``browser`` (see test_tour_in_jupyterlab.py for the setup)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    REPO,
    LabServer,
    browser,  # noqa: F401  (the module-scoped fixture)
    notebook_session,
    run_all,
    start_lab,
    stop_lab,
)

pytestmark = pytest.mark.browser

COURSE = sorted(path for path in (REPO / "notebooks").glob("0[2-9]_*.ipynb"))

# Every widget of the notebook has drawn its graph (a widget still laying out has no node).
ALL_DRAWN_JS = """
() => {
  const roots = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .gv-root')];
  const drawn = root => root.querySelector('.gv-node[data-node-id]') !== null;
  return roots.length > 0 && roots.every(drawn);
}
"""

READ_WIDGETS_JS = """
() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .gv-root')].map(root => {
  const error = root.querySelector('[data-testid="gv-error"]');
  return {
    nodes: root.querySelectorAll('.gv-node[data-node-id]:not([data-copy])').length,
    status: (root.querySelector('[data-testid="gv-status"]')?.textContent ?? '').trim(),
    error: error && error.offsetParent !== null ? error.textContent : null,
  };
})
"""

TRACEBACKS_JS = """
() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]
  .map(output => output.textContent ?? '')
  .filter(text => text.includes('Traceback (most recent call last)'))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"), [REPO / "notebooks"])
    yield server
    stop_lab(server)


def test_every_course_notebook_runs_with_its_widgets_drawn(browser: Any, lab: LabServer) -> None:
    assert len(COURSE) == 5, [path.name for path in COURSE]
    for path in COURSE:
        with notebook_session(browser, lab, path.name, path.stem) as session:
            run_all(session)
            session.page.wait_for_function(ALL_DRAWN_JS, timeout=60_000)
            widgets = session.page.evaluate(READ_WIDGETS_JS)
            assert widgets, f"{path.name}: no widget"
            for index, widget in enumerate(widgets):
                assert widget["nodes"] > 0 and widget["error"] is None, (path.name, index, widget)
                assert not widget["status"].startswith("Disconnected"), (path.name, index, widget)
            tracebacks = session.page.evaluate(TRACEBACKS_JS)
            assert tracebacks == [], f"{path.name}: a cell raised:\n{tracebacks[0][:2000]}"
            log = session.log_console_entries()
            assert log == "", f"{path.name}: JupyterLab's Log Console shows:\n{log}"
            assert session.problems.report() == "", f"{path.name}:\n{session.problems.report()}"
