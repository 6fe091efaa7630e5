"""gradviz's compiled core.

The engine's algorithm lives in ``_engine.py``, in Cython's pure-Python mode. Installed
normally, the compiled extension ``_engine.*.so`` is imported. With the environment
variable ``GRADVIZ_PURE_PYTHON=1`` the same ``_engine.py`` runs interpreted (readable,
steppable with pdb, and the reference the tests compare the compiled build against).
"""

import importlib.machinery
import importlib.util
import os
import sys
import warnings

__all__ = ["engine", "COMPILED", "MODE"]

_PURE = os.environ.get("GRADVIZ_PURE_PYTHON", "").strip().lower() in {"1", "true", "yes", "on"}


def _load_interpreted():
    here = os.path.dirname(os.path.abspath(__file__))
    name = __name__ + "._engine"
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(here, "_engine.py"))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


if _PURE:
    engine = _load_interpreted()
else:
    from . import _engine as engine

    if not engine.compiled():
        warnings.warn(
            "gradviz's compiled engine is not built, so the interpreted engine is in use "
            "(slower, same results). Build it with `pip install -e .` from the source tree.",
            RuntimeWarning,
            stacklevel=2,
        )

COMPILED = bool(engine.compiled())
MODE = "compiled" if COMPILED else "interpreted"
