"""The functional forms ``gradviz.nn.functional`` defines itself: activations, ``linear``,
dropout, the losses, normalization, convolution and pooling.

They record the nodes PyTorch records: ``linear`` with a bias is one ``AddmmBackward0``; the
losses PyTorch fuses are single ops of :mod:`gradviz.ops._loss` (``MseLossBackward0``,
``NllLossBackward0`` after ``LogSoftmaxBackward0`` for ``cross_entropy``, ...); ``l1_loss``
and class-probability ``cross_entropy`` are composites, as in PyTorch.

Note [Functional layers]: this module sits below the other ``nn`` modules, which import it
(as ``F``) for what they build on. :mod:`gradviz.nn.functional` only gathers the public
namespace, and none of the modules it gathers imports it back, so nothing imports in a cycle
and no import has to hide in a function body.
"""

from __future__ import annotations

import contextvars

import numpy as np

from gradviz_ext import engine as _engine

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import Tensor, _int_arg, _not_a_tensor, _wrap
from ..autograd import no_grad
from ..ops import _activation as _act
from ..ops import _conv, _loss, _parametric, _separable, gelu, logsigmoid, sigmoid, softplus, softsign, tanh, tanhshrink
from ..ops._creation import _allocated
from ..ops._inplace import inplace as _inplace
from ..ops._nn import NormStatistics as _NormStatistics
from ..ops._pointwise import _broadcast_error
from ..ops._shape import view_to as _view_to
from ._warn import warn as _warn

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "softplus", "gelu", "leaky_relu",
           "rrelu", "elu", "silu", "linear", "mse_loss", "nll_loss", "cross_entropy"]

_REDUCTIONS = ("none", "mean", "sum")


def relu(input, inplace: bool = False):
    """The rectified linear unit ``max(input, 0)``, elementwise (``inplace=True``: ``relu_``).

    Mirrors ``torch.nn.functional.relu``."""
    return input.relu_() if inplace else _ops.relu(input)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """``input`` where positive, ``negative_slope * input`` elsewhere.

    Mirrors ``torch.nn.functional.leaky_relu``."""
    if inplace:
        # its own op, LeakyReluBackward1 (Note [In-place activations])
        return _inplace(input, lambda old: _act.leaky_relu_result(old, negative_slope))
    return _ops.leaky_relu(input, negative_slope)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False):
    """Randomized leaky ReLU (slopes drawn in training, their mean otherwise)."""
    if inplace:
        return _inplace(input, lambda old: _act.rrelu_result(old, lower, upper, training))
    return _ops.rrelu(input, lower, upper, training)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """``input`` where positive, ``alpha * (exp(input) - 1)`` elsewhere.

    Mirrors ``torch.nn.functional.elu``."""
    if inplace:
        return _inplace(input, lambda old: _act.elu_result(old, alpha))
    return _ops.elu(input, alpha)


def _activation(op, input, inplace, *args):
    """``op(input, *args)``, or written into ``input`` when ``inplace`` (recorded as torch)."""
    if inplace:
        return _inplace(input, lambda old: op(old, *args))
    return op(input, *args)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """``input`` clamped to ``[min_val, max_val]`` (``HardtanhBackward0``). Mirrors
    ``torch.nn.functional.hardtanh``."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _activation(_ops.hardtanh, input, inplace, min_val, max_val)


def relu6(input, inplace: bool = False):
    """``min(max(input, 0), 6)``, recorded as torch records it (``HardtanhBackward0``). Mirrors
    ``torch.nn.functional.relu6``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def silu(input, inplace: bool = False):
    """``x * sigmoid(x)`` (``SiluBackward0``), written into ``input`` when ``inplace``."""
    return _activation(_ops.silu, input, inplace)


def selu(input, inplace: bool = False):
    """Scaled ELU with torch's fixed ``alpha`` and ``scale``. Mirrors
    ``torch.nn.functional.selu``."""
    if inplace:
        return _inplace(input, _act.selu_result)
    return _ops.selu(input)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``. Mirrors
    ``torch.nn.functional.celu``."""
    if inplace:
        return _inplace(input, lambda old: _act.celu_result(old, alpha))
    return _ops.celu(input, alpha)


def mish(input, inplace: bool = False):
    """``x * tanh(softplus(x))``. Mirrors ``torch.nn.functional.mish``."""
    return _activation(_ops.mish, input, inplace)


def hardswish(input, inplace: bool = False):
    """``x * relu6(x + 3) / 6``. Mirrors ``torch.nn.functional.hardswish``."""
    return _activation(_ops.hardswish, input, inplace)


def hardsigmoid(input, inplace: bool = False):
    """``relu6(x + 3) / 6``. Mirrors ``torch.nn.functional.hardsigmoid``."""
    return _activation(_ops.hardsigmoid, input, inplace)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x, dim)``; without ``dim``, torch's deprecated guess (with a warning)."""
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim, _stacklevel)
    return _ops.softmin(input, dim, dtype=dtype)


def _implicit_dim(name, ndim, stacklevel):
    """torch's ``_get_softmax_dim``: a deprecated guess at the dimension, with a warning."""
    _warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
          "include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(x) / sum(exp(x), dim)``; without ``dim``, torch's deprecated guess (with a warning)."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim, _stacklevel)
    return _ops.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``log(softmax(x, dim))``, computed stably; without ``dim``, torch's deprecated guess."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim, _stacklevel)
    return _ops.log_softmax(input, dim, dtype=dtype)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (weight: (out_features, in_features)), recorded as PyTorch
    records it: with a bias, one ``AddmmBackward0`` node (the input flattened to 2-D and the
    result viewed back when it is not 2-D); without, ``matmul``'s nodes."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)):
        _linear_argument_error(input, weight)
    if bias is None:
        return _ops.matmul(input, weight.t())
    data = input._data
    if data.ndim == 2:
        return _ops.addmm(bias, input, weight.t())
    if data.ndim > 2 and data.flags.c_contiguous and data.shape[-1]:
        # the views' sizes computed here, not parsed (Note [Batched matmul] in
        # gradviz/ops/_linalg.py)
        shape, features = data.shape, data.shape[-1]
        rows = data.size // features
        out = _ops.addmm(bias, _view_to(input, (rows, features)), weight.t())
        if out._data.shape == (rows, weight._data.shape[0]):
            return _view_to(out, shape[:-1] + (weight._data.shape[0],))
        return out.view(*shape[:-1], weight.shape[0])  # a bias that broadcast larger: the error
    if data.ndim >= 1 and data.flags.c_contiguous:
        flat = input.view(-1, input.shape[-1]) if input.ndim != 1 else input.view(1, -1)
        return _ops.addmm(bias, flat, weight.t()).view(*input.shape[:-1], weight.shape[0])
    return _ops.matmul(input, weight.t()) + bias


