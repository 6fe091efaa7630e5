"""gradviz: an interactive visual debugger for backpropagation.

Its engine mirrors PyTorch's API, so ``import gradviz as torch`` runs ordinary teaching code;
``gradviz.debug.backward(loss)`` steps through the backward pass node by node.
"""

import functools as _functools
import math as _math
import sys as _sys
import types as _types
import warnings as _warnings

from ._version import __version__

from . import dtypes
from . import _tensor as _tensor_module
from ._tensor import Size, Tensor, device, is_tensor, set_printoptions
from ._tensor import check_device as _check_device
from .dtypes import (bool, double, dtype, float, float16, float32, float64, get_default_dtype,  # noqa: A004
                     half, int, int8, int16, int32, int64, long, set_default_dtype, short, uint8)
from . import ops
from .ops import (abs, add, allclose, arange, as_tensor, clamp, clone, cos, div, empty, empty_like, eq,  # noqa: A004
                  exp, expand, eye, flatten, from_numpy, full, full_like, ge, gt, le, linspace,
                  log, logical_and, logical_not, logical_or, lt, manual_seed, matmul, mean, mul,
                  ne, neg, ones, ones_like, permute, pow, rand, rand_like, randint, randn,
                  randn_like, reciprocal, relu, reshape, sigmoid, sign, sin, sqrt, squeeze, sub,
                  sum, t, tanh, tensor, transpose, unsqueeze, zeros, zeros_like)
from .ops import (amax, amin, argmax, argmin, argsort, cat, chunk, cumsum, erf, exp2, expm1,  # noqa: A004
                  flip, gather, index_add, index_select, log1p, log2, log10, logsumexp,
                  masked_fill, max, maximum, min, minimum, narrow, norm, prod, rsqrt, scatter,
                  scatter_add, select, softmax, log_softmax, sort, split, stack, std, topk, unbind,
                  var, where)
from .ops import bmm, dot, mm, mv
from .ops import (absolute, acos, all, any, asin, atan, ceil, clamp_max, clamp_min,  # noqa: A004
                  count_nonzero, cosh, diag, diagonal, equal, floor, floor_divide, fmod, frac,
                  isclose, isfinite, isinf, isnan, logical_xor, masked_select, negative, nonzero,
                  outer, remainder, round, sinh, square, tan, trace, tril, triu, true_divide,
                  trunc)
from .ops import addmm, cumprod, det, inverse, logspace, repeat_interleave, roll
from .ops import bincount, histc, histogram, median, mode, quantile, std_mean, unique, var_mean
from .ops import cdist, cosine_similarity, dist, pairwise_distance, xlogy
from .ops import atan2, lerp, movedim, nan_to_num, ravel, swapaxes, tril_indices, triu_indices
from .ops import celu, selu
from .ops import unsafe_chunk, unsafe_split
from .ops import aminmax, cummax, cummin, kthvalue, logcumsumexp, nanmean, nansum
from .ops import (addbmm, addmv, addr, baddbmm, cross, inner, kron, logdet, matrix_power, slogdet,
                  tensordot, vdot)
from .ops import (combinations, cumulative_trapezoid, diagflat, fliplr, flipud, is_complex,
                  is_nonzero, is_signed, narrow_copy, real, result_type, scalar_tensor,
                  unravel_index, vander)
from .ops import index_put, put, randint_like, scatter_reduce
from .ops import (broadcast_shapes, bucketize, corrcoef, cov, gcd, index_copy, index_fill, isin,
                  lcm, masked_scatter, nanmedian, searchsorted, trapezoid, unique_consecutive)
from .ops import (argwhere, atleast_3d, block_diag, cartesian_prod, diag_embed, dsplit, dstack,
                  hsplit, msort, rot90, row_stack, take, take_along_dim, tensor_split, unflatten,
                  vsplit)
from .ops._special import (acosh, addcdiv, addcmul, arccos, arccosh, arcsin, arcsinh, arctan,
                           arctan2, arctanh, asinh, atanh, bitwise_and, bitwise_not, bitwise_or,
                           bitwise_xor, copysign, deg2rad, digamma, divide, erfc, erfinv, fix,
                           float_power, fmax, fmin, greater, greater_equal, heaviside, hypot,
                           isneginf, isposinf, isreal, less, less_equal, lgamma, logaddexp,
                           logaddexp2, logit, multiply, not_equal, polygamma, positive, rad2deg,
                           sgn, signbit, sinc, special, subtract)
