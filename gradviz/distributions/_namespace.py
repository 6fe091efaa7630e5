"""The names the distributions call as ``gradviz.<name>`` (PyTorch's code calls them
``torch.<name>``), gathered from the layers below.

Each distribution module imports this module as ``gradviz``, so its code reads as PyTorch's
does. It used to ``import gradviz``: the package that imports the distributions, a cycle that
worked only while the package happened to have set every name a module read at import
(``sample_shape=gradviz.Size()`` defaults). docs/architecture.md places the distributions in
the library layer, above autograd and ops; this module is that edge, written once.
"""

from .. import autograd
from .._tensor import Size, Tensor
from ..autograd import enable_grad, no_grad
from ..dtypes import bool, finfo, get_default_dtype, long  # noqa: A004 - torch's dtype names
from ..ops import (  # noqa: A004 - torch's function names
    abs,
    all,
    arange,
    as_tensor,
    atanh,
    bernoulli,
    broadcast_shapes,
    broadcast_tensors,
    clamp,
    digamma,
    erf,
    erfinv,
    exp,
    expm1,
    eye,
    flip,
    full,
    full_like,
    gather,
    inverse,
    isclose,
    lgamma,
    log,
    log1p,
    log_softmax,
    logit,
    logsumexp,
    manual_seed,
    matmul,
    multinomial,
    normal,
    ones_like,
    rand,
    randn,
    sigmoid,
    softmax,
    stack,
    sum,
    tensor,
    where,
    xlogy,
    zeros_like,
)

__all__ = ["autograd", "Size", "Tensor", "enable_grad", "no_grad", "bool", "finfo", "get_default_dtype", "long",
           "abs", "all", "arange", "as_tensor", "atanh", "bernoulli", "broadcast_shapes",
           "broadcast_tensors", "clamp", "digamma", "erf", "erfinv", "exp", "expm1", "eye", "flip",
           "full", "full_like", "gather", "inverse", "isclose", "lgamma", "log", "log1p",
           "log_softmax", "logit", "logsumexp", "manual_seed", "matmul", "multinomial", "normal", "ones_like",
           "rand", "randn", "sigmoid", "softmax", "stack", "sum", "tensor", "where", "xlogy",
           "zeros_like"]
