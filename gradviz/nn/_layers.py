"""Layers: ``Linear``, the activation modules, ``Flatten``/``Unflatten``, ``Dropout`` and the
containers ``Sequential``, ``ModuleList`` and ``ModuleDict``."""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from collections.abc import Mapping

from .. import ops as _ops
from .._tensor import Tensor
from . import functional as F
from ._module import Module, Parameter, _typename
from .init import _uniform_

__all__ = ["Identity", "Linear", "ReLU", "Tanh", "Sigmoid", "Sequential", "Softmax", "LogSoftmax",
           "LeakyReLU", "ELU", "GELU", "SiLU", "Softplus", "Flatten", "Unflatten", "Dropout",
           "ModuleList", "ModuleDict", "ReLU6", "SELU", "Mish", "Hardswish", "Hardsigmoid",
           "Hardtanh", "CELU", "LogSigmoid", "Softsign", "Tanhshrink", "Softmin", "ParameterList",
           "ParameterDict"]


class Identity(Module):
    """Returns its input unchanged (any constructor arguments are ignored).

    Mirrors ``torch.nn.Identity``."""

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
        # Straight from the table: ``self.weight`` first fails the normal attribute lookup and
        # ends in Module.__getattr__. What takes a parameter out of the table (a
        # parametrization, weight_norm) leaves the normal lookup to find its replacement.
        params = self._parameters
        weight = params.get("weight")
        if weight is None or "bias" not in params:
            return F.linear(input, self.weight, self.bias)
        return F.linear(input, weight, params["bias"])

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    """Applies ``relu`` elementwise: ``max(x, 0)``. Mirrors ``torch.nn.ReLU``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """Applies ``tanh`` elementwise. Mirrors ``torch.nn.Tanh``."""

    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    """Applies the logistic sigmoid ``1 / (1 + exp(-x))`` elementwise.

    Mirrors ``torch.nn.Sigmoid``."""

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

    def _key(self, index) -> str:
        size = len(self)
        index = operator.index(index)
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of range")
        return list(self._modules)[index % size]

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[index]))
        return self._modules[self._key(index)]

    def __setitem__(self, index: int, module) -> None:
        setattr(self, self._key(index), module)

    def __delitem__(self, index) -> None:
        keys = list(self._modules)[index] if isinstance(index, slice) else [self._key(index)]
        for key in keys:
            delattr(self, key)
        # the remaining modules are renumbered "0", "1", ..., as torch does
        object.__setattr__(self, "_modules", OrderedDict(
            (str(i), module) for i, module in enumerate(self._modules.values())))

    def pop(self, index):
        module = self[index]
        del self[index]
        return module

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self, sequential):
        for layer in sequential:
            self.append(layer)
        return self

    def _check_sequential(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")

    def __add__(self, other):
        self._check_sequential(other)
        combined = Sequential()
        for layer in list(self) + list(other):
            combined.append(layer)
        return combined

    def __iadd__(self, other):
        self._check_sequential(other)
        offset = len(self)
        for i, module in enumerate(other):
            self.add_module(str(i + offset), module)
        return self

    def __mul__(self, other: int):
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        combined = Sequential()
        for _ in range(other):
            for module in self:
                combined.append(module)
        return combined

    __rmul__ = __mul__

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class Softmax(Module):
    """Applies ``softmax`` along ``dim``: entries become positive and sum to 1.

    Mirrors ``torch.nn.Softmax``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Applies ``log_softmax`` along ``dim``. Mirrors ``torch.nn.LogSoftmax``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LeakyReLU(Module):
    """``x`` where positive, ``negative_slope * x`` elsewhere. Mirrors ``torch.nn.LeakyReLU``."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere. Mirrors ``torch.nn.ELU``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """The Gaussian error linear unit ``x * Phi(x)``; ``approximate='tanh'`` for the tanh form.

    Mirrors ``torch.nn.GELU``."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """The sigmoid linear unit (swish) ``x * sigmoid(x)``. Mirrors ``torch.nn.SiLU``."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``.

    Mirrors ``torch.nn.Softplus``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class _Inplace(Module):
    """An activation module whose only option is ``inplace``."""

    function = None

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self).function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU6(_Inplace):
    """``min(max(x, 0), 6)``. Mirrors ``torch.nn.ReLU6``."""

    function = F.relu6


class SELU(_Inplace):
    """The scaled exponential linear unit, ``scale * elu(x, alpha)`` with PyTorch's constants.

    Mirrors ``torch.nn.SELU``."""

    function = F.selu