def _linear_argument_error(input, weight):
    for position, (name, value) in enumerate((("input", input), ("weight", weight)), 1):
        if not isinstance(value, Tensor):  # model(numpy_array): torch's TypeError
            kind = type(value)
            kind = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
            raise TypeError(f"linear(): argument '{name}' (position {position}) must be Tensor, not {kind}")


def legacy_reduction(size_average, reduce, reduction):
    """``reduction`` from the pre-1.0 ``size_average`` / ``reduce`` flags when either is given
    (``nn.MSELoss(size_average=False)`` sums), with torch's deprecation warning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "mean" if size_average and reduce else "sum" if reduce else "none"
    _warn(f"size_average and reduce args will be deprecated, please use reduction='{result}' "
          "instead.", UserWarning, stacklevel=3)
    return result


def _reduce(loss, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
             weight=None):
    """Mean (or sum, or elementwise) squared error ``(input - target) ** 2`` (one
    ``MseLossBackward0`` node, as in PyTorch)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input._data.shape != target._data.shape:
        _check_target_size(input, target)
        error = _broadcast_error(input._data, target._data)
        if error is not None:
            raise error
    _check_float_loss(input, target, "mse_cpu")
    if weight is not None:
        return _reduce((input - target) ** 2 * weight, reduction)
    return _loss.mse_loss(input, target, reduction)


def _type_word(dtype):
    """torch's C++ name of a dtype (``Long``, ``Float``), as its kernel errors print it."""
    return _TYPE_WORDS.get(dtype.name, dtype.name)


def _check_float_loss(input, target, kernel):
    """torch's fused losses have floating-point kernels only: two integer (or bool) operands
    are its NotImplementedError naming the kernel and their promoted type."""
    promoted = _dtypes.result_type(input, target)
    if not promoted.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_type_word(promoted)}\'')


def _check_castable(result, dtype):
    """torch writes some results into a tensor of ``dtype`` (the input's, the target's): a
    floating-point result cannot go into an integer or bool one, nor an integer into a bool
    one (torch's ``can_cast``)."""
    if ((result.is_floating_point and not dtype.is_floating_point)
            or (result is not _dtypes.bool and dtype is _dtypes.bool)):
        raise RuntimeError(f"result type {_type_word(result)} can't be cast to the desired output "
                           f"type {_type_word(dtype)}")


