"""``gradviz.func``: function transforms, as ``torch.func``.

``vmap`` is a loop over the batch dimension, not a batching transform (Note [vmap is a loop]
in ``_vmap.py``); ``grad``, ``vjp`` and ``jacrev`` run on the engine, ``jvp`` and ``jacfwd``
on forward-mode AD (Note [Function transforms on the engine] in ``_grad.py``).
"""

from ._grad import grad, grad_and_value, jacfwd, jacrev, jvp, vjp
from ._vmap import VmapInfo, vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jacrev", "jvp", "jacfwd", "VmapInfo"]