class Mish(_Inplace):
    """``x * tanh(softplus(x))``. Mirrors ``torch.nn.Mish``."""

    function = F.mish


class Hardswish(_Inplace):
    """``x * relu6(x + 3) / 6``. Mirrors ``torch.nn.Hardswish``."""

    function = F.hardswish


class Hardsigmoid(_Inplace):
    """``relu6(x + 3) / 6``. Mirrors ``torch.nn.Hardsigmoid``."""

    function = F.hardsigmoid


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``. Mirrors ``torch.nn.Hardtanh``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``. Mirrors ``torch.nn.CELU``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed stably. Mirrors ``torch.nn.LogSigmoid``."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    """``x / (1 + abs(x))``. Mirrors ``torch.nn.Softsign``."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)``. Mirrors ``torch.nn.Tanhshrink``."""

    def forward(self, input):
        return F.tanhshrink(input)


class Softmin(Module):
    """``softmax(-x)`` along ``dim``. Mirrors ``torch.nn.Softmin``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Flatten(Module):
    """Flatten dims ``start_dim`` to ``end_dim`` (by default all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dimension ``dim`` into the shape ``unflattened_size``.

    Mirrors ``torch.nn.Unflatten``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)  # as torch's (and its errors)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode (gradviz's generator draws the
    mask, so it differs from torch's); the identity in ``eval()`` mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class ModuleList(Module):
    """A list of modules, registered as children named ``"0"``, ``"1"``, ...

    Examples
    --------
    >>> import gradviz as torch
    >>> layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
    >>> layers
    ModuleList(
      (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
    )
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, index: int) -> int:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of range")
        return index % n

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ModuleList(list(self._modules.values())[index])
        return self._modules[str(self._index(index))]

    def __setitem__(self, index: int, module) -> None:
        self.add_module(str(self._index(index)), module)

    def __delitem__(self, index) -> None:
        modules = list(self._modules.values())
        del modules[index if isinstance(index, slice) else self._index(index)]
        self._modules.clear()
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, module in enumerate(list(self) + list(other)):
            combined.add_module(str(i), module)
        return combined

    def pop(self, index):
        module = self[index]
        del self[index]
        return module

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            'Module [ModuleList] is missing the required "forward" function')

    def __repr__(self) -> str:
        # like torch: runs of identical children print once, as "(0-2): 3 x Linear(...)"
        reprs = [repr(module) for module in self]
        name = type(self).__name__  # (ParametrizationList too)
        if not reprs:
            return name + "()"
        blocks = []  # [first index, last index, repr]
        for i, text in enumerate(reprs):
            if blocks and blocks[-1][2] == text:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, text])
        lines = []
        for first, last, text in blocks:
            text = text.replace("\n", "\n  ")
            if first == last:
                lines.append(f"({first}): {text}")
            else:
                lines.append(f"({first}-{last}): {last - first + 1} x {text}")
        return name + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered as children under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str):
        return self._modules[key]

    def __setitem__(self, key: str, module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            'Module [ModuleDict] is missing the required "forward" function')


def _parameter_line(key, value, type_text):
    if isinstance(value, Tensor):
        size = "x".join(str(n) for n in value.shape)
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        return f"  ({key}): {kind} containing: [{type_text(value)} of size {size}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


def _as_parameter(value):
    """A tensor stored in a ParameterList/Dict becomes a Parameter (requiring grad), as in
    torch."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters, registered under the names ``"0"``, ``"1"``, ..."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, index: int) -> int:
        if not -self._size <= index < self._size:
            raise IndexError(f"index {index} is out of range")
        return index % self._size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList([self[i] for i in range(self._size)[index]])
        return getattr(self, str(self._index(index)))

    def __setitem__(self, index: int, value) -> None:
        setattr(self, str(self._index(index)), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self._size += 1
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values):
        for value in values:
            self.append(value)
        return self

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            'Module [ParameterList] is missing the required "forward" function')

    def extra_repr(self) -> str:
        return "\n".join(_parameter_line(i, p, lambda t: repr(t.dtype))
                         for i, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters, registered under their keys."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def update(self, parameters) -> None:
        """Add the entries of ``parameters``: an OrderedDict or ParameterDict in its order, a
        plain mapping in sorted key order (as torch), or (key, value) pairs in order."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = parameters.items()
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        else:
            items = parameters
        for key, value in items:
            self[key] = value

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            'Module [ParameterDict] is missing the required "forward" function')

    def extra_repr(self) -> str:
        return "\n".join(_parameter_line(k, p, _typename) for k, p in self.items())

