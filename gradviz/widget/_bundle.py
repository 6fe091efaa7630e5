"""Find the front-end bundle (``static/widget.js``) and refuse a stale one.

The bundle is built from ``labextension/`` by ``npm run build``, which also writes
``static/manifest.json`` with a fingerprint of the sources it was built from. In a development
checkout (the ``labextension/`` sources sit next to the package) the fingerprint is recomputed
here and compared, so that a widget never silently runs code older than its sources. An
installed package has no sources next to it; there only the presence of the bundle is checked.

Note [Bundle fingerprint] (``labextension/scripts/sources.mjs``) defines the fingerprint; the
function ``sources_sha256`` below mirrors it line for line.

The prebuilt JupyterLab extension (``gradviz/labextension/``, built by
``labextension/jupyterlab/scripts/build.mjs``) carries the same kind of fingerprint in its
``gradviz-build.json``, over the files listed in ``labextension/jupyterlab/extension-sources.json``;
:func:`labextension_info` checks it the same way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["BundleError", "bundle_info", "load_bundle", "sources_sha256", "labextension_info",
           "WIDGET_BUNDLE", "STANDALONE_BUNDLE", "LAB_EXTENSION_NAME"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: Where the JupyterLab extension is built (labextension/jupyterlab/package.json, outputDir).
LAB_OUTPUT_DIR = Path(__file__).resolve().parents[1] / "labextension"
#: Its name: pip installs it into share/jupyter/labextensions/<this>/.
LAB_EXTENSION_NAME = "gradviz-jupyterlab"
#: The list of its sources, relative to labextension/.
LAB_SOURCES = "jupyterlab/extension-sources.json"
BUNDLE_SOURCES = "bundle-sources.json"
# gradviz/widget/_bundle.py -> the repository root of a development checkout.
LABEXTENSION_DIR = Path(__file__).resolve().parents[2] / "labextension"

#: The anywidget module (the notebook widget).
WIDGET_BUNDLE = "widget.js"
#: The classic script of the self-contained HTML page (``_html.py``); built from the same sources.
STANDALONE_BUNDLE = "standalone.js"

_REBUILD_HINT = "run `npm --prefix labextension run build` or reinstall with `pip install -e .`"


class BundleError(RuntimeError):
    """The widget's front-end bundle is missing or was built from other sources."""


def _is_dev_checkout(labextension_dir: Path) -> bool:
    return (labextension_dir / "bundle-sources.json").is_file() and (labextension_dir / "package.json").is_file()


def _walk(root: Path, directory: Path, out: list[str]) -> None:
    for entry in directory.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            _walk(root, entry, out)
        elif entry.is_file():
            out.append(entry.relative_to(root).as_posix())


def bundle_source_paths(labextension_dir: Path, spec_path: str = BUNDLE_SOURCES) -> list[str]:
    """The sorted relative paths whose bytes make up the bundle (see bundle-sources.json, or
    ``spec_path``: jupyterlab/extension-sources.json for the JupyterLab extension)."""
    spec = json.loads((labextension_dir / spec_path).read_text(encoding="utf-8"))
    paths: list[str] = []
    for entry in spec["include"]:
        if entry.endswith("/"):
            _walk(labextension_dir, labextension_dir / entry, paths)
        elif (labextension_dir / entry).is_file():
            paths.append(entry)
    return sorted(set(paths))


def sources_sha256(labextension_dir: Path = LABEXTENSION_DIR, spec_path: str = BUNDLE_SOURCES) -> str:
    """sha256 (hex) of the front-end sources, exactly as ``scripts/sources.mjs`` computes it."""
    digest = hashlib.sha256()
    for path in bundle_source_paths(labextension_dir, spec_path):
        data = (labextension_dir / path).read_bytes()
        digest.update(path.encode("utf-8"))
        digest.update(b"\0")
        digest.update(str(len(data)).encode("ascii"))
        digest.update(b"\0")
        digest.update(data)
    return digest.hexdigest()