def _check_target_size(input, target):
    """torch broadcasts a target of another size, with this warning (a classic bug: a (N, 1)
    prediction against an (N,) target gives an (N, N) loss)."""
    if tuple(input.shape) != tuple(target.shape):
        _warn(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.", UserWarning, stacklevel=3)


def _class_nll(input, target, ignore_index, reduction):
    """``nll_loss`` of (N, C) log-probabilities and N int64 class indices, all in range and
    none ignored, without a weight, reduced by mean or sum: the loss of every classifier's
    step, which the checks below take 6 us to reach (the same node and bits: Note [Picked
    log-probabilities]); None for anything else, which the general path handles."""
    shape, labels = input._data.shape, target._data
    if (reduction != "mean" and reduction != "sum") or len(shape) != 2 or not shape[0]:
        return None
    count, classes = shape
    if (labels.shape != (count,) or labels.dtype != np.int64 or 0 <= ignore_index < classes
            or target._version_counter.inference or labels.min() < 0 or labels.max() >= classes):
        return None
    return _nll_of_counted_targets(input, labels.copy(), reduction)  # a copy: the node keeps it


def _nll_of_counted_targets(input, labels, reduction):
    """``nll_loss`` when every target counts, with weight 1 (in range, none ignored, no weight):
    the coefficients without their masks, -1 / count at each target for a mean (as ones /
    ones.sum() gives it), -1 otherwise; for a 2-D input the picks of Note [Picked
    log-probabilities], one nonzero coefficient per row."""
    shape = input._data.shape
    count, classes = labels.shape[0], shape[-1]
    dtype = input._data.dtype
    coefficients = np.zeros((count, classes), dtype)
    rows = np.arange(count)
    coefficient = np.asarray(-(1.0 / count) if reduction == "mean" else -1.0, dtype)
    coefficients[rows, labels] = coefficient
    if len(shape) == 1:
        coefficients = coefficients.reshape(classes)
    picks = (rows, labels, coefficient) if len(shape) == 2 else None
    return _loss.nll_loss(input, coefficients, reduction, False, picks)


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """Negative log likelihood of class indices: ``-weight[t] * input[n, t]`` with
    ``t = target[n]``, averaged over the weights (one ``NllLossBackward0`` node).

    ``input`` is (N, C) log-probabilities (or (C,) with a 0-d ``target``); ``target`` holds
    class indices. Targets equal to ``ignore_index`` contribute nothing, and the mean is over
    the others, as in PyTorch.
    """
    if weight is None and size_average is None and reduce is None:
        loss = _class_nll(input, target, ignore_index, reduction)
        if loss is not None:
            return loss
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    shape, target_shape = input._data.shape, target._data.shape  # plain tuples: no Size objects
    ndim, target_ndim = len(shape), len(target_shape)
    if ndim > 2:  # (N, C, d1, ...) scores for (N, d1, ...) targets: C moved last, flattened
        expected = [shape[0]] + list(shape[2:])
        if list(target_shape) != expected:
            raise RuntimeError(f"Expected target size {expected}, got {list(target_shape)}")
        flat = _ops.movedim(input, 1, -1).reshape(-1, shape[1])
        loss = nll_loss(flat, target.reshape(-1), weight, None, ignore_index, None, reduction)
        return loss.view(*target_shape) if reduction == "none" else loss
    # torch's order of checks: the target's dims, the batch size (2-D input), then its dtype
    # (before the size for a 1-D input)
    if ndim == 2 and target_ndim > 1 and target_shape[0] != shape[0]:
        raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size "
                         f"({target_shape[0]}).")
    if target_ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if ndim == 2 and (target_ndim == 0 or target_shape[0] != shape[0]):
        raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size "
                         f"({target_shape[0] if target_ndim else 1}).")
    if target._data.dtype != np.int64 and target._data.dtype != np.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{_TYPE_WORDS.get(target.dtype.name, target.dtype.name)}")
    labels = target._data.astype(np.int64).reshape(-1)  # a copy: the node keeps it
    if ndim == 1:
        if target_ndim == 1 and target_shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{target_shape[0]}")
    elif ndim != 2:
        raise NotImplementedError("nll_loss: only (N, C) or (C,) inputs are supported")
    if (target._version_counter.inference or (weight is not None and weight.is_inference())) and (
            _engine.is_grad_enabled() and input.requires_grad):
        # torch's NllLossBackward0 saves the target and the weight (here folded into
        # coefficients): an inference tensor among them cannot be saved
        raise RuntimeError(_engine.INFERENCE_SAVED_MESSAGE)
    classes = shape[-1]
    if weight is not None and weight.numel() != classes:  # numpy would broadcast or fail
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes "
                           f"but got weight tensor of shape: {list(weight.shape)}")
    dtype = input._data.dtype
    count = labels.shape[0]
    if (weight is None and count and labels.min() >= 0 and labels.max() < classes
            and not (0 <= ignore_index < classes and (labels == ignore_index).any())):
        return _nll_of_counted_targets(input, labels, reduction)
    keep = labels != ignore_index
    bad = labels[keep & ((labels < 0) | (labels >= classes))]
    if bad.size:
        raise IndexError(f"Target {int(bad[0])} is out of bounds.")
    safe = np.where(keep, labels, 0)
    scales = (weight.detach().numpy().astype(np.float64)[safe] if weight is not None
              else np.ones(labels.shape))
    scales = np.where(keep, scales, 0.0)
    # a mean over no targets (all ignored, or none): NaN with zero gradients, as in torch; over
    # targets of zero weight: 0 / 0 in every coefficient, NaN gradients too
    no_weight = reduction == "mean" and not keep.any()
    if reduction == "mean" and not no_weight:
        with np.errstate(divide="ignore", invalid="ignore"):
            scales = scales / scales.sum()
    # in the input's dtype: each value cast as a float64 array's astype would, without the
    # float64 array (+0 where ignored, as torch)
    coefficients = np.zeros((labels.shape[0], classes), dtype)
    coefficients[np.arange(labels.shape[0]), safe] = 0.0 - scales
    coefficients = coefficients.reshape(tuple(input.shape[:-1]) + (classes,))
    return _loss.nll_loss(input, coefficients, reduction, no_weight)