from .ops import (atleast_1d, atleast_2d, broadcast_tensors, broadcast_to, column_stack, diff,
                  einsum, hstack, meshgrid, tile, vstack)
from .ops._linalg_factor import pinverse, qr, svd
from .ops._linalg_solvers import (adjoint, chain_matmul, cholesky, cholesky_inverse, cholesky_solve,
                                triangular_solve)
from .ops._linalg_lu import lu, lu_solve, lu_unpack, matrix_exp
from .ops import Generator, bernoulli, initial_seed, multinomial, normal, randperm, seed
from .dtypes import finfo, iinfo, promote_types
from ._serialization import load, save
from ._legacy_types import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor,
                            IntTensor, LongTensor, ShortTensor)
from . import autograd
from . import linalg
from . import nn
from . import optim
from . import utils
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                       no_grad, set_grad_enabled)
from .autograd import is_anomaly_check_nan_enabled, is_anomaly_enabled
from . import instrument
from .instrument import load_trace, record
from . import debug
from . import func
from .func import vmap  # torch.vmap is torch.func.vmap
from . import viz
from . import distributions
from . import amp
from . import testing
from ._runtime import (are_deterministic_algorithms_enabled, compile, get_num_threads,  # noqa: A004
                       is_deterministic_algorithms_warn_only_enabled, set_num_threads,
                       use_deterministic_algorithms)
from . import _runtime
from .ops import get_rng_state, set_rng_state
from .amp import autocast, is_autocast_enabled
from ._config import config, show_config

from ._out import with_out as _with_out

