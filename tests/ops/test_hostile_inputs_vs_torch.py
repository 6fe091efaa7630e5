"""Hostile arguments, differentially against PyTorch: each case runs one program on gradviz and
on torch and compares the outcomes.

* torch raises: gradviz raises the same exception type (compared by the nearest built-in class,
  so torch's own subclasses and gradviz's ``TraceFormatError`` count as theirs), and, when
  torch's message holds one of the phrases in :data:`KEY_PHRASES` (the ones users search
  for), gradviz's holds it too;
* torch succeeds: gradviz succeeds with the same shape, dtype and values;
* never an exception from numpy's or another library's internals (its class must be a
  built-in or gradviz's), never a hang (each side has :data:`SECONDS` to finish).

The cases are a grid: ops taking a dim x hostile dims (:data:`DIM_OPS` x :data:`DIMS`), ops
taking sizes x hostile sizes (:data:`SIZE_OPS` x :data:`SIZES`), ops taking tensors x hostile
tensors (:data:`TENSOR_OPS` x :data:`TENSORS`: wrong dtypes, 0-d, 0-size, mismatched,
non-contiguous, expanded, NaN, Python numbers, lists, numpy arrays, None), in-place ops x
written-to tensors (:data:`INPLACE_OPS` x :data:`TARGETS`), and single cases for autograd,
conversions, devices, ``nn`` layers, ``F`` functions and optimizers (:data:`SINGLE`). Tensor
values come from generators seeded by :data:`SEED` and the shape, so every run is the same. "Huge" sizes are 2**40
elements: torch's allocation fails at once, so does numpy's; nothing bigger than a few
kilobytes is ever allocated.

:data:`KNOWN` lists the divergences kept on purpose, each with its reason (docs/differences.md
lists them for users); for those the test checks that the outcome still differs as written, so
a fix makes it fail, to be removed from the list. The debugger's entry points
(``gradviz.debug``) have no torch twin; ``test_debugger_entry_points_refuse_*`` checks that
they give typed errors that say what was expected.
"""

from __future__ import annotations

import math
import signal
import warnings

import numpy as np
import pytest
import torch

import gradviz
from gradviz import debug

SEED = 20261206
SECONDS = 10
HUGE = 2 ** 40

KEY_PHRASES = (
    "Dimension out of range",
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location",
    "a leaf Variable that requires grad is being used in an in-place operation",
    "Trying to backward through the graph a second time",
    "grad can be implicitly created only for scalar outputs",
    "does not require grad and does not have a grad_fn",
    "Mismatch in shape",
    "Only Tensors of floating point and complex dtype can require gradients",
    "Torch not compiled with CUDA enabled",
    "must match the size of tensor",
    "Trying to create tensor with negative dimension",
    "value cannot be converted to type",
    "is invalid for input of size",
    "index out of range in self",
    "ZeroDivisionError",
    "shapes cannot be multiplied",
    "expected scalar type",
    "non-positive stride is not supported",
    "negative padding is not supported",
    "stride should not be zero",
    "Expected p_in >= 0 && p_in <= 1",
    "unsupported range",
    "Storage size calculation overflowed",
    "can't allocate memory",
    "all inputs have to be Tensors",
    "gradients can be either Tensors or None",
)


def _values(shape, kind="float"):
    """Seeded values of ``shape`` (a new generator per call: the same numbers every run)."""
    rng = np.random.default_rng(SEED + len(shape) + sum(shape))
    if kind == "int":
        return rng.integers(-3, 4, shape)
    return rng.standard_normal(shape).astype(np.float32)


def _x(m, *shape):
    return m.tensor(_values(shape or (2, 3)))


# ---- ops taking a dim x hostile dims ------------------------------------------------------------

DIM_OPS = {
    "sum": lambda m, x, d: x.sum(d),
    "mean": lambda m, x, d: x.mean(d),
    "std": lambda m, x, d: x.std(d),
    "prod": lambda m, x, d: x.prod(d),
    "softmax": lambda m, x, d: m.softmax(x, d),
    "log_softmax": lambda m, x, d: x.log_softmax(d),
    "F.softmax": lambda m, x, d: m.nn.functional.softmax(x, d),
    "cumsum": lambda m, x, d: x.cumsum(d),
    "cummax": lambda m, x, d: x.cummax(d),
    "argmax": lambda m, x, d: x.argmax(d),
    "max": lambda m, x, d: x.max(d),
    "amax": lambda m, x, d: x.amax(d),
    "logsumexp": lambda m, x, d: x.logsumexp(d),
    "norm": lambda m, x, d: x.norm(dim=d),
    "any": lambda m, x, d: (x > 0).any(d),
    "sort": lambda m, x, d: x.sort(d),
    "topk": lambda m, x, d: x.topk(1, d),
    "median": lambda m, x, d: x.median(d),
    "mode": lambda m, x, d: x.mode(d),
    "count_nonzero": lambda m, x, d: x.count_nonzero(d),
    "nansum": lambda m, x, d: x.nansum(d),
    "squeeze": lambda m, x, d: x.squeeze(d),
    "unsqueeze": lambda m, x, d: x.unsqueeze(d),
    "flip": lambda m, x, d: x.flip(d),
    "transpose": lambda m, x, d: x.transpose(d, 0),
    "narrow": lambda m, x, d: x.narrow(d, 0, 1),
    "select": lambda m, x, d: x.select(d, 0),
    "chunk": lambda m, x, d: x.chunk(2, d),
    "split": lambda m, x, d: x.split(1, d),
    "unbind": lambda m, x, d: x.unbind(d),
    "cat": lambda m, x, d: m.cat([x, x], d),
    "stack": lambda m, x, d: m.stack([x, x], d),
    "movedim": lambda m, x, d: x.movedim(d, 0),
    "flatten": lambda m, x, d: x.flatten(d),
    "roll": lambda m, x, d: x.roll(1, d),
    "diff": lambda m, x, d: x.diff(dim=d),
    "gather": lambda m, x, d: x.gather(d, m.zeros(2, 3, dtype=m.int64)),
    "index_select": lambda m, x, d: x.index_select(d, m.tensor([0])),
    "repeat_interleave": lambda m, x, d: x.repeat_interleave(2, d),
}
DIMS = {
    "2 (one past the end)": lambda m: 2,
    "-3": lambda m: -3,
    "5": lambda m: 5,
    "1.5": lambda m: 1.5,
    "'a'": lambda m: "a",
    "True": lambda m: True,
    "numpy int64 1": lambda m: np.int64(1),
    "0-d int tensor": lambda m: m.tensor(1),
    "0-d float tensor": lambda m: m.tensor(1.0),
    "None": lambda m: None,
}

# ---- ops taking sizes x hostile sizes -----------------------------------------------------------

