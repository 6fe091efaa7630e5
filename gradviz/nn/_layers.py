"""Layers: ``Linear``, the activation modules and ``Sequential``."""

from __future__ import annotations

import math
from collections import OrderedDict

from .. import ops as _ops
from ..autograd import no_grad
from . import functional as F
from ._module import Module, Parameter

__all__ = ["Identity", "Linear", "ReLU", "Tanh", "Sigmoid", "Sequential"]


def _uniform_(tensor, bound: float):
    """Fill ``tensor`` with U(-bound, bound) from gradviz's generator (not torch's values)."""
    with no_grad():
        sample = _ops.rand(*tensor.shape, dtype=tensor.dtype)
        tensor.copy_(sample * (2 * bound) - bound)
    return tensor


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with PyTorch's default initialisation.

    ``weight`` (out_features, in_features) is kaiming-uniform with ``a=sqrt(5)``, i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and so is ``bias``. The values come from
    gradviz's generator, so they differ from torch's for the same seed.

    Examples
    --------
    >>> import gradviz as torch
    >>> layer = torch.nn.Linear(3, 2)
    >>> layer
    Linear(in_features=3, out_features=2, bias=True)
    >>> layer(torch.zeros(4, 3)).shape
    gradviz.Size([4, 2])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_ops.empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(_ops.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = self.in_features
        # kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound sqrt(3) * gain / sqrt(fan_in)
        bound = math.sqrt(3.0) * math.sqrt(2.0 / 6.0) / math.sqrt(fan_in) if fan_in > 0 else 0.0
        _uniform_(self.weight, bound)
        if self.bias is not None:
            _uniform_(self.bias, 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Sequential(Module):
    """Modules applied in order; built from positional modules or an ``OrderedDict``.

    Examples
    --------
    >>> import gradviz as torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    >>> [name for name, _ in net.named_parameters()]
    ['0.weight', '0.bias']
    >>> net[1]
    ReLU()
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        modules = list(self._modules.values())
        if not -len(modules) <= index < len(modules):
            raise IndexError(f"index {index} is out of range")
        return modules[index]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input
