"""``gradviz.nn.parallel``: ``DataParallel`` as PyTorch has it on a machine without an
accelerator.

There PyTorch's ``DataParallel(module)`` keeps no devices (``device_ids`` is ``[]``) and its
forward calls ``module`` on the whole batch, so a script written for several GPUs runs
unchanged on a CPU; gradviz's does the same. The state dict keys gain the ``module.`` prefix,
as in PyTorch. ``data_parallel``, the function, needs a device and raises PyTorch's error.
"""

from __future__ import annotations

from ._module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    """Run ``module`` on the whole batch: with no accelerator there is nothing to split it
    across (``device_ids`` is ``[]``, as in PyTorch on a CPU)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """PyTorch's error on a machine without an accelerator (``DataParallel`` runs there)."""
    raise RuntimeError("device type could not be determined")
