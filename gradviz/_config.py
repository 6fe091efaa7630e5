"""``gradviz.show_config()``: which engine build and front-end bundle are in use."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import gradviz_ext

from ._version import __version__

__all__ = ["show_config", "config"]


def config() -> dict:
    """A dict describing this installation (engine mode, versions, widget bundle)."""
    info = {
        "gradviz": __version__,
        "engine": gradviz_ext.MODE,
        "compiled": gradviz_ext.COMPILED,
        "engine_module": gradviz_ext.engine.__file__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
    }
    try:
        from .widget._bundle import bundle_info

        info["widget_bundle"] = bundle_info()
    except Exception as exc:  # the widget layer is optional for the engine
        info["widget_bundle"] = {"error": f"{type(exc).__name__}: {exc}"}
    # The JupyterLab extension that opens saved trace views, where `pip install` puts it.
    lab = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "gradviz-jupyterlab"
    info["jupyterlab_extension"] = str(lab) if (lab / "package.json").is_file() else None
    return info


def show_config() -> dict:
    """Print and return :func:`config`: says whether the compiled core is in use.

    Examples
    --------
    >>> import gradviz
    >>> gradviz.show_config()["engine"] in ("compiled", "interpreted")  # doctest: +ELLIPSIS
    gradviz ...
    True
    """
    info = config()
    print(f"gradviz {info['gradviz']}")
    print(f"  engine:  {info['engine']} ({info['engine_module']})")
    print(f"  python:  {info['python']}, numpy {info['numpy']}")
    bundle = info["widget_bundle"]
    if "error" in bundle:
        print(f"  widget:  unavailable ({bundle['error']})")
    else:
        state = "fresh" if bundle.get("fresh") else "STALE"
        print(f"  widget:  {bundle.get('path')} ({state})")
    lab = info["jupyterlab_extension"]
    print(f"  jupyterlab extension:  {lab or 'not installed in this Python (reinstall gradviz with pip)'}")
    return info
