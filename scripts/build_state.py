"""What ``scripts/setup.sh`` has to rebuild: compare the sources with what was built last.

Note [Rebuild only what changed]
--------------------------------
A full install (``pip install -e .``: dependencies, the Cython engine, the widget bundle)
takes about a minute, and ``scripts/tour`` runs setup on every launch. So setup asks this
script for a *plan*, one word per step that is out of date, and does only those:

``install``
    ``.venv`` has no working gradviz install from this checkout, or ``pyproject.toml`` /
    ``setup.py`` changed since the last install (their sha256 is stamped in
    ``.venv/gradviz-build/install.sha256``). A full install also builds the other two.
``engine``
    A compiled module of ``gradviz_ext`` is missing, or the engine's inputs changed: the
    ``.py`` and ``.pxd`` sources, ``setup.py``, the Python and Cython versions and
    ``GRADVIZ_CYTHON_TRACE`` (stamped in ``.venv/gradviz-build/engine.sha256``).
``widget``
    The bundle is missing or was built from other sources: exactly the check the widget
    makes before it loads (``gradviz/widget/_bundle.py``, the fingerprint in
    ``static/manifest.json``), so setup can never leave a stale bundle the widget would use.
    The same step covers the prebuilt JupyterLab extension: ``gradviz/labextension/`` must
    match its sources (its ``gradviz-build.json``, ``_bundle.labextension_info``) and the copy
    that ``pip install`` put into ``.venv/share/jupyter/labextensions/gradviz-jupyterlab/``
    must hold exactly the built files (setup refreshes that copy after rebuilding).

The stamps live inside ``.venv``: a fresh clone, or a new virtualenv, has none, so everything
is built. A stamp is written only after its step succeeded (``record``). Only the standard
library is used, so any Python 3.11 can run this before ``.venv`` exists.

Usage: ``python scripts/build_state.py plan [--after-build] [ROOT] | record STEP [ROOT] |
describe STEP``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

STEPS = ("install", "engine", "widget")
ENGINE_MODULES = ("_engine", "_task", "_ops", "_function")
HERE = Path(__file__).resolve().parent

WHY = {
    "install": "installing gradviz and its dependencies into .venv (pyproject.toml or setup.py "
               "changed, or no working install yet); this also builds the engine and the widget",
    "engine": "recompiling the Cython engine (gradviz_ext sources changed)",
    "widget": "rebuilding the widget bundle and the JupyterLab extension (labextension sources "
              "changed) and installing the extension into .venv",
}


def _bundle_module():
    """``gradviz/widget/_bundle.py`` of this checkout, loaded alone (it needs only the
    standard library), so the widget check is the very one the widget makes."""
    path = HERE.parent / "gradviz" / "widget" / "_bundle.py"
    spec = importlib.util.spec_from_file_location("_gradviz_bundle_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digest(root: Path, paths: list[str], extra: list[str] = ()) -> str:
    digest = hashlib.sha256()
    for relative in sorted(paths):
        data = (root / relative).read_bytes()
        for part in (relative.encode(), str(len(data)).encode(), data):
            digest.update(part)
            digest.update(b"\0")
    for item in extra:
        digest.update(item.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _stamp_dir(root: Path) -> Path:
    return root / ".venv" / "gradviz-build"


def _venv_python(root: Path) -> Path:
    return root / ".venv" / "bin" / "python"


def install_inputs(root: Path) -> str:
    """sha256 of what decides the install: the project's metadata and build script."""
    return _digest(root, ["pyproject.toml", "setup.py"])


