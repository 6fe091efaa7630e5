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

__all__ = ["engine", "ops", "COMPILED", "MODE"]

_PURE = os.environ.get("GRADVIZ_PURE_PYTHON", "").strip().lower() in {"1", "true", "yes", "on"}


def _load_interpreted(short_name):
    """Load ``<short_name>.py`` as source even though a compiled module sits beside it."""
    here = os.path.dirname(os.path.abspath(__file__))
    name = f"{__name__}.{short_name}"
    loader = importlib.machinery.SourceFileLoader(name, os.path.join(here, short_name + ".py"))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


if _PURE:
    engine = _load_interpreted("_engine")
    ops = _load_interpreted("_ops")  # after _engine: it imports gradviz_ext._engine
else:
    from . import _engine as engine
    from . import _ops as ops

    if not engine.compiled():
        warnings.warn(
            "gradviz's compiled engine is not built, so the interpreted engine is in use "
            "(slower, same results). Build it with `pip install -e .` from the source tree.",
            RuntimeWarning,
            stacklevel=2,
        )

COMPILED = bool(engine.compiled()) and bool(ops.__file__.endswith((".so", ".pyd")))
MODE = "compiled" if COMPILED else "interpreted"
