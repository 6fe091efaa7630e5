"""The reference engine (``gradviz.autograd.reference_engine``) is the definition of the event
order: on random programs, the compiled engine's observer must hear exactly what the
reference engine's hears (every kind, node, sentence and value), and leave the same ``.grad``.

The programs are the engine fuzzer's (hooks that scale or log gradients, fan-in, split/unbind,
views, in-place writes, custom Functions with materialization and ``mark_dirty``, detach,
node pre- and post-hooks, post-accumulate-grad hooks), each run with ``backward()`` twice with
``retain_graph`` (the second pass accumulates into ``.grad``), with ``create_graph``, or from
several roots at once.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_engine_fuzz_vs_torch import build

import gradviz
from gradviz.autograd import reference_engine
from gradviz.autograd._functional import make_graph_task
from gradviz.instrument import Recorder

SEEDS = range(200)
MODES = ("twice", "create_graph", "roots")


def stream(events):
    """Events with ids renumbered in order of appearance and times zeroed."""
    ids = {}

    def node(value):
        return None if value is None else ids.setdefault(value, len(ids))

    normalized = []
    for event in events:
        event = dict(event, time=0.0)
        event.pop("traceback", None)  # the engines' own frames differ
        if "duration" in event:
            event["duration"] = 0.0
        event["node"] = node(event["node"])
        if "producer" in event:
            event["producer"] = node(event["producer"])
        if event["kind"] == "backward_started":
            event["roots"] = [dict(r, node=node(r["node"])) for r in event["roots"]]
            event["dependencies"] = sorted((node(int(k)), v) for k, v in event["dependencies"].items())
        normalized.append(event)
    return normalized


def run(seed, mode, engine):
    """``seed``'s program, its backward run by ``engine``; (events, leaves' grads) or the error.

    ``"compiled_dicts"`` is the compiled engine with its counts in dicts (Note [Counts on
    nodes] in gradviz_ext/_task.py): another task, never run, holds the stamps on the graph.
    """
    program = build(gradviz, seed)
    if program.loss is None:
        return "no-grad"
    recorder = Recorder()

    def backward(tensors, grads=None, retain_graph=None, create_graph=False):
        if engine == "reference":
            reference_engine.backward(tensors, grads, retain_graph, create_graph, observer=recorder)
            return
        holder = make_graph_task(tensors, grads, True) if engine == "compiled_dicts" else None
        try:
            task = make_graph_task(tensors, grads, retain_graph, create_graph, observer=recorder)
            # the path under test (a lone root has no counts: then both paths are one)
            assert holder is None or task._serial == 0 or not task.dependencies()
            task.run()
        finally:
            if holder is not None:
                holder.abort()

    try:
        if mode == "twice":
            backward(program.loss, retain_graph=True)
            backward(program.loss)
        elif mode == "create_graph":
            backward(program.loss, create_graph=True)
        else:
            roots = [t for _, t in program.roots]
            backward(roots, [gradviz.ones_like(t) * (i + 1) for i, t in enumerate(roots)])
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc), stream(recorder.events))
    grads = [None if t.grad is None else np.asarray(t.grad.detach().numpy()).tolist()
             for _, t in program.leaves]
    return stream(recorder.events), grads


def broadcast_and_cast():
    """Broadcasting (grad_reduced), mixed dtypes (grad_cast), a NaN and a leaf used twice."""
    x = gradviz.tensor([[1.0, -2.0, 0.5]], requires_grad=True)
    b = gradviz.tensor([0.25], dtype=gradviz.float64, requires_grad=True)
    h = (x * gradviz.ones(4, 1) + b).sqrt()  # NaN where negative
    return (h.nan_to_num() * x).sum(), [x, b]


def wrong_count():
    class Bad(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return (grad,)  # one gradient for two inputs

    a = gradviz.tensor([1.0, 2.0], requires_grad=True)
    return (Bad.apply(a * 2, a) * 3).sum(), [a]


@pytest.mark.parametrize("program", [broadcast_and_cast, wrong_count])
def test_hand_written_programs_emit_the_reference_stream(program):
    results = []
    for engine in ("reference", "compiled"):
        loss, leaves = program()
        recorder = Recorder()
        try:
            if engine == "reference":
                reference_engine.backward(loss, observer=recorder)
            else:
                make_graph_task(loss, observer=recorder).run()
            outcome = None
        except RuntimeError as exc:
            outcome = str(exc)
        results.append((stream(recorder.events), outcome,
                        [None if t.grad is None else t.grad.tolist() for t in leaves]))
    assert repr(results[0]) == repr(results[1])  # repr: NaN equals NaN
    kinds = {event["kind"] for event in results[0][0]}
    if program is broadcast_and_cast:
        assert {"grad_reduced", "grad_cast"} <= kinds
    else:
        assert "error" in kinds and "incorrect number of gradients" in results[0][1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", SEEDS)
def test_compiled_engine_emits_the_reference_event_stream(seed, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = run(seed, mode, "reference")
        got = run(seed, mode, "compiled")
    assert got == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(0, 200, 4))
def test_counts_in_dicts_emit_the_reference_event_stream_too(seed, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = run(seed, mode, "reference")
        got = run(seed, mode, "compiled_dicts")
    assert got == expected


def test_the_programs_reach_what_the_reference_defines():
    kinds = set()
    for seed in SEEDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run(seed, "twice", "reference")
        if isinstance(result, tuple) and isinstance(result[0], list):
            kinds.update(event["kind"] for event in result[0])
    assert {"prehook", "posthook", "grads_materialized", "saved_released",
            "grad_accumulated", "buffer_added", "node_ready"} <= kinds, kinds