# the functions teaching code calls with out=
for _name in ("add", "sub", "mul", "div", "true_divide", "pow", "neg", "abs", "exp", "log", "sqrt",
              "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid", "clamp", "floor", "ceil",
              "round", "remainder", "fmod", "maximum", "minimum", "matmul", "mm", "bmm", "mv", "dot",
              "addmm", "sum", "mean", "prod", "cumsum", "cat", "stack", "where", "eq", "ne", "lt",
              "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "square", "sign"):
    globals()[_name] = _with_out(globals()[_name], _name)
del _name

clip = clamp
_sys.modules[__name__ + ".special"] = special  # ``from torch.special import expit``
concat = concatenate = cat
range = ops._creation.legacy_range  # noqa: A001  (torch.range, deprecated; not in __all__)
# torch's math constants (``masked_fill(mask, -torch.inf)``, ``x[:, torch.newaxis]``)
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None
moveaxis = movedim
swapdims = swapaxes
trapz = trapezoid
ger = outer


_COMPLEX_NAMES = ("complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf",
                  "view_as_complex", "view_as_real", "complex", "polar")


def __getattr__(name):
    # torch's complex dtypes and functions: say why they are missing
    if name in _COMPLEX_NAMES:
        raise AttributeError(f"module 'gradviz' has no attribute '{name}': gradviz does not "
                             "support complex numbers (keep real and imaginary parts as two "
                             "real tensors)")
    if name == "bfloat16":
        raise AttributeError("module 'gradviz' has no attribute 'bfloat16': gradviz computes with "
                             "numpy, which has no bfloat16; use float32 (or float16)")
    raise AttributeError(f"module 'gradviz' has no attribute '{name}'")


def is_floating_point(input) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is a floating-point type. Mirrors ``torch.is_floating_point``."""
    return input.dtype.is_floating_point


def is_inference(input) -> bool:  # noqa: A002
    """``input.is_inference()``: whether ``input`` was made in ``inference_mode()``."""
    return input.is_inference()


def _not_available():
    return False


# Device-selecting code (``"cuda" if torch.cuda.is_available() else "cpu"``) runs unchanged:
# gradviz has no accelerator, so every probe says no.
cuda = _types.ModuleType("gradviz.cuda", "No CUDA: gradviz computes on the CPU.")
cuda.is_available = _not_available
cuda.device_count = lambda: 0
cuda.manual_seed = cuda.manual_seed_all = lambda seed: None
# torch.random: the default generator's seed and state
random = _types.ModuleType("gradviz.random", "The default random generator: seeds, state, fork_rng.")
random.manual_seed, random.seed, random.initial_seed = manual_seed, seed, initial_seed
random.get_rng_state, random.set_rng_state = get_rng_state, set_rng_state
random.fork_rng = _runtime.fork_rng
random.default_generator = default_generator = ops._creation._default_generator
_sys.modules[__name__ + ".random"] = random
cuda.is_bf16_supported = lambda including_emulation=True: False
cuda.synchronize = lambda device=None: None
cuda.empty_cache = lambda: None
cuda.amp = _types.ModuleType("gradviz.cuda.amp", "torch.cuda.amp: deprecated aliases of torch.amp.")
cuda.amp.GradScaler = amp.CudaGradScaler
cuda.amp.autocast = _functools.partial(amp.autocast, "cuda")
cuda.amp.custom_fwd, cuda.amp.custom_bwd = amp.custom_fwd, amp.custom_bwd
_sys.modules[__name__ + ".cuda"] = cuda
_sys.modules[__name__ + ".cuda.amp"] = cuda.amp
backends = _types.ModuleType("gradviz.backends", "Accelerator backends: none in gradviz.")
backends.mps = _types.SimpleNamespace(is_available=_not_available, is_built=_not_available)
# flags training scripts set (``torch.backends.cuda.matmul.allow_tf32 = True``): kept, unused
backends.cuda = _types.SimpleNamespace(is_built=_not_available,
                                       matmul=_types.SimpleNamespace(allow_tf32=False,
                                                                     allow_fp16_reduced_precision_reduction=True,
                                                                     allow_bf16_reduced_precision_reduction=True))
backends.cudnn = _types.SimpleNamespace(deterministic=False, benchmark=False, enabled=False,
                                        allow_tf32=True, is_available=_not_available)
_float32_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """``torch.set_float32_matmul_precision``: kept for :func:`get_float32_matmul_precision`;
    gradviz's CPU matmuls are always full float32 ("highest")."""
    global _float32_matmul_precision
    if precision not in ("highest", "high", "medium"):
        _warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _float32_matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The value last given to :func:`set_float32_matmul_precision` ("highest" by default)."""
    return _float32_matmul_precision



accelerator = _types.ModuleType(
    "gradviz.accelerator", "The current accelerator (``torch.accelerator``): none in gradviz.")
accelerator.is_available = _not_available
accelerator.device_count = lambda: 0
accelerator.current_accelerator = lambda check_available=False: None
_sys.modules[__name__ + ".accelerator"] = accelerator


def set_default_device(device):
    """``torch.set_default_device``: gradviz computes on the CPU, so ``"cpu"``, a CPU
    :class:`device` and ``None`` are accepted (and change nothing); any other device raises
    at once (torch raises later, at the first tensor it would place there)."""
    _check_device(device)


def get_default_device():
    """The device new tensors are made on: always ``device(type='cpu')`` in gradviz."""
    return _tensor_module._CPU


def numel(input):
    """The number of elements of ``input``. Mirrors ``torch.numel``."""
    return input.numel()


def _register_notebook_display():
    """In IPython, show a DebugSession as the widget, and a Trace as the widget of its replay
    (the widget layer is imported lazily)."""
    import sys

    if "IPython" not in sys.modules:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return

    def show(session):
        from .widget import display_session

        display_session(session)

    def show_trace(trace):
        show(debug.ReplaySession(trace))

    formatter = shell.display_formatter.ipython_display_formatter
    for session_type in (debug.DebugSession, debug.ReplaySession, debug.CallSession):
        formatter.for_type(session_type, show)
    formatter.for_type(instrument.Trace, show_trace)

    def show_diff(result):
        from IPython.display import display

        display(result.show())

    formatter.for_type(debug.TraceDiff, show_diff)


_register_notebook_display()

__all__ = [
    "Tensor", "Size", "is_tensor", "dtype", "dtypes", "autograd", "debug", "ops",
    "float16", "float32", "float64", "half", "float", "double", "int8", "int16", "int32",
    "int64", "uint8", "bool", "short", "int", "long", "get_default_dtype", "set_default_dtype",
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace",
    "eye", "randn", "rand", "randint", "manual_seed", "zeros_like", "ones_like", "full_like",
    "empty_like", "randn_like", "rand_like",
    "add", "sub", "mul", "div", "neg", "pow", "reciprocal", "exp", "log", "tanh", "sigmoid",
    "relu", "sin", "cos", "sqrt", "abs", "sign", "clamp", "clip", "lt", "le", "gt", "ge", "eq",
    "ne", "logical_and", "logical_or", "logical_not", "sum", "mean", "matmul", "mm", "bmm", "mv", "dot",
    "reshape", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand", "flatten", "clone",
    "numel", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "allclose", "show_config", "config", "__version__", "nn", "instrument", "record", "viz",
    "load_trace", "optim", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
    "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor", "utils", "bincount", "histc",
    "histogram", "median", "mode", "quantile", "std_mean", "unique", "var_mean",
    "cdist", "cosine_similarity", "dist", "pairwise_distance", "xlogy",
    "atan2", "lerp", "movedim", "nan_to_num", "ravel", "swapaxes", "tril_indices", "triu_indices",
    "celu", "selu", "moveaxis", "swapdims", "pi", "e", "inf", "nan", "newaxis",
    "amax", "amin", "argmax", "argmin", "argsort", "cat", "chunk", "unsafe_chunk", "unsafe_split",
    "cumsum", "erf", "exp2",
    "expm1", "flip", "gather", "index_add", "index_select", "log1p", "log2", "log10",
    "logsumexp", "masked_fill", "max", "maximum", "min", "minimum", "narrow", "norm", "prod",
    "rsqrt", "scatter", "scatter_add", "select", "softmax", "log_softmax", "sort", "split",
    "stack", "std", "topk", "unbind", "var", "where",
    "device", "set_default_device", "get_default_device", "accelerator", "set_printoptions",
    "is_floating_point", "is_inference", "cuda", "backends", "ger", "amp", "autocast", "testing",
    "compile", "set_num_threads", "get_num_threads", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "get_rng_state", "set_rng_state", "random", "default_generator",
    "is_autocast_enabled", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "absolute", "acos", "all", "any", "asin", "atan", "ceil", "clamp_max", "clamp_min",
    "count_nonzero", "cosh", "diag", "diagonal", "equal", "floor", "floor_divide", "fmod", "frac",
    "isclose", "isfinite", "isinf", "isnan", "logical_xor", "masked_select", "negative", "nonzero",
    "outer", "remainder", "round", "sinh", "square", "tan", "trace", "tril", "triu", "true_divide",
    "trunc", "cumprod", "logspace", "repeat_interleave", "inverse", "det", "linalg", "addmm", "Generator", "bernoulli",
    "roll", "atleast_1d", "atleast_2d", "broadcast_tensors", "broadcast_to", "column_stack",
    "diff", "einsum", "hstack", "meshgrid", "tile", "vstack",
    "initial_seed", "multinomial", "normal", "randperm", "seed", "finfo", "iinfo", "promote_types", "save",
    "load", "randint_like", "index_put", "put", "scatter_reduce", "combinations",
    "cumulative_trapezoid", "diagflat", "fliplr", "flipud", "is_complex",
    "is_nonzero", "is_signed", "narrow_copy", "real", "result_type", "scalar_tensor",
    "unravel_index", "vander", "broadcast_shapes", "bucketize", "corrcoef", "cov", "gcd", "index_copy", "index_fill",
    "isin", "lcm", "masked_scatter", "nanmedian", "searchsorted", "trapezoid", "trapz",
    "unique_consecutive", "logdet", "slogdet", "addbmm", "addmv", "addr", "baddbmm", "cross",
    "inner", "kron", "matrix_power",
    "tensordot", "vdot", "argwhere", "atleast_3d", "block_diag", "cartesian_prod", "diag_embed",
    "dsplit", "dstack", "hsplit", "msort", "rot90", "row_stack", "take", "take_along_dim",
    "tensor_split", "unflatten", "vsplit", "special", "acosh", "addcdiv", "addcmul", "arccos",
    "arccosh", "arcsin", "arcsinh",
    "arctan", "arctan2", "arctanh", "asinh", "atanh", "bitwise_and", "bitwise_not", "bitwise_or",
    "bitwise_xor", "copysign", "deg2rad", "digamma", "divide", "erfc", "erfinv", "fix",
    "float_power", "fmax", "fmin", "greater", "greater_equal", "heaviside", "hypot", "isneginf",
    "isposinf", "isreal", "less", "less_equal", "lgamma", "logaddexp", "logaddexp2", "logit",
    "multiply", "not_equal", "polygamma", "positive", "rad2deg", "sgn", "signbit", "sinc",
    "subtract", "adjoint", "chain_matmul", "cholesky", "cholesky_inverse", "cholesky_solve", "pinverse", "qr", "svd",
    "triangular_solve", "lu", "lu_solve", "lu_unpack", "matrix_exp", "aminmax", "cummax", "cummin",
    "kthvalue", "logcumsumexp", "nanmean", "nansum",
]
