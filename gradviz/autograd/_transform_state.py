"""Which ``gradviz.func`` transforms are running (innermost last).

Kept here, without imports, so ``Function.apply`` can test it cheaply and without import
cycles: ``gradviz.func`` pushes an entry per active ``vmap`` (its ``VmapInfo``) or
``grad``/``vjp``/``jacrev``/``jvp`` (the transform's name) and pops it on the way out.

``apply_function(cls, args, kwargs)`` is how ``Function.apply`` runs under a transform.
``gradviz.func`` sits above autograd, so it installs its rule here when it loads; the stack is
empty until a transform of ``gradviz.func`` runs, so the rule is there whenever it is needed.
"""

from collections.abc import Callable
from typing import Any

stack: list = []
apply_function: Callable[[Any, tuple, dict], Any] | None = None