def _read_manifest(static_dir: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((static_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def bundle_info(
    static_dir: Path = STATIC_DIR, labextension_dir: Path = LABEXTENSION_DIR, name: str = WIDGET_BUNDLE
) -> dict[str, Any]:
    """Where the widget bundle is and whether it matches its sources (for ``gradviz.show_config()``).

    ``name`` picks the output of the build to look at: ``widget.js`` (the default) or
    ``standalone.js``; one manifest describes both.

    Returns
    -------
    dict
        ``path`` (str), ``exists`` (bool), ``sha256`` (the sources fingerprint recorded by the
        build, or None), ``built_at`` (str or None), ``dev_checkout`` (bool: the sources are
        next to the package), ``sources_sha256`` (recomputed from the sources in a dev
        checkout, else None) and ``fresh`` (bool: usable, and built from the current sources
        when those are present).

    Examples
    --------
    >>> from gradviz.widget._bundle import bundle_info
    >>> sorted(bundle_info())
    ['built_at', 'dev_checkout', 'exists', 'fresh', 'path', 'sha256', 'sources_sha256']
    """
    bundle = static_dir / name
    manifest = _read_manifest(static_dir)
    recorded = manifest.get("sources_sha256") if manifest else None
    dev = _is_dev_checkout(labextension_dir)
    current = sources_sha256(labextension_dir) if dev else None
    exists = bundle.is_file()
    fresh = exists and isinstance(recorded, str) and (not dev or recorded == current)
    return {
        "path": str(bundle),
        "exists": exists,
        "sha256": recorded if isinstance(recorded, str) else None,
        "built_at": manifest.get("built_at") if manifest else None,
        "dev_checkout": dev,
        "sources_sha256": current,
        "fresh": fresh,
    }


def load_bundle(
    static_dir: Path = STATIC_DIR, labextension_dir: Path = LABEXTENSION_DIR, name: str = WIDGET_BUNDLE
) -> str:
    """The text of ``widget.js`` (or of ``name``); raises BundleError if it is missing or stale."""
    info = bundle_info(static_dir, labextension_dir, name)
    if not info["exists"]:
        raise BundleError(f"the widget bundle is missing ({info['path']}): {_REBUILD_HINT}")
    if info["sha256"] is None:
        raise BundleError(
            f"the widget bundle has no valid manifest.json next to it ({static_dir}), so its sources "
            f"are unknown: {_REBUILD_HINT}"
        )
    if not info["fresh"]:
        raise BundleError(
            f"the widget bundle is stale: it was built from sources {info['sha256'][:12]} "
            f"(at {info['built_at']}), but {labextension_dir} now hashes to {info['sources_sha256'][:12]}; "
            f"{_REBUILD_HINT}"
        )
    return (static_dir / name).read_text(encoding="utf-8")


def labextension_info(output_dir: Path = LAB_OUTPUT_DIR, labextension_dir: Path = LABEXTENSION_DIR) -> dict[str, Any]:
    """Whether the built JupyterLab extension (``gradviz/labextension/``) matches its sources.

    Returns
    -------
    dict
        ``path`` (str), ``exists`` (bool: its package.json and ``gradviz-build.json`` are
        there), ``sha256`` (the fingerprint recorded by its build, or None), ``built_at``,
        ``dev_checkout``, ``sources_sha256`` (recomputed in a dev checkout, else None) and
        ``fresh`` (bool), as :func:`bundle_info`.
    """
    try:
        manifest = json.loads((output_dir / "gradviz-build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    manifest = manifest if isinstance(manifest, dict) else None
    recorded = manifest.get("sources_sha256") if manifest else None
    dev = _is_dev_checkout(labextension_dir) and (labextension_dir / LAB_SOURCES).is_file()
    current = sources_sha256(labextension_dir, LAB_SOURCES) if dev else None
    exists = (output_dir / "package.json").is_file() and isinstance(recorded, str)
    return {
        "path": str(output_dir),
        "exists": exists,
        "sha256": recorded if isinstance(recorded, str) else None,
        "built_at": manifest.get("built_at") if manifest else None,
        "dev_checkout": dev,
        "sources_sha256": current,
        "fresh": exists and (not dev or recorded == current),
    }
