"""``gradviz.nn.grad`` (also ``nn.functional.grad``): the gradients of a convolution with
respect to its input or its weight, as ``torch.nn.grad``, which custom autograd Functions call
in their backward (PyTorch's "fusing convolution and batch norm" tutorial).

PyTorch computes them with its convolution's backward kernel; gradviz takes them from the same
convolution's backward rule: the convolution is run on a zero tensor of the requested shape
and differentiated with ``grad_output`` (``autograd.grad``). As in PyTorch, the result is
differentiable when the weight (or input) or ``grad_output`` requires grad and grad mode is on.
"""

from __future__ import annotations

from .. import ops as _ops
from ..autograd import enable_grad, grad, is_grad_enabled
from . import _functional_core, _volumetric

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def _input_grad(conv, input_size, weight, grad_output, stride, padding, dilation, groups):
    differentiable = is_grad_enabled() and (weight.requires_grad or grad_output.requires_grad)
    with enable_grad():
        input = _ops.zeros(tuple(input_size), dtype=grad_output.dtype, requires_grad=True)
        output = conv(input, weight, None, stride, padding, dilation, groups)
    return grad(output, input, grad_output, create_graph=differentiable)[0]


def _weight_grad(conv, input, weight_size, grad_output, stride, padding, dilation, groups):
    differentiable = is_grad_enabled() and (input.requires_grad or grad_output.requires_grad)
    with enable_grad():
        weight = _ops.zeros(tuple(weight_size), dtype=grad_output.dtype, requires_grad=True)
        output = conv(input, weight, None, stride, padding, dilation, groups)
    return grad(output, weight, grad_output, create_graph=differentiable)[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``conv1d`` with respect to an input of shape ``input_size``."""
    return _input_grad(_functional_core.conv1d, input_size, weight, grad_output, stride, padding,
                       dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``conv1d`` with respect to a weight of shape ``weight_size``."""
    return _weight_grad(_functional_core.conv1d, input, weight_size, grad_output, stride, padding,
                        dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``conv2d`` with respect to an input of shape ``input_size``.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.arange(9.0).reshape(1, 1, 3, 3).requires_grad_()
    >>> w = torch.tensor([[[[1.0, -1.0]]]])
    >>> out = torch.nn.functional.conv2d(x, w)
    >>> g = torch.ones_like(out)
    >>> torch.equal(torch.nn.grad.conv2d_input(x.shape, w, g), torch.autograd.grad(out, x, g)[0])
    True
    """
    return _input_grad(_functional_core.conv2d, input_size, weight, grad_output, stride, padding,
                       dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``conv2d`` with respect to a weight of shape ``weight_size``."""
    return _weight_grad(_functional_core.conv2d, input, weight_size, grad_output, stride, padding,
                        dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``conv3d`` with respect to an input of shape ``input_size``."""
    return _input_grad(_volumetric.conv3d, input_size, weight, grad_output, stride, padding,
                       dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``conv3d`` with respect to a weight of shape ``weight_size``."""
    return _weight_grad(_volumetric.conv3d, input, weight_size, grad_output, stride, padding,
                        dilation, groups)
