"""Instructions per op and per node of the chain benchmark, counted by valgrind's callgrind.

Timings on a shared 2-core machine move with the load; instruction counts do not. This runs
``chain.py``'s workload (``y = y * 1.0001 + 0.0001``, shape ``(1,)``) under callgrind and
counts only the forward loop (inside ``functools.reduce``) and only the backward pass (inside
``GraphTask.run``), collector on, BLAS on one thread. Compare two builds by running it in
each checkout. Needs ``valgrind`` (Debian: ``apt-get install valgrind``); gradviz only, as
callgrind runs every instruction about 50 times slower.

    python bench/instructions.py              # N = 5,000 forward, 1,000 backward
    python bench/instructions.py --forward 2000 --backward 500
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

RUNS = 3  # chains per count, after one warm-up chain
FORWARD_ENTRY = "functools_reduce"
BACKWARD_ENTRY = "__pyx_pw_11gradviz_ext_5_task_9GraphTask_27run"  # GraphTask.run, compiled


def workload(phase: str, n: int) -> None:
    """What runs under callgrind: warm-up, then RUNS chains of ``n`` iterations."""
    import functools

    import gradviz

    x = gradviz.ones((1,), requires_grad=True)

    def step(y, _):
        return y * 1.0001 + 0.0001

    warm = x
    for _ in range(200):  # a plain loop: only functools.reduce is counted
        warm = step(warm, None)
    warm.backward(gradviz.ones((1,)))
    if phase == "forward":
        kept = [functools.reduce(step, range(n), x) for _ in range(RUNS)]
        del kept
        return
    for _ in range(RUNS):
        functools.reduce(step, range(n), x).backward(gradviz.ones((1,)))


def count(phase: str, n: int) -> int:
    """Instructions callgrind counted inside the phase's entry function."""
    entry = FORWARD_ENTRY if phase == "forward" else BACKWARD_ENTRY
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--toggle-collect={entry}",
             f"--callgrind-out-file={out}", sys.executable, __file__, "--run", phase, str(n)],
            env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{result.stderr[-2000:]}")
    return int(found.group(1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--forward", type=int, default=5_000, help="iterations of the forward chain")
    parser.add_argument("--backward", type=int, default=1_000, help="iterations of the backward chain")
    parser.add_argument("--run", nargs=2, metavar=("PHASE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        workload(args.run[0], int(args.run[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    ops = RUNS * 2 * args.forward
    nodes = RUNS * (2 * args.backward + 1)
    forward = count("forward", args.forward)
    backward = count("backward", args.backward)
    print(f"forward:  {forward / ops:8.0f} instructions per op   ({forward:,} over {ops:,} ops)")
    print(f"backward: {backward / nodes:8.0f} instructions per node ({backward:,} over {nodes:,} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
