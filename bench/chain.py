"""Chain benchmark: ``y = y * 1.0001 + 0.0001`` repeated N times, then backward.

Measures the per-op cost of recording the graph (forward) and the per-node cost of the
engine (backward) for gradviz and PyTorch in the same process, one thread each, and prints
their ratio. The workload is tiny tensors on purpose: it measures framework overhead, not
arithmetic. See bench/README.md.

    python bench/chain.py                 # table
    python bench/chain.py --json out.json # table, and the results as JSON
    GRADVIZ_PURE_PYTHON=1 python bench/chain.py   # the interpreted engine
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

SIZES = (1_000, 10_000)
SHAPES = ((1,), (16,))
FRAMEWORKS = (("gradviz", gradviz), ("torch", torch))
GC_FRAMEWORKS = tuple((name + suffix, (module, gc_on)) for suffix, gc_on in (("", True), (" GC off", False))
                      for name, module in FRAMEWORKS)


def run_once(module, n, shape, gc_on=True):
    """Build the chain and run backward once; return (forward seconds, backward seconds).
    The collector is on, as users run, or off as ``timeit`` has it (Note [GC on])."""
    x = module.ones(shape, requires_grad=True)
    upstream = module.ones(shape)
    with timed_region(gc_on):
        start = time.perf_counter()
        y = x
        for _ in range(n):
            y = y * 1.0001 + 0.0001
        built = time.perf_counter()
        y.backward(upstream)
        done = time.perf_counter()
    expected = 1.0001 ** n
    got = float(x.grad.numpy().ravel()[0])
    if not np.isclose(got, expected, rtol=1e-3):
        raise AssertionError(f"{module.__name__}: d y / d x = {got}, expected {expected}")
    del y
    return built - start, done - built


def measure(n, shape, repeats):
    """GC-on figures under the frameworks' names (the headline), GC-off ones under
    ``row["gc_off"]``; all four runs alternate within every repeat."""
    row = {"n": n, "shape": list(shape), "ops": 2 * n, "nodes": 2 * n + 1, "repeats": repeats}
    runs = interleaved(GC_FRAMEWORKS, repeats,
                       lambda _, spec: run_once(spec[0], n, shape, spec[1]),
                       # warm-up: imports, caches, allocator
                       lambda _, spec: run_once(spec[0], min(n, 200), shape, spec[1]))
    row["gc_off"] = {}
    for name, (_, gc_on) in GC_FRAMEWORKS:
        forward, backward = (list(times) for times in zip(*runs[name]))
        target = row if gc_on else row["gc_off"]
        target[name.split()[0]] = {
            "forward_us_per_op": statistics.median(forward) / row["ops"] * 1e6,
            "backward_us_per_node": statistics.median(backward) / row["nodes"] * 1e6,
            "forward_s": forward,
            "backward_s": backward,
        }
    for phase in ("forward_us_per_op", "backward_us_per_node"):
        for target in (row, row["gc_off"]):
            target[f"ratio_{phase}"] = target["gradviz"][phase] / target["torch"][phase]
    return row




def print_table(rows, env):
    print(f"chain benchmark: y = y * 1.0001 + 0.0001; gradviz {env['gradviz']} "
          f"({env['gradviz_engine']} engine), torch {env['torch']}, one thread, median of repeats, "
          f"GC on (last columns: the ratios with GC off); load average {env['load_average'][0]:.2f}")
    header = (f"{'N':>7} {'shape':>6} | {'fwd µs/op':>10} {'torch':>8} {'ratio':>6} | "
              f"{'bwd µs/node':>11} {'torch':>8} {'ratio':>6} | {'GC off: fwd':>11} {'bwd':>5}")
    print(header)
    print("-" * len(header))
    for r in rows:
        g, t = r["gradviz"], r["torch"]
        print(f"{r['n']:>7} {str(tuple(r['shape'])):>6} | "
              f"{g['forward_us_per_op']:>10.2f} {t['forward_us_per_op']:>8.2f} "
              f"{r['ratio_forward_us_per_op']:>6.2f} | "
              f"{g['backward_us_per_node']:>11.2f} {t['backward_us_per_node']:>8.2f} "
              f"{r['ratio_backward_us_per_node']:>6.2f} | "
              f"{r['gc_off']['ratio_forward_us_per_op']:>11.2f} "
              f"{r['gc_off']['ratio_backward_us_per_node']:>5.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed runs per case (default: 9 for N=1,000, 5 for N=10,000)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    args = parser.parse_args(argv)

    env = environment()
    rows = []
    for n in args.sizes:
        repeats = args.repeats or (9 if n <= 1_000 else 5)
        for shape in SHAPES:
            rows.append(measure(n, shape, repeats))
    print_table(rows, env)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": rows}, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
