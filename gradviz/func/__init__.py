"""``gradviz.func``: function transforms, as ``torch.func``.

``vmap`` is a loop over the batch dimension, not a batching transform (Note [vmap is a loop]
in ``_vmap.py``); ``grad``, ``vjp`` and ``jacrev`` run on the engine, ``jvp`` and ``jacfwd``
on forward-mode AD (Note [Function transforms on the engine] in ``_grad.py``); ``hessian`` is
``jacfwd(jacrev(f))``. ``functional_call`` and ``stack_module_state`` run modules on other
parameters (per-sample gradients, model ensembling).
"""

from ._grad import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from ._module_api import functional_call, stack_module_state
from ._vmap import VmapInfo, vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "hessian",
           "functional_call", "stack_module_state", "VmapInfo"]
