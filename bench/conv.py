"""Convolution and pooling layers, forward + backward: gradviz and PyTorch in one process, one
thread, GC on, alternating within every repeat (the layers of ``models.py``'s LeNet and small
CNN, a strided and a 1-D and 3-D convolution, pooling, unfold/fold).

Each step is ``layer(x).sum().backward()`` with every input requiring grad; µs per step.

    python bench/conv.py [--repeats 15] [--json out.json]
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import environment, interleaved, timed_region  # noqa: E402

import gradviz  # noqa: E402

rng = np.random.default_rng(0)


def _array(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def conv_step(function, x_shape, w_shape, input_grad=True, **arguments):
    transposed = function.startswith("conv_transpose")
    out_channels = w_shape[1] * arguments.get("groups", 1) if transposed else w_shape[0]
    x, weight, bias = _array(*x_shape), _array(*w_shape), _array(out_channels)

    def make(module):
        xt = module.tensor(x, requires_grad=input_grad)
        wt = module.tensor(weight, requires_grad=True)
        bt = module.tensor(bias, requires_grad=True)
        call = getattr(module.nn.functional, function)
        return lambda: call(xt, wt, bt, **arguments).sum().backward()
    return make


def layer_step(function, x_shape, *args, **arguments):
    x = _array(*x_shape)

    def make(module):
        xt = module.tensor(x, requires_grad=True)
        call = getattr(module.nn.functional, function)
        return lambda: call(xt, *args, **arguments).sum().backward()
    return make


CASES = {
    "conv2d LeNet 1: (64,1,28,28)*(6,1,5,5) p2": conv_step(
        "conv2d", (64, 1, 28, 28), (6, 1, 5, 5), input_grad=False, padding=2),
    "conv2d LeNet 2: (64,6,14,14)*(16,6,5,5)": conv_step("conv2d", (64, 6, 14, 14), (16, 6, 5, 5)),
    "conv2d CNN 1: (32,3,32,32)*(16,3,3,3) p1": conv_step(
        "conv2d", (32, 3, 32, 32), (16, 3, 3, 3), input_grad=False, padding=1),
    "conv2d CNN 2: (32,16,16,16)*(32,16,3,3) p1": conv_step(
        "conv2d", (32, 16, 16, 16), (32, 16, 3, 3), padding=1),
    "conv2d stride 2: (32,16,16,16)*(32,16,3,3)": conv_step(
        "conv2d", (32, 16, 16, 16), (32, 16, 3, 3), stride=2, padding=1),
    "conv2d depthwise: (32,16,16,16)*(16,1,3,3)": conv_step(
        "conv2d", (32, 16, 16, 16), (16, 1, 3, 3), padding=1, groups=16),
    "conv1d: (32,16,128)*(32,16,5) p2": conv_step("conv1d", (32, 16, 128), (32, 16, 5), padding=2),
    "conv3d: (8,4,12,12,12)*(8,4,3,3,3) p1": conv_step(
        "conv3d", (8, 4, 12, 12, 12), (8, 4, 3, 3, 3), padding=1),
    "conv_transpose2d: (32,16,8,8)*(16,8,4,4) s2": conv_step(
        "conv_transpose2d", (32, 16, 8, 8), (16, 8, 4, 4), stride=2, padding=1),
    "max_pool2d 2: (64,6,28,28)": layer_step("max_pool2d", (64, 6, 28, 28), 2),
    "max_pool2d 3 s2 p1: (32,16,32,32)": layer_step("max_pool2d", (32, 16, 32, 32), 3, 2, 1),
    "avg_pool2d 2: (64,6,28,28)": layer_step("avg_pool2d", (64, 6, 28, 28), 2),
    "unfold 3 p1: (32,16,16,16)": layer_step("unfold", (32, 16, 16, 16), 3, padding=1),
}


def measure(make, repeats, inner=3):
    frameworks = (("gradviz", gradviz), ("torch", torch))
    steps = {name: make(module) for name, module in frameworks}

    def run(name, _module):
        with timed_region(True):  # GC on, as users run (Note [GC on] in _common.py)
            start = time.perf_counter()
            for _ in range(inner):
                steps[name]()
            return (time.perf_counter() - start) / inner * 1e6

    return interleaved(frameworks, repeats, run, lambda name, module: steps[name]())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--cases", nargs="+", help="only cases whose label starts with one of these")
    parser.add_argument("--json")
    args = parser.parse_args()
    results = {}
    print(f"load average {environment()['load_average'][0]:.2f}")
    print(f"{'case':46} {'gradviz µs':>11} {'torch µs':>9} {'ratio':>6}   (GC on, one thread)")
    for label, make in CASES.items():
        if args.cases and not any(label.startswith(prefix) for prefix in args.cases):
            continue
        runs = measure(make, args.repeats)
        ours, theirs = statistics.median(runs["gradviz"]), statistics.median(runs["torch"])
        results[label] = {"runs": runs, "ratio": ours / theirs}
        print(f"{label:46} {ours:11.1f} {theirs:9.1f} {ours / theirs:6.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"environment": environment(), "cases": results}, handle, indent=1)


if __name__ == "__main__":
    main()
