"""Custom Function benchmark: a chain of N ``Square`` Functions on ``(16,)`` tensors.

Measures ``Square.apply`` (µs per apply) and the backward of its nodes (µs per node) in
gradviz and PyTorch, in the same process, one thread each, and prints the ratios. Timing
conventions are those of ``chain.py`` (median of repeats, GC off inside the timed region).

    python bench/function.py [--n 1000] [--repeats 15] [--json out.json]
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import torch  # noqa: E402
from _common import interleaved, timed_region  # noqa: E402

import gradviz  # noqa: E402


def make_square(module):
    class Square(module.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 2 * x

    return Square


def run_once(module, square, n, gc_on=True):
    x = module.full((16,), 1.0, requires_grad=True)
    with timed_region(gc_on):  # on as users run, or off as timeit has it (Note [GC on])
        start = time.perf_counter()
        y = x
        for _ in range(n):
            y = square.apply(y)
        built = time.perf_counter()
        y.sum().backward()
        done = time.perf_counter()
    return (built - start) / n * 1e6, (done - built) / (n + 2) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    frameworks = (("gradviz", gradviz), ("torch", torch))
    squares = {name: make_square(module) for name, module in frameworks}
    specs = tuple((name + suffix, (name, module, gc_on))
                  for suffix, gc_on in (("", True), (" GC off", False))
                  for name, module in frameworks)
    runs = interleaved(specs, args.repeats,
                       lambda _, spec: run_once(spec[1], squares[spec[0]], args.n, spec[2]),
                       lambda _, spec: run_once(spec[1], squares[spec[0]], 50, spec[2]))
    results = {name: {"apply_us": statistics.median(r[0] for r in runs[name]),
                      "backward_us_per_node": statistics.median(r[1] for r in runs[name])}
               for name, _ in specs}
    print(f"custom Function chain: {args.n} x Square.apply on (16,), gradviz "
          f"{gradviz.config()['engine']} engine, torch {torch.__version__}, one thread, "
          f"load average {os.getloadavg()[0]:.2f}")
    for suffix in ("", " GC off"):
        g, t = results["gradviz" + suffix], results["torch" + suffix]
        print(f"  GC {'off' if suffix else 'on '} apply     {g['apply_us']:8.2f} µs   torch "
              f"{t['apply_us']:8.2f} µs   ratio {g['apply_us'] / t['apply_us']:.2f}")
        print(f"  GC {'off' if suffix else 'on '} backward  {g['backward_us_per_node']:8.2f} "
              f"µs/node torch {t['backward_us_per_node']:8.2f} µs/node ratio "
              f"{g['backward_us_per_node'] / t['backward_us_per_node']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
