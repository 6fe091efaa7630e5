"""``Variable``, the pre-0.4 wrapper that old tutorials still import
(``from torch.autograd import Variable``): calling it gives a tensor sharing the data, detached
from any graph, that requires grad if asked; every tensor is an instance of it."""

from __future__ import annotations

import warnings

from .._tensor import Tensor

__all__ = ["Variable"]


class VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=VariableMeta):
    """``Variable(tensor, requires_grad=False)``: ``tensor.detach()`` with that flag.

    Examples
    --------
    >>> import gradviz as torch
    >>> from gradviz.autograd import Variable
    >>> x = Variable(torch.ones(2), requires_grad=True)
    >>> x.requires_grad, x.is_leaf, isinstance(x, Variable)
    (True, True, True)
    """

    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        return data.detach().requires_grad_(requires_grad)
