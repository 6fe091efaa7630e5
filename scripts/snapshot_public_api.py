"""Write tests/ops/public_api_snapshot.json: gradviz's public API as introspection sees it.

Run once on the code before a refactor of the op declarations (``.venv/bin/python
scripts/snapshot_public_api.py``); tests/ops/test_public_api_snapshot.py then requires the
refactored package to give the same sets. Re-run it only for a deliberate API change, and say
why in the commit.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = REPO / "tests" / "ops" / "public_api_snapshot.json"


def origin(value) -> str:
    """Where ``value`` is defined (``module:qualname``), to see that a name still binds the
    same function; a property by its getter, an ``out=`` wrapper by the function it wraps."""
    if isinstance(value, property):
        value = value.fget
    code = getattr(value, "__code__", None)
    if code is not None and "fn" in code.co_freevars and code.co_name == "method":
        # an in-place method made from its out-of-place function (ops/_inplace.py)
        return "in place of " + origin(value.__closure__[code.co_freevars.index("fn")].cell_contents)
    value = getattr(value, "__wrapped__", value)
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module is None or qualname is None:
        return f"<{type(value).__name__}>"
    return f"{module}:{qualname}"


def takes_out(value) -> bool:
    """Whether ``value`` accepts ``out=`` (its own signature, not the one it wraps)."""
    try:
        signature = inspect.signature(value, follow_wrapped=False)
    except (TypeError, ValueError):
        return False
    return "out" in signature.parameters


def public(names):
    return sorted(name for name in names if not name.startswith("_") or
                  (name.startswith("__") and name.endswith("__")))


def snapshot() -> dict:
    import gradviz
    import gradviz.ops
    from gradviz.ops._saved import SAVED_NAMES
    from gradviz_ext import engine

    # what Tensor has beyond the engine's TensorBase (whose attributes differ between the
    # compiled and the interpreted engine), and what it overrides of it
    base = set(dir(engine.TensorBase))
    tensor_names = sorted(name for name in dir(gradviz.Tensor)
                          if (name not in base or name in vars(gradviz.Tensor))
                          and name not in ("__dict__", "__weakref__"))
    methods = {name: origin(inspect.getattr_static(gradviz.Tensor, name)) for name in tensor_names
               if not name.startswith("__") or name in vars(gradviz.Tensor)}
    top = {name: origin(getattr(gradviz, name)) for name in public(dir(gradviz))
           if callable(getattr(gradviz, name)) and not isinstance(getattr(gradviz, name), type)}
    return {
        "dir_gradviz": public(dir(gradviz)),
        "all_gradviz": sorted(set(gradviz.__all__)),
        "dir_ops": public(dir(gradviz.ops)),
        "all_ops": sorted(set(gradviz.ops.__all__)),
        "tensor_attributes": tensor_names,
        "tensor_method_origins": methods,
        "inplace_methods": sorted(name for name in tensor_names
                                  if (name.endswith("_") and not name.startswith("_"))
                                  or name in ("__iadd__", "__isub__", "__imul__", "__itruediv__",
                                              "__ipow__", "__setitem__")),
        "function_origins": top,
        "saved_names": {node: " ".join(sorted(names)) for node, names in SAVED_NAMES.items()},
        "takes_out": sorted(name for name in public(dir(gradviz))
                            if callable(getattr(gradviz, name)) and takes_out(getattr(gradviz, name))),
    }


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT.relative_to(REPO)}")
