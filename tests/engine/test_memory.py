"""Graph lifetime: freed by reference counting alone, no cycles, flat memory, GC-friendly."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import gradviz as gv
import gradviz_ext


def _step(w, x):
    loss = ((x @ w).tanh() * 2 + 1).sum()
    loss.backward()
    with gv.no_grad():
        w -= 0.01 * w.grad
    w.grad = None


def test_dropped_graph_is_freed_without_the_cycle_collector():
    x = gv.ones(4, requires_grad=True)
    y = (x * 2).exp().sum()
    refs = [weakref.ref(y.grad_fn), weakref.ref(y.grad_fn.next_functions[0][0])]
    gc.disable()
    try:
        del y
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_a_cycle_through_a_hook_is_still_collected():
    x = gv.ones(3, requires_grad=True)
    y = x * 2
    ref = weakref.ref(y.grad_fn)
    y.register_hook(lambda g, y=y: g)  # closure -> y -> grad_fn -> hook -> closure
    del y
    gc.collect()
    assert ref() is None


def test_a_cycle_from_an_upstream_hook_to_a_downstream_tensor_is_collected():
    # every node stays visible to the collector: a hook on an early node that references a
    # later tensor closes a cycle through nodes that have no hooks themselves
    x = gv.ones(3, requires_grad=True)
    h = x * 2
    y = (h * 3).exp()
    refs = [weakref.ref(y.grad_fn), weakref.ref(h.grad_fn)]
    h.grad_fn.register_hook(lambda grad_inputs, grad_outputs, y=y: None)
    del h, y
    gc.collect()
    assert all(r() is None for r in refs)


def test_input_metadata_is_not_tracked_by_the_cycle_collector():
    x = gv.ones(3, requires_grad=True)
    meta = (x * 2).grad_fn.input_metadata(0)
    assert gc.is_tracked(meta) is (not gradviz_ext.COMPILED)


def test_training_loop_memory_stays_flat():
    w = gv.randn(8, 8, requires_grad=True)
    x = gv.randn(4, 8)
    for _ in range(200):  # warm up caches and free lists
        _step(w, x)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            _step(w, x)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 256 * 1024, f"grew by {after - before} bytes over 2,000 steps"


def test_training_loop_leaves_no_reference_cycles():
    w = gv.randn(8, 8, requires_grad=True)
    x = gv.randn(4, 8)
    gc.collect()
    gc.disable()
    try:
        for _ in range(100):
            _step(w, x)
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert unreachable == 0, f"{unreachable} objects were only reclaimable by the cycle collector"


def _collections_during(run):
    counts = {}

    def callback(phase, info):
        if phase == "start":
            counts[info["generation"]] = counts.get(info["generation"], 0) + 1

    gc.collect()
    gc.callbacks.append(callback)
    try:
        run()
    finally:
        gc.callbacks.remove(callback)
    return counts


def test_backward_never_triggers_the_cycle_collector():
    # Issue 3, item 7: in a process that imported torch (this one has: the tests compare
    # with it), a collection during backward would scan torch's many objects. Backward
    # frees as many tracked objects as it allocates, so the collector never starts.
    import torch  # noqa: F401  (the point is a process where torch is loaded)

    x = gv.ones(16, requires_grad=True)
    chain = x
    for _ in range(20_000):
        chain = chain * 1.0001 + 0.0001
    assert _collections_during(lambda: chain.backward(gv.ones(16))) == {}

    fan_in = x * 0.0
    for i in range(5_000):
        fan_in = fan_in + x * float(i)
    assert _collections_during(lambda: fan_in.sum().backward()) == {}
