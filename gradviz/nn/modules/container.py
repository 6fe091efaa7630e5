"""``gradviz.nn.modules.container``: the containers, where torch code imports them from
``torch.nn.modules.container``."""

from .. import (  # noqa: F401  (re-exported)
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]