_TYPE_WORDS = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "bool": "Bool", "float32": "Float", "float64": "Double", "float16": "Half"}


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """``nll_loss(log_softmax(input, 1), target)`` for class indices; for class probabilities
    (a float ``target`` shaped like ``input``), ``-(target * log_softmax(input)).sum(1)``.

    Examples
    --------
    >>> import gradviz as torch
    >>> import gradviz.nn.functional as F
    >>> logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]], requires_grad=True)
    >>> F.cross_entropy(logits, torch.tensor([0, 1]))
    tensor(0.1269, grad_fn=<NllLossBackward0>)
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if not isinstance(target, Tensor):
        raise _not_a_tensor(target, "cross_entropy_loss", "target")
    shape = input._data.shape  # a plain tuple: no Size objects
    dim = 0 if len(shape) == 1 else 1
    probabilities = target._data.shape == shape  # torch: same shapes mean class probabilities
    if probabilities:  # checked before the log_softmax, in torch's order
        if not target.dtype.is_floating_point:
            raise RuntimeError("Expected floating point type for target with class probabilities, got "
                               f"{_TYPE_WORDS.get(target.dtype.name, target.dtype.name)}")
        if ignore_index != -100:
            raise RuntimeError("ignore_index is not supported for floating point target")
    if not shape:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions: cross_entropy "
                         "takes logits of shape (C,) or (N, C, ...), not a 0-d tensor")
    log_probs = log_softmax(input, dim)
    classes = shape[dim]
    if probabilities:
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / classes
        terms = log_probs * target if weight is None else log_probs * target * _class_view(weight, input, dim)
        loss = -terms.sum(dim)
        if reduction == "mean":
            return loss.sum() / (input.numel() // classes) if input.ndim > 1 else loss
        return _reduce(loss, reduction)
    loss = nll_loss(log_probs, target, weight, None, ignore_index, None, reduction)
    if label_smoothing <= 0:
        return loss
    # PyTorch: (1 - eps) * nll + eps * (mean over classes of -log p), same reduction
    smooth = -(log_probs if weight is None else log_probs * _class_view(weight, input, dim)).sum(dim)
    keep = target.ne(ignore_index)
    ignoring = not bool(keep.numpy().all())
    if ignoring:
        smooth = _ops.where(keep, smooth, 0.0)
    if reduction == "mean":
        if weight is not None:
            index = _ops.where(keep, target, 0) if ignoring else target
            scale = _ops.index_select(weight, 0, index.reshape(-1))
            if ignoring:
                scale = _ops.where(keep.reshape(-1), scale, 0.0)
            smooth = smooth.sum() / scale.sum()
        elif ignoring:
            smooth = smooth.sum() / keep.sum().to(smooth.dtype)
        else:
            smooth = smooth.mean()
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - label_smoothing) * loss + smooth * (label_smoothing / classes)


def _class_view(weight, input, dim):
    """``weight`` (C,) shaped to broadcast along the class dim of ``input``."""
    shape = [1] * input.ndim
    shape[dim] = weight.shape[0]
    return weight.reshape(shape)


# ---- more losses ---------------------------------------------------------------------------

def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """Mean (or sum, or elementwise) absolute error ``|input - target|`` (composite, as in
    PyTorch: ``MeanBackward0`` over ``AbsBackward0``)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_target_size(input, target)
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_target_size(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:  # torch: l1_loss itself (its nodes, its integer rules)
        return _reduce((input - target).abs(), reduction)
    _check_float_loss(input, target, "smooth_l1_cpu")
    return _loss.smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``.

    The result has the input's dtype, as torch's kernel writes it (a float64 target against a
    float32 input gives a float32 loss); an integer input with a float target is torch's
    cast error."""
    _check_reduction(reduction)
    _check_target_size(input, target)
    _check_castable(_dtypes.result_type(input, target), input.dtype)
    _check_float_loss(input, target, "huber_cpu")
    if not delta > 0:  # a zero delta would divide the quadratic part away
        raise RuntimeError(f"huber_loss does not support non-positive values for delta. (got delta={delta})")
    if target.dtype is not input.dtype:
        target = target.to(input.dtype)
    if weight is not None:
        diff = (input - target).abs()
        loss = _ops.where(diff < delta, 0.5 * diff ** 2, delta * (diff - 0.5 * delta))
        return _reduce(loss * weight, reduction)
    return _loss.huber_loss(input, target, reduction, delta)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction: str = "mean"):
    """``-(t log x + (1 - t) log(1 - x))`` for probabilities ``x``, each log clamped at -100
    as in PyTorch (one ``BinaryCrossEntropyBackward0`` node)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         "size.")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {_TYPE_WORDS.get(target.dtype.name)} but expected "
                           f"{_TYPE_WORDS.get(input.dtype.name)}")
    values = input.numpy(force=True)
    if not ((values >= 0) & (values <= 1)).all():  # NaN too, as in torch
        raise RuntimeError("all elements of input should be between 0 and 1")
    targets = target.numpy(force=True)
    if not ((targets >= 0) & (targets <= 1)).all():  # NaN too, as in torch
        raise RuntimeError("all elements of target should be between 0 and 1")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        weight = weight.expand(*input.shape)
    return _loss.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction: str = "mean", pos_weight=None):
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from the logits ``x`` (one
    ``BinaryCrossEntropyWithLogitsBackward0`` node)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    # torch computes log_sigmoid(input), then writes into a tensor of the target's dtype
    # ((1 - target).mul_(input)...): the loss has the target's dtype, whatever the input's
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"log_sigmoid_cpu" not implemented for '
                                  f"'{_type_word(input.dtype)}'")
    if target.dtype is _dtypes.bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    _check_castable(input.dtype, target.dtype)
    for factor in (pos_weight, weight):  # torch's error, not numpy's ValueError
        error = None if factor is None else _broadcast_error(factor._data, target._data)
        if error is not None:
            raise error
    if input.dtype is not target.dtype:
        return _reduce(_bce_with_logits_in_place_order(input, target, weight, pos_weight),
                       reduction)
    return _loss.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def _bce_with_logits_in_place_order(input, target, weight, pos_weight):
    """The elementwise BCE-with-logits of an input and a target of two float dtypes, in
    torch's order and roundings: ``log_sigmoid`` in the input's dtype, each in-place step
    (``(1 - target).mul_(input).sub_(...)``, ``.mul_(weight)``) computed in the promoted dtype
    and stored in the target's."""
    dtype = target.dtype
    log_sigmoid = logsigmoid(input)
    loss = ((1 - target) * input).to(dtype)
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (loss - (log_weight * log_sigmoid).to(log_weight.dtype)).to(dtype)
    else:
        loss = (loss - log_sigmoid).to(dtype)
    if weight is not None:
        loss = (loss * weight).to(dtype)
    return loss


def one_hot(tensor, num_classes: int = -1):
    """(…, num_classes) int64 tensor with a 1 at each index of ``tensor``."""
    if tensor.dtype.name != "int64":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    values = tensor.numpy()
    num_classes = _int_arg(num_classes, "num_classes")
    if num_classes == -1:
        if not values.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    if values.size and values.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if values.size and values.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    shape = values.shape + (num_classes,)  # (not rows of an eye(num_classes): num_classes² ints)
    out = _allocated(lambda: np.zeros(shape, dtype=np.int64), shape, np.dtype(np.int64))
    np.put_along_axis(out, values[..., None], 1, axis=-1)
    return _wrap(out)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (in
    training; the identity otherwise). The mask comes from gradviz's generator."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return dropped(input, inplace)
    check_dropout_dtype(input)
    keep = _ops.rand(*input.shape, dtype=input.dtype) >= p
    mask = keep.to(input.dtype) * (1.0 / (1.0 - p))
    return input.mul_(mask) if inplace else input * mask


def check_dropout_dtype(input, holder=None):
    """torch scales the kept elements in the input's dtype (or ``holder``'s): an integer or
    bool input cannot hold them (its cast error; ``p`` of 0 or 1 needs no scaling and works)."""
    _check_castable(_dtypes.float32, holder or input.dtype)


def dropped(input, inplace):
    """Everything dropped (``p == 1``): torch's ``input * zeros((), input's dtype)``, so zeros
    of the input's dtype, integers and bool too."""
    zero = _ops.zeros((), dtype=input.dtype)
    return input.mul_(zero) if inplace else input * zero


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    norm = _ops.norm(input, p, dim, keepdim=True)
    return input / _ops.clamp_min(norm, eps).expand_as(input)  # ClampMinBackward0, as torch


__all__ += ["l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
            "binary_cross_entropy_with_logits", "one_hot", "dropout", "normalize"]


