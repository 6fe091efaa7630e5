"""Conformance sweep: small programs of the kind found in autograd tutorials, course notebooks
and blog posts, each run with ``import gradviz as torch`` and with real PyTorch in the same
process, comparing everything observable.

A program is a function ``program(torch, o)``: ``torch`` is the module under test (gradviz or
torch) and ``o`` records observations (``o("name", value)``), errors (``o.raises``) and warnings
(``o.warns``). Observations are normalized at the time they are made (tensors are copied), so a
later in-place change does not alter what was seen. The two runs are then compared:

* tensors: class name, dtype, shape, ``requires_grad``, ``is_leaf`` exactly; values exactly for
  integers and bools, within 1e-6 relative for float32 (1e-12 for float64), unless a program
  declares a looser tolerance (long training loops, where summation order differs);
* ``torch.Size``, dtypes, Python numbers (type included), strings (printed output, with the
  module name ``gradviz`` read as ``torch``), containers (list vs tuple) recursively;
* errors: the exception type, and a key phrase that must appear in both messages (in
  gradviz's with the module name read as ``torch``);
* warnings: the categories, and a key phrase when given.

Programs never depend on torch's random streams: inputs come from ``tensor``/``arange``/
``linspace``/``ones``, and weights are copied into both libraries. Programs that use
``randn`` only check what does not depend on the values (shapes, dtypes, finite differences).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch as _torch

import gradviz as _gradviz

ALL_NAMES = set()  # program names across every sweep file: each must be unique


def registry():
    """A decorator ``program`` for one test file; ``program.all`` lists what it registered.

    ``@program`` registers a program; ``@program(rtol, atol=...)`` loosens the float32
    comparison for it.
    """
    programs = []

    def program(rtol=None, *, atol=None):
        def register(fn):
            if fn.__name__ in ALL_NAMES:
                raise ValueError(f"a sweep program named {fn.__name__!r} exists already")
            ALL_NAMES.add(fn.__name__)
            fn.tolerance = (rtol, atol)
            programs.append(fn)
            return fn

        if callable(rtol):  # used bare: @program
            fn, rtol = rtol, None
            return register(fn)
        return register

    program.all = programs
    return program


# ---- observations ---------------------------------------------------------------------------

_TENSOR_TYPES = (_torch.Tensor, _gradviz.Tensor)


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _text(value: str) -> str:
    return value.replace("gradviz", "torch")


def normalize(value):
    """A plain, comparable description of ``value`` (tensors are copied)."""
    if isinstance(value, _TENSOR_TYPES):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = np.array(value.detach().numpy(), copy=True)
        return ("tensor", type(value).__name__, _dtype_name(value.dtype), tuple(value.shape),
                bool(value.requires_grad), bool(value.is_leaf), data)
    if isinstance(value, (_torch.Size, _gradviz.Size)):
        return ("Size", tuple(value))
    if isinstance(value, (_torch.dtype, _gradviz.dtype)):
        return ("dtype", _dtype_name(value))
    if isinstance(value, str):
        return ("str", _text(value))
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, (int, float)):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.shape, value.copy())
    if isinstance(value, np.generic):
        return ("npscalar", str(value.dtype), value.item())
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return (kind, tuple(normalize(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((_text(str(k)), normalize(v)) for k, v in value.items()))
    raise TypeError(f"cannot observe {type(value).__name__}: {value!r}")


class Observer:
    def __init__(self):
        self.items = []
        self.phrases = {}

    def __call__(self, name, value):
        self.items.append((name, normalize(value)))

    def raises(self, name, fn, phrase, *, args=()):
        """Run ``fn``; record the exception type and message (the phrase must be in both)."""
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - compared with torch's
            self.items.append((name, ("error", type(exc).__name__, str(exc))))
        else:
            self.items.append((name, ("no error",)))
        self.phrases[name] = phrase

    def warns(self, name, fn, phrase=None):
        """Run ``fn`` and record the categories of the warnings it gave; returns its result."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        self.items.append((name, ("warnings", tuple((w.category.__name__, str(w.message))
                                                    for w in caught))))
        self.phrases[name] = phrase
        return result


def run(fn, module):
    o = Observer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(module, o)
        except Exception as exc:  # noqa: BLE001
            o.items.append(("<uncaught>", ("uncaught", type(exc).__name__, str(exc))))
    return o


def _float_tolerance(dtype, tolerance):
    rtol, atol = tolerance
    if dtype == "float64":
        return (rtol if rtol is not None else 1e-12), (atol if atol is not None else 1e-14)
    if dtype == "float16":
        return (rtol if rtol is not None else 1e-3), (atol if atol is not None else 1e-4)
    return (rtol if rtol is not None else 1e-6), (atol if atol is not None else 1e-7)