SIZE_OPS = {
    "zeros": lambda m, s: m.zeros(s),
    "ones": lambda m, s: m.ones(s),
    "empty": lambda m, s: m.empty(s).shape,
    "rand": lambda m, s: m.rand(s).shape,
    "full": lambda m, s: m.full(s if isinstance(s, tuple) else (s,), 1.0),
    "zeros(2, s)": lambda m, s: m.zeros(2, s),
    "new_zeros": lambda m, s: _x(m).new_zeros(s),
    "new_full": lambda m, s: _x(m).new_full(s if isinstance(s, tuple) else (s,), 2.0),
    "eye": lambda m, s: m.eye(s),
    "randperm": lambda m, s: m.randperm(s).shape,
    "linspace": lambda m, s: m.linspace(0, 1, s),
    "reshape": lambda m, s: _x(m).reshape(s),
    "view": lambda m, s: _x(m).view(s),
    "expand": lambda m, s: _x(m).expand(s),
    "repeat": lambda m, s: _x(m).repeat(s),
    "tile": lambda m, s: _x(m).tile(s),
    "unflatten": lambda m, s: _x(m).unflatten(1, s),
    "split sizes": lambda m, s: _x(m).split(s, 1),
    "multinomial samples": lambda m, s: m.multinomial(m.ones(3), s, True).shape,
    "repeat_interleave": lambda m, s: _x(m).repeat_interleave(s),
    "one_hot classes": lambda m, s: m.nn.functional.one_hot(m.tensor([0, 1]), s),
}
SIZES = {
    "-1": -1,
    "-2": -2,
    "2.5": 2.5,
    "'3'": "3",
    "(2, -1)": (2, -1),
    "(2.0, 3)": (2.0, 3),
    "True": True,
    "huge": HUGE,
    "(huge, huge)": (HUGE, HUGE),
}

# ---- ops taking tensors x hostile tensors -------------------------------------------------------

TENSOR_OPS = {
    "add": lambda m, t: m.add(_x(m), t),
    "mul": lambda m, t: _x(m) * t,
    "sub": lambda m, t: m.sub(_x(m), t),
    "div": lambda m, t: m.div(_x(m), t),
    "pow": lambda m, t: m.pow(_x(m), t),
    "maximum": lambda m, t: m.maximum(_x(m), t),
    "atan2": lambda m, t: m.atan2(_x(m), t),
    "matmul": lambda m, t: m.matmul(_x(m), t),
    "mm": lambda m, t: m.mm(_x(m), t),
    "where": lambda m, t: m.where(_x(m) > 0, _x(m), t),
    "eq": lambda m, t: m.eq(_x(m), t),
    "exp": lambda m, t: m.exp(t),
    "log": lambda m, t: m.log(t),
    "sigmoid": lambda m, t: m.sigmoid(t),
    "neg": lambda m, t: m.neg(t),
    "abs": lambda m, t: m.abs(t),
    "sum": lambda m, t: m.sum(t),
    "mean": lambda m, t: m.mean(t),
    "cumsum": lambda m, t: m.cumsum(t, 0),
    "softmax": lambda m, t: m.softmax(t, 0),
    "relu": lambda m, t: m.relu(t),
    "F.gelu": lambda m, t: m.nn.functional.gelu(t),
    "F.linear": lambda m, t: m.nn.functional.linear(t, _x(m, 4, 3)),
    "F.mse_loss": lambda m, t: m.nn.functional.mse_loss(_x(m), t),
    "F.cross_entropy target": lambda m, t: m.nn.functional.cross_entropy(_x(m), t),
    "F.embedding indices": lambda m, t: m.nn.functional.embedding(t, _x(m, 5, 2)),
    "index_select index": lambda m, t: _x(m).index_select(1, t),
    "gather index": lambda m, t: _x(m).gather(1, t),
    "masked_fill mask": lambda m, t: _x(m).masked_fill(t, 0.0),
    "cat": lambda m, t: m.cat([_x(m), t]),
    "Linear forward": lambda m, t: _linear(m)(t),
}
TENSORS = {
    "int64": lambda m: m.tensor(_values((2, 3), "int")),
    "bool": lambda m: m.tensor(_values((2, 3)) > 0),
    "float64": lambda m: m.tensor(_values((2, 3)), dtype=m.float64),
    "0-d": lambda m: m.tensor(1.5),
    "0-size": lambda m: m.zeros(0, 3),
    "mismatched (3, 2)": lambda m: _x(m, 3, 2),
    "transposed (3, 2)": lambda m: _x(m, 3, 2).t(),
    "expanded (1, 3)": lambda m: _x(m, 1, 3).expand(2, 3),
    "NaN and inf": lambda m: m.tensor([[float("nan"), float("inf"), -float("inf")]] * 2),
    "int index (2, 1)": lambda m: m.tensor([[1], [0]]),
    "float index (2, 1)": lambda m: m.tensor([[1.0], [0.0]]),
    "Python float": lambda m: 2.5,
    "Python int": lambda m: 2,
    "list": lambda m: [[1.0, 2.0, 3.0]] * 2,
    "numpy array": lambda m: _values((2, 3)),
    "None": lambda m: None,
    "str": lambda m: "x",
}


def _linear(m):
    """A Linear(3, 4) with the same weights in both libraries (their generators differ)."""
    layer = m.nn.Linear(3, 4)
    with m.no_grad():
        layer.weight.copy_(m.tensor(_values((4, 3))))
        layer.bias.copy_(m.tensor(_values((4,))))
    return layer


# ---- in-place ops x written-to tensors ----------------------------------------------------------

INPLACE_OPS = {
    "add_": lambda m, t: t.add_(1),
    "mul_ tensor": lambda m, t: t.mul_(m.ones(2, 3)),
    "copy_": lambda m, t: t.copy_(_x(m)),
    "clamp_": lambda m, t: t.clamp_(0, 1),
    "exp_": lambda m, t: t.exp_(),
    "relu_": lambda m, t: t.relu_(),
    "sigmoid_": lambda m, t: t.sigmoid_(),
    "F.relu inplace": lambda m, t: m.nn.functional.relu(t, inplace=True),
    "index_add_": lambda m, t: t.index_add_(0, m.tensor([0]), m.ones(1, 3)),
    "scatter_": lambda m, t: t.scatter_(0, m.zeros(1, 3, dtype=m.int64), 1.0),
    "add out=": lambda m, t: m.add(m.ones(2, 3), 1, out=t),
    "+=": lambda m, t: t.__iadd__(1),
    "fill_": lambda m, t: t.fill_(1),
    "zero_": lambda m, t: t.zero_(),
    "setitem": lambda m, t: t.__setitem__(0, 1.0),
    "masked_fill_": lambda m, t: t.masked_fill_(m.ones(2, 3, dtype=m.bool), 1.0),
}
TARGETS = {
    "expanded (1, 3)": lambda m: m.zeros(1, 3).expand(2, 3),
    "expanded (2, 1)": lambda m: m.zeros(2, 1).expand(2, 3),
    "leaf requiring grad": lambda m: m.zeros(2, 3, requires_grad=True),
    "transposed": lambda m: m.zeros(3, 2).t(),
    "int64": lambda m: m.zeros(2, 3, dtype=m.int64),
}