def _index_types_error(input, function):
    """torch's error for indices that are not int64 or int32, checked by ``function``."""
    position = 2 if function == "embedding_renorm_" else 1
    return RuntimeError(f"Expected tensor for argument #{position} 'indices' to have one of the "
                        f"following scalar types: Long, Int; but got {input.type()} instead (while "
                        f"checking arguments for {function})")


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """torch's ``embedding_renorm_`` under no_grad: each row of ``weight`` that ``input`` names
    (once, in sorted order) whose ``norm_type``-norm exceeds ``max_norm`` is scaled in place by
    ``max_norm / (norm + 1e-7)`` (computed in double, applied in the weight's dtype); one
    version bump, as torch's one in-place op."""
    if weight.ndim != 2:
        raise RuntimeError(f"Expected 2-dimensional tensor, but got {weight.ndim}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           "embedding_renorm_)")
    if input.dtype.name not in ("int64", "int32"):
        raise _index_types_error(input, "embedding_renorm_")
    rows = weight.shape[0]
    named = np.unique(input._data)
    outside = named[(named < -rows) | (named >= rows)]
    if outside.size:
        raise IndexError(f"select(): index {outside[0]} out of range for tensor of size "
                         f"{list(weight.shape)} at dimension 0")
    named = np.unique(named % rows)  # torch's select wraps a negative index
    with no_grad():
        norms = _ops.norm(weight[_ops.tensor(named)], norm_type, 1).numpy().astype(np.float64)
        over = norms > max_norm
        scale = (max_norm / (norms[over] + 1e-7)).astype(weight._data.dtype)
        chosen = _ops.tensor(named[over])
        # one in-place op, a version bump even when no row is over
        weight.index_copy_(0, chosen, weight[chosen] * _ops.tensor(scale[:, None]))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """The rows of ``weight`` at the indices ``input`` (one ``EmbeddingBackward0`` node);
    the ``padding_idx`` row gets no gradient. ``max_norm`` first renormalizes, in place, the
    rows ``input`` names whose ``norm_type``-norm exceeds it; ``scale_grad_by_freq`` divides
    each row's gradient by its index's count in ``input``."""
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported by gradviz")
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= rows
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if not isinstance(input, Tensor):
        raise TypeError(f"embedding(): argument 'indices' must be Tensor, not "
                        f"{type(input).__name__}")
    if weight.ndim != 2:  # a 1-d weight would give one number per index, silently
        raise RuntimeError("'weight' must be 2-D")
    if input.dtype.name not in ("int64", "int32"):
        raise _index_types_error(input, "embedding")
    indices = input.numpy()
    if indices.size and (indices.min() < 0 or indices.max() >= rows):
        raise IndexError("index out of range in self")
    return _ops.embedding(weight, input, padding_idx, scale_grad_by_freq)


def _check_norm_dtypes(input, *parameters):
    """torch's CPU normalization kernels compute in one dtype: parameters (weight, bias,
    running statistics) of another dtype than the input are an error, except float32
    parameters of a float16 input (torch's mixed-type path, computed here in the input's
    dtype)."""
    dtype = input._data.dtype
    for parameter in parameters:
        if parameter is None or parameter._data.dtype == dtype:
            continue
        if dtype == np.float16 and parameter._data.dtype == np.float32:
            continue
        if dtype == np.float32:
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalize over the last dims ``normalized_shape`` (mean 0, biased variance 1), then
    ``* weight + bias`` (one ``NativeLayerNormBackward0`` node)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    sizes = input._data.shape  # a plain tuple: no Size objects on every call
    if sizes[len(sizes) - len(shape):] != shape or len(shape) > len(sizes):
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(n) for n in shape)}], but got input of "
                           f"size{list(input.shape)}")
    for name, tensor in (("weight", weight), ("bias", bias)):
        if tensor is not None and tuple(tensor.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got "
                               f"{name} of shape {list(tensor.shape)} and normalized_shape = "
                               f"{list(shape)}")
    _check_norm_dtypes(input, weight, bias)
    return _ops.layer_norm(input, shape, weight, bias, eps)



