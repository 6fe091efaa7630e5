"""Differential fuzzing of the engine against PyTorch: random graphs, hooks, partial passes.

Each seed builds a small program: leaves (some without grad), elementwise and broadcasting
ops, multi-output ops (split/unbind) with some outputs unused, views, in-place writes on
intermediates (``mul_``, ``__setitem__``), three custom Functions (saving an input; two
outputs, materializing missing gradients or not; ``mark_dirty``), detach; tensor hooks (some
scaling the gradient), ``retain_grad``, node pre- and post-hooks, post-accumulate-grad hooks,
multi-grad hooks. Then one backward: ``backward()``, ``backward(inputs=...)``, ``autograd.grad``
with ``allow_unused``/``materialize_grads``/``grad_outputs``/``create_graph`` and a second
derivative, several roots, a retained second pass, a second pass after the graph was freed.
The log of every hook call (in order, with the gradients it saw), the leaves' and retained
``.grad``s, the returned gradients and any error (type and message) must equal torch's.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
import torch

import gradviz

SEEDS = range(250)


def _functions(L):
    """Three custom Functions: one saving its input, one with two outputs and
    ``set_materialize_grads(False)``, one that modifies its input in place."""
    class Sq(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Two(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            # both settings, chosen by the program's shape (no draw: seeds keep their
            # programs); an unused output then reaches backward as None or as zeros the
            # engine materialized (the only materialization in these programs: split and
            # unbind nodes fill missing gradients in their rules)
            ctx.set_materialize_grads(x.dim() == 1)
            return x + y, x * y

        @staticmethod
        def backward(ctx, ga, gb):
            if ga is None and gb is None:
                return None, None
            ga = ga if ga is not None else 0
            gb = gb if gb is not None else 0
            return ga + gb * 2, ga - gb

    class Dirty(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Sq, Two, Dirty


def fmt(v):
    """Values rounded for comparison (tuples of lists, None kept)."""
    if v is None:
        return None
    if isinstance(v, (tuple, list)):
        return tuple(fmt(x) for x in v)
    if hasattr(v, "detach"):
        return np.round(v.detach().numpy().astype(np.float64), 5).tolist()
    return v


class Program:
    """One seed's program, built up to its loss (``loss`` None: nothing requires grad)."""

    def __init__(self, rng, log, leaves, pool, named, cands, roots, loss):
        self.rng, self.log, self.leaves, self.pool = rng, log, leaves, pool
        self.named, self.cands, self.roots, self.loss = named, cands, roots, loss


def build(L, seed) -> Program:
    """Build the program of ``seed`` in library ``L`` up to its loss (no backward yet).
    Also used by test_event_oracle_vs_torch.py."""
    rng = random.Random(seed)
    log = []
    Sq, Two, Dirty = _functions(L)
    shape = rng.choice([(3,), (2, 3)])
    nleaf = rng.randint(1, 3)
    leaves = []
    for i in range(nleaf):
        t = L.tensor(np.linspace(-1 + i * 0.3, 1 + i * 0.2, int(np.prod(shape))).reshape(shape), dtype=L.float64,
                     requires_grad=(i == 0 or rng.random() < 0.8))
        leaves.append((f"L{i}", t))
    pool = list(leaves)
    named = {}
    def pick():
        return rng.choice(pool)
    nops = rng.randint(2, 9)
    for k in range(nops):
        kind = rng.choice(["unary", "unary", "binary", "binary", "split", "view", "inplace", "sq", "two", "dirty",
                           "detach", "hook", "hook", "retain", "nodehook", "postacc"])
        name = f"t{k}"
        n1, a = pick()
        if kind == "unary":
            f = rng.choice(["exp", "tanh", "mul", "sin"])
            out = {"exp": lambda: (a * 0.5).exp(), "tanh": lambda: a.tanh(), "mul": lambda: a * 3, "sin": lambda: a.sin()}[f]()
            pool.append((name, out))
        elif kind == "binary":
            n2, b = pick()
            out = rng.choice([lambda: a + b, lambda: a * b, lambda: a - 2 * b])()
            pool.append((name, out))
        elif kind == "split":
            pieces = a.split(1, dim=-1) if rng.random() < 0.5 else a.unbind(-1)
            for j, p in enumerate(pieces):
                if rng.random() < 0.6:
                    q = p if p.dim() == len(shape) else p.unsqueeze(-1)
                    pool.append((f"{name}_{j}", q.expand(shape) * (j + 1)))
        elif kind == "view":
            v = a.view(-1) if rng.random() < 0.5 else a.flip(-1)
            pool.append((name, v.reshape(shape) * 1))
        elif kind == "inplace":
            if a.grad_fn is not None and a._base is None:
                c = a * 1
                if rng.random() < 0.5:
                    c.mul_(2)
                else:
                    c[..., 0] = a[..., 1] * 3
                pool.append((name, c))
        elif kind == "sq":
            pool.append((name, Sq.apply(a)))
        elif kind == "two":
            n2, b = pick()
            o1, o2 = Two.apply(a, b)
            r = rng.random()
            if r < 0.4:
                pool.append((name + "a", o1))
            elif r < 0.8:
                pool.append((name + "b", o2))
            else:
                pool.extend([(name + "a", o1), (name + "b", o2)])
        elif kind == "dirty":
            if a.requires_grad and a.grad_fn is not None:
                c = a * 1
                pool.append((name, Dirty.apply(c)))
        elif kind == "detach":
            pool.append((name, a.detach() * 2))
        elif kind == "hook":
            if a.requires_grad:
                scale = rng.choice([None, 2.0, 0.5])
                def h(g, n1=n1, scale=scale):
                    log.append(("hook", n1, fmt(g)))
                    return None if scale is None else g * scale
                a.register_hook(h)
        elif kind == "retain":
            if a.requires_grad:
                a.retain_grad()
                named[n1] = a
        elif kind == "nodehook":
            if a.grad_fn is not None:
                nm = a.grad_fn.name()
                if rng.random() < 0.5:
                    a.grad_fn.register_prehook(lambda go, nm=nm: log.append(("pre", nm, fmt(go))))
                else:
                    a.grad_fn.register_hook(lambda gi, go, nm=nm: log.append(("post", nm, fmt(gi), fmt(go))))
        elif kind == "postacc":
            if a.requires_grad and a.grad_fn is None:
                a.register_post_accumulate_grad_hook(lambda t, n1=n1: log.append(("postacc", n1, fmt(t.grad))))
    # roots
    cands = [(n, t) for n, t in pool if t.requires_grad]
    if not cands:
        return Program(rng, log, leaves, pool, named, cands, [], None)
    roots = rng.sample(cands, min(len(cands), rng.randint(1, 3)))
    loss = sum((t * (i + 1)).sum() for i, (n, t) in enumerate(roots))
    return Program(rng, log, leaves, pool, named, cands, roots, loss)