# ---- single cases: autograd, conversions, devices, nn, F, optim --------------------------------

def _leaf(m):
    return m.tensor(_values((2, 3)), requires_grad=True)


def _twice(m, make):
    x = _leaf(m)
    y = make(x)
    y.backward()
    y.backward()


def _param(m):
    return m.nn.Parameter(m.ones(2))


SINGLE = {
    # windows and losses of the wrong rank
    "F.unfold of a 0-d": lambda m: m.nn.functional.unfold(m.ones(()), 2),
    "F.unfold of a 1-d": lambda m: m.nn.functional.unfold(m.ones(5), 2),
    "F.unfold of a 2-d": lambda m: m.nn.functional.unfold(m.ones(4, 5), 2),
    "F.unfold of a 5-d": lambda m: m.nn.functional.unfold(m.ones(1, 1, 1, 4, 5), 2),
    "F.unfold of a 0-size channel": lambda m: m.nn.functional.unfold(m.ones(1, 0, 4, 5), 2),
    "F.fold of a 1-d": lambda m: m.nn.functional.fold(m.ones(4), (2, 2), 1),
    "F.fold of a 4-d": lambda m: m.nn.functional.fold(m.ones(1, 1, 1, 4), (2, 2), 1),
    "F.cross_entropy of a 0-d, int target": lambda m: m.nn.functional.cross_entropy(
        m.tensor(1.0), m.tensor(0)),
    "F.cross_entropy of a 0-d, float target": lambda m: m.nn.functional.cross_entropy(
        m.tensor(1.0), m.tensor(0.5)),
    # autograd
    "requires_grad on int64": lambda m: m.ones(3, dtype=m.int64, requires_grad=True),
    "requires_grad_ on int64": lambda m: m.arange(3).requires_grad_(),
    "requires_grad on a bool list": lambda m: m.tensor([True], requires_grad=True),
    "requires_grad on an int list": lambda m: m.tensor([1, 2], requires_grad=True),
    "backward twice through exp": lambda m: _twice(m, lambda x: x.exp().sum()),
    "backward twice through mul": lambda m: _twice(m, lambda x: (x * x).sum()),
    "backward twice through a sum only": lambda m: _twice(m, lambda x: x.sum()),
    "backward of non-scalar": lambda m: (_leaf(m) * 2).backward(),
    "backward, gradient of the wrong shape": lambda m: (_leaf(m) * 2).backward(m.ones(3, 2)),
    "backward, 0-d gradient for non-scalar": lambda m: (_leaf(m) * 2).backward(m.tensor(1.0)),
    "backward, float64 gradient": lambda m: (_leaf(m) * 2).backward(m.ones(2, 3, dtype=m.float64)),
    "backward, int gradient": lambda m: (_leaf(m) * 2).backward(m.ones(2, 3, dtype=m.int64)),
    "backward, list gradient": lambda m: (_leaf(m) * 2).backward([[1.0] * 3] * 2),
    "backward, numpy gradient": lambda m: (_leaf(m) * 2).backward(np.ones((2, 3), np.float32)),
    "backward, gradient of the wrong numel": lambda m: _leaf(m).sum().backward(m.ones(2)),
    "backward without grad": lambda m: m.ones(3).sum().backward(),
    "backward of an int tensor": lambda m: m.arange(3).sum().backward(),
    "backward, inputs a float": lambda m: (_leaf(m) * 2).sum().backward(inputs=[3.0]),
    "autograd.backward, fewer gradients": lambda m: (lambda x: m.autograd.backward(
        [x * 2, x * 3], [m.ones(2, 3)]))(_leaf(m)),
    "grad of an unused input": lambda m: m.autograd.grad(_leaf(m).sum(), [_leaf(m)]),
    "grad, input a float": lambda m: m.autograd.grad(_leaf(m).sum(), [3.0]),
    "grad, input without grad": lambda m: m.autograd.grad(_leaf(m).sum(), [m.ones(2)]),
    "grad, output without grad": lambda m: m.autograd.grad(m.ones(2).sum(), [_leaf(m)]),
    "grad of non-scalar": lambda m: (lambda x: m.autograd.grad(x * 2, [x]))(_leaf(m)),
    "grad twice": lambda m: (lambda x: (lambda y: (m.autograd.grad(y, [x]), m.autograd.grad(
        y, [x])))(x.exp().sum()))(_leaf(m)),
    "in-place on a leaf's view": lambda m: _leaf(m)[0].add_(1),
    "in-place setitem on a leaf": lambda m: _leaf(m).__setitem__(0, 1.0),
    "in-place zero_ on a leaf": lambda m: _leaf(m).zero_(),
    "numpy() of a tensor requiring grad": lambda m: _leaf(m).numpy(),
    # conversions
    "tensor([nan], int64)": lambda m: m.tensor([float("nan")], dtype=m.int64),
    "tensor(nan, int64)": lambda m: m.tensor(float("nan"), dtype=m.int64),
    "tensor([inf], int32)": lambda m: m.tensor([float("inf")], dtype=m.int32),
    "tensor([1e30], int64)": lambda m: m.tensor([1e30], dtype=m.int64),
    "tensor([3e9], int32)": lambda m: m.tensor([3e9], dtype=m.int32),
    "tensor([300], uint8)": lambda m: m.tensor([300], dtype=m.uint8),
    "tensor([-1], uint8) wraps": lambda m: m.tensor([-1], dtype=m.uint8),
    "tensor([-300], uint8)": lambda m: m.tensor([-300], dtype=m.uint8),
    "tensor([-1.0], uint8)": lambda m: m.tensor([-1.0], dtype=m.uint8),
    "tensor([2**31], int32)": lambda m: m.tensor([2 ** 31], dtype=m.int32),
    "tensor([1.5, -2.5], int8) truncates": lambda m: m.tensor([1.5, -2.5], dtype=m.int8),
    "tensor(numpy nan, int64) casts": lambda m: m.tensor(np.array([np.nan]), dtype=m.int64),
    "as_tensor([nan], int64)": lambda m: m.as_tensor([float("nan")], dtype=m.int64),
    "full(nan, int64)": lambda m: m.full((2,), float("nan"), dtype=m.int64),
    "full(inf, int32)": lambda m: m.full((2,), float("inf"), dtype=m.int32),
    "full(1e10, int32)": lambda m: m.full((2,), 1e10, dtype=m.int32),
    "fill_(nan) of int32": lambda m: m.ones(2, dtype=m.int32).fill_(float("nan")),
    "masked_fill(inf) of int64": lambda m: m.zeros(2, dtype=m.int64).masked_fill(
        m.tensor([True, False]), float("inf")),
    "long() of nan": lambda m: m.tensor([1.0, float("nan")]).long().shape,
    "int() of a nan tensor": lambda m: int(m.tensor(float("nan"))),
    "int() of an inf tensor": lambda m: int(m.tensor(float("inf"))),
    "item() of three": lambda m: m.ones(3).item(),
    "item() of nothing": lambda m: m.ones(0).item(),
    "float() of three": lambda m: float(m.ones(3)),
    "bool() of three": lambda m: bool(m.ones(3)),
    "bool() of nothing": lambda m: bool(m.ones(0)),
    "len() of 0-d": lambda m: len(m.tensor(1.0)),
    "iter() of 0-d": lambda m: list(m.tensor(1.0)),
    "chunk into True": lambda m: _x(m).chunk(True, 1),
    "topk of True": lambda m: _x(m).topk(True),
    "narrow of length True": lambda m: _x(m).narrow(1, 0, True),
    "index with a str": lambda m: m.ones(3)["a"],
    "cat of a tensor": lambda m: m.cat(m.ones(2, 2)),
    "dtype 'float32'": lambda m: m.ones(2, dtype="float32"),
    "dtype numpy float32": lambda m: m.ones(2, dtype=np.float32),
    "tensor of complex": lambda m: m.tensor([1j]),
    "tensor of numpy uint16": lambda m: m.tensor(np.ones(2, np.uint16)),
    "ones on mps": lambda m: m.ones(2, device="mps"),
    "matmul of bools": lambda m: m.ones(2, 2, dtype=m.bool) @ m.ones(2, 2, dtype=m.bool),
    "pad by 1.5": lambda m: m.nn.functional.pad(m.ones(3), (1.5, 1)),
    "Parameter of a list": lambda m: m.nn.Parameter([1.0]),
    "dtype=float is float64": lambda m: m.ones(2, dtype=float),
    "dtype=int is int64": lambda m: m.ones(2, dtype=int),
    "to(float)": lambda m: m.ones(2).to(float),
    "tensor of a ragged list": lambda m: m.tensor([[1.0], [1.0, 2.0]]),
    "tensor of a str": lambda m: m.tensor("abc"),
    "tensor of a dict": lambda m: m.tensor({1: 2}),
    "tensor of 2**64": lambda m: m.tensor(2 ** 64),
    "tensor of tensors": lambda m: m.tensor([m.ones(2), m.ones(2)]),
    # devices
    "ones on cuda": lambda m: m.ones(2, device="cuda"),
    "tensor on cuda:0": lambda m: m.tensor([1.0], device="cuda:0"),
    "to cuda": lambda m: m.ones(2).to("cuda"),
    "cuda()": lambda m: m.ones(2).cuda(),
    "zeros_like on cuda": lambda m: m.zeros_like(m.ones(2), device="cuda"),
    "Linear to cuda": lambda m: m.nn.Linear(2, 3).to("cuda"),
    "device 'gpu'": lambda m: m.ones(2, device="gpu"),
    # ranges and random
    "arange step 0": lambda m: m.arange(0, 5, 0),
    "arange of the wrong sign": lambda m: m.arange(0, 5, -1),
    "arange to nan": lambda m: m.arange(0, float("nan")),
    "arange to inf": lambda m: m.arange(0, float("inf")),
    "linspace -1 steps": lambda m: m.linspace(0, 1, -1),
    "randint low == high": lambda m: m.randint(5, 5, (2,)),
    "randint low > high": lambda m: m.randint(5, 2, (2,)),
    "normal with negative std": lambda m: m.normal(0.0, -1.0, (2,)),
    "normal with a negative std tensor": lambda m: m.normal(m.zeros(2), m.tensor([1.0, -1.0])),
    "normal with a nan std tensor": lambda m: m.normal(m.zeros(1), m.tensor([float("nan")])),
    "normal_ with negative std": lambda m: m.ones(2).normal_(0, -1),
    "bernoulli of p > 1": lambda m: m.bernoulli(m.tensor([2.0])),
    "bernoulli of nan": lambda m: m.bernoulli(m.tensor([float("nan")])),
    "bernoulli_ of p > 1": lambda m: m.ones(2).bernoulli_(1.5),
    "multinomial of negative weights": lambda m: m.multinomial(m.tensor([-1.0, 1.0]), 1),
    "multinomial of nan": lambda m: m.multinomial(m.tensor([float("nan"), 1.0]), 1),
    "multinomial of inf": lambda m: m.multinomial(m.tensor([float("inf"), 1.0]), 1),
    "multinomial of zeros": lambda m: m.multinomial(m.tensor([0.0, 0.0]), 1),
    "multinomial, too many draws": lambda m: m.multinomial(m.tensor([1.0, 1.0]), 3),
    "multinomial of 3-d": lambda m: m.multinomial(m.ones(2, 2, 2), 1),
    "multinomial of int64": lambda m: m.multinomial(m.ones(2, dtype=m.int64), 1),
    # integer arithmetic
    "int // 0": lambda m: m.tensor([1]) // m.tensor([0]),
    "int % 0": lambda m: m.tensor([1]) % m.tensor([0]),
    "int remainder 0": lambda m: m.tensor([5]).remainder(0),
    "int fmod 0": lambda m: m.tensor([5]).fmod(m.tensor([0])),
    "int / 0": lambda m: m.tensor([1]) / m.tensor([0]),
    "int ** -1": lambda m: m.tensor([2]) ** -1,
    "int pow tensor -1": lambda m: m.tensor([2]).pow(m.tensor([-1])),
    "bool - bool": lambda m: m.tensor([True]) - m.tensor([False]),
    "-bool": lambda m: -m.tensor([True]),
    "float & float": lambda m: m.ones(2) & m.ones(2),
    "clamp min > max": lambda m: m.arange(3.0).clamp(2, 1),
    "clamp without bounds": lambda m: m.arange(3.0).clamp(),
    "where of a float condition": lambda m: m.where(m.ones(2), m.ones(2), m.zeros(2)),
    "where, shapes mismatched": lambda m: m.where(m.ones(2, dtype=m.bool), m.ones(3), m.zeros(2)),
    "where, other mismatched": lambda m: m.where(m.ones(2, dtype=m.bool), m.ones(2), m.zeros(3)),
    "masked_fill with a float mask": lambda m: m.ones(2).masked_fill(m.ones(2), 0.0),
    "dot, lengths differ": lambda m: m.dot(m.ones(2), m.ones(3)),
    "dot, dtypes differ": lambda m: m.dot(m.ones(2), m.ones(2, dtype=m.float64)),
    "mm of vectors": lambda m: m.mm(m.ones(2), m.ones(2)),
    "bmm of matrices": lambda m: m.bmm(m.ones(2, 2), m.ones(2, 2)),
    "matmul of a 0-d": lambda m: m.tensor(1.0) @ m.ones(2),
    "cat of nothing": lambda m: m.cat([]),
    "stack of nothing": lambda m: m.stack([]),
    "cat of two 0-d tensors": lambda m: m.cat([m.tensor(1.0), m.tensor(2.0)]),
    "cat, ndims differ": lambda m: m.cat([m.ones(2, 3), m.ones(3)]),
    "stack, shapes differ": lambda m: m.stack([m.ones(2, 3), m.ones(3, 2)]),
    "index with a float tensor": lambda m: m.ones(3)[m.tensor([0.0])],
    "index with a short bool mask": lambda m: m.ones(3)[m.tensor([True, False])],
    "index 5 of 3": lambda m: m.ones(3)[5],
    "index tensor 5 of 3": lambda m: m.ones(3)[m.tensor([5])],
    "index two dims of a vector": lambda m: m.ones(3)[0, 0],
    "index with a float": lambda m: m.ones(3)[1.0],
    "setitem 5 of 3": lambda m: m.ones(3).__setitem__(5, 1.0),
    "setitem, shapes differ": lambda m: m.ones(3).__setitem__(slice(None), m.ones(2)),
    "diff of 0-d": lambda m: m.tensor(1.0).diff(),
    "diff, negative order": lambda m: m.ones(3).diff(n=-1),
    "diff, order past the length": lambda m: m.ones(3).diff(n=5),
    "roll by 1.5": lambda m: m.ones(3).roll(1.5),
    "roll, shifts and dims differ": lambda m: m.ones(2, 3).roll((1, 1), 0),
    # nn layer constructors
    "Linear(-1, 3)": lambda m: m.nn.Linear(-1, 3),
    "Linear(2.5, 3)": lambda m: m.nn.Linear(2.5, 3),
    "Linear('2', 3)": lambda m: m.nn.Linear("2", 3),
    "Linear(None, 3)": lambda m: m.nn.Linear(None, 3),
    "Conv2d(3, 4, 0)": lambda m: m.nn.Conv2d(3, 4, 0),
    "Conv2d(3, 4, -1)": lambda m: m.nn.Conv2d(3, 4, -1),
    "Conv2d stride 0": lambda m: m.nn.Conv2d(3, 4, 3, 0),
    "Conv2d groups 3 of 4": lambda m: m.nn.Conv2d(4, 4, 3, 1, 0, 1, 3),
    "Conv2d padding 'full'": lambda m: m.nn.Conv2d(3, 4, 3, padding="full"),
    "Conv2d padding 'same', stride 2": lambda m: m.nn.Conv2d(3, 4, 3, stride=2, padding="same"),
    "Embedding(-1, 3)": lambda m: m.nn.Embedding(-1, 3),
    "Embedding padding_idx 5 of 3": lambda m: m.nn.Embedding(3, 3, 5),
    "LayerNorm((2, -1))": lambda m: m.nn.LayerNorm((2, -1)),
    "BatchNorm1d(-1)": lambda m: m.nn.BatchNorm1d(-1),
    "LSTM(0, 3)": lambda m: m.nn.LSTM(0, 3),
    "LSTM(3, -1)": lambda m: m.nn.LSTM(3, -1),
    "LSTM(3, 3, 0)": lambda m: m.nn.LSTM(3, 3, 0),
    "LSTM(2.5, 3)": lambda m: m.nn.LSTM(2.5, 3),
    "GRU(3, 0)": lambda m: m.nn.GRU(3, 0),
    "RNN dropout 1.5": lambda m: m.nn.RNN(3, 3, dropout=1.5),
    "Dropout(-0.1)": lambda m: m.nn.Dropout(-0.1),
    "Dropout(1.5)": lambda m: m.nn.Dropout(1.5),
    "MultiheadAttention(6, 4)": lambda m: m.nn.MultiheadAttention(6, 4),
    "GroupNorm(3, 4)": lambda m: m.nn.GroupNorm(3, 4),
    "Sequential(3)": lambda m: m.nn.Sequential(3),
    "ModuleList([3])": lambda m: m.nn.ModuleList([3]),
    "Parameter of int64": lambda m: m.nn.Parameter(m.ones(2, dtype=m.int64)),
    "register_buffer of a number": lambda m: m.nn.Module().register_buffer("b", 3),
    "add_module 'a.b'": lambda m: m.nn.Module().add_module("a.b", m.nn.Linear(2, 2)),
    "load_state_dict, wrong shape": lambda m: m.nn.Linear(2, 3).load_state_dict(
        {"weight": m.ones(2, 2), "bias": m.ones(3)}),
    "load_state_dict, missing": lambda m: m.nn.Linear(2, 3).load_state_dict({"weight": m.ones(3, 2)}),
    # nn layer forward calls
    "Linear on the wrong features": lambda m: _linear(m)(_x(m, 2, 4)),
    "Linear on float64": lambda m: _linear(m)(_x(m).double()),
    "Linear on numpy": lambda m: _linear(m)(_values((2, 3))),
    "Conv2d on 2-d": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(5, 5)),
    "Conv2d on the wrong channels": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(1, 2, 5, 5)),
    "Conv2d on too small": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(1, 1, 2, 2)),
    "Conv2d on 5-d": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(1, 1, 1, 5, 5)),
    "Conv2d on int64": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(1, 1, 5, 5, dtype=m.int64)),
    "Conv2d on no rows": lambda m: m.nn.Conv2d(1, 2, 3)(m.ones(1, 1, 0, 5)),
    "Embedding of 3 of 3": lambda m: m.nn.Embedding(3, 2)(m.tensor([3])),
    "Embedding of -1": lambda m: m.nn.Embedding(3, 2)(m.tensor([-1])),
    "Embedding of a list": lambda m: m.nn.Embedding(3, 2)([1]),
    "LayerNorm of the wrong shape": lambda m: m.nn.LayerNorm(4)(m.ones(2, 3)),
    "LayerNorm of int64": lambda m: m.nn.LayerNorm(3)(m.ones(2, 3, dtype=m.int64)),
    "BatchNorm1d, wrong channels": lambda m: m.nn.BatchNorm1d(4)(m.ones(2, 3)),
    "BatchNorm1d, batch of one": lambda m: m.nn.BatchNorm1d(3)(m.ones(1, 3)),
    "BatchNorm2d on 3-d": lambda m: m.nn.BatchNorm2d(3)(m.ones(3, 4, 5)),
    "LSTM on the wrong features": lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 2)),
    "LSTM on 4-d": lambda m: m.nn.LSTM(3, 4)(m.ones(5, 2, 2, 3)),
    "LSTM, wrong hidden state": lambda m: m.nn.LSTM(3, 4)(
        m.ones(5, 2, 3), (m.ones(1, 2, 5), m.ones(1, 2, 4))),
    "MaxPool2d on too small": lambda m: m.nn.MaxPool2d(3)(m.ones(1, 1, 2, 2)),
    "MaxPool2d, padding past half": lambda m: m.nn.MaxPool2d(2, padding=2)(m.ones(1, 1, 4, 4)),
    # F functions
    "cross_entropy, target out of range": lambda m: m.nn.functional.cross_entropy(
        _x(m), m.tensor([0, 3])),
    "cross_entropy, target -1": lambda m: m.nn.functional.cross_entropy(_x(m), m.tensor([0, -1])),
    "cross_entropy, batch mismatched": lambda m: m.nn.functional.cross_entropy(
        _x(m), m.tensor([0, 1, 2])),
    "cross_entropy, reduction 'avg'": lambda m: m.nn.functional.cross_entropy(
        _x(m), m.tensor([0, 1]), reduction="avg"),
    "cross_entropy, label_smoothing 1.5": lambda m: m.nn.functional.cross_entropy(
        _x(m), m.tensor([0, 1]), label_smoothing=1.5),
    "nll_loss, float target": lambda m: m.nn.functional.nll_loss(_x(m), m.ones(2)),
    "mse_loss of int64": lambda m: m.nn.functional.mse_loss(
        m.ones(3, dtype=m.int64), m.ones(3, dtype=m.int64)),
    "binary_cross_entropy of 1.5": lambda m: m.nn.functional.binary_cross_entropy(
        m.tensor([1.5]), m.tensor([1.0])),
    "binary_cross_entropy of nan": lambda m: m.nn.functional.binary_cross_entropy(
        m.tensor([float("nan")]), m.tensor([1.0])),
    "binary_cross_entropy, shapes differ": lambda m: m.nn.functional.binary_cross_entropy(
        m.ones(2) * 0.5, m.ones(3)),
    "bce_with_logits, shapes differ": lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        m.ones(2), m.ones(3)),
    "dropout p 1.5": lambda m: m.nn.functional.dropout(m.ones(3), 1.5),
    "dropout p -0.5": lambda m: m.nn.functional.dropout(m.ones(3), -0.5),
    "pad, too much cut": lambda m: m.nn.functional.pad(m.ones(3), (-2, -2)),
    "pad of odd length": lambda m: m.nn.functional.pad(m.ones(3), (1,)),
    "pad, too many sides": lambda m: m.nn.functional.pad(m.ones(3), (1, 1, 1, 1)),
    "pad reflect past the size": lambda m: m.nn.functional.pad(m.ones(1, 3), (3, 3), mode="reflect"),
    "pad mode 'wrap'": lambda m: m.nn.functional.pad(m.ones(1, 3), (1, 1), mode="wrap"),
    "interpolate without size": lambda m: m.nn.functional.interpolate(m.ones(1, 1, 4)),
    "interpolate, size and scale": lambda m: m.nn.functional.interpolate(
        m.ones(1, 1, 4), size=8, scale_factor=2),
    "interpolate of 1-d": lambda m: m.nn.functional.interpolate(m.ones(4), size=8),
    "interpolate mode 'cubic'": lambda m: m.nn.functional.interpolate(
        m.ones(1, 1, 4), size=8, mode="cubic"),
    "linear, shapes differ": lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 2)),
    "linear, bias differs": lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 3), m.ones(3)),
    "linear 3-d, bias differs": lambda m: m.nn.functional.linear(
        m.ones(5, 2, 3), m.ones(4, 3), m.ones(3)),
    "addmm, bias differs": lambda m: m.addmm(m.ones(3), m.ones(2, 3), m.ones(3, 4)),
    "conv2d, groups 2 of 3 channels": lambda m: m.nn.functional.conv2d(
        m.ones(1, 3, 5, 5), m.ones(2, 3, 3, 3), groups=2),
    "conv2d stride 0": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 5, 5), m.ones(2, 1, 3, 3), stride=0),
    "conv2d padding -1": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 5, 5), m.ones(2, 1, 3, 3), padding=-1),
    "conv2d dilation 0": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 5, 5), m.ones(2, 1, 3, 3), dilation=0),
    "conv2d of a 3-d weight": lambda m: m.nn.functional.conv2d(m.ones(1, 1, 5, 5), m.ones(2, 3, 3)),
    "conv2d, dtypes differ": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 5, 5), m.ones(2, 1, 3, 3, dtype=m.float64)),
    "conv2d padding 'same', stride 2": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 5, 5), m.ones(2, 1, 3, 3), stride=2, padding="same"),
    "conv2d padding 'full'": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 5, 5), m.ones(2, 1, 3, 3), padding="full"),
    "conv1d stride 0": lambda m: m.nn.functional.conv1d(m.ones(1, 1, 5), m.ones(1, 1, 3), stride=0),
    "conv1d padding 'x'": lambda m: m.nn.functional.conv1d(m.ones(1, 1, 5), m.ones(1, 1, 3), padding="x"),
    "max_pool2d stride 0": lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 4, 4), 2, stride=0),
    "max_pool2d kernel 0": lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 4, 4), 0),
    "max_pool2d kernel 0, stride 1": lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 4, 4), 0, 1),
    "max_pool2d stride -1": lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 4, 4), 2, -1),
    "max_pool2d padding -1": lambda m: m.nn.functional.max_pool2d(m.ones(1, 1, 4, 4), 2, 1, -1),
    "max_pool2d dilation 0": lambda m: m.nn.functional.max_pool2d(
        m.ones(1, 1, 4, 4), 2, dilation=0),
    "avg_pool2d stride 0": lambda m: m.nn.functional.avg_pool2d(m.ones(1, 1, 4, 4), 2, 0),
    "avg_pool2d padding past half": lambda m: m.nn.functional.avg_pool2d(
        m.ones(1, 1, 4, 4), 2, padding=2),
    "embedding of a 1-d weight": lambda m: m.nn.functional.embedding(m.tensor([0]), m.ones(3)),
    "embedding of a 3-d weight": lambda m: m.nn.functional.embedding(
        m.tensor([0]), m.ones(3, 2, 2)),
    "one_hot of -1": lambda m: m.nn.functional.one_hot(m.tensor([-1])),
    "one_hot of floats": lambda m: m.nn.functional.one_hot(m.tensor([1.0])),
    "layer_norm, shape differs": lambda m: m.nn.functional.layer_norm(m.ones(2, 3), (4,)),
    "layer_norm, weight differs": lambda m: m.nn.functional.layer_norm(
        m.ones(2, 3), (3,), m.ones(4)),
    "layer_norm, bias differs": lambda m: m.nn.functional.layer_norm(
        m.ones(2, 3), (3,), None, m.ones(4)),
    "batch_norm, running stats differ": lambda m: m.nn.functional.batch_norm(
        m.ones(2, 3), m.ones(4), m.ones(4)),
    "gelu approximate 'fast'": lambda m: m.nn.functional.gelu(m.ones(3), approximate="fast"),
    "gelu of int64": lambda m: m.nn.functional.gelu(m.ones(3, dtype=m.int64)),
    "leaky_relu of int64": lambda m: m.nn.functional.leaky_relu(m.ones(3, dtype=m.int64)),
    "tanh of bool": lambda m: m.tanh(m.ones(3, dtype=m.bool)),
    "normalize of int64": lambda m: m.nn.functional.normalize(m.ones(3, dtype=m.int64), dim=0),
    "cosine_similarity, shapes differ": lambda m: m.nn.functional.cosine_similarity(
        m.ones(2, 3), m.ones(2, 4)),
    "scaled_dot_product_attention, shapes differ": lambda m: (
        m.nn.functional.scaled_dot_product_attention(m.ones(2, 3, 4), m.ones(2, 3, 5),
                                                     m.ones(2, 3, 5))),
    # optimizers' constructors
    "SGD lr -1": lambda m: m.optim.SGD([_param(m)], lr=-1),
    "SGD momentum -1": lambda m: m.optim.SGD([_param(m)], lr=0.1, momentum=-1),
    "SGD weight_decay -1": lambda m: m.optim.SGD([_param(m)], lr=0.1, weight_decay=-1),
    "SGD nesterov without momentum": lambda m: m.optim.SGD([_param(m)], lr=0.1, nesterov=True),
    "SGD lr 'a'": lambda m: m.optim.SGD([_param(m)], lr="a"),
    "SGD of no parameters": lambda m: m.optim.SGD([], lr=0.1),
    "SGD of a tensor": lambda m: m.optim.SGD(_param(m), lr=0.1),
    "SGD of a non-leaf": lambda m: m.optim.SGD([m.ones(2, requires_grad=True) * 2], lr=0.1),
    "SGD of a number": lambda m: m.optim.SGD([1.0], lr=0.1),
    "SGD of None": lambda m: m.optim.SGD(None, lr=0.1),
    "SGD of a parameter twice": lambda m: (lambda p: m.optim.SGD([p, p], lr=0.1))(_param(m)),
    "SGD of a group without params": lambda m: m.optim.SGD([{"lr": 0.1}], lr=0.1),
    "SGD load_state_dict({})": lambda m: m.optim.SGD([_param(m)], lr=0.1).load_state_dict({}),
    "Adam lr -1": lambda m: m.optim.Adam([_param(m)], lr=-1),
    "Adam beta1 1.0": lambda m: m.optim.Adam([_param(m)], betas=(1.0, 0.9)),
    "Adam beta2 -0.1": lambda m: m.optim.Adam([_param(m)], betas=(0.9, -0.1)),
    "Adam eps -1": lambda m: m.optim.Adam([_param(m)], eps=-1),
    "Adam weight_decay -1": lambda m: m.optim.Adam([_param(m)], weight_decay=-1),
    "Adam of a set": lambda m: m.optim.Adam({_param(m)}),
    "AdamW beta1 1.5": lambda m: m.optim.AdamW([_param(m)], betas=(1.5, 0.9)),
    "RMSprop alpha -1": lambda m: m.optim.RMSprop([_param(m)], alpha=-1),
    "RMSprop momentum -1": lambda m: m.optim.RMSprop([_param(m)], momentum=-1),
    "Adagrad lr_decay -1": lambda m: m.optim.Adagrad([_param(m)], lr_decay=-1),
    "Adam step without grads": lambda m: (lambda p: (m.optim.Adam([p]).step(), p)[1])(_param(m)),
    "clip_grad_norm_ of nan, error_if_nonfinite": lambda m: (lambda p: (
        setattr(p, "grad", m.tensor([float("nan"), 1.0])),
        m.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)))(_param(m)),
}

