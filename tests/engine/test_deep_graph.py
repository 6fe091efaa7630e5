"""Deep graphs: a chain of 10^6 nodes builds, runs backward and is freed without recursion
(no RecursionError, no C stack overflow), and the graph walks of the debugger are iterative.

Runs in a subprocess, so a stack overflow shows up as a failed test instead of a crashed run.
About 10 s compiled and 30 s interpreted; it is the one slow test of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import gc, sys, weakref
    import gradviz

    sys.setrecursionlimit(1000)  # the default: nothing below may recurse per node

    # 1. 10^6 ops: build, backward, free
    x = gradviz.tensor([1.0], dtype=gradviz.float64, requires_grad=True)
    y = x
    for _ in range(500_000):
        y = y * 1.0001 + 0.0001
    y.sum().backward()
    expected = 1.0001 ** 500_000
    assert abs(x.grad.item() / expected - 1) < 1e-6, x.grad.item()
    ref = weakref.ref(y.grad_fn)
    del y
    assert ref() is None, "the chain was not freed by reference counting"

    # 2. dropped without running backward (saved tensors still held)
    y = x
    for _ in range(500_000):
        y = y * 1.0001 + 0.0001
    ref = weakref.ref(y.grad_fn)
    del y
    gc.collect()
    assert ref() is None

    # 3. the debugger's graph walks (session, doctor) on a chain far deeper than the
    #    recursion limit
    y = x
    for _ in range(50_000):
        y = y * 1.0001
    session = gradviz.debug.backward(y.sum())
    session.abort()
    assert gradviz.debug.doctor(y.sum()).ok
    print("ok")
""")


@pytest.mark.slow
def test_a_chain_of_a_million_nodes():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ))
    assert result.returncode == 0, (
        f"exit code {result.returncode}\nstdout:\n{result.stdout[-2000:]}\n"
        f"stderr:\n{result.stderr[-4000:]}")
    assert result.stdout.strip().endswith("ok")
