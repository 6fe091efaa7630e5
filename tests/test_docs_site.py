"""The documentation site builds with warnings as errors (``scripts/docs``), and its API
reference holds every public name of the documented packages."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_public_docstrings import PACKAGES

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path):
    environment = dict(os.environ, DOCS_OUTPUT=str(tmp_path / "html"))
    environment["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environment["PATH"]
    result = subprocess.run(["bash", str(ROOT / "scripts" / "docs")], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"scripts/docs failed:\n{result.stdout}\n{result.stderr}"
    html = tmp_path / "html"
    for page in ["index", "getting_started", "guides/debugger", "guides/doctor", "guides/traces",
                 "guides/recording_pytorch", "guides/widget_keys", "events", "widget_protocol",
                 "function_contract", "architecture", "design"]:
        assert (html / f"{page}.html").is_file(), f"the site has no page {page}"
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        assert (html / "notebooks" / f"{notebook.stem}.html").is_file(), f"no page for {notebook}"
        check_notebook_page(html, notebook.stem)
    for package_name in PACKAGES:
        page = (html / "api" / f"{package_name}.html").read_text(encoding="utf-8")
        package = importlib.import_module(package_name)
        # each entry's signature: "gradviz.nn." then the name as the descname
        missing = [name for name in package.__all__ if callable(getattr(package, name))
                   and f'descname"><span class="pre">{name}</span>' not in page]
        assert not missing, f"{package_name}: not in the API reference: {missing}"


def check_notebook_page(html: Path, stem: str) -> None:
    """The notebook's page shows its executed outputs, and each debugger widget as an iframe of
    an offline replay page of its whole pass (Note [Widgets in the built docs] in
    gradviz/widget/_docs_pages.py)."""
    page = (html / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
    assert "cell_output" in page, f"{stem}: the page shows no output (was the notebook executed?)"
    assert "application/vnd.jupyter.widget-view+json" not in page, f"{stem}: a widget drawn as a widget view"
    frames = re.findall(r'<iframe class="gradviz-replay" src="([^"]+)"', page)
    assert frames, f"{stem}: no debugger widget shown as a replay page"
    for source in frames:
        replay = (html / "notebooks" / source).resolve()
        assert replay.is_file(), f"{stem}: the iframe's page {source} is missing"
        text = replay.read_text(encoding="utf-8")
        match = re.search(r'<script type="application/json" id="gradviz-data">(.*?)</script>', text, re.S)
        assert match is not None, f"{stem}: {source} is not a replay page"
        data = json.loads(match.group(1))
        assert data["graph"]["nodes"], f"{stem}: {source} has no graph"
        # the whole pass: a session the notebook left paused was run to its end at exit
        assert data["final_status"] in ("finished", "error"), (stem, source, data["final_status"])