# ---- the cases, and the divergences kept ----------------------------------------------------------


def _grid():
    cases = {}
    for op, run in DIM_OPS.items():
        for kind, dim in DIMS.items():
            cases[f"{op}, dim {kind}"] = lambda m, run=run, dim=dim: run(m, _x(m), dim(m))
    for op, run in SIZE_OPS.items():
        for kind, size in SIZES.items():
            cases[f"{op}, size {kind}"] = lambda m, run=run, size=size: run(m, size)
    for op, run in TENSOR_OPS.items():
        for kind, make in TENSORS.items():
            cases[f"{op} of {kind}"] = lambda m, run=run, make=make: run(m, make(m))
    for op, run in INPLACE_OPS.items():
        for kind, make in TARGETS.items():
            cases[f"{op} on {kind}"] = lambda m, run=run, make=make: run(m, make(m))
    cases.update(SINGLE)
    return cases


CASES = _grid()

_UNSUPPORTED_DTYPE = ("gradviz has no complex, uint16/32/64 or bfloat16 tensors: a TypeError "
                      "that lists the dtypes it has")
_LENIENT = ("gradviz converts a numpy array where torch's function wants a tensor (as torch's "
            "operators do: x + array), the numpy interop the tutorials use")
_NUMBER_OPERAND = ("gradviz takes a Python number as the second operand of its binary ops "
                   "(maximum(x, 0.0), atan2(y, 1.0)); torch only where its schema has a Scalar")
