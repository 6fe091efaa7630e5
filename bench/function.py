"""Custom Function benchmark: a chain of N ``Square`` Functions on ``(16,)`` tensors.

Measures ``Square.apply`` (µs per apply) and the backward of its nodes (µs per node) in
gradviz and PyTorch, in the same process, one thread each, and prints the ratios. Timing
conventions are those of ``chain.py`` (median of repeats, GC off inside the timed region).

    python bench/function.py [--n 1000] [--repeats 15] [--json out.json]
"""

from __future__ import annotations

import _common  # noqa: F401  (first: pins every math library to one thread)

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import gradviz  # noqa: E402
from _common import interleaved  # noqa: E402



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


def run_once(module, square, n):
    x = module.full((16,), 1.0, requires_grad=True)
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        y = x
        for _ in range(n):
            y = square.apply(y)
        built = time.perf_counter()
        y.sum().backward()
        done = time.perf_counter()
    finally:
        gc.enable()
    return (built - start) / n * 1e6, (done - built) / (n + 2) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    frameworks = (("gradviz", gradviz), ("torch", torch))
    squares = {name: make_square(module) for name, module in frameworks}
    runs = interleaved(frameworks, args.repeats,
                       lambda name, module: run_once(module, squares[name], args.n),
                       lambda name, module: run_once(module, squares[name], 50))
    results = {name: {"apply_us": statistics.median(r[0] for r in runs[name]),
                      "backward_us_per_node": statistics.median(r[1] for r in runs[name])}
               for name, _ in frameworks}
    g, t = results["gradviz"], results["torch"]
    print(f"custom Function chain: {args.n} x Square.apply on (16,), gradviz "
          f"{gradviz.config()['engine']} engine, torch {torch.__version__}, one thread")
    print(f"  apply     {g['apply_us']:8.2f} µs   torch {t['apply_us']:8.2f} µs   "
          f"ratio {g['apply_us'] / t['apply_us']:.2f}")
    print(f"  backward  {g['backward_us_per_node']:8.2f} µs/node torch "
          f"{t['backward_us_per_node']:8.2f} µs/node ratio "
          f"{g['backward_us_per_node'] / t['backward_us_per_node']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