def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x ** 2 over the last dims) + eps) * weight``, composed as torch composes
    it (``PowBackward0``, ``MeanBackward1``, ``AddBackward1``, ``RsqrtBackward0``,
    ``MulBackward0``); ``eps`` defaults to the dtype's machine epsilon."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) > input.ndim:
        raise ValueError(f"Input tensor must have at least {len(shape)} dimensions, but got "
                         f"{input.ndim}")
    if tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{', '.join(str(n) for n in shape)}], but got input of "
                           f"size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    if eps is None:
        eps = float(np.finfo(input.numpy(force=True).dtype).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = input * _ops.rsqrt(_parametric.add_scalar(input.pow(2).mean(dims, keepdim=True), eps))
    return out if weight is None else out * weight

def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each channel (dim 1) with the batch's statistics when ``training`` (updating
    ``running_mean``/``running_var`` in place with ``momentum``, the variance unbiased), else
    with the running statistics (one ``NativeBatchNormBackward0`` node)."""
    channels = input.shape[1] if input.ndim > 1 else 0
    for name, stat in (("running_mean", running_mean), ("running_var", running_var),
                       ("weight", weight), ("bias", bias)):
        if stat is not None and stat.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {stat.numel()}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"batch_norm" not implemented for \'{_type_word(input.dtype)}\' '
                                  "(normalize a float tensor: input.float())")
    _check_norm_dtypes(input, running_mean, running_var, weight, bias)
    if training:
        count = input.numel() // channels
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {input.shape}")
        statistics = _NormStatistics()  # Note [Normalization statistics once]
        out = _ops.batch_norm(input, weight, bias, eps, statistics=statistics,
                              running_mean=running_mean, running_var=running_var)
        if running_mean is not None or running_var is not None:
            dtype = input.numpy(force=True).dtype
            if running_mean is not None:
                batch_mean = statistics.mean.reshape(channels).astype(dtype, copy=False)
                _update_running(running_mean, batch_mean, momentum)
            if running_var is not None:
                unbiased = statistics.var.reshape(channels) * (count / (count - 1))
                _update_running(running_var, unbiased.astype(dtype, copy=False), momentum)
        return out
    return _ops.batch_norm(input, weight, bias, eps, running_mean.numpy(force=True),
                           running_var.numpy(force=True), running_mean=running_mean,
                           running_var=running_var)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalize each sample's ``num_groups`` groups of channels (dim 1) over the group's
    channels and the other dims (biased variance), then ``* weight + bias`` per channel (one
    ``NativeGroupNormBackward0`` node)."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    shape = list(input.shape)
    _verify_batch_size([shape[0] * shape[1] // num_groups, num_groups] + shape[2:])
    if shape[1] % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {shape} and "
                           f"num_groups={num_groups}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and (param.dim() != 1 or param.numel() != shape[1]):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape "
                               f"{list(param.shape)} and input of shape {shape}")
    _check_norm_dtypes(input, weight, bias)
    return _ops.group_norm(input, num_groups, weight, bias, eps)


def _verify_batch_size(size):
    count = size[0]
    for n in size[2:]:
        count *= n
    if count == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{size}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5):
    """Normalize each channel of each sample over its other dims, as torch does: the input
    seen as one batch of ``N * C`` channels through ``batch_norm`` (weight, bias and running
    statistics repeated ``N`` times; the running statistics then get the mean of the ``N``
    updated copies)."""
    if use_input_stats:
        spatial = 1
        for n in input.shape[2:]:
            spatial *= n
        if spatial == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {input.shape}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    batch, channels = input.shape[0], input.shape[1]

    def repeated(t):
        return None if t is None else t.repeat(batch)

    running_mean_, running_var_ = repeated(running_mean), repeated(running_var)
    shape = (1, batch * channels) + tuple(input.shape[2:])
    out = batch_norm(input.contiguous().view(shape), running_mean_, running_var_,
                     repeated(weight), repeated(bias), use_input_stats, momentum, eps)
    with no_grad():
        if running_mean is not None:
            running_mean.copy_(running_mean_.view(batch, channels).mean(0))
        if running_var is not None:
            running_var.copy_(running_var_.view(batch, channels).mean(0))
    return out.view(input.shape)


__all__ += ["layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm"]


def _update_running(stat, batch_value, momentum):
    """``stat = (1 - momentum) * stat + momentum * batch_value`` in place (its version bumps)."""
    with no_grad():
        stat.mul_(1 - momentum).add_(_ops.tensor(batch_value) * momentum)


cosine_similarity = _ops.cosine_similarity
pairwise_distance = _ops.pairwise_distance


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False):
    """``target * (log(target) - input)`` for log-probabilities ``input`` (``target``
    log-probabilities too when ``log_target``), reduced; ``"batchmean"`` divides the sum by the
    batch size (the KL divergence), ``"mean"`` by the number of elements (with torch's warning)."""
    legacy = size_average is not None or reduce is not None
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean" and not legacy:
        _warn("reduction: 'mean' divides the total loss by both the batch size and the "
              "support size.'batchmean' divides only by the batch size, and aligns with the "
              "KL div math definition.'mean' will be changed to behave the same as "
              "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = _ops.exp(target) * (target - input)
    else:
        loss = _ops.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      size_average=None, reduce=None, reduction: str = "mean"):
    """The multi-class hinge (SVM) loss: ``sum_{i != y} max(0, margin - x[y] + x[i]) ** p / C``
    for each sample."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    _check_reduction(reduction)
    batched = input.ndim == 2
    scores = input if batched else input.unsqueeze(0)
    labels = target.reshape(-1)
    if labels.shape[0] != scores.shape[0]:
        raise RuntimeError(f"inconsistent target size, expected {scores.shape[0]} but got "
                           f"{tuple(target.shape)}")
    classes = scores.shape[1]
    picked = scores.gather(1, labels.unsqueeze(1))
    margins = _ops.clamp(margin - picked + scores, min=0)
    if p == 2:
        margins = margins * margins
    if weight is not None:
        margins = margins * weight[labels].unsqueeze(1)
    own = one_hot(labels, classes).bool()
    loss = margins.masked_fill(own, 0.0).sum(1) / classes
    if not batched:
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


# ---- convolution and pooling (ops in gradviz.ops._conv) -------------------------------------------

def _batched_4d(input, what):
    """``input`` as (N, C, H, W) and whether it was unbatched (C, H, W)."""
    if input.ndim == 3:
        return input.unsqueeze(0), True
    if input.ndim < 3 and what == "avg_pool2d":  # torch's avg_pool2d reads dim -3 first
        rank = max(input.ndim, 1)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got -3): "
                         f"expected 3D (unbatched) or 4D (batched) input to {what}, but got input of size: "
                         f"{list(input.shape)}")
    if input.ndim != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to {what}, but got "
                           f"input of size: {list(input.shape)}")
    return input, False


def _same_padding(weight_shape, dilation):
    pads = []
    for k, d in zip(weight_shape, _conv._pair(dilation)):
        total = d * (k - 1)
        if total % 2:
            raise NotImplementedError("conv2d: padding='same' with an even kernel needs uneven "
                                      "padding, which gradviz does not support")
        pads.append(total // 2)
    return tuple(pads)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of (N, C, H, W) (or (C, H, W)) ``input`` with (O, C, kh, kw)
    ``weight`` (one ``ConvolutionBackward0`` node); with ``groups``, the channels split into
    groups convolved separately (a batch dim of the one op's matmul)."""
    x, unbatched = _batched_4d(input, "conv2d")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if padding == "same" and _conv._pair(stride) != (1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        padding = 0 if padding == "valid" else _same_padding(weight.shape[2:], dilation)
    _check_groups(x, weight, groups)
    geometry = _conv._Geometry(weight.shape[2:], dilation, padding, stride)
    _check_conv_geometry(geometry)
    _check_blocks(x, geometry)
    out = _conv.conv2d(x, weight, bias, geometry, groups)
    return out.squeeze(0) if unbatched else out


def _check_groups(x, weight, groups):
    """torch's checks of a convolution's channels against its weight and ``groups``."""
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {list(weight.shape)} instead")
    if weight.shape[0] % groups != 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(weight.shape)} instead")
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
                           f"input{list(x.shape)} to have {weight.shape[1] * groups} channels, "
                           f"but got {x.shape[1]} channels instead")


