"""Wide fan-in benchmark: N ops from one leaf, summed, then backward.

Every op reads the same leaf ``x``, so the leaf's ``AccumulateGrad`` receives N gradients
and the engine adds them up in its input buffer before ``.grad`` is written once. Two forms,
each recording the same graph in gradviz and PyTorch:

* ``sum``:   ``loss = y_0 + y_1 + ... + y_{N-1}`` (an ``AddBackward0`` chain, as Python's
  ``sum(ys)`` builds it), then ``loss.backward(ones)``;
* ``roots``: ``autograd.backward(ys, [ones] * N)``: the N products are the roots, so the
  engine itself does all the summing (no add nodes): the purest fan-in;
* ``stack``: ``stack(ys).sum().backward()`` (one ``StackBackward0`` hands out N pieces);
* ``cat``:   ``cat(ys).sum().backward()`` (one ``CatBackward0``), as issue 17 measured them.

with ``y_i = x * c_i`` on ``(16,)`` float32 tensors and ``c_i = (1 + i % 16) / 16``, so every
partial sum is exact in float32 and ``x.grad`` can be checked exactly. Timing conventions are
those of ``chain.py`` (one thread, warm-up, median of repeats, GC off inside the timed
region). See bench/README.md.

    python bench/fanin.py                 # table
    python bench/fanin.py --json out.json # table, and the results as JSON
    GRADVIZ_PURE_PYTHON=1 python bench/fanin.py   # the interpreted engine
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import environment, interleaved, timed_region  # noqa: E402

import gradviz  # noqa: E402

N = 10_000
SHAPE = (16,)
FORMS = ("sum", "roots", "stack", "cat")
FRAMEWORKS = (("gradviz", gradviz), ("torch", torch))
GC_FRAMEWORKS = tuple((name + suffix, (module, gc_on)) for suffix, gc_on in (("", True), (" GC off", False))
                      for name, module in FRAMEWORKS)
# wall time by default; ``--clock cpu`` for a busy machine (Note [Wall or CPU time] in mlp.py)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def coefficient(i):
    """``c_i``: multiples of 1/16, so every partial sum of up to ~10^6 terms is exact in float32."""
    return (1 + i % 16) / 16


def expected_grad(n):
    return sum(coefficient(i) for i in range(n))


def recorded_ops(form, n):
    """Forward ops recorded: N products, plus N - 1 additions for ``sum``, plus the join and
    the sum for ``stack`` and ``cat``."""
    return 2 * n - 1 if form == "sum" else n + 2 if form in ("stack", "cat") else n


def run_once(module, form, n, gc_on=True):
    """Build the fan-in and run backward once; return (forward seconds, backward seconds).
    The collector is on, as users run, or off as ``timeit`` has it (Note [GC on])."""
    x = module.ones(SHAPE, requires_grad=True)
    upstream = module.ones(SHAPE)
    with timed_region(gc_on):
        start = clock()
        ys = [x * coefficient(i) for i in range(n)]
        if form == "sum":
            loss = ys[0]
            for y in ys[1:]:
                loss = loss + y
            built = clock()
            loss.backward(upstream)
        elif form in ("stack", "cat"):
            loss = getattr(module, form)(ys).sum()
            built = clock()
            loss.backward()
        else:
            loss = None
            built = clock()
            module.autograd.backward(ys, [upstream] * n)
        done = clock()
    expected = expected_grad(n)
    got = x.grad.numpy()
    if got.shape != SHAPE or not np.all(got == np.float32(expected)):
        raise AssertionError(f"{module.__name__} ({form}): x.grad = {got}, expected {expected} "
                             "in every entry")
    del ys, loss  # freeing the graph is outside the timed region
    return built - start, done - built


def measure(form, n, repeats):
    ops = recorded_ops(form, n)
    row = {"form": form, "n": n, "shape": list(SHAPE), "ops": ops, "contributions": n,
           "repeats": repeats}
    runs = interleaved(GC_FRAMEWORKS, repeats,
                       lambda _, spec: run_once(spec[0], form, n, spec[1]),
                       # warm-up: imports, caches, allocator
                       lambda _, spec: run_once(spec[0], form, min(n, 200), spec[1]))
    row["gc_off"] = {}
    for name, (_, gc_on) in GC_FRAMEWORKS:
        forward, backward = (list(times) for times in zip(*runs[name]))
        (row if gc_on else row["gc_off"])[name.split()[0]] = {
            "forward_us_per_op": statistics.median(forward) / ops * 1e6,
            "backward_us_per_op": statistics.median(backward) / ops * 1e6,
            "backward_ms": statistics.median(backward) * 1e3,
            "forward_s": forward,
            "backward_s": backward,
        }
    for phase in ("forward_us_per_op", "backward_us_per_op"):
        for target in (row, row["gc_off"]):
            target[f"ratio_{phase}"] = target["gradviz"][phase] / target["torch"][phase]
    return row




def print_table(rows, env):
    print(f"fan-in benchmark: y_i = x * c_i for i < N, summed, backward; gradviz {env['gradviz']} "
          f"({env['gradviz_engine']} engine), torch {env['torch']}, one thread, {env['clock']} "
          f"time, median of repeats, GC on (last columns: the ratios with GC off); load average "
          f"{env['load_average'][0]:.2f}")
    header = (f"{'form':>5} {'N':>7} {'ops':>6} | {'fwd µs/op':>10} {'torch':>8} {'ratio':>6} | "
              f"{'bwd µs/op':>10} {'torch':>8} {'ratio':>6} | {'bwd ms':>7} {'torch':>7} | "
              f"{'GC off: fwd':>11} {'bwd':>5}")
    print(header)
    print("-" * len(header))
    for r in rows:
        g, t = r["gradviz"], r["torch"]
        print(f"{r['form']:>5} {r['n']:>7} {r['ops']:>6} | "
              f"{g['forward_us_per_op']:>10.2f} {t['forward_us_per_op']:>8.2f} "
              f"{r['ratio_forward_us_per_op']:>6.2f} | "
              f"{g['backward_us_per_op']:>10.2f} {t['backward_us_per_op']:>8.2f} "
              f"{r['ratio_backward_us_per_op']:>6.2f} | "
              f"{g['backward_ms']:>7.1f} {t['backward_ms']:>7.1f} | "
              f"{r['gc_off']['ratio_forward_us_per_op']:>11.2f} "
              f"{r['gc_off']['ratio_backward_us_per_op']:>5.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (default 7)")
    parser.add_argument("--n", type=int, default=N, help=f"ops reading the leaf (default {N:,})")
    parser.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time (default) or the process's CPU time, for a busy machine")
    args = parser.parse_args(argv)

    global clock
    clock = CLOCKS[args.clock]
    env = environment()
    env["clock"] = args.clock
    rows = [measure(form, args.n, args.repeats) for form in args.forms]
    print_table(rows, env)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": rows}, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