KNOWN = {
    "norm, dim numpy int64 1": "torch's Tensor.norm takes len() of its dim (a numpy int or a 0-d "
                               "tensor fails); gradviz takes any integer dim, as torch's other "
                               "reductions do",
    "norm, dim 0-d int tensor": "as norm, dim numpy int64 1",
    "maximum of Python float": _NUMBER_OPERAND,
    "maximum of Python int": _NUMBER_OPERAND,
    "atan2 of Python float": _NUMBER_OPERAND,
    "atan2 of Python int": _NUMBER_OPERAND,
    "eq of None": "x == None is False in both libraries; gradviz.eq is that comparison, where "
                  "torch.eq refuses None",
    "gather index of 0-size": "torch skips gather's index dtype check when there is nothing to "
                              "gather; gradviz checks the dtype first",
    "matmul of bools": "gradviz multiplies bool matrices (numpy's logical and/or); torch has no "
                       "bool kernel",
    "dtype 'float32'": "gradviz.dtypes.as_dtype takes a name or a numpy dtype too (documented in "
                       "its docstring)",
    "dtype numpy float32": "as dtype 'float32'",
    "tensor of complex": _UNSUPPORTED_DTYPE,
    "tensor of numpy uint16": _UNSUPPORTED_DTYPE,
    "ones on mps": "gradviz refuses every device but the CPU with one RuntimeError; torch's type "
                   "depends on its build (NotImplementedError without MPS)",
    "Parameter of a list": "torch fails inside Parameter with an AttributeError of its own; "
                           "gradviz makes the list a tensor",
}
_EXPANDED = ("gradviz's expanded tensors are read-only numpy broadcast views: every in-place "
             "write to one is refused with torch's overlap error, also a fill that torch lets "
             "write one value to the shared memory (x[0] = 1 of a (2, 1) expanded, torch refuses "
             "too)")