def compare(gv, th, where, tolerance, phrase, problems):
    if gv[0] != th[0]:
        problems.append(f"{where}: gradviz {gv[:3]!r} vs torch {th[:3]!r}")
        return
    kind = th[0]
    if kind == "tensor":
        _, gcls, gdt, gshape, grg, gleaf, gdata = gv
        _, tcls, tdt, tshape, trg, tleaf, tdata = th
        meta_g, meta_t = (gcls, gdt, gshape, grg, gleaf), (tcls, tdt, tshape, trg, tleaf)
        if meta_g != meta_t:
            problems.append(f"{where}: (class, dtype, shape, requires_grad, is_leaf) gradviz "
                            f"{meta_g} vs torch {meta_t}")
            return
        compare_arrays(gdata, tdata, tdt, where, tolerance, problems)
    elif kind == "ndarray":
        if gv[1:3] != th[1:3]:
            problems.append(f"{where}: ndarray {gv[1:3]} vs torch {th[1:3]}")
            return
        compare_arrays(gv[3], th[3], th[1], where, tolerance, problems)
    elif kind in ("list", "tuple", "dict"):
        if len(gv[1]) != len(th[1]):
            problems.append(f"{where}: {kind} of length {len(gv[1])} vs torch {len(th[1])}")
            return
        for i, (g, t) in enumerate(zip(gv[1], th[1])):
            if kind == "dict":
                if g[0] != t[0]:
                    problems.append(f"{where}: key {g[0]!r} vs torch {t[0]!r}")
                    continue
                compare(g[1], t[1], f"{where}[{t[0]!r}]", tolerance, phrase, problems)
            else:
                compare(g, t, f"{where}[{i}]", tolerance, phrase, problems)
    elif kind == "float":
        rtol, atol = _float_tolerance("float32", tolerance)
        if not (math.isclose(gv[1], th[1], rel_tol=rtol, abs_tol=atol)
                or (math.isnan(gv[1]) and math.isnan(th[1]))):
            problems.append(f"{where}: gradviz {gv[1]!r} vs torch {th[1]!r}")
    elif kind == "error":
        if gv[1] != th[1]:
            problems.append(f"{where}: gradviz raised {gv[1]}: {gv[2]}\n    torch raised {th[1]}: {th[2]}")
        elif phrase is not None and phrase not in _text(gv[2]):
            problems.append(f"{where}: gradviz's message lacks {phrase!r}: {gv[2]}")
        if phrase is not None and phrase not in th[2]:
            problems.append(f"{where}: the phrase {phrase!r} is not torch's: {th[2]}")
    elif kind == "warnings":
        gcat = [c for c, _ in gv[1]]
        tcat = [c for c, _ in th[1]]
        if gcat != tcat:
            problems.append(f"{where}: warnings gradviz {gv[1]} vs torch {th[1]}")
        elif phrase is not None:
            for (_, gm), (_, tm) in zip(gv[1], th[1]):
                if phrase not in tm:
                    problems.append(f"{where}: the phrase {phrase!r} is not torch's: {tm}")
                if phrase not in _text(gm):
                    problems.append(f"{where}: gradviz's warning lacks {phrase!r}: {gm}")
    elif gv != th:
        problems.append(f"{where}: gradviz {gv!r} vs torch {th!r}")


def compare_arrays(g, t, dtype, where, tolerance, problems):
    if g.shape != t.shape:
        problems.append(f"{where}: shape {g.shape} vs torch {t.shape}")
        return
    if dtype.startswith("float"):
        rtol, atol = _float_tolerance(dtype, tolerance)
        if not np.allclose(g, t, rtol=rtol, atol=atol, equal_nan=True):
            problems.append(f"{where}: values differ\n    gradviz {g!r}\n    torch   {t!r}")
    elif not np.array_equal(g, t):
        problems.append(f"{where}: values differ\n    gradviz {g!r}\n    torch   {t!r}")


def check(fn):
    th = run(fn, _torch)
    gv = run(fn, _gradviz)
    problems = []
    uncaught = [v for n, v in th.items if n == "<uncaught>"]
    assert not uncaught, f"the program fails in torch: {uncaught}"
    gv_names = [n for n, _ in gv.items]
    th_names = [n for n, _ in th.items]
    if gv_names != th_names:
        extra = {n: v for n, v in gv.items if n == "<uncaught>"}
        problems.append(f"observations differ: gradviz {gv_names} vs torch {th_names} {extra}")
    for (name, g), (_, t) in zip(gv.items, th.items):
        compare(g, t, name, fn.tolerance, th.phrases.get(name), problems)
    assert not problems, "\n".join(problems)


# ---- shared by programs in several files ------------------------------------------------------

def node_name(node):
    """A node's name without torch's ``torch::autograd::`` prefix (AccumulateGrad, CopySlices,
    CopyBackwards), which gradviz leaves out."""
    return None if node is None else node.name().replace("torch::autograd::", "")


# a small regression / classification problem and its starting weights

W1 = [[0.2, -0.1, 0.4], [0.3, 0.5, -0.2], [-0.4, 0.1, 0.3], [0.1, -0.3, 0.2]]
B1 = [0.1, -0.1, 0.05, 0.0]
W2 = [[0.3, -0.2, 0.1, 0.4], [-0.1, 0.2, 0.3, -0.3]]
B2 = [0.02, -0.03]
X_DATA = [[0.5, -1.0, 2.0], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.0],
          [0.0, 1.0, -1.0], [1.2, 1.2, 0.5]]
Y_REG = [[1.0, 0.0], [0.5, -0.5], [0.2, 0.3], [-1.0, 0.4], [0.0, 0.0], [0.7, -0.1]]
Y_CLS = [0, 1, 1, 0, 1, 0]


def make_mlp(torch, activation="ReLU"):
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        getattr(torch.nn, activation)(),
        torch.nn.Linear(4, 2),
    )
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(W1))
        model[0].bias.copy_(torch.tensor(B1))
        model[2].weight.copy_(torch.tensor(W2))
        model[2].bias.copy_(torch.tensor(B2))
    return model
