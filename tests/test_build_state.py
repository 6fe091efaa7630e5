"""``scripts/build_state.py``: setup rebuilds exactly what changed (issue 18 item 8). Each test
builds a small stand-in checkout in a temporary directory (fake compiled modules, a bundle
with its manifest) and checks the plan, without running a real build."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_state.py"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_state = load(SCRIPT, "build_state_under_test")
bundle = load(ROOT / "gradviz" / "widget" / "_bundle.py", "bundle_under_test")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def build_widget(root: Path) -> None:
    """What setup's widget step leaves: the bundles and the JupyterLab extension, installed."""
    build_bundles(root)
    build_lab_extension(root)
    install_lab_extension(root)


def build_bundles(root: Path) -> None:
    """What ``npm run build`` leaves: both bundles and a manifest with the sources' sha256."""
    static = root / "gradviz" / "widget" / "static"
    write(static / "widget.js", "// widget")
    write(static / "standalone.js", "// standalone")
    manifest = {"sources_sha256": bundle.sources_sha256(root / "labextension"), "version": "0"}
    write(static / "manifest.json", json.dumps(manifest))


def build_lab_extension(root: Path) -> None:
    """What ``npm --prefix labextension/jupyterlab run build`` leaves in gradviz/labextension/."""
    output = root / "gradviz" / "labextension"
    write(output / "package.json", '{"name": "gradviz-jupyterlab"}')
    write(output / "static" / "remoteEntry.abc.js", "// entry")
    sha = bundle.sources_sha256(root / "labextension", bundle.LAB_SOURCES)
    write(output / "gradviz-build.json", json.dumps({"sources_sha256": sha}))


def install_lab_extension(root: Path) -> None:
    """What pip (or scripts/setup.sh) copies into the venv."""
    target = root / ".venv" / "share" / "jupyter" / "labextensions" / bundle.LAB_EXTENSION_NAME
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(root / "gradviz" / "labextension", target)