KNOWN.update({f"{op} on {target}": _EXPANDED for op in ("fill_", "zero_", "masked_fill_")
              for target in ("expanded (1, 3)", "expanded (2, 1)")})
KNOWN["setitem on expanded (1, 3)"] = _EXPANDED
KNOWN.update({f"{op}, dim None": "gradviz reads dim=None as every dim, as torch's sum, mean and "
              f"amax do; torch's {op} has no None in its schema"
              for op in ("prod", "max", "logsumexp", "median", "squeeze")})
KNOWN.update({f"{op} of numpy array": _LENIENT for op in (
    "add", "sub", "div", "pow", "maximum", "atan2", "where", "eq", "exp", "log", "sigmoid", "relu",
    "F.mse_loss")})


def _builtin_class(error):
    """The nearest built-in exception class of ``error`` (torch's own subclasses, such as
    ``torch.AcceleratorError``, and gradviz's count as the built-in they derive from)."""
    return next(c for c in type(error).__mro__ if c.__module__ == "builtins")


class _Hang(BaseException):
    pass


def _alarm(signum, frame):
    raise _Hang


def _summary(value):
    if type(value).__name__ == "Size":
        return tuple(value)
    if isinstance(value, (tuple, list)):
        return [_summary(v) for v in value]
    if hasattr(value, "detach") and hasattr(value, "dtype"):
        return ("tensor", tuple(value.shape), str(value.dtype).rsplit(".", 1)[-1],
                value.detach().numpy())
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    return type(value).__name__  # a module, an optimizer, ...