def _check_conv_geometry(geometry):
    """torch's checks of a convolution's stride, padding and dilation: a zero stride would
    divide by zero, a negative padding or zero dilation give a wrong result silently."""
    if min(geometry.stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(geometry.padding) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(geometry.dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got {list(geometry.dilation)}")


def _check_blocks(x, geometry):
    padded = tuple(n + 2 * p for n, p in zip(x.shape[2:], geometry.padding))
    kernel = tuple(d * (k - 1) + 1 for k, d in zip(geometry.kernel, geometry.dilation))
    if padded[0] < kernel[0] or padded[1] < kernel[1]:
        raise RuntimeError(f"Calculated padded input size per channel: ({padded[0]} x {padded[1]})"
                           f". Kernel size: ({kernel[0]} x {kernel[1]}). Kernel size can't be "
                           "greater than actual input size")


def _check_pool_output(x, geometry, what):
    """torch's pooling error for windows that do not fit (rather than convolution's)."""
    sizes = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in
             zip(x.shape[2:], geometry.padding, geometry.dilation, geometry.kernel, geometry.stride)]
    if min(sizes) >= 1:
        return
    if what == "max_pool1d":
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {sizes[1]}")
    channels, height, width = x.shape[1:]
    raise RuntimeError(f"Given input size: ({channels}x{height}x{width}). Calculated output size: "
                       f"({channels}x{sizes[0]}x{sizes[1]}). Output size is too small")


def _pool_geometry(kernel_size, stride, padding, dilation, ceil_mode, what):
    geometry = _conv._Geometry(kernel_size, dilation,
                               padding, kernel_size if stride is None or stride == [] else stride,
                               ceil_mode=bool(ceil_mode))
    (kh, kw), (sh, sw), (dh, dw) = geometry.kernel, geometry.stride, geometry.dilation
    if sh == 0 or sw == 0:  # torch's pooling checks, in its order (a zero stride would divide
        raise RuntimeError("stride should not be zero")  # by zero, a zero dilation be wrong)
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if sh < 0 or sw < 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dh} "
                           f"dilationW: {dw}")
    if min(geometry.padding) < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(geometry.padding)}")
    for side, k in zip(geometry.padding, geometry.kernel):
        if side > k // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={side}, kernel_size={k} and dilation="
                               f"{geometry.dilation[0]}")
    return geometry


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum over each ``kernel_size`` window (one ``MaxPool2DWithIndicesBackward0``)."""
    x, unbatched = _batched_4d(input, "max_pool2d")
    geometry = _pool_geometry(kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
    _check_pool_output(x, geometry, "max_pool1d" if _POOL_1D.get() else "max_pool2d")
    # unbatched as is: torch adds no nodes; the flat indices only when asked for
    out, indices = _conv.max_pool2d(input, geometry, with_indices=return_indices,
                                    stride_arg=_stride_arg(stride, geometry))
    return (out, _ops.tensor(indices)) if return_indices else out


def _stride_arg(stride, geometry):
    """A pool's stride as torch's node saves it: ``()`` when not given (the kernel's)."""
    return () if stride is None or stride == [] else tuple(geometry.stride)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean over each ``kernel_size`` window (``AvgPool2DBackward0``): zero padding counted
    unless ``count_include_pad=False``, or the sum over ``divisor_override``.

    As torch, an int64 input gives int64 means (the window sum divided by an integer,
    truncated toward zero); other integer and bool dtypes have no kernel."""
    x, unbatched = _batched_4d(input, "avg_pool2d")
    _check_pool_dtype(x, "avg_pool2d")
    geometry = _pool_geometry(kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d")
    _check_pool_output(x, geometry, "avg_pool2d")
    divisor = divisor_override
    if divisor is not None and divisor == 0:
        raise RuntimeError("divisor must be not zero")
    if divisor is None and (geometry.ceil_mode or (not count_include_pad and any(geometry.padding))):
        # windows of different sizes: a ceil_mode window is cut at the padding's end
        counts = _window_counts(x.shape[2:], geometry, with_padding=count_include_pad)
        if not (counts == geometry.kernel[0] * geometry.kernel[1]).all():
            divisor = counts
    if x.dtype is not _dtypes.int64:
        return _conv.avg_pool2d(input, geometry, divisor,  # unbatched as is, as torch
                                stride_arg=_stride_arg(stride, geometry),
                                count_include_pad=bool(count_include_pad),
                                divisor_override=divisor_override)
    out = _integer_avg_pool(x, geometry, divisor)
    return out.squeeze(0) if unbatched else out


def _check_pool_dtype(x, what, floating_only=False):
    """torch's average pools have floating-point kernels, and int64 ones except the adaptive
    pools."""
    if x.dtype.is_floating_point or (x.dtype is _dtypes.int64 and not floating_only):
        return
    raise NotImplementedError(f'"{what}" not implemented for \'{_type_word(x.dtype)}\'')


def _window_counts(sizes, geometry, with_padding=False):
    """The number of elements in each pooling window, of the input alone or of the input and
    its padding (a ceil_mode window is cut at the padding's end, as torch's), flattened as
    ``_conv.avg_pool2d`` lays out its windows (row-major over the output positions)."""
    counts = []
    for n, k, p, s, out in zip(sizes, geometry.kernel, geometry.padding, geometry.stride,
                               geometry.blocks(*sizes)):
        starts = np.arange(out) * s - p
        low, high = (-p, n + p) if with_padding else (0, n)
        counts.append(np.minimum(starts + k, high) - np.maximum(starts, low))
    return np.multiply.outer(*counts).reshape(-1)


def _integer_avg_pool(x, geometry, divisor):
    """int64 average pooling as torch's integer kernel: each exact window sum divided by the
    divisor in integer arithmetic (C's division, truncating toward zero)."""
    sums = _conv.avg_pool2d(x.to(_dtypes.float64), geometry, 1).numpy()  # exact below 2**53
    sums = np.rint(sums).astype(np.int64)
    if divisor is None:
        divisor = geometry.kernel[0] * geometry.kernel[1]
    divisor = np.asarray(divisor, dtype=np.int64)
    if divisor.ndim:
        divisor = divisor.reshape(sums.shape[2:])
    quotient = np.abs(sums) // np.abs(divisor) * (np.sign(sums) * np.sign(divisor))
    return _ops.tensor(quotient.astype(np.int64))


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to ``output_size`` (None keeps that size) over torch's adaptive bins."""
    x, unbatched = _batched_4d(input, "adaptive_avg_pool2d")
    _check_pool_dtype(x, "adaptive_avg_pool2d", floating_only=True)
    sizes = _conv._pair(output_size)
    sizes = tuple(n if s is None else s for s, n in zip(sizes, x.shape[2:]))
    if sizes == (1, 1):
        # torch computes this case as a mean (MeanBackward1): the gradient of a mean does not
        # depend on the input, so under create_graph it is a constant for a constant upstream
        return _ops.mean(input, (-1, -2), keepdim=True)
    if any(n % s for n, s in zip(x.shape[2:], sizes)):
        # torch's bins floor(i n / m) .. ceil((i + 1) n / m) overlap: a separable averaging map
        return _separable.adaptive_avg_pool2d(input, sizes)
    kernel = tuple(n // s for n, s in zip(x.shape[2:], sizes))
    # unbatched as is: torch adds no nodes
    return _conv.avg_pool2d(input, _conv._Geometry(kernel, 1, 0, kernel), adaptive=True)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C, H, W) -> (N, C*kh*kw, L), or unbatched (C, H, W) -> (C*kh*kw, L): the sliding
    blocks as columns (``Im2ColBackward0``)."""
    if input.ndim < 3:  # torch's IndexError: its first read of a dim is past the end
        if input.ndim == 0:
            raise IndexError("Dimension specified as 1 but tensor has no dimensions")
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, "
                         f"{input.ndim - 1}], but got {input.ndim})")
    if input.ndim > 4 or 0 in input.shape[-3:]:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           "and other non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    return _conv.unfold(input, _conv._Geometry(kernel_size, dilation, padding, stride))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C*kh*kw, L) -> (N, C, H, W), or unbatched (C*kh*kw, L) -> (C, H, W): blocks summed
    back into place (``Col2ImBackward0``)."""
    if input.ndim not in (2, 3) or 0 in input.shape[-2:]:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           "batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    return _conv.fold(input, _conv._pair(output_size),
                      _conv._Geometry(kernel_size, dilation, padding, stride))




def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False):
    """``softmax(q @ k^T * scale + mask) @ v``, written as torch's reference implementation
    (``is_causal``: a lower-triangular mask; a bool ``attn_mask`` keeps the True positions, a
    float one is added; dropout is applied whenever ``dropout_p > 0``)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa is not supported "
                                  "by gradviz")
    length, source = query.shape[-2], key.shape[-2]
    scale = 1.0 / float(np.sqrt(query.shape[-1])) if scale is None else scale
    scores = _ops.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
        keep = _ops.tril(_ops.ones(length, source, dtype=_dtypes.bool))
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype is _dtypes.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = _act.safe_softmax(scores, -1)  # Note [Safe softmax] in ops/_activation.py
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return _ops.matmul(weights, value)


# ---- 1-D convolution and pooling: a 2-D one over (1, L), as torch computes the pools -------------

def _conv_padding(padding, weight_shape, dilation, stride):
    if not isinstance(padding, str):
        return padding
    if padding not in ("valid", "same"):
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    if padding == "same" and any(s != 1 for s in _conv._pair(stride)):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    return 0 if padding == "valid" else _same_padding(weight_shape, dilation)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of (N, C, L) (or (C, L)) ``input`` with (O, C, k) ``weight`` (one
    ``ConvolutionBackward0`` node); ``groups`` as in :func:`conv2d`."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got "
                           f"input of size: {list(input.shape)}")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
    padding = _conv_padding(padding, weight.shape[2:], one(dilation), one(stride))
    _check_groups(x, weight, groups)
    geometry = _conv._Geometry((1, weight.shape[2]), (1, one(dilation)), (0, one(padding)),
                               (1, one(stride)))
    _check_conv_geometry(geometry)
    _check_blocks(x.unsqueeze(2), geometry)
    out = _conv.conv1d(x, weight, bias, geometry, groups)
    return out.squeeze(0) if input.ndim == 2 else out


_POOL_1D = contextvars.ContextVar("gradviz_pool_1d", default=False)  # inside a 1-D pool


def _pool1d(pool, input, what, *args):
    """``pool`` (a 2-D pool) over (1, L): torch's 1-D pools, ending in a ``SqueezeBackward1``."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{what}() Expected 2D or 3D input tensor, but got {list(input.shape)}")
    token = _POOL_1D.set(True)
    try:
        result = pool(input.unsqueeze(-2), *args)
    finally:
        _POOL_1D.reset(token)
    if isinstance(result, tuple):
        return tuple(t.squeeze(-2) for t in result)
    return result.squeeze(-2)


