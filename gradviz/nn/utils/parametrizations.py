"""``torch.nn.utils.parametrizations``: ``weight_norm`` as a parametrization (the weight is
``g * v / ||v||``, from the originals ``original0`` = g and ``original1`` = v).

Examples
--------
>>> import gradviz as torch
>>> layer = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2))
>>> [name for name, _ in layer.named_parameters()]
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from __future__ import annotations

from .. import _weight_norm as _wn
from .._module import Module
from . import parametrize

__all__ = ["weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _wn.weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return _wn.norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name: str = "weight", dim=0):
    """Reparametrize ``module.<name>`` as magnitude times direction (Salimans & Kingma), norms
    taken over every dimension but ``dim`` (``None``: over all); returns the module."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module