def _outcome(lib, case, cases=None):
    """What ``cases[case]`` (:data:`CASES` unless told) did on ``lib``: ("returned", its
    summary) or ("raised", the exception)."""
    cases = CASES if cases is None else cases
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS)
    try:
        with warnings.catch_warnings():  # (the libraries' warnings are not compared)
            warnings.simplefilter("ignore")
            return "returned", _summary(cases[case](lib))
    except _Hang:
        pytest.fail(f"{lib.__name__} hung on {case!r}")
    except Exception as error:  # noqa: BLE001 - compared with torch's
        return "raised", error
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _assert_same(ours, theirs, where=""):
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{where}[{i}]")
        return
    if isinstance(theirs, tuple) and theirs and theirs[0] == "tensor":
        assert isinstance(ours, tuple) and ours[0] == "tensor", (where, ours)
        assert ours[1:3] == theirs[1:3], f"{where}: shape/dtype {ours[1:3]} != {theirs[1:3]}"
        if ours[3].dtype.kind == "f":
            np.testing.assert_allclose(ours[3], theirs[3], rtol=2e-6, atol=1e-7, equal_nan=True,
                                       err_msg=where)
        else:
            np.testing.assert_array_equal(ours[3], theirs[3], err_msg=where)
        return
    if isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours), where
        return
    assert ours == theirs, where