def _one(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum over each window of ``kernel_size``."""
    stride = kernel_size if stride is None or stride == [] else stride
    return _pool1d(max_pool2d, input, "max_pool1d", (1, _one(kernel_size)), (1, _one(stride)),
                   (0, _one(padding)), (1, _one(dilation)), ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """The mean over each window of ``kernel_size``."""
    stride = kernel_size if stride is None or stride == [] else stride
    return _pool1d(avg_pool2d, input, "avg_pool1d", (1, _one(kernel_size)), (1, _one(stride)),
                   (0, _one(padding)), ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to ``output_size`` along the last dim."""
    return _pool1d(adaptive_avg_pool2d, input, "adaptive_avg_pool1d", (1, _one(output_size)))


# the forms above not named in the lists beside them (Note [Functional layers]: functional.py
# re-exports exactly __all__, so every public form must be in it; a test checks)
__all__ += ["hardtanh", "relu6", "selu", "celu", "mish", "hardswish", "hardsigmoid", "softmin",
            "embedding", "kl_div", "multi_margin_loss", "conv2d", "max_pool2d", "avg_pool2d",
            "adaptive_avg_pool2d", "unfold", "fold", "scaled_dot_product_attention", "conv1d",
            "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "logsigmoid", "softsign",
            "tanhshrink", "cosine_similarity", "pairwise_distance"]
