"""The event payloads against an oracle: PyTorch's own backward, recorded by ``record_torch``.

For every program of the engine fuzzer (the engine fuzzer in this folder: hooks that
scale gradients, fan-in, multi-output ops, custom Functions, in-place writes, views), gradviz
records its backward with ``gradviz.record()`` and torch's is recorded by ``record_torch``; half
the seeds run one backward first, so that every leaf's ``.grad`` is accumulated into. Nodes are
matched by the order in which they ran (the engines run in the same order: the fuzzer checks
it), and every value both traces report must agree:

- what each node handed on (``node_finished.grads_out``);
- each ``buffer_added``: the contribution (``grad``) and the buffer's sum after it (``sum``);
- each ``grad_accumulated``: the leaf's ``.grad`` before and after;
- what each node received (``node_started.grads_in``) where gradviz ran no pre-hook on it
  (torch's recorder sees the gradients after tensor hooks; gradviz's before them).

Where the graphs differ in shape (an in-place write into a view of a non-leaf: gradviz records
the write's node beside ``CopySlices``), only the leaves' ``.grad`` before and after are
compared. Within each trace, the last ``sum`` of each slot must also be what the node then received: the
buffer shown at an event is the buffer the engine hands over.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from test_engine_fuzz_vs_torch import build

import gradviz
from gradviz.debug import record_torch

SEEDS = range(200)


def close(a, b) -> bool:
    """Two summaries agree: exact counts, shape and dtype; numbers to float64 round-off."""
    if a is None or b is None:
        return a is None and b is None
    for key in ("shape", "numel", "nan", "inf"):
        if a[key] != b[key]:
            return False
    if a["dtype"] != b["dtype"]:
        return False
    numbers_a = [a["min"], a["max"], a["mean"], a["norm"], *a["values"]]
    numbers_b = [b["min"], b["max"], b["mean"], b["norm"], *b["values"]]
    if len(numbers_a) != len(numbers_b):
        return False
    for x, y in zip(numbers_a, numbers_b):
        if isinstance(x, str) or isinstance(y, str) or x is None or y is None:
            if x != y:
                return False
        elif not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
            return False
    return True


def closes(a: list, b: list) -> bool:
    return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))


def payloads(trace) -> dict:
    """What a trace reports, keyed by the order in which nodes ran."""
    events = trace.events
    order = {}      # node id -> index in execution order
    names = []
    for event in events:
        if event["kind"] == "node_started":
            order[event["node"]] = len(names)
            names.append(event["name"])
    hooked = {order.get(e["node"]) for e in events if e["kind"] == "prehook"}
    started, finished, added, accumulated = {}, {}, [], []
    for event in events:
        kind = event["kind"]
        if kind == "node_started":
            started[order[event["node"]]] = event["grads_in"]
        elif kind == "node_finished":
            finished[order[event["node"]]] = event["grads_out"]
        elif kind == "buffer_added":
            # the target may never run (a partial pass): name it by its producer's edge
            added.append((order[event["producer"]], event["slot"], event["contribution"],
                          event["grad"], event["sum"], event["node"]))
        elif kind == "grad_accumulated":
            accumulated.append((order[event["node"]], event["before"], event["after"]))
    return {"names": names, "started": started, "finished": finished, "added": added,
            "accumulated": accumulated, "hooked": hooked, "order": order}


def check_buffers_are_what_nodes_receive(view: dict, hooked: set) -> None:
    """The last ``sum`` shown for a node's slot is what that node received (``hooked``: the
    nodes whose received gradients torch's recorder sees only after their hooks)."""
    last = {}
    for _, slot, _, _, total, target in view["added"]:
        last[(target, slot)] = total
    for (target, slot), total in last.items():
        index = view["order"].get(target)
        if index is None or index in hooked:
            continue  # never ran (a partial pass)
        received = view["started"][index]
        assert close(received[slot], total), (target, slot, received[slot], total)


def record_both(seed):
    """Build ``seed``'s program in both libraries, optionally run one backward first, then
    record one ``loss.backward()``; returns (gradviz trace, torch trace) or the errors."""
    outcomes = []
    for library in (gradviz, torch):
        program = build(library, seed)
        if program.loss is None:
            outcomes.append("no-grad")
            continue
        try:
            if seed % 2:
                program.loss.backward(retain_graph=True)  # every .grad is then accumulated into
            if library is gradviz:
                with gradviz.record() as trace:
                    program.loss.backward()
            else:
                trace = record_torch(program.loss)
        except Exception as exc:  # both must fail alike
            outcomes.append(("error", type(exc).__name__))
            continue
        outcomes.append(trace)
    return outcomes


@pytest.mark.parametrize("seed", SEEDS)
def test_event_payloads_match_pytorch(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = record_both(seed)
    if not isinstance(ours, gradviz.instrument.Trace) or not isinstance(theirs, gradviz.instrument.Trace):
        assert ours == theirs  # both "no-grad", or the same error
        return
    mine, oracle = payloads(ours), payloads(theirs)
    assert len(mine["accumulated"]) == len(oracle["accumulated"])
    for got, expected in zip(mine["accumulated"], oracle["accumulated"]):
        assert close(got[1], expected[1]), (".grad before", got, expected)
        assert close(got[2], expected[2]), (".grad after", got, expected)
    if "CopySlices" in oracle["names"] and mine["names"] != oracle["names"]:
        # Known graph-shape difference: an in-place write into a view of a non-leaf records
        # the write's own node beside CopySlices (torch's CopySlices holds it), so nodes
        # cannot be matched one to one; the leaves' .grad (above) still must agree.
        assert "CopyBackwards" in mine["names"]
        return
    assert mine["names"] == oracle["names"]
    for index in oracle["finished"]:
        assert closes(mine["finished"][index], oracle["finished"][index]), (
            index, mine["names"][index])
    for index in oracle["started"]:
        if index not in mine["hooked"]:
            assert closes(mine["started"][index], oracle["started"][index]), (
                index, mine["names"][index])
    assert len(mine["added"]) == len(oracle["added"])
    for got, expected in zip(mine["added"], oracle["added"]):
        assert got[:3] == expected[:3]  # producer (by order), slot, contribution number
        assert close(got[3], expected[3]), ("contribution", got, expected)
        assert close(got[4], expected[4]), ("buffer sum", got, expected)
    assert [got[0] for got in mine["accumulated"]] == [
        expected[0] for expected in oracle["accumulated"]]
    check_buffers_are_what_nodes_receive(mine, set())
    check_buffers_are_what_nodes_receive(oracle, mine["hooked"])


def test_the_oracle_covers_fan_in_stale_grads_and_hooks():
    """The seeds above exercise what the payloads must get right (else the test proves
    little): sums of several contributions, accumulation into an existing .grad, hooks."""
    sums = stale = hooks = 0
    for seed in SEEDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours, _ = record_both(seed)
        if not isinstance(ours, gradviz.instrument.Trace):
            continue
        for event in ours.events:
            if event["kind"] == "buffer_added" and event["contribution"] > 1:
                sums += 1
            elif event["kind"] == "grad_accumulated" and event["before"] is not None:
                stale += 1
            elif event["kind"] in ("prehook", "posthook"):
                hooks += 1
    assert sums >= 50 and stale >= 50 and hooks >= 50, (sums, stale, hooks)
