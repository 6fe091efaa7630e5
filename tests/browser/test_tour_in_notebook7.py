"""The same widget in Notebook 7: it renders, steps, and agrees with the kernel.

Marked ``browser``; needs what test_tour_in_jupyterlab.py needs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gradviz_browser_harness import (  # noqa: E402
    LabServer,
    browser,  # noqa: F401  (the module-scoped fixture)
    check_kernel_agrees,
    check_no_problems,
    notebook_session,
    run_all,
    start_lab,
    step_through,
    stop_lab,
)

pytestmark = pytest.mark.browser

FAKE_TOUR = Path(__file__).resolve().parent / "fake_tour.ipynb"


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = start_lab(tmp_path_factory.mktemp("notebook7"), [FAKE_TOUR], app="notebook")
    yield server
    stop_lab(server)


def test_fake_session_tour_in_notebook7(browser: Any, notebook7: LabServer) -> None:
    with notebook_session(browser, notebook7, FAKE_TOUR.name, "notebook7", app="notebook") as session:
        run_all(session)
        step_through(session, 3)
        check_kernel_agrees(session)
        check_no_problems(session)