def compile_engine(root: Path) -> None:
    for module in build_state.ENGINE_MODULES:
        write(root / "gradviz_ext" / f"{module}.cpython-311-x86_64-linux-gnu.so", "binary")


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A stand-in checkout, fully built and stamped."""
    monkeypatch.delenv("GRADVIZ_CYTHON_TRACE", raising=False)
    root = tmp_path / "checkout"
    write(root / "pyproject.toml", "[project]\nname = 'gradviz'\n")
    write(root / "setup.py", "from setuptools import setup\nsetup()\n")
    for module in build_state.ENGINE_MODULES:
        write(root / "gradviz_ext" / f"{module}.py", f"# {module}\n")
    write(root / "gradviz_ext" / "_engine.pxd", "cdef class Node: pass\n")
    write(root / "labextension" / "bundle-sources.json",
          json.dumps({"include": ["bundle-sources.json", "package.json", "src/"]}))
    write(root / "labextension" / "package.json", "{}")
    write(root / "labextension" / "src" / "widget.ts", "export const a = 1;\n")
    write(root / "labextension" / "jupyterlab" / "extension-sources.json",
          json.dumps({"include": ["src/", "jupyterlab/extension-sources.json", "jupyterlab/src/"]}))
    write(root / "labextension" / "jupyterlab" / "src" / "index.ts", "export default {};\n")
    assert build_state.plan(root, check_install=False) == ["install", "engine", "widget"]
    compile_engine(root)
    build_widget(root)
    build_state.record(root, "install")
    build_state.record(root, "engine")
    return root


def plan(root):
    return build_state.plan(root, check_install=False)


def test_a_built_checkout_needs_nothing(checkout):
    assert plan(checkout) == []


def test_a_changed_engine_source_rebuilds_only_the_engine(checkout):
    source = checkout / "gradviz_ext" / "_task.py"
    original = source.read_text()
    source.write_text(original + "# changed\n")
    assert plan(checkout) == ["engine"]
    source.write_text(original)  # back to what was built: a content hash, not a time stamp
    assert plan(checkout) == []
    (checkout / "gradviz_ext" / "_engine.pxd").write_text("cdef class Node: cdef int x\n")
    assert plan(checkout) == ["engine"]
    build_state.record(checkout, "engine")
    assert plan(checkout) == []


def test_a_changed_or_new_c_header_rebuilds_only_the_engine(checkout):
    header = checkout / "gradviz_ext" / "c" / "gelu.h"
    write(header, "/* a kernel */\n")
    assert plan(checkout) == ["engine"]
    build_state.record(checkout, "engine")
    assert plan(checkout) == []
    header.write_text("/* a changed kernel */\n")
    assert plan(checkout) == ["engine"]


def test_a_missing_compiled_module_or_a_trace_build_rebuilds_the_engine(checkout, monkeypatch):
    next((checkout / "gradviz_ext").glob("_ops.*.so")).unlink()
    assert plan(checkout) == ["engine"]
    compile_engine(checkout)
    assert plan(checkout) == []
    monkeypatch.setenv("GRADVIZ_CYTHON_TRACE", "1")
    assert plan(checkout) == ["engine"]


def test_changed_project_metadata_reinstalls(checkout):
    (checkout / "pyproject.toml").write_text("[project]\nname = 'gradviz'\nversion = '2'\n")
    assert plan(checkout) == ["install"]
    (checkout / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    assert plan(checkout) == ["install", "engine"]  # setup.py also builds the engine


def test_a_changed_or_missing_bundle_rebuilds_the_widget(checkout):
    (checkout / "labextension" / "src" / "widget.ts").write_text("export const a = 2;\n")
    assert plan(checkout) == ["widget"]
    build_widget(checkout)
    assert plan(checkout) == []
    (checkout / "gradviz" / "widget" / "static" / "standalone.js").unlink()
    assert plan(checkout) == ["widget"]
    build_widget(checkout)
    (checkout / "gradviz" / "widget" / "static" / "manifest.json").write_text("not json")
    assert plan(checkout) == ["widget"]


def test_a_stale_or_uninstalled_jupyterlab_extension_rebuilds_the_widget_step(checkout):
    index = checkout / "labextension" / "jupyterlab" / "src" / "index.ts"
    index.write_text("export default { id: 'x' };\n")
    assert plan(checkout) == ["widget"]
    build_lab_extension(checkout)
    assert plan(checkout) == ["widget"], "built, but the venv still holds the old copy"
    install_lab_extension(checkout)
    assert plan(checkout) == []
    # The view's own sources count for the extension too (it bundles them).
    (checkout / "labextension" / "src" / "widget.ts").write_text("export const a = 3;\n")
    build_bundles(checkout)
    assert plan(checkout) == ["widget"]
    build_lab_extension(checkout)
    install_lab_extension(checkout)
    assert plan(checkout) == []
    installed = checkout / ".venv" / "share" / "jupyter" / "labextensions" / bundle.LAB_EXTENSION_NAME
    (installed / "static" / "remoteEntry.abc.js").write_text("// edited by hand")
    assert plan(checkout) == ["widget"]
    shutil.rmtree(installed)
    assert plan(checkout) == ["widget"]
    assert not build_state.lab_installed(checkout)


def test_without_stamps_everything_is_built(checkout):
    """A fresh clone or a new virtualenv has no stamps (they live in .venv)."""
    for stamp in (checkout / ".venv" / "gradviz-build").iterdir():
        stamp.unlink()
    assert plan(checkout) == ["install", "engine"]


def test_an_unusable_venv_is_reinstalled(checkout):
    # the stand-in has no .venv/bin/python: the full check asks for an install
    assert build_state.plan(checkout, check_install=True) == ["install"]


def test_the_command_line_prints_the_plan_and_records_steps(checkout):
    def run(*args):
        result = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                                text=True, check=True)
        return result.stdout.strip()

    assert run("plan", "--after-build", str(checkout)) == ""
    (checkout / "gradviz_ext" / "_ops.py").write_text("# changed\n")
    assert run("plan", "--after-build", str(checkout)) == "engine"
    run("record", "engine", str(checkout))
    assert run("plan", "--after-build", str(checkout)) == ""
    assert "recompiling the Cython engine" in run("describe", "engine")
    bad = subprocess.run([sys.executable, str(SCRIPT), "rebuild"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Usage" in bad.stderr
