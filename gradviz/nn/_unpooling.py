"""Max unpooling: ``max_unpool1d/2d/3d`` and ``MaxUnpool1d/2d/3d``, the partial inverse of max
pooling with ``return_indices=True`` (op in :mod:`gradviz.ops._unpool`).

As in PyTorch, the output size is ``(in - 1) * stride - 2 * padding + kernel_size`` per spatial
dim unless ``output_size`` picks another within ``stride`` of it; the 1-D form is the 2-D op on
an unsqueezed input, squeezed back (so its output's ``grad_fn`` is ``SqueezeBackward1``).
"""

from __future__ import annotations

from ..ops import _unpool
from ._module import Module

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d", "MaxUnpool1d", "MaxUnpool2d",
           "MaxUnpool3d"]


def _ntuple(value, n):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    return value * n if len(value) == 1 else value


def _output_size(input, kernel_size, stride, padding, output_size):
    """PyTorch's ``_unpool_output_size``: the default sizes, or ``output_size`` (its spatial
    sizes, or with the batch and channel sizes in front) checked against them."""
    n = len(kernel_size)
    default = [(input.shape[input.ndim - n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        return default
    given = output_size
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, "
                         f"but it has a length of '{len(output_size)}'")
    for d in range(n):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{given}" (dim {d} must be between {low} and '
                             f"{high})")
    return [int(size) for size in output_size]


def _sizes(input, kernel_size, stride, padding, output_size, n):
    """The output's spatial sizes, from the arguments as the functions take them."""
    kernel_size = _ntuple(kernel_size, n)
    stride = _ntuple(stride, n) if stride is not None else kernel_size
    padding = _ntuple(padding, n)
    return _output_size(input, kernel_size, stride, padding, output_size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d``: each value of (N, C, L) ``input`` goes to the
    position ``indices`` names, the rest is zero. Mirrors ``torch.nn.functional.max_unpool1d``.

    Examples
    --------
    >>> import gradviz as torch
    >>> import gradviz.nn.functional as F
    >>> pooled, indices = F.max_pool1d(torch.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2, return_indices=True)
    >>> F.max_unpool1d(pooled, indices, 2)
    tensor([[[0., 3., 2., 0.]]])
    """
    size = _sizes(input, kernel_size, stride, padding, output_size, 1)
    return _unpool.max_unpool(input.unsqueeze(-1), indices.unsqueeze(-1), size + [1]).squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d`` on (N, C, H, W) or (C, H, W) ``input``. Mirrors
    ``torch.nn.functional.max_unpool2d`` (one ``MaxUnpool2DBackward0`` node)."""
    size = _sizes(input, kernel_size, stride, padding, output_size, 2)
    return _unpool.max_unpool(input, indices, size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d`` on (N, C, D, H, W) or (C, D, H, W) ``input``.
    Mirrors ``torch.nn.functional.max_unpool3d`` (one ``MaxUnpool3DBackward0`` node)."""
    size = _sizes(input, kernel_size, stride, padding, output_size, 3)
    return _unpool.max_unpool(input, indices, size)


class _MaxUnpoolNd(Module):
    """``kernel_size``, ``stride`` (default: ``kernel_size``) and ``padding`` as tuples, as
    PyTorch stores them."""

    _dims = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._dims
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, n)
        self.padding = _ntuple(padding, n)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``: ``forward(input, indices, output_size=None)``.
    Mirrors ``torch.nn.MaxUnpool1d``."""

    _dims = 1

    def forward(self, input, indices, output_size=None):
        return max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d``: ``forward(input, indices, output_size=None)``.
    Mirrors ``torch.nn.MaxUnpool2d``.

    Examples
    --------
    >>> import gradviz as torch
    >>> pool, unpool = torch.nn.MaxPool2d(2, return_indices=True), torch.nn.MaxUnpool2d(2)
    >>> pooled, indices = pool(torch.arange(16.0).reshape(1, 1, 4, 4))
    >>> unpool(pooled, indices)[0, 0]
    tensor([[ 0.,  0.,  0.,  0.],
            [ 0.,  5.,  0.,  7.],
            [ 0.,  0.,  0.,  0.],
            [ 0., 13.,  0., 15.]])
    """

    _dims = 2

    def forward(self, input, indices, output_size=None):
        return max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d``: ``forward(input, indices, output_size=None)``.
    Mirrors ``torch.nn.MaxUnpool3d``."""

    _dims = 3

    def forward(self, input, indices, output_size=None):
        return max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)