def run(L, seed):
    """Build the program of ``seed`` in library ``L``, run its backward; return (log, result)."""
    program = build(L, seed)
    if program.loss is None:
        return program.log, "no-grad"
    rng, log, leaves, pool = program.rng, program.log, program.leaves, program.pool
    named, cands, roots, loss = program.named, program.cands, program.roots, program.loss
    mode = rng.choice(["backward", "backward", "inputs", "grad", "grad_unused", "twice", "multi",
                       "noretain", "double", "grad_outputs", "multihook"])
    res = None
    req_leaves = [(n, t) for n, t in leaves if t.requires_grad]
    if mode == "backward":
        loss.backward()
    elif mode == "inputs":
        sel = rng.sample(cands, rng.randint(1, min(3, len(cands))))
        loss.backward(inputs=[t for n, t in sel])
        res = [fmt(t.grad) if t.grad_fn is None or t.retains_grad else None for n, t in sel]
    elif mode == "grad":
        sel = rng.sample(cands, rng.randint(1, min(3, len(cands))))
        res = fmt(L.autograd.grad(loss, [t for n, t in sel], allow_unused=True))
    elif mode == "grad_unused":
        sel = rng.sample(pool, rng.randint(1, min(3, len(pool))))
        sel = [(n, t) for n, t in sel if t.requires_grad] or req_leaves[:1]
        res = fmt(L.autograd.grad(loss, [t for n, t in sel], allow_unused=True, materialize_grads=True))
    elif mode == "twice":
        loss.backward(retain_graph=True)
        log.append(("second",))
        loss.backward()
    elif mode == "noretain":
        loss.backward()
        log.append(("second",))
        loss.backward()
    elif mode == "double":
        sel = [t for n, t in req_leaves] or [cands[0][1]]
        gs = L.autograd.grad(loss, sel, create_graph=True, allow_unused=True)
        log.append(("first", fmt(gs)))
        tot = sum((g * g).sum() for g in gs if g is not None and g.requires_grad)
        if isinstance(tot, int):
            res = "no second"
        else:
            res = fmt(L.autograd.grad(tot, sel, allow_unused=True))
    elif mode == "grad_outputs":
        n0, t0 = roots[0]
        res = fmt(L.autograd.grad(t0, [t for n, t in req_leaves] or [t0], L.ones_like(t0) * 0.5, allow_unused=True))
    elif mode == "multihook":
        ts = [t for n, t in cands[:3]]
        L.autograd.graph.register_multi_grad_hook(ts, lambda gs: log.append(("multi", fmt(list(gs)))))
        loss.backward()
    elif mode == "multi":
        L.autograd.backward([t for n, t in roots], [L.ones_like(t) * (i + 1) for i, (n, t) in enumerate(roots)])
    grads = [(n, fmt(t.grad)) for n, t in leaves]
    retained = [(n, fmt(t.grad)) for n, t in named.items()]
    return log, (mode, res, grads, retained)


def outcome(L, seed):
    """``run``, or the error it raised (type and first line, library names masked)."""
    try:
        return run(L, seed)
    except Exception as e:
        msg = str(e).split("\n")[0][:100].replace("torch.", "LIB.").replace("gradviz.", "LIB.")
        return ("error", type(e).__name__, msg)


@pytest.mark.parametrize("seed", SEEDS)
def test_engine_program_matches_torch(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = outcome(torch, seed)
        got = outcome(gradviz, seed)
    assert repr(got) == repr(expected)
