"""The steppable graph task: ``step()`` one node at a time gives what ``run()`` gives, in
torch's order; and deep graphs build, run backward and are freed without recursion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import torch
from torch_compare import assert_tensors_equal, node_name

import gradviz
from gradviz.autograd._functional import make_graph_task


def program(m, x, w):
    h = (x * w).tanh()
    return (h * h + (w * 2.0).exp() * h + x.sin()).sum()


ARRAYS = (np.array([0.3, -0.7, 1.1]), np.array([1.2, 0.4, -0.5]))


def torch_order_and_grads():
    x, w = (torch.tensor(a, requires_grad=True) for a in ARRAYS)
    y = program(torch, x, w)
    order, stack, seen = [], [y.grad_fn], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda go, n=node: order.append(n))
        stack.extend(n for n, _ in node.next_functions if n is not None)
    y.backward()
    return order, x.grad, w.grad


def gradviz_leaves():
    return [gradviz.tensor(a, requires_grad=True) for a in ARRAYS]


def same_shape_names(gv_nodes, th_nodes):
    return [node_name(n) for n in gv_nodes] == [node_name(n) for n in th_nodes]


def test_step_runs_one_node_at_a_time_like_run():
    th_order, th_x, th_w = torch_order_and_grads()

    x, w = gradviz_leaves()
    task = make_graph_task(program(gradviz, x, w))
    stepped = []
    while True:
        upcoming = task.peek()
        node = task.step()
        if node is None:
            break
        assert node is upcoming, "peek() must name the node that step() runs"
        stepped.append(node)
        assert task.state_name in ("paused", "finished")
    assert task.state_name == "finished"
    assert task.step() is None and task.done

    x2, w2 = gradviz_leaves()
    make_graph_task(program(gradviz, x2, w2)).run()

    assert len(stepped) == len(th_order)
    assert same_shape_names(stepped, th_order)
    assert_tensors_equal(x.grad, th_x)
    assert_tensors_equal(w.grad, th_w)
    assert_tensors_equal(x2.grad, th_x)
    assert_tensors_equal(w2.grad, th_w)


def test_grads_appear_only_when_accumulate_grad_runs():
    x, w = gradviz_leaves()
    task = make_graph_task(program(gradviz, x, w))
    seen_x_grad_before = []
    while task.peek() is not None:
        node = task.peek()
        if node_name(node) == "AccumulateGrad" and node.variable is x:
            seen_x_grad_before.append(x.grad)
        task.step()
    assert seen_x_grad_before == [None]
    _, th_x, _ = torch_order_and_grads()
    assert_tensors_equal(x.grad, th_x)


def test_abort_midway_then_a_new_backward_works():
    x, w = gradviz_leaves()
    y = program(gradviz, x, w)
    task = make_graph_task(y, retain_graph=True)
    task.step()
    task.step()
    task.abort()
    assert task.state_name == "aborted" and task.step() is None and task.peek() is None
    assert gradviz.is_grad_enabled()
    x.grad = w.grad = None
    y.backward()
    _, th_x, th_w = torch_order_and_grads()
    assert_tensors_equal(x.grad, th_x)
    assert_tensors_equal(w.grad, th_w)


def test_grad_mode_is_restored_between_steps_of_a_create_graph_task():
    x, w = gradviz_leaves()
    task = make_graph_task(program(gradviz, x, w), create_graph=True)
    with gradviz.no_grad():
        task.step()
        assert not gradviz.is_grad_enabled()
    task.step()
    assert gradviz.is_grad_enabled()
    task.run()
    assert x.grad.requires_grad  # built under create_graph, as torch does


def test_ready_nodes_are_in_run_order():
    x, w = gradviz_leaves()
    task = make_graph_task(program(gradviz, x, w))
    while not task.done:
        ready = task.ready_nodes()
        if ready:
            assert ready[0] is task.peek()
        task.step()


# ---- deep graphs ---------------------------------------------------------------------------

DEEP_CHAIN = textwrap.dedent("""
    import gc, json, sys, weakref
    import numpy as np
    import gradviz
    import torch

    n = int(sys.argv[1])
    results = {"engine": gradviz.config()["engine"]}
    for name, m in (("gradviz", gradviz), ("torch", torch)):
        x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
        y = x
        for _ in range(n):
            y = y * 1.0001 + 0.0001
        node = weakref.ref(y.grad_fn) if name == "gradviz" else None
        y.sum().backward()
        results[name] = {"value": y.detach().numpy().tolist(), "grad": x.grad.numpy().tolist()}
        if name == "gradviz":
            del y
            results["freed_without_gc"] = node() is None
        # a second deep graph, dropped without running backward
        z = x
        for _ in range(n):
            z = z * 1.0001 + 0.0001
        node = weakref.ref(z.grad_fn) if name == "gradviz" else None
        del z
        if name == "gradviz":
            results["unexecuted_freed_without_gc"] = node() is None
    print(json.dumps(results))
""")


def test_deep_chain_of_100k_nodes_in_a_subprocess():
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", DEEP_CHAIN, "50000"], capture_output=True,
                            text=True, env=env, timeout=900)
    assert result.returncode == 0, f"crashed (rc {result.returncode}):\n{result.stderr[-3000:]}"
    data = json.loads(result.stdout.strip().splitlines()[-1])
    # 50,000 iterations of (mul, add): 100,000 nodes plus the leaf
    np.testing.assert_allclose(data["gradviz"]["value"], data["torch"]["value"], rtol=1e-9)
    np.testing.assert_allclose(data["gradviz"]["grad"], data["torch"]["grad"], rtol=1e-9)
    assert data["freed_without_gc"], "the graph stayed alive after the last reference was dropped"
    assert data["unexecuted_freed_without_gc"]
    assert data["engine"] == gradviz.config()["engine"]


def test_the_running_graph_task_is_per_thread():
    # Like grad mode: a backward running in one thread is not another thread's current task
    # (torch keeps the current graph task thread-local too).
    import threading

    from gradviz_ext import engine

    seen = {}
    inside, release = threading.Event(), threading.Event()

    class Probe(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            seen["worker"] = engine.current_graph_task() is not None
            inside.set()
            release.wait(10)
            return grad * 2

    def worker():
        x = gradviz.ones(2, requires_grad=True)
        Probe.apply(x).sum().backward()

    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(10)
    seen["main"] = engine.current_graph_task()
    release.set()
    thread.join(10)
    assert seen == {"worker": True, "main": None}
