"""``gradviz.nn.modules``: the module classes again (as ``torch.nn.modules``), and
``modules.module`` with ``Module`` and the global hooks (``register_module_forward_hook``, ...)."""

import sys

from . import lazy, module

_nn = sys.modules[__name__.rpartition(".")[0]]  # gradviz.nn, imported before this package

__all__ = ["module", "lazy"] + [name for name in _nn.__all__ if name[0].isupper()]
globals().update({name: getattr(_nn, name) for name in __all__ if name not in ("module", "lazy")})