def _compare(ours, theirs):
    """Assert that gradviz's outcome is torch's (the rules of the module's docstring)."""
    if theirs[0] == "raised":
        assert ours[0] == "raised", f"torch raised {theirs[1]!r}; gradviz returned {ours[1]!r}"
        assert _builtin_class(ours[1]) is _builtin_class(theirs[1]), (
            f"torch raised {type(theirs[1]).__name__}: {theirs[1]}; gradviz raised "
            f"{type(ours[1]).__name__}: {ours[1]}")
        message = str(ours[1]).replace("gradviz", "torch")
        for phrase in KEY_PHRASES:
            if phrase in str(theirs[1]):
                assert phrase in message, f"torch says {theirs[1]!s}; gradviz says {ours[1]!s}"
        return
    assert ours[0] == "returned", f"torch returned {theirs[1]!r}; gradviz raised {ours[1]!r}"
    _assert_same(ours[1], theirs[1])


def check_case(ours, theirs, known, compare=_compare):
    """The test of one case: nothing leaked from the internals (an exception of exactly torch's
    class is fine: torch.load's pickle.UnpicklingError), then ``compare`` holds, or, for a
    divergence kept on purpose (``known``), still fails, so that a fix removes it from the
    list."""
    if ours[0] == "raised" and not (theirs[0] == "raised" and type(ours[1]) is type(theirs[1])):
        error = ours[1]
        assert type(error).__module__ == "builtins" or type(error).__module__.startswith(
            "gradviz"), f"an exception from the internals leaked: {type(error)}: {error}"
    if known:
        with pytest.raises(AssertionError):
            compare(ours, theirs)
        return
    compare(ours, theirs)


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_arguments_as_in_torch(case):
    check_case(_outcome(gradviz, case), _outcome(torch, case), case in KNOWN)


def test_no_case_hides_another_and_every_known_divergence_names_a_case():
    """A single case named like a grid case would replace it; a misspelt :data:`KNOWN` entry
    would mark nothing."""
    grid = (len(DIM_OPS) * len(DIMS) + len(SIZE_OPS) * len(SIZES) + len(TENSOR_OPS) * len(TENSORS)
            + len(INPLACE_OPS) * len(TARGETS))
    assert len(CASES) == grid + len(SINGLE)
    assert set(KNOWN) <= set(CASES)


# ---- the debugger's entry points ---------------------------------------------------------------

def _freed():
    x = gradviz.ones(2, 3, requires_grad=True)
    loss = (x.exp() * 2).sum()
    loss.backward()
    return loss


NOT_A_LOSS = {
    "None": lambda: None,
    "a float": lambda: 3.0,
    "a numpy array": lambda: np.ones(2),
    "a str": lambda: "loss",
    "a module": lambda: gradviz.nn.Linear(2, 2),
}
NO_GRAPH = {
    "a tensor without grad_fn": lambda: gradviz.ones(()),
    "an int tensor": lambda: gradviz.ones((), dtype=gradviz.int64),
}


@pytest.mark.parametrize("value", NOT_A_LOSS)
@pytest.mark.parametrize("entry", ["backward", "doctor", "record_torch"])
def test_debugger_entry_points_refuse_what_is_no_tensor(entry, value):
    with pytest.raises(TypeError, match="Tensor|tensor"):
        getattr(debug, entry)(NOT_A_LOSS[value]())


@pytest.mark.parametrize("value", NO_GRAPH)
@pytest.mark.parametrize("entry", ["backward", "doctor"])
def test_debugger_entry_points_refuse_a_tensor_without_graph(entry, value):
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        getattr(debug, entry)(NO_GRAPH[value]())


def test_debug_backward_of_a_non_scalar_asks_for_a_gradient():
    x = gradviz.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        debug.backward(x * 2)


def test_debug_backward_of_a_freed_graph_warns_how_to_rebuild_it():
    with pytest.warns(UserWarning, match="Re-run the cell that computes the loss"):
        debug.backward(_freed())


def test_record_torch_of_a_gradviz_tensor_points_to_the_gradviz_debugger():
    x = gradviz.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"gradviz\.debug\.backward\(loss\)"):
        debug.record_torch((x * 2).sum())


@pytest.mark.parametrize("value", [*NOT_A_LOSS, "a tensor"])
def test_diff_refuses_what_is_no_trace(value):
    make = NOT_A_LOSS.get(value, lambda: gradviz.ones(2, 2))  # a tensor has a trace() method
    with pytest.raises(TypeError, match="must be a gradviz.instrument.Trace"):
        debug.diff(make(), make())


@pytest.mark.parametrize("value", [*(v for v in NOT_A_LOSS if v != "a module"), "a tensor"])
def test_runcall_refuses_what_is_not_callable(value):
    make = NOT_A_LOSS.get(value, lambda: gradviz.ones(2, 2))
    with pytest.raises(TypeError, match="fn must be a callable"):
        debug.runcall(make())