def _cython_version(root: Path) -> str:
    python = _venv_python(root)
    if not python.exists():
        return "none"
    result = subprocess.run([str(python), "-c", "import Cython; print(Cython.__version__)"],
                            capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else "none"


def _python_version(root: Path) -> str:
    python = _venv_python(root)
    if not python.exists():
        return "none"
    result = subprocess.run([str(python), "-c", "import sys; print(sys.version)"],
                            capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else "none"


def engine_inputs(root: Path) -> str:
    """sha256 of what decides the compiled engine: its sources (with the C headers in
    ``gradviz_ext/c/``), the build script, the Python and Cython versions and the trace
    switch."""
    sources = [f"gradviz_ext/{p.name}" for p in (root / "gradviz_ext").iterdir()
               if p.suffix in (".py", ".pxd") and p.is_file()]
    headers = root / "gradviz_ext" / "c"
    if headers.is_dir():
        sources += sorted(f"gradviz_ext/c/{p.name}" for p in headers.glob("*.h") if p.is_file())
    extra = [_python_version(root), _cython_version(root),
             os.environ.get("GRADVIZ_CYTHON_TRACE", "0")]
    return _digest(root, sources + ["setup.py"], extra)


def _stamped(root: Path, step: str) -> str | None:
    try:
        return (_stamp_dir(root) / f"{step}.sha256").read_text().strip()
    except OSError:
        return None


def _current(root: Path, step: str) -> str:
    return install_inputs(root) if step == "install" else engine_inputs(root)


def _install_works(root: Path) -> bool:
    """The venv's Python runs, finds gradviz in this checkout and finds the test tools, all
    without importing them (importing torch alone takes seconds)."""
    python = _venv_python(root)
    if not python.exists():
        return False
    check = ("import importlib.util as u, importlib.metadata as m, os, sys\n"
             "spec = u.find_spec('gradviz')\n"
             "m.version('gradviz')\n"
             "missing = [n for n in ('numpy', 'Cython', 'anywidget', 'torch', 'pytest', "
             "'jupyterlab', 'playwright') if u.find_spec(n) is None]\n"
             f"inside = os.path.realpath(spec.origin).startswith(os.path.realpath({str(root)!r}) + os.sep)\n"
             "sys.exit(0 if inside and not missing else 1)")
    return subprocess.run([str(python), "-c", check], capture_output=True,
                          cwd="/").returncode == 0


def _engine_built(root: Path) -> bool:
    names = [p.name for p in (root / "gradviz_ext").iterdir()]
    return all(any(n.startswith(module + ".") and n.endswith((".so", ".pyd")) for n in names)
               for module in ENGINE_MODULES)


def _tree(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        return {}
    return {path.relative_to(directory).as_posix(): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def lab_installed(root: Path) -> bool:
    """The venv's copy of the JupyterLab extension holds exactly the built files."""
    bundle = _bundle_module()
    built = _tree(root / "gradviz" / "labextension")
    installed = _tree(root / ".venv" / "share" / "jupyter" / "labextensions" / bundle.LAB_EXTENSION_NAME)
    return bool(built) and built == installed


def _widget_fresh(root: Path) -> bool:
    bundle = _bundle_module()
    static = root / "gradviz" / "widget" / "static"
    labextension = root / "labextension"
    return (all(bundle.bundle_info(static, labextension, name)["fresh"]
                for name in (bundle.WIDGET_BUNDLE, bundle.STANDALONE_BUNDLE))
            and bundle.labextension_info(root / "gradviz" / "labextension", labextension)["fresh"]
            and lab_installed(root))


def plan(root: Path, check_install: bool = True) -> list[str]:
    """The steps that are out of date, in the order setup runs them."""
    steps = []
    if _stamped(root, "install") != install_inputs(root) or (
            check_install and not _install_works(root)):
        steps.append("install")
    if not _engine_built(root) or _stamped(root, "engine") != engine_inputs(root):
        steps.append("engine")
    if not _widget_fresh(root):
        steps.append("widget")
    return steps


def record(root: Path, step: str) -> None:
    """Stamp ``step`` as built from the current inputs (after it succeeded)."""
    if step == "widget":
        return  # the build writes its own fingerprint (static/manifest.json)
    directory = _stamp_dir(root)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{step}.sha256").write_text(_current(root, step) + "\n")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("plan", "record", "describe"):
        print(__doc__[__doc__.index("Usage:"):].strip(), file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "plan":
        # --after-build: pip has just verified the install; check only the stamps and outputs
        check_install = "--after-build" not in rest
        rest = [arg for arg in rest if arg != "--after-build"]
        root = Path(rest[0]) if rest else HERE.parent
        print(" ".join(plan(root.resolve(), check_install=check_install)))
        return 0
    if not rest or rest[0] not in STEPS:
        print(f"{command} needs a step: one of {', '.join(STEPS)}", file=sys.stderr)
        return 2
    if command == "describe":
        print(WHY[rest[0]])
        return 0
    root = Path(rest[1]) if len(rest) > 1 else HERE.parent
    record(root.resolve(), rest[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
