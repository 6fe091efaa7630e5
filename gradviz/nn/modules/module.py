"""``gradviz.nn.modules.module``: ``Module`` and the hooks that every module runs, as
``torch.nn.modules.module``."""

from .._module import (
                       Module,
                       register_module_forward_hook,
                       register_module_forward_pre_hook,
                       register_module_full_backward_hook,
                       register_module_full_backward_pre_hook,
)

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_hook", "register_module_full_backward_pre_hook"]
