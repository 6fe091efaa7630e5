"""The browser every test module in this folder drives: Debian's Chromium through playwright,
launched with the harness's flags (``gradviz_browser_harness.launch_chromium``), once per module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import playwright.sync_api as sync_api  # a test dependency: a missing one must fail, not skip
from gradviz_browser_harness import launch_chromium  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()
