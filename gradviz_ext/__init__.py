"""gradviz's compiled core.

Four modules in Cython's pure-Python mode: ``_engine.py`` (tensors' autograd fields, graph
nodes, saved tensors, grad mode), ``_task.py`` (the graph task that runs backward),
``_ops.py`` (recording built-in ops) and ``_function.py`` (custom Function nodes). Installed
normally, their compiled extensions are imported. With the environment variable
``GRADVIZ_PURE_PYTHON=1`` the same sources run interpreted (readable, steppable with pdb, and
the reference the tests compare the compiled build against). ``_anomaly.py``, ``_hooks.py``
and ``_errstate.py`` are plain Python in both modes.
"""

import importlib.machinery
import importlib.util
import os
import sys
import warnings

__all__ = ["engine", "task", "ops", "function", "COMPILED", "MODE"]

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
    engine = _load_interpreted("_engine")  # first: the others import gradviz_ext._engine
    ops = _load_interpreted("_ops")
    task = _load_interpreted("_task")  # after _ops: it imports gradviz_ext._ops
    function = _load_interpreted("_function")
else:
    from . import _engine as engine
    from . import _function as function
    from . import _ops as ops
    from . import _task as task

    if not engine.compiled():
        warnings.warn(
            "gradviz's compiled engine is not built, so the interpreted engine is in use "
            "(slower, same results). Build it with `pip install -e .` from the source tree.",
            RuntimeWarning,
            stacklevel=2,
        )

COMPILED = bool(engine.compiled()) and all(
    module.__file__.endswith((".so", ".pyd")) for module in (task, ops, function))
MODE = "compiled" if COMPILED else "interpreted"
